//! The page builder publishing to Notion, through the strict Markdown API stand-in: pages are
//! created once (even when builders race or a create is applied without an answer), replaced
//! whole (a replace retried after a timeout leaves one copy of each entry), recreated when
//! deleted by hand, kept when a person adds a page under them; access errors are recorded on
//! the page item with advice and never touch a PR row.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stages::builder::PageBuilder;
use stages::domain::{rfc3339_seconds, ModuleEntry};
use stages::notion::NotionClient;
use stages::publish::{MarkdownPublisher, NotionPublisher, Publisher, Publishers};
use stages::secret::Secret;
use stages::store::INDEX_MODULE;
use stages::tagging::ModulesConfig;
use support::notion_stub::{Fault, NotionStub};
use support::*;
use time::OffsetDateTime;

pub(crate) const TOKEN: &str = "ntn_builder_test";
pub(crate) const REPO: &str = "acme/monorepo";

pub(crate) fn entry(module: &str, number: u64, merged_at: &str) -> ModuleEntry {
    ModuleEntry {
        repo: REPO.into(),
        module: module.into(),
        number,
        title: format!("Change {number} of {module}: `code`, *stars* and $dollars"),
        url: format!("https://github.com/{REPO}/pull/{number}"),
        author: "dev_one".into(),
        merged_at: merged_at.into(),
        kind: Some("feat".into()),
        breaking: false,
        labels: vec!["area/{x}".into()],
        summary: format!("Why PR {number} was made: a [link](https://example.com/{number})."),
        linked_issues: vec![],
        additions: 3,
        deletions: 1,
        files: vec![],
        files_here: 0,
        lines_here: 0,
        elsewhere: vec![],
        files_elsewhere: 0,
        why: None,
        reviewers: vec![],
        discussion: 0,
    }
}

pub(crate) async fn put(t: &Tables, e: &ModuleEntry) {
    t.put_entry(e).await;
}

/// `count` entries of `module` 200 days apart up to 2024-06-01: a module page with archive
/// child pages.
async fn over_the_years(t: &Tables, module: &str, count: u64) {
    for n in 0..count {
        let at = stages::domain::parse_rfc3339("2024-06-01T10:00:00Z").unwrap()
            - time::Duration::days(200 * n as i64);
        put(t, &entry(module, count - n, &rfc3339_seconds(at))).await;
    }
}

pub(crate) fn publisher(t: &Tables, stub: &NotionStub, parent: &str) -> NotionPublisher {
    publisher_with(
        t,
        stub,
        parent,
        Arc::new(std::sync::Mutex::new(TOKEN.to_string())),
    )
}

/// A publisher whose token is read again from `configured` (as from Secrets Manager) after a 401.
fn publisher_with(
    t: &Tables,
    stub: &NotionStub,
    parent: &str,
    configured: Arc<std::sync::Mutex<String>>,
) -> NotionPublisher {
    publisher_timed(t, stub, parent, configured, Duration::from_secs(2))
}

fn publisher_timed(
    t: &Tables,
    stub: &NotionStub,
    parent: &str,
    configured: Arc<std::sync::Mutex<String>>,
    timeout: Duration,
) -> NotionPublisher {
    let first = configured.lock().unwrap().clone();
    let refresh: stages::notion::TokenRefresh = Arc::new(move || {
        let token = configured.lock().unwrap().clone();
        Box::pin(async move { Some(Secret::new(token)) })
    });
    let client = NotionClient::new(&stub.url(), Secret::new(first))
        .with_retry(3, Duration::from_millis(50), timeout)
        .with_token_refresh(refresh);
    NotionPublisher::new(client, parent, t.pages.clone()).with_create_claim(Duration::from_secs(8))
}

pub(crate) fn builder(t: &Tables, publisher: Arc<dyn Publisher>) -> PageBuilder {
    t.builder(publisher, ModulesConfig::empty(), Duration::ZERO)
}

pub(crate) async fn tick(b: &PageBuilder, secs: u64) -> stages::builder::BuildReport {
    b.tick(
        OffsetDateTime::now_utc(),
        within(secs),
        &format!("tick-{}", uuid::Uuid::new_v4().simple()),
    )
    .await
    .unwrap()
}

