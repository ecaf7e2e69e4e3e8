//! A GitHub App's installations, as GitHub serves them:
//!
//! - `POST /app/installations/{id}/access_tokens` (the App's JWT) → 201
//!   `{token, expires_at, permissions, repository_selection}`; the token lives
//!   [`GitHubStandIn::set_installation_token_ttl`] (an hour on GitHub; seconds in tests, a
//!   compressed clock);
//! - `GET /repos/{owner}/{repo}/installation` (the App's JWT) → the installation, or 404;
//! - `GET /installation/repositories` (an installation token only) → `{total_count,
//!   repository_selection, repositories}`, paginated with a `Link` header.
//!
//! An installation token is accepted by every other route, REST and GraphQL, until it expires
//! (then 401 "Bad credentials", as GitHub answers); it reads only its installation's
//! repositories (another is 404 on REST, `NOT_FOUND` on GraphQL). A token asked for with
//! `{"permissions": …}` beyond the App's (app.yml's) is refused 422.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::*;

/// A repository of an installation.
#[derive(Clone, Debug)]
pub struct InstalledSpec {
    pub full_name: String,
    pub archived: bool,
    /// An empty repository (size 0, no default branch content).
    pub empty: bool,
}

struct Install {
    account: String,
    repos: Vec<InstalledSpec>,
}

/// The installations and the tokens issued for them; shared by the REST and GraphQL halves.
pub struct Installations {
    by_id: BTreeMap<u64, Install>,
    issued: HashMap<String, (u64, Instant)>,
    ttl: Duration,
    minted: u64,
    /// Every token issued expires just before this GraphQL request (counted from 1).
    expire_at_graphql: Option<u64>,
}

impl Default for Installations {
    fn default() -> Self {
        Installations {
            by_id: BTreeMap::new(),
            issued: HashMap::new(),
            ttl: Duration::from_secs(3600),
            minted: 0,
            expire_at_graphql: None,
        }
    }
}

/// Who a bearer token is.
pub enum Bearer {
    /// The stand-in's own token: everything.
    Owner,
    /// An installation's token, unexpired.
    Installation(u64),
    Expired,
    Unknown,
}

impl Installations {
    /// Called with each GraphQL request's number: the scripted expiry, when it is due.
    pub fn on_graphql_request(&mut self, n: u64) {
        if self.expire_at_graphql == Some(n) {
            self.expire_all();
        }
    }

    fn expire_all(&mut self) {
        let now = Instant::now();
        for (_, until) in self.issued.values_mut() {
            *until = now;
        }
    }

    pub fn bearer(&self, token: &str) -> Bearer {
        match self.issued.get(token) {
            Some((_, until)) if Instant::now() >= *until => Bearer::Expired,
            Some((id, _)) => Bearer::Installation(*id),
            None => Bearer::Unknown,
        }
    }

    pub(crate) fn can_read(&self, id: u64, repo: &str) -> bool {
        self.by_id
            .get(&id)
            .is_some_and(|i| i.repos.iter().any(|r| r.full_name == repo))
    }
}

impl GitHubStandIn {
    /// Registers installation `id` of the App on `account`, seeing `repos`.
    pub fn add_installation(&self, id: u64, account: &str, repos: Vec<InstalledSpec>) {
        for r in &repos {
            super::check_repo(&r.full_name);
        }
        self.installations().by_id.insert(
            id,
            Install {
                account: account.to_string(),
                repos,
            },
        );
    }

    /// Removes `repo` from installation `id` (the App was uninstalled from it).
    pub fn remove_from_installation(&self, id: u64, repo: &str) {
        if let Some(i) = self.installations().by_id.get_mut(&id) {
            i.repos.retain(|r| r.full_name != repo);
        }
    }

    /// Uninstalls the App's installation `id`: its tokens are revoked (401 from now on), and it
    /// can neither be found nor mint (404).
    pub fn uninstall(&self, id: u64) {
        let mut inst = self.installations();
        inst.by_id.remove(&id);
        inst.issued.retain(|_, (of, _)| *of != id);
    }

    /// How long an installation token lives from now on (GitHub: an hour).
    pub fn set_installation_token_ttl(&self, ttl: Duration) {
        self.installations().ttl = ttl;
    }

    /// Every installation token issued so far expires now (as a revocation, or the end of its
    /// hour, would): the next request with one is refused with 401.
    pub fn expire_installation_tokens(&self) {
        self.installations().expire_all();
    }

    /// Every token issued so far expires just before the `n`-th GraphQL request (from 1), so
    /// that request is refused with 401 mid-run, whatever the machine's speed.
    pub fn expire_installation_tokens_at_graphql_request(&self, n: u64) {
        self.installations().expire_at_graphql = Some(n);
    }

    /// Installation tokens minted so far.
    pub fn installation_tokens_minted(&self) -> u64 {
        self.installations().minted
    }
}

