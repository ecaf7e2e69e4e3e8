//! `chronicle bench webhook`: the webhook's figures, measured, never asserted in tests.
//!
//! 1. handler time without the DynamoDB call (size cap, signature, parse, classify, item build)
//!    on the real 25 KB merged delivery from `events/`;
//! 2. the full HTTP round trip against the local stack (emulator included);
//! 3. the stored item's size and write units for every recorded `pull_request` example.

use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use stages::config::TableConfig;
use stages::domain::Delivery;
use stages::payload::{classify_pull_request, Classified};
use stages::secret::Secret;
use stages::store::{item_size, new_item, pending_index_projection, write_units, PrStore};
use stages::webhook::{Decision, RequestLog, Verifier, WebhookHandler, WebhookRequest};
use time::OffsetDateTime;

use devstack::dev::{DevOptions, DevStack, DEV_SECRET};
use devstack::emulator::repo_root;
use devstack::replay::{self, RecordedDelivery};
use devstack::samples;

pub struct Figures {
    pub median: f64,
    pub p99: f64,
    pub samples: usize,
}

pub fn figures(mut durations: Vec<f64>) -> Figures {
    durations.sort_by(f64::total_cmp);
    let at = |q: f64| durations[((durations.len() as f64 - 1.0) * q).round() as usize];
    Figures {
        median: at(0.5),
        p99: at(0.99),
        samples: durations.len(),
    }
}

fn merged_delivery() -> anyhow::Result<RecordedDelivery> {
    RecordedDelivery::load(&repo_root().join("events/deliveries/02-merged.delivery.json"))
}

/// Median/p99 in microseconds of everything the handler does before its DynamoDB write.
pub fn handler_without_dynamodb(iterations: usize) -> anyhow::Result<Figures> {
    let delivery = merged_delivery()?;
    let secret = Secret::new(DEV_SECRET);
    let mut headers = HeaderMap::new();
    for (k, v) in delivery.headers_for(Some(&secret)) {
        headers.insert(
            HeaderName::try_from(k.to_ascii_lowercase())?,
            HeaderValue::try_from(v)?,
        );
    }
    let request = WebhookRequest {
        headers,
        body: Bytes::from(delivery.body.clone()),
    };
    // A client that is never called: this measures the handler, not the network.
    let sdk = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    let store = PrStore::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        TableConfig {
            table_name: "bench".into(),
            pending_shards: 4,
        },
    );
    let handler = WebhookHandler::new(store, Verifier::Secret(secret), 1024 * 1024);
    let run = || {
        let started = Instant::now();
        let mut log = RequestLog::default();
        match handler.decide(&request, OffsetDateTime::now_utc(), &mut log) {
            Decision::Store(pr, delivery) => std::hint::black_box(new_item(&pr, &delivery, 4)),
            Decision::Respond(r, _) => panic!("the merged delivery was not accepted: {r:?}"),
            Decision::Lifecycle(..) => panic!("the merged delivery was read as a lifecycle event"),
        };
        started.elapsed().as_secs_f64() * 1e6
    };
    for _ in 0..iterations / 10 {
        run();
    }
    Ok(figures((0..iterations).map(|_| run()).collect()))
}

