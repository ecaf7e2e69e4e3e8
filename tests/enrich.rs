//! The enrich stage against the emulator, with GitHub played by the strict local stand-in
//! (`support::github_stub`) serving the recorded REST responses.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use shared::enrich::EnrichHandler;
use shared::github::GitHubClient;
use shared::secret::Secret;
use shared::store::{attr, Item, PrStore};
use support::github_stub::{Fault, GitHubStub, PullSpec};
use support::*;

const TOKEN: &str = "ghp_test_token_for_the_stand_in";
const REPO: &str = "Codertocat/Hello-World";

/// A row inserted the way production inserts it: a signed merged delivery through the webhook.
async fn stored_pr(store: &PrStore, number: u64, body: Option<&str>) {
    let mut payload = merged_payload();
    payload["pull_request"]["number"] = json!(number);
    payload["pull_request"]["body"] = json!(body);
    let answer = handler(store.clone())
        .handle(signed(
            "pull_request",
            &format!("guid-{number}"),
            payload.to_string(),
        ))
        .await;
    assert_eq!(answer.body["stored"], "inserted", "{answer:?}");
}

fn github(stub: &GitHubStub, retries: u32) -> GitHubClient {
    GitHubClient::new(
        &stub.url(),
        &Secret::new(TOKEN),
        Duration::from_secs(2),
        retries,
    )
    .unwrap()
}

fn enricher(store: &PrStore, stub: &GitHubStub, retries: u32) -> Arc<EnrichHandler> {
    Arc::new(EnrichHandler::new(
        store.clone(),
        Some(github(stub, retries)),
        4,
        500,
    ))
}

/// A stream INSERT record for the row, as Lambda delivers it (only the parts the handler reads).
fn insert_record(number: u64, sequence: &str) -> EventRecord {
    let mut record = EventRecord::default();
    record.event_id = format!("event-{sequence}");
    record.event_name = "INSERT".into();
    record.change.sequence_number = Some(sequence.into());
    record.change.keys = serde_dynamo::Item::from(HashMap::from([
        (
            attr::REPO.to_string(),
            serde_dynamo::AttributeValue::S(REPO.into()),
        ),
        (
            attr::PR_NUMBER.to_string(),
            serde_dynamo::AttributeValue::N(number.to_string()),
        ),
    ]));
    record
}

fn event(records: Vec<EventRecord>) -> Event {
    let mut e = Event::default();
    e.records = records;
    e
}

async fn row(store: &PrStore, number: u64) -> Item {
    stored_row(store, REPO, number).await
}

fn n(item: &Item, name: &str) -> u64 {
    item[name].as_n().unwrap().parse().unwrap()
}

fn failed(response: &aws_lambda_events::event::streams::DynamoDbEventResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap_or_default())
        .collect()
}

async fn setup() -> (PrStore, GitHubStub) {
    (
        fresh_table(&sdk().await).await,
        GitHubStub::start(TOKEN).await,
    )
}

