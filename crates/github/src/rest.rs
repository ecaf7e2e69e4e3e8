//! The GitHub REST client the enrich stage uses: changed files, linked issues, totals.
//!
//! Limits are GitHub's: `per_page` ≤ 100 followed through `Link: rel="next"`, at most 3000 files
//! per pull request. Rate limits (403/429 with `retry-after`, or `x-ratelimit-remaining: 0`
//! until `x-ratelimit-reset`) are waited out only if the wait fits in the time left, otherwise
//! the call fails so the stream retries the record later; 5xx and timeouts are retried with
//! backoff a bounded number of times.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::header::{HeaderMap, ACCEPT, AUTHORIZATION, USER_AGENT};
use reqwest::StatusCode;
use serde::Deserialize;

use chronicle_config::secret::Secret;
use chronicle_domain::error::error_chain;
pub use chronicle_domain::IssueScope;
use chronicle_domain::RepoName;

pub use chronicle_config::DEFAULT_GITHUB_API_URL as DEFAULT_API_URL;
pub const API_VERSION: &str = "2022-11-28";
/// GitHub returns at most this many files for one pull request.
pub const MAX_FILES: usize = 3000;
const PER_PAGE: usize = 100;
/// Time kept back from the deadline for the write-back after the last request.
pub(super) const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    #[error("GitHub answered {status} for {path}: it no longer exists or the token lost access")]
    Gone { status: u16, path: String },
    #[error("GitHub rate limit on {path}: must wait {wait:?}, more than the time left")]
    RateLimited { path: String, wait: Duration },
    #[error("GitHub answered {status} for {path} after {attempts} attempts")]
    Server {
        status: u16,
        path: String,
        attempts: u32,
    },
    #[error("GitHub request {path} failed after {attempts} attempts: {message}")]
    Transport {
        path: String,
        attempts: u32,
        message: String,
    },
    #[error("GitHub answered {status} for {path}: {message}")]
    Refused {
        status: u16,
        path: String,
        message: String,
    },
    #[error("GitHub's answer for {path} is not the expected JSON: {message}")]
    Decode { path: String, message: String },
    #[error("no time left for GitHub request {path}")]
    OutOfTime { path: String },
    #[error("no GitHub App installation token: {0}")]
    Installation(#[from] crate::installation::InstallationError),
}

/// Totals of a pull request (`GET /repos/{owner}/{repo}/pulls/{n}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PullTotals {
    pub commits: u64,
    pub additions: u64,
    pub deletions: u64,
    pub changed_files: u64,
    /// Its conversation's comments.
    #[serde(default)]
    pub comments: u64,
    /// Its approving and changes-requested reviews (GraphQL); its review comments (REST, which
    /// has no count of reviews).
    #[serde(default, alias = "review_comments")]
    pub reviews: u64,
}

/// One changed file (`GET …/pulls/{n}/files`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChangedFile {
    #[serde(rename = "filename")]
    pub path: String,
    pub status: String,
    pub additions: u64,
    pub deletions: u64,
}

/// An issue a PR closes, as GitHub describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedIssue {
    pub repo: RepoName,
    pub number: u64,
    pub title: String,
    pub state: String,
    pub url: String,
}

#[derive(Deserialize)]
struct IssuePayload {
    title: String,
    state: String,
    html_url: String,
    /// Present on a pull request: GitHub's issues API serves PRs too, and says to tell them
    /// apart by this key.
    #[serde(default)]
    pull_request: Option<serde_json::Value>,
    /// `…/repos/{owner}/{name}`: where the issue is now (a transferred issue answers with a 301
    /// to its new repository, which may be private).
    #[serde(default)]
    repository_url: Option<String>,
}

#[derive(Clone)]
pub struct GitHubClient {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) timeout: Duration,
    max_retries: u32,
    pub(super) auth: crate::installation::Auth,
}

impl GitHubClient {
    pub fn new(
        api_url: &str,
        token: &Secret,
        timeout: Duration,
        max_retries: u32,
    ) -> Result<Self, reqwest::Error> {
        Self::with_auth(
            api_url,
            crate::installation::Auth::Token(token.clone()),
            timeout,
            max_retries,
        )
    }

