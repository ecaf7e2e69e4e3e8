//! `chronicle bench history`: what one PR and one page build cost as a repository's history
//! grows. For each history size it loads a synthetic history (already summarized, its pages
//! built) into the emulator, then puts the last PRs through the real pipeline code: stored as
//! the webhook stores them, enriched as the enrich stage writes them, summarized by the summarize
//! handler, while the page builder ticks. It counts the work (DynamoDB items read and requests,
//! page builds per module) as well as timing it: the emulator scans its whole table on every
//! Query, so its times grow with the table even where DynamoDB's do not.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_dynamodb::types::AttributeValue;
use futures::future::BoxFuture;
use stages::builder::PageBuilder;
use stages::config::TableConfig;
use stages::domain::{rfc3339_millis, rfc3339_seconds, Delivery, RepoName};
use stages::publish::{MarkdownPublisher, PageSet, PublishError, Published, Publisher};
use stages::store::{attr, new_item, EntryStore, Item, Meter, PageStore, PrRow, PrStore};
use stages::summarize::SummarizeHandler;
use stages::tagging::{tag_modules, ModulesConfig};
use time::OffsetDateTime;

use devstack::template::{Template, ENTRIES_TABLE_ID, PAGES_TABLE_ID, PR_TABLE};
use standins::synthetic::{history, HistorySpec, SyntheticPr};

const REPO: &str = "acme/monorepo";

#[derive(Debug, Clone)]
pub struct HistoryOptions {
    pub sizes: Vec<usize>,
    pub modules: usize,
    /// PRs put through the pipeline at the end of each history.
    pub measured: usize,
    /// The page builder's rebuild interval during the measured burst.
    pub rebuild: Duration,
    /// The builder ticks this often during the burst.
    pub tick: Duration,
    /// The hot module's merged PRs in one year (0: not run), and the new merges after them.
    pub hot: usize,
    pub hot_merges: usize,
}

/// The figures of one history size.
#[derive(Debug, Clone, Default)]
pub struct HistoryFigures {
    pub prs: usize,
    pub measured: usize,
    pub load_seconds: f64,
    pub items_read_per_pr: f64,
    pub writes_per_pr: f64,
    pub ms_per_message: f64,
    pub builds: usize,
    pub items_read_per_build: f64,
    pub ms_per_build: f64,
    pub max_builds_per_module: usize,
    pub burst_seconds: f64,
    pub build_bound: usize,
    pub builder_peak_bytes: usize,
}

pub async fn run_history(options: HistoryOptions) -> anyhow::Result<()> {
    let (_emulator, endpoint) = devstack::emulator::from_env_or_start().await?;
    let sdk = ops::stack::local_sdk_config(&endpoint).await;
    println!(
        "bench history: {} modules, the last {} PRs through the pipeline, rebuild interval {:?}, builder tick {:?}",
        options.modules, options.measured, options.rebuild, options.tick
    );
    let mut all = Vec::new();
    for &size in &options.sizes {
        let figures = one_size(&sdk, size, &options).await?;
        print_row(&figures);
        all.push(figures);
    }
    println!();
    print_header();
    for f in &all {
        print_row(f);
    }
    if let (Some(first), Some(last)) = (all.first(), all.last()) {
        println!();
        println!(
            "ratio {}/{} PRs: items read per summarized PR {:.2}, per page build {:.2}, ms per message {:.2}",
            last.prs,
            first.prs,
            last.items_read_per_pr / first.items_read_per_pr.max(f64::MIN_POSITIVE),
            last.items_read_per_build / first.items_read_per_build.max(f64::MIN_POSITIVE),
            last.ms_per_message / first.ms_per_message.max(f64::MIN_POSITIVE),
        );
    }
    if options.hot > 0 {
        let hot = crate::hot::run_hot(&sdk, options.hot, options.hot_merges).await?;
        hot.print();
        anyhow::ensure!(
            hot.within_bounds(),
            "a build after a new merge read more than twice its page's entries or sent Notion more than 3 requests"
        );
    }
    Ok(())
}

fn print_header() {
    println!(
        "{:>7} | {:>9} {:>9} {:>8} | {:>6} {:>10} {:>9} | {:>13} | {:>9} | {:>6}",
        "PRs",
        "reads/PR",
        "writes/PR",
        "ms/msg",
        "builds",
        "reads/build",
        "ms/build",
        "builds/module",
        "peak heap",
        "load s"
    );
}

