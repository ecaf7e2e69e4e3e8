//! GitHub's GraphQL API (`POST {api}/graphql`): merged pull requests page by page for backfill,
//! and one pull request with its files and closing issues for enrichment.
//!
//! The queries live in `queries.graphql` and are typed by `graphql_client`, which checks them
//! against GitHub's published schema when the crate compiles. Every answer's `rateLimit` is
//! returned to the caller, which decides whether to wait for `resetAt`. Secondary limits
//! (403/429 with `Retry-After`) are waited out when the wait fits the caller's deadline; 502s,
//! 503s, 504s and timeouts are [`GraphQlError::Transient`], retried by the caller (backfill asks
//! for smaller pages after one).

use std::time::{Duration, Instant};

use graphql_client::GraphQLQuery;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use serde::Deserialize;
use time::OffsetDateTime;

use super::rest::{default_headers, names_secondary_limit, rate_limit_wait, reset_wait};
use super::{ChangedFile, LinkedIssue, PullTotals};
use chronicle_config::secret::Secret;
use chronicle_domain::{MergedPullRequest, RepoName};

mod convert;
use convert::*;

// The schema's custom scalars, as graphql_client maps them.
type DateTime = String;
#[allow(clippy::upper_case_acronyms)]
type URI = String;
type GitObjectID = String;

#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../../tests/fixtures/github/graphql/schema.graphql",
    query_path = "src/queries.graphql",
    response_derives = "Debug"
)]
pub struct MergedPullRequests;

#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../../tests/fixtures/github/graphql/schema.graphql",
    query_path = "src/queries.graphql",
    response_derives = "Debug"
)]
pub struct PullRequestByNumber;

#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../../tests/fixtures/github/graphql/schema.graphql",
    query_path = "src/queries.graphql",
    response_derives = "Debug"
)]
pub struct PullRequestFiles;

#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "../../tests/fixtures/github/graphql/schema.graphql",
    query_path = "src/queries.graphql",
    response_derives = "Debug"
)]
pub struct RepositoryExists;

/// Rate-limit answers one call waits out before it gives up.
const MAX_RATE_LIMIT_WAITS: u32 = 10;

/// Files fetched for one PR: GitHub's own cap for the files of a pull request.
pub const MAX_FILES: usize = super::MAX_FILES;

#[derive(Debug, thiserror::Error)]
pub enum GraphQlError {
    #[error("GitHub refused the token ({status}): it is missing, expired or revoked")]
    Unauthorized { status: u16 },
    #[error("GitHub has no repository {repo}, or the token cannot read it")]
    RepositoryNotFound { repo: String },
    #[error("GitHub names the repository {actual}, not {asked}: run the command with {actual} (rows are keyed by GitHub's own name)")]
    RepositoryName { asked: String, actual: String },
    #[error("GitHub has no pull request {repo}#{number}, or the token cannot read it")]
    PullRequestNotFound { repo: String, number: u64 },
    #[error("GitHub rate limit for {what}: must wait {wait:?} (until {reset_at}), more than the time left")]
    RateLimited {
        what: String,
        wait: Duration,
        reset_at: String,
    },
    #[error("GitHub GraphQL {what} failed ({message}); worth retrying, with a smaller page")]
    Transient { what: String, message: String },
    #[error("GitHub rejected the {what} query: {messages}")]
    Query { what: String, messages: String },
    #[error("GitHub answered {status} for {what}: {message}")]
    Refused {
        status: u16,
        what: String,
        message: String,
    },
    #[error("GitHub's answer to {what} is not the expected JSON: {message}")]
    Decode { what: String, message: String },
    #[error("no time left for GitHub GraphQL {what}")]
    OutOfTime { what: String },
    #[error("no GitHub App installation token: {0}")]
    Installation(#[from] crate::installation::InstallationError),
}

impl GraphQlError {
    /// The token or the repository is wrong: a person must act, a retry cannot help.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            GraphQlError::Unauthorized { .. }
                | GraphQlError::RepositoryNotFound { .. }
                | GraphQlError::RepositoryName { .. }
                | GraphQlError::Query { .. }
                | GraphQlError::Refused { .. }
        )
    }
}

