//! A big import meeting slow summaries: `rows` pending rows, a summarizer slowed by `delay` per
//! PR, the sweeper ticking with a short claim, the summarize queue (with its DLQ and
//! `maxReceiveCount`) consumed by the local SQS event source. Used by a test (a few hundred rows,
//! compressed times) and by `chronicle bench backpressure` (5,000 rows), which also runs the same
//! import without a queue bound to show the work the bound saves.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;
use futures::future::BoxFuture;
use stages::config::{SweeperConfig, TableConfig};
use stages::domain::{Delivery, RepoName};
use stages::store::{attr, EntryStore, PageStore, PrStore};
use stages::summarize::SummarizeHandler;
use stages::summary::{ExtractiveSummarizer, Summarizer, Summary, SummaryInput};
use stages::sweeper::Sweeper;
use time::OffsetDateTime;

use devstack::queues::{ensure_queue_with_dlq, queue_arn, QueueSettings, SqsEventSource};
use devstack::template::{Template, ENTRIES_TABLE_ID, PAGES_TABLE_ID, PR_TABLE};
use standins::synthetic::{history, HistorySpec};

const REPO: &str = "Codertocat/Hello-World";

#[derive(Debug, Clone)]
pub struct Scenario {
    pub rows: usize,
    /// Added to every summary (an LLM, a rate-limited publisher).
    pub delay: Duration,
    /// The sweeper's claim on a queued row (deployed: 900 s).
    pub claim_ttl: Duration,
    /// `SWEEP_MAX_QUEUED`; `None`: no bound (the sweeper enqueues every pending row).
    pub max_queued: Option<usize>,
    pub max_receive_count: u32,
    pub sweep_interval: Duration,
    /// Gives up waiting after this long.
    pub limit: Duration,
}

/// What the run came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub summarized: usize,
    /// Rows claimed more than once (`attempts` > 1: a duplicate that did the work again, or a
    /// failed attempt).
    pub claimed_twice: usize,
    pub dlq_messages: usize,
    /// Messages the sweeper sent in all (more than the rows: claims expired on queued messages).
    pub sent: usize,
    /// The deepest the queue was seen at the start of a sweep (visible, in flight, delayed).
    pub max_depth: usize,
    pub sweeps: usize,
    pub deadline_missed: bool,
    pub wall: Duration,
    /// Summaries the slowed summarizer wrote (once per claim that reached it).
    pub summaries: u64,
}

/// A summarizer that takes `delay` for each PR, counting its calls.
struct Slow {
    delay: Duration,
    calls: Arc<AtomicU64>,
}

impl Summarizer for Slow {
    fn summarize<'a>(
        &'a self,
        input: &'a SummaryInput<'a>,
        deadline: std::time::Instant,
    ) -> BoxFuture<'a, Summary> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.delay).await;
            ExtractiveSummarizer.summarize(input, deadline).await
        })
    }
}

/// Runs the scenario against the emulator at `sdk`.
pub async fn run(sdk: &SdkConfig, scenario: &Scenario) -> anyhow::Result<Outcome> {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let id = uuid::Uuid::new_v4().simple().to_string();
    let template = Template::bundled()?;
    let names = [
        (PR_TABLE, format!("bp-prs-{id}")),
        (ENTRIES_TABLE_ID, format!("bp-entries-{id}")),
        (PAGES_TABLE_ID, format!("bp-pages-{id}")),
    ];
    template.create_tables(&client, &names).await?;
    let table = TableConfig {
        table_name: names[0].1.clone(),
        pending_shards: stages::config::DEFAULT_PENDING_SHARDS,
    };
    let prs = PrStore::new(client.clone(), table.clone());

    // The import: rows stored enriched (as backfill writes them), all pending.
    import(&prs, scenario.rows).await?;

    let settings = QueueSettings {
        batch_size: 10,
        visibility_timeout: Duration::from_secs(30),
        max_receive_count: scenario.max_receive_count,
    };
    let (queue_url, dlq_url) =
        ensure_queue_with_dlq(&sqs, &format!("bp-summarize-{id}"), &settings).await?;
    let arn = queue_arn(&sqs, &queue_url).await?;
    let calls = Arc::new(AtomicU64::new(0));
    let summarize = SummarizeHandler::new(
        prs.clone(),
        EntryStore::new(client.clone(), names[1].1.clone()),
        PageStore::new(client.clone(), names[2].1.clone()),
        Default::default(),
        5,
    )
    .with_summarizer(Arc::new(Slow {
        delay: scenario.delay,
        calls: calls.clone(),
    }))
    .with_dead_letter_queue(sqs.clone(), dlq_url.clone());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let consumer = tokio::spawn(
        SqsEventSource::new(sqs.clone(), queue_url.clone(), arn, settings).run(
            devstack::dev::summarize_batch_handler(Arc::new(summarize)),
            Duration::from_millis(50),
            stop_rx,
        ),
    );

    let sweeper = Sweeper::new(
        prs.clone(),
        sqs.clone(),
        &SweeperConfig {
            table: table.clone(),
            queue_url: queue_url.clone(),
            enrich_grace: Duration::ZERO,
            claim_ttl: scenario.claim_ttl,
            enrich_enabled: false,
            max_queued: scenario.max_queued.unwrap_or(usize::MAX / 2),
        },
    );
    let started = Instant::now();
    let mut outcome = Outcome::default();
    loop {
        let report = sweeper
            .sweep(
                OffsetDateTime::now_utc(),
                Instant::now() + Duration::from_secs(60),
            )
            .await?;
        outcome.sweeps += 1;
        outcome.sent += report.enqueued;
        outcome.max_depth = outcome.max_depth.max(report.queue_depth.unwrap_or(0));
        if report.seen == 0 {
            break;
        }
        if started.elapsed() > scenario.limit {
            outcome.deadline_missed = true;
            break;
        }
        tokio::time::sleep(scenario.sweep_interval).await;
    }
    outcome.wall = started.elapsed();
    // Whatever is still queued (duplicates of finished rows) is consumed before counting.
    let drained = Instant::now();
    while queue_depth(&sqs, &queue_url).await? > 0 && drained.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_tx.send(true)?;
    consumer.await?;

    count_claims(&client, &table.table_name, &mut outcome).await?;
    outcome.dlq_messages = queue_depth(&sqs, &dlq_url).await?;
    outcome.summaries = calls.load(Ordering::Relaxed);
    for (_, name) in &names {
        client.delete_table().table_name(name).send().await.ok();
    }
    Ok(outcome)
}

