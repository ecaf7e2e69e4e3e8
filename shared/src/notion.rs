//! A small Notion API client (reqwest, `Notion-Version: 2025-09-03`) and the conversion of the
//! narrative's blocks into Notion blocks within the API's limits.
//!
//! Limits enforced here, before anything is sent (Notion answers 400 otherwise):
//! - at most [`MAX_CHILDREN`] blocks in any `children` array (longer lists are chunked into
//!   several appends, each placed `after` the previous chunk);
//! - at most [`MAX_RICH_TEXT_CHARS`] characters (UTF-16 units, as Notion counts) per rich-text
//!   item, split at a word boundary where there is one;
//! - at most [`MAX_RICH_TEXT_ITEMS`] rich-text items per block (more become further blocks);
//! - at most [`MAX_NESTING`] levels of children per request (deeper children are appended
//!   afterwards, to the block that holds them);
//! - a request body of at most [`MAX_PAYLOAD_BYTES`] and [`MAX_BLOCKS_PER_REQUEST`] blocks.
//!
//! Errors: 429 and 529 wait out `Retry-After` when that fits before the deadline, else the call
//! fails as [`NotionError::RateLimited`] (the message comes back later); 5xx, 409 and transport
//! errors are retried with backoff; 400 is [`NotionError::Invalid`] (a bug: not retried);
//! 401/403/404 are [`NotionError::Access`] with what the operator must do.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Map, Value};

use crate::narrative::{Block, Span};
use crate::secret::Secret;

pub const NOTION_VERSION: &str = "2025-09-03";
pub const DEFAULT_API_URL: &str = "https://api.notion.com";
pub const MAX_CHILDREN: usize = 100;
pub const MAX_RICH_TEXT_CHARS: usize = 2_000;
pub const MAX_RICH_TEXT_ITEMS: usize = 100;
pub const MAX_NESTING: usize = 2;
pub const MAX_PAYLOAD_BYTES: usize = 500_000;
pub const MAX_BLOCKS_PER_REQUEST: usize = 1_000;
/// The longest `Retry-After` waited out inside one call.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Time kept in hand before the deadline for the bookkeeping after a call.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum NotionError {
    /// 401/403/404: the token, the integration's capabilities or the page's sharing must be fixed.
    #[error("Notion answered {status} {code} on {what}: {message}. {action}")]
    Access {
        status: u16,
        code: String,
        what: String,
        message: String,
        action: String,
    },
    /// 400: the request itself is wrong (a bug in Chronicle); retrying cannot help.
    #[error("Notion refused {what} as invalid (400 {code}): {message}")]
    Invalid {
        what: String,
        code: String,
        message: String,
    },
    #[error("Notion is rate limiting {what} (HTTP {status}, Retry-After {retry_after:?}); not enough time left to wait")]
    RateLimited {
        what: String,
        status: u16,
        retry_after: Option<Duration>,
    },
    #[error("Notion failed {what}: HTTP {status}: {message}")]
    Server {
        what: String,
        status: u16,
        message: String,
    },
    #[error("calling Notion for {what} failed: {message}")]
    Transport { what: String, message: String },
    #[error("Notion's answer to {what} was not understood: {message}")]
    Unexpected { what: String, message: String },
}

impl NotionError {
    /// `true` if retrying later cannot help until someone changes something.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            NotionError::Access { .. } | NotionError::Invalid { .. }
        )
    }
}

/// A Notion block ready to send: its JSON without `children`, and its children.
#[derive(Debug, Clone, PartialEq)]
pub struct NotionBlock {
    pub body: Value,
    pub children: Vec<NotionBlock>,
}

impl NotionBlock {
    /// The block's JSON with its children inlined to `levels` more levels (0 = none).
    fn to_json(&self, levels: usize) -> Value {
        let mut body = self.body.clone();
        if levels > 0 && !self.children.is_empty() {
            let kind = body["type"].as_str().unwrap_or_default().to_string();
            body[kind.as_str()]["children"] = Value::Array(
                self.children
                    .iter()
                    .map(|c| c.to_json(levels - 1))
                    .collect(),
            );
        }
        body
    }

    fn count(&self) -> usize {
        1 + self.children.iter().map(NotionBlock::count).sum::<usize>()
    }
}