    /// A client authenticated by `auth`: a token, or a GitHub App installation's (minted as
    /// needed, and again when GitHub refuses one).
    pub fn with_auth(
        api_url: &str,
        auth: crate::installation::Auth,
        timeout: Duration,
        max_retries: u32,
    ) -> Result<Self, reqwest::Error> {
        let mut headers = default_headers();
        headers.insert(
            ACCEPT,
            reqwest::header::HeaderValue::from_static("application/vnd.github+json"),
        );
        let http = chronicle_http::credentialed()
            .redirect(chronicle_http::same_host_redirects())
            .default_headers(headers)
            .build()?;
        Ok(GitHubClient {
            http,
            base: api_url.trim_end_matches('/').to_string(),
            timeout,
            max_retries,
            auth,
        })
    }

    pub async fn pull_totals(
        &self,
        repo: &RepoName,
        number: u64,
        deadline: Instant,
    ) -> Result<PullTotals, GitHubError> {
        let path = format!("/repos/{repo}/pulls/{number}");
        let (body, _) = self
            .get(&format!("{}{path}", self.base), &path, deadline)
            .await?;
        decode(&path, &body)
    }

    /// Every changed file, page by page through `Link: rel="next"`, at most [`MAX_FILES`].
    pub async fn pull_files(
        &self,
        repo: &RepoName,
        number: u64,
        deadline: Instant,
    ) -> Result<Vec<ChangedFile>, GitHubError> {
        let path = format!("/repos/{repo}/pulls/{number}/files");
        let mut url = Some(format!("{}{path}?per_page={PER_PAGE}", self.base));
        let mut files = Vec::new();
        while let Some(next) = url.take() {
            let (body, headers) = self.get(&next, &path, deadline).await?;
            let page: Vec<ChangedFile> = decode(&path, &body)?;
            let empty = page.is_empty();
            files.extend(page);
            if files.len() >= MAX_FILES || empty {
                break;
            }
            url = next_link(&headers);
            if let Some(link) = url.as_deref().filter(|u| !on_api(u, &self.base)) {
                // The token goes with every request: never to a host a header names.
                tracing::warn!(
                    path,
                    link,
                    "GitHub's Link header leaves the configured API; the file list stops here"
                );
                url = None;
            }
        }
        files.truncate(MAX_FILES);
        Ok(files)
    }