/// Stores `rows` PRs enriched and pending, as a backfill leaves them.
async fn import(prs: &PrStore, rows: usize) -> anyhow::Result<()> {
    let spec = HistorySpec {
        prs: rows,
        modules: 30,
        per_day: 6.0,
        seed: 4_242,
        end: OffsetDateTime::now_utc() - time::Duration::days(1),
    };
    let now = OffsetDateTime::now_utc();
    let repo = RepoName::parse(REPO)?;
    for pr in history(&spec) {
        let enrichment = standins::synthetic::enrichment(&pr).attributes(500);
        let delivery = Delivery {
            id: format!("import-{}", pr.number),
            received_at: now,
        };
        prs.import(
            &standins::synthetic::merged_pr(&repo, &pr),
            &delivery,
            enrichment,
            now,
        )
        .await?;
    }
    Ok(())
}

/// Counts the rows summarized and the rows claimed more than once.
async fn count_claims(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let mut claims: BTreeMap<u64, u64> = BTreeMap::new();
    for item in scan(client, table).await? {
        let number: u64 = item
            .get(attr::PR_NUMBER)
            .and_then(|n| n.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or_default();
        if item.contains_key(attr::SUMMARIZED_AT) {
            outcome.summarized += 1;
        }
        let attempts = item
            .get(attr::ATTEMPTS)
            .and_then(|a| a.as_n().ok())
            .and_then(|a| a.parse().ok())
            .unwrap_or(0);
        claims.insert(number, attempts);
    }
    outcome.claimed_twice = claims.values().filter(|&&a| a > 1).count();
    Ok(())
}

/// Every row (a measurement after the run, not product code).
async fn scan(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> anyhow::Result<Vec<stages::store::Item>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start)
            .send()
            .await?;
        items.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(k) => start = Some(k),
            None => return Ok(items),
        }
    }
}

/// Visible, in flight and delayed messages of a queue.
async fn queue_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<usize> {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await?;
    Ok(out
        .attributes()
        .map(|a| a.values().filter_map(|v| v.parse::<usize>().ok()).sum())
        .unwrap_or(0))
}

/// `chronicle bench backpressure`: the bounded sweeper, then the unbounded one, on the same import.
pub async fn run_bench(
    rows: usize,
    delay_ms: u64,
    claim_ttl_secs: u64,
    max_queued: usize,
    unbounded_too: bool,
) -> anyhow::Result<()> {
    let (emulator, endpoint) = devstack::emulator::from_env_or_start().await?;
    let sdk = ops::stack::local_sdk_config(&endpoint).await;
    println!(
        "{rows} pending rows, summaries slowed by {delay_ms} ms, claim TTL {claim_ttl_secs} s, maxReceiveCount 2"
    );
    println!(
        "{:>18} | {:>10} | {:>8} | {:>13} | {:>8} | {:>9} | {:>11} | {:>7}",
        "sweeper",
        "summarized",
        "DLQ",
        "claimed twice",
        "sent/row",
        "max depth",
        "summaries",
        "wall s"
    );
    let bounded = format!("bounded ({max_queued})");
    let mut runs = vec![(bounded.as_str(), Some(max_queued))];
    if unbounded_too {
        runs.push(("unbounded", None));
    }
    for (label, max_queued) in runs {
        let outcome = run(
            &sdk,
            &Scenario {
                rows,
                delay: Duration::from_millis(delay_ms),
                claim_ttl: Duration::from_secs(claim_ttl_secs),
                max_queued,
                max_receive_count: 2,
                sweep_interval: Duration::from_secs(1),
                limit: Duration::from_secs(3600),
            },
        )
        .await?;
        println!(
            "{:>18} | {:>10} | {:>8} | {:>13} | {:>8.2} | {:>9} | {:>11} | {:>7.1}{}",
            label,
            outcome.summarized,
            outcome.dlq_messages,
            outcome.claimed_twice,
            outcome.sent as f64 / rows.max(1) as f64,
            outcome.max_depth,
            outcome.summaries,
            outcome.wall.as_secs_f64(),
            if outcome.deadline_missed {
                " (stopped at the limit)"
            } else {
                ""
            }
        );
    }
    if let Some(e) = emulator {
        e.stop().await;
    }
    Ok(())
}