#[tokio::test]
async fn two_hundred_fifty_files_over_three_pages_and_linked_issues_one_missing() {
    let (store, stub) = setup().await;
    // The real fixture body, with closing references appended (hand-written).
    let body = "This is a pretty simple change that we need to pull into master.\n\nFixes #1347, closes octocat/Hello-World#9 and resolves #404";
    stored_pr(&store, 2, Some(body)).await;
    stub.add_pull(
        REPO,
        2,
        PullSpec {
            commits: 4,
            ..PullSpec::with_files(250)
        },
    );
    stub.add_issue(REPO, 1347, "Found a bug", "open");
    stub.add_issue("octocat/Hello-World", 9, "Crash on start", "closed");

    let response = enricher(&store, &stub, 2)
        .handle(event(vec![insert_record(2, "100")]), within(30), "inv-1")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    let item = row(&store, 2).await;
    assert!(item.contains_key(attr::ENRICHED_AT));
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 250);
    assert_eq!(item[attr::FILES_TRUNCATED], AttributeValue::Bool(false));
    assert_eq!(
        (n(&item, attr::CHANGED_FILES), n(&item, attr::COMMITS)),
        (250, 4)
    );
    let dirs = item[attr::DIRECTORIES].as_m().unwrap();
    assert_eq!(dirs.len(), 1, "every file is under src/: {dirs:?}");
    assert_eq!(dirs["src"], AttributeValue::N("250".into()));
    let issues: Vec<(String, String, String)> = item[attr::LINKED_ISSUES]
        .as_l()
        .unwrap()
        .iter()
        .map(|i| {
            let m = i.as_m().unwrap();
            (
                m["repo"].as_s().unwrap().clone(),
                m["title"].as_s().unwrap().clone(),
                m["state"].as_s().unwrap().clone(),
            )
        })
        .collect();
    assert_eq!(
        issues,
        [
            (
                REPO.to_string(),
                "Found a bug".to_string(),
                "open".to_string()
            ),
            (
                "octocat/Hello-World".to_string(),
                "Crash on start".to_string(),
                "closed".to_string()
            )
        ]
    );
    // 1 PR + 3 pages of files + 3 issues (one a 404, skipped).
    assert_eq!(
        stub.count_matching(&format!("/repos/{REPO}/pulls/2/files")),
        3
    );
    assert_eq!(
        stub.request_count(),
        7,
        "{:?}",
        stub.requests().iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    assert!(stub.requests().iter().all(|r| r
        .query
        .as_deref()
        .is_none_or(|q| q.contains("per_page=100"))));
    for pipeline in [
        attr::ENRICH_LEASE_OWNER,
        attr::ENRICH_LEASE_UNTIL,
        attr::SUMMARIZED_AT,
    ] {
        assert!(!item.contains_key(pipeline), "{pipeline}");
    }
    assert!(
        item.contains_key(attr::PENDING_SHARD),
        "the pending marker is the summarizer's to remove"
    );
}

#[tokio::test]
async fn three_thousand_file_cap_and_truncated_paths() {
    let (store, stub) = setup().await;
    stored_pr(&store, 3, None).await;
    stub.add_pull(REPO, 3, PullSpec::with_files(3500));
    let response = enricher(&store, &stub, 1)
        .handle(event(vec![insert_record(3, "1")]), within(60), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let item = row(&store, 3).await;
    assert_eq!(
        stub.count_matching(&format!("/repos/{REPO}/pulls/3/files")),
        30,
        "3000 files at 100 a page"
    );
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 500);
    assert_eq!(item[attr::FILES_TRUNCATED], AttributeValue::Bool(true));
    assert_eq!(n(&item, attr::CHANGED_FILES), 3500);
    let counted: u64 = item[attr::DIRECTORIES]
        .as_m()
        .unwrap()
        .values()
        .map(|v| v.as_n().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        counted, 3000,
        "directory counts cover every file GitHub returned"
    );
    // Well under DynamoDB's 400 KB item limit.
    let size = shared::store::item_size(&item);
    assert!(size < 100 * 1024, "{size} bytes");
}

#[tokio::test]
async fn no_token_means_no_http_call_and_success() {
    let (store, stub) = setup().await;
    stored_pr(&store, 4, None).await;
    let disabled = Arc::new(EnrichHandler::new(store.clone(), None, 4, 500));
    let response = disabled
        .handle(
            event(vec![insert_record(4, "1"), insert_record(5, "2")]),
            within(30),
            "inv",
        )
        .await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(stub.request_count(), 0);
    assert!(!row(&store, 4).await.contains_key(attr::ENRICHED_AT));
}

