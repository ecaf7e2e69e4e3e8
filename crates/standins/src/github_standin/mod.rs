//! The local stand-in for GitHub, one server with one token, shared by the tests and `chronicle
//! standin`: its REST half (every other path) is [`rest`]; its GraphQL half (`POST /graphql`),
//! here, is stricter than GitHub:
//!
//! - every query is parsed and validated against GitHub's published schema
//!   (`tests/fixtures/github/graphql/schema.graphql`) with apollo-compiler, and its variables
//!   coerced against the operation's declarations; an unknown field, a wrong argument or a bad
//!   variable gets GitHub's `{"errors": [...]}` answer;
//! - connections need `first` or `last` (1 to 100) whenever nodes or edges are asked for, and a
//!   query over 500,000 nodes is refused, as GitHub does;
//! - each query costs what GitHub's published rule says (one request per connection, multiplied
//!   through the parents' `first`, divided by 100, at least 1), charged against a budget with a
//!   `resetAt` (a compressed window in tests); a spent budget answers `RATE_LIMITED`;
//! - faults can be injected: a secondary-limit 403 with `Retry-After`, a 502, a hang (the client
//!   times out), a partial answer (`errors` next to `data`).
//!
//! It answers from generated data shaped like GitHub's (see [`history_pulls`]). Every request
//! that is not GraphQL is counted as a REST call ([`Stats::rest_requests`]; tests of GraphQL-only
//! paths assert none was made) and answered by [`rest`] from what was registered there.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use apollo_compiler::ast;
use apollo_compiler::executable::{Field, Selection, SelectionSet};
use apollo_compiler::response::JsonMap;
use apollo_compiler::validation::Valid;
use apollo_compiler::{ExecutableDocument, Schema};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;
use tokio::net::TcpListener;

use crate::http_server::Serving;
use crate::synthetic::{history, HistorySpec, Rng, SyntheticPr};

mod resolve;
pub mod rest;
use resolve::*;
pub use rest::{DeliverySpec, FileSpec, InstalledSpec, PullSpec, RecordedRequest, StubAttempt};

/// GitHub's published schema, with one duplicate declaration removed (see tests/fixtures).
const SCHEMA_SDL: &str = include_str!("../../../../tests/fixtures/github/graphql/schema.graphql");
/// GitHub's node limit per query.
const MAX_NODES: u64 = 500_000;

/// The schema, parsed once per process.
pub fn schema() -> &'static Valid<Schema> {
    static SCHEMA: OnceLock<Valid<Schema>> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        // GitHub's schema has deprecated interface fields strict validators reject; it is
        // GitHub's own, so it is taken as valid (what is checked strictly is each query).
        let schema = match Schema::parse(SCHEMA_SDL, "schema.graphql") {
            Ok(s) => s,
            Err(with_errors) => with_errors.partial,
        };
        Valid::assume_valid(schema)
    })
}

/// What the stand-in can be told to do to the next matching query.
#[derive(Debug, Clone)]
pub enum Fault {
    /// 403 with `Retry-After` and GitHub's secondary-limit message.
    SecondaryLimit { retry_after_secs: u64 },
    /// 502 Bad Gateway (GitHub's answer to a query that took too long).
    BadGateway,
    /// No answer for this long (longer than the client's timeout).
    Hang(Duration),
    /// `data` with the first pull request nulled, and an `errors` entry for it.
    Partial,
}

/// Counters for tests and benches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub graphql_requests: u64,
    pub points: u64,
    pub rest_requests: u64,
    /// Queries answered with validation errors.
    pub rejected: u64,
    pub rate_limited: u64,
    pub faults_served: u64,
    /// The fewest points left after a served query, over the run (`None`: none served).
    pub min_remaining: Option<u64>,
}

struct Budget {
    limit: u64,
    window: Duration,
    started: Instant,
    started_at: OffsetDateTime,
    used: u64,
}

impl Budget {
    fn roll(&mut self) {
        if self.started.elapsed() >= self.window {
            self.started = Instant::now();
            self.started_at = OffsetDateTime::now_utc();
            self.used = 0;
        }
    }

    fn reset_at(&self) -> OffsetDateTime {
        self.started_at + self.window
    }
}

struct State {
    token: String,
    /// The App's installations and their tokens, shared with the REST half.
    installations: Arc<Mutex<rest::installations::Installations>>,
    repos: HashMap<String, RepoData>,
    budget: Budget,
    faults: VecDeque<(Option<String>, Fault)>,
    stats: Stats,
    /// Fields this server's schema lacks (an older Enterprise Server): `(type, field)`.
    missing: Vec<(String, String)>,
}