pub(crate) async fn settle(b: &PageBuilder, t: &Tables, limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        tick(b, 60).await;
        if t.pages.stale_pages().await.unwrap().is_empty() {
            return;
        }
        if Instant::now() >= until {
            let errors: Vec<(String, Option<String>, u64)> = t
                .pages
                .repo_pages(REPO)
                .await
                .unwrap()
                .into_iter()
                .map(|i| (i.module, i.last_error, i.failed_builds))
                .collect();
            panic!("still stale after {limit:?}: {errors:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) fn module_title(module: &str) -> String {
    format!("{REPO} · {module}")
}

/// The module's live page and its Markdown.
pub(crate) fn page(stub: &NotionStub, module: &str) -> (String, String) {
    let id = stub
        .live_page(&module_title(module))
        .unwrap_or_else(|| panic!("no single live page for {module}"));
    let markdown = stub.markdown(&id);
    (id, markdown)
}

fn entry_count(markdown: &str, number: u64) -> usize {
    markdown.matches(&format!("(#{number})\n")).count()
}

#[tokio::test]
async fn the_first_build_creates_the_index_and_module_pages_once_nested_and_complete() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    for (i, module) in ["api", "web"].iter().enumerate() {
        for n in 0..3 {
            put(
                &t,
                &entry(
                    module,
                    (i * 10 + n) as u64 + 1,
                    &format!("2024-06-0{}T10:00:00Z", n + 1),
                ),
            )
            .await;
        }
    }
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    // parent → the organisation's page → the repository's index → the module pages.
    let org = stub.child_pages(&parent);
    assert_eq!(org.len(), 1, "{org:?}");
    assert_eq!(org[0].1, "acme · repositories");
    let index = stub.child_pages(&org[0].0);
    assert_eq!(index.len(), 1, "{index:?}");
    assert_eq!(index[0].1, format!("{REPO} · modules"));
    let modules = stub.child_pages(&index[0].0);
    let mut titles: Vec<&str> = modules.iter().map(|(_, t)| t.as_str()).collect();
    titles.sort();
    assert_eq!(titles, [module_title("api"), module_title("web")]);
    let (api_id, api) = page(&stub, "api");
    for n in 1..=3 {
        assert_eq!(entry_count(&api, n), 1, "{api}");
    }
    // Notion's Markdown: escaped as its reference says, links kept, no title heading; the
    // title's code span is code, as GitHub shows it.
    assert!(api.contains("[Change 3 of api: `code`, \\*stars\\* and \\$dollars](https://github.com/acme/monorepo/pull/3)"), "{api}");
    assert!(api.contains("labels: area/\\{x\\}"), "{api}");
    assert!(!api.starts_with("# "));
    // The index names its module pages as child pages.
    let index_md = stub.markdown(&index[0].0);
    assert!(
        index_md.contains("<page url=\"https://www.notion.so/"),
        "{index_md}"
    );
    assert!(index_md.contains(&api_id.replace('-', "")), "{index_md}");
    // The organisation's page names the index as its child page and links the module pages.
    let org_md = stub.markdown(&org[0].0);
    assert!(
        org_md.contains(&format!("\">{REPO} · modules</page>"))
            && org_md.contains(&index[0].0.replace('-', "")),
        "{org_md}"
    );
    assert!(
        org_md.contains("- [api](https://www.notion.so/")
            && org_md.contains(&api_id.replace('-', "")),
        "{org_md}"
    );
    assert_eq!(
        stub.count("POST", "/v1/pages", "/v1/pages"),
        4,
        "organisation + index + 2 modules, once each"
    );
}

#[tokio::test]
async fn two_builders_racing_on_one_module_make_one_page_holding_every_entry() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    for n in 1..=3 {
        put(&t, &entry("api", n, &format!("2024-06-0{n}T10:00:00Z"))).await;
    }
    // Builder A is slow (Notion takes 3 s to create the index page) and its lease lasts 2 s;
    // builder B takes the module over, and a new entry lands meanwhile.
    stub.fault(Some("POST pages"), Fault::Delay(Duration::from_secs(3)));
    // (A's client would wait out the slow answer; its 2 s deadline cuts it off.)
    let slow_client = publisher_timed(
        &t,
        &stub,
        &parent,
        Arc::new(std::sync::Mutex::new(TOKEN.to_string())),
        Duration::from_secs(10),
    );
    let a = Arc::new(builder(&t, Arc::new(slow_client)));
    let a_run = {
        let a = a.clone();
        tokio::spawn(async move { tick(&a, 2).await })
    };
    let a_lost = async { a_run.await.unwrap() };
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    put(&t, &entry("api", 4, "2024-06-04T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    let b_run = tick(&b, 60).await;
    let a_report = a_lost.await;
    println!("A: {a_report:?}, B: {b_run:?}");
    // A's invocation ends before Notion answers: its create is cut off (and may still be
    // applied), never waited on past the deadline.
    assert!(
        a_report.failed + a_report.held >= 1,
        "A's lease expired while it created the index page"
    );
    settle(&b, &t, Duration::from_secs(60)).await;
    assert_eq!(
        stub.pages_titled(&format!("{REPO} · modules")).len(),
        1,
        "one index page"
    );
    assert_eq!(
        stub.pages_titled(&module_title("api")).len(),
        1,
        "one module page"
    );
    let (_, api) = page(&stub, "api");
    for n in 1..=4 {
        assert_eq!(entry_count(&api, n), 1, "#{n}: {api}");
    }
}

#[tokio::test]
async fn a_replace_applied_but_unanswered_is_retried_and_leaves_one_copy() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    put(&t, &entry("api", 2, "2024-06-02T10:00:00Z")).await;
    // The module page's replace is applied, then no answer comes: the client times out (2 s)
    // and sends it again.
    stub.fault(Some("PATCH markdown"), Fault::HangAfterApply);
    settle(&b, &t, Duration::from_secs(60)).await;
    let replaces = stub
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/markdown"))
        .count();
    assert!(replaces >= 2, "the hung replace was sent again");
    assert_eq!(stub.pages_titled(&module_title("api")).len(), 1);
    let (_, api) = page(&stub, "api");
    assert_eq!(
        (entry_count(&api, 1), entry_count(&api, 2)),
        (1, 1),
        "{api}"
    );
}

#[tokio::test]
async fn a_create_applied_but_unanswered_is_adopted_not_duplicated() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    // A person's page with the organisation page's title: neither adopted nor trashed.
    let theirs = stub.add_page(Some(&parent), "acme · repositories", true);
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    // The first create (the organisation's page) is applied, and the answer never comes.
    stub.fault(Some("POST pages"), Fault::HangAfterApply);
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let titled = stub.pages_titled("acme · repositories");
    assert_eq!(
        titled.len(),
        2,
        "the person's page and one organisation page: {titled:?}"
    );
    assert_eq!(stub.pages_titled(&format!("{REPO} · modules")).len(), 1);
    assert!(
        stub.child_pages(&parent)
            .iter()
            .any(|(id, _)| *id == theirs),
        "kept live"
    );
    assert_eq!(stub.markdown(&theirs), "", "untouched");
    assert_eq!(
        stub.count("POST", "/v1/pages", "/v1/pages"),
        3,
        "the organisation page (adopted), the index and the module"
    );
    let (_, api) = page(&stub, "api");
    assert_eq!(entry_count(&api, 1), 1);
}

