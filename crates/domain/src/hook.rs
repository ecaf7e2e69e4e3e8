//! Which GitHub webhook sent a delivery, and where GitHub lists that hook's deliveries.
//!
//! GitHub names the hook in `X-GitHub-Hook-ID` and what it is installed on in
//! `X-GitHub-Hook-Installation-Target-Type`. The webhook records each hook it sees (once per
//! instance) so the redelivery stage (`redeliver`) can ask GitHub for the deliveries
//! that failed: GitHub never retries them on its own.

use std::fmt;

use crate::RepoName;

pub const HOOK_ID_HEADER: &str = "x-github-hook-id";
pub const HOOK_TARGET_TYPE_HEADER: &str = "x-github-hook-installation-target-type";

/// What a hook is installed on; each lists its deliveries under its own REST path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookTarget {
    /// `/repos/{owner}/{repo}/hooks/{id}`.
    Repository(RepoName),
    /// `/orgs/{org}/hooks/{id}`.
    Organization(String),
    /// A GitHub App's hook, `/app/hook`: listing it needs the app's JWT.
    App,
}

/// One webhook: its target and GitHub's numeric id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HookRef {
    pub target: HookTarget,
    pub id: u64,
}

impl HookRef {
    /// The hook from a delivery's headers and payload. `None` when the delivery names no hook
    /// (older GitHub Enterprise Servers, hand-made requests) or an unknown kind of target.
    pub fn from_delivery(
        hook_id: Option<&str>,
        target_type: Option<&str>,
        json: &[u8],
    ) -> Option<HookRef> {
        // Only the fields that name the target are read.
        #[derive(serde::Deserialize)]
        struct Named {
            repository: Option<Repository>,
            organization: Option<Login>,
        }
        #[derive(serde::Deserialize)]
        struct Repository {
            full_name: String,
            owner: Option<Login>,
        }
        #[derive(serde::Deserialize)]
        struct Login {
            login: String,
        }
        let id = hook_id?.trim().parse::<u64>().ok().filter(|id| *id > 0)?;
        let named: Named = serde_json::from_slice(json).ok()?;
        let valid = |login: String| (!login.is_empty() && !login.contains('/')).then_some(login);
        let target = match target_type.map(str::trim) {
            None | Some("repository") => {
                HookTarget::Repository(RepoName::parse(&named.repository?.full_name).ok()?)
            }
            Some("organization") => HookTarget::Organization(
                named
                    .organization
                    .map(|o| o.login)
                    .or_else(|| named.repository.and_then(|r| r.owner).map(|o| o.login))
                    .and_then(valid)?,
            ),
            Some("integration") => HookTarget::App,
            Some(_) => return None,
        };
        Some(HookRef { target, id })
    }

    /// The hook's REST path, under which `/deliveries` lists its deliveries (an app has one
    /// hook, `/app/hook`, whatever its id).
    pub fn api_path(&self) -> String {
        match self.target {
            HookTarget::App => "/app/hook".to_string(),
            _ => format!("/{self}"),
        }
    }

    /// Reads back what [`fmt::Display`] wrote (the stored key).
    pub fn parse(key: &str) -> Option<HookRef> {
        let segments: Vec<&str> = key.trim_start_matches('/').split('/').collect();
        let number = |s: &str| s.parse::<u64>().ok().filter(|n| *n > 0);
        match segments.as_slice() {
            ["repos", owner, name, "hooks", id] => Some(HookRef {
                target: HookTarget::Repository(RepoName::parse(&format!("{owner}/{name}")).ok()?),
                id: number(id)?,
            }),
            ["orgs", org, "hooks", id] if !org.is_empty() => Some(HookRef {
                target: HookTarget::Organization(org.to_string()),
                id: number(id)?,
            }),
            ["app", "hook", id] => Some(HookRef {
                target: HookTarget::App,
                id: number(id)?,
            }),
            _ => None,
        }
    }
}

/// `repos/{owner}/{repo}/hooks/{id}`, `orgs/{org}/hooks/{id}`, or `app/hook/{id}`: the stored
/// key. The first two are the hook's REST path without its leading `/`.
impl fmt::Display for HookRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            HookTarget::Repository(repo) => write!(f, "repos/{repo}/hooks/{}", self.id),
            HookTarget::Organization(org) => write!(f, "orgs/{org}/hooks/{}", self.id),
            HookTarget::App => write!(f, "app/hook/{}", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bytes(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn a_repository_hook_is_named_by_its_repository() {
        let payload =
            bytes(json!({"repository": {"full_name": "octo/app", "owner": {"login": "octo"}}}));
        let hook = HookRef::from_delivery(Some("42"), Some("repository"), &payload).unwrap();
        assert_eq!(hook.to_string(), "repos/octo/app/hooks/42");
        assert_eq!(hook.api_path(), "/repos/octo/app/hooks/42");
        assert_eq!(HookRef::parse(&hook.to_string()), Some(hook.clone()));
        // No target type (older servers): a repository hook.
        assert_eq!(
            HookRef::from_delivery(Some("42"), None, &payload),
            Some(hook)
        );
    }

    #[test]
    fn organization_and_app_hooks_are_told_apart() {
        let payload = bytes(json!({
            "organization": {"login": "octo-org"},
            "repository": {"full_name": "octo-org/app", "owner": {"login": "octo-org"}}
        }));
        let org = HookRef::from_delivery(Some("7"), Some("organization"), &payload).unwrap();
        assert_eq!(org.to_string(), "orgs/octo-org/hooks/7");
        assert_eq!(HookRef::parse("orgs/octo-org/hooks/7"), Some(org));
        let app = HookRef::from_delivery(Some("9"), Some("integration"), &payload).unwrap();
        assert_eq!(app.target, HookTarget::App);
        assert_eq!(app.api_path(), "/app/hook");
        assert_eq!(HookRef::parse(&app.to_string()), Some(app));
    }

    #[test]
    fn a_delivery_without_a_usable_hook_names_none() {
        let payload = bytes(json!({"repository": {"full_name": "octo/app"}}));
        assert_eq!(HookRef::from_delivery(None, None, &payload), None);
        assert_eq!(HookRef::from_delivery(Some("x1"), None, &payload), None);
        assert_eq!(HookRef::from_delivery(Some("0"), None, &payload), None);
        assert_eq!(
            HookRef::from_delivery(Some("5"), Some("marketplace::listing"), &payload),
            None
        );
        assert_eq!(HookRef::from_delivery(Some("5"), None, b"{}"), None);
        assert_eq!(HookRef::parse("repos/a/hooks/1"), None);
        assert_eq!(HookRef::parse("repos/a/b/hooks/0"), None);
    }
}
