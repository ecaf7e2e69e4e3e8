//! The webhook ingest handler: verify the signature over the raw body, decide whether the
//! delivery is ours, and store the merged PR (or apply a repository's lifecycle event to its
//! organisation row). It calls nothing but DynamoDB (invariant 1).
//!
//! Transport-neutral: the Lambda function feeds it API Gateway events ([`WebhookHandler::handle_apigw`])
//! and the local stack feeds it plain HTTP requests; both run exactly this code.

use std::time::Instant;

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use base64::Engine;
use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue};
use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::lifecycle::{self, Lifecycle};
use crate::payload::{self, Classified};
use crate::signature;
use chronicle_aws::secret::{Resolve, Secret, SecretError};
use chronicle_config::WebhookConfig;
use chronicle_domain::hook::{HookRef, HOOK_ID_HEADER, HOOK_TARGET_TYPE_HEADER};
use chronicle_domain::{Delivery, MergedPullRequest, RepoName};
use chronicle_store::{HookStore, PageStore, PrStore, StoreError, UpsertOutcome};

pub const EVENT_HEADER: &str = "x-github-event";
pub const DELIVERY_HEADER: &str = "x-github-delivery";
pub const SIGNATURE_256_HEADER: &str = "x-hub-signature-256";
pub const SIGNATURE_SHA1_HEADER: &str = "x-hub-signature";

/// One HTTP request as received: headers and the exact raw body bytes.
#[derive(Debug, Clone, Default)]
pub struct WebhookRequest {
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The answer to GitHub: a status and a small JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookResponse {
    pub status: u16,
    pub body: Value,
}

impl WebhookResponse {
    fn new(status: u16, body: Value) -> Self {
        WebhookResponse { status, body }
    }

    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self::new(status, json!({ "error": message.into() }))
    }

    /// 413, for a body over the cap (`received` may be a lower bound when reading stopped early).
    pub fn too_large(received: usize, limit: usize) -> Self {
        Self::error(
            413,
            format!("body of {received} bytes or more exceeds the limit of {limit} bytes"),
        )
    }
}

/// How signatures are checked.
#[derive(Debug, Clone)]
pub enum Verifier {
    Secret(Secret),
    /// No secret configured: every request is refused (500), so a misconfigured deployment
    /// fails loudly instead of accepting forged deliveries.
    Unconfigured,
    /// `CHRONICLE_INSECURE_NO_SIGNATURE=1`: signatures are not checked (local development only).
    InsecureNoSignature,
}

/// The request fields worth a log line, filled in as far as the request got.
#[derive(Debug, Default)]
pub struct RequestLog {
    pub delivery_id: Option<String>,
    pub event: Option<String>,
    pub action: Option<String>,
    pub repo: Option<String>,
    pub pr: Option<u64>,
    /// The hook that sent a verified delivery, when this instance has not recorded it yet.
    pub hook: Option<HookRef>,
}

