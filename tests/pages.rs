//! The page builder against the emulator: pages are views of the entries (byte-identical for the
//! same entries, whatever order they were written in), built at most once per interval during
//! a burst, bounded (a year on the module page, older entries in yearly archives), listed by
//! the repository index, and correct after races, crashes and failed builds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use stages::builder::{BuildOutcome, PageBuilder};
use stages::domain::{rfc3339_seconds, ModuleEntry};
use stages::publish::{MarkdownPublisher, PageSet, PublishError, Published, Publisher};
use stages::store::INDEX_MODULE;
use stages::tagging::ModulesConfig;
use support::*;
use time::OffsetDateTime;

const REPO: &str = "acme/monorepo";

fn entry(module: &str, number: u64, merged_at: &str) -> ModuleEntry {
    ModuleEntry {
        repo: REPO.into(),
        module: module.into(),
        number,
        title: format!("Change {number} to {module}"),
        url: format!("https://github.com/{REPO}/pull/{number}"),
        author: format!("dev{}", number % 4),
        merged_at: merged_at.into(),
        kind: Some(
            if number.is_multiple_of(3) {
                "fix"
            } else {
                "feat"
            }
            .into(),
        ),
        breaking: false,
        labels: vec![],
        summary: format!("What PR {number} did to {module}, and why."),
        linked_issues: vec![],
        additions: number,
        deletions: 1,
        files: vec![stages::domain::FileChange {
            path: format!("{module}/src/file{}.rs", number % 7),
            additions: number,
            deletions: 1,
            status: None,
        }],
        files_here: 1,
        lines_here: 0,
        elsewhere: vec![],
        files_elsewhere: 0,
        why: None,
        reviewers: vec![],
        discussion: 0,
    }
}

async fn put(t: &Tables, e: &ModuleEntry) {
    t.put_entry(e).await;
}

/// `count` merges of `module`, one every `step_days`, the newest at `newest`.
fn history(
    module: &str,
    first_number: u64,
    count: u64,
    newest: &str,
    step_days: i64,
) -> Vec<ModuleEntry> {
    let end = stages::domain::parse_rfc3339(newest).unwrap();
    (0..count)
        .map(|i| {
            let at = end - time::Duration::days(step_days * i as i64);
            entry(module, first_number + count - 1 - i, &rfc3339_seconds(at))
        })
        .collect()
}

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir =
            std::env::temp_dir().join(format!("chronicle-pages-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file under `dir`, relative, with its contents.
fn files(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    out
}

/// Delegates to a Markdown publisher, counting publishes per page item; can be told to fail,
/// wait, or hang (signalling `entered`) on its next publishes.
struct Recording {
    inner: MarkdownPublisher,
    builds: Mutex<BTreeMap<String, usize>>,
    steps: Mutex<Vec<Step>>,
    entered: tokio::sync::Notify,
}

#[derive(Clone, Copy)]
enum Step {
    Fail,
    Delay(Duration),
    Hang,
}

impl Recording {
    fn new(dir: &Path) -> Arc<Self> {
        Arc::new(Recording {
            inner: MarkdownPublisher::new(dir),
            builds: Mutex::default(),
            steps: Mutex::default(),
            entered: tokio::sync::Notify::new(),
        })
    }

    fn then(&self, step: Step) {
        self.steps.lock().unwrap().push(step);
    }

    fn builds(&self, module: &str) -> usize {
        self.builds
            .lock()
            .unwrap()
            .get(module)
            .copied()
            .unwrap_or(0)
    }
}

impl Publisher for Recording {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            let step = {
                let mut steps = self.steps.lock().unwrap();
                (!steps.is_empty()).then(|| steps.remove(0))
            };
            match step {
                Some(Step::Fail) => {
                    return Err(PublishError::Remote {
                        target: "the recorder".into(),
                        message: "the destination is down".into(),
                    })
                }
                Some(Step::Delay(d)) => tokio::time::sleep(d).await,
                Some(Step::Hang) => {
                    self.entered.notify_one();
                    futures::future::pending::<()>().await;
                }
                None => {}
            }
            let published = self.inner.publish(set).await?;
            *self
                .builds
                .lock()
                .unwrap()
                .entry(set.item.module.clone())
                .or_default() += 1;
            Ok(published)
        })
    }

    fn name(&self) -> &'static str {
        "recording"
    }
}

