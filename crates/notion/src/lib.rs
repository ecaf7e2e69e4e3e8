//! A small Notion API client (reqwest, `Notion-Version: 2026-03-11`) for publishing whole
//! pages through Notion's Markdown content API:
//!
//! - `POST /v1/pages` with a `markdown` body creates a page (under a parent page);
//! - `PATCH /v1/pages/{id}/markdown` with `replace_content` replaces its content whole;
//! - `GET /v1/pages/{id}` tells whether a page is in the trash; `PATCH /v1/pages/{id}` with
//!   `in_trash` moves one there; `GET /v1/blocks/{id}/children` lists a page's child pages;
//!   `POST /v1/pages/{id}/move` puts a page under another.
//!
//! Retries: replacing content is idempotent (the same Markdown twice is one page), so it is
//! retried after timeouts, 5xx and 409, never past the caller's deadline (a caller that fences
//! its writes with a lease passes the lease's end, less a margin). Creating a page is not: it is retried only after 429
//! and 529, which Notion answers before doing anything; after an ambiguous failure the caller
//! looks for the page before creating another ([`NotionError::maybe_applied`]).
//!
//! Limits: at most [`MAX_PAYLOAD_BYTES`] per request (checked before sending); requests are
//! paced to about three a second ([`MIN_INTERVAL`]), Notion's rate for one integration; 429 and
//! 529 wait out `Retry-After` when that fits before the deadline, else fail as
//! [`NotionError::RateLimited`] (the page stays stale and is built again later).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use chronicle_config::secret::Secret;

pub const NOTION_VERSION: &str = "2026-03-11";
pub use chronicle_config::DEFAULT_NOTION_API_URL as DEFAULT_API_URL;
pub const MAX_PAYLOAD_BYTES: usize = 500_000;
/// The longest `Retry-After` waited out inside one call.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Requests of one client are at least this far apart (about 3 a second).
pub const MIN_INTERVAL: Duration = Duration::from_millis(340);
/// Time kept in hand before the deadline for the bookkeeping after a call.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum NotionError {
    /// 401/403/404: the token, the integration's capabilities or the page's sharing must be fixed.
    #[error("Notion answered {status} {code} on {what}: {message}")]
    Access {
        status: u16,
        code: String,
        what: String,
        message: String,
        advice: String,
    },
    /// 400/413: Notion refused the request itself; retrying it unchanged cannot help.
    #[error("Notion refused {what} ({status} {code}): {message}")]
    Invalid {
        what: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("Notion is rate limiting {what} (HTTP {status}, Retry-After {retry_after:?}); not enough time left to wait")]
    RateLimited {
        what: String,
        status: u16,
        retry_after: Option<Duration>,
    },
    /// 5xx or 409 after the retries (or, for a create, at once): it may have been applied.
    #[error("Notion failed {what}: HTTP {status}: {message}")]
    Server {
        what: String,
        status: u16,
        message: String,
    },
    /// No answer (timeout, connection lost): it may have been applied.
    #[error("calling Notion for {what} failed: {message}")]
    Transport { what: String, message: String },
    #[error("Notion's answer to {what} was not understood: {message}")]
    Unexpected { what: String, message: String },
    /// Not sent: too little of the invocation was left for an answer.
    #[error("no time left to call Notion for {what}; it is built again later")]
    OutOfTime { what: String },
}

impl NotionError {
    /// What the operator must do, for errors only they can fix.
    pub fn advice(&self) -> Option<&str> {
        match self {
            NotionError::Access { advice, .. } => Some(advice),
            NotionError::Invalid { message, .. } if message.contains("child") => Some(
                "A page or database someone put under a Chronicle page (inside a toggle or a \
                 column, where Chronicle cannot name it) would be deleted by the update, so \
                 Notion refused it: move it to the top level of the page, or elsewhere. The page \
                 is built again by itself.",
            ),
            _ => None,
        }
    }

    /// The request may have been applied although it failed (no answer, or a 5xx). A 409
    /// (`conflict_error`: another change to the same page won) says nothing was applied.
    pub fn maybe_applied(&self) -> bool {
        match self {
            NotionError::Server { status, .. } => *status != 409,
            NotionError::Transport { .. } | NotionError::Unexpected { .. } => true,
            _ => false,
        }
    }

