//! The hot module of `chronicle bench history`: one module with thousands of merged PRs in one
//! year, published to Notion (the strict stand-in). After its pages are built, new merges land
//! one at a time, each followed by one build of the module, as the page builder does when only
//! recent entries changed. Each build's DynamoDB items read and Notion requests are counted: a
//! build must read at most twice the entries its module page shows, and send Notion at most 3
//! requests, however big the year. For contrast, the cost of an edit of a recent PR (on the
//! module page) and of one whose entry is archived (its year is read again) is shown too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stages::builder::{BuildOutcome, PageBuilder};
use stages::domain::{rfc3339_seconds, FileChange, ModuleEntry};
use stages::notion::NotionClient;
use stages::publish::NotionPublisher;
use stages::secret::Secret;
use stages::store::{EntryStore, PageStore};
use stages::tagging::ModulesConfig;
use time::OffsetDateTime;

use devstack::template::{Template, ENTRIES_TABLE_ID, PAGES_TABLE_ID};
use standins::notion_standin::NotionStub;

const REPO: &str = "acme/monorepo";
const MODULE: &str = "hot";
const TOKEN: &str = "ntn_bench_hot";

/// The cost of one build.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildCost {
    pub reads: u64,
    pub notion_requests: u64,
    /// Entries on the module page after the build.
    pub on_page: u64,
}

/// What the hot module's run measured.
#[derive(Debug, Clone, Default)]
pub struct HotFigures {
    pub entries: usize,
    pub initial_seconds: f64,
    pub initial_requests: u64,
    pub merges: Vec<BuildCost>,
    pub recent_edit: BuildCost,
    pub archived_edit: BuildCost,
}

impl HotFigures {
    pub fn print(&self) {
        println!();
        println!(
            "hot module: {} merged PRs in one year, published to Notion (strict stand-in): first \
             build {:.0} s, {} Notion requests",
            self.entries, self.initial_seconds, self.initial_requests
        );
        println!(
            "{:<34} | {:>6} | {:>17} | {:>7} | {:>10} | {:>21}",
            "change", "builds", "reads/build", "on page", "2 × page", "Notion requests/build"
        );
        let row = |name: &str, costs: &[BuildCost]| {
            let stat = |f: &dyn Fn(&BuildCost) -> u64| {
                let mut v: Vec<u64> = costs.iter().map(f).collect();
                v.sort_unstable();
                (v[v.len() / 2], *v.last().unwrap_or(&0))
            };
            let (reads_median, reads_max) = stat(&|c| c.reads);
            let (requests_median, requests_max) = stat(&|c| c.notion_requests);
            let (on_page, _) = stat(&|c| c.on_page);
            let least_page = costs.iter().map(|c| c.on_page).min().unwrap_or(0);
            println!(
                "{:<34} | {:>6} | {:>6} (max {:>4}) | {:>7} | {:>10} | {:>8} (max {:>4})",
                name,
                costs.len(),
                reads_median,
                reads_max,
                on_page,
                2 * least_page,
                requests_median,
                requests_max
            );
        };
        row("a new merge (then one build)", &self.merges);
        row("a recent PR edited (on the page)", &[self.recent_edit]);
        row("an archived PR edited (its year)", &[self.archived_edit]);
    }

    /// Whether every new merge's build kept within the bounds.
    pub fn within_bounds(&self) -> bool {
        self.merges
            .iter()
            .all(|c| c.reads <= 2 * c.on_page && c.notion_requests <= 3)
    }
}

/// One entry of the hot module, merged at `at`: a realistic size (a summary paragraph, a few
/// files).
fn entry(number: u64, at: OffsetDateTime) -> ModuleEntry {
    let area = ["parser", "planner", "executor", "storage", "wire"][(number % 5) as usize];
    ModuleEntry {
        repo: REPO.into(),
        module: MODULE.into(),
        number,
        title: format!("Improve the {area} for case {number}"),
        url: format!("https://github.com/{REPO}/pull/{number}"),
        author: format!("dev{:02}", number % 23),
        merged_at: rfc3339_seconds(at),
        kind: Some(["feat", "fix", "refactor"][(number % 3) as usize].into()),
        breaking: false,
        labels: vec![],
        summary: format!(
            "Changes how the {area} handles case {number}, so that requests that used to wait \
             on a lock now go ahead; the old path stays for one release behind a flag."
        ),
        linked_issues: vec![],
        additions: 40 + number % 90,
        deletions: 10 + number % 30,
        files: (0..3)
            .map(|i| FileChange {
                path: format!("hot/src/{area}/{}.rs", (number + i) % 17),
                additions: 10 + (number + i) % 30,
                deletions: 3 + i,
                status: None,
            })
            .collect(),
        files_here: 3,
        lines_here: 0,
        elsewhere: vec![],
        files_elsewhere: 0,
        why: None,
        reviewers: vec![],
        discussion: 0,
    }
}