/// The part of the work that needs no I/O, separated so it can be measured on its own.
#[derive(Debug)]
pub enum Decision {
    Respond(WebhookResponse, &'static str),
    Store(Box<MergedPullRequest>, Delivery),
    /// A repository renamed, transferred, deleted, created, or added to the App's
    /// installation: its organisation rows.
    Lifecycle(Lifecycle, Delivery),
}

pub struct WebhookHandler {
    store: PrStore,
    verifier: Verifier,
    max_body_bytes: usize,
    /// Deliveries by outcome since the last EMF line.
    outcomes: chronicle_aws::telemetry::OutcomeCounts,
    /// Where the hooks that deliver are recorded (for redelivery), and those this instance has
    /// recorded: one write per hook per instance, not per delivery.
    hooks: Option<HookStore>,
    /// Hooks recorded (`None`), or whose recording failed and is not tried again before then.
    hooks_recorded: std::sync::Mutex<std::collections::HashMap<HookRef, Option<Instant>>>,
    /// The organisation rows a repository's lifecycle events forget and restore.
    org_rows: Option<PageStore>,
}

/// The names of one lifecycle delivery written at once: a few hundred finish in well under a
/// second, far inside the webhook's time, without a burst that DynamoDB would throttle.
pub const LIFECYCLE_CONCURRENCY: usize = 16;

/// Forgets (`why`) or restores one name, then marks its index stale if the write changed the
/// name's standing or repeats this delivery. `true`: its standing changed now.
async fn apply_name(
    pages: &PageStore,
    repo: &RepoName,
    why: Option<&str>,
    delivery: &str,
    at: Option<OffsetDateTime>,
    received: OffsetDateTime,
) -> Result<bool, StoreError> {
    let applied = match why {
        // A payload without its time is ordered by its arrival.
        Some(why) => {
            pages
                .forget_org_repo(repo, why, delivery, at.unwrap_or(received))
                .await?
        }
        None => pages.restore_org_repo(repo, delivery, at).await?,
    };
    let Some(applied) = applied else {
        return Ok(false);
    };
    let changed = applied.was_gone != why.is_some();
    if changed || applied.again {
        pages.mark_index_rebuild(repo.as_str(), received).await?;
    }
    Ok(changed && !applied.again)
}

/// The hook's record never holds a delivery up for longer than this.
const HOOK_RECORD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);
/// After a failed record, the next try waits this long (no extra call on every delivery).
const HOOK_RECORD_BACKOFF: std::time::Duration = std::time::Duration::from_secs(300);

/// Every outcome a delivery can have, as the log line and the EMF metrics name them.
pub const OUTCOMES: &[&str] = &[
    "inserted",
    "updated",
    "unchanged",
    "ignored",
    "ping",
    "bad_signature",
    "bad_request",
    "too_large",
    "no_secret",
    "contention",
    "store_error",
    "lifecycle",
];

impl WebhookHandler {
    pub fn new(store: PrStore, verifier: Verifier, max_body_bytes: usize) -> Self {
        WebhookHandler {
            store,
            verifier,
            max_body_bytes,
            outcomes: Default::default(),
            hooks: None,
            hooks_recorded: Default::default(),
            org_rows: None,
        }
    }

    /// Applies `repository` and `installation_repositories` deliveries to the organisation
    /// rows in `pages` (the pages table).
    pub fn with_org_rows(mut self, pages: PageStore) -> Self {
        self.org_rows = Some(pages);
        self
    }

    /// Records each hook that delivers in `hooks` (the pages table), for the redelivery stage.
    pub fn with_hooks(mut self, hooks: HookStore) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Recorded already, or failed recently: nothing to write for this delivery.
    fn hook_recorded(&self, hook: &HookRef) -> bool {
        match self
            .hooks_recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(hook)
        {
            Some(None) => true,
            Some(Some(retry_at)) => Instant::now() < *retry_at,
            None => false,
        }
    }