#[tokio::test]
async fn pages_deleted_by_hand_are_published_again() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    // Entries over three years: the module page has archive child pages.
    over_the_years(&t, "api", 6).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (api_id, api) = page(&stub, "api");
    let archives = stub.child_pages(&api_id);
    assert!(archives.len() >= 2, "{archives:?}");
    assert!(
        api.contains("<page url="),
        "archive pages are named as children: {api}"
    );

    // A person deletes one archive page: the next build publishes it again.
    stub.trash(&archives[0].0);
    put(&t, &entry("api", 7, "2024-06-02T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    let (same_id, _) = page(&stub, "api");
    assert_eq!(same_id, api_id);
    let again = stub.child_pages(&api_id);
    assert_eq!(again.len(), archives.len(), "{again:?}");
    assert!(again.iter().any(|(_, title)| *title == archives[0].1));

    // A person deletes the module page (and its archives with it): all of it comes back.
    stub.trash(&api_id);
    put(&t, &entry("api", 8, "2024-06-03T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    let (new_id, api) = page(&stub, "api");
    assert_ne!(new_id, api_id);
    assert_eq!(stub.child_pages(&new_id).len(), archives.len());
    for n in [7, 8] {
        assert_eq!(entry_count(&api, n), 1, "{api}");
    }

    // And the index page: every module page under a new one.
    let index = stub.live_page(&format!("{REPO} · modules")).unwrap();
    stub.delete(&index);
    put(&t, &entry("api", 9, "2024-06-04T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(90)).await;
    let new_index = stub.live_page(&format!("{REPO} · modules")).unwrap();
    assert_ne!(new_index, index);
    let (_, api) = page(&stub, "api");
    assert_eq!(entry_count(&api, 9), 1);
    assert_eq!(stub.child_pages(&new_index).len(), 1);
}

#[tokio::test]
async fn a_page_a_person_added_under_a_module_page_is_kept() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (api_id, _) = page(&stub, "api");
    let notes = stub.add_page(Some(&api_id), "Team notes", true);
    let tracker = stub.add_database(&api_id, "Bug tracker");
    put(&t, &entry("api", 2, "2024-06-02T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    let children = stub.child_pages(&api_id);
    assert!(
        children.iter().any(|(id, _)| *id == notes),
        "the page is kept"
    );
    assert!(
        children.iter().any(|(id, _)| *id == tracker),
        "the database is kept"
    );
    let (_, api) = page(&stub, "api");
    assert!(api.contains("## Other pages"), "{api}");
    assert_eq!(entry_count(&api, 2), 1);
}

#[tokio::test]
async fn a_revoked_token_is_recorded_on_the_page_item_with_advice_and_a_rotated_one_is_picked_up() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    // A real PR summarized by the worker.
    store_merged(&t.prs, &merged_payload(), OffsetDateTime::now_utc()).await;
    let worker = Arc::new(t.summarizer(ModulesConfig::empty(), 5));
    let r = worker
        .handle(
            sqs_batch(vec![summarize_message("m", "Codertocat/Hello-World", 2)]),
            within(30),
            "inv",
        )
        .await;
    assert!(r.batch_item_failures.is_empty());
    // The token is revoked in Notion; the configured secret still holds it.
    stub.set_token("ntn_rotated");
    let configured = Arc::new(std::sync::Mutex::new(TOKEN.to_string()));
    let b = t.builder(
        Arc::new(publisher_with(&t, &stub, &parent, configured.clone())),
        ModulesConfig::empty(),
        Duration::from_secs(1),
    );
    let report = tick(&b, 60).await;
    assert_eq!(report.failed, 1, "{report:?}");
    let item = t
        .pages
        .get("Codertocat/Hello-World", "Codertocat/Hello-World")
        .await
        .unwrap()
        .unwrap();
    let error = item.last_error.clone().unwrap();
    assert!(error.contains("401"), "{error}");
    let advice = item.advice.clone().unwrap();
    assert!(
        advice.contains("create a new internal integration secret")
            && advice.contains("NOTION_TOKEN"),
        "{advice}"
    );
    assert!(
        !error.contains(TOKEN) && !advice.contains(TOKEN),
        "the token is never written"
    );
    assert!(item.stale.is_some(), "still stale: built again later");
    let row = stored_row(&t.prs, "Codertocat/Hello-World", 2).await;
    assert!(row.contains_key(stages::store::attr::SUMMARIZED_AT));
    assert!(
        !row.contains_key(stages::store::attr::FAILED_AT),
        "a page never fails a PR row"
    );
    // The operator stores the new secret; the same (warm) builder picks it up after the next 401.
    *configured.lock().unwrap() = "ntn_rotated".to_string();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    let item = t
        .pages
        .get("Codertocat/Hello-World", "Codertocat/Hello-World")
        .await
        .unwrap()
        .unwrap();
    assert!(item.last_error.is_none() && item.advice.is_none());
    assert!(stub
        .live_page("Codertocat/Hello-World · Codertocat/Hello-World")
        .is_some());
}

#[tokio::test]
async fn an_unshared_parent_gets_advice_about_connections() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, _) = NotionStub::start(TOKEN).await;
    let private = stub.add_page(None, "Not shared", false);
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &private)));
    assert_eq!(tick(&b, 60).await.failed, 1);
    let item = t.pages.get(REPO, "api").await.unwrap().unwrap();
    assert!(item.advice.unwrap().contains("Connections"));
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_waited_out() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    stub.fault(
        None,
        Fault::RateLimited {
            retry_after_secs: 1,
        },
    );
    stub.fault(
        None,
        Fault::Overloaded {
            retry_after_secs: 1,
        },
    );
    stub.fault(Some("GET children"), Fault::ServerError);
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    assert!(stub.count_status(429) >= 1 && stub.count_status(529) == 1);
    assert_eq!(
        stub.count_status(500),
        1,
        "the listing's 500 was met and retried"
    );
    assert_eq!(stub.pages_titled(&module_title("api")).len(), 1);
    // A Retry-After beyond what the invocation has left fails the build; the page stays stale.
    put(&t, &entry("api", 2, "2024-06-02T10:00:00Z")).await;
    stub.fault(
        None,
        Fault::RateLimited {
            retry_after_secs: 60,
        },
    );
    let report = tick(&b, 60).await;
    assert_eq!(report.failed, 1, "{report:?}");
    let item = t.pages.get(REPO, "api").await.unwrap().unwrap();
    assert!(item.last_error.unwrap().contains("rate limiting"));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (_, api) = page(&stub, "api");
    assert_eq!(entry_count(&api, 2), 1);
}

