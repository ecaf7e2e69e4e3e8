//! The stand-in's REST half: every path but `/graphql`, answered with the recorded GitHub
//! responses in `tests/fixtures/github/rest` (compiled in), stricter than GitHub, never looser.
//!
//! Every request is recorded, then checked in this order, the first violation answering the way
//! GitHub would:
//!
//! 1. `User-Agent` missing or empty → 403 ("Request forbidden by administrative rules…").
//! 2. `Authorization` not `Bearer <token>` / `token <token>` → 401 (GitHub lets anonymous
//!    requests through at 60/h; the stub requires the token).
//! 3. `X-GitHub-Api-Version` not exactly `2022-11-28` → 400 (GitHub defaults a missing one; the
//!    stub requires it).
//! 4. A rate-limit window still open (see below) → the same refusal again.
//! 5. A scripted [`Fault`] whose prefix matches the path → that fault, consumed.
//! 6. Method other than GET → 405 on a known route; unknown route, unregistered PR or issue,
//!    malformed number, trailing slash, repo spelled with another case → 404.
//! 7. Query: `per_page` not an integer in 1..=100, `page` not an integer ≥ 1, a parameter the
//!    endpoint does not take (single resources take none), or a parameter repeated → 422.
//!
//! Rate limits are honoured the way GitHub enforces them: after a
//! [`Fault::TooManyRequests`] every request is refused with 429 until `retry-after` seconds have
//! passed, and after a [`Fault::RateLimitExhausted`] every request is refused with 403 until the
//! epoch second in `x-ratelimit-reset` (a client that retries early is refused again; the
//! refusal is recorded and does not consume a scripted fault). [`GitHubStandIn::lift_rate_limit`]
//! closes the window at once, for tests that model the passing of time themselves. The primary
//! counter starts at 5000 and drops by one per authenticated request; at 0 every request is
//! refused until the hour's reset.
//!
//! Every response carries `content-type: application/json; charset=utf-8`,
//! `x-github-api-version-selected`, `x-github-request-id` and the `x-ratelimit-*` headers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{json, Value};

use super::GitHubStandIn;

mod answer;
mod contents;
mod hooks;
pub mod installations;
mod json;
mod route;
use answer::*;
use contents::*;
pub use hooks::{DeliverySpec, StubAttempt, REDELIVERY_WINDOW_SECS};
pub use installations::InstalledSpec;
use json::*;
use route::*;

pub const API_VERSION: &str = "2022-11-28";
/// The primary rate limit of an authenticated token.
pub const RATE_LIMIT: u64 = 5000;
/// `GET /repos/{o}/{r}/pulls/{n}/files` lists at most this many files.
pub const MAX_PULL_FILES: usize = 3000;
/// `GET /repos/{o}/{r}/pulls/{n}/commits` lists at most this many commits.
pub const MAX_PULL_COMMITS: usize = 250;
pub const DEFAULT_PER_PAGE: u64 = 30;
pub const MAX_PER_PAGE: u64 = 100;

const DOCS: &str = "https://docs.github.com/rest";
const RATE_LIMIT_DOCS: &str = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api";

/// A pull request as registered with [`GitHubStandIn::add_pull`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PullSpec {
    pub title: String,
    pub body: Option<String>,
    pub files: Vec<FileSpec>,
    pub commits: u64,
}

impl PullSpec {
    /// `n` files named `src/mod{i%7}/file{i}.rs`, cycling through the statuses GitHub reports
    /// (modified, added, removed, renamed) with varying additions and deletions.
    pub fn with_files(n: usize) -> PullSpec {
        let files = (0..n)
            .map(|i| {
                let k = i as u64;
                let (status, additions, deletions) = match i % 4 {
                    0 => ("modified", k % 40 + 1, k % 9),
                    1 => ("added", k % 120 + 1, 0),
                    2 => ("removed", 0, k % 60 + 1),
                    _ => ("renamed", k % 5, k % 3),
                };
                FileSpec {
                    filename: format!("src/mod{}/file{i}.rs", i % 7),
                    status: status.to_string(),
                    additions,
                    deletions,
                }
            })
            .collect();
        PullSpec {
            title: format!("Change {n} files"),
            body: Some(format!("Touches {n} files across seven modules.")),
            files,
            commits: 3,
        }
    }
}

