//! A Notion API stand-in for the Markdown content API (`Notion-Version: 2026-03-11`): a real
//! HTTP/1.1 server on 127.0.0.1 that keeps pages in memory and answers the endpoints Chronicle
//! uses the way Notion does, stricter, never looser.
//!
//! Every request is recorded, then checked in this order, the first violation answered with
//! Notion's error shape (`{"object":"error","status","code","message"}`):
//!
//! 1. `Authorization: Bearer <token>` missing or not the token → 401 `unauthorized`.
//! 2. `Notion-Version` missing → 400 `missing_version`; not `2026-03-11` → 400
//!    `validation_error` (the stand-in speaks only the version Chronicle pins).
//! 3. The rate limit: more than [`RATE_LIMIT`] requests in any [`RATE_WINDOW`] → 429
//!    `rate_limited` with `Retry-After` (Notion averages three requests a second).
//! 4. A scripted [`Fault`] (consumed in order): 429 / 529 with `Retry-After`, 500, 401, 400,
//!    or [`Fault::HangAfterApply`] (the request is applied, then never answered).
//! 5. The body: not JSON → 400 `invalid_json`; larger than 500 KB → 413. Markdown with more than
//!    1,000 blocks, or a text run over 2,000 characters (UTF-16 units) → 400
//!    `validation_error`. `archived` (renamed `in_trash` in 2026-03-11) → 400.
//! 6. Pages: unknown, deleted or not shared → 404 `object_not_found`. Editing a page in the
//!    trash (or under one) → 400 "Can't edit block that is archived"; so is trashing or
//!    restoring a page whose ancestor is in the trash. A `<page url>` in new
//!    content that is not a live child of the page → 400 (content never moves pages; only `move` does). New
//!    content that leaves out a live child page → 400, unless `allow_deleting_content` (then it
//!    goes to the trash).
//!
//! Endpoints: `POST /v1/pages` (with `markdown`), `GET /v1/pages/{id}`, `PATCH /v1/pages/{id}`
//! (`in_trash`), `GET /v1/pages/{id}/markdown`, `PATCH /v1/pages/{id}/markdown`
//! (`replace_content`), `GET /v1/blocks/{id}/children` (the page's content as paragraph blocks and
//! its child pages as `child_page` blocks, cursor pagination, `page_size` ≤ 100),
//! `POST /v1/pages/{id}/move` (`parent.type` `page_id` only; not a database, not under itself
//! or its own descendant, not out of or into the trash).

use std::collections::{HashMap, HashSet, VecDeque};
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
use tokio::sync::Notify;

mod pages;
use pages::*;

pub const NOTION_VERSION: &str = "2026-03-11";
const MAX_BLOCKS: usize = 1_000;
const MAX_TEXT: usize = 2_000;
const MAX_PAYLOAD: usize = 500_000;
/// At most this many requests in any [`RATE_WINDOW`].
pub const RATE_LIMIT: usize = 9;
pub const RATE_WINDOW: Duration = Duration::from_secs(3);

/// A scripted answer to the next valid request (after authentication and version checks).
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// 429 `rate_limited` with `Retry-After` (seconds).
    RateLimited { retry_after_secs: u64 },
    /// 529 (overloaded) with `Retry-After` (seconds).
    Overloaded { retry_after_secs: u64 },
    /// 500 `internal_server_error`, after applying nothing.
    ServerError,
    /// 401 `unauthorized`.
    Unauthorized,
    /// 400 `validation_error` with this message.
    Invalid(String),
    /// Applies the request, then never answers (a crash right after Notion did the work).
    HangAfterApply,
    /// Waits this long, then handles the request normally (a slow Notion).
    Delay(Duration),
}

#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
    pub status: Option<u16>,
}