#[tokio::test]
async fn notion_and_markdown_carry_the_same_content_and_requests_per_build_are_counted() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.without_rate_limit();
    let dir = std::env::temp_dir().join(format!(
        "chronicle-parity-{}",
        uuid::Uuid::new_v4().simple()
    ));
    for n in [23, 21, 24, 22] {
        put(
            &t,
            &entry(
                if n % 2 == 0 { "api" } else { "web" },
                n,
                &format!("2024-06-{n:02}T10:00:00Z"),
            ),
        )
        .await;
    }
    let both: Arc<dyn Publisher> = Arc::new(Publishers(vec![
        Arc::new(MarkdownPublisher::new(&dir)),
        Arc::new(publisher(&t, &stub, &parent)),
    ]));
    let b = builder(&t, both);
    let first = stub.requests().len();
    settle(&b, &t, Duration::from_secs(60)).await;
    let first_build = stub.requests().len() - first;
    for module in ["api", "web"] {
        let (_, notion) = page(&stub, module);
        let file = std::fs::read_to_string(dir.join(format!("acme/monorepo/{module}.md"))).unwrap();
        let order = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.starts_with("### ") || l.starts_with("## "))
                .map(|l| l.rsplit(' ').next().unwrap().to_string())
                .collect()
        };
        assert_eq!(order(&notion), order(&file), "same headings, same order");
        assert!(!order(&file).is_empty());
    }
    // A later PR of one module: the builder replaces that page and the index.
    put(&t, &entry("api", 26, "2024-06-26T10:00:00Z")).await;
    let before = stub.requests().len();
    settle(&b, &t, Duration::from_secs(60)).await;
    let later = stub.requests().len() - before;
    println!(
        "Notion requests: first build of 2 modules and the index {first_build}, a later PR {later}"
    );
    // The organisation page, the index and 2 module pages created, the organisation page's
    // parent listed once (for index pages an earlier version left there), contents replaced.
    assert!(first_build <= 9, "{first_build}");
    assert!(
        later <= 4,
        "{later}: a listing and a replace for the module page and the index"
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(t
        .pages
        .get(REPO, INDEX_MODULE)
        .await
        .unwrap()
        .unwrap()
        .stale
        .is_none());
}