    /// Notion's or the network's brief trouble, or too little time left: the same request can
    /// succeed later unchanged (429/529, 409, 5xx, no answer, not sent for lack of time).
    /// Never a reason to count a failure or to wait longer than its own `Retry-After`.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            NotionError::RateLimited { .. }
                | NotionError::Server { .. }
                | NotionError::Transport { .. }
                | NotionError::Unexpected { .. }
                | NotionError::OutOfTime { .. }
        )
    }

    /// How long Notion asked to wait (429/529 `Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            NotionError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Refused before anything was sent: larger than [`MAX_PAYLOAD_BYTES`] (413), which no
    /// listing or retry of the same content can change.
    pub fn is_too_large(&self) -> bool {
        matches!(self, NotionError::Invalid { status: 413, .. })
    }

    /// A 404: the page does not exist or is not shared with the integration.
    pub fn is_not_found(&self) -> bool {
        matches!(self, NotionError::Access { status: 404, .. })
    }

    /// A refusal that says the page is archived or in the trash.
    pub fn is_archived(&self) -> bool {
        matches!(self, NotionError::Invalid { message, .. }
            if message.contains("archived") || message.contains("trash"))
    }
}

/// What `GET /v1/pages/{id}` says of a page.
#[derive(Debug, Clone, PartialEq)]
pub enum PageState {
    /// It is there: the page object.
    Live(Value),
    /// In the trash (by itself or with an ancestor).
    Trashed,
    /// 404: deleted for good, or not shared with the integration (Notion does not say which).
    NotFound,
}

impl PageState {
    /// The parent's id, when it is a page (a page in a toggle or a column has a block).
    pub fn parent_page(&self) -> Option<&str> {
        match self {
            PageState::Live(page) if page["parent"]["type"] == "page_id" => {
                page["parent"]["page_id"].as_str()
            }
            _ => None,
        }
    }
}

/// A page Notion created: its id and its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedPage {
    pub id: String,
    pub url: String,
}

/// A child page (or database) as a parent's children list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildPage {
    pub id: String,
    pub title: String,
    /// A database (Notion's `<database>` tag names it in content), not a page.
    pub database: bool,
    /// The user (or integration) that created it.
    pub created_by: Option<String>,
}

/// Reads the token again (from where it is configured), after Notion refused it: a secret
/// rotated while the function stays warm is picked up without a cold start.
pub type TokenRefresh =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, Option<Secret>> + Send + Sync>;