    /// Best effort, bounded by [`HOOK_RECORD_TIMEOUT`]: a failed write is logged and tried again
    /// after [`HOOK_RECORD_BACKOFF`]; the delivery is answered as if nothing happened.
    async fn record_hook(&self, hook: Option<HookRef>) {
        let (Some(store), Some(hook)) = (&self.hooks, hook) else {
            return;
        };
        let result = tokio::time::timeout(
            HOOK_RECORD_TIMEOUT,
            store.remember(&hook, OffsetDateTime::now_utc()),
        )
        .await;
        let retry_at = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => {
                tracing::warn!(hook = %hook, error = %e, "could not record the webhook");
                Some(Instant::now() + HOOK_RECORD_BACKOFF)
            }
            Err(_) => {
                tracing::warn!(hook = %hook, "recording the webhook timed out");
                Some(Instant::now() + HOOK_RECORD_BACKOFF)
            }
        };
        self.hooks_recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(hook, retry_at);
    }

    /// Builds the handler from configuration, fetching the secret once (cold start).
    pub async fn from_config(
        config: &WebhookConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, SecretError> {
        let verifier = match config.secret.resolve(sdk).await? {
            Some(secret) => Verifier::Secret(secret),
            None if config.insecure_no_signature => {
                tracing::warn!(
                    "{}=1: webhook signatures are NOT checked; never use this in AWS",
                    chronicle_config::INSECURE_NO_SIGNATURE
                );
                Verifier::InsecureNoSignature
            }
            None => {
                tracing::error!(
                    "no webhook secret configured ({} / {} / {}); every delivery will be refused",
                    chronicle_config::GITHUB_WEBHOOK_SECRET,
                    chronicle_config::GITHUB_WEBHOOK_SECRET_ARN,
                    chronicle_config::GITHUB_WEBHOOK_SECRET_PARAM
                );
                Verifier::Unconfigured
            }
        };
        let client = aws_sdk_dynamodb::Client::new(sdk);
        let handler = Self::new(
            PrStore::new(client.clone(), config.table.clone()),
            verifier,
            config.max_body_bytes,
        );
        Ok(match &config.pages_table {
            Some(table) => handler
                .with_hooks(HookStore::new(client.clone(), table))
                .with_org_rows(PageStore::new(client, table.clone())),
            None => handler,
        })
    }

    pub fn store(&self) -> &PrStore {
        &self.store
    }

    /// Deliveries by outcome since the last call as one EMF line (`Deliveries_inserted`, …,
    /// every outcome present); the counts start again.
    pub fn emf_line(&self, now: OffsetDateTime) -> String {
        chronicle_aws::telemetry::outcomes_emf_line(
            now,
            "Deliveries_",
            OUTCOMES,
            &self.outcomes.take(),
        )
    }

    pub fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    /// Handles one request and logs one structured line about it (never the body or secret).
    pub async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        let started = Instant::now();
        let mut log = RequestLog::default();
        let decision = self.decide(&request, OffsetDateTime::now_utc(), &mut log);
        let hook = log.hook.take();
        // The hook's record runs alongside the store: it never adds its latency to the answer.
        let ((response, outcome), ()) = match decision {
            Decision::Respond(response, outcome) => {
                ((response, outcome), self.record_hook(hook).await)
            }
            Decision::Store(pr, delivery) => {
                tokio::join!(self.store_pr(&pr, &delivery), self.record_hook(hook))
            }
            Decision::Lifecycle(change, delivery) => {
                tokio::join!(
                    self.apply_lifecycle(&change, &delivery),
                    self.record_hook(hook)
                )
            }
        };
        self.outcomes.add(outcome);
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    delivery_id = log.delivery_id.as_deref().unwrap_or("-"),
                    event = log.event.as_deref().unwrap_or("-"),
                    action = log.action.as_deref().unwrap_or("-"),
                    repo = log.repo.as_deref().unwrap_or("-"),
                    pr = log.pr.unwrap_or(0),
                    outcome,
                    status = response.status,
                    duration_ms,
                    "webhook request"
                )
            };
        }
        if response.status >= 500 {
            line!(error);
        } else {
            line!(info);
        }
        response
    }

    /// Everything before the DynamoDB write: size cap, signature, decoding, classification.
    pub fn decide(
        &self,
        request: &WebhookRequest,
        now: OffsetDateTime,
        log: &mut RequestLog,
    ) -> Decision {
        use Decision::Respond;
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        log.delivery_id = header(DELIVERY_HEADER);
        log.event = header(EVENT_HEADER);

        if request.body.len() > self.max_body_bytes {
            return Respond(
                WebhookResponse::too_large(request.body.len(), self.max_body_bytes),
                "too_large",
            );
        }
        match &self.verifier {
            Verifier::Unconfigured => {
                return Respond(
                    WebhookResponse::error(500, "webhook secret is not configured"),
                    "no_secret",
                );
            }
            Verifier::Secret(secret) => {
                let sha256 = request
                    .headers
                    .get(SIGNATURE_256_HEADER)
                    .map(|v| v.to_str().unwrap_or(""));
                let sha1_present = request.headers.contains_key(SIGNATURE_SHA1_HEADER);
                if let Err(e) = signature::verify(secret, &request.body, sha256, sha1_present) {
                    return Respond(WebhookResponse::error(401, e.to_string()), "bad_signature");
                }
            }
            Verifier::InsecureNoSignature => {}
        }

        let Some(event) = log.event.clone() else {
            return Respond(
                WebhookResponse::error(400, "missing header X-GitHub-Event"),
                "bad_request",
            );
        };
        let json = match json_body(request) {
            Ok(json) => json,
            Err(message) => return Respond(WebhookResponse::error(400, message), "bad_request"),
        };
        // Signed by the secret: the hook it names is ours to remember.
        if self.hooks.is_some() {
            log.hook = HookRef::from_delivery(
                header(HOOK_ID_HEADER).as_deref(),
                header(HOOK_TARGET_TYPE_HEADER).as_deref(),
                &json,
            )
            .filter(|hook| !self.hook_recorded(hook));
        }
        if event == "ping" {
            return Respond(WebhookResponse::new(200, json!({ "pong": true })), "ping");
        }
        if event == "repository" || event == "installation_repositories" {
            return self.decide_lifecycle(&event, &json, now, log);
        }
        if event != "pull_request" {
            let reason = format!("event `{event}` is not tracked");
            return Respond(
                WebhookResponse::new(200, json!({ "ignored": reason })),
                "ignored",
            );
        }
        let classified = payload::action_of(&json).and_then(|action| {
            let classified = payload::classify_action(&action, &json);
            log.action = Some(action);
            classified
        });
        match classified {
            Err(e) => Respond(WebhookResponse::error(400, e.to_string()), "bad_request"),
            Ok(Classified::Ignored(reason)) => Respond(
                WebhookResponse::new(200, json!({ "ignored": reason })),
                "ignored",
            ),
            Ok(Classified::Merged(pr)) => {
                log.repo = Some(pr.repo.to_string());
                log.pr = Some(pr.number);
                let Some(id) = log.delivery_id.clone() else {
                    return Respond(
                        WebhookResponse::error(400, "missing header X-GitHub-Delivery"),
                        "bad_request",
                    );
                };
                Decision::Store(
                    pr,
                    Delivery {
                        id,
                        received_at: now,
                    },
                )
            }
        }
    }

    /// A `repository` or `installation_repositories` delivery: the names it makes gone or live.
    fn decide_lifecycle(
        &self,
        event: &str,
        json: &[u8],
        now: OffsetDateTime,
        log: &mut RequestLog,
    ) -> Decision {
        use Decision::Respond;
        if self.org_rows.is_none() {
            let reason = format!("event `{event}` is not tracked without the pages table");
            return Respond(
                WebhookResponse::new(200, json!({ "ignored": reason })),
                "ignored",
            );
        }
        log.action = payload::action_of(json).ok();
        let classified = if event == "repository" {
            lifecycle::classify_repository(json)
        } else {
            lifecycle::classify_installation_repositories(json)
        };
        match classified {
            Err(e) => Respond(WebhookResponse::error(400, e.to_string()), "bad_request"),
            Ok(lifecycle::Classified::Ignored(reason)) => Respond(
                WebhookResponse::new(200, json!({ "ignored": reason })),
                "ignored",
            ),
            Ok(lifecycle::Classified::Lifecycle(change)) => {
                log.repo = change
                    .gone
                    .first()
                    .map(|(r, _)| r)
                    .or(change.live.first())
                    .map(|r| r.to_string());
                // Recorded on the name's item as the last delivery applied: never empty.
                let Some(id) = log.delivery_id.clone().filter(|id| !id.trim().is_empty()) else {
                    return Respond(
                        WebhookResponse::error(400, "missing or empty header X-GitHub-Delivery"),
                        "bad_request",
                    );
                };
                Decision::Lifecycle(
                    change,
                    Delivery {
                        id,
                        received_at: now,
                    },
                )
            }
        }
    }

    /// Forgets the rows of the names gone and lifts the tombstones of the names live again,
    /// [`LIFECYCLE_CONCURRENCY`] names at a time (an `installation_repositories.added` can name
    /// hundreds); each name changed has its index marked stale, so its build publishes its
    /// owner's organisation page again. Delivered again, no row changes, but the marks are made
    /// again (the earlier attempt may have failed between its two writes).
    async fn apply_lifecycle(
        &self,
        change: &Lifecycle,
        delivery: &Delivery,
    ) -> (WebhookResponse, &'static str) {
        let Some(pages) = &self.org_rows else {
            return (WebhookResponse::error(500, "no pages table"), "store_error");
        };
        let mut work = change
            .gone
            .iter()
            .map(|(repo, why)| (repo.clone(), Some(why.clone())))
            .chain(change.live.iter().map(|repo| (repo.clone(), None)));
        let mut tasks = tokio::task::JoinSet::new();
        let (mut forgotten, mut restored) = (Vec::new(), Vec::new());
        let failed = loop {
            while tasks.len() < LIFECYCLE_CONCURRENCY {
                let Some((repo, why)) = work.next() else {
                    break;
                };
                let (pages, id, at) = (pages.clone(), delivery.id.clone(), change.at);
                let received = delivery.received_at;
                tasks.spawn(async move {
                    let changed =
                        apply_name(&pages, &repo, why.as_deref(), &id, at, received).await;
                    (repo, why.is_some(), changed)
                });
            }
            match tasks.join_next().await {
                None => break None,
                Some(Ok((repo, gone, Ok(true)))) => match gone {
                    true => forgotten.push(repo.to_string()),
                    false => restored.push(repo.to_string()),
                },
                Some(Ok((_, _, Ok(false)))) => {}
                Some(Ok((_, _, Err(e)))) => break Some(e.to_string()),
                Some(Err(e)) => break Some(e.to_string()),
            }
        };
        if let Some(error) = failed {
            tracing::error!(error, "applying the repository's lifecycle event failed");
            return (
                WebhookResponse::error(
                    500,
                    "storing the delivery failed; redeliver it from GitHub",
                ),
                "store_error",
            );
        }
        forgotten.sort();
        restored.sort();
        (
            WebhookResponse::new(200, json!({ "forgotten": forgotten, "restored": restored })),
            "lifecycle",
        )
    }

    async fn store_pr(
        &self,
        pr: &MergedPullRequest,
        delivery: &Delivery,
    ) -> (WebhookResponse, &'static str) {
        let ids = json!({ "repo": pr.repo.as_str(), "prNumber": pr.number });
        match self.store.upsert(pr, delivery).await {
            Ok(UpsertOutcome::Inserted) => (
                WebhookResponse::new(200, with(ids, "stored", json!("inserted"))),
                "inserted",
            ),
            Ok(UpsertOutcome::Updated) => (
                WebhookResponse::new(200, with(ids, "stored", json!("updated"))),
                "updated",
            ),
            Ok(UpsertOutcome::Unchanged { stored_updated_at }) => {
                let why = "stored copy is as new or newer (by pull_request.updated_at)";
                let body = with(
                    with(ids, "unchanged", json!(why)),
                    "storedUpdatedAt",
                    json!(stored_updated_at),
                );
                (WebhookResponse::new(200, body), "unchanged")
            }
            Err(e) => {
                // The details go to the log; GitHub gets a retryable error without internals.
                tracing::error!(error = %e, "storing the pull request failed");
                let outcome = if matches!(e, StoreError::Contention { .. }) {
                    "contention"
                } else {
                    "store_error"
                };
                (
                    WebhookResponse::error(
                        500,
                        "storing the delivery failed; redeliver it from GitHub",
                    ),
                    outcome,
                )
            }
        }
    }

    /// The Lambda entry point: decodes API Gateway's (HTTP API, payload v2) event itself, so an
    /// invalid base64 body is a 400 rather than the panic `lambda_http`'s adapter would raise.
    pub async fn handle_apigw(&self, event: ApiGatewayV2httpRequest) -> ApiGatewayV2httpResponse {
        let response = match decode_apigw_body(&event) {
            Ok(body) => {
                self.handle(WebhookRequest {
                    headers: event.headers,
                    body,
                })
                .await
            }
            Err(message) => {
                let delivery = event
                    .headers
                    .get(DELIVERY_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info!(
                    delivery_id = delivery,
                    outcome = "bad_request",
                    status = 400,
                    "webhook request: {message}"
                );
                self.outcomes.add("bad_request");
                WebhookResponse::error(400, message)
            }
        };
        to_apigw(&response)
    }
}

