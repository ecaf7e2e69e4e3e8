//! An Amazon Bedrock Converse stand-in (`POST /model/{modelId}/converse`): a real HTTP server on
//! 127.0.0.1, stricter than Bedrock, never looser. Every request is recorded, then checked:
//!
//! 1. SigV4: `Authorization: AWS4-HMAC-SHA256 Credential=…/bedrock/aws4_request,
//!    SignedHeaders=…, Signature=<64 hex>` with `host` and `x-amz-date` signed, and an
//!    `X-Amz-Date` header → else 403 `InvalidSignatureException` (the signature itself is not
//!    recomputed: the test's credentials are fake);
//! 2. the path's model id (percent-decoded) is the one it serves: a foundation model id served
//!    on demand, or a cross-Region inference profile (`us.…`, `global.…`) given by its id or its
//!    ARN in the signing Region and moto's account. The bare id of a profile's model is refused as Bedrock refuses a current Claude model
//!    named without a profile (400 `ValidationException`, "Invocation of model ID … with
//!    on-demand throughput isn’t supported…"); anything else → 400 `ValidationException` "The
//!    provided model identifier is invalid.";
//! 3. `Content-Type: application/json`; the body only `messages` (non-empty, starting with a
//!    `user` turn, each `{role: user|assistant, content: [{text}]}`), `system` (`[{text}]`, a
//!    `{cachePoint: {type: default}}` allowed after a text block, for a model that caches) and
//!    `inferenceConfig` (`maxTokens` 1..=4096, `temperature` 0..=1) → else 400
//!    `ValidationException`.
//!
//! Then the next scripted [`ConverseReply`]: a text, a `ThrottlingException` (429), or no
//! answer for a while. With nothing scripted it answers 500 `InternalServerException`.
//!
//! `usage` counts a token per four characters. A system prompt followed by a `cachePoint` and
//! at least [`min_cache_tokens`] long is written to the cache on first sight
//! (`cacheWriteInputTokens`) and read from it (`cacheReadInputTokens`) while it was last used
//! at most [`CACHE_TTL_SECONDS`] before, on the stand-in's clock, as Claude models on Bedrock
//! do; a shorter one is not cached.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio::net::TcpListener;

#[derive(Clone, Debug)]
pub enum ConverseReply {
    Text(String),
    /// 429 `ThrottlingException`.
    Throttle,
    /// Waits this long, then answers with the text.
    Slow(Duration, String),
    /// The text, cut off: `stopReason: max_tokens`.
    Truncated(String),
    /// The text, cut off at the model's context window: `stopReason:
    /// model_context_window_exceeded`.
    ContextWindowExceeded(String),
    /// A final answer that is no answer: `stopReason` `content_filtered` (empty content) or
    /// `guardrail_intervened` (the guardrail's blocked message as the text). Anything else
    /// is refused at once.
    Filtered(&'static str),
}

/// The text Bedrock answers when a guardrail blocks the input (its default blocked message).
pub const GUARDRAIL_BLOCKED: &str = "Sorry, the model cannot answer this question.";

#[derive(Clone, Debug)]
pub struct ConverseRequest {
    pub path: String,
    pub model_id: String,
    pub body: Value,
    pub status: u16,
    /// Tokens answered: input, read from the cache, written to it, output.
    pub usage: (u64, u64, u64, u64),
}

/// The shortest prefix a model caches on Bedrock, in tokens: 4,096 for Claude Haiku 4.5 and
/// Opus 4.5, 2,048 for Claude 3.5 Haiku, 1,024 for the others (Sonnet 4.5, 3.7 Sonnet, Nova).
pub fn min_cache_tokens(model: &str) -> u64 {
    if model.contains("claude-haiku-4-5") || model.contains("claude-opus-4-5") {
        4096
    } else if model.contains("claude-3-5-haiku") {
        2048
    } else {
        1024
    }
}

/// How long a cached prefix lives after its last use, in seconds (Bedrock's five minutes).
pub const CACHE_TTL_SECONDS: i64 = 300;

struct State {
    model_id: String,
    /// System prompts cached so far, with the time of their last use (Unix seconds).
    cached: std::collections::BTreeMap<String, i64>,
    /// The stand-in's clock (Unix seconds), when a test or bench sets it; else the wall clock.
    clock: Option<i64>,
    script: VecDeque<ConverseReply>,
    requests: Vec<ConverseRequest>,
}

#[derive(Clone)]
pub struct ConverseStub {
    url: String,
    state: Arc<Mutex<State>>,
    _server: crate::http_server::Serving,
}

impl ConverseStub {
    pub async fn start(model_id: &str) -> ConverseStub {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            model_id: model_id.to_string(),
            cached: Default::default(),
            clock: None,
            script: VecDeque::new(),
            requests: Vec::new(),
        }));
        let shared = state.clone();
        let server =
            crate::http_server::Serving::spawn(listener, move |req| handle(shared.clone(), req));
        ConverseStub {
            url,
            state,
            _server: server,
        }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn script(&self, replies: impl IntoIterator<Item = ConverseReply>) {
        self.state.lock().unwrap().script.extend(replies);
    }

    /// Sets the clock the cache's lifetime is measured by (Unix seconds).
    pub fn set_clock(&self, unix: i64) {
        self.state.lock().unwrap().clock = Some(unix);
    }

    pub fn requests(&self) -> Vec<ConverseRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// A Bedrock runtime client for `sdk` whose requests come here.
    pub fn client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_bedrockruntime::Client {
        aws_sdk_bedrockruntime::Client::from_conf(
            aws_sdk_bedrockruntime::config::Builder::from(sdk)
                .endpoint_url(self.url())
                .build(),
        )
    }
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header(
            "x-amzn-errortype",
            format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        )
        .body(Full::new(Bytes::from(
            json!({ "message": message }).to_string(),
        )))
        .unwrap()
}