/// The Notion client: one token, one base URL, bounded retries, paced requests.
#[derive(Clone)]
pub struct NotionClient {
    http: reqwest::Client,
    base: String,
    token: Arc<std::sync::RwLock<Secret>>,
    refresh: Option<TokenRefresh>,
    /// The integration's own user id (`GET /v1/users/me`), once asked.
    bot: Arc<tokio::sync::OnceCell<String>>,
    timeout: Duration,
    retries: u32,
    backoff: Duration,
    /// When the next request may start (shared by clones: one integration, one rate).
    next_slot: Arc<tokio::sync::Mutex<Instant>>,
    requests: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for NotionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotionClient")
            .field("base", &self.base)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl NotionClient {
    /// `api_url` is the base (`https://api.notion.com`); paths start with `/v1/`.
    pub fn new(api_url: &str, token: Secret) -> Self {
        let http = chronicle_http::credentialed()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("a client with a static configuration builds");
        NotionClient {
            http,
            base: api_url.trim().trim_end_matches('/').to_string(),
            token: Arc::new(std::sync::RwLock::new(token)),
            refresh: None,
            bot: Arc::default(),
            timeout: Duration::from_secs(20),
            retries: 3,
            backoff: Duration::from_millis(500),
            next_slot: Arc::new(tokio::sync::Mutex::new(Instant::now())),
            requests: Arc::default(),
        }
    }

    /// `retries` after the first attempt of an idempotent call, waits of up to `backoff`
    /// doubling (full jitter); `timeout` bounds each attempt.
    pub fn with_retry(mut self, retries: u32, backoff: Duration, timeout: Duration) -> Self {
        self.retries = retries;
        self.backoff = backoff;
        self.timeout = timeout;
        self
    }

    /// Reads the token again with `refresh` when Notion answers 401, and retries once if it
    /// changed.
    pub fn with_token_refresh(mut self, refresh: TokenRefresh) -> Self {
        self.refresh = Some(refresh);
        self
    }

    /// The integration's own user id: pages it created carry it as `created_by`.
    pub async fn bot_id(&self, deadline: Instant) -> Result<String, NotionError> {
        self.bot
            .get_or_try_init(|| async {
                let me = self
                    .call(
                        Method::GET,
                        "/v1/users/me",
                        None,
                        "reading the integration's user",
                        true,
                        deadline,
                    )
                    .await?;
                me["id"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| NotionError::Unexpected {
                        what: "reading the integration's user".into(),
                        message: "no id".into(),
                    })
            })
            .await
            .cloned()
    }

    /// Requests sent so far (every attempt counts).
    pub fn requests(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Creates a page titled `title` under the page `parent_id`, with `markdown` as its
    /// content. Not idempotent: retried only when Notion rate limited it (nothing was done).
    pub async fn create_page(
        &self,
        parent_id: &str,
        title: &str,
        markdown: &str,
        deadline: Instant,
    ) -> Result<CreatedPage, NotionError> {
        let body = json!({
            "parent": {"type": "page_id", "page_id": parent_id},
            "properties": {"title": {"title": [{"type": "text", "text": {"content": title}}]}},
            "markdown": markdown,
        });
        let what = format!("creating the page {title:?}");
        let page = self
            .call(
                Method::POST,
                "/v1/pages",
                Some(body),
                &what,
                false,
                deadline,
            )
            .await?;
        let text = |k: &str| page[k].as_str().map(str::to_string);
        match (text("id"), text("url")) {
            (Some(id), Some(url)) => Ok(CreatedPage { id, url }),
            _ => Err(NotionError::Unexpected {
                what,
                message: "no id or url in the created page".into(),
            }),
        }
    }

    /// Replaces the content of page `id` with `markdown`, whole. Child pages must be named in
    /// it (`<page url=…>`), or Notion refuses: they are never deleted this way.
    pub async fn replace_markdown(
        &self,
        id: &str,
        markdown: &str,
        deadline: Instant,
    ) -> Result<(), NotionError> {
        let body = json!({
            "type": "replace_content",
            "replace_content": {"new_str": markdown},
        });
        self.call(
            Method::PATCH,
            &format!("/v1/pages/{id}/markdown"),
            Some(body),
            &format!("replacing the content of page {id}"),
            true,
            deadline,
        )
        .await
        .map(drop)
    }

    /// Whether the page is there, in the trash, or not found. A 404 does not say whether it was
    /// deleted or the integration lost access: the caller tells them apart.
    pub async fn page_state(&self, id: &str, deadline: Instant) -> Result<PageState, NotionError> {
        match self
            .call(
                Method::GET,
                &format!("/v1/pages/{id}"),
                None,
                &format!("reading page {id}"),
                true,
                deadline,
            )
            .await
        {
            Ok(page) if page["in_trash"].as_bool().unwrap_or(false) => Ok(PageState::Trashed),
            Ok(page) => Ok(PageState::Live(page)),
            Err(e) if e.is_not_found() => Ok(PageState::NotFound),
            Err(e) => Err(e),
        }
    }

    /// Moves a page to the trash (what a person's "Delete" does). A 404 is an error: the page
    /// may be gone, or out of the integration's reach, and only the caller can tell.
    pub async fn trash_page(&self, id: &str, deadline: Instant) -> Result<(), NotionError> {
        self.call(
            Method::PATCH,
            &format!("/v1/pages/{id}"),
            Some(json!({"in_trash": true})),
            &format!("moving page {id} to the trash"),
            true,
            deadline,
        )
        .await
        .map(drop)
    }

    /// Moves page `id` (with everything under it) to be a child of the page `parent_id`
    /// (`POST /v1/pages/{id}/move`). Moving it where it already is changes nothing, so it is
    /// retried like any idempotent call.
    pub async fn move_page(
        &self,
        id: &str,
        parent_id: &str,
        deadline: Instant,
    ) -> Result<(), NotionError> {
        self.call(
            Method::POST,
            &format!("/v1/pages/{id}/move"),
            Some(json!({"parent": {"type": "page_id", "page_id": parent_id}})),
            &format!("moving page {id} under {parent_id}"),
            true,
            deadline,
        )
        .await
        .map(drop)
    }

    /// The child pages and databases of a page (every page of the listing), in order.
    pub async fn child_pages(
        &self,
        id: &str,
        deadline: Instant,
    ) -> Result<Vec<ChildPage>, NotionError> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let what = format!("listing the children of {id}");
        loop {
            let mut path = format!("/v1/blocks/{id}/children?page_size=100");
            if let Some(c) = &cursor {
                path.push_str(&format!("&start_cursor={c}"));
            }
            let page = self
                .call(Method::GET, &path, None, &what, true, deadline)
                .await?;
            for block in page["results"].as_array().into_iter().flatten() {
                let kind = block["type"].as_str().unwrap_or_default();
                if !matches!(kind, "child_page" | "child_database")
                    || block["in_trash"].as_bool().unwrap_or(false)
                {
                    continue;
                }
                if let (Some(id), Some(title)) =
                    (block["id"].as_str(), block[kind]["title"].as_str())
                {
                    out.push(ChildPage {
                        id: id.to_string(),
                        title: title.to_string(),
                        database: kind == "child_database",
                        created_by: block["created_by"]["id"].as_str().map(str::to_string),
                    });
                }
            }
            match (page["has_more"].as_bool(), page["next_cursor"].as_str()) {
                (Some(true), Some(next)) => cursor = Some(next.to_string()),
                _ => return Ok(out),
            }
        }
    }

    /// One call with its retries. `idempotent`: whether a failure after which the request may
    /// have been applied can be retried.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        what: &str,
        idempotent: bool,
        deadline: Instant,
    ) -> Result<Value, NotionError> {
        let payload = body.map(|b| b.to_string());
        if let Some(p) = &payload {
            if p.len() > MAX_PAYLOAD_BYTES {
                return Err(NotionError::Invalid {
                    what: what.to_string(),
                    status: 413,
                    code: "payload_too_large".into(),
                    message: format!(
                        "{} bytes is more than the {MAX_PAYLOAD_BYTES} Notion takes (not sent)",
                        p.len()
                    ),
                });
            }
        }
        let mut attempt = 0u32;
        let mut rate_limited = 0u32;
        let mut refreshed = false;
        loop {
            self.pace().await;
            let token = self.current_token();
            let result = self
                .send(
                    method.clone(),
                    path,
                    payload.clone(),
                    what,
                    &token,
                    deadline,
                )
                .await;
            let (error, wait) = match result {
                Ok(value) => return Ok(value),
                // Another call replaced the token meanwhile: sent again with the new one.
                Err(Failure::Final(NotionError::Access { status: 401, .. }))
                    if self.current_token() != token =>
                {
                    continue;
                }
                Err(Failure::Final(NotionError::Access { status: 401, .. }))
                    if !refreshed && self.refresh_token().await =>
                {
                    // Refused before anything was done: sent again with the new token.
                    refreshed = true;
                    continue;
                }
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::RateLimited {
                    status,
                    retry_after,
                }) => {
                    let wait = retry_after.unwrap_or(Duration::from_secs(1));
                    let error = NotionError::RateLimited {
                        what: what.to_string(),
                        status,
                        retry_after,
                    };
                    rate_limited += 1;
                    if wait > MAX_RETRY_AFTER || rate_limited > 10 {
                        return Err(error);
                    }
                    (error, wait)
                }
                Err(Failure::Retryable(e)) => {
                    if !idempotent || attempt >= self.retries {
                        return Err(e);
                    }
                    attempt += 1;
                    (
                        e,
                        chronicle_http::backoff::full_jitter(self.backoff, attempt - 1),
                    )
                }
            };
            if Instant::now() + wait + DEADLINE_MARGIN >= deadline {
                return Err(error);
            }
            tracing::info!(what, wait_ms = wait.as_millis() as u64, error = %error, "retrying a Notion call");
            tokio::time::sleep(wait).await;
        }
    }

    /// Reads the token again; `true` if it changed.
    async fn refresh_token(&self) -> bool {
        let Some(refresh) = &self.refresh else {
            return false;
        };
        let Some(new) = refresh().await else {
            return false;
        };
        let mut token = self.token.write().unwrap_or_else(|e| e.into_inner());
        if *token == new {
            return false;
        }
        tracing::info!("the Notion token was refused; a new one was configured and is used");
        *token = new;
        true
    }

    /// Waits for this client's next request slot.
    async fn pace(&self) {
        let start = {
            let mut next = self.next_slot.lock().await;
            let start = (*next).max(Instant::now());
            *next = start + MIN_INTERVAL;
            start
        };
        tokio::time::sleep_until(start.into()).await;
    }

    fn current_token(&self) -> String {
        self.token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .expose()
            .to_string()
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        payload: Option<String>,
        what: &str,
        token: &str,
        deadline: Instant,
    ) -> Result<Value, Failure> {
        // An answer must come before the deadline: a request with less than a second left is
        // not sent (it could be applied without anyone knowing).
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_secs(1) {
            return Err(Failure::Final(NotionError::OutOfTime {
                what: what.to_string(),
            }));
        }
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("Notion-Version", NOTION_VERSION)
            .timeout(self.timeout.min(left));
        if let Some(p) = payload {
            request = request.header("content-type", "application/json").body(p);
        }
        let transport = |e: reqwest::Error| {
            Failure::Retryable(NotionError::Transport {
                what: what.to_string(),
                message: e.without_url().to_string(),
            })
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let bytes = response.bytes().await.map_err(transport)?;
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            if body.is_null() {
                return Err(Failure::Retryable(NotionError::Unexpected {
                    what: what.to_string(),
                    message: "the body is not JSON".into(),
                }));
            }
            return Ok(body);
        }
        let code = body["code"].as_str().unwrap_or("unknown").to_string();
        let message = body["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(300).collect());
        let what = what.to_string();
        Err(match status.as_u16() {
            429 | 529 => Failure::RateLimited {
                status: status.as_u16(),
                retry_after,
            },
            400 | 413 => Failure::Final(NotionError::Invalid {
                what,
                status: status.as_u16(),
                code,
                message,
            }),
            401 | 403 | 404 => Failure::Final(NotionError::Access {
                status: status.as_u16(),
                advice: access_advice(status, &code),
                code,
                what,
                message,
            }),
            409 => Failure::Retryable(NotionError::Server {
                what,
                status: 409,
                message,
            }),
            s if status.is_server_error() => Failure::Retryable(NotionError::Server {
                what,
                status: s,
                message,
            }),
            s => Failure::Final(NotionError::Unexpected {
                what,
                message: format!("HTTP {s} {code}: {message}"),
            }),
        })
    }
}