#[tokio::test]
async fn rate_limits_and_server_errors_fail_the_record_then_the_retry_succeeds() {
    let (store, stub) = setup().await;
    let faults = [
        (
            10,
            Fault::TooManyRequests {
                retry_after_secs: 60,
            },
        ),
        (11, Fault::RateLimitExhausted { reset_in_secs: 120 }),
        (12, Fault::ServerError),
    ];
    for (number, fault) in faults {
        stored_pr(&store, number, None).await;
        stub.add_pull(REPO, number, PullSpec::with_files(3));
        stub.fail_next(&format!("/repos/{REPO}/pulls/{number}"), fault.clone());
        // No retries inside the call and too little time to wait: the record fails.
        let handler = enricher(&store, &stub, 0);
        let response = handler
            .handle(event(vec![insert_record(number, "7")]), within(10), "first")
            .await;
        assert_eq!(failed(&response), ["7"], "{fault:?}");
        assert!(!row(&store, number).await.contains_key(attr::ENRICHED_AT));
        assert!(
            !row(&store, number)
                .await
                .contains_key(attr::ENRICH_LEASE_OWNER),
            "the lease is released on failure"
        );
        stub.lift_rate_limit();
        // The stream retries the record later: now it succeeds.
        let response = handler
            .handle(event(vec![insert_record(number, "7")]), within(10), "retry")
            .await;
        assert!(
            response.batch_item_failures.is_empty(),
            "{fault:?}: {response:?}"
        );
        assert!(row(&store, number).await.contains_key(attr::ENRICHED_AT));
    }
}

#[tokio::test]
async fn short_rate_limit_waits_and_transient_errors_retry_inside_one_invocation() {
    let (store, stub) = setup().await;
    stored_pr(&store, 20, None).await;
    stub.add_pull(REPO, 20, PullSpec::with_files(3));
    stub.fail_next(
        &format!("/repos/{REPO}/pulls/20"),
        Fault::TooManyRequests {
            retry_after_secs: 1,
        },
    );
    stub.fail_next(&format!("/repos/{REPO}/pulls/20/files"), Fault::BadGateway);
    let started = Instant::now();
    let response = enricher(&store, &stub, 2)
        .handle(event(vec![insert_record(20, "1")]), within(30), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry-after was honoured"
    );
    assert!(row(&store, 20).await.contains_key(attr::ENRICHED_AT));
}