/// The narrative's blocks as Notion blocks, every rich text within the limits.
pub fn to_notion(blocks: &[Block]) -> Vec<NotionBlock> {
    let mut out = Vec::new();
    for block in blocks {
        let (kind, spans, children): (&str, &[Span], &[Block]) = match block {
            Block::Heading { level, spans } => {
                let kind = match level {
                    1 => "heading_1",
                    2 => "heading_2",
                    _ => "heading_3",
                };
                (kind, spans, &[])
            }
            Block::Paragraph(spans) => ("paragraph", spans, &[]),
            Block::Bullet(spans) => ("bulleted_list_item", spans, &[]),
            Block::Toggle { summary, children } => ("toggle", summary, children),
        };
        let items = rich_text(spans);
        let groups: Vec<Vec<Value>> = if items.is_empty() {
            vec![Vec::new()]
        } else {
            items
                .chunks(MAX_RICH_TEXT_ITEMS)
                .map(<[Value]>::to_vec)
                .collect()
        };
        let last = groups.len() - 1;
        for (i, group) in groups.into_iter().enumerate() {
            out.push(NotionBlock {
                body: json!({"object": "block", "type": kind, kind: {"rich_text": group}}),
                // A block split for its length keeps its children on the last part.
                children: if i == last {
                    to_notion(children)
                } else {
                    Vec::new()
                },
            });
        }
    }
    out
}

/// Spans as rich-text items, each at most [`MAX_RICH_TEXT_CHARS`] UTF-16 units.
pub fn rich_text(spans: &[Span]) -> Vec<Value> {
    let mut items = Vec::new();
    for span in spans {
        for piece in split_text(&span.text, MAX_RICH_TEXT_CHARS) {
            let mut text = Map::new();
            text.insert("content".into(), Value::String(piece));
            if let Some(url) = &span.link {
                text.insert("link".into(), json!({"url": url}));
            }
            let mut item = json!({"type": "text", "text": text});
            if span.code || span.bold {
                item["annotations"] = json!({"code": span.code, "bold": span.bold});
            }
            items.push(item);
        }
    }
    items
}

/// `text` cut into pieces of at most `max` UTF-16 units, after the last whitespace that fits
/// (a hard cut inside a word longer than `max`). Concatenated, the pieces are `text`.
pub fn split_text(text: &str, max: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.encode_utf16().count() > max {
        let mut units = 0;
        let mut cut = 0;
        let mut last_space = None;
        for (i, c) in rest.char_indices() {
            if units + c.len_utf16() > max {
                break;
            }
            units += c.len_utf16();
            cut = i + c.len_utf8();
            if c.is_whitespace() {
                last_space = Some(cut);
            }
        }
        let at = last_space.filter(|&s| s > 0).unwrap_or(cut);
        pieces.push(rest[..at].to_string());
        rest = &rest[at..];
    }
    if !rest.is_empty() || pieces.is_empty() {
        pieces.push(rest.to_string());
    }
    pieces
}

/// One append (or page-create) request's children, and what must be appended afterwards:
/// `(index of the top-level block in this request, its children not sent inline)`.
#[derive(Debug)]
pub struct Chunk {
    pub children: Vec<Value>,
    pub deferred: Vec<(usize, Vec<NotionBlock>)>,
}

