//! A fault-injecting HTTP proxy in front of the emulator's DynamoDB endpoint, for the tests of
//! crashes and ambiguous failures at a real request boundary: it forwards every request, except
//! the next one matching a rule, which it holds forever ([`Hold::Before`]: never applied, the
//! worker is stuck in it) or forwards and then never answers ([`Hold::After`]: applied, but no
//! answer came). A test then drops the worker's future, as a crash or a timeout would.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio::sync::Notify;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Not forwarded: the request never reaches DynamoDB.
    Before,
    /// Forwarded and applied; the answer is never delivered.
    After,
}

struct Rule {
    /// `X-Amz-Target` suffix: `UpdateItem`, `PutItem`, …
    operation: &'static str,
    /// The request body must contain this (a table name, an attribute).
    contains: String,
    hold: Hold,
}

#[derive(Clone)]
pub struct DynamoProxy {
    endpoint: String,
    rules: Arc<Mutex<Vec<Rule>>>,
    /// Notified when a request is held.
    pub held: Arc<Notify>,
    _server: standins::http_server::Serving,
}

impl DynamoProxy {
    pub async fn start(upstream: String) -> DynamoProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let rules: Arc<Mutex<Vec<Rule>>> = Arc::default();
        let held = Arc::new(Notify::new());
        let http = reqwest::Client::new();
        let (r, h) = (rules.clone(), held.clone());
        let server = standins::http_server::Serving::spawn(listener, move |req| {
            forward(http.clone(), upstream.clone(), r.clone(), h.clone(), req)
        });
        DynamoProxy {
            endpoint,
            rules,
            held,
            _server: server,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Holds the next `operation` whose body contains `contains`.
    pub fn hold(&self, operation: &'static str, contains: &str, hold: Hold) {
        self.rules.lock().unwrap().push(Rule {
            operation,
            contains: contains.to_string(),
            hold,
        });
    }

    /// An SDK configuration that talks to DynamoDB through this proxy.
    pub async fn sdk(&self) -> aws_config::SdkConfig {
        ops::stack::local_sdk_config(&self.endpoint).await
    }
}

async fn forward(
    http: reqwest::Client,
    upstream: String,
    rules: Arc<Mutex<Vec<Rule>>>,
    held: Arc<Notify>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let target = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let text = String::from_utf8_lossy(&body).to_string();
    let hold = {
        let mut rules = rules.lock().unwrap();
        let position = rules
            .iter()
            .position(|r| target.ends_with(r.operation) && text.contains(&r.contains));
        position.map(|i| rules.remove(i).hold)
    };
    if hold == Some(Hold::Before) {
        held.notify_one();
        std::future::pending::<()>().await;
    }
    let request = crate::relay::with_headers(
        http.post(format!("{upstream}{}", parts.uri.path())),
        &parts.headers,
    );
    let answer = request.body(body).send().await;
    if hold == Some(Hold::After) {
        held.notify_one();
        std::future::pending::<()>().await;
    }
    Ok(crate::relay::answer(answer).await)
}
