//! An Anthropic Messages API stand-in: a real HTTP/1.1 server on 127.0.0.1 that answers
//! `POST /v1/messages` the way the API does, and is stricter than the API, never looser.
//!
//! Every request is recorded (with the status it got), then checked in this order, the first
//! violation answered with the API's error shape (`{"type":"error","error":{"type","message"},
//! "request_id"}`):
//!
//! 1. Path other than `/v1/messages` → 404 `not_found_error`; method other than POST → 405.
//! 2. `x-api-key` missing → 401 `authentication_error` ("x-api-key header is required"), not the
//!    expected key → 401 ("invalid x-api-key").
//! 3. `anthropic-version` missing or not `2023-06-01` → 400 `invalid_request_error`.
//! 4. `content-type` not `application/json` → 400 `invalid_request_error`.
//! 5. The body: not JSON → 400; not an object; a field the API does not take ("Extra inputs are
//!    not permitted"); `model` not a non-empty string; `max_tokens` not an integer in
//!    1..=64000; `messages` not a non-empty array of `{role: user|assistant, content: non-empty
//!    string or array}` starting with `user`; `system` neither a string nor an array; `stream:
//!    true` (the stand-in does not stream) → 400 `invalid_request_error` naming the field.
//! 6. A scripted [`Reply`] (consumed in order), else the default reply (a text answer).
//!
//! A success is a realistic Messages API message: `id` `msg_…`, `type` `message`, `role`
//! `assistant`, the requested `model`, one `text` content block, `stop_reason` `end_turn`,
//! `usage`. Every response carries `content-type: application/json` and `request-id`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio::net::TcpListener;

pub const ANTHROPIC_VERSION: &str = "2023-06-01";
pub const DEFAULT_TEXT: &str = "Summarizes the change for a newcomer.";

/// Top-level fields the Messages API takes; anything else is refused.
const KNOWN_FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "messages",
    "system",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "metadata",
    "tools",
    "tool_choice",
    "thinking",
    "service_tier",
];

/// What the stub answers a valid request with.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// 200, a message whose one text block is this.
    Text(String),
    /// 200, the text with this other `stop_reason`: cut off (`max_tokens`,
    /// `model_context_window_exceeded`), or declined by the model's safety (`refusal`).
    CutOff(String, &'static str),
    /// 529 `overloaded_error` "Overloaded".
    Overloaded,
    /// 429 `rate_limit_error` with `retry-after` (seconds) and exhausted rate-limit headers.
    RateLimited { retry_after_secs: u64 },
    /// 500 `api_error` "Internal server error".
    ServerError,
    /// 401 `authentication_error` "invalid x-api-key" (a revoked key).
    Unauthorized,
    /// 200 `application/json` whose body is cut off mid-string.
    Malformed,
    /// Reads the request and never answers (until the stub stops).
    Hang,
}

/// A request as the stub received it (refused ones included).
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub raw_body: String,
    /// The body, if it was JSON.
    pub body: Option<Value>,
    /// What it was answered with; `None` for a [`Reply::Hang`].
    pub status: Option<u16>,
    /// When it arrived.
    pub at: Instant,
}

struct State {
    api_key: String,
    script: VecDeque<Reply>,
    default: Reply,
    requests: Vec<RecordedRequest>,
}

/// The running stand-in. Clones share the same server and state.
#[derive(Clone)]
pub struct MessagesStub {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    server: standins::http_server::Serving,
}