/// One entry of a PR's changed files.
#[derive(Clone, Debug, PartialEq)]
pub struct FileSpec {
    pub filename: String,
    pub status: String,
    pub additions: u64,
    pub deletions: u64,
}

/// A scripted failure, answered instead of the next matching request.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// 429, `retry-after`, GitHub's secondary-rate-limit message; the window is then enforced.
    TooManyRequests { retry_after_secs: u64 },
    /// 403, `x-ratelimit-remaining: 0`, `x-ratelimit-reset` = now + `reset_in_secs` (epoch
    /// seconds); the window is then enforced.
    RateLimitExhausted { reset_in_secs: u64 },
    /// 500 `{"message":"Server Error"}`.
    ServerError,
    /// 502.
    BadGateway,
    /// The request is carried out (a redelivery queued, as after a 202), then answered 502: an
    /// ambiguous failure the client cannot tell from [`Fault::BadGateway`].
    AppliedThenBadGateway,
    /// 404 `{"message":"Not Found",…}`.
    NotFound,
    /// 410.
    Gone,
    /// 403 `Resource not accessible by integration`, with no rate-limit headers: a refusal.
    Forbidden,
    /// Accepts the request, sends nothing for that long, then answers 504.
    Hang(Duration),
}

/// A request as the stub received it (also the ones it refused).
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

#[derive(Clone, Debug)]
enum Window {
    /// Secondary limit: refused with 429 until this instant.
    RetryAfter(Instant),
    /// Primary limit: refused with 403 until this epoch second.
    Reset(u64),
}

pub(super) struct State {
    token: String,
    base_url: String,
    pulls: HashMap<(String, u64), PullSpec>,
    issues: HashMap<(String, u64), (String, String)>,
    /// Issues moved to another repository: (from repo, number) → (to repo, number there).
    transfers: HashMap<(String, u64), (String, u64)>,
    /// Repository files at the default branch, by (repo, path).
    files: std::collections::BTreeMap<(String, String), String>,
    faults: Vec<(String, Fault)>,
    requests: Vec<RecordedRequest>,
    remaining: u64,
    reset_epoch: u64,
    window: Option<Window>,
    served: u64,
    /// Webhooks and their deliveries (`hooks.rs`).
    hooks: hooks::Hooks,
    /// The App's installations and their tokens (`installations.rs`), shared with GraphQL.
    installations: Arc<Mutex<installations::Installations>>,
}

pub(super) struct Fixtures {
    pull: Value,
    file: Value,
    commit: Value,
    issue: Value,
}

impl State {
    pub(super) fn new(
        token: &str,
        base_url: &str,
        installations: Arc<Mutex<installations::Installations>>,
    ) -> State {
        State {
            token: token.to_string(),
            base_url: base_url.to_string(),
            pulls: HashMap::new(),
            issues: HashMap::new(),
            transfers: HashMap::new(),
            files: Default::default(),
            faults: Vec::new(),
            requests: Vec::new(),
            remaining: RATE_LIMIT,
            reset_epoch: epoch_secs() + 3600,
            window: None,
            served: 0,
            hooks: Default::default(),
            installations,
        }
    }
}

/// The REST side of the one stand-in: what a test registers and what it can read back.
impl GitHubStandIn {
    /// Registers (or replaces) PR `number` of `repo` ("owner/name", matched case-sensitively).
    pub fn add_pull(&self, repo: &str, number: u64, spec: PullSpec) {
        check_repo(repo);
        self.rest().pulls.insert((repo.to_string(), number), spec);
    }

    /// Issue `number` of `from` was transferred to `to` as `to_number`: asking the old place
    /// answers 301 to the new one, on this host, as GitHub does.
    pub fn transfer_issue(&self, from: &str, number: u64, to: &str, to_number: u64) {
        check_repo(from);
        check_repo(to);
        self.rest()
            .transfers
            .insert((from.to_string(), number), (to.to_string(), to_number));
    }

    /// Registers (or replaces) issue `number` of `repo`. Unregistered issues answer 404.
    pub fn add_issue(&self, repo: &str, number: u64, title: &str, state: &str) {
        check_repo(repo);
        assert!(
            state == "open" || state == "closed",
            "GitHub issue states are open or closed, not {state:?}"
        );
        self.rest().issues.insert(
            (repo.to_string(), number),
            (title.to_string(), state.to_string()),
        );
    }

