//! A Notion API stand-in: a real HTTP/1.1 server on 127.0.0.1 that keeps pages and blocks in
//! memory and answers the endpoints Chronicle uses the way Notion does, stricter, never looser.
//!
//! Every request is recorded, then checked in this order, the first violation answered with
//! Notion's error shape (`{"object":"error","status","code","message"}`):
//!
//! 1. `Authorization: Bearer <token>` missing or not the token → 401 `unauthorized`.
//! 2. `Notion-Version` missing → 400 `missing_version`; not `2025-09-03` → 400
//!    `validation_error` (the stand-in speaks only the version Chronicle pins).
//! 3. A scripted [`Fault`] (consumed in order): 429 `rate_limited` / 529 with `Retry-After`,
//!    500, 401, or [`Fault::HangAfterApply`] (the request is applied, then never answered).
//! 4. The request body: not JSON → 400 `invalid_json`; larger than 500 KB → 413; more than 100
//!    children in any array, more than 1,000 blocks, more than 2 levels of nesting, a rich-text
//!    item over 2,000 characters (UTF-16 units), more than 100 rich-text items, an unknown block
//!    type, a heading with children → 400 `validation_error` naming the problem.
//! 5. Ids: an unknown or unshared page or block → 404 `object_not_found`; `after` that is not a
//!    child of the block → 400 `validation_error`; `page_size` above 100 → 400.
//!
//! Endpoints: `POST /v1/pages` (a child page of a shared page; it also appears as a
//! `child_page` block among the parent's children), `PATCH /v1/blocks/{id}/children`
//! (`after` supported), `GET /v1/blocks/{id}/children` (cursor pagination), `GET /v1/blocks/{id}`,
//! `PATCH /v1/blocks/{id}` (rich text of the same type), `DELETE /v1/blocks/{id}` (to the trash).

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::Notify;

pub const NOTION_VERSION: &str = "2025-09-03";
const MAX_CHILDREN: usize = 100;
const MAX_BLOCKS: usize = 1_000;
const MAX_TEXT: usize = 2_000;
const MAX_ITEMS: usize = 100;
const MAX_DEPTH: usize = 2;
const MAX_PAYLOAD: usize = 500_000;
const BLOCK_TYPES: &[&str] = &[
    "paragraph",
    "heading_1",
    "heading_2",
    "heading_3",
    "bulleted_list_item",
    "numbered_list_item",
    "toggle",
    "quote",
    "callout",
];

/// A scripted answer to the next valid request (after authentication and version checks).
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// 429 `rate_limited` with `Retry-After` (seconds).
    RateLimited { retry_after_secs: u64 },
    /// 529 (overloaded) with `Retry-After` (seconds).
    Overloaded { retry_after_secs: u64 },
    /// 500 `internal_server_error`.
    ServerError,
    /// 401 `unauthorized` (the token was revoked).
    Unauthorized,
    /// 400 `validation_error` with this message.
    Invalid(String),
    /// Applies the request, then never answers (a crash right after Notion did the work).
    HangAfterApply,
}

#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
    pub status: Option<u16>,
}

#[derive(Clone, Debug)]
struct Node {
    kind: String,
    /// The type's object without `children` (for a page: `{"title": …}`).
    body: Value,
    parent: Option<String>,
    children: Vec<String>,
    in_trash: bool,
}

struct State {
    token: String,
    shared: HashSet<String>,
    nodes: HashMap<String, Node>,
    faults: VecDeque<(Option<&'static str>, Fault)>,
    requests: Vec<RecordedRequest>,
    next_id: u64,
}

/// The running stand-in. Clones share the same server and state.
#[derive(Clone)]
pub struct NotionStub {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    server: infra::http_server::Serving,
    /// Notified when a [`Fault::HangAfterApply`] request has been applied.
    pub applied: Arc<Notify>,
}

/// A block as a test sees it: type, plain text, links, children.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub id: String,
    pub kind: String,
    pub text: String,
    pub links: Vec<String>,
    pub children: Vec<Seen>,
}