/// Median/p99 in milliseconds of `POST /webhook` through the local stack, each a new merged PR.
pub async fn round_trips(stack: &DevStack, count: usize) -> anyhow::Result<Figures> {
    let delivery = merged_delivery()?;
    let mut payload: serde_json::Value = serde_json::from_str(&delivery.body)?;
    let client = reqwest::Client::new();
    let url = stack.webhook_url();
    let mut durations = Vec::with_capacity(count);
    for i in 0..count {
        payload["pull_request"]["number"] = serde_json::json!(100_000 + i);
        let sample = RecordedDelivery {
            headers: delivery.headers.clone(),
            body: payload.to_string(),
        };
        let started = Instant::now();
        let (status, answer) = replay::send(&client, &url, &sample, stack.secret()).await?;
        durations.push(started.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(
            status == 200 && answer["stored"] == "inserted",
            "unexpected answer {status} {answer}"
        );
    }
    Ok(figures(durations))
}

pub struct ItemCost {
    pub example: String,
    pub payload_bytes: usize,
    pub body_bytes: usize,
    pub item_bytes: usize,
    pub table_wcu: usize,
    pub index_bytes: usize,
    pub index_wcu: usize,
}

/// What storing each recorded `pull_request` example (made merged) costs.
pub fn item_costs() -> Vec<ItemCost> {
    samples::pull_request_examples()
        .into_iter()
        .map(|name| {
            let payload = samples::merged(samples::webhook(&name)).to_string();
            let Ok(Classified::Merged(pr)) = classify_pull_request(payload.as_bytes()) else {
                panic!("{name}, made merged, was not accepted");
            };
            let delivery = Delivery {
                id: "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
                received_at: OffsetDateTime::now_utc(),
            };
            let item = new_item(&pr, &delivery, 4);
            let item_bytes = item_size(&item);
            let index_bytes = item_size(&pending_index_projection(&item));
            ItemCost {
                example: name,
                payload_bytes: payload.len(),
                body_bytes: pr.body.as_deref().map_or(0, str::len),
                item_bytes,
                table_wcu: write_units(item_bytes),
                index_bytes,
                index_wcu: write_units(index_bytes),
            }
        })
        .collect()
}

pub async fn run_webhook(iterations: usize, round_trip_count: usize) -> anyhow::Result<()> {
    let body_len = merged_delivery()?.body.len();
    let handler = handler_without_dynamodb(iterations)?;
    println!(
        "webhook handler without DynamoDB ({body_len}-byte merged delivery, {} runs):",
        handler.samples
    );
    println!(
        "  median {:.1} µs   p99 {:.1} µs",
        handler.median, handler.p99
    );

    let options = DevOptions::from_env(0, None);
    let stack = DevStack::start(options)
        .await
        .context("starting the local stack")?;
    let rt = round_trips(&stack, round_trip_count).await;
    stack.shutdown().await;
    let rt = rt?;
    println!(
        "HTTP round trip through the local stack (moto), {} inserts:",
        rt.samples
    );
    println!("  median {:.2} ms   p99 {:.2} ms", rt.median, rt.p99);

    println!("stored item per recorded example (made merged):");
    println!(
        "  {:<42} {:>8} {:>6} {:>6} {:>4} {:>6} {:>4}",
        "example", "payload", "body", "item", "WCU", "index", "WCU"
    );
    for c in item_costs() {
        println!(
            "  {:<42} {:>8} {:>6} {:>6} {:>4} {:>6} {:>4}",
            c.example,
            c.payload_bytes,
            c.body_bytes,
            c.item_bytes,
            c.table_wcu,
            c.index_bytes,
            c.index_wcu
        );
    }
    Ok(())
}

/// One sweep's figures for a backlog.
pub struct SweepFigures {
    pub table_rows: usize,
    pub backlog: usize,
    pub seconds: f64,
    pub items_read: usize,
    pub enqueued: usize,
}

/// Writes items with BatchWriteItem, 25 at a time.
pub(crate) async fn write_items(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: impl Iterator<Item = stages::store::Item>,
) -> anyhow::Result<()> {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    let mut requests = Vec::with_capacity(25);
    let flush = |requests: Vec<WriteRequest>| {
        let client = client.clone();
        let table = table.to_string();
        async move {
            let mut pending = Some(std::collections::HashMap::from([(table, requests)]));
            while let Some(items) = pending.take().filter(|m| m.values().any(|v| !v.is_empty())) {
                let out = client
                    .batch_write_item()
                    .set_request_items(Some(items))
                    .send()
                    .await?;
                pending = out.unprocessed_items;
            }
            anyhow::Ok(())
        }
    };
    for item in items {
        requests.push(
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(item)).build()?)
                .build(),
        );
        if requests.len() == 25 {
            flush(std::mem::take(&mut requests)).await?;
        }
    }
    if !requests.is_empty() {
        flush(requests).await?;
    }
    Ok(())
}

/// Sweep time and items read for `backlog` pending rows in a table of `table_rows`.
pub async fn sweep_once(
    sdk: &aws_config::SdkConfig,
    table_rows: usize,
    backlog: usize,
) -> anyhow::Result<SweepFigures> {
    use stages::config::SweeperConfig;
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let name = format!("bench-sweep-{backlog}-{}", std::process::id());
    devstack::template::Template::bundled()?
        .table(devstack::template::PR_TABLE)?
        .create(&client, &name)
        .await?;
    let table = TableConfig {
        table_name: name.clone(),
        pending_shards: 4,
    };
    let payload = samples::merged(samples::webhook("pull_request.closed.1")).to_string();
    let Ok(Classified::Merged(pr)) = classify_pull_request(payload.as_bytes()) else {
        anyhow::bail!("sample not accepted")
    };
    let delivery = Delivery {
        id: "bench".into(),
        received_at: OffsetDateTime::now_utc(),
    };
    let row = |number: u64, pending: bool| {
        let mut pr = (*pr).clone();
        pr.number = number;
        let mut item = new_item(&pr, &delivery, table.pending_shards);
        if !pending {
            item.remove(stages::store::attr::PENDING_SHARD);
            item.insert(
                stages::store::attr::SUMMARIZED_AT.into(),
                aws_sdk_dynamodb::types::AttributeValue::S("2019-05-15T15:30:00.000Z".into()),
            );
        }
        item
    };
    let done = table_rows - backlog;
    write_items(
        &client,
        &name,
        (0..done as u64).map(|n| row(n + 1_000_000, false)),
    )
    .await?;
    write_items(
        &client,
        &name,
        (0..backlog as u64).map(|n| row(n + 1, true)),
    )
    .await?;
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let queue_url = sqs
        .create_queue()
        .queue_name(format!("{name}-q"))
        .send()
        .await?
        .queue_url
        .unwrap_or_default();
    let config = SweeperConfig {
        table: table.clone(),
        queue_url,
        enrich_grace: std::time::Duration::from_secs(120),
        claim_ttl: std::time::Duration::from_secs(900),
        enrich_enabled: false,
        max_queued: 10_000,
    };
    let sweeper = stages::sweeper::Sweeper::new(PrStore::new(client.clone(), table), sqs, &config);
    let started = Instant::now();
    let report = sweeper
        .sweep(
            OffsetDateTime::now_utc(),
            Instant::now() + std::time::Duration::from_secs(3600),
        )
        .await?;
    let seconds = started.elapsed().as_secs_f64();
    client.delete_table().table_name(&name).send().await?;
    Ok(SweepFigures {
        table_rows,
        backlog,
        seconds,
        items_read: report.items_read,
        enqueued: report.enqueued,
    })
}