struct RepoData {
    name_with_owner: String,
    /// Every pull request (merged or not), in creation order.
    pulls: Vec<Value>,
}

#[derive(Clone)]
pub struct GitHubStandIn {
    url: String,
    state: Arc<Mutex<State>>,
    /// The REST half (`rest.rs`): every path but `/graphql`.
    rest: Arc<Mutex<rest::State>>,
    installations: Arc<Mutex<rest::installations::Installations>>,
    serving: Serving,
}

impl GitHubStandIn {
    /// Serves on a free loopback port; `token` is the only one accepted.
    pub async fn start(token: &str) -> std::io::Result<Self> {
        // An empty token would let any request through: the stand-in is stricter than GitHub.
        assert!(
            !token.is_empty(),
            "the GitHub stand-in needs a token to check"
        );
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let installations: Arc<Mutex<rest::installations::Installations>> = Arc::default();
        let state = Arc::new(Mutex::new(State {
            token: token.to_string(),
            installations: installations.clone(),
            repos: HashMap::new(),
            budget: Budget {
                limit: 5_000,
                window: Duration::from_secs(3_600),
                started: Instant::now(),
                started_at: OffsetDateTime::now_utc(),
                used: 0,
            },
            faults: VecDeque::new(),
            stats: Stats::default(),
            missing: Vec::new(),
        }));
        let rest = Arc::new(Mutex::new(rest::State::new(
            token,
            &url,
            installations.clone(),
        )));
        let fixtures = Arc::new(rest::Fixtures::load());
        let (graphql, rest_state) = (state.clone(), rest.clone());
        let serving = Serving::spawn(listener, move |request| {
            let (graphql, rest_state, fixtures) =
                (graphql.clone(), rest_state.clone(), fixtures.clone());
            async move {
                if request.uri().path() == "/graphql" {
                    Ok::<_, Infallible>(handle(graphql, request).await)
                } else {
                    graphql
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .stats
                        .rest_requests += 1;
                    rest::handle(rest_state, fixtures, request).await
                }
            }
        });
        Ok(GitHubStandIn {
            url,
            state,
            rest,
            installations,
            serving,
        })
    }

    /// The REST base URL (GraphQL is `{url}/graphql`, as on api.github.com).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds (or replaces) a repository's pull requests, in creation order.
    pub fn set_repo(&self, name_with_owner: &str, mut pulls: Vec<Value>) {
        pulls.sort_by(|a, b| a["createdAt"].as_str().cmp(&b["createdAt"].as_str()));
        self.lock().repos.insert(
            name_with_owner.to_ascii_lowercase(),
            RepoData {
                name_with_owner: name_with_owner.to_string(),
                pulls,
            },
        );
    }

    /// Adds one pull request, or replaces the one with its number (an edit on GitHub).
    pub fn put_pull(&self, name_with_owner: &str, pull: Value) {
        let mut state = self.lock();
        let repo = state
            .repos
            .entry(name_with_owner.to_ascii_lowercase())
            .or_insert_with(|| RepoData {
                name_with_owner: name_with_owner.to_string(),
                pulls: Vec::new(),
            });
        repo.pulls.retain(|p| p["number"] != pull["number"]);
        repo.pulls.push(pull);
        repo.pulls
            .sort_by(|a, b| a["createdAt"].as_str().cmp(&b["createdAt"].as_str()));
    }

    /// The points budget: `limit` per `window` (GitHub: 5,000 an hour).
    pub fn set_budget(&self, limit: u64, window: Duration) {
        let mut state = self.lock();
        state.budget = Budget {
            limit,
            window,
            started: Instant::now(),
            started_at: OffsetDateTime::now_utc(),
            used: 0,
        };
    }

    /// Spends `points` of the current window, as another user of the same token would.
    pub fn spend(&self, points: u64) {
        let mut state = self.lock();
        state.budget.roll();
        state.budget.used = (state.budget.used + points).min(state.budget.limit);
    }

    /// Applies `fault` to the next query (of operation `operation`, if given).
    pub fn fault(&self, operation: Option<&str>, fault: Fault) {
        self.lock()
            .faults
            .push_back((operation.map(str::to_string), fault));
    }

