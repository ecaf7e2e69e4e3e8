//! The sweeper against the emulator: the sparse pending index, claims, SendMessageBatch.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use stages::config::SweeperConfig;
use stages::domain::message::SummarizeMessage;
use stages::store::{attr, PrStore};
use stages::sweeper::Sweeper;
use support::*;
use time::OffsetDateTime;

/// A pending row as the webhook stores it, received at `received_at`.
async fn pending(store: &PrStore, number: u64, received_at: OffsetDateTime) {
    let mut payload = merged_payload();
    payload["pull_request"]["number"] = serde_json::json!(number);
    store_merged(store, &payload, received_at).await;
}

async fn queue(sdk: &aws_config::SdkConfig) -> (aws_sdk_sqs::Client, String) {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let name = format!("summarize-{}", uuid::Uuid::new_v4().simple());
    let url = sqs
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    (sqs, url)
}

fn sweeper(store: &PrStore, sqs: &aws_sdk_sqs::Client, url: &str, enrich_enabled: bool) -> Sweeper {
    let config = SweeperConfig {
        table: store.table().clone(),
        queue_url: url.to_string(),
        enrich_grace: Duration::from_secs(120),
        claim_ttl: Duration::from_secs(300),
        enrich_enabled,
        max_queued: 10_000,
    };
    Sweeper::new(store.clone(), sqs.clone(), &config)
}

/// Every message in the queue (received and deleted), as PR numbers.
async fn drain(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<u64> {
    let mut numbers = Vec::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        let messages = out.messages.unwrap_or_default();
        if messages.is_empty() {
            return numbers;
        }
        for m in messages {
            numbers.push(SummarizeMessage::parse(m.body().unwrap()).unwrap().1);
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

#[tokio::test]
async fn two_sweeps_at_once_enqueue_each_row_once() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let (sqs, url) = queue(&sdk).await;
    let now = OffsetDateTime::now_utc();
    for n in 1..=30 {
        pending(&store, n, now).await;
    }
    let (a, b) = (
        sweeper(&store, &sqs, &url, false),
        sweeper(&store, &sqs, &url, false),
    );
    let (ra, rb) = tokio::join!(a.sweep(now, soon()), b.sweep(now, soon()));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.enqueued + rb.enqueued, 30, "{ra:?} {rb:?}");
    let mut numbers = drain(&sqs, &url).await;
    numbers.sort();
    assert_eq!(
        numbers,
        (1..=30).collect::<Vec<_>>(),
        "each row exactly once"
    );
    // Within the claim's lifetime a third sweep enqueues nothing.
    let rc = a.sweep(now, soon()).await.unwrap();
    assert_eq!((rc.seen, rc.enqueued, rc.skipped_claimed), (30, 0, 30));
}

#[tokio::test]
async fn a_row_inside_the_grace_window_waits_then_goes() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let (sqs, url) = queue(&sdk).await;
    let now = OffsetDateTime::now_utc();
    pending(&store, 1, now).await;
    pending(&store, 2, now).await;
    // Row 2 is enriched already: it does not wait.
    store
        .client()
        .update_item()
        .table_name(store.table_name())
        .key(attr::REPO, av_s("Codertocat/Hello-World"))
        .key(attr::PR_NUMBER, AttributeValue::N("2".into()))
        .update_expression("SET enrichedAt = :e")
        .expression_attribute_values(":e", av_s("2019-05-15T15:22:00.000Z"))
        .send()
        .await
        .unwrap();
    let sweeper = sweeper(&store, &sqs, &url, true);
    let first = sweeper.sweep(now, soon()).await.unwrap();
    assert_eq!((first.enqueued, first.skipped_grace), (1, 1), "{first:?}");
    assert_eq!(drain(&sqs, &url).await, [2]);
    // 121 s later the window is over: row 1 goes without enrichment.
    let later = sweeper
        .sweep(now + Duration::from_secs(121), soon())
        .await
        .unwrap();
    assert_eq!((later.enqueued, later.skipped_grace), (1, 0), "{later:?}");
    assert_eq!(drain(&sqs, &url).await, [1]);
    // With enrichment disabled nothing waits at all.
    pending(&store, 3, now).await;
    let off = self::sweeper(&store, &sqs, &url, false)
        .sweep(now, soon())
        .await
        .unwrap();
    assert_eq!((off.enqueued, off.skipped_grace), (1, 0));
}