const SCOPES: &[&str] = &["us", "eu", "apac", "jp", "au", "ca", "us-gov", "global"];

/// The account a profile ARN must name: moto's, the one every test's credentials stand for.
pub const ACCOUNT: &str = "123456789012";

/// The Region the request was signed for (`Credential=AKID/date/<region>/bedrock/…`).
fn signed_region(headers: &http::HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.split("Credential=").nth(1))
        .and_then(|c| c.split('/').nth(2))
        .unwrap_or_default()
        .to_string()
}

/// Whether Bedrock caches a prompt prefix for `model` (the foundation model a profile names):
/// Claude 3.5 Haiku, 3.7 Sonnet, the Claude 4 family, and Amazon Nova. Others refuse a
/// `cachePoint`.
fn caches(model: &str) -> bool {
    let id = model.rsplit('/').next().unwrap_or(model);
    let foundation = match id.split_once('.') {
        Some((scope, rest)) if SCOPES.contains(&scope) && rest.contains('.') => rest,
        _ => id,
    };
    [
        "anthropic.claude-3-5-haiku",
        "anthropic.claude-3-7-sonnet",
        "anthropic.claude-sonnet-4",
        "anthropic.claude-opus-4",
        "anthropic.claude-haiku-4",
        "amazon.nova",
    ]
    .iter()
    .any(|p| foundation.starts_with(p))
}

/// Whether `asked` names the served model, else Bedrock's refusal. A profile's ARN must name
/// the Region the call was signed for and moto's account.
fn resolve(served: &str, asked: &str, region: &str) -> Result<(), Box<Response<Full<Bytes>>>> {
    if asked == served {
        return Ok(());
    }
    let profile = served
        .split_once('.')
        .filter(|(scope, rest)| SCOPES.contains(scope) && rest.contains('.'));
    if let Some((_, foundation)) = profile {
        if asked == format!("arn:aws:bedrock:{region}:{ACCOUNT}:inference-profile/{served}") {
            return Ok(());
        }
        if asked == foundation {
            return Err(Box::new(error(
                StatusCode::BAD_REQUEST,
                "ValidationException",
                &format!(
                    "Invocation of model ID {foundation} with on-demand throughput isn’t \
                     supported. Retry your request with the ID or ARN of an inference profile \
                     that contains this model."
                ),
            )));
        }
    }
    Err(Box::new(error(
        StatusCode::BAD_REQUEST,
        "ValidationException",
        "The provided model identifier is invalid.",
    )))
}