    /// Plays an older GitHub Enterprise Server whose schema lacks `type_name.field`: a query
    /// selecting it is refused the way GitHub refuses an unknown field.
    pub fn without_field(&self, type_name: &str, field: &str) {
        self.lock()
            .missing
            .push((type_name.to_string(), field.to_string()));
    }

    pub fn stats(&self) -> Stats {
        self.lock().stats.clone()
    }

    pub async fn stop(&self) {
        self.serving.stop().await;
    }
}

fn answer(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a static response is valid")
}

fn graphql_errors(messages: impl IntoIterator<Item = String>) -> Value {
    json!({ "errors": messages.into_iter().map(|m| json!({ "message": m })).collect::<Vec<_>>() })
}

async fn handle(state: Arc<Mutex<State>>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    if request.method() != http::Method::POST {
        return answer(
            StatusCode::NOT_FOUND,
            &json!({ "message": "GraphQL only accepts POST" }),
        );
    }
    // The stand-in's token, or an installation's until it expires.
    let authorized = {
        let st = lock();
        st.installations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .on_graphql_request(st.stats.graphql_requests + 1);
        let given = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_string();
        let installation = match st
            .installations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .bearer(&given)
        {
            rest::installations::Bearer::Installation(id) => Some(id),
            _ => None,
        };
        let reads_issues = st
            .installations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .token_reads_issues(&given);
        (
            given == st.token || installation.is_some(),
            installation,
            reads_issues,
        )
    };
    let (authorized, installation, reads_issues) = authorized;
    let has_agent = request.headers().contains_key(http::header::USER_AGENT);
    let Ok(body) = request.into_body().collect().await.map(|b| b.to_bytes()) else {
        return answer(
            StatusCode::BAD_REQUEST,
            &json!({ "message": "Body unreadable" }),
        );
    };
    lock().stats.graphql_requests += 1;
    if !authorized {
        return answer(
            StatusCode::UNAUTHORIZED,
            &json!({ "message": "Bad credentials", "documentation_url": "https://docs.github.com/graphql" }),
        );
    }
    if !has_agent {
        // GitHub refuses requests without a User-Agent.
        return answer(
            StatusCode::FORBIDDEN,
            &json!({ "message": "Request forbidden by administrative rules. Please make sure your request has a User-Agent header" }),
        );
    }
    let Parsed {
        document,
        operation,
        variables,
    } = match parse(&state, &body) {
        Ok(parsed) => parsed,
        Err(refusal) => return refusal,
    };
    // An installation's token reads only its repositories: another is NOT_FOUND, as GitHub
    // answers a repository it cannot see.
    if let (Some(id), Some(owner), Some(name)) = (
        installation,
        variables.get("owner").and_then(|v| v.as_str()),
        variables.get("name").and_then(|v| v.as_str()),
    ) {
        let repo = format!("{owner}/{name}");
        let st = lock();
        let readable = st
            .installations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .can_read(id, &repo);
        if !readable {
            return answer(
                StatusCode::OK,
                &json!({"data": {"repository": null}, "errors": [{
                    "type": "NOT_FOUND", "path": ["repository"], "locations": [{"line": 2, "column": 3}],
                    "message": format!("Could not resolve to a Repository with the name '{repo}'."),
                }]}),
            );
        }
    }
    let context = Context {
        document: &document,
        variables: &variables,
    };
    let (requests, nodes) = match context.cost(&operation.selection_set, 1) {
        Ok(c) => c,
        Err(message) => {
            lock().stats.rejected += 1;
            return answer(StatusCode::OK, &graphql_errors([message]));
        }
    };
    if nodes > MAX_NODES {
        lock().stats.rejected += 1;
        return answer(
            StatusCode::OK,
            &graphql_errors([format!(
                "By the time this query traverses to the nodes connection, it is requesting up to {nodes} possible nodes which exceeds the maximum limit of {MAX_NODES}."
            )]),
        );
    }
    // GitHub: max(1, round(requests / 100)).
    let cost = ((requests + 50) / 100).max(1);

    // Faults, in the order they were asked for.
    let fault = take_fault(&state, &operation);
    if let Some(response) = fault_answer(fault.as_ref()).await {
        return response;
    }

    // The primary budget.
    let (remaining, reset_at, limit, used) = match charge(&state, cost) {
        Ok(charged) => charged,
        Err(refusal) => return refusal,
    };
    let rate = json!({
        "__typename": "RateLimit",
        "cost": cost,
        "remaining": remaining,
        "limit": limit,
        "used": used,
        "nodeCount": nodes,
        "resetAt": reset_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
    });
    let data = {
        let s = lock();
        let root = Root {
            state: &s,
            rate: &rate,
        };
        context.select(&root, &operation.selection_set, &Value::Null, "Query")
    };
    let mut data = match data {
        Ok(d) => d,
        Err((message, kind)) => {
            let mut error = json!({ "message": message });
            if let Some(kind) = kind {
                error["type"] = json!(kind);
            }
            return answer(StatusCode::OK, &json!({ "errors": [error] }));
        }
    };
    let mut errors: Vec<Value> = std::mem::take(&mut data.errors);
    if !reads_issues {
        // A token without `issues`: GitHub nulls each closing-issues connection, FORBIDDEN.
        rest::installations::forbid_issues(&mut data.value, &mut Vec::new(), &mut errors);
    }
    if matches!(fault, Some(Fault::Partial)) {
        // The first pull request lost, as when GitHub's own resolvers time out.
        if let Some(first) = data.value.pointer_mut("/repository/pullRequests/nodes/0") {
            *first = Value::Null;
        }
        errors.push(json!({
            "message": "Something went wrong while executing your query. This may be the result of a timeout, or it could be a GitHub bug.",
            "path": ["repository", "pullRequests", "nodes", 0],
        }));
    }
    let mut body = json!({ "data": data.value });
    if !errors.is_empty() {
        body["errors"] = Value::Array(errors);
    }
    with_rate_headers(
        answer(StatusCode::OK, &body),
        limit,
        remaining,
        used,
        reset_at,
    )
}