/// Builds the module until its page is no longer stale; the cost of the last build.
async fn build(
    builder: &PageBuilder,
    pages: &PageStore,
    client: &NotionClient,
    round: &str,
) -> anyhow::Result<BuildCost> {
    let reads = builder.reading().items_read;
    let requests = client.requests();
    let outcome = builder
        .build(
            REPO,
            MODULE,
            &format!("bench-hot-{round}"),
            Instant::now() + Duration::from_secs(600),
        )
        .await?;
    anyhow::ensure!(
        matches!(outcome, BuildOutcome::Built { .. }),
        "the hot module's build {round}: {outcome:?}"
    );
    let item = pages
        .get(REPO, MODULE)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no page item"))?;
    let archived: u64 = item.years.values().map(|y| y.archived).sum();
    Ok(BuildCost {
        reads: builder.reading().items_read - reads,
        notion_requests: client.requests() - requests,
        on_page: item.entry_count - archived,
    })
}

/// Runs the hot module: `entries` merges spread over most of one year, then `merges` more.
pub async fn run_hot(
    sdk: &aws_config::SdkConfig,
    entries: usize,
    merges: usize,
) -> anyhow::Result<HotFigures> {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let id = format!("hot-{}", std::process::id());
    let names = [
        (ENTRIES_TABLE_ID, format!("bench-entries-{id}")),
        (PAGES_TABLE_ID, format!("bench-pages-{id}")),
    ];
    Template::bundled()?.create_tables(&client, &names).await?;
    let store = EntryStore::new(client.clone(), names[0].1.clone());
    let pages = PageStore::new(client.clone(), names[1].1.clone());
    let year = OffsetDateTime::now_utc().year() - 1;
    let start = time::Date::from_ordinal_date(year, 1)?
        .midnight()
        .assume_utc();
    // Spread over 350 days: the new merges land in the same year.
    let step = time::Duration::seconds(350 * 86_400 / entries.max(1) as i64);
    let history: Vec<ModuleEntry> = (0..entries)
        .map(|i| entry(i as u64 + 1, start + step * i as i32))
        .collect();
    let items: Vec<stages::store::Item> = history
        .iter()
        .map(|e| store.item(e, 1))
        .collect::<Result<_, _>>()?;
    crate::webhook::write_items(&client, &names[0].1, items.into_iter()).await?;
    pages
        .mark_stale(REPO, MODULE, &[year], OffsetDateTime::now_utc())
        .await?;

    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.without_rate_limit();
    let notion = NotionClient::new(&stub.url(), Secret::new(TOKEN)).with_retry(
        3,
        Duration::from_millis(50),
        Duration::from_secs(20),
    );
    let publisher = NotionPublisher::new(notion.clone(), &parent, pages.clone());
    let builder = PageBuilder::new(
        store.clone(),
        pages.clone(),
        Arc::new(publisher),
        ModulesConfig::empty(),
        Duration::ZERO,
    );
    let started = Instant::now();
    let before = notion.requests();
    build(&builder, &pages, &notion, "initial").await?;
    let mut figures = HotFigures {
        entries,
        initial_seconds: started.elapsed().as_secs_f64(),
        initial_requests: notion.requests() - before,
        ..Default::default()
    };

    // New merges, one build after each: only recent entries changed.
    let mut last = history.last().map(|e| e.number).unwrap_or(0);
    let mut at = start + step * entries as i32;
    for round in 0..merges {
        last += 1;
        at += step;
        let e = entry(last, at);
        store.put(&e, 1).await?;
        pages
            .mark_entries_stale(REPO, MODULE, &[e.order_key()], OffsetDateTime::now_utc())
            .await?;
        figures
            .merges
            .push(build(&builder, &pages, &notion, &format!("merge-{round}")).await?);
    }
    // A recent PR's title edited: its entry rewritten in place.
    let mut edited = entry(last - 3, at - step * 3);
    edited.title.push_str(" (edited)");
    store.put(&edited, 2).await?;
    pages
        .mark_entries_stale(
            REPO,
            MODULE,
            &[edited.order_key()],
            OffsetDateTime::now_utc(),
        )
        .await?;
    figures.recent_edit = build(&builder, &pages, &notion, "recent-edit").await?;
    // An archived PR's entry rewritten (a reprocess): its year is read again.
    let mut archived = history[entries / 2].clone();
    archived.title.push_str(" (reprocessed)");
    store.put(&archived, 2).await?;
    pages
        .mark_entries_stale(
            REPO,
            MODULE,
            &[archived.order_key()],
            OffsetDateTime::now_utc(),
        )
        .await?;
    figures.archived_edit = build(&builder, &pages, &notion, "archived-edit").await?;

    stub.stop().await;
    for (_, name) in &names {
        let _ = client.delete_table().table_name(name).send().await;
    }
    Ok(figures)
}