pub async fn run_sweep(table_rows: usize, backlogs: &[usize]) -> anyhow::Result<()> {
    let (emulator, endpoint) = devstack::emulator::from_env_or_start().await?;
    let sdk = ops::stack::local_sdk_config(&endpoint).await;
    println!("one sweep (enrichment off, 4 shards) against moto:");
    println!(
        "  {:>8} {:>8} {:>10} {:>11} {:>9}",
        "table", "backlog", "seconds", "items read", "enqueued"
    );
    for &backlog in backlogs {
        let f = sweep_once(&sdk, table_rows, backlog).await?;
        println!(
            "  {:>8} {:>8} {:>10.2} {:>11} {:>9}",
            f.table_rows, f.backlog, f.seconds, f.items_read, f.enqueued
        );
    }
    if let Some(e) = emulator {
        e.stop().await;
    }
    Ok(())
}

/// Webhook-received → summarized latency through the local stack, from the row's own
/// `receivedAt` and `summarizedAt`, for `count` deliveries.
pub async fn run_pipeline(count: usize, sweep_interval: std::time::Duration) -> anyhow::Result<()> {
    let mut options = DevOptions::from_env(0, None);
    options.sweep_interval = sweep_interval;
    let out = std::env::temp_dir().join(format!("chronicle-bench-{}", std::process::id()));
    options
        .overrides
        .push(("OUTPUT_DIR".into(), out.display().to_string()));
    options.table_name = Some(format!("bench-pipeline-{}", std::process::id()));
    let stack = DevStack::start(options)
        .await
        .context("starting the local stack")?;
    let result = pipeline_latencies(&stack, count).await;
    stack.shutdown().await;
    let _ = std::fs::remove_dir_all(&out);
    let f = result?;
    println!(
        "webhook received -> summarized through the local stack, {} deliveries (sweep every {:?}, enrichment off):",
        f.samples, sweep_interval
    );
    println!("  p50 {:.0} ms   p99 {:.0} ms", f.median, f.p99);
    Ok(())
}

async fn pipeline_latencies(stack: &DevStack, count: usize) -> anyhow::Result<Figures> {
    let delivery = merged_delivery()?;
    let mut payload: serde_json::Value = serde_json::from_str(&delivery.body)?;
    let client = reqwest::Client::new();
    let url = stack.webhook_url();
    for i in 0..count {
        payload["pull_request"]["number"] = serde_json::json!(200_000 + i);
        let sample = RecordedDelivery {
            headers: delivery.headers.clone(),
            body: payload.to_string(),
        };
        let (status, _) = replay::send(&client, &url, &sample, stack.secret()).await?;
        anyhow::ensure!(status == 200, "delivery {i} answered {status}");
    }
    let repo = stages::domain::RepoName::parse("Codertocat/Hello-World")?;
    let parse =
        |s: &str| OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok();
    let give_up = Instant::now() + std::time::Duration::from_secs(600);
    loop {
        let mut latencies = Vec::with_capacity(count);
        for i in 0..count {
            let Some(item) = stack.store().get(&repo, 200_000 + i as u64).await? else {
                break;
            };
            let times = (
                stages::store::string(&item, stages::store::attr::RECEIVED_AT).and_then(parse),
                stages::store::string(&item, stages::store::attr::SUMMARIZED_AT).and_then(parse),
            );
            match times {
                (Some(received), Some(summarized)) => {
                    latencies.push((summarized - received).as_seconds_f64() * 1000.0)
                }
                _ => break,
            }
        }
        if latencies.len() == count {
            return Ok(figures(latencies));
        }
        anyhow::ensure!(
            Instant::now() < give_up,
            "only {} of {count} summarized after 10 minutes",
            latencies.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