fn builder(t: &Tables, publisher: Arc<dyn Publisher>, interval: Duration) -> PageBuilder {
    t.builder(publisher, ModulesConfig::empty(), interval)
}

async fn tick(b: &PageBuilder) -> stages::builder::BuildReport {
    b.tick(
        OffsetDateTime::now_utc(),
        within(60),
        &format!("tick-{}", uuid::Uuid::new_v4().simple()),
    )
    .await
    .unwrap()
}

/// Ticks until no page is stale (or gives up after `limit`).
async fn settle(b: &PageBuilder, t: &Tables, limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        tick(b).await;
        if t.pages.stale_pages().await.unwrap().is_empty() {
            return;
        }
        assert!(Instant::now() < until, "pages still stale after {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn pages_are_a_pure_function_of_the_entries() {
    let sdk = sdk().await;
    let entries: Vec<ModuleEntry> = history("api", 1, 40, "2024-06-01T10:00:00Z", 20)
        .into_iter()
        .chain(history("web", 100, 5, "2024-05-01T10:00:00Z", 3))
        .collect();
    // Two histories with the same entries written in opposite orders, built in two directories.
    let mut outputs = Vec::new();
    for reversed in [false, true] {
        let t = fresh_tables(&sdk).await;
        let mut order = entries.clone();
        if reversed {
            order.reverse();
        }
        for e in &order {
            put(&t, e).await;
        }
        let dir = TempDir::new();
        let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
        settle(&b, &t, Duration::from_secs(90)).await;
        let first = files(&dir.0);
        // Built again with nothing changed: byte-identical.
        t.pages
            .mark_full_rebuild(REPO, "api", OffsetDateTime::now_utc())
            .await
            .unwrap();
        settle(&b, &t, Duration::from_secs(90)).await;
        assert_eq!(files(&dir.0), first);
        outputs.push(first);
    }
    assert_eq!(
        outputs[0], outputs[1],
        "the same entries give the same pages"
    );
    let out = &outputs[0];
    let names: Vec<&String> = out.keys().collect();
    assert_eq!(
        names,
        [
            // The organisation's index, then the repository's.
            "acme.md",
            "acme/monorepo.md",
            "acme/monorepo/api.md",
            "acme/monorepo/api/2022.md",
            "acme/monorepo/api/2023.md",
            "acme/monorepo/web.md"
        ]
    );
    let api = &out["acme/monorepo/api.md"];
    // A year back from the newest merge (2024-06-01): 19 entries a 20 days apart.
    assert_eq!(api.matches("\n### ").count(), 19, "{api}");
    assert!(
        api.contains("- [acme/monorepo · api · 2023](api/2023.md) — "),
        "{api}"
    );
    assert!(
        api.contains("40 merged pull requests, first merged 2022-04-13, latest 2024-06-01."),
        "{api}"
    );
    let index = &out["acme/monorepo.md"];
    assert!(
        index.contains(
            "- [acme/monorepo · api](monorepo/api.md) — 40 merged pull requests, latest 2024-06-01"
        ),
        "{index}"
    );
    assert!(
        index.contains("- [acme/monorepo · web](monorepo/web.md) — 5 merged pull requests"),
        "{index}"
    );
}

#[tokio::test]
async fn a_burst_builds_each_page_at_most_once_per_interval() {
    let t = fresh_tables(&sdk().await).await;
    let dir = TempDir::new();
    let recording = Recording::new(&dir.0);
    let interval = Duration::from_secs(2);
    let b = Arc::new(builder(&t, recording.clone(), interval));
    // A builder ticking every 200 ms while 40 PRs land on two modules over about 6 s.
    let ticking = {
        let b = b.clone();
        tokio::spawn(async move {
            loop {
                tick(&b).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let started = Instant::now();
    for i in 0..40u64 {
        let module = if i % 4 == 0 { "web" } else { "api" };
        put(
            &t,
            &entry(module, i + 1, &format!("2024-06-01T10:{:02}:00Z", i)),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let burst = started.elapsed();
    tokio::time::sleep(interval + Duration::from_millis(1_500)).await;
    ticking.abort();
    settle(&b, &t, Duration::from_secs(90)).await;
    let allowed = (burst.as_secs_f64() / interval.as_secs_f64()).floor() as usize + 2;
    for module in ["api", "web"] {
        let builds = recording.builds(module);
        println!("{module}: {builds} builds for a {burst:?} burst (interval {interval:?}, bound {allowed})");
        assert!(
            builds >= 2 && builds <= allowed,
            "{module}: {builds} builds, bound {allowed}"
        );
    }
    // Nothing lost: every entry is on its page once.
    let out = files(&dir.0);
    let api = &out["acme/monorepo/api.md"];
    assert_eq!(api.matches("\n### ").count(), 30, "{api}");
    for i in (0..40u64).filter(|i| i % 4 != 0) {
        assert_eq!(api.matches(&format!("(#{})\n", i + 1)).count(), 1);
    }
}

#[tokio::test]
async fn old_entries_go_to_yearly_archives_split_when_too_big() {
    let t = fresh_tables(&sdk().await).await;
    // About three a day through 2023 (too big for one page), then a quiet 2024.
    let end = stages::domain::parse_rfc3339("2023-12-31T20:00:00Z").unwrap();
    let mut all: Vec<ModuleEntry> = (0..1_200u64)
        .map(|i| {
            let at = end - time::Duration::minutes(i as i64 * 432);
            entry("core", 1_200 - i, &rfc3339_seconds(at))
        })
        .collect();
    all.extend(history("core", 10_000, 3, "2024-03-01T12:00:00Z", 30));
    // Written straight to the tables (the summarize stage's effects), in bulk.
    for chunk in all.chunks(64) {
        futures::future::join_all(chunk.iter().map(|e| t.entries.put(e, 1))).await;
    }
    for year in [2023, 2024] {
        t.pages
            .mark_stale(REPO, "core", &[year], OffsetDateTime::now_utc())
            .await
            .unwrap();
    }
    let dir = TempDir::new();
    let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
    settle(&b, &t, Duration::from_secs(120)).await;
    let out = files(&dir.0);
    let core = &out["acme/monorepo/core.md"];
    assert_eq!(
        core.matches("\n### ").count(),
        100,
        "a year, at most 100 entries"
    );
    assert!(out.contains_key("acme/monorepo/core/2023.md"));
    let year = &out["acme/monorepo/core/2023.md"];
    assert!(
        year.contains("](2023-p12.md)") && year.contains("](2023-p1.md)"),
        "the year links its parts: {year}"
    );
    let mut on_pages = 0;
    for (name, text) in &out {
        assert!(text.len() <= 150_000, "{name} is {} bytes", text.len());
        if name.starts_with("acme/monorepo/core") {
            on_pages += text.matches("\n### ").count();
        }
    }
    assert_eq!(on_pages, all.len(), "every entry on exactly one page");
    let item = t.pages.get(REPO, "core").await.unwrap().unwrap();
    assert_eq!(item.entry_count, all.len() as u64);
    assert_eq!(
        item.years["2023"].parts.len(),
        13,
        "the year and its 12 parts: {:?}",
        item.years["2023"].parts
    );
    // A new merge pushes the module page's oldest entry into 2023's newest part: the full
    // parts' files are left as they were (not written again), and the build reads the module
    // page's entries and that part's, not the year.
    let modified = |name: &str| {
        std::fs::metadata(dir.0.join(name))
            .unwrap()
            .modified()
            .unwrap()
    };
    let p1_before = modified("acme/monorepo/core/2023-p1.md");
    let p12_before = modified("acme/monorepo/core/2023-p12.md");
    tokio::time::sleep(Duration::from_millis(50)).await;
    put(&t, &entry("core", 20_000, "2024-03-02T12:00:00Z")).await;
    let report = tick(&b).await;
    assert_eq!(
        report.built, 3,
        "the module, the index and the organisation page: {report:?}"
    );
    assert!(
        report.items_read <= 2 * 100,
        "a build reads its page's entries and one part's, not the year: {report:?}"
    );
    assert_eq!(modified("acme/monorepo/core/2023-p1.md"), p1_before);
    assert_ne!(modified("acme/monorepo/core/2023-p12.md"), p12_before);
    let out = files(&dir.0);
    assert_eq!(
        out["acme/monorepo/core/2023-p12.md"]
            .matches("\n### ")
            .count(),
        4
    );
    let item = t.pages.get(REPO, "core").await.unwrap().unwrap();
    assert_eq!(item.entry_count, all.len() as u64 + 1);
}

#[tokio::test]
async fn a_build_reads_only_its_module_and_its_changed_years() {
    let t = fresh_tables(&sdk().await).await;
    for module in ["a", "b", "c"] {
        for e in history(module, 1, 150, "2024-06-01T10:00:00Z", 7) {
            assert!(t.entries.put(&e, 1).await.unwrap());
        }
        t.pages
            .mark_full_rebuild(REPO, module, OffsetDateTime::now_utc())
            .await
            .unwrap();
    }
    let dir = TempDir::new();
    let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
    settle(&b, &t, Duration::from_secs(60)).await;
    // One new PR in module a: the build reads a's newest entries and 2024 only.
    put(&t, &entry("a", 1_000, "2024-06-02T10:00:00Z")).await;
    let report = tick(&b).await;
    assert_eq!(
        report.built, 3,
        "module a, the index and the organisation page: {report:?}"
    );
    let in_2024 = t.entries.year(REPO, "a", 2024).await.unwrap().len() as u64;
    println!(
        "items read for one build: {} (newest 100 + {in_2024} of 2024 + page items)",
        report.items_read
    );
    assert!(report.items_read <= 100 + in_2024 + 10, "{report:?}");
}

#[tokio::test]
async fn two_builders_racing_leave_one_correct_page() {
    let t = fresh_tables(&sdk().await).await;
    let dir = TempDir::new();
    for e in history("api", 1, 10, "2024-06-01T10:00:00Z", 1) {
        put(&t, &e).await;
    }
    // Builder A's publish outlasts its 2 s lease; builder B takes the page over meanwhile, and
    // a new entry lands while A is still writing.
    let slow = Recording::new(&dir.0);
    slow.then(Step::Delay(Duration::from_millis(3_000)));
    let a = Arc::new(builder(&t, slow.clone(), Duration::ZERO));
    let a_run = {
        let a = a.clone();
        tokio::spawn(async move {
            a.tick(OffsetDateTime::now_utc(), within(2), "builder-a")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    put(&t, &entry("api", 11, "2024-06-02T10:00:00Z")).await;
    let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
    tick(&b).await;
    let a_report = a_run.await.unwrap().unwrap();
    assert!(
        a_report.held >= 1,
        "A lost its lease while publishing: {a_report:?}"
    );
    settle(&b, &t, Duration::from_secs(90)).await;
    let api = &files(&dir.0)["acme/monorepo/api.md"];
    for n in 1..=11 {
        assert_eq!(api.matches(&format!("(#{n})\n")).count(), 1, "#{n}: {api}");
    }
}

#[tokio::test]
async fn a_builder_killed_mid_build_is_followed_by_a_correct_page() {
    let t = fresh_tables(&sdk().await).await;
    let dir = TempDir::new();
    for e in history("api", 1, 5, "2024-06-01T10:00:00Z", 1) {
        put(&t, &e).await;
    }
    let hanging = Recording::new(&dir.0);
    hanging.then(Step::Hang);
    let doomed = Arc::new(builder(&t, hanging.clone(), Duration::ZERO));
    let run = {
        let doomed = doomed.clone();
        tokio::spawn(async move {
            doomed
                .tick(OffsetDateTime::now_utc(), within(2), "doomed")
                .await
        })
    };
    hanging.entered.notified().await;
    run.abort();
    let _ = run.await;
    assert!(!files(&dir.0).contains_key("acme/monorepo/api.md"));
    let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
    let held = tick(&b).await;
    assert_eq!(
        held.held, 1,
        "the dead builder's lease holds until it expires: {held:?}"
    );
    assert!(!files(&dir.0).contains_key("acme/monorepo/api.md"));
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    settle(&b, &t, Duration::from_secs(90)).await;
    let api = &files(&dir.0)["acme/monorepo/api.md"];
    assert_eq!(api.matches("\n### ").count(), 5);
}

#[tokio::test]
async fn a_failed_build_is_recorded_on_the_page_and_retried_after_the_interval() {
    let t = fresh_tables(&sdk().await).await;
    let dir = TempDir::new();
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let recording = Recording::new(&dir.0);
    recording.then(Step::Fail);
    let b = builder(&t, recording.clone(), Duration::from_secs(1));
    let report = tick(&b).await;
    assert_eq!(report.failed, 1, "{report:?}");
    let item = t.pages.get(REPO, "api").await.unwrap().unwrap();
    assert!(item
        .last_error
        .as_deref()
        .unwrap()
        .contains("the destination is down"));
    assert_eq!(item.failed_builds, 1);
    assert!(item.stale.is_some(), "still stale: it is built again");
    tick(&b).await;
    assert_eq!(recording.builds("api"), 0, "not before the interval");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    settle(&b, &t, Duration::from_secs(90)).await;
    let item = t.pages.get(REPO, "api").await.unwrap().unwrap();
    assert!(item.last_error.is_none() && item.failed_builds == 0);
    assert_eq!(recording.builds("api"), 1);
}

#[tokio::test]
async fn s3_pages_are_replaced_whole_and_removed_archives_deleted() {
    use stages::publish::S3MarkdownPublisher;
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let s3 = stages::publish::s3_client(&sdk);
    let bucket = format!("narratives-{}", uuid::Uuid::new_v4().simple());
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    for e in history("api", 1, 3, "2024-06-01T10:00:00Z", 200) {
        put(&t, &e).await;
    }
    let b = builder(
        &t,
        Arc::new(S3MarkdownPublisher::new(s3.clone(), &bucket, "narratives")),
        Duration::ZERO,
    );
    settle(&b, &t, Duration::from_secs(90)).await;
    let read = |key: &'static str| {
        let s3 = s3.clone();
        let bucket = bucket.clone();
        async move {
            let object = s3.get_object().bucket(&bucket).key(key).send().await.ok()?;
            Some(
                String::from_utf8(object.body.collect().await.unwrap().into_bytes().to_vec())
                    .unwrap(),
            )
        }
    };
    let page = read("narratives/acme/monorepo/api.md").await.unwrap();
    assert!(page.starts_with("# acme/monorepo · api\n"), "{page}");
    assert!(read("narratives/acme/monorepo/api/2023.md").await.is_some());
    // A newer entry pushes nothing out, but deleting the 2023 entry empties its archive.
    let old = t
        .module_entries(REPO, "api")
        .await
        .into_iter()
        .find(|e| e.merged_at.starts_with("2023-04"))
        .unwrap();
    t.entries
        .delete(REPO, "api", &old.merged_at, old.number, 1)
        .await
        .unwrap();
    t.pages
        .mark_stale(REPO, "api", &[2023], OffsetDateTime::now_utc())
        .await
        .unwrap();
    settle(&b, &t, Duration::from_secs(90)).await;
    assert!(
        read("narratives/acme/monorepo/api/2023.md").await.is_none(),
        "the emptied archive is deleted"
    );
    let again = read("narratives/acme/monorepo/api.md").await.unwrap();
    assert_eq!(again.matches("\n### ").count(), 2);
    assert!(read("narratives/acme/monorepo.md")
        .await
        .unwrap()
        .contains("2 merged pull requests"));
}

#[tokio::test]
async fn the_index_is_built_once_its_modules_are() {
    let t = fresh_tables(&sdk().await).await;
    let dir = TempDir::new();
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
    let report = tick(&b).await;
    assert_eq!(
        report.built, 3,
        "the module, then its repository's index, then its owner's: {report:?}"
    );
    let index = t.pages.get(REPO, INDEX_MODULE).await.unwrap().unwrap();
    assert!(index.stale.is_none());
    assert!(files(&dir.0)["acme/monorepo.md"].contains("1 module, 1 merged pull request"));
}

/// Review defect 5: builds after merges one at a time (only recent entries changed) append to
/// the archive without reading its years, and give exactly the pages a full rebuild of the same
/// entries gives. Each reads at most twice the entries its module page shows.
#[tokio::test]
async fn builds_after_each_merge_equal_a_full_rebuild_and_read_only_recent_entries() {
    let t = fresh_tables(&sdk().await).await;
    let start = stages::domain::parse_rfc3339("2023-01-01T09:00:00Z").unwrap();
    let at = |i: u64| rfc3339_seconds(start + time::Duration::hours(40 * i as i64));
    for i in 0..160u64 {
        put(&t, &entry("busy", i + 1, &at(i))).await;
    }
    let dir = TempDir::new();
    let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
    settle(&b, &t, Duration::from_secs(90)).await;
    // Merges one at a time, across the end of 2023, each followed by a build.
    for i in 160..290u64 {
        put(&t, &entry("busy", i + 1, &at(i))).await;
        let before = b.reading().items_read;
        let outcome = b
            .build(REPO, "busy", &format!("b-{i}"), within(60))
            .await
            .unwrap();
        assert!(matches!(outcome, BuildOutcome::Built { .. }), "{outcome:?}");
        let read = b.reading().items_read - before;
        let item = t.pages.get(REPO, "busy").await.unwrap().unwrap();
        let on_page = item.entry_count - item.years.values().map(|y| y.archived).sum::<u64>();
        assert!(
            read <= 2 * on_page,
            "merge {i}: read {read} for a page of {on_page}"
        );
    }
    settle(&b, &t, Duration::from_secs(90)).await;
    let appended = files(&dir.0);
    let item = t.pages.get(REPO, "busy").await.unwrap().unwrap();
    assert!(
        item.years["2023"].parts.len() > 2,
        "2023 is in parts: {:?}",
        item.years["2023"].parts
    );
    t.pages
        .mark_full_rebuild(REPO, "busy", OffsetDateTime::now_utc())
        .await
        .unwrap();
    settle(&b, &t, Duration::from_secs(90)).await;
    let rebuilt = files(&dir.0);
    assert_eq!(
        appended.keys().collect::<Vec<_>>(),
        rebuilt.keys().collect::<Vec<_>>()
    );
    for (name, text) in &rebuilt {
        assert_eq!(&appended[name], text, "{name}");
    }
    let again = t.pages.get(REPO, "busy").await.unwrap().unwrap();
    assert_eq!(again.years, item.years, "the same figures");
}

/// A quiet module's page is held by its one-year window (about 52 weekly merges), not by the
/// 100-entry cap: a build after a merge reads the page's entries and the archive's open part,
/// not the years before.
#[tokio::test]
async fn a_quiet_module_builds_from_its_recent_entries_too() {
    let t = fresh_tables(&sdk().await).await;
    let start = stages::domain::parse_rfc3339("2021-01-04T09:00:00Z").unwrap();
    let at = |i: u64| rfc3339_seconds(start + time::Duration::days(7 * i as i64));
    for i in 0..156u64 {
        put(&t, &entry("quiet", i + 1, &at(i))).await;
    }
    let dir = TempDir::new();
    let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
    settle(&b, &t, Duration::from_secs(90)).await;
    for i in 156..166u64 {
        put(&t, &entry("quiet", i + 1, &at(i))).await;
        let before = b.reading().items_read;
        let outcome = b
            .build(REPO, "quiet", &format!("q-{i}"), within(60))
            .await
            .unwrap();
        assert!(matches!(outcome, BuildOutcome::Built { .. }), "{outcome:?}");
        let read = b.reading().items_read - before;
        let item = t.pages.get(REPO, "quiet").await.unwrap().unwrap();
        let on_page = item.entry_count - item.years.values().map(|y| y.archived).sum::<u64>();
        assert!(on_page < 60, "held by the window: {on_page}");
        assert!(
            read <= 2 * on_page,
            "merge {i}: read {read} for a page of {on_page}"
        );
    }
}

/// Publishes like Markdown, but while its first organisation index is being written another
/// repository's build records its row (after this build read the rows): as when two builds
/// of one owner overlap and the one that read first publishes last.
struct Overtaken {
    inner: MarkdownPublisher,
    pages: stages::store::PageStore,
    other: Mutex<Option<stages::domain::OrgRepo>>,
    org_publishes: Mutex<usize>,
}

impl Publisher for Overtaken {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        self.inner.publish(set)
    }

    fn name(&self) -> &'static str {
        "overtaken"
    }

    fn publishes_org(&self) -> bool {
        true
    }

    fn publish_org<'a>(
        &'a self,
        set: &'a stages::publish::OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            *self.org_publishes.lock().unwrap() += 1;
            let other = self.other.lock().unwrap().take();
            if let Some(row) = other {
                // As an index build does: the row, then the page marked to be built.
                self.pages.put_org_repo(set.org, &row).await.unwrap();
                self.pages
                    .mark_org_stale(set.org, false, OffsetDateTime::now_utc())
                    .await
                    .unwrap();
            }
            self.inner.publish_org(set).await
        })
    }
}

#[tokio::test]
async fn an_organisation_index_published_from_rows_read_before_another_build_is_published_again() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let dir = TempDir::new();
    let module = |name: &str, n: u64| stages::domain::OrgModule {
        module: name.into(),
        entry_count: n,
        latest_merged_at: Some("2026-01-02T00:00:00Z".into()),
        authors: vec!["octo".into()],
        notion_url: None,
    };
    let publisher = Arc::new(Overtaken {
        inner: MarkdownPublisher::new(&dir.0),
        pages: t.pages.clone(),
        other: Mutex::new(Some(stages::pages::org::org_row(
            "acme/web",
            vec![module("ui", 4)],
        ))),
        org_publishes: Mutex::new(0),
    });
    t.put_entry(&entry("api", 1, "2025-06-01T10:00:00Z")).await;
    let b = builder(&t, publisher.clone(), Duration::ZERO);
    for _ in 0..4 {
        b.tick(OffsetDateTime::now_utc(), within(60), "tick")
            .await
            .unwrap();
    }
    let org = std::fs::read_to_string(dir.0.join("acme.md")).unwrap();
    assert!(
        org.contains("### [acme/web]"),
        "the later row is on the page:\n{org}"
    );
    assert!(org.contains("### [acme/monorepo]"), "{org}");
    assert!(*publisher.org_publishes.lock().unwrap() >= 2);
}

/// A repository's row on its owner's index stays bounded, whatever its modules and people.
#[test]
fn an_organisation_row_is_bounded() {
    let modules: Vec<stages::domain::OrgModule> = (0..3_000)
        .map(|i| stages::domain::OrgModule {
            module: format!("packages/p{i:04}"),
            entry_count: 2,
            latest_merged_at: Some(format!("2026-01-01T00:{:02}:{:02}Z", i / 60 % 60, i % 60)),
            authors: vec![format!("dev{i}"), "octo".into(), format!("dev{}", i + 1)],
            notion_url: None,
        })
        .collect();
    let row = stages::pages::org::org_row("acme/mono", modules);
    assert_eq!((row.module_count, row.entry_count), (3_000, 6_000));
    assert_eq!(row.modules.len(), stages::pages::org::MAX_MODULES_SHOWN);
    assert_eq!(row.people.len(), stages::pages::org::MAX_PEOPLE_KEPT);
    assert_eq!(
        (row.people[0].login.as_str(), row.people[0].modules),
        ("octo", 3_000)
    );
    let bytes = serde_json::to_vec(&row).unwrap().len();
    assert!(bytes < 8_000, "{bytes} bytes");
    let page = stages::pages::org::org_page("acme", &[row]);
    assert!(
        page.contains("3000 modules, 6000 merged pull requests"),
        "{page}"
    );
    assert!(page.contains("and 2988 more"), "{page}");
}

/// A Markdown publisher that counts its organisation page's publishes; `org: false`: one that
/// keeps no organisation page (what a tick reads without one).
struct OrgCounting {
    inner: MarkdownPublisher,
    org: bool,
    publishes: Mutex<usize>,
}

impl Publisher for OrgCounting {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        self.inner.publish(set)
    }

    fn name(&self) -> &'static str {
        "org-counting"
    }

    fn publishes_org(&self) -> bool {
        self.org
    }

    fn publish_org<'a>(
        &'a self,
        set: &'a stages::publish::OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        *self.publishes.lock().unwrap() += 1;
        self.inner.publish_org(set)
    }
}