/// Splits blocks into requests within every limit: at most [`MAX_CHILDREN`] top-level blocks
/// per request, children inlined only while their array, the nesting, the block count and the
/// payload size stay within the limits; the rest is deferred to follow-up appends.
pub fn chunks(blocks: &[NotionBlock]) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut current = Chunk {
        children: Vec::new(),
        deferred: Vec::new(),
    };
    let mut bytes = 0usize;
    let mut count = 0usize;
    // Room for the envelope (`{"children":[…],"after":"…"}`).
    let budget = MAX_PAYLOAD_BYTES - 1_000;
    for block in blocks {
        // The block with its children inline when they fit (one level below: MAX_NESTING - 1).
        let inline = block.children.len() <= MAX_CHILDREN
            && block.children.iter().all(|c| c.children.is_empty())
            && block.count() <= MAX_BLOCKS_PER_REQUEST;
        let full = block.to_json(if inline { MAX_NESTING - 1 } else { 0 });
        let full_size = full.to_string().len();
        let (json, size, blocks_used, deferred) = if inline && full_size <= budget {
            (full, full_size, block.count(), None)
        } else {
            let bare = block.to_json(0);
            let size = bare.to_string().len();
            let later = (!block.children.is_empty()).then(|| block.children.clone());
            (bare, size, 1, later)
        };
        let full_chunk = current.children.len() == MAX_CHILDREN
            || bytes + size + 1 > budget
            || count + blocks_used > MAX_BLOCKS_PER_REQUEST;
        if full_chunk && !current.children.is_empty() {
            out.push(std::mem::replace(
                &mut current,
                Chunk {
                    children: Vec::new(),
                    deferred: Vec::new(),
                },
            ));
            bytes = 0;
            count = 0;
        }
        if let Some(children) = deferred {
            current.deferred.push((current.children.len(), children));
        }
        current.children.push(json);
        bytes += size + 1;
        count += blocks_used;
    }
    if !current.children.is_empty() {
        out.push(current);
    }
    out
}

/// The Notion client: one token, one base URL, bounded retries.
#[derive(Clone)]
pub struct NotionClient {
    http: reqwest::Client,
    base: String,
    token: Secret,
    timeout: Duration,
    retries: u32,
    backoff: Duration,
}

impl std::fmt::Debug for NotionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotionClient")
            .field("base", &self.base)
            .field("token", &self.token)
            .finish()
    }
}

impl NotionClient {
    /// `api_url` is the base (`https://api.notion.com`); paths start with `/v1/`.
    pub fn new(api_url: &str, token: Secret) -> Self {
        let timeout = Duration::from_secs(20);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("chronicle/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        NotionClient {
            http,
            base: api_url.trim().trim_end_matches('/').to_string(),
            token,
            timeout,
            retries: 3,
            backoff: Duration::from_millis(500),
        }
    }

    /// `retries` after the first attempt for 5xx/409/transport errors; the first waits
    /// `backoff`, each later one twice as long. `timeout` bounds each attempt.
    pub fn with_retry(mut self, retries: u32, backoff: Duration, timeout: Duration) -> Self {
        self.retries = retries;
        self.backoff = backoff;
        self.timeout = timeout;
        self
    }

    /// Creates a page under `parent_page_id` titled `title`, with these first children
    /// (at most [`MAX_CHILDREN`], nesting within the limit). Returns the page id.
    pub async fn create_page(
        &self,
        parent_page_id: &str,
        title: &str,
        children: Vec<Value>,
        deadline: Instant,
    ) -> Result<String, NotionError> {
        let body = json!({
            "parent": {"type": "page_id", "page_id": parent_page_id},
            "properties": {"title": {"title": rich_text(&[Span::text(title)])}},
            "children": children,
        });
        let page = self
            .call(
                Method::POST,
                "/v1/pages",
                Some(body),
                "creating a page",
                deadline,
            )
            .await?;
        id_of(&page, "creating a page")
    }

    /// Appends children to a block or page, after `after` if given. Returns the ids of the
    /// created top-level blocks, in order.
    pub async fn append(
        &self,
        block_id: &str,
        children: Vec<Value>,
        after: Option<&str>,
        deadline: Instant,
    ) -> Result<Vec<String>, NotionError> {
        let mut body = json!({ "children": children });
        if let Some(after) = after {
            body["after"] = Value::String(after.to_string());
        }
        let what = format!("appending to block {block_id}");
        let answer = self
            .call(
                Method::PATCH,
                &format!("/v1/blocks/{block_id}/children"),
                Some(body),
                &what,
                deadline,
            )
            .await?;
        answer["results"]
            .as_array()
            .ok_or_else(|| NotionError::Unexpected {
                what: what.clone(),
                message: "no results".into(),
            })?
            .iter()
            .map(|b| id_of(b, &what))
            .collect()
    }