fn print_row(f: &HistoryFigures) {
    println!(
        "{:>7} | {:>9.2} {:>9.2} {:>8.1} | {:>6} {:>10.1} {:>9.1} | {:>6} (≤ {:>3}) | {:>7.1}MB | {:>6.0}",
        f.prs,
        f.items_read_per_pr,
        f.writes_per_pr,
        f.ms_per_message,
        f.builds,
        f.items_read_per_build,
        f.ms_per_build,
        f.max_builds_per_module,
        f.build_bound,
        f.builder_peak_bytes as f64 / 1_048_576.0,
        f.load_seconds,
    );
}

/// Counts builds per module, publishing Markdown to a scratch directory.
struct Counting {
    inner: MarkdownPublisher,
    builds: Mutex<BTreeMap<String, usize>>,
}

impl Publisher for Counting {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            let out = self.inner.publish(set).await?;
            *self
                .builds
                .lock()
                .unwrap()
                .entry(set.item.module.clone())
                .or_default() += 1;
            Ok(out)
        })
    }

    fn name(&self) -> &'static str {
        "counting"
    }
}

async fn one_size(
    sdk: &aws_config::SdkConfig,
    size: usize,
    options: &HistoryOptions,
) -> anyhow::Result<HistoryFigures> {
    let started = Instant::now();
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let id = format!("{size}-{}", std::process::id());
    let names = [
        (PR_TABLE, format!("bench-prs-{id}")),
        (ENTRIES_TABLE_ID, format!("bench-entries-{id}")),
        (PAGES_TABLE_ID, format!("bench-pages-{id}")),
    ];
    Template::bundled()?.create_tables(&client, &names).await?;
    let table = TableConfig {
        table_name: names[0].1.clone(),
        pending_shards: 4,
    };
    let meter = Meter::default();
    let prs = PrStore::new(client.clone(), table).with_meter(meter.clone());
    let entries = EntryStore::new(client.clone(), names[1].1.clone()).with_meter(meter.clone());
    let pages = PageStore::new(client.clone(), names[2].1.clone()).with_meter(meter.clone());
    let spec = HistorySpec {
        prs: size,
        modules: options.modules,
        per_day: 6.0,
        seed: 20_261_203,
        end: OffsetDateTime::now_utc() - time::Duration::days(1),
    };
    let history = history(&spec);
    let repo = RepoName::parse(REPO)?;
    let modules = ModulesConfig::empty();
    let split = size.saturating_sub(options.measured);

    // The history before: summarized rows and their entries, written in bulk.
    let years = load_before(&client, &names, &entries, &history[..split], &modules).await?;
    let scratch = std::env::temp_dir().join(format!("chronicle-bench-history-{id}"));
    let counting = Arc::new(Counting {
        inner: MarkdownPublisher::new(&scratch),
        builds: Mutex::default(),
    });
    // The pages of the history, built once (what a backfill ends with).
    build_all(&entries, &pages, counting.clone(), &modules, &years).await?;
    let load_seconds = started.elapsed().as_secs_f64();
    counting.builds.lock().unwrap().clear();

    // The last PRs: stored and enriched as the pipeline does, summarized one message at a time
    // while the builder ticks.
    store_merged(&prs, &repo, &history[split..]).await?;
    let handler = Arc::new(SummarizeHandler::new(
        prs.clone(),
        entries.clone(),
        pages.clone(),
        modules.clone(),
        5,
    ));
    let builder = Arc::new(
        PageBuilder::new(
            entries.clone(),
            pages.clone(),
            counting.clone(),
            modules.clone(),
            options.rebuild,
        )
        .with_concurrency(2),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticking = tick_until(builder.clone(), stop.clone(), options.tick);
    let burst = Instant::now();
    let (per_message, reads, writes) = summarize_each(&handler, &meter, &history[split..]).await?;
    let burst_seconds = burst.elapsed().as_secs_f64();
    // Let the builder finish the burst's pages, then stop it.
    let drain = Instant::now() + options.rebuild * 3 + Duration::from_secs(120);
    while Instant::now() < drain && !pages.stale_pages().await?.is_empty() {
        tokio::time::sleep(options.tick).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reports = ticking.await?;
    let builds: usize = reports.iter().map(|(r, _)| r.built).sum();
    let build_reads: u64 = reports.iter().map(|(r, _)| r.items_read).sum();
    let build_ms: f64 = reports
        .iter()
        .filter(|(r, _)| r.built > 0)
        .map(|(_, d)| d.as_secs_f64() * 1000.0)
        .sum();
    let max_builds_per_module = counting
        .builds
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m.as_str() != stages::store::INDEX_MODULE)
        .map(|(_, n)| *n)
        .max()
        .unwrap_or(0);
    // The builder's peak heap: one tick rebuilding the three busiest modules' current year.
    let builder_peak_bytes = builder_peak(
        &entries,
        &pages,
        counting.clone(),
        &modules,
        years.keys(),
        spec.end.year(),
    )
    .await?;
    let _ = std::fs::remove_dir_all(&scratch);
    for (_, name) in &names {
        let _ = client.delete_table().table_name(name).send().await;
    }
    let measured = per_message.len();
    Ok(HistoryFigures {
        prs: size,
        measured,
        load_seconds,
        items_read_per_pr: reads as f64 / measured.max(1) as f64,
        writes_per_pr: writes as f64 / measured.max(1) as f64,
        ms_per_message: crate::webhook::figures(per_message).median,
        builds,
        items_read_per_build: build_reads as f64 / builds.max(1) as f64,
        ms_per_build: build_ms / builds.max(1) as f64,
        max_builds_per_module,
        burst_seconds,
        build_bound: (burst_seconds / options.rebuild.as_secs_f64().max(0.001)).floor() as usize
            + 1,
        builder_peak_bytes,
    })
}

/// Writes `before` as summarized rows with their entries, in bulk (what a backfill and its
/// summaries leave); the years each module has entries in.
async fn load_before(
    client: &aws_sdk_dynamodb::Client,
    names: &[(&str, String); 3],
    entries: &EntryStore,
    before: &[SyntheticPr],
    modules: &ModulesConfig,
) -> anyhow::Result<BTreeMap<String, std::collections::BTreeSet<i32>>> {
    let repo = RepoName::parse(REPO)?;
    let mut rows: Vec<Item> = Vec::with_capacity(before.len());
    let mut entry_items: Vec<Item> = Vec::new();
    let mut years: BTreeMap<String, std::collections::BTreeSet<i32>> = BTreeMap::new();
    for pr in before {
        let mut item = stored_row(&repo, pr);
        let row = PrRow::from_item(&item)?;
        let paths: Vec<&str> = pr.files.iter().map(|f| f.path.as_str()).collect();
        let tagged = tag_modules(&repo, &paths, modules.for_repo(&repo), None);
        let summary = stages::summary::extractive(&stages::summary::SummaryInput {
            title: &pr.title,
            body: Some(&pr.body),
            labels: &pr.labels,
            files: &paths.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            issues: &[],
            modules: &tagged,
        })
        .text;
        for e in stages::entries::module_entries(
            &repo,
            &row,
            &tagged,
            &summary,
            modules.for_repo(&repo),
            None,
        ) {
            years
                .entry(e.module.to_string())
                .or_default()
                .insert(e.year());
            entry_items.push(entries.item(&e, 1)?);
        }
        item.remove(attr::PENDING_SHARD);
        item.insert(
            attr::SUMMARIZED_AT.into(),
            AttributeValue::S(rfc3339_millis(pr.merged_at)),
        );
        item.insert(attr::SUMMARY.into(), AttributeValue::S(summary));
        item.insert(
            attr::MODULES.into(),
            AttributeValue::L(
                tagged
                    .iter()
                    .map(|m| AttributeValue::S(m.to_string()))
                    .collect(),
            ),
        );
        item.insert(
            attr::ENTRY_MODULES.into(),
            AttributeValue::Ss(tagged.iter().map(|m| m.to_string()).collect()),
        );
        rows.push(item);
    }
    crate::webhook::write_items(client, &names[0].1, rows.into_iter()).await?;
    crate::webhook::write_items(client, &names[1].1, entry_items.into_iter()).await?;
    Ok(years)
}

/// Marks every module's years stale and builds their pages until none is left stale.
async fn build_all(
    entries: &EntryStore,
    pages: &PageStore,
    counting: Arc<Counting>,
    modules: &ModulesConfig,
    years: &BTreeMap<String, std::collections::BTreeSet<i32>>,
) -> anyhow::Result<()> {
    let now = OffsetDateTime::now_utc();
    for (module, ys) in years {
        let ys: Vec<i32> = ys.iter().copied().collect();
        pages.mark_stale(REPO, module, &ys, now).await?;
    }
    let initial = PageBuilder::new(
        entries.clone(),
        pages.clone(),
        counting,
        modules.clone(),
        Duration::ZERO,
    )
    .with_concurrency(2);
    loop {
        let deadline = Instant::now() + Duration::from_secs(3_600);
        initial
            .tick(OffsetDateTime::now_utc(), deadline, "bench-initial")
            .await?;
        if pages.stale_pages().await?.is_empty() {
            return Ok(());
        }
    }
}

/// Stores and enriches each PR as the webhook and the enrich stage would.
async fn store_merged(
    prs: &PrStore,
    repo: &RepoName,
    merged: &[SyntheticPr],
) -> anyhow::Result<()> {
    for pr in merged {
        prs.upsert(
            &standins::synthetic::merged_pr(repo, pr),
            &Delivery {
                id: format!("bench-{}", pr.number),
                received_at: pr.merged_at,
            },
        )
        .await?;
        standins::synthetic::enrich(prs, repo, pr).await?;
    }
    Ok(())
}

/// Summarizes each PR as one queue message would, in order: each message's milliseconds, and
/// the items read and write requests they all made.
async fn summarize_each(
    handler: &SummarizeHandler,
    meter: &Meter,
    prs: &[SyntheticPr],
) -> anyhow::Result<(Vec<f64>, u64, u64)> {
    let mut per_message = Vec::new();
    let (mut reads, mut writes) = (0u64, 0u64);
    for pr in prs {
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("bench-{}", pr.number));
        message.body = Some(format!(r#"{{"repo":"{REPO}","prNumber":{}}}"#, pr.number));
        let before = meter.reading();
        let t0 = Instant::now();
        handler
            .process(
                &message,
                Instant::now() + Duration::from_secs(60),
                &format!("bench/{}", pr.number),
            )
            .await?;
        per_message.push(t0.elapsed().as_secs_f64() * 1000.0);
        let used = meter.reading() - before;
        reads += used.items_read;
        writes += used.write_requests;
    }
    Ok((per_message, reads, writes))
}

/// Ticks the builder every `tick` until `stop`: each tick's report and how long it took.
fn tick_until(
    builder: Arc<PageBuilder>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tick: Duration,
) -> tokio::task::JoinHandle<Vec<(stages::builder::BuildReport, Duration)>> {
    tokio::spawn(async move {
        let mut reports = Vec::new();
        let mut tick_no = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            tick_no += 1;
            let t0 = Instant::now();
            let report = builder
                .tick(
                    OffsetDateTime::now_utc(),
                    Instant::now() + Duration::from_secs(300),
                    &format!("bench-{tick_no}"),
                )
                .await;
            if let Ok(r) = report {
                reports.push((r, t0.elapsed()));
            }
            tokio::time::sleep(tick).await;
        }
        reports
    })
}

/// The builder's peak heap over one tick rebuilding the three busiest modules' `year`.
async fn builder_peak(
    entries: &EntryStore,
    pages: &PageStore,
    counting: Arc<Counting>,
    modules: &ModulesConfig,
    modules_built: impl Iterator<Item = &String>,
    year: i32,
) -> anyhow::Result<usize> {
    let mut busiest: Vec<(String, usize)> = modules_built.map(|m| (m.clone(), 0)).collect();
    for (module, count) in busiest.iter_mut() {
        *count = entries.year(REPO, module, year).await?.len();
    }
    busiest.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (module, _) in busiest.iter().take(3) {
        pages
            .mark_stale(REPO, module, &[year], OffsetDateTime::now_utc())
            .await?;
    }
    let peak_builder = PageBuilder::new(
        entries.clone(),
        pages.clone(),
        counting,
        modules.clone(),
        Duration::ZERO,
    )
    .with_concurrency(1);
    crate::alloc::reset_peak();
    let base = crate::alloc::current();
    peak_builder
        .tick(
            OffsetDateTime::now_utc(),
            Instant::now() + Duration::from_secs(600),
            "bench-peak",
        )
        .await?;
    Ok(crate::alloc::peak().saturating_sub(base))
}

/// The row as the webhook and the enrich stage leave it.
fn stored_row(repo: &RepoName, pr: &SyntheticPr) -> Item {
    let mut item = new_item(
        &standins::synthetic::merged_pr(repo, pr),
        &Delivery {
            id: format!("bench-{}", pr.number),
            received_at: pr.merged_at,
        },
        4,
    );
    for (name, value) in standins::synthetic::enrichment(pr).attributes(500) {
        item.insert(name.to_string(), value);
    }
    item.insert(
        attr::ENRICHED_AT.into(),
        AttributeValue::S(rfc3339_seconds(pr.merged_at)),
    );
    item
}