/// A mass rebuild (a merge in each of 50 repositories of one owner, built in one tick) reads
/// the owner's rows and publishes its organisation page once, after the indexes: not once per
/// repository, each reading every row (a cost in the square of the repositories).
#[tokio::test]
async fn fifty_repositories_rebuilt_in_one_tick_publish_their_organisation_page_once() {
    const REPOS: u64 = 50;
    let sdk = sdk().await;
    let merge = |i: u64, number: u64| {
        let repo = format!("acme/r{i:02}");
        let mut e = entry("core", number, &format!("2025-0{number}-01T10:{i:02}:00Z"));
        e.url = format!("https://github.com/{repo}/pull/{number}");
        e.repo = repo;
        e
    };
    let mut reads = Vec::new();
    for org in [false, true] {
        let t = fresh_tables(&sdk).await;
        let dir = TempDir::new();
        let publisher = Arc::new(OrgCounting {
            inner: MarkdownPublisher::new(&dir.0),
            org,
            publishes: Mutex::new(0),
        });
        let b = builder(&t, publisher.clone(), Duration::ZERO);
        for i in 0..REPOS {
            put(&t, &merge(i, 1)).await;
        }
        settle(&b, &t, Duration::from_secs(120)).await;
        for i in 0..REPOS {
            put(&t, &merge(i, 2)).await;
        }
        let before = *publisher.publishes.lock().unwrap();
        let report = b
            .tick(OffsetDateTime::now_utc(), within(120), "mass-rebuild")
            .await
            .unwrap();
        assert!(
            t.pages.stale_pages().await.unwrap().is_empty(),
            "one tick: {report:?}"
        );
        let publishes = *publisher.publishes.lock().unwrap() - before;
        eprintln!(
            "organisation page {org}: {publishes} publishes, {} items read",
            report.items_read
        );
        reads.push(report.items_read);
        if org {
            assert_eq!(publishes, 1, "{report:?}");
            let page = std::fs::read_to_string(dir.0.join("acme.md")).unwrap();
            for i in 0..REPOS {
                assert!(page.contains(&format!("acme/r{i:02}")), "{page}");
            }
            assert!(page.contains("2 merged pull requests"), "{page}");
        }
    }
    // The organisation page's reads: its rows, once (no index build reads its own item again
    // for a Notion page a Markdown publisher never has).
    let org_reads = reads[1] - reads[0];
    assert!(
        org_reads <= REPOS + 5,
        "{org_reads} items read for it: {reads:?}"
    );
}