/// `rateLimit` of one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    pub cost: u64,
    pub remaining: u64,
    pub limit: u64,
    pub reset_at: OffsetDateTime,
}

/// One merged pull request with everything enrichment stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphPull {
    pub pr: MergedPullRequest,
    pub created_at: OffsetDateTime,
    pub totals: PullTotals,
    pub files: Vec<ChangedFile>,
    /// Set when the PR has more than the files returned: the cursor to continue from.
    pub more_files: Option<String>,
    pub linked_issues: Vec<LinkedIssue>,
    /// Who approved it or asked for changes (logins, first review first, without its author
    /// and bots, at most [`MAX_REVIEWERS`]).
    pub reviewers: Vec<String>,
}

/// Reviewers kept per PR.
pub const MAX_REVIEWERS: usize = 10;

/// One page of a repository's merged pull requests, oldest created first.
#[derive(Debug, Clone)]
pub struct PullPage {
    pub pulls: Vec<GraphPull>,
    pub next: Option<String>,
    /// The cursor after this page's last PR, even on the last page: where a later run resumes.
    pub end_cursor: Option<String>,
    pub total: u64,
    pub rate: Option<RateLimit>,
}

/// Called before the client sleeps for a rate limit: how long, and why.
pub type WaitNotice = std::sync::Arc<dyn Fn(Duration, &str) + Send + Sync>;

#[derive(Clone)]
pub struct GraphQlClient {
    http: reqwest::Client,
    url: String,
    timeout: Duration,
    notice: Option<WaitNotice>,
    auth: crate::installation::Auth,
    requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The points left in the hour, as the last answer said (`u64::MAX`: none said yet).
    rate_remaining: std::sync::Arc<std::sync::atomic::AtomicU64>,
    last_rate: std::sync::Arc<std::sync::Mutex<Option<RateLimit>>>,
}

/// `{api}/graphql` for api.github.com; `https://HOST/api/graphql` for a GitHub Enterprise
/// Server's `https://HOST/api/v3`.
pub fn graphql_url(api_url: &str) -> String {
    let base = api_url.trim_end_matches('/');
    match base.strip_suffix("/api/v3") {
        Some(host) => format!("{host}/api/graphql"),
        None => format!("{base}/graphql"),
    }
}

#[derive(Deserialize)]
struct Envelope<T> {
    data: Option<T>,
    #[serde(default)]
    errors: Vec<ErrorEntry>,
}

#[derive(Debug, Deserialize)]
struct ErrorEntry {
    #[serde(default)]
    message: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    path: Vec<serde_json::Value>,
}

impl ErrorEntry {
    /// GitHub's answer to a token without `issues: read` (an installation that has not
    /// granted it): linked issues null, FORBIDDEN. The rest of the answer is whole; the PR is
    /// enriched without its linked issues.
    fn issues_not_granted(&self) -> bool {
        self.kind.as_deref() == Some("FORBIDDEN")
            && self
                .path
                .iter()
                .rev()
                .find(|p| p.is_string())
                .and_then(|p| p.as_str())
                == Some("closingIssuesReferences")
    }
}

/// Errors next to data: some of the answer is missing (GitHub's partial answers), worth a retry.
/// Another spelling of the name (case, or a renamed repository) would store a second copy of
/// every row: GitHub's own `nameWithOwner` must be the one asked.
fn same_name(repo: &RepoName, actual: &str) -> Result<(), GraphQlError> {
    if actual == repo.as_str() {
        Ok(())
    } else {
        Err(GraphQlError::RepositoryName {
            asked: repo.to_string(),
            actual: actual.to_string(),
        })
    }
}

fn whole(errors: &[ErrorEntry], what: &str) -> Result<(), GraphQlError> {
    if errors.iter().all(ErrorEntry::issues_not_granted) {
        return Ok(());
    }
    Err(GraphQlError::Transient {
        what: what.to_string(),
        message: format!("a partial answer: {}", joined(errors)),
    })
}