    /// Puts (or replaces) a file of `repo` at `path`, served by `GET …/contents/{path}`; its
    /// directories exist as long as a file is under them.
    pub fn add_file(&self, repo: &str, path: &str, text: &str) {
        check_repo(repo);
        self.rest()
            .files
            .insert((repo.to_string(), path.to_string()), text.to_string());
    }

    /// Removes a file (its directory goes with its last file).
    pub fn remove_file(&self, repo: &str, path: &str) {
        self.rest()
            .files
            .remove(&(repo.to_string(), path.to_string()));
    }

    /// Scripts `fault` for the next request whose path starts with `path_prefix` ("/" = any),
    /// matched by whole segments ("/repos/o/r/pulls/2" covers ".../pulls/2/files", not
    /// ".../pulls/20"). Faults are consumed in the order they were scripted: a request takes
    /// the earliest pending fault whose prefix covers its path.
    pub fn fail_next(&self, path_prefix: &str, fault: Fault) {
        assert!(
            path_prefix.starts_with('/'),
            "path prefixes start with '/', got {path_prefix:?}"
        );
        self.rest().faults.push((path_prefix.to_string(), fault));
    }

    /// Faults scripted and not yet consumed.
    pub fn pending_faults(&self) -> usize {
        self.rest().faults.len()
    }

    /// Ends an open rate-limit window now (as if its `retry-after` / reset had passed).
    pub fn lift_rate_limit(&self) {
        self.rest().window = None;
    }

    /// Every request received, in order, including refused ones.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.rest().requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.rest().requests.len()
    }

    /// Requests whose path (without the query) starts with `path_prefix`, by whole segments.
    pub fn count_matching(&self, path_prefix: &str) -> usize {
        self.rest()
            .requests
            .iter()
            .filter(|r| under(&r.path, path_prefix))
            .count()
    }

    /// Requests answered 2xx with a resource (not refused, not faulted).
    pub fn served_count(&self) -> u64 {
        self.rest().served
    }

    fn installations(&self) -> MutexGuard<'_, installations::Installations> {
        self.installations.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn rest(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the stub's record from the others.
        self.rest.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `path` is `prefix` or below it, by whole segments: "/repos/o/r/pulls/2" covers
/// "/repos/o/r/pulls/2/files" but not "/repos/o/r/pulls/20"; "/" covers everything.
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/') || prefix.ends_with('/'))
}

fn check_repo(repo: &str) {
    let parts: Vec<&str> = repo.split('/').collect();
    assert!(
        parts.len() == 2 && parts.iter().all(|p| !p.is_empty()),
        "repo is \"owner/name\", got {repo:?}"
    );
}

impl Fixtures {
    pub(super) fn load() -> Fixtures {
        let read = |name: &str, text: &str| -> Value {
            serde_json::from_str(text).unwrap_or_else(|e| panic!("parsing {name}: {e}"))
        };
        let first = |v: Value, name: &str| -> Value {
            v.as_array()
                .and_then(|a| a.first().cloned())
                .unwrap_or_else(|| panic!("{name} is not a non-empty array"))
        };
        Fixtures {
            pull: read(
                "pulls.get.json",
                include_str!("../../../../tests/fixtures/github/rest/pulls.get.json"),
            ),
            file: first(
                read(
                    "pulls.list-files.json",
                    include_str!("../../../../tests/fixtures/github/rest/pulls.list-files.json"),
                ),
                "pulls.list-files.json",
            ),
            commit: first(
                read(
                    "pulls.list-commits.json",
                    include_str!("../../../../tests/fixtures/github/rest/pulls.list-commits.json"),
                ),
                "pulls.list-commits.json",
            ),
            issue: read(
                "issues.get.json",
                include_str!("../../../../tests/fixtures/github/rest/issues.get.json"),
            ),
        }
    }
}