/// GitHub's `x-ratelimit-*` headers on an answer.
fn with_rate_headers(
    mut response: Response<Full<Bytes>>,
    limit: u64,
    remaining: u64,
    used: u64,
    reset_at: OffsetDateTime,
) -> Response<Full<Bytes>> {
    let h = response.headers_mut();
    for (name, value) in [
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", remaining.to_string()),
        ("x-ratelimit-used", used.to_string()),
        ("x-ratelimit-reset", reset_at.unix_timestamp().to_string()),
        ("x-ratelimit-resource", "graphql".to_string()),
    ] {
        h.insert(name, value.parse().expect("ascii"));
    }
    response
}

/// A GraphQL request, validated against the schema, its operation chosen and its variables
/// coerced.
struct Parsed {
    document: Valid<ExecutableDocument>,
    operation: apollo_compiler::Node<apollo_compiler::executable::Operation>,
    variables: JsonMap,
}

/// Parses and validates the request as GitHub would; `Err` is the answer refusing it.
#[allow(clippy::result_large_err)]
fn parse(state: &Mutex<State>, body: &[u8]) -> Result<Parsed, Response<Full<Bytes>>> {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Err(answer(
                StatusCode::BAD_REQUEST,
                &json!({ "message": format!("Problems parsing JSON: {e}") }),
            ))
        }
    };
    let query = request["query"].as_str().unwrap_or_default().to_string();
    let operation_name = request["operationName"].as_str().map(str::to_string);
    let variables: JsonMap = match request.get("variables") {
        None | Some(Value::Null) => JsonMap::new(),
        Some(v) => match serde_json::from_value(v.clone()) {
            Ok(m) => m,
            Err(e) => {
                lock().stats.rejected += 1;
                return Err(answer(
                    StatusCode::OK,
                    &graphql_errors([format!("variables: {e}")]),
                ));
            }
        },
    };

    let schema = schema();
    let document = match ExecutableDocument::parse_and_validate(schema, query, "query.graphql") {
        Ok(d) => d,
        Err(with_errors) => {
            lock().stats.rejected += 1;
            let messages: Vec<String> = with_errors
                .errors
                .iter()
                .map(|d| d.error.to_string())
                .collect();
            return Err(answer(StatusCode::OK, &graphql_errors(messages)));
        }
    };
    let missing = lock().missing.clone();
    if let Some((type_name, field)) = missing.iter().find(|(t, f)| selects(&document, t, f)) {
        lock().stats.rejected += 1;
        return Err(answer(
            StatusCode::OK,
            &json!({ "errors": [{
                "message": format!("Field '{field}' doesn't exist on type '{type_name}'"),
                "extensions": { "code": "undefinedField", "typeName": type_name, "fieldName": field },
            }] }),
        ));
    }
    let operation = match document.operations.get(operation_name.as_deref()) {
        Ok(op) => op.clone(),
        Err(e) => {
            lock().stats.rejected += 1;
            return Err(answer(
                StatusCode::OK,
                &graphql_errors([e.message().to_string()]),
            ));
        }
    };
    let variables =
        match apollo_compiler::request::coerce_variable_values(schema, &operation, &variables) {
            Ok(v) => v.into_inner(),
            Err(e) => {
                lock().stats.rejected += 1;
                return Err(answer(
                    StatusCode::OK,
                    &graphql_errors([e.message().to_string()]),
                ));
            }
        };
    Ok(Parsed {
        document,
        operation,
        variables,
    })
}