#[tokio::test]
async fn a_hanging_github_times_out_and_fails_the_record() {
    let (store, stub) = setup().await;
    stored_pr(&store, 21, None).await;
    stub.add_pull(REPO, 21, PullSpec::with_files(3));
    stub.fail_next(
        &format!("/repos/{REPO}/pulls/21"),
        Fault::Hang(Duration::from_secs(5)),
    );
    let started = Instant::now();
    let response = enricher(&store, &stub, 0)
        .handle(event(vec![insert_record(21, "9")]), within(30), "inv")
        .await;
    assert_eq!(failed(&response), ["9"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the 2 s client timeout cut the hang short"
    );
}

#[tokio::test]
async fn pr_gone_is_skipped_for_good() {
    let (store, stub) = setup().await;
    stored_pr(&store, 30, None).await;
    stored_pr(&store, 31, None).await;
    stub.add_pull(REPO, 31, PullSpec::with_files(1));
    stub.fail_next(&format!("/repos/{REPO}/pulls/31"), Fault::Gone);
    // 30 is not registered at all: 404.
    let response = enricher(&store, &stub, 3)
        .handle(
            event(vec![insert_record(30, "1"), insert_record(31, "2")]),
            within(30),
            "inv",
        )
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    for (number, status) in [(30, "404"), (31, "410")] {
        let item = row(&store, number).await;
        let reason = s(&item, attr::ENRICH_SKIPPED_REASON);
        assert!(
            reason.contains(status) && reason.contains("gone or the token lost access"),
            "{reason}"
        );
        assert!(
            item.contains_key(attr::ENRICHED_AT),
            "the stage is finished, never retried forever"
        );
    }
    assert_eq!(
        stub.count_matching(&format!("/repos/{REPO}/pulls/30")),
        1,
        "a 404 is not retried"
    );
}

#[tokio::test]
async fn duplicate_records_and_concurrent_invocations_enrich_once() {
    let (store, stub) = setup().await;
    stored_pr(&store, 40, Some("Fixes #1347")).await;
    stub.add_pull(REPO, 40, PullSpec::with_files(120));
    stub.add_issue(REPO, 1347, "Found a bug", "open");
    let handler = enricher(&store, &stub, 2);

    // The same record twice in one batch, and two invocations at once with it.
    let batch = || event(vec![insert_record(40, "5"), insert_record(40, "5")]);
    let (a, b) = tokio::join!(
        handler.handle(batch(), within(30), "inv-a"),
        handler.handle(batch(), within(30), "inv-b")
    );
    let failures = failed(&a).len() + failed(&b).len();
    assert!(row(&store, 40).await.contains_key(attr::ENRICHED_AT));
    // Losers of the lease report failure and are retried: then they find the row enriched.
    let retry = handler.handle(batch(), within(30), "inv-c").await;
    assert!(retry.batch_item_failures.is_empty());
    assert!(failures <= 3, "one of four copies did the work");
    // One enrichment's worth of requests: PR, 2 pages of files, 1 issue.
    assert_eq!(
        stub.count_matching(&format!("/repos/{REPO}/pulls/40")),
        3,
        "{:?}",
        stub.requests().iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    assert_eq!(
        stub.count_matching(&format!("/repos/{REPO}/issues/1347")),
        1
    );
}

#[tokio::test]
async fn summarized_at_and_webhook_fields_are_untouched() {
    let (store, stub) = setup().await;
    stored_pr(&store, 50, None).await;
    store
        .client()
        .update_item()
        .table_name(store.table_name())
        .key(attr::REPO, av_s(REPO))
        .key(attr::PR_NUMBER, AttributeValue::N("50".into()))
        .update_expression("SET summarizedAt = :s")
        .expression_attribute_values(":s", av_s("2019-05-15T16:00:00Z"))
        .send()
        .await
        .unwrap();
    let before = row(&store, 50).await;
    stub.add_pull(REPO, 50, PullSpec::with_files(2));
    let response = enricher(&store, &stub, 1)
        .handle(event(vec![insert_record(50, "1")]), within(30), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty());
    let after = row(&store, 50).await;
    for (k, v) in &before {
        assert_eq!(after.get(k), Some(v), "{k} changed");
    }
    assert!(after.contains_key(attr::ENRICHED_AT));
}

#[tokio::test]
async fn a_deleted_row_and_a_broken_record_do_not_lose_the_others() {
    let (store, stub) = setup().await;
    stored_pr(&store, 60, None).await;
    stub.add_pull(REPO, 60, PullSpec::with_files(1));
    let mut broken = insert_record(61, "2");
    broken.change.keys =
        serde_dynamo::Item::from(HashMap::<String, serde_dynamo::AttributeValue>::new());
    // 62 was never stored (deleted meanwhile): skipped, success.
    let response = enricher(&store, &stub, 1)
        .handle(
            event(vec![insert_record(60, "1"), broken, insert_record(62, "3")]),
            within(30),
            "inv",
        )
        .await;
    assert_eq!(
        failed(&response),
        ["2"],
        "only the record without a key fails"
    );
    assert!(row(&store, 60).await.contains_key(attr::ENRICHED_AT));
}

// ---- Through the real stream: moto's DynamoDB Streams, read by the local event source ----

use infra::streams::{ensure_queue, EventSourceSettings, StreamEventSource};

async fn event_source(store: &PrStore, max_retry_attempts: u32) -> (StreamEventSource, String) {
    let sdk = sdk().await;
    let mut settings = EventSourceSettings::from_template(
        &infra::template::Template::bundled().unwrap(),
        "EnrichFunction",
        "PrStream",
    )
    .unwrap();
    assert_eq!(settings.event_names, ["INSERT"], "the template's filter");
    settings.max_retry_attempts = max_retry_attempts;
    settings.retry_backoff = Duration::from_millis(10);
    let dlq = ensure_queue(
        &aws_sdk_sqs::Client::new(&sdk),
        &format!("{}-dlq", store.table_name()),
    )
    .await
    .unwrap();
    (
        StreamEventSource::new(&sdk, store.table_name(), dlq.clone(), settings)
            .await
            .unwrap(),
        dlq,
    )
}

#[tokio::test]
async fn a_webhook_insert_is_enriched_from_the_real_stream_and_its_own_modify_does_not_retrigger() {
    let (store, stub) = setup().await;
    let (mut source, _) = event_source(&store, 5).await;
    stored_pr(&store, 2, Some("Fixes #1347")).await;
    stub.add_pull(REPO, 2, PullSpec::with_files(5));
    stub.add_issue(REPO, 1347, "Found a bug", "open");
    let handler = infra::dev::enrich_batch_handler(enricher(&store, &stub, 2));

    let report = source.poll_once(&handler).await.unwrap();
    assert_eq!(
        (report.invocations, report.succeeded, report.dead_lettered),
        (1, 1, 0),
        "{report:?}"
    );
    let item = row(&store, 2).await;
    assert!(item.contains_key(attr::ENRICHED_AT));
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 5);
    let requests = stub.request_count();
    assert_eq!(requests, 3, "PR, one page of files, one issue");

    // The enrichment's own write is a MODIFY on the stream: filtered out, never delivered.
    let report = source.poll_once(&handler).await.unwrap();
    assert_eq!(report.invocations, 0, "{report:?}");
    assert!(report.filtered_out >= 1, "{report:?}");
    assert_eq!(stub.request_count(), requests);
}

#[tokio::test]
async fn a_poison_record_ends_in_the_stream_dlq_and_the_others_are_enriched() {
    let (store, stub) = setup().await;
    let (mut source, dlq) = event_source(&store, 2).await;
    stored_pr(&store, 70, None).await;
    stored_pr(&store, 71, None).await;
    stub.add_pull(REPO, 70, PullSpec::with_files(1));
    stub.add_pull(REPO, 71, PullSpec::with_files(1));
    for _ in 0..10 {
        stub.fail_next(&format!("/repos/{REPO}/pulls/70"), Fault::ServerError);
    }
    let handler = infra::dev::enrich_batch_handler(enricher(&store, &stub, 0));
    let report = source.poll_once(&handler).await.unwrap();
    assert_eq!(report.dead_lettered, 1, "{report:?}");
    assert!(row(&store, 71).await.contains_key(attr::ENRICHED_AT));
    assert!(!row(&store, 70).await.contains_key(attr::ENRICHED_AT));
    assert_eq!(
        stub.count_matching(&format!("/repos/{REPO}/pulls/70")),
        3,
        "1 attempt + 2 retries"
    );

    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let messages = sqs
        .receive_message()
        .queue_url(&dlq)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(messages.len(), 1);
    let body: serde_json::Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    assert_eq!(
        body["record"]["dynamodb"]["Keys"]["prNumber"]["N"], "70",
        "{body}"
    );
    assert_eq!(
        body["requestContext"]["condition"],
        "RetryAttemptsExhausted"
    );
}

#[tokio::test]
async fn the_sample_stream_event_is_enriched_and_its_modify_ignored() {
    let (store, stub) = setup().await;
    stored_pr(&store, 2, None).await;
    stub.add_pull(REPO, 2, PullSpec::with_files(5));
    let text = std::fs::read_to_string(
        infra::emulator::repo_root().join("events/enrich.dynamodb-stream.json"),
    )
    .unwrap();
    let sample: Event = serde_json::from_str(&text).unwrap();
    assert_eq!(
        sample
            .records
            .iter()
            .map(|r| r.event_name.as_str())
            .collect::<Vec<_>>(),
        ["INSERT", "MODIFY"]
    );
    let response = enricher(&store, &stub, 1)
        .handle(sample, within(30), "sample")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let item = row(&store, 2).await;
    assert!(item.contains_key(attr::ENRICHED_AT));
    // PR + one page of files: the MODIFY record called nothing.
    assert_eq!(stub.request_count(), 2);
    println!(
        "enriched item for the sample PR (5 files): {} bytes",
        shared::store::item_size(&item)
    );
}