/// `POST /app/installations/{id}/access_tokens`, once the JWT is checked; `None` for another
/// `/app/` route.
pub(super) fn app_route(st: &mut State, method: &Method, path: &str) -> Option<Answer> {
    let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    if segments.as_slice() == ["app", "installations"] && method == Method::GET {
        let inst = st.installations.lock().unwrap_or_else(|e| e.into_inner());
        let listed: Vec<Value> = inst
            .by_id
            .iter()
            .map(|(id, i)| {
                json!({
                    "id": id,
                    "account": {"login": i.account, "type": "Organization"},
                    "repository_selection": "selected",
                    "events": ["pull_request"],
                })
            })
            .collect();
        return Some(Answer::json(StatusCode::OK, Value::Array(listed)));
    }
    let ["app", "installations", id, "access_tokens"] = segments.as_slice() else {
        return None;
    };
    if method != Method::POST {
        return Some(Answer::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method Not Allowed",
        ));
    }
    let Some(id) = positive(id) else {
        return Some(not_found());
    };
    // `{"permissions": {...}}` narrows the token to some of the installation's permissions;
    // asking for one it lacks is 422, as GitHub answers.
    let asked: Value = match st.requests.last().map(|r| r.body.clone()) {
        Some(b) if !b.is_empty() => match serde_json::from_slice(&b) {
            Ok(v) => v,
            Err(_) => {
                return Some(Answer::error(
                    StatusCode::BAD_REQUEST,
                    "Problems parsing JSON",
                ))
            }
        },
        _ => json!({}),
    };
    let granted = granted_permissions();
    let permissions = match asked.get("permissions") {
        None => granted.clone(),
        Some(Value::Object(p))
            if p.iter().all(|(k, v)| {
                granted
                    .get(k)
                    .is_some_and(|g| g == v || v == "read" && g == "write")
            }) =>
        {
            Value::Object(p.clone())
        }
        Some(_) => {
            return Some(Answer::error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "The permissions requested are not granted to this installation.",
            ))
        }
    };
    let mut inst = st.installations.lock().unwrap_or_else(|e| e.into_inner());
    if !inst.by_id.contains_key(&id) {
        return Some(not_found());
    }
    inst.minted += 1;
    let token = format!("ghs_standin{:04}{id}", inst.minted);
    let ttl = inst.ttl;
    inst.issued
        .insert(token.clone(), (id, Instant::now() + ttl));
    let expires_at = time::OffsetDateTime::now_utc() + ttl;
    Some(Answer::json(
        StatusCode::CREATED,
        json!({
            "token": token,
            "expires_at": expires_at
                .replace_nanosecond(0)
                .unwrap_or(expires_at)
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            "permissions": permissions,
            "repository_selection": "selected",
        }),
    ))
}

/// What the stand-in's App may do on each installation: `app.yml`'s permissions.
fn granted_permissions() -> Value {
    json!({
        "contents": "read",
        "issues": "read",
        "metadata": "read",
        "pull_requests": "read",
        "repository_hooks": "write",
    })
}

/// `GET /repos/{owner}/{repo}/installation` or `GET /orgs/{org}/installation`, once the JWT
/// is checked; `None` for another path.
pub(super) fn repo_installation(st: &State, method: &Method, path: &str) -> Option<Answer> {
    let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let org = match segments.as_slice() {
        ["orgs", org, "installation"] => Some(org.to_string()),
        ["repos", _, _, "installation"] => None,
        _ => return None,
    };
    if method != Method::GET {
        return Some(Answer::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method Not Allowed",
        ));
    }
    let inst = st.installations.lock().unwrap_or_else(|e| e.into_inner());
    let found = inst
        .by_id
        .iter()
        .find(|(_, i)| match (&org, &segments[..]) {
            (Some(org), _) => i.account == *org,
            (None, [_, owner, name, _]) => i
                .repos
                .iter()
                .any(|r| r.full_name == format!("{owner}/{name}")),
            _ => false,
        });
    Some(match found {
        Some((id, i)) => Answer::json(
            StatusCode::OK,
            json!({
                "id": id,
                "account": {"login": i.account, "type": "Organization"},
                "repository_selection": "selected",
                "target_type": "Organization",
                "permissions": granted_permissions(),
                "events": ["pull_request"],
            }),
        ),
        None => not_found(),
    })
}

/// Whether `path` takes the App's JWT rather than a token.
pub(super) fn takes_jwt(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(
        segments.as_slice(),
        ["repos", _, _, "installation"] | ["orgs", _, "installation"]
    )
}

/// The installation token's check for a route: `GET /installation/repositories` answered here,
/// another repository's route refused; `None` to go on.
pub(super) fn with_token(
    st: &State,
    base: &str,
    installation: u64,
    path: &str,
    query: Option<&str>,
) -> Option<Answer> {
    let inst = st.installations.lock().unwrap_or_else(|e| e.into_inner());
    if path == "/installation/repositories" {
        let params = match Params::parse(query, true) {
            Ok(p) => p,
            Err(field) => return Some(validation_failed(&field, "Installation")),
        };
        let repos = inst
            .by_id
            .get(&installation)
            .map(|i| i.repos.clone())
            .unwrap_or_default();
        let listed = page(base, path, &params, repos.len(), |i| {
            let r = &repos[i];
            let (owner, name) = r.full_name.split_once('/').unwrap_or_default();
            json!({
                "id": 1_000_000 + i as u64,
                "name": name,
                "full_name": r.full_name,
                "owner": {"login": owner},
                "private": true,
                "archived": r.archived,
                "size": if r.empty { 0 } else { 2_048 },
                "default_branch": "main",
            })
        });
        let items = listed.body.clone();
        let mut answer = Answer::json(
            StatusCode::OK,
            json!({
                "total_count": repos.len(),
                "repository_selection": "selected",
                "repositories": items,
            }),
        );
        answer.headers = listed.headers;
        return Some(answer);
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if let ["repos", owner, name, ..] = segments.as_slice() {
        if !inst.can_read(installation, &format!("{owner}/{name}")) {
            return Some(not_found());
        }
    }
    None
}
