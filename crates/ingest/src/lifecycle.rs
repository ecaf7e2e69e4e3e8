//! A repository's life as the organisation page sees it: the `repository` deliveries that
//! change which names exist (`renamed`, `transferred`, `deleted`, `created`), read into the
//! names that are gone and the names that (again) exist; and `installation_repositories.added`,
//! a name the App sees (again). `installation_repositories.removed` forgets nothing: the
//! repository still exists, and `chronicle status` lists it as one the App "does not see".
//!
//! Shapes: @octokit/webhooks-types 7.6 (`RepositoryRenamedEvent`: the old name in
//! `changes.repository.name.from`, `repository` already the new one;
//! `RepositoryTransferredEvent`: the old owner in `changes.owner.from.user` or
//! `.organization`; `InstallationRepositoriesAddedEvent`: `repositories_added[].full_name`).

use serde::Deserialize;
use time::OffsetDateTime;

use crate::payload::{parse, PayloadError};
use chronicle_domain::{InvalidRepoName, RepoName};

/// What a lifecycle delivery means to the organisation rows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lifecycle {
    /// Names that no longer exist under their owner (or that the App no longer sees), each
    /// with why: their rows leave the organisation page.
    pub gone: Vec<(RepoName, String)>,
    /// Names that exist (again): a row earlier forgotten under this name may come back.
    pub live: Vec<RepoName>,
    /// When the event happened, from the payload (`repository.updated_at`, which a rename or
    /// transfer moves on): the same for every redelivery of it, so events of one name are
    /// applied in the order they happened, not in the order they arrived. `None`
    /// (`installation_repositories` carries no such time): only lifts a tombstone, and never
    /// holds a later event back.
    pub at: Option<OffsetDateTime>,
}

/// The `repository` actions read here (and worth a redelivery when one failed).
pub const REPOSITORY_ACTIONS: &[&str] = &["renamed", "transferred", "deleted", "created"];
/// The `installation_repositories` actions read here.
pub const INSTALLATION_REPOSITORIES_ACTIONS: &[&str] = &["added"];

/// A lifecycle delivery, or why it is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Classified {
    Lifecycle(Lifecycle),
    Ignored(String),
}

#[derive(Deserialize)]
struct RepositoryEvent {
    action: String,
    repository: Repository,
    #[serde(default)]
    changes: Option<Changes>,
}

#[derive(Deserialize)]
struct Repository {
    full_name: String,
    /// RFC 3339 in `repository` events; epoch seconds in some older payloads.
    #[serde(default)]
    updated_at: Option<serde_json::Value>,
}

/// `repository.updated_at` as a time, in either of the shapes GitHub sends.
fn updated_at(value: Option<&serde_json::Value>) -> Option<OffsetDateTime> {
    match value? {
        serde_json::Value::String(s) => {
            OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
        }
        serde_json::Value::Number(n) => OffsetDateTime::from_unix_timestamp(n.as_i64()?).ok(),
        _ => None,
    }
}

#[derive(Deserialize, Default)]
struct Changes {
    #[serde(default)]
    repository: Option<NameChange>,
    #[serde(default)]
    owner: Option<OwnerChange>,
}

#[derive(Deserialize)]
struct NameChange {
    name: From<String>,
}

#[derive(Deserialize)]
struct OwnerChange {
    from: OldOwner,
}

#[derive(Deserialize)]
struct From<T> {
    from: T,
}

#[derive(Deserialize)]
struct OldOwner {
    #[serde(default)]
    user: Option<Account>,
    #[serde(default)]
    organization: Option<Account>,
}

#[derive(Deserialize)]
struct Account {
    login: String,
}

#[derive(Deserialize)]
struct InstallationRepositoriesEvent {
    action: String,
    installation: Installation,
    #[serde(default)]
    repositories_added: Vec<Repository>,
    #[serde(default)]
    repositories_removed: Vec<Repository>,
}

#[derive(Deserialize)]
struct Installation {
    id: u64,
}

fn repo_name(field: &str, name: &str) -> Result<RepoName, PayloadError> {
    RepoName::parse(name).map_err(|InvalidRepoName(name)| PayloadError::InvalidField {
        field: field.into(),
        message: format!("{name:?} is not owner/name"),
    })
}

