//! A repository's life as the organisation page sees it: the `repository` deliveries that
//! change which names exist (`renamed`, `transferred`, `deleted`, `created`) and the
//! `installation_repositories` ones that change what the App's installation sees (`removed`,
//! `added`), read into the names that are gone and the names that (again) exist.
//!
//! Shapes: @octokit/webhooks-types 7.6 (`RepositoryRenamedEvent`: the old name in
//! `changes.repository.name.from`, `repository` already the new one;
//! `RepositoryTransferredEvent`: the old owner in `changes.owner.from.user` or
//! `.organization`; `InstallationRepositoriesRemovedEvent`: `repositories_removed[].full_name`).

use serde::Deserialize;

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
}

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
    let mut out = Lifecycle::default();
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
            for r in event.repositories_removed {
                let why = format!("removed from installation {}", event.installation.id);
                out.gone.push((
                    repo_name("repositories_removed[].full_name", &r.full_name)?,
                    why,
                ));
            }
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
        let removed = json!({
            "action": "removed",
            "installation": {"id": 31},
            "repositories_added": [],
            "repositories_removed": [{"full_name": "acme/web"}, {"full_name": "acme/ops"}],
        });
        let l =
            lifecycle(classify_installation_repositories(removed.to_string().as_bytes()).unwrap());
        assert_eq!(names(&l).0, ["acme/web", "acme/ops"]);
        assert_eq!(l.gone[0].1, "removed from installation 31");
    }
}
