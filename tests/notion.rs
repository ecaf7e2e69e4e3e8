//! The Notion publisher through the summarize worker, against the emulator (DynamoDB) and the
//! strict Notion stand-in: one page per module however the first publishes race, entries
//! within every API limit, no entry appended twice after a crash, rate limits waited out,
//! access errors recorded with what to do, and the same entries as the Markdown page.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use shared::domain::RepoName;
use shared::narrative::{self, Block, ModulePage};
use shared::notion::NotionClient;
use shared::publish::{MarkdownPublisher, NotionPublisher, Publisher, Publishers};
use shared::secret::Secret;
use shared::store::{attr, notion_record, Item, NotionRecord, PrStore};
use shared::summarize::SummarizeHandler;
use shared::tagging::{self, ModulesConfig};
use support::notion_stub::{Fault, NotionStub, Seen};
use support::*;
use time::OffsetDateTime;

const REPO: &str = "Codertocat/Hello-World";
const TOKEN: &str = "ntn_chronicle_test_token";

struct Setup {
    stub: NotionStub,
    parent: String,
    store: PrStore,
    handler: Arc<SummarizeHandler>,
}

fn notion_publisher(
    stub: &NotionStub,
    parent: &str,
    store: &PrStore,
    pages: shared::store::NotionPages,
) -> NotionPublisher {
    let client = NotionClient::new(&stub.url(), Secret::new(TOKEN)).with_retry(
        2,
        Duration::from_millis(50),
        Duration::from_secs(10),
    );
    NotionPublisher::new(client, parent, pages, store.clone())
}