impl MessagesStub {
    /// Starts on 127.0.0.1:0, expecting `x-api-key: <api_key>`.
    pub async fn start(api_key: &str) -> MessagesStub {
        assert!(!api_key.is_empty(), "the stub needs a non-empty key");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State {
            api_key: api_key.to_string(),
            script: VecDeque::new(),
            default: Reply::Text(DEFAULT_TEXT.to_string()),
            requests: Vec::new(),
        }));
        let shared = state.clone();
        let server =
            standins::http_server::Serving::spawn(listener, move |req| handle(shared.clone(), req));
        MessagesStub {
            addr,
            state,
            server,
        }
    }

    /// `http://127.0.0.1:PORT`, no trailing slash (the API's base URL, without `/v1/messages`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues replies for the next valid requests, in order.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.lock().script.extend(replies);
    }

    /// What valid requests get once the script is used up (initially `Text(DEFAULT_TEXT)`).
    pub fn set_default(&self, reply: Reply) {
        self.lock().default = reply;
    }

    /// Scripted replies not yet consumed.
    pub fn pending(&self) -> usize {
        self.lock().script.len()
    }

    /// Every request received, in order, including refused ones.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.lock().requests.len()
    }

    /// Stops accepting and drops open connections (a hanging request is cut).
    pub async fn stop(self) {
        self.server.stop().await;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicking test thread must not hide the stub's record from the others.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// An answer before the common headers are added.
struct Answer {
    status: StatusCode,
    body: Bytes,
    headers: Vec<(&'static str, String)>,
}

fn error(status: StatusCode, kind: &str, message: &str) -> Answer {
    Answer {
        status,
        body: Bytes::from(
            json!({
                "type": "error",
                "error": { "type": kind, "message": message },
            })
            .to_string(),
        ),
        headers: Vec::new(),
    }
}

fn invalid(message: impl AsRef<str>) -> Answer {
    error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        message.as_ref(),
    )
}

async fn handle(
    state: Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let raw = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let raw_body = String::from_utf8_lossy(&raw).to_string();
    let parsed: Option<Value> = serde_json::from_slice(&raw).ok();
    let index = {
        let mut s = lock(&state);
        s.requests.push(RecordedRequest {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            headers: parts.headers.clone(),
            raw_body,
            body: parsed.clone(),
            status: None,
            at: Instant::now(),
        });
        s.requests.len() - 1
    };

    let answer = match check(
        &state,
        &parts.method,
        parts.uri.path(),
        &parts.headers,
        parsed,
    ) {
        Err(refusal) => refusal,
        Ok(request) => {
            let reply = {
                let mut s = lock(&state);
                let default = s.default.clone();
                s.script.pop_front().unwrap_or(default)
            };
            if reply == Reply::Hang {
                // Never answers; the connection is dropped when the stub stops.
                std::future::pending::<()>().await;
            }
            answer(reply, &request, index)
        }
    };

    lock(&state).requests[index].status = Some(answer.status.as_u16());
    let mut response = Response::builder()
        .status(answer.status)
        .header("content-type", "application/json")
        .header("request-id", format!("req_011CStub{index:012}"));
    for (name, value) in answer.headers {
        response = response.header(name, value);
    }
    Ok(response.body(Full::new(answer.body)).unwrap())
}

/// Steps 1–5 of the module documentation: the request, or the refusal.
fn check(
    state: &Mutex<State>,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: Option<Value>,
) -> Result<Value, Answer> {
    if path != "/v1/messages" {
        return Err(error(StatusCode::NOT_FOUND, "not_found_error", "Not found"));
    }
    if method != Method::POST {
        return Err(error(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            &format!("Method {method} not allowed on /v1/messages"),
        ));
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let key = lock(state).api_key.clone();
    match header("x-api-key") {
        None => {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "x-api-key header is required",
            ))
        }
        Some(k) if k != key => {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "invalid x-api-key",
            ))
        }
        Some(_) => {}
    }
    match header("anthropic-version") {
        None => return Err(invalid("anthropic-version: header is required")),
        Some(v) if v != ANTHROPIC_VERSION => {
            return Err(invalid(format!(
                "anthropic-version: {v:?} is not a valid version"
            )))
        }
        Some(_) => {}
    }
    let content_type = header("content-type").unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(invalid(format!(
            "content-type: {content_type:?} is not application/json"
        )));
    }
    let Some(body) = body else {
        return Err(invalid(
            "There was an error parsing the body of your request. Please check that it is valid JSON.",
        ));
    };
    let Some(fields) = body.as_object() else {
        return Err(invalid("body: Input should be an object"));
    };
    if let Some(extra) = fields.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!("{extra}: Extra inputs are not permitted")));
    }
    if fields
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(|m| m.trim().is_empty())
    {
        return Err(invalid("model: Field required (a non-empty string)"));
    }
    if fields
        .get("max_tokens")
        .and_then(Value::as_u64)
        .is_none_or(|n| !(1..=64_000).contains(&n))
    {
        return Err(invalid("max_tokens: an integer in 1..=64000 is required"));
    }
    let Some(messages) = fields
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
    else {
        return Err(invalid("messages: at least one message is required"));
    };
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        if !matches!(role, Some("user") | Some("assistant")) {
            return Err(invalid(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            )));
        }
        let content_ok = match m.get("content") {
            Some(Value::String(s)) => !s.trim().is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            _ => false,
        };
        if !content_ok {
            return Err(invalid(format!(
                "messages.{i}.content: a non-empty string or list of content blocks is required"
            )));
        }
        if let Some(extra) = m
            .as_object()
            .and_then(|o| o.keys().find(|k| *k != "role" && *k != "content"))
        {
            return Err(invalid(format!(
                "messages.{i}.{extra}: Extra inputs are not permitted"
            )));
        }
    }
    if messages[0].get("role").and_then(Value::as_str) != Some("user") {
        return Err(invalid(
            "messages: the first message must use the \"user\" role",
        ));
    }
    match fields.get("system") {
        None | Some(Value::String(_)) | Some(Value::Array(_)) => {}
        Some(_) => return Err(invalid("system: a string or a list of text blocks")),
    }
    if fields.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(invalid("stream: the stand-in does not stream"));
    }
    Ok(body)
}