/// Reads a `repository` delivery.
pub fn classify_repository(json: &[u8]) -> Result<Classified, PayloadError> {
    let event: RepositoryEvent = parse(json)?;
    let now = repo_name("repository.full_name", &event.repository.full_name)?;
    let (owner, name) = now.as_str().split_once('/').unwrap_or_default();
    let changes = event.changes.unwrap_or_default();
    let mut out = Lifecycle {
        at: updated_at(event.repository.updated_at.as_ref()),
        ..Default::default()
    };
    match event.action.as_str() {
        "renamed" => {
            let from = changes
                .repository
                .ok_or_else(|| PayloadError::MissingField("changes.repository".into()))?
                .name
                .from;
            let old = repo_name("changes.repository.name.from", &format!("{owner}/{from}"))?;
            out.gone.push((old, format!("renamed to {now}")));
            out.live.push(now);
        }
        "transferred" => {
            let from = changes
                .owner
                .ok_or_else(|| PayloadError::MissingField("changes.owner".into()))?
                .from;
            let login = from
                .organization
                .or(from.user)
                .ok_or_else(|| PayloadError::MissingField("changes.owner.from.user".into()))?
                .login;
            // GitHub can rename while it transfers; the payload then names only the old
            // owner, and the old name under it is the one this reads as gone.
            let old = repo_name("changes.owner.from", &format!("{login}/{name}"))?;
            out.gone.push((old, format!("transferred to {now}")));
            out.live.push(now);
        }
        "deleted" => out.gone.push((now, "deleted".into())),
        "created" => out.live.push(now),
        other => {
            return Ok(Classified::Ignored(format!(
                "repository action `{other}` is not tracked"
            )))
        }
    }
    Ok(Classified::Lifecycle(out))
}

/// Reads an `installation_repositories` delivery.
pub fn classify_installation_repositories(json: &[u8]) -> Result<Classified, PayloadError> {
    let event: InstallationRepositoriesEvent = parse(json)?;
    let mut out = Lifecycle::default();
    match event.action.as_str() {
        "removed" => {
            return Ok(Classified::Ignored(format!(
                "{} repositories removed from installation {}: they still exist; \
                 `chronicle status` lists them as not seen",
                event.repositories_removed.len(),
                event.installation.id
            )))
        }
        "added" => {
            for r in event.repositories_added {
                out.live
                    .push(repo_name("repositories_added[].full_name", &r.full_name)?);
            }
        }
        other => {
            return Ok(Classified::Ignored(format!(
                "installation_repositories action `{other}` is not tracked"
            )))
        }
    }
    Ok(Classified::Lifecycle(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(l: &Lifecycle) -> (Vec<&str>, Vec<&str>) {
        (
            l.gone.iter().map(|(n, _)| n.as_str()).collect(),
            l.live.iter().map(|n| n.as_str()).collect(),
        )
    }

    fn lifecycle(c: Classified) -> Lifecycle {
        match c {
            Classified::Lifecycle(l) => l,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn renames_and_transfers_name_the_old_name_gone_and_the_new_one_live() {
        let renamed = json!({
            "action": "renamed",
            "changes": {"repository": {"name": {"from": "old"}}},
            "repository": {"full_name": "acme/new", "name": "new"},
        });
        let l = lifecycle(classify_repository(renamed.to_string().as_bytes()).unwrap());
        assert_eq!(names(&l), (vec!["acme/old"], vec!["acme/new"]));
        assert_eq!(l.gone[0].1, "renamed to acme/new");
        let transferred = json!({
            "action": "transferred",
            "changes": {"owner": {"from": {"user": {"login": "octocat"}}}},
            "repository": {"full_name": "acme/tool"},
        });
        let l = lifecycle(classify_repository(transferred.to_string().as_bytes()).unwrap());
        assert_eq!(names(&l), (vec!["octocat/tool"], vec!["acme/tool"]));
    }

    #[test]
    fn other_actions_are_ignored_and_a_rename_without_its_change_is_refused() {
        let edited = json!({"action": "edited", "repository": {"full_name": "acme/x"}});
        assert!(matches!(
            classify_repository(edited.to_string().as_bytes()).unwrap(),
            Classified::Ignored(_)
        ));
        let bare = json!({"action": "renamed", "repository": {"full_name": "acme/x"}});
        assert_eq!(
            classify_repository(bare.to_string().as_bytes()).unwrap_err(),
            PayloadError::MissingField("changes.repository".into())
        );
        // Removed from the installation: it still exists; nothing is forgotten.
        let removed = json!({
            "action": "removed",
            "installation": {"id": 31},
            "repositories_added": [],
            "repositories_removed": [{"full_name": "acme/web"}, {"full_name": "acme/ops"}],
        });
        assert!(matches!(
            classify_installation_repositories(removed.to_string().as_bytes()).unwrap(),
            Classified::Ignored(_)
        ));
    }

    #[test]
    fn the_event_time_is_the_payloads_updated_at_in_either_shape() {
        let at = |v: serde_json::Value| {
            let e = json!({"action": "deleted", "repository": {"full_name": "acme/x", "updated_at": v}});
            lifecycle(classify_repository(e.to_string().as_bytes()).unwrap()).at
        };
        let t = OffsetDateTime::from_unix_timestamp(1_557_933_678).unwrap();
        assert_eq!(at(json!("2019-05-15T15:21:18Z")), Some(t));
        assert_eq!(at(json!(1_557_933_678)), Some(t));
        assert_eq!(at(json!(null)), None);
    }
}
