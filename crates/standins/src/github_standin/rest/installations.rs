//! A GitHub App's installations, as GitHub serves them:
//!
//! - `GET /app/installations/{id}` (the App's JWT) → the installation, with the `permissions`
//!   it granted ([`GitHubStandIn::set_installation_permissions`]; app.yml's by default), or 404;
//! - `POST /app/installations/{id}/access_tokens` (the App's JWT) → 201
//!   `{token, expires_at, permissions, repository_selection}`, or 422 when asked for a
//!   permission the installation did not grant, as GitHub answers; scripted refusals
//!   ([`MintFault`]: a secondary rate limit, a refused JWT) come first; the token lives
//!   [`GitHubStandIn::set_installation_token_ttl`] (an hour on GitHub; seconds in tests, a
//!   compressed clock);
//! - `GET /repos/{owner}/{repo}/installation` (the App's JWT) → the installation, or 404;
//! - `GET /orgs/{org}/installation` and `GET /users/{username}/installation` (the App's JWT) →
//!   an organisation's, a user's installation, or 404; each only at its own route (GitHub
//!   also answers a user's route for an organisation; a client must not rely on it);
//! - `GET /installation/repositories` (an installation token only) → `{total_count,
//!   repository_selection, repositories}`, paginated with a `Link` header.
//!
//! An installation token is accepted by every other route, REST and GraphQL, until it expires
//! (then 401 "Bad credentials", as GitHub answers); it reads only its installation's
//! repositories (another is 404 on REST, `NOT_FOUND` on GraphQL). A token asked for with
//! `{"permissions": …}` beyond the installation's is refused 422. A token without `issues`
//! reads no issue: REST's issue routes answer 403 "Resource not accessible by integration",
//! GraphQL's `closingIssuesReferences` is null with a FORBIDDEN error, as GitHub answers.

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
    /// On a user account ([`GitHubStandIn::add_user_installation`]), not an organisation.
    user: bool,
    /// Suspended by an owner ([`GitHubStandIn::suspend_installation`]).
    suspended: bool,
}

impl Install {
    /// Its account's `type`, as GitHub names it.
    fn kind(&self) -> &'static str {
        if self.user {
            "User"
        } else {
            "Organization"
        }
    }
}

/// The installations and the tokens issued for them; shared by the REST and GraphQL halves.
pub struct Installations {
    by_id: BTreeMap<u64, Install>,
    issued: HashMap<String, (u64, Instant)>,
    ttl: Duration,
    minted: u64,
    /// Every token issued expires just before this GraphQL request (counted from 1).
    expire_at_graphql: Option<u64>,
    /// What each installation granted, when not app.yml's (`set_installation_permissions`).
    granted: HashMap<u64, Value>,
    /// The permissions each issued token was given.
    token_permissions: HashMap<String, Value>,
    /// Refusals scripted for the next mints, in order.
    mint_faults: std::collections::VecDeque<MintFault>,
}

/// A scripted refusal of the next `POST /app/installations/{id}/access_tokens`, as GitHub
/// answers it.
#[derive(Clone, Debug, PartialEq)]
pub enum MintFault {
    /// 403, GitHub's secondary-rate-limit message and `retry-after`.
    SecondaryRateLimit { retry_after_secs: u64 },
    /// 401 "A JSON web token could not be decoded": a key GitHub does not (or no longer) know,
    /// as during a key rotation.
    BadJwt,
    /// 403 "This installation has been suspended", no rate-limit header: suspended between the
    /// installation's read and the mint.
    Suspended,
}

impl Default for Installations {
    fn default() -> Self {
        Installations {
            by_id: BTreeMap::new(),
            issued: HashMap::new(),
            ttl: Duration::from_secs(3600),
            minted: 0,
            expire_at_graphql: None,
            granted: HashMap::new(),
            token_permissions: HashMap::new(),
            mint_faults: Default::default(),
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

    /// Whether the installation token `token` may read issues (`issues` among its permissions).
    pub(crate) fn token_reads_issues(&self, token: &str) -> bool {
        self.token_permissions
            .get(token)
            .is_none_or(|p| p.get("issues").is_some())
    }

    fn granted(&self, id: u64) -> Value {
        self.granted
            .get(&id)
            .cloned()
            .unwrap_or_else(granted_permissions)
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
                user: false,
                suspended: false,
            },
        );
    }