#[tokio::test]
async fn a_lost_message_is_enqueued_again_after_the_claim_expires() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let (sqs, url) = queue(&sdk).await;
    let now = OffsetDateTime::now_utc();
    pending(&store, 5, now).await;
    let sweeper = sweeper(&store, &sqs, &url, false);
    assert_eq!(sweeper.sweep(now, soon()).await.unwrap().enqueued, 1);
    assert_eq!(
        drain(&sqs, &url).await,
        [5],
        "the message is lost: taken and never processed"
    );
    assert_eq!(
        sweeper
            .sweep(now + Duration::from_secs(60), soon())
            .await
            .unwrap()
            .enqueued,
        0
    );
    let after = sweeper
        .sweep(now + Duration::from_secs(301), soon())
        .await
        .unwrap();
    assert_eq!(after.enqueued, 1, "{after:?}");
    assert_eq!(drain(&sqs, &url).await, [5]);
}

#[tokio::test]
async fn no_pending_rows_means_no_send_call() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let (sqs, url) = queue(&sdk).await;
    let report = sweeper(&store, &sqs, &url, false)
        .sweep(OffsetDateTime::now_utc(), soon())
        .await
        .unwrap();
    assert_eq!(
        (report.seen, report.send_calls, report.items_read),
        (0, 0, 0),
        "{report:?}"
    );
    assert!(drain(&sqs, &url).await.is_empty());
}

