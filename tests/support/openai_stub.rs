//! An OpenAI-compatible `chat/completions` stand-in (what Ollama and vLLM serve): POST
//! `/v1/chat/completions` with a JSON body naming the served model and a non-empty `messages`
//! list of `{role: system|user|assistant, content: string}`; anything else is refused (404, or
//! 400 with an OpenAI-style error). Answers the scripted replies in order.
//!
//! [`OpenAiStub::completion_tokens_only`] makes it a reasoning model of api.openai.com: it
//! refuses `max_tokens` (400 `unsupported_parameter`, `param: max_tokens`: "Use
//! 'max_completion_tokens' instead.") and any temperature but 1 (400 `unsupported_value`,
//! `param: temperature`). Fields it does not know are refused.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio::net::TcpListener;

struct State {
    model: String,
    completion_tokens_only: bool,
    /// The text, and its `finish_reason`.
    replies: VecDeque<(String, &'static str)>,
    requests: Vec<Value>,
}

#[derive(Clone)]
pub struct OpenAiStub {
    url: String,
    state: Arc<Mutex<State>>,
    _server: standins::http_server::Serving,
}

impl OpenAiStub {
    pub async fn start(model: &str) -> OpenAiStub {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            model: model.to_string(),
            completion_tokens_only: false,
            replies: VecDeque::new(),
            requests: Vec::new(),
        }));
        let shared = state.clone();
        let server =
            standins::http_server::Serving::spawn(listener, move |req| handle(shared.clone(), req));
        OpenAiStub {
            url,
            state,
            _server: server,
        }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn reply(&self, text: &str) {
        self.finish(text, "stop");
    }

    /// The next answer ends with this `finish_reason`: `stop`, `length`, or `content_filter`
    /// (the provider's content filter withheld it; its content is then what was let through,
    /// often nothing).
    pub fn finish(&self, text: &str, reason: &'static str) {
        self.state
            .lock()
            .unwrap()
            .replies
            .push_back((text.to_string(), reason));
    }

    /// Refuse `max_tokens` and a temperature, as api.openai.com does for its reasoning models.
    pub fn completion_tokens_only(&self) {
        self.state.lock().unwrap().completion_tokens_only = true;
    }

    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }
}

fn answer(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn refuse(message: &str) -> Response<Full<Bytes>> {
    answer(
        StatusCode::BAD_REQUEST,
        json!({"error": {"message": message, "type": "invalid_request_error"}}),
    )
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
    if parts.method != http::Method::POST || parts.uri.path() != "/v1/chat/completions" {
        return Ok(answer(StatusCode::NOT_FOUND, json!({"error": "not found"})));
    }
    let json_type = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json_type {
        return Ok(refuse("Content-Type must be application/json"));
    }
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        return Ok(refuse("the body is not JSON"));
    };
    let mut st = state.lock().unwrap();
    st.requests.push(json.clone());
    if json["model"].as_str() != Some(st.model.as_str()) {
        return Ok(answer(
            StatusCode::NOT_FOUND,
            json!({"error": {"message": format!("model {} not found", json["model"]), "type": "not_found"}}),
        ));
    }
    if st.completion_tokens_only && json.get("max_tokens").is_some() {
        return Ok(answer(
            StatusCode::BAD_REQUEST,
            json!({"error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "unsupported_parameter"
            }}),
        ));
    }
    if st.completion_tokens_only && json.get("temperature").is_some_and(|t| t != 1) {
        return Ok(answer(
            StatusCode::BAD_REQUEST,
            json!({"error": {
                "message": format!("Unsupported value: 'temperature' does not support {} with this model. Only the default (1) value is supported.", json["temperature"]),
                "type": "invalid_request_error",
                "param": "temperature",
                "code": "unsupported_value"
            }}),
        ));
    }
    let known = [
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
    ];
    if let Some(field) = json
        .as_object()
        .and_then(|o| o.keys().find(|k| !known.contains(&k.as_str())))
    {
        return Ok(refuse(&format!("unrecognized request argument: {field}")));
    }
    for limit in ["max_tokens", "max_completion_tokens"] {
        if json
            .get(limit)
            .is_some_and(|v| v.as_u64().is_none_or(|n| n < 1))
        {
            return Ok(refuse(&format!("{limit} must be a positive integer")));
        }
    }
    let valid = json["messages"].as_array().is_some_and(|m| {
        !m.is_empty()
            && m.iter().all(|m| {
                matches!(m["role"].as_str(), Some("system" | "user" | "assistant"))
                    && m["content"].as_str().is_some()
            })
    });
    if !valid {
        return Ok(refuse(
            "messages must be a non-empty list of {role, content}",
        ));
    }
    let Some((text, finish)) = st.replies.pop_front() else {
        return Ok(answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"message": "no reply scripted"}}),
        ));
    };
    Ok(answer(
        StatusCode::OK,
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": st.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 800, "completion_tokens": 150, "total_tokens": 950}
        }),
    ))
}