/// A Markdown publisher whose organisation page always fails (as a full disk would).
struct OrgFailing(MarkdownPublisher);

impl Publisher for OrgFailing {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        self.0.publish(set)
    }

    fn name(&self) -> &'static str {
        "org-failing"
    }

    fn publishes_org(&self) -> bool {
        true
    }

    fn publish_org<'a>(
        &'a self,
        _set: &'a stages::publish::OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async {
            Err(PublishError::Io {
                path: "acme.md".into(),
                message: "No space left on device".into(),
            })
        })
    }
}

/// A tick's report counts the organisation page like every page: built when it is built, and
/// once (not twice) when it waits out the back-off of its failure while its repositories are
/// built.
#[tokio::test]
async fn a_tick_counts_the_organisation_page_once_built_failed_or_held() {
    let t = fresh_tables(&sdk().await).await;
    let dir = TempDir::new();
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(MarkdownPublisher::new(&dir.0)), Duration::ZERO);
    let report = tick(&b).await;
    assert_eq!(
        (report.built, report.failed),
        (3, 0),
        "the module, the index, the organisation page: {report:?}"
    );

    let t = fresh_tables(&sdk().await).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(
        &t,
        Arc::new(OrgFailing(MarkdownPublisher::new(&dir.0))),
        Duration::ZERO,
    );
    let report = tick(&b).await;
    assert_eq!((report.built, report.failed), (2, 1), "{report:?}");
    put(&t, &entry("api", 2, "2024-07-01T10:00:00Z")).await;
    let report = tick(&b).await;
    assert_eq!(
        (report.built, report.failed, report.held),
        (2, 0, 1),
        "the organisation page waits, counted once: {report:?}"
    );
}