fn answer(reply: Reply, request: &Value, index: usize) -> Answer {
    let (reply, stop) = match reply {
        Reply::CutOff(text, stop) => (Reply::Text(text), stop),
        other => (other, "end_turn"),
    };
    match reply {
        Reply::Text(text) => {
            let model = request["model"].as_str().unwrap_or_default();
            let input_tokens = request.to_string().len() / 4;
            let output_tokens = text.len().div_ceil(4).max(1);
            Answer {
                status: StatusCode::OK,
                body: Bytes::from(
                    json!({
                        "id": format!("msg_01Stub{index:016}"),
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [{ "type": "text", "text": text }],
                        "stop_reason": stop,
                        "stop_sequence": null,
                        "usage": {
                            "input_tokens": input_tokens,
                            "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0,
                            "output_tokens": output_tokens,
                        },
                    })
                    .to_string(),
                ),
                headers: Vec::new(),
            }
        }
        Reply::Overloaded => error(
            StatusCode::from_u16(529).unwrap(),
            "overloaded_error",
            "Overloaded",
        ),
        Reply::RateLimited { retry_after_secs } => {
            let mut a = error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "This request would exceed the rate limit for your organization. \
                 Please reduce the prompt length or the maximum tokens requested, or try again later.",
            );
            a.headers = vec![
                ("retry-after", retry_after_secs.to_string()),
                ("anthropic-ratelimit-requests-limit", "50".into()),
                ("anthropic-ratelimit-requests-remaining", "0".into()),
            ];
            a
        }
        Reply::ServerError => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "Internal server error",
        ),
        Reply::Unauthorized => error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        ),
        Reply::Malformed => Answer {
            status: StatusCode::OK,
            body: Bytes::from_static(
                br#"{"id":"msg_01Stub","type":"message","role":"assistant","content":[{"type":"text","text":"cut off"#,
            ),
            headers: Vec::new(),
        },
        Reply::Hang => unreachable!("a hang is never answered"),
        Reply::CutOff(..) => unreachable!("answered as a text above"),
    }
}

/// How long after `a` the request `b` arrived.
pub fn gap(a: &RecordedRequest, b: &RecordedRequest) -> Duration {
    b.at.saturating_duration_since(a.at)
}
