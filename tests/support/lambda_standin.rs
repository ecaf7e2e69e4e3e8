//! A stand-in for Lambda's Invoke API, running a function's handler in-process: the REST-JSON
//! protocol of botocore's `lambda/2015-03-31` model, stricter than Lambda, never looser.
//!
//! - `POST /2015-03-31/functions/{FunctionName}/invocations`, optional `?Qualifier=`; the name
//!   matches the model's pattern (a name, or a function ARN) and a registered function, else
//!   404 `ResourceNotFoundException` (`x-amzn-errortype`, `{"Type":"User","message":…}`).
//! - SigV4 required: an `authorization` header signed for the `lambda` service (403
//!   `AccessDeniedException` otherwise; Lambda checks the signature).
//! - `X-Amz-Invocation-Type`: `RequestResponse` (the default) runs the handler and answers 200
//!   with its JSON and `X-Amz-Executed-Version: $LATEST`; `Event` answers 202 (queued, not
//!   run here), `DryRun` 204; anything else 400 `InvalidParameterValueException`.
//! - The payload must be JSON (400 `InvalidRequestContentException`), at most 6 MB (413
//!   `RequestTooLargeException`).
//! - A handler that fails answers 200 with `X-Amz-Function-Error: Unhandled` and Lambda's
//!   `{errorMessage, errorType}` body, as Lambda does.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::net::TcpListener;

type Handler = Arc<
    dyn Fn(
            serde_json::Value,
        ) -> Pin<Box<dyn Future<Output = Result<serde_json::Value, String>> + Send>>
        + Send
        + Sync,
>;

/// One invocation as the stand-in received it.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub function: String,
    pub invocation_type: String,
    pub payload: serde_json::Value,
    /// What the handler answered (`None`: not run).
    pub answer: Option<serde_json::Value>,
}

#[derive(Default)]
struct State {
    functions: HashMap<String, Handler>,
    invocations: Vec<Invocation>,
}

pub struct LambdaStandIn {
    url: String,
    state: Arc<Mutex<State>>,
    _server: standins::http_server::Serving,
}

/// The payload limit of a synchronous invocation.
const MAX_PAYLOAD: usize = 6 * 1024 * 1024;

impl LambdaStandIn {
    pub async fn start() -> LambdaStandIn {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state: Arc<Mutex<State>> = Arc::default();
        let served = state.clone();
        let server = standins::http_server::Serving::spawn(listener, move |req| {
            let state = served.clone();
            async move { Ok::<_, Infallible>(handle(state, req).await) }
        });
        LambdaStandIn {
            url,
            state,
            _server: server,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Registers function `name`, run by `handler` on each RequestResponse invocation.
    pub fn register<F, Fut>(&self, name: &str, handler: F)
    where
        F: Fn(serde_json::Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<serde_json::Value, String>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |v| Box::pin(handler(v)));
        self.state
            .lock()
            .unwrap()
            .functions
            .insert(name.to_string(), handler);
    }

    pub fn invocations(&self) -> Vec<Invocation> {
        self.state.lock().unwrap().invocations.clone()
    }
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("x-amzn-errortype", kind)
        .header("x-amzn-requestid", uuid::Uuid::new_v4().to_string())
        .body(Full::new(Bytes::from(
            serde_json::json!({ "Type": "User", "message": message }).to_string(),
        )))
        .unwrap()
}

/// The function's name from the model's `NamespacedFunctionName`: a name, or an ARN ending in
/// `function:{name}` (a qualifier after it is refused here: none is published).
fn function_name(raw: &str) -> Option<String> {
    let pattern = regex::Regex::new(
        r"^(arn:aws[a-zA-Z-]*:lambda:[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d:\d{12}:function:)?([a-zA-Z0-9_-]{1,64})$",
    )
    .unwrap();
    let caps = pattern.captures(raw)?;
    Some(caps.get(3)?.as_str().to_string())
}

async fn handle(state: Arc<Mutex<State>>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let signed = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 ") && a.contains("/lambda/aws4_request"));
    if !signed {
        return error(
            StatusCode::FORBIDDEN,
            "AccessDeniedException",
            "Missing Authentication Token",
        );
    }
    let path = parts.uri.path();
    let raw = path
        .strip_prefix("/2015-03-31/functions/")
        .and_then(|p| p.strip_suffix("/invocations"))
        .map(standins::github_standin::rest::percent_decode);
    let (Some(raw), true) = (raw, parts.method == http::Method::POST) else {
        return error(
            StatusCode::NOT_FOUND,
            "UnknownOperationException",
            "Unknown operation",
        );
    };
    let qualifier = parts
        .uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .find(|(k, _)| *k == "Qualifier")
        .map(|(_, v)| v.to_string());
    let handler = function_name(&raw)
        .filter(|_| qualifier.as_deref().is_none_or(|q| q == "$LATEST"))
        .and_then(|name| {
            let st = state.lock().unwrap();
            st.functions.get(&name).cloned().map(|h| (name, h))
        });
    let Some((name, handler)) = handler else {
        return error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("Function not found: arn:aws:lambda:us-east-1:123456789012:function:{raw}"),
        );
    };
    if body.len() > MAX_PAYLOAD {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestTooLargeException",
            "Request must be smaller than 6291456 bytes for the InvokeFunction operation",
        );
    }
    let payload: serde_json::Value = if body.is_empty() {
        serde_json::json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "InvalidRequestContentException",
                    "Could not parse request body into json",
                )
            }
        }
    };
    let invocation_type = parts
        .headers
        .get("x-amz-invocation-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("RequestResponse")
        .to_string();
    let mut invocation = Invocation {
        function: name,
        invocation_type: invocation_type.clone(),
        payload: payload.clone(),
        answer: None,
    };
    let response = match invocation_type.as_str() {
        "RequestResponse" => {
            let (body, failed) = match handler(payload).await {
                Ok(answer) => {
                    invocation.answer = Some(answer.clone());
                    (answer, false)
                }
                Err(message) => (
                    serde_json::json!({ "errorMessage": message, "errorType": "Error" }),
                    true,
                ),
            };
            let mut builder = Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .header("x-amz-executed-version", "$LATEST")
                .header("x-amzn-requestid", uuid::Uuid::new_v4().to_string());
            if failed {
                builder = builder.header("x-amz-function-error", "Unhandled");
            }
            builder
                .body(Full::new(Bytes::from(body.to_string())))
                .unwrap()
        }
        "Event" => Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Full::new(Bytes::new()))
            .unwrap(),
        "DryRun" => Response::builder()
            .status(StatusCode::NO_CONTENT)
            .body(Full::new(Bytes::new()))
            .unwrap(),
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                "InvalidParameterValueException",
                &format!("1 validation error detected: Value '{other}' at 'invocationType' failed to satisfy constraint: Member must satisfy enum value set: [Event, RequestResponse, DryRun]"),
            )
        }
    };
    state.lock().unwrap().invocations.push(invocation);
    response
}