fn joined(errors: &[ErrorEntry]) -> String {
    errors
        .iter()
        .map(|e| match &e.kind {
            Some(k) => format!("{k}: {}", e.message),
            None => e.message.clone(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl GraphQlClient {
    pub fn new(api_url: &str, token: &Secret, timeout: Duration) -> Result<Self, reqwest::Error> {
        Self::with_auth(
            api_url,
            crate::installation::Auth::Token(token.clone()),
            timeout,
        )
    }

    /// A client authenticated by `auth`: a token, or a GitHub App installation's (minted as
    /// needed, and again when GitHub refuses one).
    pub fn with_auth(
        api_url: &str,
        auth: crate::installation::Auth,
        timeout: Duration,
    ) -> Result<Self, reqwest::Error> {
        let http = chronicle_http::credentialed()
            .redirect(chronicle_http::same_host_redirects())
            .default_headers(default_headers())
            .build()?;
        Ok(GraphQlClient {
            http,
            url: graphql_url(api_url),
            timeout,
            notice: None,
            auth,
            requests: Default::default(),
            rate_remaining: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX)),
            last_rate: Default::default(),
        })
    }

    /// Tells `notice` before each rate-limit wait (the CLI shows it).
    pub fn with_wait_notice(mut self, notice: WaitNotice) -> Self {
        self.notice = Some(notice);
        self
    }

    /// GraphQL points left in the hour, as the last answer said.
    pub fn rate_remaining(&self) -> Option<u64> {
        let n = self
            .rate_remaining
            .load(std::sync::atomic::Ordering::Relaxed);
        (n != u64::MAX).then_some(n)
    }

    fn note_rate(&self, rate: Option<&RateLimit>) {
        if let Some(rate) = rate {
            self.rate_remaining
                .store(rate.remaining, std::sync::atomic::Ordering::Relaxed);
            *self.last_rate.lock().unwrap_or_else(|e| e.into_inner()) = Some(rate.clone());
        }
    }

    /// The budget as the last answer of this client said: shared by every run that uses it
    /// (the repositories of one installation draw on one budget).
    pub fn last_rate(&self) -> Option<RateLimit> {
        self.last_rate
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Requests sent so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// One page of merged pull requests after `after`, `first` at a time.
    pub async fn merged_pulls(
        &self,
        repo: &RepoName,
        first: u32,
        after: Option<&str>,
        deadline: Option<Instant>,
    ) -> Result<PullPage, GraphQlError> {
        let what = format!("merged pull requests of {repo}");
        let variables = merged_pull_requests::Variables {
            owner: repo.owner().to_string(),
            name: repo.name().to_string(),
            first: i64::from(first),
            after: after.map(str::to_string),
        };
        let (data, errors) = self
            .post::<MergedPullRequests>(variables, &what, deadline)
            .await?;
        let rate = data
            .rate_limit
            .map(|r| rate_limit(r.cost, r.remaining, r.limit, &r.reset_at));
        self.note_rate(rate.as_ref());
        let Some(repository) = data.repository else {
            return Err(not_found_or(&errors, &what, || {
                GraphQlError::RepositoryNotFound {
                    repo: repo.to_string(),
                }
            }));
        };
        whole(&errors, &what)?;
        same_name(repo, &repository.name_with_owner)?;
        let connection = repository.pull_requests;
        let mut pulls = Vec::new();
        for node in connection.nodes.into_iter().flatten().flatten() {
            if let Some(pull) = from_fields_merged(repo, node, &what)? {
                pulls.push(pull);
            }
        }
        Ok(PullPage {
            pulls,
            next: connection
                .page_info
                .has_next_page
                .then(|| connection.page_info.end_cursor.clone())
                .flatten(),
            end_cursor: connection.page_info.end_cursor,
            total: u64::try_from(connection.total_count).unwrap_or_default(),
            rate,
        })
    }

    /// `Ok` when `repo` exists, the token reads it, and GitHub spells its name as given
    /// ([`GraphQlError::RepositoryNotFound`], [`GraphQlError::RepositoryName`] otherwise): what
    /// a command checks before it writes anything.
    pub async fn repository(
        &self,
        repo: &RepoName,
        deadline: Option<Instant>,
    ) -> Result<(), GraphQlError> {
        let what = format!("repository {repo}");
        let variables = repository_exists::Variables {
            owner: repo.owner().to_string(),
            name: repo.name().to_string(),
        };
        let (data, errors) = self
            .post::<RepositoryExists>(variables, &what, deadline)
            .await?;
        let rate = data
            .rate_limit
            .map(|r| rate_limit(r.cost, r.remaining, r.limit, &r.reset_at));
        self.note_rate(rate.as_ref());
        let Some(repository) = data.repository else {
            return Err(not_found_or(&errors, &what, || {
                GraphQlError::RepositoryNotFound {
                    repo: repo.to_string(),
                }
            }));
        };
        whole(&errors, &what)?;
        same_name(repo, &repository.name_with_owner)
    }

    /// One pull request by number, with its first 100 files (see [`Self::remaining_files`]).
    pub async fn pull(
        &self,
        repo: &RepoName,
        number: u64,
        deadline: Option<Instant>,
    ) -> Result<(Option<GraphPull>, Option<RateLimit>), GraphQlError> {
        let what = format!("pull request {repo}#{number}");
        let variables = pull_request_by_number::Variables {
            owner: repo.owner().to_string(),
            name: repo.name().to_string(),
            number: i64::try_from(number).unwrap_or(i64::MAX),
        };
        let (data, errors) = self
            .post::<PullRequestByNumber>(variables, &what, deadline)
            .await?;
        let rate = data
            .rate_limit
            .map(|r| rate_limit(r.cost, r.remaining, r.limit, &r.reset_at));
        self.note_rate(rate.as_ref());
        let Some(repository) = data.repository else {
            return Err(not_found_or(&errors, &what, || {
                GraphQlError::RepositoryNotFound {
                    repo: repo.to_string(),
                }
            }));
        };
        let Some(node) = repository.pull_request else {
            return Err(not_found_or(&errors, &what, || {
                GraphQlError::PullRequestNotFound {
                    repo: repo.to_string(),
                    number,
                }
            }));
        };
        whole(&errors, &what)?;
        Ok((from_fields_by_number(repo, node, &what)?, rate))
    }

    /// The files of `pull` after its first page, up to [`MAX_FILES`] in all: one request (one
    /// point) per 100 files.
    pub async fn remaining_files(
        &self,
        pull: &mut GraphPull,
        deadline: Option<Instant>,
    ) -> Result<Option<RateLimit>, GraphQlError> {
        let repo = pull.pr.repo.clone();
        let number = pull.pr.number;
        let what = format!("files of {repo}#{number}");
        let mut rate = None;
        // The cursor is only moved past a page once it is stored: a failed call can be retried.
        while let Some(after) = pull.more_files.clone() {
            if pull.files.len() >= MAX_FILES {
                break;
            }
            let variables = pull_request_files::Variables {
                owner: repo.owner().to_string(),
                name: repo.name().to_string(),
                number: i64::try_from(number).unwrap_or(i64::MAX),
                after: Some(after),
            };
            let (data, errors) = self
                .post::<PullRequestFiles>(variables, &what, deadline)
                .await?;
            rate = data
                .rate_limit
                .map(|r| rate_limit(r.cost, r.remaining, r.limit, &r.reset_at));
            self.note_rate(rate.as_ref());
            let files = data
                .repository
                .and_then(|r| r.pull_request)
                .and_then(|p| p.files)
                .ok_or_else(|| {
                    not_found_or(&errors, &what, || GraphQlError::PullRequestNotFound {
                        repo: repo.to_string(),
                        number,
                    })
                })?;
            whole(&errors, &what)?;
            pull.files
                .extend(files.nodes.into_iter().flatten().flatten().map(|f| {
                    changed_file(
                        f.path,
                        f.additions,
                        f.deletions,
                        patch_status_files(&f.change_type),
                    )
                }));
            pull.more_files = files
                .page_info
                .has_next_page
                .then_some(files.page_info.end_cursor)
                .flatten();
        }
        pull.files.truncate(MAX_FILES);
        pull.more_files = None;
        Ok(rate)
    }

    /// Sends the query once, within `left` (or the client's timeout): GitHub's status, headers
    /// and body, or a transient error when no answer came.
    async fn send<B: serde::Serialize>(
        &self,
        body: &B,
        left: Option<Duration>,
        what: &str,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, bytes::Bytes), GraphQlError> {
        let mut refreshed = false;
        loop {
            // A token function slow to answer must not outlast the caller's deadline.
            let token = match left {
                Some(left) => tokio::time::timeout(left, self.auth.bearer())
                    .await
                    .map_err(|_| GraphQlError::OutOfTime {
                        what: what.to_string(),
                    })??,
                None => self.auth.bearer().await?,
            };
            let answer = self.send_with(body, left, what, &token).await?;
            // An installation token expired or was revoked: a new one, once.
            if answer.0 == StatusCode::UNAUTHORIZED && !refreshed && self.auth.refused(&token) {
                tracing::info!(
                    what,
                    "GitHub refused the installation token; minting another"
                );
                refreshed = true;
                continue;
            }
            return Ok(answer);
        }
    }

    async fn send_with<B: serde::Serialize>(
        &self,
        body: &B,
        left: Option<Duration>,
        what: &str,
        token: &Secret,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, bytes::Bytes), GraphQlError> {
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sent = self
            .http
            .post(&self.url)
            .header(
                reqwest::header::AUTHORIZATION,
                crate::installation::sensitive_bearer(token),
            )
            .timeout(left.map_or(self.timeout, |l| l.min(self.timeout)))
            .json(body)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                return Err(GraphQlError::Transient {
                    what: what.to_string(),
                    message: if e.is_timeout() {
                        "timed out".to_string()
                    } else {
                        chronicle_domain::error::error_chain(&e)
                    },
                })
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| GraphQlError::Transient {
                what: what.to_string(),
                message: chronicle_domain::error::error_chain(&e),
            })?;
        Ok((status, headers, bytes))
    }

    /// One query: waits out secondary limits that fit the deadline (no deadline: any wait).
    async fn post<Q: GraphQLQuery>(
        &self,
        variables: Q::Variables,
        what: &str,
        deadline: Option<Instant>,
    ) -> Result<(Q::ResponseData, Vec<ErrorEntry>), GraphQlError>
    where
        Q::ResponseData: serde::de::DeserializeOwned,
    {
        let body = Q::build_query(variables);
        // Rate-limit answers waited out per call, so a limit that never lifts cannot loop forever.
        let mut waits = 0u32;
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l < Duration::from_secs(1)) {
                return Err(GraphQlError::OutOfTime {
                    what: what.to_string(),
                });
            }
            let (status, headers, bytes) = self.send(&body, left, what).await?;
            let wait = match judge::<Q::ResponseData>(status, &headers, &bytes, what)? {
                Judged::Answer(data, errors) => return Ok((data, errors)),
                Judged::Wait(wait) => wait,
            };
            let reset_at = OffsetDateTime::now_utc() + wait;
            waits += 1;
            if waits > MAX_RATE_LIMIT_WAITS {
                return Err(GraphQlError::RateLimited {
                    what: format!("{what} (still limited after {MAX_RATE_LIMIT_WAITS} waits)"),
                    wait,
                    reset_at: chronicle_domain::rfc3339_seconds(reset_at),
                });
            }
            if let Some(d) = deadline {
                if Instant::now() + wait + Duration::from_secs(1) >= d {
                    return Err(GraphQlError::RateLimited {
                        what: what.to_string(),
                        wait,
                        reset_at: chronicle_domain::rfc3339_seconds(reset_at),
                    });
                }
            }
            tracing::info!(
                what,
                wait_ms = wait.as_millis() as u64,
                "GitHub rate limit: waiting"
            );
            if let Some(notice) = &self.notice {
                notice(wait, "GitHub secondary rate limit");
            }
            tokio::time::sleep(wait).await;
        }
    }
}