    /// The issue's title and state; `None` if it does not exist (404/410), which is not fatal.
    pub async fn issue(
        &self,
        repo: &RepoName,
        number: u64,
        deadline: Instant,
    ) -> Result<Option<LinkedIssue>, GitHubError> {
        let path = format!("/repos/{repo}/issues/{number}");
        match self
            .get(&format!("{}{path}", self.base), &path, deadline)
            .await
        {
            Ok((body, _)) => {
                let issue: IssuePayload = decode(&path, &body)?;
                if issue.pull_request.is_some() {
                    return Ok(None); // `Fixes #12` where #12 is a PR: not a linked issue
                }
                // Only the repository asked for: GitHub follows a transferred issue to its new
                // home, which the scope never allowed.
                let here = format!("/repos/{repo}");
                let same = issue.repository_url.as_deref().is_some_and(|u| {
                    u.len() >= here.len()
                        && u.is_char_boundary(u.len() - here.len())
                        && u[u.len() - here.len()..].eq_ignore_ascii_case(&here)
                });
                if !same {
                    tracing::info!(repo = %repo, number, "a linked issue that now lives elsewhere is not kept");
                    return Ok(None);
                }
                Ok(Some(LinkedIssue {
                    repo: repo.clone(),
                    number,
                    title: issue.title,
                    state: issue.state,
                    url: issue.html_url,
                }))
            }
            Err(GitHubError::Gone { .. }) => Ok(None),
            // An installation that has not granted `issues` (app.yml calls it optional):
            // GitHub refuses its token every issue. Not readable, as a missing one is; the PR
            // is enriched without it.
            Err(GitHubError::Refused {
                status: 403,
                message,
                ..
            }) if matches!(self.auth, crate::installation::Auth::Installation { .. })
                && message.contains("not accessible by integration") =>
            {
                tracing::info!(repo = %repo, number, "the installation's token may not read issues; the linked issue is left out");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// One GET with GitHub's retry rules. `path` names the resource in errors (never the token).
    async fn get(
        &self,
        url: &str,
        path: &str,
        deadline: Instant,
    ) -> Result<(bytes::Bytes, HeaderMap), GitHubError> {
        let (_, body, headers) = self.get_with(url, path, deadline, None, None).await?;
        Ok((body, headers))
    }

    /// A repository file's text (`GET /repos/{o}/{r}/contents/{path}`, raw), conditional on the
    /// ETag of the copy already held: 304 is [`Conditional::NotModified`] (and costs nothing
    /// against the rate limit), 404 is [`Conditional::Missing`]. Text beyond `max_bytes` is cut.
    pub async fn file(
        &self,
        repo: &RepoName,
        file: &str,
        etag: Option<&str>,
        max_bytes: usize,
        deadline: Instant,
    ) -> Result<Conditional<String>, GitHubError> {
        let path = repo_path(repo, "contents", file)?;
        let answer = self
            .get_with(
                &format!("{}{path}", self.base),
                &path,
                deadline,
                Some("application/vnd.github.raw+json"),
                etag,
            )
            .await;
        conditional(answer, |body| {
            let end = body.len().min(max_bytes);
            Ok(String::from_utf8_lossy(&body[..end]).into_owned())
        })
    }

    /// The directories directly inside a repository directory (`GET …/contents/{dir}`), by
    /// name, conditional like [`GitHubClient::file`]. GitHub lists at most 1,000 entries.
    pub async fn directories(
        &self,
        repo: &RepoName,
        dir: &str,
        etag: Option<&str>,
        deadline: Instant,
    ) -> Result<Conditional<Vec<String>>, GitHubError> {
        #[derive(Deserialize)]
        struct Entry {
            name: String,
            #[serde(rename = "type")]
            kind: String,
        }
        let path = repo_path(repo, "contents", dir)?;
        let answer = self
            .get_with(&format!("{}{path}", self.base), &path, deadline, None, etag)
            .await;
        conditional(answer, |body| {
            // A file where a directory was expected is an object, not a list: no directories.
            let entries: Vec<Entry> = serde_json::from_slice(body).unwrap_or_default();
            Ok(entries
                .into_iter()
                .filter(|e| e.kind == "dir")
                .map(|e| e.name)
                .collect())
        })
    }

    /// A directory's README (`GET /repos/{o}/{r}/readme/{dir}`, the one GitHub shows for it):
    /// its path and text (cut at `max_bytes`), conditional like [`GitHubClient::file`].
    pub async fn readme(
        &self,
        repo: &RepoName,
        dir: &str,
        etag: Option<&str>,
        max_bytes: usize,
        deadline: Instant,
    ) -> Result<Conditional<(String, String)>, GitHubError> {
        #[derive(Deserialize)]
        struct Readme {
            path: String,
            #[serde(default)]
            content: String,
            #[serde(default)]
            encoding: String,
        }
        let path = repo_path(repo, "readme", dir)?;
        let answer = self
            .get_with(&format!("{}{path}", self.base), &path, deadline, None, etag)
            .await;
        conditional(answer, |body| {
            let readme: Readme = decode(&path, body)?;
            let bytes = if readme.encoding == "base64" {
                use base64::Engine as _;
                let compact: String = readme.content.split_whitespace().collect();
                base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .map_err(|e| GitHubError::Decode {
                        path: path.clone(),
                        message: e.to_string(),
                    })?
            } else {
                readme.content.into_bytes()
            };
            let end = bytes.len().min(max_bytes);
            Ok((
                readme.path,
                String::from_utf8_lossy(&bytes[..end]).into_owned(),
            ))
        })
    }

    /// [`GitHubClient::get`] with an `Accept` and an `If-None-Match`; a 304 is an answer.
    pub(super) async fn get_with(
        &self,
        url: &str,
        path: &str,
        deadline: Instant,
        accept: Option<&str>,
        etag: Option<&str>,
    ) -> Result<(StatusCode, bytes::Bytes, HeaderMap), GitHubError> {
        let mut attempts = 0;
        // An installation token refused (401) is minted anew once per request, whenever the
        // 401 comes (after a rate-limit wait, say).
        let mut refreshed = false;
        loop {
            attempts += 1;
            let left = deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(DEADLINE_MARGIN);
            if left.is_zero() {
                return Err(GitHubError::OutOfTime {
                    path: path.to_string(),
                });
            }
            // A token function slow to answer must not outlast the record's deadline.
            let token = tokio::time::timeout(left, self.auth.bearer())
                .await
                .map_err(|_| GitHubError::OutOfTime {
                    path: path.to_string(),
                })??;
            let mut request = self
                .http
                .get(url)
                .header(AUTHORIZATION, crate::installation::sensitive_bearer(&token))
                .timeout(left.min(self.timeout));
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            if let Some(etag) = etag {
                request = request.header(reqwest::header::IF_NONE_MATCH, etag);
            }
            let retry = match request.send().await {
                Err(e) => {
                    let message = if e.is_timeout() {
                        "timed out".to_string()
                    } else {
                        error_chain(&e)
                    };
                    if attempts > self.max_retries {
                        return Err(GitHubError::Transport {
                            path: path.to_string(),
                            attempts,
                            message,
                        });
                    }
                    backoff(attempts)
                }
                Ok(response) => {
                    let status = response.status();
                    let headers = response.headers().clone();
                    if status.is_success() || status == StatusCode::NOT_MODIFIED {
                        let body = response.bytes().await.map_err(|e| GitHubError::Transport {
                            path: path.to_string(),
                            attempts,
                            message: error_chain(&e),
                        })?;
                        return Ok((status, body, headers));
                    }
                    if let Some(wait) = rate_limit_wait(status, &headers) {
                        if Instant::now() + wait + DEADLINE_MARGIN >= deadline
                            || attempts > self.max_retries + 1
                        {
                            return Err(GitHubError::RateLimited {
                                path: path.to_string(),
                                wait,
                            });
                        }
                        tracing::info!(
                            path,
                            wait_ms = wait.as_millis() as u64,
                            "GitHub rate limit: waiting"
                        );
                        wait
                    } else if status == StatusCode::UNAUTHORIZED
                        && !refreshed
                        && self.auth.refused(&token)
                    {
                        refreshed = true;
                        // An installation token expired or was revoked: a new one, at once.
                        tracing::info!(
                            path,
                            "GitHub refused the installation token; minting another"
                        );
                        Duration::ZERO
                    } else if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
                        return Err(GitHubError::Gone {
                            status: status.as_u16(),
                            path: path.to_string(),
                        });
                    } else if status.is_server_error() {
                        if attempts > self.max_retries {
                            return Err(GitHubError::Server {
                                status: status.as_u16(),
                                path: path.to_string(),
                                attempts,
                            });
                        }
                        backoff(attempts)
                    } else {
                        let message = response_message(response).await;
                        // A secondary limit without headers names itself only in the message:
                        // GitHub asks for at least a minute's wait.
                        if status == StatusCode::FORBIDDEN && names_secondary_limit(&message) {
                            return Err(GitHubError::RateLimited {
                                path: path.to_string(),
                                wait: Duration::from_secs(60),
                            });
                        }
                        return Err(GitHubError::Refused {
                            status: status.as_u16(),
                            path: path.to_string(),
                            message,
                        });
                    }
                }
            };
            if Instant::now() + retry + DEADLINE_MARGIN >= deadline {
                return Err(GitHubError::OutOfTime {
                    path: path.to_string(),
                });
            }
            tokio::time::sleep(retry).await;
        }
    }
}

/// What a conditional GET gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional<T> {
    /// 304: the copy held (its ETag was sent) is current.
    NotModified,
    /// 404 (or 410): there is no such file or directory.
    Missing,
    Found {
        value: T,
        etag: Option<String>,
    },
}

fn conditional<T>(
    answer: Result<(StatusCode, bytes::Bytes, HeaderMap), GitHubError>,
    read: impl FnOnce(&[u8]) -> Result<T, GitHubError>,
) -> Result<Conditional<T>, GitHubError> {
    match answer {
        Ok((StatusCode::NOT_MODIFIED, _, _)) => Ok(Conditional::NotModified),
        Ok((_, body, headers)) => Ok(Conditional::Found {
            value: read(&body)?,
            etag: headers
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        }),
        Err(GitHubError::Gone { .. }) => Ok(Conditional::Missing),
        Err(e) => Err(e),
    }
}

/// `/repos/{o}/{r}/{endpoint}/{path}` (`contents`, `readme`), each segment percent-encoded
/// (`my app` → `my%20app`). A `..` segment is refused: it never names a repository file.
fn repo_path(repo: &RepoName, endpoint: &str, file: &str) -> Result<String, GitHubError> {
    let file = file.trim_matches('/');
    if file.split('/').any(|s| s == "..") {
        return Err(GitHubError::Refused {
            status: 0,
            path: format!("/repos/{repo}/{endpoint}/{file}"),
            message: "a path leaving the repository; not requested".into(),
        });
    }
    let mut url = reqwest::Url::parse("http://chronicle.invalid/").expect("a valid URL");
    {
        let mut segments = url.path_segments_mut().map_err(|_| GitHubError::Refused {
            status: 0,
            path: file.to_string(),
            message: "cannot build the request path".into(),
        })?;
        segments.pop_if_empty();
        segments.extend(["repos", repo.owner(), repo.name(), endpoint]);
        if !file.is_empty() {
            segments.extend(file.split('/'));
        }
    }
    Ok(url.path().to_string())
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(
    path: &str,
    body: &[u8],
) -> Result<T, GitHubError> {
    serde_json::from_slice(body).map_err(|e| GitHubError::Decode {
        path: path.to_string(),
        message: e.to_string(),
    })
}

/// The `message` of a GitHub error answer (empty when there is none).
pub(super) async fn response_message(response: reqwest::Response) -> String {
    response
        .json::<serde_json::Value>()
        .await
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// Whether a 403/429 message is GitHub's secondary limit (older Enterprise Servers call it
/// abuse detection).
pub(super) fn names_secondary_limit(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("secondary rate limit") || m.contains("abuse detection")
}

/// Full jitter, so that workers that failed together do not retry together.
fn backoff(attempt: u32) -> Duration {
    chronicle_http::backoff::full_jitter(Duration::from_millis(200), attempt.min(6))
}

/// How long GitHub asks us to wait, if this is a rate-limit answer.
pub(super) fn rate_limit_wait(status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(secs) = header("retry-after").and_then(|v| v.parse::<u64>().ok()) {
        return Some(Duration::from_secs(secs));
    }
    if header("x-ratelimit-remaining") == Some("0") {
        return reset_wait(headers);
    }
    // GitHub's secondary limits without headers: wait at least a minute (its documentation).
    (status == StatusCode::TOO_MANY_REQUESTS).then(|| Duration::from_secs(60))
}

/// Until `x-ratelimit-reset` (epoch seconds), at least a second, when GitHub says when.
pub(super) fn reset_wait(headers: &HeaderMap) -> Option<Duration> {
    let reset = headers
        .get("x-ratelimit-reset")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    Some(Duration::from_secs(reset.saturating_sub(now).max(1)))
}

/// The headers every GitHub request carries, REST, GraphQL or the App's: a User-Agent (GitHub
/// refuses requests without one) and the API version. The token goes with each request (marked
/// sensitive, so it is never logged): an installation's changes within a client's life.
pub(super) fn default_headers() -> HeaderMap {
    use reqwest::header::HeaderValue;
    let mut headers = HeaderMap::new();
    headers.insert(
        USER_AGENT,
        HeaderValue::from_static(concat!("chronicle/", env!("CARGO_PKG_VERSION"))),
    );
    headers.insert(
        "x-github-api-version",
        HeaderValue::from_static(API_VERSION),
    );
    headers
}

/// Whether `url` is under the configured API base (same scheme, host, port and path prefix).
pub fn on_api(url: &str, base: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(base)) {
        (Ok(u), Ok(b)) => {
            u.scheme() == b.scheme()
                && u.host_str() == b.host_str()
                && u.port_or_known_default() == b.port_or_known_default()
                && u.path().starts_with(b.path().trim_end_matches('/'))
        }
        _ => false,
    }
}

/// The `rel="next"` URL of a `Link` header.
pub fn next_link(headers: &HeaderMap) -> Option<String> {
    let link = headers.get(reqwest::header::LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim() == "rel=\"next\"")
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

/// `issues` without those outside `scope` (GraphQL's `closingIssuesReferences` can name
/// another repository's issue).
pub fn issues_in_scope(
    scope: IssueScope,
    pr_repo: &RepoName,
    issues: Vec<LinkedIssue>,
) -> Vec<LinkedIssue> {
    let before = issues.len();
    let kept: Vec<LinkedIssue> = issues
        .into_iter()
        .filter(|i| scope.allows(pr_repo, &i.repo))
        .collect();
    if kept.len() < before {
        tracing::info!(repo = %pr_repo, dropped = before - kept.len(), "linked issues outside the repository's scope dropped");
    }
    kept
}

/// Issues a PR body says it closes: `close[sd]?|fix(e[sd])?|resolve[sd]?` then `#N` or
/// `owner/repo#N`, case-insensitive. De-duplicated, in order of mention, at most `limit`, and
/// only those `scope` allows (nothing outside it is ever requested).
pub fn closing_references(
    body: &str,
    this_repo: &RepoName,
    scope: IssueScope,
    limit: usize,
) -> Vec<(RepoName, u64)> {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let pattern = PATTERN.get_or_init(|| {
        regex::Regex::new(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?\s+(?:([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+))?#([0-9]+)\b")
            .expect("the pattern is valid")
    });
    let mut refs: Vec<(RepoName, u64)> = Vec::new();
    for caps in pattern.captures_iter(body) {
        let repo = match caps.get(1) {
            Some(r) => match RepoName::parse(r.as_str()) {
                Ok(repo) => repo,
                Err(_) => continue,
            },
            None => this_repo.clone(),
        };
        let Ok(number) = caps[2].parse::<u64>() else {
            continue;
        };
        if !scope.allows(this_repo, &repo) {
            continue;
        }
        if !refs.iter().any(|(r, n)| *r == repo && *n == number) {
            refs.push((repo, number));
        }
        if refs.len() == limit {
            break;
        }
    }
    refs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_keywords() {
        let repo = RepoName::parse("o/r").unwrap();
        let body = "Fixes #12, closes octo/other#3 and RESOLVED: #12.\nfixed #7; close #8x; prefix#9; Fixes:#10\nresolves   #11";
        let refs = |scope| -> Vec<(String, u64)> {
            closing_references(body, &repo, scope, 10)
                .into_iter()
                .map(|(r, n)| (r.to_string(), n))
                .collect()
        };
        assert_eq!(
            refs(IssueScope::Owner),
            [("o/r".into(), 12), ("o/r".into(), 7), ("o/r".into(), 11)],
            "octo/other is another owner's"
        );
        let scoped = "Fixes other-org/private#42, fixes O/R#5, fixes o/sibling#6";
        let found = |scope| -> Vec<String> {
            closing_references(scoped, &repo, scope, 10)
                .into_iter()
                .map(|(r, n)| format!("{r}#{n}"))
                .collect()
        };
        assert_eq!(found(IssueScope::Repository), ["O/R#5"]);
        assert_eq!(found(IssueScope::Owner), ["O/R#5", "o/sibling#6"]);
        assert_eq!(
            closing_references(
                "fixes #1 fixes #2 fixes #3",
                &repo,
                IssueScope::Repository,
                2
            )
            .len(),
            2
        );
        assert!(closing_references(
            "This fixes nothing. Related to #5",
            &repo,
            IssueScope::Repository,
            10
        )
        .is_empty());
    }

    #[test]
    fn links_are_followed_only_on_the_configured_api() {
        let base = "https://ghe.example.com/api/v3";
        assert!(on_api(
            "https://ghe.example.com/api/v3/repos/o/r/pulls/1/files?page=2",
            base
        ));
        for elsewhere in [
            "https://evil.example.com/api/v3/repos/o/r/pulls/1/files?page=2",
            "http://ghe.example.com/api/v3/x",
            "https://ghe.example.com:8443/api/v3/x",
            "https://ghe.example.com/other/x",
            "not a url",
        ] {
            assert!(!on_api(elsewhere, base), "{elsewhere}");
        }
        assert!(on_api(
            "https://api.github.com/repositories/1/pulls/2/files?page=2",
            "https://api.github.com"
        ));
    }

    #[test]
    fn link_header_next() {
        let mut h = HeaderMap::new();
        h.insert(
            reqwest::header::LINK,
            "<https://api.github.com/x?page=2>; rel=\"next\", <https://api.github.com/x?page=3>; rel=\"last\"".parse().unwrap(),
        );
        assert_eq!(
            next_link(&h).as_deref(),
            Some("https://api.github.com/x?page=2")
        );
        h.insert(
            reqwest::header::LINK,
            "<https://api.github.com/x?page=1>; rel=\"prev\""
                .parse()
                .unwrap(),
        );
        assert_eq!(next_link(&h), None);
    }

    #[test]
    fn rate_limit_answers() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(
            rate_limit_wait(StatusCode::TOO_MANY_REQUESTS, &h),
            Some(Duration::from_secs(3))
        );
        assert_eq!(rate_limit_wait(StatusCode::INTERNAL_SERVER_ERROR, &h), None);
        let mut h = HeaderMap::new();
        let reset = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 5;
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset", reset.to_string().parse().unwrap());
        let wait = rate_limit_wait(StatusCode::FORBIDDEN, &h).unwrap();
        assert!(
            wait <= Duration::from_secs(5) && wait >= Duration::from_secs(4),
            "{wait:?}"
        );
        // A plain 403 (no rate-limit headers) is a refusal, not a wait.
        assert_eq!(
            rate_limit_wait(StatusCode::FORBIDDEN, &HeaderMap::new()),
            None
        );
    }
}