fn signed(headers: &http::HeaderMap) -> bool {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(rest) = auth.strip_prefix("AWS4-HMAC-SHA256 Credential=") else {
        return false;
    };
    let signed_headers = rest
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("");
    let signature = rest.split("Signature=").nth(1).unwrap_or("");
    rest.contains("/bedrock/aws4_request")
        && signed_headers.split(';').any(|h| h == "host")
        && signed_headers.split(';').any(|h| h == "x-amz-date")
        && signature.len() == 64
        && signature.bytes().all(|b| b.is_ascii_hexdigit())
        && headers.contains_key("x-amz-date")
}

fn valid_body(body: &Value) -> Result<(), String> {
    let Some(top) = body.as_object() else {
        return Err("the body is not a JSON object".into());
    };
    for key in top.keys() {
        if !["messages", "system", "inferenceConfig"].contains(&key.as_str()) {
            return Err(format!("unexpected field {key}"));
        }
    }
    let messages = top
        .get("messages")
        .and_then(|m| m.as_array())
        .filter(|m| !m.is_empty())
        .ok_or("messages must be a non-empty list")?;
    if messages[0]["role"] != "user" {
        return Err("A conversation must start with a user message.".into());
    }
    for m in messages {
        if m.as_object()
            .is_some_and(|o| o.keys().any(|k| k != "role" && k != "content"))
        {
            return Err("a message has only role and content".into());
        }
        if !matches!(m["role"].as_str(), Some("user" | "assistant")) {
            return Err("a message's role is user or assistant".into());
        }
        let content = m["content"]
            .as_array()
            .filter(|c| !c.is_empty())
            .ok_or("a message needs content")?;
        if !content
            .iter()
            .all(|c| c["text"].as_str().is_some_and(|t| !t.is_empty()))
        {
            return Err("content blocks must be non-empty text".into());
        }
    }
    if let Some(system) = top.get("system") {
        let blocks = system.as_array().ok_or("system must be a list")?;
        for (i, b) in blocks.iter().enumerate() {
            let text = b.as_object().is_some_and(|o| o.len() == 1) && b["text"].is_string();
            let cache_point = b.as_object().is_some_and(|o| o.len() == 1)
                && b["cachePoint"] == json!({"type": "default"})
                && i > 0;
            if !text && !cache_point {
                return Err(
                    "system blocks are {text} or, after a text, {cachePoint: {type: default}}"
                        .into(),
                );
            }
        }
    }
    if let Some(config) = top.get("inferenceConfig") {
        let known = ["maxTokens", "temperature", "topP", "stopSequences"];
        if config
            .as_object()
            .is_none_or(|o| o.keys().any(|k| !known.contains(&k.as_str())))
        {
            return Err("inferenceConfig takes maxTokens, temperature, topP, stopSequences".into());
        }
        if let Some(max) = config.get("maxTokens") {
            if !max.as_i64().is_some_and(|m| (1..=4096).contains(&m)) {
                return Err("maxTokens must be 1..4096".into());
            }
        }
        if let Some(t) = config.get("temperature") {
            if !t.as_f64().is_some_and(|t| (0.0..=1.0).contains(&t)) {
                return Err("temperature must be 0..1".into());
            }
        }
    }
    Ok(())
}