fn epoch_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub(super) async fn handle(
    state: Arc<Mutex<State>>,
    fixtures: Arc<Fixtures>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().map(str::to_string);

    let (answer, hang) = {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        st.requests.push(RecordedRequest {
            method: parts.method.to_string(),
            path: path.clone(),
            query: query.clone(),
            headers: parts.headers.clone(),
            body,
        });
        decide(
            &mut st,
            &fixtures,
            &parts.method,
            &parts.headers,
            &path,
            query.as_deref(),
        )
    };
    let answer = match hang {
        Some(d) => {
            tokio::time::sleep(d).await;
            answer
        }
        None => answer,
    };
    hooks::run_redeliveries(&state);
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    if answer.status.is_success() {
        st.served += 1;
    }
    Ok(respond(&st, answer))
}

/// Checks and routes one request; a `Some` duration means "wait that long, then answer".
fn decide(
    st: &mut State,
    fixtures: &Fixtures,
    method: &Method,
    headers: &HeaderMap,
    path: &str,
    query: Option<&str>,
) -> (Answer, Option<Duration>) {
    if let Some(answer) = gate(st, method, headers, path, query) {
        return (answer, None);
    }
    if let Some(refusal) = charge(st) {
        return (refusal, None);
    }
    if let Some(i) = st.faults.iter().position(|(p, _)| under(path, p)) {
        let (_, fault) = st.faults.remove(i);
        return play(st, fault, method, path, query);
    }
    if let Some(route) = hooks::HookRoute::parse(path) {
        return (hooks::answer(st, method, &route, query), None);
    }
    let Some(route) = Route::parse(path) else {
        return (not_found(), None);
    };
    if method != Method::GET {
        return (
            Answer::error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
            None,
        );
    }
    let params = match Params::parse(query, route.paginated()) {
        Ok(p) => p,
        Err(field) => return (validation_failed(&field, route.resource()), None),
    };
    let answer = resource(st, fixtures, headers, &route, &params, path);
    // GitHub does not count a 304 against the primary limit.
    if answer.status == StatusCode::NOT_MODIFIED {
        st.remaining += 1;
    }
    (answer, None)
}

/// `%20` → ` ` in one path segment (UTF-8 sequences included).
pub fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What is answered before any resource: the refusal of a request GitHub would not serve (no
/// User-Agent, no or a wrong token, not exactly one API version), and the App's own routes,
/// which take its JWT.
fn gate(
    st: &mut State,
    method: &Method,
    headers: &HeaderMap,
    path: &str,
    query: Option<&str>,
) -> Option<Answer> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("user-agent").is_none_or(|ua| ua.trim().is_empty()) {
        return Some(Answer::error(
            StatusCode::FORBIDDEN,
            "Request forbidden by administrative rules. Please make sure your request has \
                 a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-\
                 rest-api#user-agent-required). Check https://developer.github.com for other \
                 possible causes.",
        ));
    }
    // A GitHub App's own routes take its JWT, not a token.
    if path.starts_with("/app/") {
        if let Err(answer) = hooks::check_app_jwt(st, header("authorization")) {
            return Some(answer);
        }
        if let Some(answer) = installations::app_route(st, method, path) {
            return Some(answer);
        }
        return Some(match hooks::HookRoute::parse(path) {
            Some(route) => hooks::answer(st, method, &route, query),
            None => not_found(),
        });
    }
    // The installation of a repository: the App's JWT, too.
    if installations::takes_jwt(path) {
        if let Err(answer) = hooks::check_app_jwt(st, header("authorization")) {
            return Some(answer);
        }
        return installations::repo_installation(st, method, path);
    }
    match header("authorization") {
        None => {
            return Some(Answer::error(
                StatusCode::UNAUTHORIZED,
                "Requires authentication",
            ))
        }
        Some(value) if !token_matches(value, &st.token) => {
            let bearer = value.split_once(' ').map(|(_, t)| t).unwrap_or_default();
            let who = st
                .installations
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .bearer(bearer);
            match who {
                installations::Bearer::Installation(id) => {
                    if let Some(answer) = installations::issues_refused(st, bearer, path) {
                        return Some(answer);
                    }
                    let base = st.base_url.clone();
                    if let Some(answer) = installations::with_token(st, &base, id, path, query) {
                        return Some(answer);
                    }
                }
                _ => return Some(Answer::error(StatusCode::UNAUTHORIZED, "Bad credentials")),
            }
        }
        Some(_) => {}
    }
    // Several values (or one that is not exactly the version) are refused.
    let versions: Vec<&HeaderValue> = headers.get_all("x-github-api-version").iter().collect();
    if versions.len() != 1 || versions[0] != API_VERSION {
        let message = if versions.is_empty() {
            "The X-GitHub-Api-Version header is required by this stand-in (2022-11-28)."
        } else {
            "Invalid API version provided."
        };
        let mut answer = Answer::error(StatusCode::BAD_REQUEST, message);
        answer.body["documentation_url"] =
            json!("https://docs.github.com/rest/overview/api-versions");
        return Some(answer);
    }

    None
}