/// The first scripted fault for this operation (or any), taken.
fn take_fault(
    state: &Mutex<State>,
    operation: &apollo_compiler::executable::Operation,
) -> Option<Fault> {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    let op_name = operation.name.as_ref().map(|n| n.to_string());
    let at = s
        .faults
        .iter()
        .position(|(only, _)| only.is_none() || *only == op_name);
    let fault = at.and_then(|i| s.faults.remove(i)).map(|(_, f)| f);
    if fault.is_some() {
        s.stats.faults_served += 1;
    }
    fault
}

/// The answer a fault gives instead of data (`None`: the query is answered, maybe partly).
async fn fault_answer(fault: Option<&Fault>) -> Option<Response<Full<Bytes>>> {
    match fault? {
        Fault::SecondaryLimit { retry_after_secs } => {
            let mut response = answer(
                StatusCode::FORBIDDEN,
                &json!({ "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", "documentation_url": "https://docs.github.com/graphql/overview/rate-limits-and-node-limits-for-the-graphql-api#secondary-rate-limits" }),
            );
            response.headers_mut().insert(
                "retry-after",
                retry_after_secs.to_string().parse().expect("digits"),
            );
            Some(response)
        }
        Fault::BadGateway => Some(answer(
            StatusCode::BAD_GATEWAY,
            &json!({ "message": "We couldn't respond to your request in time. Sorry about that. Please try resubmitting your request and contact us if the problem persists." }),
        )),
        Fault::Hang(d) => {
            tokio::time::sleep(*d).await;
            Some(answer(
                StatusCode::BAD_GATEWAY,
                &json!({ "message": "too late" }),
            ))
        }
        _ => None,
    }
}

/// Charges `cost` points to the primary budget: what is left, when it resets, the limit and
/// what was used; `Err` is GitHub's `RATE_LIMITED` answer when the points do not cover it.
#[allow(clippy::result_large_err)]
fn charge(
    state: &Mutex<State>,
    cost: u64,
) -> Result<(u64, OffsetDateTime, u64, u64), Response<Full<Bytes>>> {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.budget.roll();
    let remaining = s.budget.limit.saturating_sub(s.budget.used);
    if cost > remaining {
        s.stats.rate_limited += 1;
        let reset = s.budget.reset_at().unix_timestamp();
        drop(s);
        let mut response = answer(
            StatusCode::OK,
            &json!({ "errors": [{ "type": "RATE_LIMITED", "message": "API rate limit exceeded for user ID 1." }] }),
        );
        let h = response.headers_mut();
        h.insert("x-ratelimit-remaining", "0".parse().expect("digits"));
        h.insert(
            "x-ratelimit-reset",
            reset.to_string().parse().expect("digits"),
        );
        h.insert("x-ratelimit-resource", "graphql".parse().expect("ascii"));
        return Err(response);
    }
    s.budget.used += cost;
    s.stats.points += cost;
    let left = s.budget.limit - s.budget.used;
    s.stats.min_remaining = Some(s.stats.min_remaining.map_or(left, |m| m.min(left)));
    Ok((
        s.budget.limit - s.budget.used,
        s.budget.reset_at(),
        s.budget.limit,
        s.budget.used,
    ))
}

/// One merged pull request as the GitHub stand-in serves it: `files` changed files over seven
/// directories of `src/`, merged 2019-05-15 (the date of the recorded webhook samples).
pub fn standin_pull(repo: &str, number: u64, files: usize) -> serde_json::Value {
    let pr = SyntheticPr {
        number,
        title: format!("Change {files} files"),
        body: format!("Touches {files} files across seven modules."),
        author: "octocat".into(),
        labels: vec![],
        merged_at: time::macros::datetime!(2019-05-15 15:20:33 UTC),
        files: (0..files)
            .map(|i| stages::domain::FileChange {
                path: format!("src/mod{}/file{i}.rs", i % 7),
                additions: 1 + (i as u64 % 40),
                deletions: i as u64 % 9,
                status: None,
            })
            .collect(),
        reviewers: vec!["hubot".into()],
        comments: 2,
    };
    pull_json(
        repo,
        &pr,
        time::macros::datetime!(2019-05-15 14:00:00 UTC),
        &[],
    )
}