/// Writes `count` summarized rows (no pending marker) with BatchWriteItem, 25 at a time.
pub async fn summarized_rows(store: &PrStore, first: u64, count: u64) {
    let mut requests = Vec::new();
    for n in first..first + count {
        let item = [
            (attr::REPO, av_s("Codertocat/Hello-World")),
            (attr::PR_NUMBER, AttributeValue::N(n.to_string())),
            (attr::TITLE, av_s("an old change")),
            (attr::MERGED_AT, av_s("2019-01-01T00:00:00Z")),
            (attr::SUMMARIZED_AT, av_s("2019-01-01T00:05:00.000Z")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        requests.push(
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
                .build(),
        );
        if requests.len() == 25 {
            store
                .client()
                .batch_write_item()
                .request_items(store.table_name(), std::mem::take(&mut requests))
                .send()
                .await
                .unwrap();
        }
    }
    if !requests.is_empty() {
        store
            .client()
            .batch_write_item()
            .request_items(store.table_name(), requests)
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_sweep_reads_the_backlog_not_the_table() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let (sqs, url) = queue(&sdk).await;
    summarized_rows(&store, 10_000, 5_000).await;
    let now = OffsetDateTime::now_utc();
    for n in 1..=10 {
        pending(&store, n, now).await;
    }
    let report = sweeper(&store, &sqs, &url, false)
        .sweep(now, soon())
        .await
        .unwrap();
    assert_eq!((report.seen, report.enqueued), (10, 10), "{report:?}");
    assert!(
        report.items_read <= 11,
        "read {} items for 10 pending rows in a table of 5,010",
        report.items_read
    );
    let numbers: BTreeSet<u64> = drain(&sqs, &url).await.into_iter().collect();
    assert_eq!(numbers, (1..=10).collect());
    assert!(report.oldest_pending_age_seconds.is_some());
}

#[tokio::test]
async fn a_big_import_with_slow_summaries_ends_with_no_dlq_message_and_no_duplicate() {
    let sdk = sdk().await;
    let scenario = |max_queued| bench::backpressure::Scenario {
        rows: 150,
        delay: Duration::from_millis(300),
        // Compressed: claims expire while rows still wait, as 15 min do under an LLM's pace.
        claim_ttl: Duration::from_secs(6),
        max_queued,
        max_receive_count: 2,
        sweep_interval: Duration::from_millis(300),
        limit: Duration::from_secs(240),
    };
    let bounded = bench::backpressure::run(&sdk, &scenario(Some(10)))
        .await
        .unwrap();
    println!("bounded: {bounded:?}");
    assert!(!bounded.deadline_missed, "{bounded:?}");
    assert_eq!(bounded.summarized, 150, "{bounded:?}");
    assert_eq!(bounded.dlq_messages, 0, "{bounded:?}");
    assert_eq!(
        bounded.claimed_twice, 0,
        "each row summarized by one claim: {bounded:?}"
    );
    assert_eq!(bounded.summaries, 150, "{bounded:?}");
    assert!(
        bounded.max_depth <= 10,
        "the queue never held more than its bound: {bounded:?}"
    );
    assert!(
        bounded.sent <= 150 + 15,
        "almost every row sent once: {bounded:?}"
    );

    // The same import without the bound: every row queued at once, claims expiring on queued
    // messages, which are sent again. Still no DLQ message and no double summary (duplicates are
    // dropped), but the work the bound saves shows.
    let unbounded = bench::backpressure::run(&sdk, &scenario(None))
        .await
        .unwrap();
    println!("unbounded: {unbounded:?}");
    assert_eq!(
        (
            unbounded.summarized,
            unbounded.dlq_messages,
            unbounded.claimed_twice
        ),
        (150, 0, 0),
        "{unbounded:?}"
    );
    assert!(unbounded.max_depth > 10, "{unbounded:?}");
    assert!(
        unbounded.sent > bounded.sent,
        "{unbounded:?} vs {bounded:?}"
    );
}

#[tokio::test]
async fn a_sweep_tops_the_queue_up_to_its_bound_and_spreads_it_over_the_shards() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let (sqs, url) = queue(&sdk).await;
    let now = OffsetDateTime::now_utc();
    for n in 1..=40 {
        pending(&store, n, now).await;
    }
    let config = SweeperConfig {
        table: store.table().clone(),
        queue_url: url.clone(),
        enrich_grace: Duration::from_secs(120),
        claim_ttl: Duration::from_secs(300),
        enrich_enabled: false,
        max_queued: 12,
    };
    let sweeper = Sweeper::new(store.clone(), sqs.clone(), &config);
    let first = sweeper.sweep(now, soon()).await.unwrap();
    assert_eq!(
        (first.queue_depth, first.enqueued, first.skipped_full),
        (Some(0), 12, 28),
        "{first:?}"
    );
    // The queue is full: the next sweep sends nothing.
    let second = sweeper.sweep(now, soon()).await.unwrap();
    assert_eq!(
        (second.queue_depth, second.enqueued),
        (Some(12), 0),
        "{second:?}"
    );
    let numbers = drain(&sqs, &url).await;
    let shards: BTreeSet<u64> = numbers.iter().map(|n| n % 4).collect();
    assert_eq!(shards.len(), 4, "every shard had its share: {numbers:?}");
    // Drained: the next sweep tops it up again.
    let third = sweeper.sweep(now, soon()).await.unwrap();
    assert_eq!(third.enqueued, 12, "{third:?}");
}

#[tokio::test]
async fn lowering_pending_shards_strands_no_row() {
    let sdk = sdk().await;
    let mut store = fresh_table(&sdk).await;
    let (sqs, url) = queue(&sdk).await;
    let now = OffsetDateTime::now_utc();
    // Stored while PendingShards was 8: rows 5 and 7 sit in shards "5" and "7".
    let mut table = store.table().clone();
    table.pending_shards = 8;
    let wide = PrStore::new(store.client().clone(), table);
    for n in [4, 5, 6, 7] {
        pending(&wide, n, now).await;
    }
    // Now PendingShards is 2.
    let mut table = store.table().clone();
    table.pending_shards = 2;
    store = PrStore::new(store.client().clone(), table);
    let report = sweeper(&store, &sqs, &url, false)
        .sweep(now, soon())
        .await
        .unwrap();
    assert_eq!((report.seen, report.enqueued), (4, 4), "{report:?}");
    let mut numbers = drain(&sqs, &url).await;
    numbers.sort();
    assert_eq!(numbers, [4, 5, 6, 7]);
}

/// Review defect 2: past its grace window, a row whose enrichment is in flight (a live enrich
/// lease: a burst of merges, GitHub 5xx and stream retries) is not enqueued to be summarized
/// without its files; once the lease is gone it is.
#[tokio::test]
async fn a_row_being_enriched_is_not_enqueued_past_its_grace() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let (sqs, url) = queue(&sdk).await;
    let now = OffsetDateTime::now_utc();
    pending(&store, 1, now - time::Duration::minutes(10)).await;
    let repo = stages::domain::RepoName::parse("Codertocat/Hello-World").unwrap();
    let claim = store
        .claim_enrichment(&repo, 1, "enricher", now, now + time::Duration::seconds(60))
        .await
        .unwrap();
    assert!(matches!(claim, stages::store::EnrichClaim::Claimed(_)));
    let s = sweeper(&store, &sqs, &url, true);
    let report = s.sweep(now, soon()).await.unwrap();
    assert_eq!((report.seen, report.enqueued), (1, 0), "{report:?}");
    assert!(drain(&sqs, &url).await.is_empty());
    // The enrich worker dies; its lease expires: the row goes (unenriched, as before).
    let later = now + time::Duration::seconds(61);
    let report = s.sweep(later, soon()).await.unwrap();
    assert_eq!(report.enqueued, 1, "{report:?}");
    assert_eq!(drain(&sqs, &url).await, [1]);
}