async fn handle(
    state: Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path().to_string();
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model_id = path
        .strip_prefix("/model/")
        .and_then(|p| p.strip_suffix("/converse"))
        .map(crate::github_standin::rest::percent_decode)
        .unwrap_or_default();
    let (answer, slow) = {
        let mut st = state.lock().unwrap();
        let answer: Result<ConverseReply, Response<Full<Bytes>>> =
            if parts.method != http::Method::POST {
                Err(error(
                    StatusCode::NOT_FOUND,
                    "UnknownOperationException",
                    "Not Found",
                ))
            } else if !signed(&parts.headers) {
                Err(error(
                StatusCode::FORBIDDEN,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            ))
            } else if let Err(refused) =
                resolve(&st.model_id, &model_id, &signed_region(&parts.headers))
            {
                Err(*refused)
            } else if !caches(&st.model_id)
                && json["system"]
                    .as_array()
                    .is_some_and(|b| b.iter().any(|b| b.get("cachePoint").is_some()))
            {
                Err(error(
                    StatusCode::BAD_REQUEST,
                    "ValidationException",
                    "You invoked an unsupported model or your request did not allow prompt \
                     caching. See the documentation for more information.",
                ))
            } else if parts
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_none_or(|v| !v.starts_with("application/json"))
            {
                Err(error(
                    StatusCode::BAD_REQUEST,
                    "ValidationException",
                    "Content-Type must be application/json",
                ))
            } else if let Err(why) = valid_body(&json) {
                Err(error(StatusCode::BAD_REQUEST, "ValidationException", &why))
            } else {
                st.script.pop_front().ok_or_else(|| {
                    error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "InternalServerException",
                        "no reply scripted",
                    )
                })
            };
        let usage = match &answer {
            Ok(_) => usage(&mut st, &json),
            Err(_) => (0, 0, 0),
        };
        let reply = |text: &str, stop: &str| reply(text, stop, &usage);
        let answer_text = match &answer {
            Ok(
                ConverseReply::Text(t)
                | ConverseReply::Slow(_, t)
                | ConverseReply::Truncated(t)
                | ConverseReply::ContextWindowExceeded(t),
            ) => Some(t.clone()),
            _ => None,
        };
        let (response, slow) = match answer {
            Err(response) => (response, None),
            Ok(ConverseReply::Throttle) => (
                error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "ThrottlingException",
                    "Too many requests, please wait before trying again.",
                ),
                None,
            ),
            Ok(ConverseReply::Text(text)) => (reply(&text, "end_turn"), None),
            Ok(ConverseReply::Slow(wait, text)) => (reply(&text, "end_turn"), Some(wait)),
            Ok(ConverseReply::Truncated(text)) => (reply(&text, "max_tokens"), None),
            Ok(ConverseReply::ContextWindowExceeded(text)) => {
                (reply(&text, "model_context_window_exceeded"), None)
            }
            Ok(ConverseReply::Filtered(stop)) => match stop {
                "content_filtered" => (reply("", stop), None),
                "guardrail_intervened" => (reply(GUARDRAIL_BLOCKED, stop), None),
                other => panic!("not a filtering stopReason of Converse: {other}"),
            },
        };
        let answered = match (&answer_text, response.status().as_u16()) {
            (Some(text), 200) => (
                usage.0,
                usage.1,
                usage.2,
                (text.chars().count() as u64).div_ceil(4),
            ),
            _ => (0, 0, 0, 0),
        };
        st.requests.push(ConverseRequest {
            path: path.clone(),
            model_id: model_id.clone(),
            body: json.clone(),
            status: response.status().as_u16(),
            usage: answered,
        });
        (response, slow)
    };
    if let Some(wait) = slow {
        tokio::time::sleep(wait).await;
    }
    Ok(answer)
}

/// A token per four characters; the cached system prefix counted apart (see the module doc).
fn usage(st: &mut State, body: &Value) -> (u64, u64, u64) {
    let tokens = |t: &str| (t.chars().count() as u64).div_ceil(4);
    let blocks = body["system"].as_array().cloned().unwrap_or_default();
    let system: String = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
    let user: u64 = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(tokens))
        .sum();
    let marked = blocks.iter().any(|b| b.get("cachePoint").is_some());
    if marked && tokens(&system) >= min_cache_tokens(&st.model_id) {
        let now = st
            .clock
            .unwrap_or_else(|| time::OffsetDateTime::now_utc().unix_timestamp());
        let live = st
            .cached
            .get(&system)
            .is_some_and(|used| now - used <= CACHE_TTL_SECONDS);
        st.cached.insert(system.clone(), now);
        if live {
            (user, tokens(&system), 0)
        } else {
            (user, 0, tokens(&system))
        }
    } else {
        (user + tokens(&system), 0, 0)
    }
}

fn reply(text: &str, stop: &str, usage: &(u64, u64, u64)) -> Response<Full<Bytes>> {
    let (input, read, write) = *usage;
    let output = (text.chars().count() as u64).div_ceil(4);
    let body = json!({
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": {
            "inputTokens": input,
            "outputTokens": output,
            "totalTokens": input + read + write + output,
            "cacheReadInputTokens": read,
            "cacheWriteInputTokens": write,
        },
        "metrics": {"latencyMs": 1450}
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}
