//! A recording HTTP proxy in front of the emulator, for the IAM test: every AWS request a
//! function's SDK makes goes through it and is recorded as the IAM action it needs and the
//! resource it names, then forwarded unchanged. One proxy per function attributes each call to
//! the function that made it.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::net::TcpListener;

/// One request: the IAM action it needs (`dynamodb:Query`) and the resource it names: a table
/// (`prs-…`, or `prs-…/index/pending`), a queue URL, a secret id, a parameter name or
/// `bucket/key`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    pub action: String,
    pub resource: String,
    /// DynamoDB: what the IAM condition keys see. The key attributes' values (`Key`, a
    /// PutItem's `Item`, a Query's `name = :value` conditions), as text.
    pub keys: Vec<(String, String)>,
    /// DynamoDB: the top-level attribute names the request touches (`dynamodb:Attributes`).
    pub attributes: Vec<String>,
    /// DynamoDB: `ReturnValues`, when given.
    pub return_values: Option<String>,
    /// DynamoDB: `Select` (Query, Scan), when given.
    pub select: Option<String>,
}

/// Bedrock's runtime, which the emulator lacks: its requests go to a Converse stand-in.
#[derive(Clone)]
pub struct AuditProxy {
    endpoint: String,
    calls: Arc<Mutex<Vec<Call>>>,
    _server: standins::http_server::Serving,
}

impl AuditProxy {
    pub async fn start(upstream: String) -> AuditProxy {
        Self::start_with(upstream, None).await
    }

    /// Bedrock requests (`/model/{id}/converse`) go to `bedrock` instead of `upstream`.
    pub async fn start_with(upstream: String, bedrock: Option<String>) -> AuditProxy {
        Self::start_routed(upstream, bedrock, None).await
    }

    /// Also Lambda's Invoke (`/2015-03-31/functions/…`) to `lambda` (the emulator does not run
    /// our functions: a [`crate::lambda_standin::LambdaStandIn`] does).
    pub async fn start_routed(
        upstream: String,
        bedrock: Option<String>,
        lambda: Option<String>,
    ) -> AuditProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
        let http = reqwest::Client::new();
        let recorded = calls.clone();
        let server = standins::http_server::Serving::spawn(listener, move |req| {
            let path = req.uri().path();
            let upstream = match (&bedrock, &lambda) {
                (Some(b), _) if path.starts_with("/model/") => b.clone(),
                (_, Some(l)) if path.starts_with("/2015-03-31/functions/") => l.clone(),
                _ => upstream.clone(),
            };
            forward(http.clone(), upstream, recorded.clone(), req)
        });
        AuditProxy {
            endpoint,
            calls,
            _server: server,
        }
    }

    /// An SDK configuration whose every request goes through this proxy.
    pub async fn sdk(&self) -> aws_config::SdkConfig {
        ops::stack::local_sdk_config(&self.endpoint).await
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

/// The IAM action of a request, from the signing scope's service and the operation: the JSON
/// protocols name it in `X-Amz-Target`; S3 in the method. Batch operations need the action of
/// their single form (IAM has no `sqs:SendMessageBatch`).
fn call_of(parts: &http::request::Parts, body: &[u8]) -> Call {
    let service = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|auth| auth.split("Credential=").nth(1))
        .and_then(|cred| cred.split('/').nth(3))
        .unwrap_or("unsigned")
        .to_string();
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let field = |name: &str| json.get(name).and_then(|v| v.as_str()).map(str::to_string);
    if service == "bedrock" {
        // Converse needs bedrock:InvokeModel on the model it names: a profile's ARN for a
        // profile id, a foundation model's ARN in the Region for a model id.
        let id = parts
            .uri
            .path()
            .strip_prefix("/model/")
            .and_then(|p| p.strip_suffix("/converse"))
            .map(standins::github_standin::rest::percent_decode)
            .unwrap_or_default();
        let resource = if id.starts_with("arn:") {
            id
        } else if id.split('.').count() > 2 {
            format!("arn:aws:bedrock:us-east-1:123456789012:inference-profile/{id}")
        } else {
            format!("arn:aws:bedrock:us-east-1::foundation-model/{id}")
        };
        return Call {
            action: "bedrock:InvokeModel".into(),
            resource,
            keys: Vec::new(),
            attributes: Vec::new(),
            return_values: None,
            select: None,
        };
    }
    if service == "lambda" {
        // Invoke needs lambda:InvokeFunction on the function it names.
        let function = parts
            .uri
            .path()
            .strip_prefix("/2015-03-31/functions/")
            .and_then(|p| p.strip_suffix("/invocations"));
        return Call {
            action: match function {
                Some(_) => "lambda:InvokeFunction".into(),
                None => format!("lambda:Unrecognised {}", parts.uri.path()),
            },
            resource: function.unwrap_or_default().to_string(),
            keys: Vec::new(),
            attributes: Vec::new(),
            return_values: None,
            select: None,
        };
    }
    if service == "s3" {
        let path = parts.uri.path().trim_start_matches('/').to_string();
        return Call {
            action: format!("s3:{}", s3_action(parts, &path)),
            resource: path,
            keys: Vec::new(),
            attributes: Vec::new(),
            return_values: None,
            select: None,
        };
    }
    let operation = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("unknown")
        .to_string();
    let operation = operation
        .strip_suffix("Batch")
        .filter(|_| service == "sqs")
        .map(str::to_string)
        .unwrap_or(operation);
    let resource = match service.as_str() {
        "dynamodb" => match (field("TableName"), field("IndexName")) {
            (Some(table), Some(index)) => format!("{table}/index/{index}"),
            (Some(table), None) => table,
            _ => String::new(),
        },
        "sqs" => field("QueueUrl").unwrap_or_default(),
        "secretsmanager" => field("SecretId").unwrap_or_default(),
        "ssm" => field("Name").unwrap_or_default(),
        _ => String::new(),
    };
    let (keys, attributes) = if service == "dynamodb" {
        dynamodb_keys(&json)
    } else {
        (Vec::new(), Vec::new())
    };
    Call {
        action: format!("{service}:{operation}"),
        resource,
        keys,
        attributes,
        return_values: field("ReturnValues"),
        select: field("Select"),
    }
}