/// GitHub's shape of one pull request, from a synthetic one. `created` is when it was opened.
pub fn pull_json(
    repo: &str,
    pr: &SyntheticPr,
    created: OffsetDateTime,
    closing: &[(u64, &str)],
) -> Value {
    let rfc = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    };
    let (typename, login) = match pr.author.strip_suffix("[bot]") {
        Some(bot) => ("Bot", bot.to_string()),
        None => ("User", pr.author.clone()),
    };
    let files: Vec<Value> = pr
        .files
        .iter()
        .map(|f| {
            json!({
                "__typename": "PullRequestChangedFile",
                "path": f.path,
                "additions": f.additions,
                "deletions": f.deletions,
                "changeType": if f.deletions == 0 { "ADDED" } else { "MODIFIED" },
            })
        })
        .collect();
    json!({
        "__typename": "PullRequest",
        "number": pr.number,
        "title": pr.title,
        "body": pr.body,
        "url": format!("https://github.com/{repo}/pull/{}", pr.number),
        "state": "MERGED",
        "merged": true,
        "createdAt": rfc(created),
        "updatedAt": rfc(pr.merged_at + time::Duration::seconds(5)),
        "mergedAt": rfc(pr.merged_at),
        "author": { "__typename": typename, "login": login },
        "baseRefName": "main",
        "mergeCommit": { "__typename": "Commit", "oid": format!("{:040x}", pr.number * 7919) },
        "additions": pr.files.iter().map(|f| f.additions).sum::<u64>(),
        "deletions": pr.files.iter().map(|f| f.deletions).sum::<u64>(),
        "changedFiles": pr.files.len(),
        "commits": (0..1 + pr.number % 4).map(|_| json!({ "__typename": "PullRequestCommit" })).collect::<Vec<_>>(),
        "labels": pr.labels.iter().map(|l| json!({ "__typename": "Label", "name": l })).collect::<Vec<_>>(),
        "files": files,
        "comments": (0..pr.comments).map(|_| json!({ "__typename": "IssueComment" })).collect::<Vec<_>>(),
        // Approvals, and a comment-only review the `states` filter must leave out.
        "reviews": pr.reviewers.iter().map(|r| json!({
            "__typename": "PullRequestReview",
            "state": "APPROVED",
            "author": { "__typename": "User", "login": r },
        })).chain(std::iter::once(json!({
            "__typename": "PullRequestReview",
            "state": "COMMENTED",
            "author": { "__typename": "User", "login": "drive-by" },
        }))).collect::<Vec<_>>(),
        "closingIssuesReferences": closing.iter().map(|(n, title)| json!({
            "__typename": "Issue",
            "number": n,
            "title": title,
            "state": "CLOSED",
            "url": format!("https://github.com/{repo}/issues/{n}"),
            "repository": { "__typename": "Repository", "nameWithOwner": repo },
        })).collect::<Vec<_>>(),
    })
}

/// A repository's pull requests shaped like GitHub's: the synthetic history's merged PRs (some
/// with more than 100 files, a fifth closing an issue), opened hours to weeks before merging,
/// interleaved with PRs closed without merging (which a `MERGED` filter must leave out).
pub fn history_pulls(repo: &str, spec: &HistorySpec) -> Vec<Value> {
    let mut rng = Rng::new(spec.seed ^ 0x9e37_79b9);
    let mut out = Vec::new();
    for pr in history(spec) {
        let created = pr.merged_at - time::Duration::minutes(30 + rng.below(60 * 24 * 14) as i64);
        let issue_title = format!("Issue behind #{}", pr.number);
        let closing: Vec<(u64, &str)> = if rng.chance(20) {
            vec![(100_000 + pr.number, issue_title.as_str())]
        } else {
            Vec::new()
        };
        out.push(pull_json(repo, &pr, created, &closing));
        if rng.chance(10) {
            let mut closed = pull_json(repo, &pr, created, &[]);
            closed["number"] = json!(1_000_000 + pr.number);
            closed["state"] = json!("CLOSED");
            closed["merged"] = json!(false);
            closed["mergedAt"] = Value::Null;
            closed["mergeCommit"] = Value::Null;
            out.push(closed);
        }
    }
    out
}