async fn setup_with(markdown: Option<&std::path::Path>) -> Setup {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let pages = fresh_pages_table(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    let notion: Arc<dyn Publisher> = Arc::new(notion_publisher(&stub, &parent, &store, pages));
    let publisher: Arc<dyn Publisher> = match markdown {
        Some(dir) => Arc::new(Publishers(vec![
            Arc::new(MarkdownPublisher::new(dir)),
            notion,
        ])),
        None => notion,
    };
    let handler = Arc::new(SummarizeHandler::new(
        store.clone(),
        publisher,
        ModulesConfig::empty(),
        5,
    ));
    Setup {
        stub,
        parent,
        store,
        handler,
    }
}

async fn setup() -> Setup {
    setup_with(None).await
}

/// A merged PR stored by the webhook path, merged at `merged_at`, with this body.
async fn pending(store: &PrStore, number: u64, merged_at: &str, body: Option<&str>) {
    let mut payload = merged_payload();
    payload["pull_request"]["number"] = serde_json::json!(number);
    payload["pull_request"]["merged_at"] = serde_json::json!(merged_at);
    payload["pull_request"]["title"] = serde_json::json!(format!("feat: change number {number}"));
    payload["pull_request"]["html_url"] = serde_json::json!(pr_url(number));
    if let Some(body) = body {
        payload["pull_request"]["body"] = serde_json::json!(body);
    }
    store_merged(store, &payload, OffsetDateTime::now_utc()).await;
}

/// What the enrich stage would have stored: the changed files.
async fn enriched(store: &PrStore, number: u64, files: &[(&str, u64, u64)]) {
    let files = files
        .iter()
        .map(|(path, add, del)| {
            AttributeValue::M(
                [
                    ("path".to_string(), AttributeValue::S(path.to_string())),
                    ("additions".to_string(), AttributeValue::N(add.to_string())),
                    ("deletions".to_string(), AttributeValue::N(del.to_string())),
                ]
                .into(),
            )
        })
        .collect();
    store
        .client()
        .update_item()
        .table_name(store.table_name())
        .set_key(Some(shared::store::key(&repo(), number)))
        .update_expression("SET #files = :files, #enrichedAt = :now")
        .expression_attribute_names("#files", attr::FILES)
        .expression_attribute_names("#enrichedAt", attr::ENRICHED_AT)
        .expression_attribute_values(":files", AttributeValue::L(files))
        .expression_attribute_values(":now", AttributeValue::S("2026-01-01T00:00:00Z".into()))
        .send()
        .await
        .unwrap();
}

fn repo() -> RepoName {
    RepoName::parse(REPO).unwrap()
}

fn message(id: &str, number: u64) -> SqsMessage {
    summarize_message(id, REPO, number)
}

fn batch(messages: Vec<SqsMessage>) -> SqsEvent {
    sqs_batch(messages)
}

async fn row(store: &PrStore, number: u64) -> Item {
    stored_row(store, REPO, number).await
}

fn pr_url(number: u64) -> String {
    format!("https://github.com/{REPO}/pull/{number}")
}

/// How many visible entry headings link to the PR.
fn entry_count(blocks: &[Seen], number: u64) -> usize {
    blocks
        .iter()
        .filter(|b| b.kind == "heading_3" && b.links.contains(&pr_url(number)))
        .count()
}

fn only_page(s: &Setup) -> String {
    let pages = s.stub.child_pages(&s.parent);
    assert_eq!(pages.len(), 1, "{pages:?}");
    pages[0].0.clone()
}

#[tokio::test]
async fn concurrent_first_publishes_of_a_new_module_create_one_page() {
    let s = setup().await;
    for n in 1..=4 {
        pending(&s.store, n, &format!("2024-05-0{n}T10:00:00Z"), None).await;
        enriched(&s.store, n, &[("src/lib.rs", n, 1)]).await;
    }
    // Four workers, each with its own PR of the same new module, at once.
    let workers: Vec<_> = (1..=4)
        .map(|n| {
            let handler = s.handler.clone();
            tokio::spawn(async move {
                handler
                    .handle(
                        batch(vec![message(&format!("m{n}"), n)]),
                        within(40),
                        &format!("inv-{n}"),
                    )
                    .await
            })
        })
        .collect();
    for w in workers {
        let response = w.await.unwrap();
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    let pages = s.stub.child_pages(&s.parent);
    assert_eq!(pages.len(), 1, "{pages:?}");
    assert_eq!(pages[0].1, "Codertocat/Hello-World · src");
    assert_eq!(s.stub.count("POST", "/v1/pages"), 1);
    let blocks = s.stub.blocks(&pages[0].0);
    for n in 1..=4 {
        assert_eq!(entry_count(&blocks, n), 1, "#{n}");
    }
    // Header, one month, entries newest first.
    let headings: Vec<&str> = blocks
        .iter()
        .filter(|b| b.kind.starts_with("heading"))
        .map(|b| b.text.as_str())
        .collect();
    assert_eq!(headings[0], "May 2024");
    assert!(headings[1].starts_with("2024-05-04 — "), "{headings:?}");
    assert!(headings[4].starts_with("2024-05-01 — "), "{headings:?}");
    assert_eq!(
        blocks[1].text,
        "4 merged pull requests, first merged 2024-05-01, latest 2024-05-04."
    );
    for n in 1..=4 {
        let r = row(&s.store, n).await;
        assert!(r.contains_key(attr::SUMMARIZED_AT));
        assert!(matches!(
            notion_record(&r, "src"),
            Some(NotionRecord::Appended { .. })
        ));
    }
    assert_eq!(s.stub.count_status(400), 0);
}

#[tokio::test]
async fn a_long_entry_is_chunked_and_split_within_the_limits() {
    let s = setup().await;
    let body = format!(
        "{}\n\n## Checklist\n- [x] tests",
        "lorem ipsum dolor ".repeat(500)
    );
    assert!(body.len() > 9_000);
    pending(&s.store, 7, "2024-06-01T00:00:00Z", Some(&body)).await;
    let files: Vec<(String, u64, u64)> = (0..150)
        .map(|i| (format!("src/f{i:03}.rs"), i, 1))
        .collect();
    let refs: Vec<(&str, u64, u64)> = files.iter().map(|(p, a, d)| (p.as_str(), *a, *d)).collect();
    enriched(&s.store, 7, &refs).await;
    let response = s
        .handler
        .handle(batch(vec![message("m7", 7)]), within(40), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(
        s.stub.count_status(400),
        0,
        "{:?}",
        s.stub
            .requests()
            .iter()
            .filter(|r| r.status == Some(400))
            .collect::<Vec<_>>()
    );

    let blocks = s.stub.blocks(&only_page(&s));
    let all_files = blocks
        .iter()
        .find(|b| b.kind == "toggle" && b.text == "All 150 changed files")
        .unwrap();
    assert_eq!(all_files.children.len(), 150);
    assert_eq!(all_files.children[0].text, "src/f000.rs (+0/−1)");
    assert_eq!(all_files.children[149].text, "src/f149.rs (+149/−1)");
    let description = blocks
        .iter()
        .find(|b| b.kind == "toggle" && b.text == "Description")
        .unwrap();
    let text: String = description
        .children
        .iter()
        .map(|c| c.text.as_str())
        .collect();
    assert_eq!(text, "lorem ipsum dolor ".repeat(500).trim_end());
    // The 9,000 characters went as several rich-text items (each ≤ 2,000), the 150 files as
    // an append of 100 and one of 50 to the toggle.
    let requests = s.stub.requests();
    let items: Vec<usize> = requests
        .iter()
        .filter_map(|r| r.body.as_ref())
        .flat_map(rich_text_lengths)
        .collect();
    assert!(items.iter().all(|&n| n <= 2_000), "{items:?}");
    assert!(
        items.iter().filter(|&&n| n > 1_500).count() >= 4,
        "{items:?}"
    );
    let appended_to_toggle: Vec<usize> = requests
        .iter()
        .filter(|r| {
            r.method == "PATCH" && r.path.ends_with("/children") && !r.path.contains(&only_page(&s))
        })
        .map(|r| {
            r.body.as_ref().unwrap()["children"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect();
    assert_eq!(appended_to_toggle, [100, 50]);
}

/// The length (UTF-16 units) of every rich-text item in a request body.
fn rich_text_lengths(v: &serde_json::Value) -> Vec<usize> {
    let mut out = Vec::new();
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                if k == "rich_text" {
                    for item in v.as_array().into_iter().flatten() {
                        if let Some(c) = item["text"]["content"].as_str() {
                            out.push(c.encode_utf16().count());
                        }
                    }
                } else {
                    out.extend(rich_text_lengths(v));
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| out.extend(rich_text_lengths(v))),
        _ => {}
    }
    out
}

#[tokio::test]
async fn a_crash_after_the_append_does_not_append_again() {
    let s = setup().await;
    pending(&s.store, 2, "2024-06-30T00:00:00Z", None).await;
    pending(&s.store, 3, "2024-07-01T00:00:00Z", None).await;
    let first = s
        .handler
        .handle(batch(vec![message("m2", 2)]), within(30), "inv-2")
        .await;
    assert!(first.batch_item_failures.is_empty(), "{first:?}");
    // #3's append is applied and recorded; the worker dies in the header update that follows
    // (the counts changed), before the row is committed.
    s.stub.fault(Some("PATCH block"), Fault::HangAfterApply);
    let crashed = tokio::time::timeout(
        Duration::from_secs(10),
        s.handler
            .handle(batch(vec![message("m3", 3)]), within(3), "inv-crash"),
    );
    let applied = s.stub.applied.clone();
    tokio::select! {
        _ = crashed => panic!("the worker was expected to hang"),
        _ = applied.notified() => {}
    }
    let r = row(&s.store, 3).await;
    assert!(!r.contains_key(attr::SUMMARIZED_AT));
    assert!(
        matches!(notion_record(&r, REPO), Some(NotionRecord::Appended { .. })),
        "{r:?}"
    );
    // The lease (and the page lock) end with the dead worker's deadline.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let retry = s
        .handler
        .handle(batch(vec![message("m3", 3)]), within(30), "inv-retry")
        .await;
    assert!(retry.batch_item_failures.is_empty(), "{retry:?}");
    let blocks = s.stub.blocks(&only_page(&s));
    assert_eq!(entry_count(&blocks, 3), 1);
    let appends = s
        .stub
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/children"))
        .count();
    // #2's entry, then #3's (with its new month): one append each.
    assert_eq!(appends, 2, "the entry was appended once");
    assert!(row(&s.store, 3).await.contains_key(attr::SUMMARIZED_AT));
}

#[tokio::test]
async fn a_crash_inside_the_append_leaves_one_copy_after_the_retry() {
    let s = setup().await;
    pending(&s.store, 4, "2024-07-02T00:00:00Z", None).await;
    // Notion applies the append, the worker dies before it hears back: the row says only
    // "appending", the page has the entry.
    s.stub.fault(Some("PATCH children"), Fault::HangAfterApply);
    let crashed = s
        .handler
        .handle(batch(vec![message("m4", 4)]), within(3), "inv-crash");
    let applied = s.stub.applied.clone();
    tokio::select! {
        _ = crashed => panic!("the worker was expected to hang"),
        _ = applied.notified() => {}
    }
    let page = only_page(&s);
    assert_eq!(entry_count(&s.stub.blocks(&page), 4), 1);
    assert!(matches!(
        notion_record(&row(&s.store, 4).await, REPO),
        Some(NotionRecord::Appending { .. })
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let retry = s
        .handler
        .handle(batch(vec![message("m4", 4)]), within(30), "inv-retry")
        .await;
    assert!(retry.batch_item_failures.is_empty(), "{retry:?}");
    let blocks = s.stub.blocks(&page);
    assert_eq!(entry_count(&blocks, 4), 1, "{blocks:#?}");
    // The month heading is there once too (the interrupted one went with its entry).
    assert_eq!(blocks.iter().filter(|b| b.kind == "heading_2").count(), 1);
    assert!(s.stub.count("DELETE", "/v1/blocks/") >= 2);
    assert!(row(&s.store, 4).await.contains_key(attr::SUMMARIZED_AT));
}

#[tokio::test]
async fn a_crash_after_creating_the_page_adopts_it() {
    let s = setup().await;
    pending(&s.store, 5, "2024-07-03T00:00:00Z", None).await;
    s.stub.fault(Some("POST pages"), Fault::HangAfterApply);
    let crashed = s
        .handler
        .handle(batch(vec![message("m5", 5)]), within(3), "inv-crash");
    let applied = s.stub.applied.clone();
    tokio::select! {
        _ = crashed => panic!("the worker was expected to hang"),
        _ = applied.notified() => {}
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let retry = s
        .handler
        .handle(batch(vec![message("m5", 5)]), within(30), "inv-retry")
        .await;
    assert!(retry.batch_item_failures.is_empty(), "{retry:?}");
    assert_eq!(s.stub.count("POST", "/v1/pages"), 1);
    let page = only_page(&s);
    assert_eq!(entry_count(&s.stub.blocks(&page), 5), 1);
}

#[tokio::test]
async fn rate_limits_are_waited_out_when_there_is_time() {
    let s = setup().await;
    pending(&s.store, 6, "2024-08-01T00:00:00Z", None).await;
    s.stub.fault(
        None,
        Fault::RateLimited {
            retry_after_secs: 1,
        },
    );
    s.stub.fault(
        Some("PATCH children"),
        Fault::Overloaded {
            retry_after_secs: 1,
        },
    );
    s.stub.fault(Some("PATCH children"), Fault::ServerError);
    let started = Instant::now();
    let response = s
        .handler
        .handle(batch(vec![message("m6", 6)]), within(40), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(s.stub.count_status(429), 1);
    assert_eq!(s.stub.count_status(529), 1);
    assert_eq!(s.stub.count_status(500), 1);
    assert_eq!(entry_count(&s.stub.blocks(&only_page(&s)), 6), 1);
    assert!(row(&s.store, 6).await.contains_key(attr::SUMMARIZED_AT));
}

#[tokio::test]
async fn a_rate_limit_longer_than_the_time_left_gives_the_message_back() {
    let s = setup().await;
    pending(&s.store, 8, "2024-08-02T00:00:00Z", None).await;
    s.stub.fault(
        None,
        Fault::RateLimited {
            retry_after_secs: 60,
        },
    );
    let response = s
        .handler
        .handle(batch(vec![message("m8", 8)]), within(20), "inv-1")
        .await;
    assert_eq!(response.batch_item_failures.len(), 1);
    let r = row(&s.store, 8).await;
    assert!(!r.contains_key(attr::FAILED_AT));
    assert!(
        support::s(&r, attr::LAST_ERROR).contains("rate limiting"),
        "{r:?}"
    );
    // It comes back and goes through.
    let again = s
        .handler
        .handle(batch(vec![message("m8", 8)]), within(20), "inv-2")
        .await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");
    assert!(row(&s.store, 8).await.contains_key(attr::SUMMARIZED_AT));
}

#[tokio::test]
async fn a_revoked_token_fails_the_row_with_what_to_do() {
    let s = setup().await;
    pending(&s.store, 9, "2024-08-03T00:00:00Z", None).await;
    s.stub.set_token("ntn_a_different_token");
    let response = s
        .handler
        .handle(batch(vec![message("m9", 9)]), within(20), "inv")
        .await;
    // Given up at once (retrying cannot help), so the message is done.
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let r = row(&s.store, 9).await;
    assert!(r.contains_key(attr::FAILED_AT));
    assert!(!r.contains_key(attr::PENDING_SHARD));
    let reason = support::s(&r, attr::FAILED_REASON);
    assert!(reason.contains("401 unauthorized"), "{reason}");
    assert!(
        reason.contains("create a new internal integration secret"),
        "{reason}"
    );
    assert!(reason.contains("NOTION_TOKEN"), "{reason}");
    assert!(!reason.contains(TOKEN));
    assert_eq!(s.stub.count_status(401), 1);
}

#[tokio::test]
async fn an_unshared_parent_and_a_validation_error_are_recorded_not_retried() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let pages = fresh_pages_table(&sdk).await;
    let (stub, _) = NotionStub::start(TOKEN).await;
    let unshared = stub.add_page(None, "Private page", false);
    let handler = Arc::new(SummarizeHandler::new(
        store.clone(),
        Arc::new(notion_publisher(&stub, &unshared, &store, pages)),
        ModulesConfig::empty(),
        5,
    ));
    pending(&store, 10, "2024-08-04T00:00:00Z", None).await;
    let response = handler
        .handle(batch(vec![message("m10", 10)]), within(20), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty());
    let reason = s(&row(&store, 10).await, attr::FAILED_REASON).to_string();
    assert!(reason.contains("404 object_not_found"), "{reason}");
    assert!(reason.contains("Connections"), "{reason}");

    let s = setup().await;
    pending(&s.store, 11, "2024-08-05T00:00:00Z", None).await;
    s.stub.fault(
        Some("PATCH children"),
        Fault::Invalid(
            "body.children[3].paragraph.rich_text[0].text.content.length should be ≤ `2000`".into(),
        ),
    );
    let response = s
        .handler
        .handle(batch(vec![message("m11", 11)]), within(20), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty());
    let r = row(&s.store, 11).await;
    let reason = support::s(&r, attr::FAILED_REASON);
    assert!(reason.contains("validation_error"), "{reason}");
    assert!(reason.contains("should be ≤ `2000`"), "{reason}");
    assert_eq!(r[attr::ATTEMPTS].as_n().unwrap(), "1");
}

/// A page's blocks as (type, text, children), the way the stand-in holds them.
fn shape(blocks: &[Seen]) -> Vec<(String, String, usize)> {
    blocks
        .iter()
        .map(|b| (b.kind.clone(), b.text.clone(), b.children.len()))
        .collect()
}

fn expected_shape(blocks: &[Block]) -> Vec<(String, String, usize)> {
    blocks
        .iter()
        .map(|b| {
            let kind = match b {
                Block::Heading { level, .. } => format!("heading_{level}"),
                Block::Paragraph(_) => "paragraph".into(),
                Block::Bullet(_) => "bulleted_list_item".into(),
                Block::Toggle { .. } => "toggle".into(),
            };
            (kind, b.plain_text(), b.children().len())
        })
        .collect()
}

#[tokio::test]
async fn markdown_and_notion_carry_the_same_entries_in_the_same_order() {
    let dir = std::env::temp_dir().join(format!(
        "chronicle-parity-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let s = setup_with(Some(&dir)).await;
    let merged = [
        (21, "2024-03-05T09:00:00Z"),
        (22, "2024-04-11T09:00:00Z"),
        (23, "2024-04-02T09:00:00Z"),
        (24, "2024-02-20T09:00:00Z"),
    ];
    for (n, at) in merged {
        pending(
            &s.store,
            n,
            at,
            Some("Moves the parser into its own module.\n\n## Notes\nFollow-up in #12."),
        )
        .await;
        enriched(
            &s.store,
            n,
            &[("src/parser.rs", 10 * n, 2), ("docs/parser.md", 3, 0)],
        )
        .await;
    }
    // Out of merge order: every entry must still land at its place on the Notion page.
    for n in [23, 21, 24, 22] {
        let r = s
            .handler
            .handle(batch(vec![message(&format!("m{n}"), n)]), within(40), "inv")
            .await;
        assert!(r.batch_item_failures.is_empty(), "{r:?}");
    }
    let rows = s.store.summarized_rows(&repo()).await.unwrap();
    for module in ["src", "docs"] {
        let entries = rows
            .iter()
            .filter(|r| tagging_of(r).contains(&module.to_string()))
            .map(|r| narrative::entry_from_item(r).unwrap())
            .collect();
        let page = ModulePage::new(REPO, module, entries).with_paths(tagging::module_paths(
            &repo(),
            module,
            None,
        ));
        let notion_page = s
            .stub
            .child_pages(&s.parent)
            .into_iter()
            .find(|(_, title)| *title == page.title())
            .unwrap()
            .0;
        let blocks = s.stub.blocks(&notion_page);
        assert_eq!(
            shape(&blocks),
            expected_shape(&narrative::page_blocks(&page)),
            "{module}"
        );
        let markdown = std::fs::read_to_string(
            dir.join("Codertocat/Hello-World")
                .join(format!("{module}.md")),
        )
        .unwrap();
        assert_eq!(markdown, narrative::render_markdown(&page));
        for (n, _) in merged {
            assert_eq!(markdown.matches(&format!("(#{n})\n")).count(), 1);
            assert_eq!(entry_count(&blocks, n), 1);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tagging_of(row: &Item) -> Vec<String> {
    match row.get(attr::MODULES) {
        Some(AttributeValue::L(l)) => l.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
        _ => Vec::new(),
    }
}

#[tokio::test]
async fn notion_requests_per_published_pr() {
    let s = setup().await;
    for n in 61..=63 {
        pending(
            &s.store,
            n,
            &format!("2024-09-{:02}T00:00:00Z", n - 50),
            None,
        )
        .await;
    }
    let mut costs = Vec::new();
    for n in 61..=63 {
        let before = s.stub.requests().len();
        let r = s
            .handler
            .handle(batch(vec![message(&format!("m{n}"), n)]), within(30), "inv")
            .await;
        assert!(r.batch_item_failures.is_empty(), "{r:?}");
        let made: Vec<String> = s.stub.requests()[before..]
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r.method,
                    if r.path.ends_with("/children") {
                        "children"
                    } else {
                        "block/page"
                    }
                )
            })
            .collect();
        costs.push(made);
    }
    println!("Notion requests per PR: {costs:?}");
    // New module: create the page, read its header ids, append the entry.
    assert_eq!(
        costs[0],
        ["POST block/page", "GET children", "PATCH children"]
    );
    // A later PR: the append, then the two header lines that changed (the counts and the
    // author's count); the paths line is left alone.
    for later in &costs[1..] {
        assert_eq!(
            *later,
            ["PATCH children", "PATCH block/page", "PATCH block/page"]
        );
    }
}

#[tokio::test]
async fn the_token_is_read_from_secrets_manager_as_the_template_configures_it() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let pages = fresh_pages_table(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    let arn = aws_sdk_secretsmanager::Client::new(&sdk)
        .create_secret()
        .name(format!(
            "chronicle/notion-{}",
            uuid::Uuid::new_v4().simple()
        ))
        .secret_string(TOKEN)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    // The summarize function's environment as template.yaml sets it (Markdown off).
    let vars = [
        ("TABLE_NAME", store.table_name().to_string()),
        ("NOTION_TOKEN_ARN", arn),
        ("NOTION_PARENT_PAGE_ID", parent.clone()),
        ("NOTION_PAGES_TABLE", pages.table_name().to_string()),
        ("NOTION_API_URL", stub.url()),
        ("PUBLISH_MARKDOWN", "false".to_string()),
    ];
    let config = shared::config::SummarizeConfig::from_lookup(&|k: &str| {
        vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    })
    .unwrap();
    let handler = Arc::new(SummarizeHandler::from_config(&config, &sdk).await.unwrap());
    pending(&store, 70, "2024-10-01T00:00:00Z", None).await;
    let r = handler
        .handle(batch(vec![message("m70", 70)]), within(30), "inv")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    let pages = stub.child_pages(&parent);
    assert_eq!(pages.len(), 1);
    assert_eq!(entry_count(&stub.blocks(&pages[0].0), 70), 1);
    assert!(row(&store, 70).await.contains_key(attr::SUMMARIZED_AT));
}