/// Counts an authenticated request against the primary limit (the request that uses the last
/// unit is served, the next one is refused until the reset) and any open rate-limit window.
fn charge(st: &mut State) -> Option<Answer> {
    let now = epoch_secs();
    if now >= st.reset_epoch {
        st.remaining = RATE_LIMIT;
        st.reset_epoch = now + 3600;
    }
    if st.remaining == 0 {
        return Some(primary_limit(st.reset_epoch));
    }
    st.remaining -= 1;
    match st.window.clone() {
        Some(Window::RetryAfter(until)) => {
            let now = Instant::now();
            if now < until {
                let left = (until - now).as_secs_f64().ceil() as u64;
                return Some(secondary_limit(left.max(1)));
            }
            st.window = None;
        }
        Some(Window::Reset(reset)) => {
            if epoch_secs() < reset {
                return Some(primary_limit(reset));
            }
            st.window = None;
        }
        None => {}
    }

    None
}

/// A scripted fault played: its answer, and how long to wait before giving it.
fn play(
    st: &mut State,
    fault: Fault,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> (Answer, Option<Duration>) {
    match fault {
        Fault::TooManyRequests { retry_after_secs } => {
            st.window = Some(Window::RetryAfter(
                Instant::now() + Duration::from_secs(retry_after_secs),
            ));
            (secondary_limit(retry_after_secs), None)
        }
        Fault::RateLimitExhausted { reset_in_secs } => {
            let reset = epoch_secs() + reset_in_secs;
            st.window = Some(Window::Reset(reset));
            (primary_limit(reset), None)
        }
        Fault::ServerError => (
            Answer::error(StatusCode::INTERNAL_SERVER_ERROR, "Server Error"),
            None,
        ),
        Fault::BadGateway => (Answer::error(StatusCode::BAD_GATEWAY, "Bad Gateway"), None),
        Fault::AppliedThenBadGateway => {
            if let Some(route) = hooks::HookRoute::parse(path) {
                let _ = hooks::answer(st, method, &route, query);
            }
            (Answer::error(StatusCode::BAD_GATEWAY, "Bad Gateway"), None)
        }
        Fault::NotFound => (not_found(), None),
        Fault::Gone => (Answer::error(StatusCode::GONE, "Gone"), None),
        Fault::Forbidden => (
            Answer::error(
                StatusCode::FORBIDDEN,
                "Resource not accessible by integration",
            ),
            None,
        ),
        Fault::Hang(d) => (
            Answer::error(
                StatusCode::GATEWAY_TIMEOUT,
                "We couldn't respond to your request in time. Sorry about that. Please try \
                 resubmitting your request and contact us if the problem persists.",
            ),
            Some(d),
        ),
    }
}

/// A known resource's answer (its route and parameters already checked).
fn resource(
    st: &State,
    fixtures: &Fixtures,
    headers: &HeaderMap,
    route: &Route,
    params: &Params,
    path: &str,
) -> Answer {
    let base = st.base_url.clone();
    match route {
        Route::Contents { repo, path } => contents(st, headers, repo, path),
        Route::Readme { repo, dir } => {
            // GitHub's choice: a file directly in the directory whose name starts with
            // "readme", case-insensitively; answered like contents (JSON, base64).
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            let readme = st.files.keys().find(|(r, p)| {
                r == repo
                    && p.strip_prefix(&prefix).is_some_and(|name| {
                        !name.contains('/') && name.to_ascii_lowercase().starts_with("readme")
                    })
            });
            match readme {
                Some((_, path)) => {
                    let path = path.clone();
                    let mut json_only = headers.clone();
                    json_only.remove("accept");
                    contents(st, &json_only, repo, &path)
                }
                None => not_found(),
            }
        }
        Route::Pull { repo, number } => match st.pulls.get(&(repo.clone(), *number)) {
            Some(spec) => Answer::json(
                StatusCode::OK,
                pull_json(fixtures, &base, repo, *number, spec),
            ),
            None => not_found(),
        },
        Route::Issue { repo, number } if st.transfers.contains_key(&(repo.clone(), *number)) => {
            let (to, n) = st.transfers[&(repo.clone(), *number)].clone();
            let mut answer = Answer::error(StatusCode::MOVED_PERMANENTLY, "Moved Permanently");
            answer
                .headers
                .push(("location", format!("{base}/repos/{to}/issues/{n}")));
            answer
        }
        Route::Issue { repo, number } => match st.issues.get(&(repo.clone(), *number)) {
            Some((title, state)) => Answer::json(
                StatusCode::OK,
                issue_json(fixtures, &base, repo, *number, title, state),
            ),
            // As GitHub does: a PR's number is served by the issues API too, marked with its
            // `pull_request` key.
            None => match st.pulls.get(&(repo.clone(), *number)) {
                Some(_) => {
                    let mut v = issue_json(
                        fixtures,
                        &base,
                        repo,
                        *number,
                        &format!("Pull request {number}"),
                        "closed",
                    );
                    v["html_url"] = json!(format!("https://github.com/{repo}/pull/{number}"));
                    v["pull_request"] = json!({
                        "url": format!("{base}/repos/{repo}/pulls/{number}"),
                        "html_url": format!("https://github.com/{repo}/pull/{number}"),
                        "diff_url": format!("https://github.com/{repo}/pull/{number}.diff"),
                        "patch_url": format!("https://github.com/{repo}/pull/{number}.patch"),
                        "merged_at": "2024-01-01T00:00:00Z",
                    });
                    Answer::json(StatusCode::OK, v)
                }
                None => not_found(),
            },
        },
        Route::PullFiles { repo, number } => match st.pulls.get(&(repo.clone(), *number)) {
            Some(spec) => {
                let total = spec.files.len().min(MAX_PULL_FILES);
                page(&base, path, params, total, |i| {
                    file_json(fixtures, repo, &spec.files[i])
                })
            }
            None => not_found(),
        },
        Route::PullCommits { repo, number } => match st.pulls.get(&(repo.clone(), *number)) {
            Some(spec) => {
                let total = (spec.commits as usize).min(MAX_PULL_COMMITS);
                page(&base, path, params, total, |i| {
                    commit_json(fixtures, repo, *number, i)
                })
            }
            None => not_found(),
        },
    }
}

fn token_matches(value: &str, token: &str) -> bool {
    let Some((scheme, credential)) = value.split_once(' ') else {
        return false;
    };
    (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
        && credential == token
}

fn respond(st: &State, answer: Answer) -> Response<Full<Bytes>> {
    let (remaining, reset) = match answer.exhausted_until {
        Some(reset) => (0, reset),
        None => (st.remaining, st.reset_epoch),
    };
    let content_type = answer
        .raw
        .as_ref()
        .map_or("application/json; charset=utf-8", |(_, t)| *t);
    let mut builder = Response::builder()
        .status(answer.status)
        .header("content-type", content_type)
        .header("x-github-api-version-selected", API_VERSION)
        .header("x-github-media-type", "github.v3; format=json")
        .header(
            "x-github-request-id",
            format!("5A1B:{:04X}:{:08X}", st.requests.len(), st.remaining),
        )
        .header("x-ratelimit-limit", RATE_LIMIT.to_string())
        .header("x-ratelimit-remaining", remaining.to_string())
        .header("x-ratelimit-reset", reset.to_string())
        .header("x-ratelimit-used", (RATE_LIMIT - remaining).to_string())
        .header("x-ratelimit-resource", "core");
    for (name, value) in answer.headers {
        builder = builder.header(name, value);
    }
    let body = match (answer.status, answer.raw) {
        (StatusCode::NOT_MODIFIED, _) => Bytes::new(),
        (_, Some((raw, _))) => Bytes::from(raw),
        (_, None) => Bytes::from(answer.body.to_string()),
    };
    builder
        .body(Full::new(body))
        .expect("the stub's responses always build")
}
