//! An Amazon Bedrock Converse stand-in (`POST /model/{modelId}/converse`): a real HTTP server on
//! 127.0.0.1, stricter than Bedrock, never looser. Every request is recorded, then checked:
//!
//! 1. SigV4: `Authorization: AWS4-HMAC-SHA256 Credential=…/bedrock/aws4_request,
//!    SignedHeaders=…, Signature=<64 hex>` with `host` and `x-amz-date` signed, and an
//!    `X-Amz-Date` header → else 403 `InvalidSignatureException` (the signature itself is not
//!    recomputed: the test's credentials are fake);
//! 2. the path's model id (percent-decoded) is the one it serves → else 400 `ValidationException`
//!    "The provided model identifier is invalid.";
//! 3. `Content-Type: application/json`; the body only `messages` (non-empty, starting with a
//!    `user` turn, each `{role: user|assistant, content: [{text}]}`), `system` (`[{text}]`) and
//!    `inferenceConfig` (`maxTokens` 1..=4096, `temperature` 0..=1) → else 400
//!    `ValidationException`.
//!
//! Then the next scripted [`ConverseReply`]: a text, a `ThrottlingException` (429), or no
//! answer for a while. With nothing scripted it answers 500 `InternalServerException`.

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
}

#[derive(Clone, Debug)]
pub struct ConverseRequest {
    pub path: String,
    pub model_id: String,
    pub body: Value,
    pub status: u16,
}

struct State {
    model_id: String,
    script: VecDeque<ConverseReply>,
    requests: Vec<ConverseRequest>,
}

#[derive(Clone)]
pub struct ConverseStub {
    url: String,
    state: Arc<Mutex<State>>,
    _server: infra::http_server::Serving,
}

impl ConverseStub {
    pub async fn start(model_id: &str) -> ConverseStub {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            model_id: model_id.to_string(),
            script: VecDeque::new(),
            requests: Vec::new(),
        }));
        let shared = state.clone();
        let server =
            infra::http_server::Serving::spawn(listener, move |req| handle(shared.clone(), req));
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
        let ok = system
            .as_array()
            .is_some_and(|s| s.iter().all(|b| b["text"].as_str().is_some()));
        if !ok {
            return Err("system must be a list of text blocks".into());
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
        .map(infra::github_standin::rest::percent_decode)
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
            } else if model_id != st.model_id {
                Err(error(
                    StatusCode::BAD_REQUEST,
                    "ValidationException",
                    "The provided model identifier is invalid.",
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
        };
        st.requests.push(ConverseRequest {
            path: path.clone(),
            model_id: model_id.clone(),
            body: json.clone(),
            status: response.status().as_u16(),
        });
        (response, slow)
    };
    if let Some(wait) = slow {
        tokio::time::sleep(wait).await;
    }
    Ok(answer)
}

fn reply(text: &str, stop: &str) -> Response<Full<Bytes>> {
    let body = json!({
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": {"inputTokens": 812, "outputTokens": 164, "totalTokens": 976},
        "metrics": {"latencyMs": 1450}
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}