fn with(mut body: Value, key: &str, value: Value) -> Value {
    body[key] = value;
    body
}

/// The JSON document of a delivery: the body itself, or the `payload` field of a form post
/// (GitHub's "application/x-www-form-urlencoded" content type).
fn json_body(request: &WebhookRequest) -> Result<Bytes, String> {
    let content_type = request
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "application/x-www-form-urlencoded" => form_urlencoded::parse(&request.body)
            .find(|(k, _)| k == "payload")
            .map(|(_, v)| Bytes::from(v.into_owned()))
            .ok_or_else(|| "form-encoded body has no `payload` field".to_string()),
        "application/json" | "" => Ok(request.body.clone()),
        other => Err(format!("unsupported content type `{other}`: use application/json or application/x-www-form-urlencoded")),
    }
}

pub fn decode_apigw_body(event: &ApiGatewayV2httpRequest) -> Result<Bytes, String> {
    match (&event.body, event.is_base64_encoded) {
        (None, _) => Ok(Bytes::new()),
        (Some(text), false) => Ok(Bytes::from(text.clone().into_bytes())),
        (Some(text), true) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map(Bytes::from)
            .map_err(|e| format!("request body is not valid base64: {e}")),
    }
}

pub fn to_apigw(response: &WebhookResponse) -> ApiGatewayV2httpResponse {
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(response.status);
    out.headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    out.body = Some(Body::Text(response.body.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(content_type: &str, body: &[u8]) -> WebhookRequest {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_str(content_type).unwrap());
        WebhookRequest {
            headers,
            body: Bytes::copy_from_slice(body),
        }
    }

    #[test]
    fn form_bodies_yield_their_payload_field() {
        let r = request(
            "application/x-www-form-urlencoded",
            b"a=1&payload=%7B%22x%22%3A1%7D",
        );
        assert_eq!(json_body(&r).unwrap(), Bytes::from_static(br#"{"x":1}"#));
        let r = request("application/x-www-form-urlencoded", b"a=1");
        assert!(json_body(&r).unwrap_err().contains("payload"));
        let r = request("application/json; charset=utf-8", b"{}");
        assert_eq!(json_body(&r).unwrap(), Bytes::from_static(b"{}"));
        assert!(json_body(&request("text/plain", b"{}"))
            .unwrap_err()
            .contains("text/plain"));
    }

    #[test]
    fn apigw_bodies_decode_or_fail_cleanly() {
        let mut e = ApiGatewayV2httpRequest::default();
        e.body = Some("aGk=".into());
        e.is_base64_encoded = true;
        assert_eq!(decode_apigw_body(&e).unwrap(), Bytes::from_static(b"hi"));
        e.body = Some("%%%not base64".into());
        assert!(decode_apigw_body(&e).unwrap_err().contains("base64"));
        e.is_base64_encoded = false;
        assert_eq!(
            decode_apigw_body(&e).unwrap(),
            Bytes::from_static(b"%%%not base64")
        );
    }
}