enum Failure {
    Final(NotionError),
    Retryable(NotionError),
    RateLimited {
        status: u16,
        retry_after: Option<Duration>,
    },
}

/// What the operator must do about a 401/403/404. The page stays stale and is built again
/// later, by itself, once it is fixed.
fn access_advice(status: StatusCode, code: &str) -> String {
    match status.as_u16() {
        401 => "The Notion token is invalid or was revoked: create a new internal integration \
                secret at https://www.notion.so/profile/integrations and store it in NOTION_TOKEN \
                (or the secret named by NotionTokenSecretArn). The pages are rebuilt by themselves \
                once it works."
            .to_string(),
        403 => format!(
            "The integration may not do this ({code}): give it the Read, Update and Insert \
             content capabilities in its settings. The pages are rebuilt by themselves once it \
             works."
        ),
        _ => format!(
            "The page was not found ({code}): share the parent page with the integration (open \
             it in Notion, ••• → Connections → add the integration) and check \
             NOTION_PARENT_PAGE_ID. The pages are rebuilt by themselves once it works."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_names_what_to_do_and_never_the_token() {
        let a401 = access_advice(StatusCode::UNAUTHORIZED, "unauthorized");
        assert!(a401.contains("create a new internal integration secret"));
        assert!(a401.contains("NOTION_TOKEN"));
        let a403 = access_advice(StatusCode::FORBIDDEN, "restricted_resource");
        assert!(a403.contains("capabilities"));
        let a404 = access_advice(StatusCode::NOT_FOUND, "object_not_found");
        assert!(a404.contains("Connections"));
        let client = NotionClient::new("http://x", Secret::new("secret_abc"));
        assert!(!format!("{client:?}").contains("secret_abc"));
    }

    #[test]
    fn which_failures_may_have_been_applied() {
        let server = NotionError::Server {
            what: "w".into(),
            status: 502,
            message: "m".into(),
        };
        assert!(server.maybe_applied());
        let conflict = NotionError::Server {
            what: "w".into(),
            status: 409,
            message: "Conflict occurred while saving. Please try again.".into(),
        };
        assert!(!conflict.maybe_applied() && conflict.is_transient());
        let limited = NotionError::RateLimited {
            what: "w".into(),
            status: 429,
            retry_after: None,
        };
        assert!(!limited.maybe_applied());
        let archived = NotionError::Invalid {
            what: "w".into(),
            status: 400,
            code: "validation_error".into(),
            message:
                "Can't edit block that is archived. You must unarchive the block before editing."
                    .into(),
        };
        assert!(archived.is_archived());
    }
}