/// A DynamoDB request's key values and the attribute names it touches.
fn dynamodb_keys(json: &serde_json::Value) -> (Vec<(String, String)>, Vec<String>) {
    let text = |v: &serde_json::Value| {
        v.get("S")
            .or_else(|| v.get("N"))
            .and_then(|s| s.as_str())
            .map(str::to_string)
    };
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut attributes: Vec<String> = Vec::new();
    for map in ["Key", "Item"] {
        if let Some(m) = json.get(map).and_then(|m| m.as_object()) {
            for (name, value) in m {
                attributes.push(name.clone());
                if let Some(t) = text(value) {
                    keys.push((name.clone(), t));
                }
            }
        }
    }
    let names = json
        .get("ExpressionAttributeNames")
        .and_then(|n| n.as_object());
    if let Some(names) = names {
        attributes.extend(
            names
                .values()
                .filter_map(|v| v.as_str())
                .map(str::to_string),
        );
    }
    // A Query's `#name = :value` (or `name = :value`) conditions.
    if let Some(condition) = json.get("KeyConditionExpression").and_then(|c| c.as_str()) {
        let values = json.get("ExpressionAttributeValues");
        for part in condition.split(" AND ") {
            if let Some((name, value)) = part.split_once('=') {
                let name = name.trim();
                let name = names
                    .and_then(|n| n.get(name))
                    .and_then(|v| v.as_str())
                    .unwrap_or(name)
                    .to_string();
                if let Some(v) = values.and_then(|vs| vs.get(value.trim())).and_then(text) {
                    keys.push((name, v));
                }
            }
        }
    }
    attributes.sort();
    attributes.dedup();
    keys.sort();
    keys.dedup();
    (keys, attributes)
}

/// The IAM action an S3 request needs: by method, whether it names an object, its
/// subresource query and copy header. Anything else is `Unrecognised…`, which no role grants.
fn s3_action(parts: &http::request::Parts, path: &str) -> String {
    // The Rust SDK names its operation in `x-id`; the rules read the rest of the query.
    let query = parts
        .uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty() && !kv.starts_with("x-id="))
        .collect::<Vec<_>>()
        .join("&");
    let query = query.as_str();
    let has = |sub: &str| query.split('&').any(|kv| kv.split('=').next() == Some(sub));
    let object = path.trim_end_matches('/').contains('/');
    let method = parts.method.as_str();
    let action = match (object, method) {
        (true, _) if has("tagging") => match method {
            "GET" => "GetObjectTagging",
            "PUT" => "PutObjectTagging",
            _ => "DeleteObjectTagging",
        },
        (true, "GET") if has("acl") => "GetObjectAcl",
        (true, _) if has("acl") => "PutObjectAcl",
        // Multipart uploads need PutObject; a copy also GetObject on its source (not modelled).
        (true, "PUT" | "POST") if has("uploads") || has("uploadId") => "PutObject",
        (true, "PUT") if parts.headers.contains_key("x-amz-copy-source") => "PutObject+CopySource",
        (true, "PUT") if query.is_empty() => "PutObject",
        (true, "GET" | "HEAD") if query.is_empty() || has("partNumber") => "GetObject",
        (true, "DELETE") if query.is_empty() => "DeleteObject",
        (false, "GET") if query.is_empty() || has("list-type") || has("prefix") => "ListBucket",
        (false, "HEAD") => "ListBucket",
        (false, "POST") if has("delete") => "DeleteObject",
        _ => return format!("Unrecognised {method} {path}?{query}"),
    };
    action.to_string()
}

async fn forward(
    http: reqwest::Client,
    upstream: String,
    calls: Arc<Mutex<Vec<Call>>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    calls.lock().unwrap().push(call_of(&parts, &body));
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let request = crate::relay::with_headers(
        http.request(parts.method.clone(), format!("{upstream}{path_and_query}")),
        &parts.headers,
    );
    Ok(crate::relay::answer(request.body(body).send().await).await)
}