    /// Appends blocks of any size: chunked within the limits, each chunk after the previous,
    /// deferred children appended to their parents. Returns the top-level ids in order.
    pub async fn append_all(
        &self,
        parent: &str,
        blocks: &[NotionBlock],
        after: Option<&str>,
        deadline: Instant,
    ) -> Result<Vec<String>, NotionError> {
        let mut ids: Vec<String> = Vec::new();
        let mut after = after.map(str::to_string);
        let mut work: Vec<(String, Vec<NotionBlock>)> = Vec::new();
        for chunk in chunks(blocks) {
            let created = self
                .append(parent, chunk.children, after.as_deref(), deadline)
                .await?;
            for (index, children) in chunk.deferred {
                let id = created.get(index).ok_or_else(|| NotionError::Unexpected {
                    what: format!("appending to block {parent}"),
                    message: "fewer blocks created than sent".into(),
                })?;
                work.push((id.clone(), children));
            }
            after = created.last().cloned().or(after);
            ids.extend(created);
        }
        // Deferred children, depth first; each list is chunked the same way.
        while let Some((id, children)) = work.pop() {
            let mut after: Option<String> = None;
            for chunk in chunks(&children) {
                let created = self
                    .append(&id, chunk.children, after.as_deref(), deadline)
                    .await?;
                for (index, grandchildren) in chunk.deferred {
                    if let Some(child) = created.get(index) {
                        work.push((child.clone(), grandchildren));
                    }
                }
                after = created.last().cloned();
            }
        }
        Ok(ids)
    }