impl NotionStub {
    /// Starts on 127.0.0.1:0 expecting `Authorization: Bearer <token>`, with one shared page
    /// (the parent Chronicle is configured with), whose id it returns with the stub.
    pub async fn start(token: &str) -> (NotionStub, String) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State {
            token: token.to_string(),
            shared: HashSet::new(),
            nodes: HashMap::new(),
            faults: VecDeque::new(),
            requests: Vec::new(),
            next_id: 1,
        }));
        let applied = Arc::new(Notify::new());
        let shared = state.clone();
        let notify = applied.clone();
        let server = infra::http_server::Serving::spawn(listener, move |req| {
            handle(shared.clone(), notify.clone(), req)
        });
        let stub = NotionStub {
            addr,
            state,
            server,
            applied,
        };
        let parent = stub.add_page(None, "Engineering onboarding", true);
        (stub, parent)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A page created outside Chronicle; `shared` = shared with the integration.
    pub fn add_page(&self, parent: Option<&str>, title: &str, shared: bool) -> String {
        let mut s = self.lock();
        let id = new_id(&mut s);
        s.nodes.insert(
            id.clone(),
            Node {
                kind: "page".into(),
                body: json!({"title": title}),
                parent: parent.map(str::to_string),
                children: Vec::new(),
                in_trash: false,
            },
        );
        if shared {
            s.shared.insert(id.clone());
        }
        id
    }

    /// Faults for the next valid requests, in order; `only` restricts one to a kind of request,
    /// the others pass it by: `"POST pages"`, `"PATCH children"` (append), `"GET children"`,
    /// `"PATCH block"` (update), `"GET block"`, `"DELETE block"`.
    pub fn fault(&self, only: Option<&'static str>, fault: Fault) {
        self.lock().faults.push_back((only, fault));
    }

    pub fn set_token(&self, token: &str) {
        self.lock().token = token.to_string();
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// Requests answered with this status.
    pub fn count_status(&self, status: u16) -> usize {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.status == Some(status))
            .count()
    }

    /// Requests with this method whose path starts with `prefix`.
    pub fn count(&self, method: &str, prefix: &str) -> usize {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.method == method && r.path.starts_with(prefix))
            .count()
    }

    /// The live (not trashed) child pages of a page: (id, title).
    pub fn child_pages(&self, parent: &str) -> Vec<(String, String)> {
        let s = self.lock();
        s.nodes
            .get(parent)
            .map(|p| p.children.clone())
            .unwrap_or_default()
            .iter()
            .filter_map(|id| {
                let n = &s.nodes[id];
                (n.kind == "page" && !n.in_trash).then(|| {
                    (
                        id.clone(),
                        n.body["title"].as_str().unwrap_or_default().to_string(),
                    )
                })
            })
            .collect()
    }

    /// The live blocks of a page or block, in order, with their children.
    pub fn blocks(&self, parent: &str) -> Vec<Seen> {
        let s = self.lock();
        seen(&s, parent)
    }

    pub async fn stop(self) {
        self.server.stop().await;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn seen(s: &State, parent: &str) -> Vec<Seen> {
    let Some(node) = s.nodes.get(parent) else {
        return Vec::new();
    };
    node.children
        .iter()
        .filter(|id| !s.nodes[*id].in_trash && s.nodes[*id].kind != "page")
        .map(|id| {
            let n = &s.nodes[id];
            let items = n.body["rich_text"].as_array().cloned().unwrap_or_default();
            Seen {
                id: id.clone(),
                kind: n.kind.clone(),
                text: items
                    .iter()
                    .filter_map(|i| i["text"]["content"].as_str())
                    .collect(),
                links: items
                    .iter()
                    .filter_map(|i| i["text"]["link"]["url"].as_str().map(str::to_string))
                    .collect(),
                children: seen(s, id),
            }
        })
        .collect()
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_id(s: &mut State) -> String {
    let n = s.next_id;
    s.next_id += 1;
    format!("{:08x}-0000-4000-8000-{:012x}", n, n)
}

struct Answer {
    status: StatusCode,
    body: Value,
    retry_after: Option<u64>,
}

fn error(status: u16, code: &str, message: impl Into<String>) -> Answer {
    Answer {
        status: StatusCode::from_u16(status).unwrap(),
        body: json!({"object": "error", "status": status, "code": code, "message": message.into()}),
        retry_after: None,
    }
}

fn ok(body: Value) -> Answer {
    Answer {
        status: StatusCode::OK,
        body,
        retry_after: None,
    }
}

async fn handle(
    state: Arc<Mutex<State>>,
    applied: Arc<Notify>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let raw = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let parsed: Option<Value> = serde_json::from_slice(&raw).ok();
    let index = {
        let mut s = lock(&state);
        s.requests.push(RecordedRequest {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            body: parsed.clone(),
            status: None,
        });
        s.requests.len() - 1
    };
    let (answer, hang) = answer(
        &state,
        &parts.method,
        &parts.uri,
        &parts.headers,
        &raw,
        parsed,
    );
    lock(&state).requests[index].status = (!hang).then_some(answer.status.as_u16());
    if hang {
        applied.notify_one();
        std::future::pending::<()>().await;
    }
    let mut response = Response::builder()
        .status(answer.status)
        .header("content-type", "application/json");
    if let Some(secs) = answer.retry_after {
        response = response.header("retry-after", secs.to_string());
    }
    Ok(response
        .body(Full::new(Bytes::from(answer.body.to_string())))
        .unwrap())
}

fn answer(
    state: &Mutex<State>,
    method: &Method,
    uri: &http::Uri,
    headers: &HeaderMap,
    raw: &[u8],
    body: Option<Value>,
) -> (Answer, bool) {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mut s = lock(state);
    let expected = format!("Bearer {}", s.token);
    if header("authorization") != Some(expected.as_str()) {
        return (error(401, "unauthorized", "API token is invalid."), false);
    }
    match header("notion-version") {
        None => {
            return (
                error(400, "missing_version", "Notion-Version header failed validation: Notion-Version header should be defined, instead was `undefined`."),
                false,
            )
        }
        Some(v) if v != NOTION_VERSION => {
            return (
                error(400, "validation_error", format!("Notion-Version {v} is not supported by this stand-in (only {NOTION_VERSION})")),
                false,
            )
        }
        Some(_) => {}
    }
    let mut hang = false;
    let kind = if uri.path().ends_with("/children") {
        "children"
    } else if uri.path().starts_with("/v1/pages") {
        "pages"
    } else {
        "block"
    };
    let request_kind = format!("{method} {kind}");
    let position = s
        .faults
        .iter()
        .position(|(only, _)| only.is_none_or(|m| m == request_kind));
    if let Some(i) = position {
        let (_, fault) = s.faults.remove(i).unwrap();
        match fault {
            Fault::RateLimited { retry_after_secs } => {
                let mut a = error(
                    429,
                    "rate_limited",
                    "You have been rate limited. Please try again in a few minutes.",
                );
                a.retry_after = Some(retry_after_secs);
                return (a, false);
            }
            Fault::Overloaded { retry_after_secs } => {
                let mut a = error(529, "service_unavailable", "Notion is overloaded.");
                a.retry_after = Some(retry_after_secs);
                return (a, false);
            }
            Fault::ServerError => {
                return (
                    error(500, "internal_server_error", "Unexpected error occurred."),
                    false,
                )
            }
            Fault::Unauthorized => {
                return (error(401, "unauthorized", "API token is invalid."), false)
            }
            Fault::Invalid(message) => return (error(400, "validation_error", message), false),
            Fault::HangAfterApply => hang = true,
        }
    }
    if raw.len() > MAX_PAYLOAD {
        return (
            error(
                413,
                "validation_error",
                format!(
                    "Request body too large: {} bytes (limit {MAX_PAYLOAD}).",
                    raw.len()
                ),
            ),
            false,
        );
    }
    let needs_body = matches!(*method, Method::POST | Method::PATCH);
    if needs_body && body.is_none() {
        return (
            error(400, "invalid_json", "Error parsing JSON body."),
            false,
        );
    }
    let body = body.unwrap_or(Value::Null);
    let path: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let query: HashMap<String, String> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let result = match (method.clone(), path.as_slice()) {
        (Method::POST, ["v1", "pages"]) => create_page(&mut s, &body),
        (Method::PATCH, ["v1", "blocks", id, "children"]) => append(&mut s, id, &body),
        (Method::GET, ["v1", "blocks", id, "children"]) => list(&s, id, &query),
        (Method::GET, ["v1", "blocks", id]) => retrieve(&s, id),
        (Method::PATCH, ["v1", "blocks", id]) => update(&mut s, id, &body),
        (Method::DELETE, ["v1", "blocks", id]) => delete(&mut s, id),
        _ => error(404, "invalid_request_url", "Invalid request URL."),
    };
    let hang = hang && result_ok(&result);
    (result, hang)
}

fn result_ok(a: &Answer) -> bool {
    a.status.is_success()
}

/// Whether the page or block is reachable by the integration: a shared page or a descendant.
fn reachable(s: &State, id: &str) -> bool {
    let mut current = Some(id.to_string());
    while let Some(c) = current {
        if s.shared.contains(&c) {
            return true;
        }
        current = s.nodes.get(&c).and_then(|n| n.parent.clone());
    }
    false
}

fn not_found(id: &str) -> Answer {
    error(
        404,
        "object_not_found",
        format!("Could not find block with ID: {id}. Make sure the relevant pages and databases are shared with your integration."),
    )
}

fn validate_children(children: &Value, depth: usize, count: &mut usize) -> Result<(), String> {
    let Some(list) = children.as_array() else {
        return Err("body.children should be an array".into());
    };
    if depth > MAX_DEPTH {
        return Err(format!(
            "children nested more than {MAX_DEPTH} levels in one request"
        ));
    }
    if list.len() > MAX_CHILDREN {
        return Err(format!(
            "body.children.length should be ≤ `{MAX_CHILDREN}`, instead was `{}`.",
            list.len()
        ));
    }
    for (i, block) in list.iter().enumerate() {
        *count += 1;
        if *count > MAX_BLOCKS {
            return Err(format!("more than {MAX_BLOCKS} blocks in one request"));
        }
        let kind = block["type"].as_str().unwrap_or_default();
        if !BLOCK_TYPES.contains(&kind) {
            return Err(format!(
                "body.children[{i}].type `{kind}` is not a supported block type"
            ));
        }
        let content = &block[kind];
        validate_rich_text(&content["rich_text"])
            .map_err(|e| format!("body.children[{i}].{kind}.rich_text: {e}"))?;
        if let Some(grand) = content.get("children") {
            if kind.starts_with("heading_") {
                return Err(format!(
                    "body.children[{i}]: a {kind} that is not toggleable cannot have children"
                ));
            }
            validate_children(grand, depth + 1, count)?;
        }
    }
    Ok(())
}

fn validate_rich_text(items: &Value) -> Result<(), String> {
    let Some(items) = items.as_array() else {
        return Err("should be an array".into());
    };
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "length should be ≤ `{MAX_ITEMS}`, instead was `{}`",
            items.len()
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let Some(content) = item["text"]["content"].as_str() else {
            return Err(format!("[{i}].text.content should be a string"));
        };
        let units = content.encode_utf16().count();
        if units > MAX_TEXT {
            return Err(format!(
                "[{i}].text.content.length should be ≤ `{MAX_TEXT}`, instead was `{units}`"
            ));
        }
        if let Some(link) = item["text"].get("link") {
            if !link.is_null() && link["url"].as_str().is_none_or(str::is_empty) {
                return Err(format!("[{i}].text.link.url should be a non-empty string"));
            }
        }
    }
    Ok(())
}

fn insert_children(s: &mut State, parent: &str, children: &[Value], at: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for (offset, block) in children.iter().enumerate() {
        let id = new_id(s);
        let kind = block["type"].as_str().unwrap_or_default().to_string();
        let mut content = block[kind.as_str()].clone();
        let grand = content
            .as_object_mut()
            .and_then(|o| o.remove("children"))
            .and_then(|c| c.as_array().cloned())
            .unwrap_or_default();
        s.nodes.insert(
            id.clone(),
            Node {
                kind,
                body: content,
                parent: Some(parent.to_string()),
                children: Vec::new(),
                in_trash: false,
            },
        );
        s.nodes
            .get_mut(parent)
            .unwrap()
            .children
            .insert(at + offset, id.clone());
        insert_children(s, &id, &grand, 0);
        ids.push(id);
    }
    ids
}

fn block_json(s: &State, id: &str) -> Value {
    let n = &s.nodes[id];
    let parent = match &n.parent {
        Some(p) if s.nodes[p].kind == "page" => json!({"type": "page_id", "page_id": p}),
        Some(p) => json!({"type": "block_id", "block_id": p}),
        None => json!({"type": "workspace", "workspace": true}),
    };
    let has_children = n.children.iter().any(|c| !s.nodes[c].in_trash);
    if n.kind == "page" {
        return json!({"object": "block", "id": id, "parent": parent, "type": "child_page",
            "child_page": {"title": n.body["title"]}, "has_children": has_children,
            "in_trash": n.in_trash, "archived": n.in_trash});
    }
    let mut body = n.body.clone();
    if let Some(items) = body["rich_text"].as_array_mut() {
        for item in items {
            item["plain_text"] = item["text"]["content"].clone();
        }
    }
    json!({"object": "block", "id": id, "parent": parent, "type": n.kind, n.kind.clone(): body,
        "has_children": has_children, "in_trash": n.in_trash, "archived": n.in_trash})
}

fn create_page(s: &mut State, body: &Value) -> Answer {
    let Some(parent) = body["parent"]["page_id"].as_str().map(str::to_string) else {
        return error(
            400,
            "validation_error",
            "body.parent.page_id should be defined",
        );
    };
    if !s.nodes.contains_key(&parent) || !reachable(s, &parent) || s.nodes[&parent].in_trash {
        return error(404, "object_not_found", format!("Could not find page with ID: {parent}. Make sure the relevant pages and databases are shared with your integration."));
    }
    let Some(title) = body["properties"]["title"]["title"].as_array() else {
        return error(
            400,
            "validation_error",
            "body.properties.title.title should be an array",
        );
    };
    if let Err(e) = validate_rich_text(&Value::Array(title.clone())) {
        return error(
            400,
            "validation_error",
            format!("body.properties.title.title: {e}"),
        );
    }
    let children = body.get("children").cloned().unwrap_or(json!([]));
    if let Err(e) = validate_children(&children, 1, &mut 0) {
        return error(400, "validation_error", e);
    }
    let title: String = title
        .iter()
        .filter_map(|t| t["text"]["content"].as_str())
        .collect();
    let id = new_id(s);
    s.nodes.insert(
        id.clone(),
        Node {
            kind: "page".into(),
            body: json!({"title": title}),
            parent: Some(parent.clone()),
            children: Vec::new(),
            in_trash: false,
        },
    );
    s.nodes.get_mut(&parent).unwrap().children.push(id.clone());
    insert_children(s, &id, children.as_array().unwrap(), 0);
    ok(
        json!({"object": "page", "id": id, "parent": {"type": "page_id", "page_id": parent},
        "in_trash": false, "archived": false,
        "properties": {"title": {"id": "title", "type": "title", "title": [{"type": "text", "text": {"content": title}, "plain_text": title}]}},
        "url": format!("https://www.notion.so/{}", id.replace('-', ""))}),
    )
}

fn live(s: &State, id: &str) -> bool {
    s.nodes.get(id).is_some_and(|n| !n.in_trash) && reachable(s, id)
}

fn append(s: &mut State, id: &str, body: &Value) -> Answer {
    if !live(s, id) {
        return not_found(id);
    }
    let Some(children) = body.get("children") else {
        return error(400, "validation_error", "body.children should be defined");
    };
    if let Err(e) = validate_children(children, 1, &mut 0) {
        return error(400, "validation_error", e);
    }
    if body.get("position").is_some() {
        return error(
            400,
            "validation_error",
            "body.position is not supported in Notion-Version 2025-09-03; use after",
        );
    }
    let at = match body.get("after").and_then(Value::as_str) {
        None => s.nodes[id].children.len(),
        Some(after) => match s.nodes[id].children.iter().position(|c| c == after) {
            Some(i) if !s.nodes[after].in_trash => i + 1,
            _ => {
                return error(
                    400,
                    "validation_error",
                    format!("body.after: block {after} is not a child of {id}"),
                )
            }
        },
    };
    let ids = insert_children(s, id, children.as_array().unwrap(), at);
    let results: Vec<Value> = ids.iter().map(|i| block_json(s, i)).collect();
    ok(
        json!({"object": "list", "results": results, "next_cursor": null, "has_more": false, "type": "block", "block": {}}),
    )
}

fn list(s: &State, id: &str, query: &HashMap<String, String>) -> Answer {
    if !live(s, id) {
        return not_found(id);
    }
    let size: usize = match query.get("page_size").map(|v| v.parse::<usize>()) {
        None => 100,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        Some(_) => {
            return error(
                400,
                "validation_error",
                "page_size should be a number from 1 to 100",
            )
        }
    };
    let visible: Vec<&String> = s.nodes[id]
        .children
        .iter()
        .filter(|c| !s.nodes[*c].in_trash)
        .collect();
    let start = match query.get("start_cursor") {
        None => 0,
        Some(cursor) => match visible.iter().position(|c| *c == cursor) {
            Some(i) => i,
            None => return error(400, "validation_error", "start_cursor is not valid"),
        },
    };
    let page: Vec<Value> = visible
        .iter()
        .skip(start)
        .take(size)
        .map(|c| block_json(s, c))
        .collect();
    let next = visible
        .get(start + size)
        .map(|c| Value::String((*c).clone()));
    ok(
        json!({"object": "list", "results": page, "has_more": next.is_some(), "next_cursor": next.unwrap_or(Value::Null), "type": "block", "block": {}}),
    )
}

fn retrieve(s: &State, id: &str) -> Answer {
    if !s.nodes.contains_key(id) || !reachable(s, id) {
        return not_found(id);
    }
    ok(block_json(s, id))
}

fn update(s: &mut State, id: &str, body: &Value) -> Answer {
    if !live(s, id) {
        return not_found(id);
    }
    let kind = s.nodes[id].kind.clone();
    let Some(content) = body.get(&kind) else {
        return error(
            400,
            "validation_error",
            format!("body.{kind} should be defined (the block is a {kind})"),
        );
    };
    if let Err(e) = validate_rich_text(&content["rich_text"]) {
        return error(
            400,
            "validation_error",
            format!("body.{kind}.rich_text: {e}"),
        );
    }
    s.nodes.get_mut(id).unwrap().body["rich_text"] = content["rich_text"].clone();
    ok(block_json(s, id))
}

fn delete(s: &mut State, id: &str) -> Answer {
    if !live(s, id) {
        return not_found(id);
    }
    s.nodes.get_mut(id).unwrap().in_trash = true;
    ok(block_json(s, id))
}