/// A publisher whose repository pages take a while (a large rebuild's pages), counting its
/// organisation page's publishes.
struct Slow(OrgCounting);

impl Publisher for Slow {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            self.0.publish(set).await
        })
    }

    fn name(&self) -> &'static str {
        "slow"
    }

    fn publishes_org(&self) -> bool {
        true
    }

    fn publish_org<'a>(
        &'a self,
        set: &'a stages::publish::OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        self.0.publish_org(set)
    }
}

/// An organisation page stale for long is built first in a tick: a large rebuild whose
/// repository pages take every tick's time never starves it.
#[tokio::test]
async fn an_organisation_page_stale_for_long_is_built_before_the_repositories() {
    let t = fresh_tables(&sdk().await).await;
    let dir = TempDir::new();
    for (number, module) in ["a", "b", "c", "d"].into_iter().enumerate() {
        put(
            &t,
            &entry(module, number as u64 + 1, "2024-06-01T10:00:00Z"),
        )
        .await;
    }
    let an_hour_ago = OffsetDateTime::now_utc() - time::Duration::hours(1);
    t.pages
        .mark_org_stale("acme", false, an_hour_ago)
        .await
        .unwrap();
    let publisher = Arc::new(Slow(OrgCounting {
        inner: MarkdownPublisher::new(&dir.0),
        org: true,
        publishes: Mutex::new(0),
    }));
    let b = builder(&t, publisher.clone(), Duration::ZERO)
        .with_concurrency(1)
        .with_deadline_margin(Duration::from_secs(10));
    // Time for a module page or two before the deadline's margin (10 s).
    let report = b
        .tick(
            OffsetDateTime::now_utc(),
            Instant::now() + Duration::from_secs(12),
            "short-tick",
        )
        .await
        .unwrap();
    assert!(report.too_soon > 0, "the time ran out: {report:?}");
    assert_eq!(
        *publisher.0.publishes.lock().unwrap(),
        1,
        "built first: {report:?}"
    );
}