    /// Every child of a block or page (all pages of the listing).
    pub async fn children(
        &self,
        block_id: &str,
        deadline: Instant,
    ) -> Result<Vec<Value>, NotionError> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let what = format!("listing the children of {block_id}");
        loop {
            let mut path = format!("/v1/blocks/{block_id}/children?page_size=100");
            if let Some(c) = &cursor {
                path.push_str(&format!("&start_cursor={c}"));
            }
            let page = self.call(Method::GET, &path, None, &what, deadline).await?;
            out.extend(page["results"].as_array().cloned().unwrap_or_default());
            match (page["has_more"].as_bool(), page["next_cursor"].as_str()) {
                (Some(true), Some(next)) => cursor = Some(next.to_string()),
                _ => return Ok(out),
            }
        }
    }

    /// The block, or `None` if it is gone (404) or in the trash.
    pub async fn live_block(
        &self,
        id: &str,
        deadline: Instant,
    ) -> Result<Option<Value>, NotionError> {
        match self
            .call(
                Method::GET,
                &format!("/v1/blocks/{id}"),
                None,
                &format!("reading block {id}"),
                deadline,
            )
            .await
        {
            Ok(block) => {
                let trashed = block["in_trash"].as_bool().unwrap_or(false)
                    || block["archived"].as_bool().unwrap_or(false);
                Ok((!trashed).then_some(block))
            }
            Err(NotionError::Access { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces a text block's rich text (`kind` is its type, `paragraph`).
    pub async fn update_text(
        &self,
        id: &str,
        kind: &str,
        rich_text: Vec<Value>,
        deadline: Instant,
    ) -> Result<(), NotionError> {
        let body = json!({ kind: {"rich_text": rich_text} });
        self.call(
            Method::PATCH,
            &format!("/v1/blocks/{id}"),
            Some(body),
            &format!("updating block {id}"),
            deadline,
        )
        .await
        .map(drop)
    }

    /// Moves a block to the trash.
    pub async fn delete_block(&self, id: &str, deadline: Instant) -> Result<(), NotionError> {
        match self
            .call(
                Method::DELETE,
                &format!("/v1/blocks/{id}"),
                None,
                &format!("deleting block {id}"),
                deadline,
            )
            .await
        {
            Ok(_) | Err(NotionError::Access { status: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        what: &str,
        deadline: Instant,
    ) -> Result<Value, NotionError> {
        let payload = body.map(|b| b.to_string());
        if let Some(p) = &payload {
            if p.len() > MAX_PAYLOAD_BYTES {
                return Err(NotionError::Invalid {
                    what: what.to_string(),
                    code: "payload_too_large".into(),
                    message: format!(
                        "{} bytes is more than the {MAX_PAYLOAD_BYTES} Notion takes (not sent)",
                        p.len()
                    ),
                });
            }
        }
        let mut attempt = 0u32;
        loop {
            let result = self.send(method.clone(), path, payload.clone(), what).await;
            let (error, wait) = match result {
                Ok(value) => return Ok(value),
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::RateLimited {
                    status,
                    retry_after,
                }) => {
                    let wait = retry_after.unwrap_or(Duration::from_secs(1));
                    let error = NotionError::RateLimited {
                        what: what.to_string(),
                        status,
                        retry_after,
                    };
                    if wait > MAX_RETRY_AFTER {
                        return Err(error);
                    }
                    (error, wait)
                }
                Err(Failure::Retryable(e)) => {
                    if attempt >= self.retries {
                        return Err(e);
                    }
                    (e, self.backoff.saturating_mul(1 << attempt.min(8)))
                }
            };
            attempt += 1;
            // Rate limits may be waited out repeatedly, but never past the deadline.
            if attempt > self.retries + 10 || Instant::now() + wait + DEADLINE_MARGIN >= deadline {
                return Err(error);
            }
            tracing::info!(what, wait_ms = wait.as_millis() as u64, error = %error, "retrying a Notion call");
            tokio::time::sleep(wait).await;
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        payload: Option<String>,
        what: &str,
    ) -> Result<Value, Failure> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token.expose())
            .header("Notion-Version", NOTION_VERSION)
            .timeout(self.timeout);
        if let Some(p) = payload {
            request = request.header("content-type", "application/json").body(p);
        }
        let transport = |e: reqwest::Error| {
            Failure::Retryable(NotionError::Transport {
                what: what.to_string(),
                message: e.without_url().to_string(),
            })
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let bytes = response.bytes().await.map_err(transport)?;
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            if body.is_null() {
                return Err(Failure::Retryable(NotionError::Unexpected {
                    what: what.to_string(),
                    message: "the body is not JSON".into(),
                }));
            }
            return Ok(body);
        }
        let code = body["code"].as_str().unwrap_or("unknown").to_string();
        let message = body["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(300).collect());
        let what = what.to_string();
        Err(match status.as_u16() {
            429 | 529 => Failure::RateLimited {
                status: status.as_u16(),
                retry_after,
            },
            400 | 413 => Failure::Final(NotionError::Invalid {
                what,
                code,
                message,
            }),
            401 | 403 | 404 => Failure::Final(NotionError::Access {
                status: status.as_u16(),
                action: access_action(status, &code),
                code,
                what,
                message,
            }),
            409 => Failure::Retryable(NotionError::Server {
                what,
                status: 409,
                message,
            }),
            s if status.is_server_error() => Failure::Retryable(NotionError::Server {
                what,
                status: s,
                message,
            }),
            s => Failure::Final(NotionError::Unexpected {
                what,
                message: format!("HTTP {s} {code}: {message}"),
            }),
        })
    }
}

enum Failure {
    Final(NotionError),
    Retryable(NotionError),
    RateLimited {
        status: u16,
        retry_after: Option<Duration>,
    },
}

/// What the operator must do about a 401/403/404.
fn access_action(status: StatusCode, code: &str) -> String {
    const REPROCESS: &str = "then reprocess the failed rows (README: \"Reprocessing a PR\")";
    match status.as_u16() {
        401 => format!(
            "The Notion token is invalid or was revoked: create a new internal integration secret \
             at https://www.notion.so/profile/integrations, store it in NOTION_TOKEN (or the \
             secret named by NotionTokenSecretArn), {REPROCESS}"
        ),
        403 => format!(
            "The integration may not do this ({code}): give it the Read, Update and Insert content \
             capabilities in its settings, {REPROCESS}"
        ),
        _ => format!(
            "The page or block was not found ({code}): share the parent page with the \
             integration (open it in Notion, ••• → Connections → add the integration) and check \
             NOTION_PARENT_PAGE_ID, {REPROCESS}"
        ),
    }
}

fn id_of(value: &Value, what: &str) -> Result<String, NotionError> {
    value["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| NotionError::Unexpected {
            what: what.to_string(),
            message: "no id in the answer".into(),
        })
}

/// The rich-text items of a Notion block as the API returns it.
fn rich_text_items(block: &Value) -> &[Value] {
    let kind = block["type"].as_str().unwrap_or_default();
    block[kind]["rich_text"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The plain text of a Notion block's rich text (for reading a page back).
pub fn block_text(block: &Value) -> String {
    rich_text_items(block)
        .iter()
        .filter_map(|i| i["plain_text"].as_str().or(i["text"]["content"].as_str()))
        .collect()
}

/// The link URLs in a Notion block's rich text.
pub fn block_links(block: &Value) -> Vec<String> {
    rich_text_items(block)
        .iter()
        .filter_map(|i| i["text"]["link"]["url"].as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_text_cuts_at_words_within_the_limit_and_loses_nothing() {
        let text = "word ".repeat(1_800); // 9,000 characters
        let pieces = split_text(&text, MAX_RICH_TEXT_CHARS);
        assert_eq!(pieces.len(), 5);
        assert!(pieces
            .iter()
            .all(|p| p.encode_utf16().count() <= MAX_RICH_TEXT_CHARS));
        assert!(pieces[..4].iter().all(|p| p.ends_with(' ')));
        assert_eq!(pieces.concat(), text);
        // One long word: a hard cut. Astral characters count two units each.
        let long = "x".repeat(4_500);
        assert_eq!(
            split_text(&long, 2_000)
                .iter()
                .map(String::len)
                .collect::<Vec<_>>(),
            [2_000, 2_000, 500]
        );
        let emoji = "😀".repeat(1_500); // 3,000 UTF-16 units
        let pieces = split_text(&emoji, 2_000);
        assert_eq!(pieces[0].chars().count(), 1_000);
        assert_eq!(pieces.concat(), emoji);
        assert_eq!(split_text("", 10), [""]);
    }

    #[test]
    fn long_blocks_are_split_and_children_chunked() {
        let paragraph = Block::Paragraph(vec![Span::text("a".repeat(250_000))]);
        let notion = to_notion(&[paragraph]);
        // 125 items of 2,000: two blocks of at most 100 items.
        assert_eq!(notion.len(), 2);
        assert_eq!(
            notion[0].body["paragraph"]["rich_text"]
                .as_array()
                .unwrap()
                .len(),
            100
        );
        assert_eq!(
            notion[1].body["paragraph"]["rich_text"]
                .as_array()
                .unwrap()
                .len(),
            25
        );

        let toggle = Block::Toggle {
            summary: vec![Span::text("All 150 changed files")],
            children: (0..150)
                .map(|i| Block::Bullet(vec![Span::code(format!("src/f{i}.rs"))]))
                .collect(),
        };
        let blocks: Vec<Block> = (0..120)
            .map(|i| Block::Paragraph(vec![Span::text(format!("p{i}"))]))
            .chain([toggle])
            .collect();
        let notion = to_notion(&blocks);
        let planned = chunks(&notion);
        assert_eq!(planned.len(), 2);
        assert_eq!(planned[0].children.len(), 100);
        assert_eq!(planned[1].children.len(), 21);
        // The toggle's 150 children do not fit one array: sent bare, children deferred.
        assert_eq!(planned[1].deferred.len(), 1);
        assert_eq!(planned[1].deferred[0].0, 20);
        assert_eq!(planned[1].deferred[0].1.len(), 150);
        assert!(planned[1].children[20]["toggle"].get("children").is_none());
        for chunk in &planned {
            assert!(json!({"children": chunk.children}).to_string().len() <= MAX_PAYLOAD_BYTES);
        }
    }

    #[test]
    fn marks_and_links_become_annotations() {
        let items = rich_text(&[
            Span::link("Title", "https://github.com/a/b/pull/1"),
            Span::code("src/lib.rs"),
        ]);
        assert_eq!(
            items[0]["text"]["link"]["url"],
            "https://github.com/a/b/pull/1"
        );
        assert!(items[0].get("annotations").is_none());
        assert_eq!(items[1]["annotations"]["code"], true);
    }

    #[test]
    fn access_errors_say_what_to_do() {
        let e = access_action(StatusCode::UNAUTHORIZED, "unauthorized");
        assert!(e.contains("NOTION_TOKEN"));
        let e = access_action(StatusCode::FORBIDDEN, "restricted_resource");
        assert!(e.contains("Insert content"), "{e}");
        let e = access_action(StatusCode::NOT_FOUND, "object_not_found");
        assert!(e.contains("Connections"));
    }
}