#[tokio::test]
async fn a_deleted_archive_year_in_parts_is_published_again_whole() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.without_rate_limit();
    // 2023 is more than a page (400 entries): a year page with its parts under it.
    let end = stages::domain::parse_rfc3339("2023-12-30T10:00:00Z").unwrap();
    for n in 0..400u64 {
        let mut e = entry(
            "api",
            400 - n,
            &rfc3339_seconds(end - time::Duration::hours(21 * n as i64)),
        );
        e.summary = format!(
            "{} {}",
            e.summary,
            "Context a reviewer would want, repeated. ".repeat(12)
        );
        put(&t, &e).await;
    }
    put(&t, &entry("api", 1_000, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(120)).await;
    let (api_id, _) = page(&stub, "api");
    let year = stub
        .child_pages(&api_id)
        .into_iter()
        .find(|(_, title)| title.ends_with("· 2023"))
        .expect("a 2023 archive page");
    let parts = stub.child_pages(&year.0);
    assert!(parts.len() >= 2, "{parts:?}");
    // A new merge changes the module page, the year's newest part and the year page's list:
    // the parts that did not change are not sent again.
    let before = stub.count("PATCH", "/v1/pages/", "/markdown");
    put(&t, &entry("api", 999, "2024-05-01T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(120)).await;
    let replaced = stub.count("PATCH", "/v1/pages/", "/markdown") - before;
    // The module page, the part, the year page's list, the index and the organisation page.
    assert!(
        replaced <= 5,
        "{replaced} replaces for one new merge (of {} archive pages)",
        parts.len() + 1
    );
    // A person deletes the year page (its parts go with it).
    stub.trash(&year.0);
    put(&t, &entry("api", 1_001, "2024-06-02T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(120)).await;
    let new_year = stub
        .child_pages(&api_id)
        .into_iter()
        .find(|(_, title)| title.ends_with("· 2023"))
        .expect("published again");
    assert_ne!(new_year.0, year.0);
    let new_parts = stub.child_pages(&new_year.0);
    assert_eq!(new_parts.len(), parts.len());
    assert!(
        !stub.markdown(&new_year.0).contains("Chronicle is building"),
        "no placeholder left"
    );
    for (id, title) in &new_parts {
        let md = stub.markdown(id);
        assert!(
            md.contains("(#") && !md.contains("Chronicle is building"),
            "{title}: {md}"
        );
    }
}

/// Review defect 8: a builder that finds another one creating a page it needs (the index) tries
/// again later; that is not a failed build (no `lastError`, no `failedBuilds`, no alarm).
#[tokio::test]
async fn a_busy_create_claim_is_try_later_not_a_failed_build() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &entry("web", 2, "2024-06-02T10:00:00Z")).await;
    // Builder A creates the index page, and Notion takes 13 s to answer.
    stub.fault(Some("POST pages"), Fault::Delay(Duration::from_secs(13)));
    let slow = publisher_timed(
        &t,
        &stub,
        &parent,
        Arc::new(std::sync::Mutex::new(TOKEN.to_string())),
        Duration::from_secs(30),
    )
    .with_create_claim(Duration::from_secs(60));
    let a = Arc::new(builder(&t, Arc::new(slow)));
    let a_run = {
        let a = a.clone();
        tokio::spawn(async move { a.build(REPO, "api", "builder-a", within(40)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Builder B needs the same index page for `web`, and waits for it no longer than it may.
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    let report = tick(&b, 40).await;
    assert_eq!(report.failed, 0, "{report:?}");
    let web = t.pages.get(REPO, "web").await.unwrap().unwrap();
    assert_eq!(
        (
            web.last_error.as_deref(),
            web.advice.as_deref(),
            web.failed_builds
        ),
        (None, None, 0),
        "a busy create is not a failure"
    );
    assert!(web.stale.is_some(), "it stays stale and is built later");
    assert!(web.build_owner.is_none(), "its build lease was given back");
    a_run.await.unwrap().unwrap();
    settle(&b, &t, Duration::from_secs(60)).await;
    assert_eq!(stub.pages_titled(&format!("{REPO} · modules")).len(), 1);
    for module in ["api", "web"] {
        assert_eq!(stub.pages_titled(&module_title(module)).len(), 1);
    }
}

/// Review defect 1: someone removes the integration from the parent page's Connections. Every
/// call answers 404; that is lost access, not deleted pages: every record is kept, the build
/// fails with advice, and once access is back the same pages are updated, with no second tree.
#[tokio::test]
async fn lost_access_keeps_every_record_and_no_second_tree_is_made() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    over_the_years(&t, "api", 4).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let recorded = t.pages.get(REPO, "api").await.unwrap().unwrap().notion;
    let index_before = t
        .pages
        .get(REPO, INDEX_MODULE)
        .await
        .unwrap()
        .unwrap()
        .notion;
    let creates = stub.count("POST", "/v1/pages", "/v1/pages");

    stub.unshare(&parent);
    put(&t, &entry("api", 5, "2024-06-02T10:00:00Z")).await;
    let report = tick(&b, 60).await;
    assert_eq!(report.failed, 1, "{report:?}");
    let item = t.pages.get(REPO, "api").await.unwrap().unwrap();
    assert_eq!(item.notion, recorded, "every record kept");
    assert_eq!(
        t.pages
            .get(REPO, INDEX_MODULE)
            .await
            .unwrap()
            .unwrap()
            .notion,
        index_before
    );
    assert!(item.advice.unwrap().contains("Connections"));
    assert!(item.stale.is_some(), "built again later");

    stub.share(&parent);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    assert_eq!(
        stub.count("POST", "/v1/pages", "/v1/pages"),
        creates,
        "no page created again"
    );
    assert_eq!(stub.pages_titled(&format!("{REPO} · modules")).len(), 1);
    assert_eq!(stub.pages_titled(&module_title("api")).len(), 1);
    let (_, api) = page(&stub, "api");
    assert_eq!(entry_count(&api, 5), 1, "{api}");
}

/// Review defect 1, second half: a page whose record was forgotten (it looked gone) is looked
/// for by title before another is created, so one that is there after all is adopted.
#[tokio::test]
async fn a_forgotten_page_is_looked_for_before_another_is_created() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (api_id, _) = page(&stub, "api");
    // Its record is forgotten (as after a 404 that was not the page's fault).
    t.pages
        .forget_notion_page(REPO, "api", stages::pages::MAIN_LABEL, &api_id)
        .await
        .unwrap();
    t.pages
        .mark_full_rebuild(REPO, "api", OffsetDateTime::now_utc())
        .await
        .unwrap();
    let creates = stub.count("POST", "/v1/pages", "/v1/pages");
    settle(&b, &t, Duration::from_secs(60)).await;
    assert_eq!(stub.count("POST", "/v1/pages", "/v1/pages"), creates);
    assert_eq!(stub.pages_titled(&module_title("api")).len(), 1);
    let item = t.pages.get(REPO, "api").await.unwrap().unwrap();
    assert_eq!(
        item.notion[stages::pages::MAIN_LABEL].id.as_deref(),
        Some(api_id.as_str()),
        "adopted"
    );
}

/// Review defect 7: an archive page a person dragged into a toggle of its module page is no
/// longer in the module page's top-level listing, but it is there: it stays recorded (no
/// second copy), and the module page, which can no longer name it, waits with advice.
#[tokio::test]
async fn a_child_page_moved_into_a_toggle_stays_recorded_and_is_not_published_twice() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    over_the_years(&t, "api", 4).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (api_id, _) = page(&stub, "api");
    let archives = stub.child_pages(&api_id);
    assert!(!archives.is_empty());
    let (moved_id, moved_title) = archives[0].clone();
    stub.nest(&moved_id, true);
    let recorded = t.pages.get(REPO, "api").await.unwrap().unwrap().notion;

    put(&t, &entry("api", 5, "2024-06-02T10:00:00Z")).await;
    let report = tick(&b, 60).await;
    assert_eq!(report.failed, 1, "{report:?}");
    assert_eq!(
        stub.pages_titled(&moved_title).len(),
        1,
        "not published twice"
    );
    let item = t.pages.get(REPO, "api").await.unwrap().unwrap();
    assert_eq!(item.notion, recorded, "still recorded");
    assert!(item.advice.unwrap().contains("toggle"));

    // Moved back: the page is built, in place.
    stub.nest(&moved_id, false);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    assert_eq!(stub.pages_titled(&moved_title).len(), 1);
    let (same, api) = page(&stub, "api");
    assert_eq!(same, api_id);
    assert_eq!(entry_count(&api, 5), 1, "{api}");
}

/// Gives the row changed files, as enrichment would (its `enrichedAt` with them).
async fn with_files(t: &Tables, repo: &str, number: u64, path: &str) {
    use aws_sdk_dynamodb::types::AttributeValue;
    use stages::store::attr;
    let file = AttributeValue::M(
        [
            ("path", AttributeValue::S(path.to_string())),
            ("status", AttributeValue::S("modified".into())),
            ("additions", AttributeValue::N("12".into())),
            ("deletions", AttributeValue::N("3".into())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    );
    t.prs
        .client()
        .update_item()
        .table_name(t.prs.table_name())
        .set_key(Some(stages::store::key(
            &stages::domain::RepoName::parse(repo).unwrap(),
            number,
        )))
        .update_expression("SET #files = :files, #enriched = :now")
        .expression_attribute_names("#files", attr::FILES)
        .expression_attribute_names("#enriched", attr::ENRICHED_AT)
        .expression_attribute_values(":files", AttributeValue::L(vec![file]))
        .expression_attribute_values(":now", AttributeValue::S("2019-05-15T15:21:30.000Z".into()))
        .send()
        .await
        .unwrap();
}

/// Issue 38, defect 10: with GitHub slow, a PR is first summarized without its files (on the
/// module named after the repository, "Paths: not known"), then again with them (its entry
/// moves to its module). The repository-named module is then empty: its page is removed from
/// every publisher (the Markdown file and the S3 object deleted, the Notion page in the
/// trash), the index no longer lists it, the page item records it, and a later build makes no
/// page for it. A PR that lands on it again brings its page back.
#[tokio::test]
async fn an_empty_module_page_is_removed_everywhere_and_comes_back_with_an_entry() {
    use stages::publish::S3MarkdownPublisher;
    const HELLO: &str = "Codertocat/Hello-World";
    const NAMED: &str = "Codertocat__Hello-World";
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.without_rate_limit();
    let s3 = stages::publish::s3_client(&sdk);
    let bucket = format!("narratives-{}", uuid::Uuid::new_v4().simple());
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let dir =
        std::env::temp_dir().join(format!("chronicle-empty-{}", uuid::Uuid::new_v4().simple()));
    let b = builder(
        &t,
        Arc::new(Publishers(vec![
            Arc::new(MarkdownPublisher::new(&dir)),
            Arc::new(S3MarkdownPublisher::new(s3.clone(), &bucket, "narratives")),
            Arc::new(publisher(&t, &stub, &parent)),
        ])),
    );
    let summarizer = Arc::new(t.summarizer(ModulesConfig::empty(), 5));
    let summarize = |id: &'static str, number: u64| {
        let summarizer = &summarizer;
        async move {
            let r = summarizer
                .handle(
                    sqs_batch(vec![summarize_message(id, HELLO, number)]),
                    within(30),
                    id,
                )
                .await;
            assert!(r.batch_item_failures.is_empty(), "{r:?}");
        }
    };
    let merged = |number: u64| {
        let mut payload = merged_payload();
        payload["pull_request"]["number"] = serde_json::json!(number);
        payload
    };
    let in_s3 = |key: String| {
        let (s3, bucket) = (s3.clone(), bucket.clone());
        async move {
            s3.get_object()
                .bucket(&bucket)
                .key(format!("narratives/{key}"))
                .send()
                .await
                .is_ok()
        }
    };
    let named_file = format!("{HELLO}/{NAMED}.md");
    let index_file = format!("{HELLO}.md");
    let named_title = format!("{HELLO} · {HELLO}");
    let index_title = format!("{HELLO} · modules");
    // Summarized before its files arrived: on the repository-named module, whose page exists.
    store_merged(&t.prs, &merged(31), OffsetDateTime::now_utc()).await;
    summarize("m1", 31).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    assert!(dir.join(&named_file).exists(), "published first");
    assert!(in_s3(named_file.clone()).await);
    assert!(stub.live_page(&named_title).is_some());

    // Its files arrive: it moves to `src`, and the repository-named module is empty.
    with_files(&t, HELLO, 31, "src/lib.rs").await;
    let repo = stages::domain::RepoName::parse(HELLO).unwrap();
    t.prs
        .reprocess(&repo, 31, false, OffsetDateTime::now_utc())
        .await
        .unwrap();
    summarize("m2", 31).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    assert!(dir.join(format!("{HELLO}/src.md")).exists());
    assert!(
        !dir.join(&named_file).exists(),
        "the Markdown file is deleted"
    );
    assert!(!in_s3(named_file.clone()).await, "the S3 object is deleted");
    assert!(
        stub.live_page(&named_title).is_none(),
        "the Notion page is in the trash"
    );
    assert_eq!(
        stub.pages_titled(&named_title).len(),
        1,
        "trashed, not duplicated"
    );
    let index = std::fs::read_to_string(dir.join(&index_file)).unwrap();
    assert!(
        !index.contains(&named_title) && index.contains("1 module,"),
        "{index}"
    );
    let notion_index = stub.live_page(&index_title).expect("the index page");
    let notion_index = stub.markdown(&notion_index);
    assert!(!notion_index.contains(&named_title), "{notion_index}");
    let item = t.pages.get(HELLO, HELLO).await.unwrap().unwrap();
    assert_eq!(item.entry_count, 0);
    assert!(item.page_removed_at.is_some(), "recorded: {item:?}");
    assert!(item.notion.is_empty(), "{:?}", item.notion);

    // Built again with nothing on it: no page is made for it, nothing is created.
    let creates = stub.count("POST", "/v1/pages", "/v1/pages");
    t.pages
        .mark_full_rebuild(HELLO, HELLO, OffsetDateTime::now_utc())
        .await
        .unwrap();
    settle(&b, &t, Duration::from_secs(60)).await;
    assert!(!dir.join(&named_file).exists());
    assert!(!in_s3(named_file.clone()).await);
    assert_eq!(stub.count("POST", "/v1/pages", "/v1/pages"), creates);

    // Another PR lands there before its files: the page comes back everywhere.
    store_merged(&t.prs, &merged(32), OffsetDateTime::now_utc()).await;
    summarize("m3", 32).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    assert!(dir.join(&named_file).exists(), "back in Markdown");
    assert!(in_s3(named_file.clone()).await, "back in S3");
    assert!(stub.live_page(&named_title).is_some(), "back in Notion");
    let index = std::fs::read_to_string(dir.join(&index_file)).unwrap();
    assert!(index.contains(&named_title), "{index}");
    let item = t.pages.get(HELLO, HELLO).await.unwrap().unwrap();
    assert_eq!(item.page_removed_at, None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Markdown publisher that lands a PR on the module (as the summarize stage does) while the
/// build that found it empty is removing its page, once.
struct LandsDuringRemoval {
    markdown: MarkdownPublisher,
    tables: Tables,
    landing: ModuleEntry,
    landed: Arc<std::sync::atomic::AtomicBool>,
}

impl Publisher for LandsDuringRemoval {
    fn publish<'a>(
        &'a self,
        set: &'a stages::publish::PageSet<'a>,
    ) -> futures::future::BoxFuture<
        'a,
        Result<stages::publish::Published, stages::publish::PublishError>,
    > {
        Box::pin(async move {
            let removing = set.docs.is_empty() && set.item.module == self.landing.module.as_str();
            if removing && !self.landed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.tables.put_entry(&self.landing).await;
            }
            self.markdown.publish(set).await
        })
    }

    fn name(&self) -> &'static str {
        "markdown"
    }
}

/// Issue 38, defect 10, racing: a PR lands on a module while the build that found it empty
/// removes its page. That build completes with the page still stale, and the next one brings
/// the page back with the new entry; nothing is left removed.
#[tokio::test]
async fn a_pr_landing_while_an_empty_module_page_is_removed_brings_it_back() {
    let t = fresh_tables(&sdk().await).await;
    let dir =
        std::env::temp_dir().join(format!("chronicle-race-{}", uuid::Uuid::new_v4().simple()));
    let first = entry("web", 1, "2024-06-01T10:00:00Z");
    put(&t, &first).await;
    put(&t, &entry("api", 2, "2024-06-02T10:00:00Z")).await;
    let landed: Arc<std::sync::atomic::AtomicBool> = Default::default();
    let b = builder(
        &t,
        Arc::new(LandsDuringRemoval {
            markdown: MarkdownPublisher::new(&dir),
            tables: t.clone(),
            landing: entry("web", 9, "2024-06-09T10:00:00Z"),
            landed: landed.clone(),
        }),
    );
    settle(&b, &t, Duration::from_secs(60)).await;
    let page = dir.join(format!("{REPO}/web.md"));
    assert!(page.exists());
    // Its one PR moves away (rewritten on another module): `web` is empty.
    t.entries
        .delete(REPO, "web", &first.merged_at, first.number, 1)
        .await
        .unwrap();
    t.pages
        .mark_entries_stale(REPO, "web", &[first.order_key()], OffsetDateTime::now_utc())
        .await
        .unwrap();
    settle(&b, &t, Duration::from_secs(60)).await;
    assert!(
        landed.load(std::sync::atomic::Ordering::SeqCst),
        "the PR landed during the removal"
    );
    let markdown = std::fs::read_to_string(&page).expect("the page is back");
    assert!(markdown.contains("/pull/9)"), "{markdown}");
    assert!(!markdown.contains("/pull/1)"), "{markdown}");
    let item = t.pages.get(REPO, "web").await.unwrap().unwrap();
    assert_eq!((item.entry_count, item.page_removed_at), (1, None));
    let index = std::fs::read_to_string(dir.join(format!("{REPO}.md"))).unwrap();
    assert!(index.contains(&module_title("web")), "{index}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 38, review finding 12: a person trashed a module page by hand, and then the module
/// lost all its PRs. Its archive pages sit under a trashed parent, and Notion refuses to edit
/// them ("Can't edit block that is archived"): that answer means they are in the trash
/// already, so the build that removes the module's pages completes instead of failing at
/// every interval.
#[tokio::test]
async fn removing_pages_under_a_parent_trashed_by_hand_completes() {
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.without_rate_limit();
    over_the_years(&t, "web", 6).await;
    put(&t, &entry("api", 20, "2024-06-02T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (web_id, _) = page(&stub, "web");
    assert!(stub.child_pages(&web_id).len() >= 2);

    // A person deletes the module page (its archives with it); then every PR moves away.
    stub.trash(&web_id);
    let mut keys = Vec::new();
    for n in 0..6u64 {
        let at = stages::domain::parse_rfc3339("2024-06-01T10:00:00Z").unwrap()
            - time::Duration::days(200 * n as i64);
        let e = entry("web", 6 - n, &rfc3339_seconds(at));
        t.entries
            .delete(REPO, "web", &e.merged_at, e.number, 1)
            .await
            .unwrap();
        keys.push(e.order_key());
    }
    t.pages
        .mark_entries_stale(REPO, "web", &keys, OffsetDateTime::now_utc())
        .await
        .unwrap();
    settle(&b, &t, Duration::from_secs(60)).await;
    let item = t.pages.get(REPO, "web").await.unwrap().unwrap();
    assert!(item.page_removed_at.is_some(), "{item:?}");
    assert!(item.notion.is_empty(), "{:?}", item.notion);
    assert_eq!(item.failed_builds, 0);
    assert!(stub.live_page(&module_title("web")).is_none());
    assert!(stub.live_page(&module_title("api")).is_some());
}