#[derive(Clone, Debug)]
struct Page {
    title: String,
    parent: Option<String>,
    markdown: String,
    /// Child pages, in order of creation.
    children: Vec<String>,
    in_trash: bool,
    /// Deleted for good (emptied from the trash): 404 from then on.
    deleted: bool,
    /// A database (a child of a page, named with `<database url>`), not a page.
    database: bool,
    /// The integration's bot, or a person.
    created_by: String,
    /// Dragged by a person into a toggle or a column of its parent: still the parent's
    /// descendant (live, reachable), but no longer one of its top-level children.
    nested: bool,
}

/// The integration's own user id (`GET /v1/users/me`).
pub const BOT_ID: &str = "b0b0b0b0-0000-4000-8000-000000000b07";
/// Who created the pages a test adds "by hand".
pub const PERSON_ID: &str = "9e9e9e9e-0000-4000-8000-0000000000aa";

struct State {
    token: String,
    shared: HashSet<String>,
    pages: HashMap<String, Page>,
    faults: VecDeque<(Option<&'static str>, Fault)>,
    requests: Vec<RecordedRequest>,
    recent: VecDeque<Instant>,
    rate_limit: bool,
    next_id: u64,
}

/// The running stand-in. Clones share the same server and state.
#[derive(Clone)]
pub struct NotionStub {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    server: crate::http_server::Serving,
    /// Notified when a [`Fault::HangAfterApply`] request has been applied.
    pub applied: Arc<Notify>,
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
            pages: HashMap::new(),
            faults: VecDeque::new(),
            requests: Vec::new(),
            recent: VecDeque::new(),
            rate_limit: true,
            next_id: 1,
        }));
        let applied = Arc::new(Notify::new());
        let shared = state.clone();
        let notify = applied.clone();
        let server = crate::http_server::Serving::spawn(listener, move |req| {
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

    /// A page created outside Chronicle (by a person); `shared` = shared with the integration.
    pub fn add_page(&self, parent: Option<&str>, title: &str, shared: bool) -> String {
        self.add(parent, title, shared, false)
    }

    /// A database a person created under a page.
    pub fn add_database(&self, parent: &str, title: &str) -> String {
        self.add(Some(parent), title, true, true)
    }

    fn add(&self, parent: Option<&str>, title: &str, shared: bool, database: bool) -> String {
        let mut s = self.lock();
        let id = new_id(&mut s);
        s.pages.insert(
            id.clone(),
            Page {
                title: title.to_string(),
                parent: parent.map(str::to_string),
                markdown: String::new(),
                children: Vec::new(),
                in_trash: false,
                deleted: false,
                database,
                created_by: PERSON_ID.to_string(),
                nested: false,
            },
        );
        if let Some(parent) = parent {
            if let Some(p) = s.pages.get_mut(parent) {
                p.children.push(id.clone());
            }
        }
        if shared {
            s.shared.insert(id.clone());
        }
        id
    }

    /// Moves a page to the trash, as a person's "Delete" in Notion does (its subpages with it).
    pub fn trash(&self, id: &str) {
        if let Some(p) = self.lock().pages.get_mut(id) {
            p.in_trash = true;
        }
    }

    /// A person removes the integration from the page's Connections: it and everything under
    /// it answer 404 (unless shared again, or shared through another ancestor).
    pub fn unshare(&self, id: &str) {
        self.lock().shared.remove(id);
    }

    /// The page's Connections get the integration (again).
    pub fn share(&self, id: &str) {
        self.lock().shared.insert(id.to_string());
    }

    /// A person drags the page into a toggle (or a column) of its parent: it stays live, but
    /// the parent's children listing no longer shows it at the top level, `GET` names a block
    /// as its parent, and replacing the parent's content would delete it (refused).
    pub fn nest(&self, id: &str, nested: bool) {
        if let Some(p) = self.lock().pages.get_mut(id) {
            p.nested = nested;
        }
    }

    /// Puts a page under another, as a person dragging it in the sidebar (or `move`) does.
    pub fn reparent(&self, id: &str, parent: &str) {
        let body = json!({"parent": {"type": "page_id", "page_id": parent}});
        let answer = move_page(&mut self.lock(), id, &body);
        assert!(answer.status.is_success(), "{}", answer.body);
    }

    /// Deletes a page for good (emptied from the trash): 404 from then on.
    pub fn delete(&self, id: &str) {
        if let Some(p) = self.lock().pages.get_mut(id) {
            p.in_trash = true;
            p.deleted = true;
        }
    }

    /// Faults for the next valid requests, in order; `only` restricts one to a kind of request,
    /// the others pass it by: `"POST pages"`, `"GET page"`, `"PATCH page"`, `"GET markdown"`,
    /// `"PATCH markdown"`, `"GET children"`.
    pub fn fault(&self, only: Option<&'static str>, fault: Fault) {
        self.lock().faults.push_back((only, fault));
    }

    pub fn set_token(&self, token: &str) {
        self.lock().token = token.to_string();
    }

    /// Turns the rate limit off (for tests that count requests through many builds).
    pub fn without_rate_limit(&self) {
        self.lock().rate_limit = false;
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

    /// Requests with this method whose path starts with `prefix` and ends with `suffix`.
    pub fn count(&self, method: &str, prefix: &str, suffix: &str) -> usize {
        self.lock()
            .requests
            .iter()
            .filter(|r| {
                r.method == method && r.path.starts_with(prefix) && r.path.ends_with(suffix)
            })
            .count()
    }

    /// The live (not trashed) child pages of a page: (id, title).
    pub fn child_pages(&self, parent: &str) -> Vec<(String, String)> {
        let s = self.lock();
        s.pages
            .get(parent)
            .map(|p| p.children.clone())
            .unwrap_or_default()
            .iter()
            .filter(|id| !s.pages[*id].in_trash)
            .map(|id| (id.clone(), s.pages[id].title.clone()))
            .collect()
    }

    /// Every page (live or not) with this title.
    pub fn pages_titled(&self, title: &str) -> Vec<String> {
        let s = self.lock();
        s.pages
            .iter()
            .filter(|(_, p)| p.title == title)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The live page titled `title`, if exactly one.
    pub fn live_page(&self, title: &str) -> Option<String> {
        let s = self.lock();
        let live: Vec<&String> = s
            .pages
            .iter()
            .filter(|(id, p)| p.title == title && !trashed(&s, id))
            .map(|(id, _)| id)
            .collect();
        (live.len() == 1).then(|| live[0].clone())
    }

    /// The page's parent page (`None`: unknown, or at the workspace's top).
    pub fn parent(&self, id: &str) -> Option<String> {
        self.lock().pages.get(id).and_then(|p| p.parent.clone())
    }

    pub fn markdown(&self, id: &str) -> String {
        self.lock()
            .pages
            .get(id)
            .map(|p| p.markdown.clone())
            .unwrap_or_default()
    }

    pub async fn stop(self) {
        self.server.stop().await;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_id(s: &mut State) -> String {
    let n = s.next_id;
    s.next_id += 1;
    format!("{:08x}-0000-4000-8000-{:012x}", n, n)
}

/// Ids with or without dashes, compared alike.
fn compact(id: &str) -> String {
    id.replace('-', "").to_ascii_lowercase()
}

fn page_url(id: &str, title: &str) -> String {
    let slug: String = title
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!(
        "https://www.notion.so/{}-{}",
        slug.trim_matches('-'),
        compact(id)
    )
}

/// The page a `<page url>` names: the 32 hex digits at the end of the URL.
fn id_from_url(s: &State, url: &str) -> Option<String> {
    let hex: String = url
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if hex.len() < 32 {
        return None;
    }
    let want = hex[hex.len() - 32..].to_ascii_lowercase();
    s.pages.keys().find(|id| compact(id) == want).cloned()
}

/// In the trash, itself or through an ancestor.
fn trashed(s: &State, id: &str) -> bool {
    let mut current = Some(id.to_string());
    while let Some(c) = current {
        match s.pages.get(&c) {
            Some(p) if p.in_trash => return true,
            Some(p) => current = p.parent.clone(),
            None => return false,
        }
    }
    false
}

/// Reachable by the integration: a shared page or a descendant, not deleted.
fn reachable(s: &State, id: &str) -> bool {
    if s.pages.get(id).is_none_or(|p| p.deleted) {
        return false;
    }
    let mut current = Some(id.to_string());
    while let Some(c) = current {
        if s.shared.contains(&c) {
            return true;
        }
        current = s.pages.get(&c).and_then(|p| p.parent.clone());
    }
    false
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

fn not_found(id: &str) -> Answer {
    error(
        404,
        "object_not_found",
        format!("Could not find page with ID: {id}. Make sure the relevant pages and databases are shared with your integration."),
    )
}

fn archived() -> Answer {
    error(
        400,
        "validation_error",
        "Can't edit block that is archived. You must unarchive the block before editing.",
    )
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
    let path: Vec<&str> = parts.uri.path().trim_matches('/').split('/').collect();
    let kind = request_kind(&parts.method, &path);
    let delay = {
        let mut s = lock(&state);
        let position = s
            .faults
            .iter()
            .position(|(only, f)| matches!(f, Fault::Delay(_)) && only.is_none_or(|m| m == kind));
        position.and_then(|i| match s.faults.remove(i) {
            Some((_, Fault::Delay(d))) => Some(d),
            _ => None,
        })
    };
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
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
    let now = Instant::now();
    while s
        .recent
        .front()
        .is_some_and(|t| now.duration_since(*t) > RATE_WINDOW)
    {
        s.recent.pop_front();
    }
    if s.rate_limit && s.recent.len() >= RATE_LIMIT {
        let mut a = error(
            429,
            "rate_limited",
            "You have been rate limited. Please try again in a few minutes.",
        );
        a.retry_after = Some(1);
        return (a, false);
    }
    s.recent.push_back(now);
    let path: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let kind = request_kind(method, &path);
    let mut hang = false;
    let position = s
        .faults
        .iter()
        .position(|(only, f)| !matches!(f, Fault::Delay(_)) && only.is_none_or(|m| m == kind));
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
            Fault::Delay(_) => {}
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
    let query: HashMap<String, String> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let result = match (method.clone(), path.as_slice()) {
        (Method::POST, ["v1", "pages"]) => create_page(&mut s, &body),
        (Method::GET, ["v1", "pages", id]) => retrieve(&s, id),
        (Method::PATCH, ["v1", "pages", id]) => update_page(&mut s, id, &body),
        (Method::GET, ["v1", "pages", id, "markdown"]) => get_markdown(&s, id),
        (Method::PATCH, ["v1", "pages", id, "markdown"]) => patch_markdown(&mut s, id, &body),
        (Method::GET, ["v1", "blocks", id, "children"]) => children(&s, id, &query),
        (Method::POST, ["v1", "pages", id, "move"]) => move_page(&mut s, id, &body),
        (Method::GET, ["v1", "users", "me"]) => {
            ok(json!({"object": "user", "id": BOT_ID, "type": "bot", "bot": {}}))
        }
        _ => error(404, "invalid_request_url", "Invalid request URL."),
    };
    let hang = hang && result.status.is_success();
    (result, hang)
}

/// The kind of request a [`Fault`] can be restricted to.
fn request_kind(method: &Method, path: &[&str]) -> &'static str {
    match (method.clone(), path) {
        (Method::POST, ["v1", "pages"]) => "POST pages",
        (Method::GET, ["v1", "pages", _]) => "GET page",
        (Method::PATCH, ["v1", "pages", _]) => "PATCH page",
        (Method::GET, ["v1", "pages", _, "markdown"]) => "GET markdown",
        (Method::PATCH, ["v1", "pages", _, "markdown"]) => "PATCH markdown",
        (Method::GET, ["v1", "blocks", _, "children"]) => "GET children",
        (Method::POST, ["v1", "pages", _, "move"]) => "POST move",
        _ => "other",
    }
}