    /// As [`Self::add_installation`], on the user account `login` (`GET
    /// /users/{login}/installation` finds it; `/orgs/{login}/installation` is 404).
    pub fn add_user_installation(&self, id: u64, login: &str, repos: Vec<InstalledSpec>) {
        self.add_installation(id, login, repos);
        if let Some(i) = self.installations().by_id.get_mut(&id) {
            i.user = true;
        }
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

    /// What installation `id` granted the App (GitHub's `permissions` object, e.g.
    /// `{"contents": "read", "metadata": "read", "pull_requests": "read"}`), in place of
    /// app.yml's: a mint asking for more is refused 422.
    pub fn set_installation_permissions(&self, id: u64, permissions: Value) {
        assert!(permissions.is_object(), "permissions are an object");
        self.installations().granted.insert(id, permissions);
    }

    /// Suspends installation `id`, as an owner can in its settings: `GET
    /// /app/installations/{id}` shows `suspended_at`, a mint is refused 403, and its tokens are
    /// revoked (401), as GitHub does.
    pub fn suspend_installation(&self, id: u64) {
        let mut inst = self.installations();
        if let Some(i) = inst.by_id.get_mut(&id) {
            i.suspended = true;
        }
        inst.issued.retain(|_, (of, _)| *of != id);
    }

    /// Scripts `fault` for the next token mint (any installation), after the JWT is checked.
    pub fn fail_next_mint(&self, fault: MintFault) {
        self.installations().mint_faults.push_back(fault);
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
                    "account": {"login": i.account, "type": i.kind()},
                    "repository_selection": "selected",
                    "events": ["pull_request"],
                })
            })
            .collect();
        return Some(Answer::json(StatusCode::OK, Value::Array(listed)));
    }
    if let ["app", "installations", id] = segments.as_slice() {
        return Some(installation_route(st, method, id));
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
    let mut inst = st.installations.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(fault) = inst.mint_faults.pop_front() {
        return Some(mint_fault(fault));
    }
    match inst.by_id.get(&id) {
        None => return Some(not_found()),
        Some(i) if i.suspended => return Some(mint_fault(MintFault::Suspended)),
        Some(_) => {}
    }
    let granted = inst.granted(id);
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
    inst.minted += 1;
    let token = format!("ghs_standin{:04}{id}", inst.minted);
    inst.token_permissions
        .insert(token.clone(), permissions.clone());
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

/// A scripted refusal of a mint, as GitHub words it.
fn mint_fault(fault: MintFault) -> Answer {
    match fault {
        MintFault::SecondaryRateLimit { retry_after_secs } => Answer::error(
            StatusCode::FORBIDDEN,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try \
             again. If you reach out to GitHub Support for help, please include the request ID.",
        )
        .header("retry-after", retry_after_secs.to_string()),
        MintFault::BadJwt => Answer::error(
            StatusCode::UNAUTHORIZED,
            "A JSON web token could not be decoded",
        ),
        MintFault::Suspended => Answer::error(
            StatusCode::FORBIDDEN,
            "This installation has been suspended",
        ),
    }
}

/// `GET /app/installations/{id}` (the JWT checked): the installation in GitHub's `installation`
/// shape (@octokit/openapi), with what it granted.
fn installation_route(st: &State, method: &Method, id: &str) -> Answer {
    if method != Method::GET {
        return Answer::error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    }
    let Some(id) = positive(id) else {
        return not_found();
    };
    let inst = st.installations.lock().unwrap_or_else(|e| e.into_inner());
    let Some(install) = inst.by_id.get(&id) else {
        return not_found();
    };
    let base = &st.base_url;
    let html_url = if install.user {
        format!("https://github.com/settings/installations/{id}")
    } else {
        format!(
            "https://github.com/organizations/{}/settings/installations/{id}",
            install.account
        )
    };
    let (suspended_by, suspended_at) = if install.suspended {
        (
            json!({"login": install.account, "id": 1, "type": "User"}),
            json!("2024-06-01T00:00:00Z"),
        )
    } else {
        (Value::Null, Value::Null)
    };
    Answer::json(
        StatusCode::OK,
        json!({
            "id": id,
            "account": {"login": install.account, "id": 1, "type": install.kind()},
            "repository_selection": "selected",
            "access_tokens_url": format!("{base}/app/installations/{id}/access_tokens"),
            "repositories_url": format!("{base}/installation/repositories"),
            "html_url": html_url,
            "app_id": 1,
            "app_slug": "chronicle",
            "target_id": 1,
            "target_type": install.kind(),
            "permissions": inst.granted(id),
            "events": ["pull_request"],
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "single_file_name": null,
            "suspended_by": suspended_by,
            "suspended_at": suspended_at,
        }),
    )
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
        ["orgs", org, "installation"] => Some((org.to_string(), false)),
        ["users", user, "installation"] => Some((user.to_string(), true)),
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
            (Some((login, user)), _) => i.account == *login && i.user == *user,
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
                "account": {"login": i.account, "type": i.kind()},
                "repository_selection": "selected",
                "target_type": i.kind(),
                "permissions": inst.granted(*id),
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
        ["repos", _, _, "installation"]
            | ["orgs", _, "installation"]
            | ["users", _, "installation"]
    )
}

/// Nulls every `closingIssuesReferences` under `value` (at `path`), with GitHub's FORBIDDEN
/// error for each: what a token without `issues` gets.
pub(crate) fn forbid_issues(value: &mut Value, path: &mut Vec<Value>, errors: &mut Vec<Value>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                path.push(json!(key));
                if key == "closingIssuesReferences" && !child.is_null() {
                    *child = Value::Null;
                    errors.push(json!({
                        "type": "FORBIDDEN",
                        "path": path.clone(),
                        "extensions": {"saml_failure": false},
                        "locations": [{"line": 1, "column": 1}],
                        "message": "Resource not accessible by integration",
                    }));
                } else {
                    forbid_issues(child, path, errors);
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                path.push(json!(i));
                forbid_issues(child, path, errors);
                path.pop();
            }
        }
        _ => {}
    }
}

/// A token without `issues` asking for an issue: 403, as GitHub answers an installation that
/// did not grant the read. `None` to go on.
pub(super) fn issues_refused(st: &State, token: &str, path: &str) -> Option<Answer> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let issue_route = matches!(segments.as_slice(), ["repos", _, _, "issues", ..]);
    let inst = st.installations.lock().unwrap_or_else(|e| e.into_inner());
    (issue_route && !inst.token_reads_issues(token)).then(|| {
        Answer::error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
        )
    })
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