/// What one answer means: the data (with any partial errors), or a rate limit to wait out.
enum Judged<T> {
    Answer(T, Vec<ErrorEntry>),
    Wait(Duration),
}

/// Reads one answer of GitHub's: unauthorized, rate limited (primary or secondary), a server
/// error worth retrying, a refusal, or data (GitHub's own timeouts come as `data: null`).
fn judge<T: serde::de::DeserializeOwned>(
    status: StatusCode,
    headers: &reqwest::header::HeaderMap,
    bytes: &[u8],
    what: &str,
) -> Result<Judged<T>, GraphQlError> {
    if status == StatusCode::UNAUTHORIZED {
        return Err(GraphQlError::Unauthorized {
            status: status.as_u16(),
        });
    }
    if let Some(wait) = rate_limit_wait(status, headers)
        .or_else(|| secondary_limit(status, bytes).then_some(Duration::from_secs(60)))
    {
        return Ok(Judged::Wait(wait));
    }
    if matches!(
        status,
        StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT
            | StatusCode::INTERNAL_SERVER_ERROR
    ) {
        return Err(GraphQlError::Transient {
            what: what.to_string(),
            message: format!("GitHub answered {status}"),
        });
    }
    if !status.is_success() {
        return Err(GraphQlError::Refused {
            status: status.as_u16(),
            what: what.to_string(),
            message: message_of(bytes),
        });
    }
    let envelope: Envelope<T> =
        serde_json::from_slice(bytes).map_err(|e| GraphQlError::Decode {
            what: what.to_string(),
            message: e.to_string(),
        })?;
    let limited = envelope
        .errors
        .iter()
        .any(|e| e.kind.as_deref() == Some("RATE_LIMITED"));
    let timed_out = envelope.errors.iter().any(|e| {
        let m = e.message.to_ascii_lowercase();
        m.contains("timeout") || m.contains("timedout") || m.contains("something went wrong")
    });
    match envelope.data {
        _ if limited => Ok(Judged::Wait(primary_reset_wait(headers))),
        Some(data) => Ok(Judged::Answer(data, envelope.errors)),
        None if timed_out => Err(GraphQlError::Transient {
            what: what.to_string(),
            message: joined(&envelope.errors),
        }),
        None => Err(GraphQlError::Query {
            what: what.to_string(),
            messages: joined(&envelope.errors),
        }),
    }
}
/// GitHub's secondary limits sometimes come as a plain 403 naming themselves in the message.
fn secondary_limit(status: StatusCode, body: &[u8]) -> bool {
    (status == StatusCode::FORBIDDEN || status == StatusCode::TOO_MANY_REQUESTS)
        && names_secondary_limit(&message_of(body))
}

/// The primary limit spent (a `RATE_LIMITED` error): until `x-ratelimit-reset`, else a minute.
fn primary_reset_wait(headers: &HeaderMap) -> Duration {
    reset_wait(headers).unwrap_or(Duration::from_secs(60))
}

fn message_of(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned())
}

/// A `NOT_FOUND` error names the missing object; any other error without data is the query's.
fn not_found_or(
    errors: &[ErrorEntry],
    what: &str,
    not_found: impl FnOnce() -> GraphQlError,
) -> GraphQlError {
    if errors.is_empty()
        || errors
            .iter()
            .any(|e| e.kind.as_deref() == Some("NOT_FOUND"))
    {
        not_found()
    } else {
        GraphQlError::Query {
            what: what.to_string(),
            messages: joined(errors),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enterprise_server_urls() {
        assert_eq!(
            graphql_url("https://api.github.com"),
            "https://api.github.com/graphql"
        );
        assert_eq!(
            graphql_url("https://ghe.example.com/api/v3/"),
            "https://ghe.example.com/api/graphql"
        );
        assert_eq!(
            graphql_url("http://127.0.0.1:9/"),
            "http://127.0.0.1:9/graphql"
        );
    }
}
