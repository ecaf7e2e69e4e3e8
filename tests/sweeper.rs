//! The sweeper against the emulator: the sparse pending index, claims, SendMessageBatch.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use shared::config::SweeperConfig;
use shared::store::{attr, PrStore};
use shared::sweeper::{SummarizeMessage, Sweeper};
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
