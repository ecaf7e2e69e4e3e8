//! The summarize worker against the emulator: exactly one entry per (PR, module), whatever is
//! duplicated, raced, retried or killed; every claim counts an attempt; a row that keeps failing
//! is given up (its message in the DLQ first) and a redriven one is summarized.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use futures::future::BoxFuture;
use stages::domain::RepoName;
use stages::store::{attr, Item};
use stages::summarize::{SummarizeHandler, GIVEN_UP_AT_ATTRIBUTE};
use stages::summary::{Summarizer, Summary, SummaryInput, SummarySource};
use stages::tagging::ModulesConfig;
use support::dynamo_proxy::{DynamoProxy, Hold};
use support::*;
use time::OffsetDateTime;

const REPO: &str = "Codertocat/Hello-World";

async fn pending(t: &Tables, number: u64) {
    let mut payload = merged_payload();
    payload["pull_request"]["number"] = serde_json::json!(number);
    store_merged(&t.prs, &payload, OffsetDateTime::now_utc()).await;
}

/// Gives the row changed files, as enrichment would.
async fn with_files(t: &Tables, number: u64, files: &[(&str, u64, u64)]) {
    let list = files
        .iter()
        .map(|(path, a, d)| {
            AttributeValue::M(
                [
                    ("path", AttributeValue::S(path.to_string())),
                    ("status", AttributeValue::S("modified".into())),
                    ("additions", AttributeValue::N(a.to_string())),
                    ("deletions", AttributeValue::N(d.to_string())),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            )
        })
        .collect();
    t.prs
        .client()
        .update_item()
        .table_name(t.prs.table_name())
        .set_key(Some(stages::store::key(
            &RepoName::parse(REPO).unwrap(),
            number,
        )))
        .update_expression("SET #files = :files, #enriched = :now")
        .expression_attribute_names("#files", attr::FILES)
        .expression_attribute_names("#enriched", attr::ENRICHED_AT)
        .expression_attribute_values(":files", AttributeValue::L(list))
        .expression_attribute_values(":now", AttributeValue::S("2019-05-15T15:21:30.000Z".into()))
        .send()
        .await
        .unwrap();
}

fn message(id: &str, number: u64) -> SqsMessage {
    summarize_message(id, REPO, number)
}

fn batch(messages: Vec<SqsMessage>) -> SqsEvent {
    sqs_batch(messages)
}

async fn setup(max_attempts: u32) -> (Tables, Arc<SummarizeHandler>) {
    let t = fresh_tables(&sdk().await).await;
    let handler = Arc::new(t.summarizer(ModulesConfig::empty(), max_attempts));
    (t, handler)
}

async fn row(t: &Tables, number: u64) -> Item {
    stored_row(&t.prs, REPO, number).await
}

fn n(item: &Item, name: &str) -> u64 {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn failed(r: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<String> {
    r.batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

/// The numbers of the entries of `module`.
async fn entry_numbers(t: &Tables, module: &str) -> Vec<u64> {
    t.module_entries(REPO, module)
        .await
        .iter()
        .map(|e| e.number)
        .collect()
}

/// A handler whose entries table does not exist: every entry write fails (DynamoDB answers
/// ResourceNotFoundException), a transient failure as far as the worker can tell.
fn broken(t: &Tables, max_attempts: u32) -> Arc<SummarizeHandler> {
    let mut broken = t.clone();
    broken.entries =
        stages::store::EntryStore::new(t.prs.client().clone(), "no-such-entries-table");
    Arc::new(broken.summarizer(ModulesConfig::empty(), max_attempts))
}

#[tokio::test]
async fn a_sequential_duplicate_and_a_redelivery_after_done_write_one_entry() {
    let (t, handler) = setup(5).await;
    pending(&t, 2).await;
    let first = handler
        .handle(batch(vec![message("m1", 2)]), within(30), "inv-1")
        .await;
    assert!(first.batch_item_failures.is_empty(), "{first:?}");
    let again = handler
        .handle(
            batch(vec![message("m1", 2), message("m2", 2)]),
            within(30),
            "inv-2",
        )
        .await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");
    // No files known (not enriched): the repo itself is the one module.
    assert_eq!(entry_numbers(&t, REPO).await, [2]);
    let item = row(&t, 2).await;
    assert!(item.contains_key(attr::SUMMARIZED_AT));
    assert_eq!(item[attr::MODULES].as_l().unwrap()[0].as_s().unwrap(), REPO);
    assert_eq!(
        item[attr::ENTRY_MODULES].as_ss().unwrap(),
        &[REPO.to_string()]
    );
    for gone in [attr::PENDING_SHARD, attr::LEASE_OWNER, attr::LEASE_UNTIL] {
        assert!(
            !item.contains_key(gone),
            "{gone} must be removed by the commit"
        );
    }
    assert_eq!(
        s(&item, attr::SUMMARY),
        "This is a pretty simple change that we need to pull into master."
    );
    assert_eq!(n(&item, attr::ATTEMPTS), 1, "one claim, one attempt");
    // The module's page is marked stale, with the PR's year.
    let page = t.pages.get(REPO, REPO).await.unwrap().unwrap();
    assert!(page.stale.is_some());
    assert!(page.stale_years.contains("2019"));
}

#[tokio::test]
async fn each_module_gets_an_entry_with_only_its_own_files() {
    let (t, _) = setup(5).await;
    let config = ModulesConfig::from_yaml(
        "Codertocat/Hello-World:\n  docs: ['*.md', 'docs/**']\n  core: ['src/**']\n",
    )
    .unwrap();
    let handler = Arc::new(t.summarizer(config, 5));
    pending(&t, 3).await;
    with_files(
        &t,
        3,
        &[("src/a.rs", 10, 2), ("src/b.rs", 1, 1), ("README.md", 3, 0)],
    )
    .await;
    let r = handler
        .handle(batch(vec![message("m", 3)]), within(30), "inv")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    // The invocation's EMF lines: one message summarized, nothing else; no model refused (a
    // line of its own, per function, for its alarm).
    let lines = handler.emf_line(OffsetDateTime::now_utc());
    let (outcomes, refused) = lines.split_once('\n').unwrap();
    let emf: serde_json::Value = serde_json::from_str(outcomes).unwrap();
    let refused: serde_json::Value = serde_json::from_str(refused).unwrap();
    assert_eq!(refused["SummaryModelRefused"], 0);
    assert_eq!(
        refused["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        serde_json::json!([["FunctionName"]])
    );
    assert_eq!(emf["MessagesSummarized"], 1);
    assert_eq!(emf["MessagesFailed"], 0);
    assert_eq!(emf["MessagesGaveUp"], 0);
    let core = t.module_entries(REPO, "core").await;
    assert_eq!(core.len(), 1);
    let paths: Vec<&str> = core[0].files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["src/a.rs", "src/b.rs"]);
    assert_eq!((core[0].files_here, core[0].files_elsewhere), (2, 1));
    assert_eq!(core[0].elsewhere[0].module, "docs");
    let docs = t.module_entries(REPO, "docs").await;
    assert_eq!(docs[0].files.len(), 1);
    assert!(t
        .pages
        .get(REPO, "core")
        .await
        .unwrap()
        .unwrap()
        .stale
        .is_some());
    assert!(t
        .pages
        .get(REPO, "docs")
        .await
        .unwrap()
        .unwrap()
        .stale
        .is_some());
}

#[tokio::test]
async fn ten_concurrent_duplicates_write_one_entry() {
    let (t, handler) = setup(5).await;
    pending(&t, 4).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..10 {
        let handler = handler.clone();
        tasks.spawn(async move {
            handler
                .handle(
                    batch(vec![message("same", 4)]),
                    within(30),
                    &format!("inv-{i}"),
                )
                .await
        });
    }
    let mut failures = 0;
    while let Some(r) = tasks.join_next().await {
        failures += r.unwrap().batch_item_failures.len();
    }
    assert_eq!(
        failures, 0,
        "copies that met a live lease or a finished row are dropped, not failed"
    );
    let retry = handler
        .handle(batch(vec![message("same", 4)]), within(30), "inv-late")
        .await;
    assert!(retry.batch_item_failures.is_empty());
    assert_eq!(entry_numbers(&t, REPO).await, [4]);
    let item = row(&t, 4).await;
    assert!(item.contains_key(attr::SUMMARIZED_AT));
    assert_eq!(
        n(&item, attr::ATTEMPTS),
        1,
        "the copies that met a live lease counted no attempt"
    );
}

#[tokio::test]
async fn a_failure_is_counted_then_the_retry_writes_once() {
    let (t, handler) = setup(5).await;
    pending(&t, 5).await;
    let first = broken(&t, 5)
        .handle(batch(vec![message("m", 5)]), within(30), "inv-1")
        .await;
    assert_eq!(failed(&first), ["m"]);
    let item = row(&t, 5).await;
    assert_eq!(n(&item, attr::ATTEMPTS), 1);
    assert!(
        s(&item, attr::LAST_ERROR).contains("no-such-entries-table"),
        "{item:?}"
    );
    assert!(
        !item.contains_key(attr::LEASE_OWNER),
        "the lease is released on failure"
    );
    assert!(item.contains_key(attr::PENDING_SHARD));
    let second = handler
        .handle(batch(vec![message("m", 5)]), within(30), "inv-2")
        .await;
    assert!(second.batch_item_failures.is_empty());
    assert_eq!(entry_numbers(&t, REPO).await, [5]);
    let item = row(&t, 5).await;
    assert!(!item.contains_key(attr::LAST_ERROR));
    assert_eq!(n(&item, attr::ATTEMPTS), 2);
}

/// Signals `entered`, then never returns: the worker is killed while it writes the summary.
#[derive(Default)]
struct Hanging {
    entered: tokio::sync::Notify,
    calls: AtomicUsize,
}

impl Summarizer for Hanging {
    fn summarize<'a>(
        &'a self,
        _input: &'a SummaryInput<'a>,
        _deadline: std::time::Instant,
    ) -> BoxFuture<'a, Summary> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            self.entered.notify_one();
            futures::future::pending::<Summary>().await
        })
    }
}

#[tokio::test]
async fn a_worker_killed_mid_work_writes_nothing_and_the_next_delivery_after_the_lease_writes_once()
{
    let (t, handler) = setup(5).await;
    pending(&t, 6).await;
    let hanging = Arc::new(Hanging::default());
    let doomed_handler = Arc::new(
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(hanging.clone())
            // A 2 s invocation that claims anyway: the lease it outlives is the point.
            .with_claim_margin(Duration::ZERO),
    );
    let doomed = tokio::spawn(async move {
        // A 2 s invocation: its lease lasts as long.
        doomed_handler
            .handle(batch(vec![message("m", 6)]), within(2), "inv-killed")
            .await
    });
    hanging.entered.notified().await;
    doomed.abort();
    assert!(doomed.await.unwrap_err().is_cancelled());
    assert!(
        entry_numbers(&t, REPO).await.is_empty(),
        "nothing was written"
    );
    let item = row(&t, 6).await;
    assert!(
        item.contains_key(attr::LEASE_OWNER),
        "the dead worker's lease is still there"
    );
    assert_eq!(n(&item, attr::ATTEMPTS), 1, "the killed attempt counted");

    let early = handler
        .handle(batch(vec![message("m", 6)]), within(30), "inv-early")
        .await;
    assert!(
        early.batch_item_failures.is_empty(),
        "a live lease: the duplicate is dropped, burning no receive toward the DLQ"
    );
    assert!(
        row(&t, 6).await.contains_key(attr::PENDING_SHARD),
        "still pending: the sweeper enqueues it again once the lease and its claim expire"
    );
    assert_eq!(
        n(&row(&t, 6).await, attr::ATTEMPTS),
        1,
        "a held lease is not an attempt"
    );
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let after = handler
        .handle(batch(vec![message("m", 6)]), within(30), "inv-after")
        .await;
    assert!(after.batch_item_failures.is_empty(), "{after:?}");
    assert_eq!(entry_numbers(&t, REPO).await, [6]);
    assert_eq!(n(&row(&t, 6).await, attr::ATTEMPTS), 2);
}

#[tokio::test]
async fn a_worker_killed_after_writing_entries_before_summarized_at_leaves_one_entry() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    pending(&t, 7).await;
    // The worker's DynamoDB calls go through a proxy that holds its first page write (the
    // stale mark, after the entries): the worker is stuck there and then killed.
    let proxy = DynamoProxy::start(endpoint()).await;
    proxy.hold("UpdateItem", t.pages.table_name(), Hold::Before);
    let client = aws_sdk_dynamodb::Client::new(&proxy.sdk().await);
    let through = Tables {
        prs: stages::store::PrStore::new(client.clone(), t.prs.table().clone()),
        entries: stages::store::EntryStore::new(client.clone(), t.entries.table_name()),
        pages: stages::store::PageStore::new(client, t.pages.table_name()),
    };
    let doomed_handler = Arc::new(
        through
            .summarizer(ModulesConfig::empty(), 5)
            .with_claim_margin(Duration::ZERO),
    );
    let doomed = tokio::spawn(async move {
        doomed_handler
            .handle(batch(vec![message("m", 7)]), within(2), "inv-killed")
            .await
    });
    proxy.held.notified().await;
    doomed.abort();
    let _ = doomed.await;
    assert_eq!(entry_numbers(&t, REPO).await, [7], "the entry was written");
    assert!(!row(&t, 7).await.contains_key(attr::SUMMARIZED_AT));
    // After the lease, the redelivery writes the entry again (the same key) and commits.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let handler = Arc::new(t.summarizer(ModulesConfig::empty(), 5));
    let r = handler
        .handle(batch(vec![message("m", 7)]), within(30), "inv-after")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(entry_numbers(&t, REPO).await, [7], "one entry, not two");
    assert!(row(&t, 7).await.contains_key(attr::SUMMARIZED_AT));
    assert!(t
        .pages
        .get(REPO, REPO)
        .await
        .unwrap()
        .unwrap()
        .stale
        .is_some());
}

#[tokio::test]
async fn a_commit_applied_without_an_answer_is_done_on_the_next_delivery() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    pending(&t, 8).await;
    let proxy = DynamoProxy::start(endpoint()).await;
    // The commit: the PR row's UpdateItem that sets summarizedAt, applied but never answered.
    proxy.hold("UpdateItem", ":summarizedAt\"", Hold::After);
    let client = aws_sdk_dynamodb::Client::new(&proxy.sdk().await);
    let through = Tables {
        prs: stages::store::PrStore::new(client.clone(), t.prs.table().clone()),
        entries: stages::store::EntryStore::new(client.clone(), t.entries.table_name()),
        pages: stages::store::PageStore::new(client, t.pages.table_name()),
    };
    let doomed_handler = Arc::new(through.summarizer(ModulesConfig::empty(), 5));
    let doomed = tokio::spawn(async move {
        doomed_handler
            .handle(batch(vec![message("m", 8)]), within(30), "inv-timed-out")
            .await
    });
    proxy.held.notified().await;
    doomed.abort();
    let _ = doomed.await;
    assert!(
        row(&t, 8).await.contains_key(attr::SUMMARIZED_AT),
        "applied"
    );
    let handler = Arc::new(t.summarizer(ModulesConfig::empty(), 5));
    let r = handler
        .handle(batch(vec![message("m", 8)]), within(30), "inv-redelivered")
        .await;
    assert!(r.batch_item_failures.is_empty());
    assert_eq!(entry_numbers(&t, REPO).await, [8]);
}

/// Sleeps, then answers a fixed paragraph.
struct Slow(Duration, &'static str);

impl Summarizer for Slow {
    fn summarize<'a>(
        &'a self,
        _input: &'a SummaryInput<'a>,
        _deadline: std::time::Instant,
    ) -> BoxFuture<'a, Summary> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            Summary {
                text: self.1.to_string(),
                kind: None,
                source: SummarySource::Llm {
                    model: "stand-in".into(),
                },
            }
        })
    }
}

#[tokio::test]
async fn a_lost_lease_race_ends_in_one_entry_the_later_claims() {
    let (t, _) = setup(5).await;
    pending(&t, 9).await;
    // Worker A's summary takes 2.5 s, beyond the lease of its 2 s invocation.
    let slow = Arc::new(
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(Arc::new(Slow(Duration::from_millis(2_500), "A's summary")))
            .with_claim_margin(Duration::ZERO),
    );
    let a = tokio::spawn(async move {
        slow.handle(batch(vec![message("m", 9)]), within(2), "inv-slow")
            .await
    });
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    // Worker B finds the lease expired, takes it, writes and commits.
    let fast = Arc::new(
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(Arc::new(Slow(Duration::ZERO, "B's summary"))),
    );
    let b = fast
        .handle(batch(vec![message("m", 9)]), within(30), "inv-fast")
        .await;
    assert!(b.batch_item_failures.is_empty(), "{b:?}");
    // A wakes up: its writes are refused (lease and generation superseded), its message fails.
    assert_eq!(failed(&a.await.unwrap()), ["m"]);
    let entries = t.module_entries(REPO, REPO).await;
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].summary, "B's summary");
    assert_eq!(s(&row(&t, 9).await, attr::SUMMARY), "B's summary");
}

#[tokio::test]
async fn a_row_that_always_fails_is_given_up_at_max_attempts() {
    let (t, handler) = setup(3).await;
    pending(&t, 10).await;
    let failing = broken(&t, 3);
    for attempt in 1..=3 {
        let r = failing
            .handle(
                batch(vec![message("m", 10)]),
                within(30),
                &format!("inv-{attempt}"),
            )
            .await;
        if attempt < 3 {
            assert_eq!(failed(&r), ["m"], "attempt {attempt}");
        } else {
            assert!(r.batch_item_failures.is_empty(), "given up: SQS stops");
        }
    }
    let item = row(&t, 10).await;
    assert!(item.contains_key(attr::FAILED_AT));
    assert!(
        s(&item, attr::FAILED_REASON).contains("gave up after 3 attempts"),
        "{item:?}"
    );
    assert!(
        !item.contains_key(attr::PENDING_SHARD),
        "out of the pending index"
    );
    assert!(!item.contains_key(attr::SUMMARIZED_AT));
    // A later redelivery (without the give-up attribute) is a no-op.
    let r = handler
        .handle(batch(vec![message("m", 10)]), within(30), "inv-late")
        .await;
    assert!(r.batch_item_failures.is_empty());
    assert!(entry_numbers(&t, REPO).await.is_empty());
}

#[tokio::test]
async fn an_unreadable_message_fails_and_a_deleted_row_is_done() {
    let (t, handler) = setup(5).await;
    let mut garbage = SqsMessage::default();
    garbage.message_id = Some("garbage".into());
    garbage.body = Some("not json".into());
    let r = handler
        .handle(
            batch(vec![garbage, message("ghost", 404)]),
            within(30),
            "inv",
        )
        .await;
    assert_eq!(
        failed(&r),
        ["garbage"],
        "the unreadable one fails every time (DLQ by redrive)"
    );
    assert!(t
        .prs
        .get(&RepoName::parse(REPO).unwrap(), 404)
        .await
        .unwrap()
        .is_none());
}

/// A DLQ of its own, and the summarize handler that sends given-up rows' messages to it.
async fn with_dlq(
    t: &Tables,
    handler: SummarizeHandler,
) -> (Arc<SummarizeHandler>, aws_sdk_sqs::Client, String) {
    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let dlq = sqs
        .create_queue()
        .queue_name(format!("dlq-{}", uuid::Uuid::new_v4().simple()))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let _ = t;
    (
        Arc::new(handler.with_dead_letter_queue(sqs.clone(), dlq.clone())),
        sqs,
        dlq,
    )
}

async fn dead_letters(sqs: &aws_sdk_sqs::Client, dlq: &str) -> Vec<aws_sdk_sqs::types::Message> {
    sqs.receive_message()
        .queue_url(dlq)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default()
}

#[tokio::test]
async fn a_poison_row_killed_mid_work_five_times_ends_failed_with_its_message_in_the_dlq_and_a_redrive_summarizes_it(
) {
    let (t, _) = setup(5).await;
    pending(&t, 11).await;
    let hanging = Arc::new(Hanging::default());
    let (killer, sqs, dlq) = with_dlq(
        &t,
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(hanging.clone())
            .with_claim_margin(Duration::ZERO),
    )
    .await;
    for kill in 1..=5 {
        let h = killer.clone();
        let task = tokio::spawn(async move {
            h.handle(
                batch(vec![message("m", 11)]),
                within(1),
                &format!("inv-{kill}"),
            )
            .await
        });
        hanging.entered.notified().await;
        task.abort();
        let _ = task.await;
        assert_eq!(n(&row(&t, 11).await, attr::ATTEMPTS), kill as u64);
        tokio::time::sleep(Duration::from_millis(1_100)).await; // the lease expires
    }
    // The sixth delivery finds the attempts used up: DLQ first, then failedAt.
    let r = killer
        .handle(batch(vec![message("m", 11)]), within(30), "inv-6")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(
        hanging.calls.load(Ordering::SeqCst),
        5,
        "not tried a sixth time"
    );
    let item = row(&t, 11).await;
    let failed_at = s(&item, attr::FAILED_AT).to_string();
    let reason = s(&item, attr::FAILED_REASON);
    assert!(reason.contains("gave up after 5 attempts"), "{reason}");
    assert!(reason.contains("crash, timeout or panic"), "{reason}");
    assert!(!item.contains_key(attr::PENDING_SHARD));
    let dead = dead_letters(&sqs, &dlq).await;
    assert_eq!(dead.len(), 1);
    let attributes = dead[0].message_attributes().unwrap();
    assert_eq!(
        attributes[GIVEN_UP_AT_ATTRIBUTE].string_value(),
        Some(failed_at.as_str())
    );
    assert!(attributes["failedReason"]
        .string_value()
        .unwrap()
        .contains("gave up"));

    // Fixed, then redriven (StartMessageMoveTask keeps the body and the attributes): the row
    // comes back and is summarized once.
    let fixed = Arc::new(t.summarizer(ModulesConfig::empty(), 5));
    let r = fixed
        .handle(
            batch(vec![lambda_message(&dead[0])]),
            within(30),
            "inv-redrive",
        )
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    let item = row(&t, 11).await;
    assert!(item.contains_key(attr::SUMMARIZED_AT), "{item:?}");
    assert!(!item.contains_key(attr::FAILED_AT));
    assert_eq!(n(&item, attr::ATTEMPTS), 1, "attempts start again");
    assert_eq!(entry_numbers(&t, REPO).await, [11]);
    // The same message redriven twice: no second effect.
    let r = fixed
        .handle(
            batch(vec![lambda_message(&dead[0])]),
            within(30),
            "inv-redrive-2",
        )
        .await;
    assert!(r.batch_item_failures.is_empty());
    assert_eq!(entry_numbers(&t, REPO).await, [11]);
}

#[tokio::test]
async fn poison_messages_end_in_the_moto_dlq_and_the_failing_row_is_marked_failed() {
    use devstack::queues::{ensure_queue_with_dlq, queue_arn, QueueSettings, SqsEventSource};
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    pending(&t, 12).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let settings = QueueSettings {
        batch_size: 5,
        visibility_timeout: Duration::from_secs(1),
        max_receive_count: 4,
    };
    let (url, dlq) = ensure_queue_with_dlq(
        &sqs,
        &format!("poison-{}", uuid::Uuid::new_v4().simple()),
        &settings,
    )
    .await
    .unwrap();
    let handler = Arc::new(
        {
            let mut broken = t.clone();
            broken.entries =
                stages::store::EntryStore::new(t.prs.client().clone(), "no-such-table");
            broken.summarizer(ModulesConfig::empty(), 3)
        }
        .with_dead_letter_queue(sqs.clone(), dlq.clone()),
    );
    sqs.send_message()
        .queue_url(&url)
        .message_body(format!(r#"{{"repo":"{REPO}","prNumber":12}}"#))
        .send()
        .await
        .unwrap();
    sqs.send_message()
        .queue_url(&url)
        .message_body("not a summarize message")
        .send()
        .await
        .unwrap();
    let source = SqsEventSource::new(
        sqs.clone(),
        url.clone(),
        queue_arn(&sqs, &url).await.unwrap(),
        settings,
    );
    let batch_handler = devstack::dev::summarize_batch_handler(handler);
    let mut dead = Vec::new();
    for _ in 0..40 {
        source.poll_once(&batch_handler).await.unwrap();
        dead.extend(dead_letters(&sqs, &dlq).await);
        if dead.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut bodies: Vec<&str> = dead.iter().map(|m| m.body().unwrap()).collect();
    bodies.sort();
    assert_eq!(
        bodies,
        [
            "not a summarize message",
            r#"{"repo":"Codertocat/Hello-World","prNumber":12}"#
        ]
    );
    let given_up = dead
        .iter()
        .find(|m| m.body().unwrap().contains("prNumber"))
        .unwrap();
    let reason = given_up.message_attributes().unwrap()["failedReason"]
        .string_value()
        .unwrap();
    assert!(reason.contains("no-such-table"), "{reason}");
    let item = row(&t, 12).await;
    assert_eq!(n(&item, attr::ATTEMPTS), 3);
    assert!(item.contains_key(attr::FAILED_AT));
    assert!(s(&item, attr::FAILED_REASON).contains("gave up after 3 attempts"));
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let left = sqs
        .receive_message()
        .queue_url(&url)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// Counts its calls, answers a fixed paragraph (as an LLM would).
struct Counting(AtomicUsize);

impl Summarizer for Counting {
    fn summarize<'a>(
        &'a self,
        _input: &'a SummaryInput<'a>,
        _deadline: std::time::Instant,
    ) -> BoxFuture<'a, Summary> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            Summary {
                text: "Written once, kept on the row.".into(),
                kind: None,
                source: SummarySource::Llm {
                    model: "stand-in".into(),
                },
            }
        })
    }
}

#[tokio::test]
async fn the_summary_is_generated_once_even_when_the_writes_are_retried() {
    let (t, _) = setup(5).await;
    pending(&t, 13).await;
    let counting = Arc::new(Counting(Default::default()));
    let mut broken_tables = t.clone();
    broken_tables.entries = stages::store::EntryStore::new(t.prs.client().clone(), "no-such-table");
    let failing = Arc::new(
        broken_tables
            .summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(counting.clone()),
    );
    assert_eq!(
        failed(
            &failing
                .handle(batch(vec![message("m", 13)]), within(30), "inv-1")
                .await
        ),
        ["m"]
    );
    assert_eq!(
        s(&row(&t, 13).await, attr::SUMMARY),
        "Written once, kept on the row."
    );
    let working = Arc::new(
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(counting.clone()),
    );
    assert!(working
        .handle(batch(vec![message("m", 13)]), within(30), "inv-2")
        .await
        .batch_item_failures
        .is_empty());
    assert_eq!(
        counting.0.load(Ordering::SeqCst),
        1,
        "never generated twice"
    );
    assert_eq!(
        t.module_entries(REPO, REPO).await[0].summary,
        "Written once, kept on the row."
    );
}

#[tokio::test]
async fn summarizing_again_with_other_modules_deletes_the_entries_left_behind() {
    let (t, _) = setup(5).await;
    pending(&t, 14).await;
    with_files(&t, 14, &[("lib/a.rs", 1, 0)]).await;
    let first = Arc::new(t.summarizer(
        ModulesConfig::from_yaml("Codertocat/Hello-World:\n  old: ['lib/**']\n").unwrap(),
        5,
    ));
    assert!(first
        .handle(batch(vec![message("m", 14)]), within(30), "inv-1")
        .await
        .batch_item_failures
        .is_empty());
    assert_eq!(entry_numbers(&t, "old").await, [14]);
    // An operator reprocesses the row (summarizedAt removed, pending again) after the modules
    // config changed.
    t.prs
        .client()
        .update_item()
        .table_name(t.prs.table_name())
        .set_key(Some(stages::store::key(
            &RepoName::parse(REPO).unwrap(),
            14,
        )))
        .update_expression("REMOVE #s SET #p = :p")
        .expression_attribute_names("#s", attr::SUMMARIZED_AT)
        .expression_attribute_names("#p", attr::PENDING_SHARD)
        .expression_attribute_values(":p", AttributeValue::S("2".into()))
        .send()
        .await
        .unwrap();
    let second = Arc::new(t.summarizer(
        ModulesConfig::from_yaml("Codertocat/Hello-World:\n  new: ['lib/**']\n").unwrap(),
        5,
    ));
    assert!(second
        .handle(batch(vec![message("m", 14)]), within(30), "inv-2")
        .await
        .batch_item_failures
        .is_empty());
    assert!(
        entry_numbers(&t, "old").await.is_empty(),
        "deleted from the module it left"
    );
    assert_eq!(entry_numbers(&t, "new").await, [14]);
    assert_eq!(
        row(&t, 14).await[attr::ENTRY_MODULES].as_ss().unwrap(),
        &["new".to_string()]
    );
    // Both pages are rebuilt: the old one loses the entry.
    assert!(t
        .pages
        .get(REPO, "old")
        .await
        .unwrap()
        .unwrap()
        .stale
        .is_some());
}

#[tokio::test]
async fn the_sample_sqs_event_is_handled_by_the_worker() {
    let (t, handler) = setup(5).await;
    pending(&t, 2).await;
    let root = devstack::emulator::repo_root();
    let sample: SqsEvent = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/summarize.sqs.json")).unwrap(),
    )
    .unwrap();
    let r = handler.handle(sample, within(30), "sample").await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(entry_numbers(&t, REPO).await, [2]);
    let scheduled: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/sweeper.scheduled.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(scheduled["source"], "aws.scheduler");
    let build: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/page-builder.scheduled.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(build["detail-type"], "Scheduled Event");
}

/// A repository without a config entry of its own, whose stored context declares workspace
/// packages and CODEOWNERS: files are tagged by package (its README included), root Markdown
/// is docs, the owner names what no package holds.
#[tokio::test]
async fn a_stored_workspace_context_names_modules_by_package() {
    use stages::context::{Package, RepoContext};
    let (t, _) = setup(5).await;
    // The bundled default for repositories without an entry (this one has its own there).
    let default =
        ModulesConfig::from_yaml("\"*\":\n  docs: ['*.md', 'docs/**']\n  ci: ['.github/**']\n")
            .unwrap();
    let handler = Arc::new(t.summarizer(default, 5));
    let context = RepoContext {
        checked_at: "2026-12-01T00:00:00Z".into(),
        packages: vec![Package {
            name: "acme-api".into(),
            dir: "crates/api".into(),
            description: Some("The public HTTP API.".into()),
            manifest: Some("crates/api/Cargo.toml".into()),
        }],
        codeowners: Some("/infra/ @acme/platform\n".into()),
        codeowners_path: Some(".github/CODEOWNERS".into()),
        ..RepoContext::default()
    };
    assert!(t.pages.contexts().put(REPO, &context, None).await.unwrap());
    pending(&t, 4).await;
    with_files(
        &t,
        4,
        &[
            ("crates/api/src/lib.rs", 10, 1),
            ("crates/api/README.md", 2, 0),
            ("README.md", 1, 0),
            ("infra/main.tf", 1, 1),
        ],
    )
    .await;
    let r = handler
        .handle(batch(vec![message("m", 4)]), within(30), "inv")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    let api = t.module_entries(REPO, "acme-api").await;
    assert_eq!(api.len(), 1);
    assert_eq!(api[0].files_here, 2, "{:?}", api[0].files);
    assert_eq!(entry_numbers(&t, "docs").await, [4]);
    assert_eq!(entry_numbers(&t, "acme/platform").await, [4]);
    assert!(entry_numbers(&t, "crates").await.is_empty());
}

/// Review defect 6: the LLM call is cut to what is left of the invocation (keeping time for the
/// writes), and the extractive summary is written instead of the invocation being killed with
/// the attempt used up.
#[tokio::test]
async fn a_slow_llm_never_outlives_the_invocation_and_the_extractive_summary_is_written() {
    use support::messages_stub::{MessagesStub, Reply};
    let (t, _) = setup(5).await;
    pending(&t, 13).await;
    let stub = MessagesStub::start("sk-ant-slow").await;
    stub.set_default(Reply::Hang);
    // 15 s per attempt and two retries, as configured in production.
    let llm = chronicle_llm::LlmSummarizer::new(
        &stub.url(),
        stages::secret::Secret::new("sk-ant-slow"),
        "claude-sonnet-4-5",
        Duration::from_secs(15),
    );
    let handler = Arc::new(
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(Arc::new(llm)),
    );
    let started = std::time::Instant::now();
    let r = handler
        .handle(batch(vec![message("m", 13)]), within(14), "inv")
        .await;
    let took = started.elapsed();
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert!(
        took < Duration::from_secs(13),
        "it kept time for its writes: {took:?}"
    );
    assert!(stub.request_count() >= 1, "the LLM was asked");
    let item = row(&t, 13).await;
    assert!(item.contains_key(attr::SUMMARIZED_AT));
    assert_eq!(n(&item, attr::ATTEMPTS), 1);
    assert!(
        !s(&item, attr::SUMMARY).is_empty(),
        "the extractive summary"
    );
    assert_eq!(entry_numbers(&t, REPO).await, [13]);
}

/// Review defect 6: a message picked up with too little of the invocation left claims nothing
/// (no attempt counted), and gives the sweep's claim back so the next sweep enqueues the row.
#[tokio::test]
async fn too_little_time_left_claims_nothing_and_the_next_sweep_takes_the_row() {
    let (t, handler) = setup(5).await;
    pending(&t, 14).await;
    let repo = RepoName::parse(REPO).unwrap();
    let now = OffsetDateTime::now_utc();
    let shard = stages::store::pending_shard(14, t.prs.table().pending_shards);
    assert!(t
        .prs
        .claim_for_queue(&repo, 14, &shard, now, now + time::Duration::minutes(15))
        .await
        .unwrap());
    let r = handler
        .handle(batch(vec![message("m", 14)]), within(4), "inv-late")
        .await;
    assert!(r.batch_item_failures.is_empty(), "not a failure: {r:?}");
    let item = row(&t, 14).await;
    for absent in [
        attr::ATTEMPTS,
        attr::LEASE_OWNER,
        attr::ENQUEUED_UNTIL,
        attr::SUMMARIZED_AT,
    ] {
        assert!(!item.contains_key(absent), "{absent}: {item:?}");
    }
    assert!(item.contains_key(attr::PENDING_SHARD), "still pending");
    // The next delivery with time enough summarizes it.
    let r = handler
        .handle(batch(vec![message("m", 14)]), within(30), "inv")
        .await;
    assert!(r.batch_item_failures.is_empty());
    assert_eq!(n(&row(&t, 14).await, attr::ATTEMPTS), 1);
}

/// The module entries of a repository, `(module, number)` sorted.
async fn entries_by_module(t: &Tables, modules: &[&str]) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for module in modules {
        for e in t.module_entries(REPO, module).await {
            out.push((e.module.to_string(), e.number));
        }
    }
    out.sort();
    out
}

/// Review defect 2: a PR summarized before its enrichment landed (tagged with the repository
/// itself, "Paths: not known") moves to its real module once the files arrive: enrichment puts
/// the row back, the worker rewrites its entries there and deletes the misfiled one, keeping
/// its summary (no second LLM call).
#[tokio::test]
async fn late_enrichment_moves_a_pr_summarized_without_files_to_its_module() {
    let (t, _) = setup(5).await;
    pending(&t, 15).await;
    let counting = Arc::new(Counting(AtomicUsize::new(0)));
    let handler = Arc::new(
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(counting.clone()),
    );
    let r = handler
        .handle(batch(vec![message("m", 15)]), within(30), "inv")
        .await;
    assert!(r.batch_item_failures.is_empty());
    assert_eq!(
        entries_by_module(&t, &[REPO, "src"]).await,
        [(REPO.to_string(), 15)]
    );
    // The enrichment lands late, under its lease, as the enrich stage writes it.
    let repo = RepoName::parse(REPO).unwrap();
    let now = OffsetDateTime::now_utc();
    let claim = t
        .prs
        .claim_enrichment(&repo, 15, "late", now, now + time::Duration::seconds(30))
        .await
        .unwrap();
    assert!(matches!(claim, stages::store::EnrichClaim::Claimed(_)));
    let enrichment = stages::enrich::Enrichment {
        totals: stages::github::PullTotals {
            commits: 1,
            additions: 12,
            deletions: 3,
            changed_files: 1,
            ..Default::default()
        },
        files: vec![stages::github::ChangedFile {
            path: "src/lib.rs".into(),
            status: "modified".into(),
            additions: 12,
            deletions: 3,
        }],
        linked_issues: vec![],
        reviewers: vec![],
    };
    assert!(t
        .prs
        .complete_enrichment(&repo, 15, "late", enrichment.attributes(500), now)
        .await
        .unwrap());
    let item = row(&t, 15).await;
    assert!(
        !item.contains_key(attr::SUMMARIZED_AT) && item.contains_key(attr::PENDING_SHARD),
        "put back to be summarized: {item:?}"
    );
    let r = handler
        .handle(batch(vec![message("m2", 15)]), within(30), "inv-2")
        .await;
    assert!(r.batch_item_failures.is_empty());
    assert_eq!(
        entries_by_module(&t, &[REPO, "src"]).await,
        [("src".to_string(), 15)],
        "on its module, the misfiled entry deleted"
    );
    assert_eq!(counting.0.load(Ordering::SeqCst), 1, "the summary was kept");
    let stale: Vec<String> = t
        .pages
        .stale_pages()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.module)
        .collect();
    assert!(stale.contains(&REPO.to_string()) && stale.contains(&"src".to_string()));
}

/// Review defects 2 and 9: the row changes while its entries are being written (its
/// enrichment lands, its PR is edited): the commit is refused and the entries are written
/// again from the row as it is now, so neither change is lost.
#[tokio::test]
async fn a_change_that_lands_while_entries_are_written_is_not_lost() {
    let (t, _) = setup(5).await;
    pending(&t, 16).await;
    let slow = Arc::new(Slow(Duration::from_millis(1_500), "A summary."));
    let handler = Arc::new(
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(slow),
    );
    let worker = {
        let handler = handler.clone();
        tokio::spawn(async move {
            handler
                .handle(batch(vec![message("m", 16)]), within(30), "inv")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    // While the summary is written: the files land, and the title is edited.
    with_files(&t, 16, &[("src/lib.rs", 5, 1)]).await;
    let mut edited = merged_payload();
    edited["pull_request"]["number"] = serde_json::json!(16);
    edited["pull_request"]["title"] = serde_json::json!("Renamed after merge");
    edited["pull_request"]["updated_at"] = serde_json::json!("2019-05-16T10:00:00Z");
    store_merged(&t.prs, &edited, OffsetDateTime::now_utc()).await;
    let r = worker.await.unwrap();
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    let entries = t.module_entries(REPO, "src").await;
    assert_eq!(entries.len(), 1, "written again with the files");
    assert_eq!(entries[0].title, "Renamed after merge");
    assert!(t.module_entries(REPO, REPO).await.is_empty());
    assert!(row(&t, 16).await.contains_key(attr::SUMMARIZED_AT));
}

/// Issue 38, defect 5: a summary the model's guardrail withheld falls back to the extractive
/// summary after exactly one paid call, and is counted (`SummariesWithheld`). The row keeps
/// which input was withheld (with the model that withheld it). A reprocess that asks for a new
/// summary is the operator asking again on purpose (a guardrail changed where Chronicle cannot
/// see it): the model is asked once more; so it is once the PR's body changed.
#[tokio::test]
async fn a_withheld_summary_is_not_asked_again_for_the_same_input() {
    use support::converse_stub::{ConverseReply, ConverseStub, GUARDRAIL_BLOCKED};
    const PROFILE: &str = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
    let (t, _) = setup(5).await;
    pending(&t, 17).await;
    let stub = ConverseStub::start(PROFILE).await;
    stub.script((0..4).map(|_| ConverseReply::Filtered("guardrail_intervened")));
    let sdk = sdk().await;
    let writer = chronicle_llm::Writer::bedrock_with(stub.client(&sdk), PROFILE);
    let handler = Arc::new(
        t.summarizer(ModulesConfig::empty(), 5)
            .with_summarizer(Arc::new(chronicle_llm::WriterSummarizer::new(writer))),
    );
    let r = handler
        .handle(batch(vec![message("m", 17)]), within(30), "inv")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(stub.requests().len(), 1, "one paid call");
    let item = row(&t, 17).await;
    let summary = s(&item, attr::SUMMARY).to_string();
    assert!(item.contains_key(attr::SUMMARIZED_AT));
    assert!(
        !summary.is_empty() && summary != GUARDRAIL_BLOCKED,
        "{summary}"
    );
    let lines = handler.emf_line(OffsetDateTime::now_utc());
    assert!(lines.contains("\"SummariesWithheld\":1"), "{lines}");

    // Reprocessed with a new summary asked for (issue 38, review finding 6): the withheld
    // mark goes with the summary, and the model is asked once more.
    let repo = RepoName::parse(REPO).unwrap();
    let again = t
        .prs
        .reprocess(&repo, 17, true, OffsetDateTime::now_utc())
        .await
        .unwrap();
    assert_eq!(again, stages::store::Reprocessed::Pending);
    assert!(
        !row(&t, 17).await.contains_key(attr::SUMMARY_WITHHELD),
        "--new-summary removes summaryWithheld"
    );
    let r = handler
        .handle(batch(vec![message("m2", 17)]), within(30), "inv-2")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(
        stub.requests().len(),
        2,
        "asked again, as the operator asked"
    );
    let item = row(&t, 17).await;
    assert_eq!(s(&item, attr::SUMMARY), summary, "the extractive summary");
    assert!(item.contains_key(attr::SUMMARIZED_AT));

    // The body edited: a changed input, asked once more.
    let mut edited = merged_payload();
    edited["pull_request"]["number"] = serde_json::json!(17);
    edited["pull_request"]["body"] = serde_json::json!("Retries now back off for longer.");
    edited["pull_request"]["updated_at"] = serde_json::json!("2019-05-16T10:00:00Z");
    store_merged(&t.prs, &edited, OffsetDateTime::now_utc()).await;
    t.prs
        .reprocess(&repo, 17, true, OffsetDateTime::now_utc())
        .await
        .unwrap();
    let r = handler
        .handle(batch(vec![message("m3", 17)]), within(30), "inv-3")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(stub.requests().len(), 3, "a changed input is asked once");
}

/// Removes the row's summary paragraph and puts it back to be summarized, keeping
/// `summaryWithheld`: what `reprocess --new-summary` of an earlier version left.
async fn without_summary(t: &Tables, number: u64) {
    let repo = RepoName::parse(REPO).unwrap();
    t.prs
        .client()
        .update_item()
        .table_name(t.prs.table_name())
        .set_key(Some(stages::store::key(&repo, number)))
        .update_expression("REMOVE #summary")
        .expression_attribute_names("#summary", attr::SUMMARY)
        .send()
        .await
        .unwrap();
    t.prs
        .reprocess(&repo, number, false, OffsetDateTime::now_utc())
        .await
        .unwrap();
}

/// Issue 38, review finding 6: a withheld summary is final for its input *and the model that
/// withheld it*. The same model is not asked again; another model is (an operator who changed
/// the model gets a new answer).
#[tokio::test]
async fn a_withheld_summary_is_asked_again_of_another_model() {
    use support::converse_stub::{ConverseReply, ConverseStub};
    const FIRST: &str = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
    const SECOND: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    let (t, _) = setup(5).await;
    pending(&t, 18).await;
    let sdk = sdk().await;
    let handler_of = |stub: &ConverseStub, model: &str| {
        let writer = chronicle_llm::Writer::bedrock_with(stub.client(&sdk), model);
        Arc::new(
            t.summarizer(ModulesConfig::empty(), 5)
                .with_summarizer(Arc::new(chronicle_llm::WriterSummarizer::new(writer))),
        )
    };
    let first = ConverseStub::start(FIRST).await;
    first.script((0..4).map(|_| ConverseReply::Filtered("content_filtered")));
    let handler = handler_of(&first, FIRST);
    let r = handler
        .handle(batch(vec![message("w1", 18)]), within(30), "w-1")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(first.requests().len(), 1);
    assert!(row(&t, 18).await.contains_key(attr::SUMMARY_WITHHELD));

    // The same model, the same input: not asked again.
    without_summary(&t, 18).await;
    let r = handler
        .handle(batch(vec![message("w2", 18)]), within(30), "w-2")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(
        first.requests().len(),
        1,
        "the same model is not asked again"
    );

    // Another model, the same input: asked.
    without_summary(&t, 18).await;
    let second = ConverseStub::start(SECOND).await;
    second.script([ConverseReply::Text(
        "Retries failed webhook deliveries with a backoff.".into(),
    )]);
    let r = handler_of(&second, SECOND)
        .handle(batch(vec![message("w3", 18)]), within(30), "w-3")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(second.requests().len(), 1, "another model is asked");
    let item = row(&t, 18).await;
    assert!(
        s(&item, attr::SUMMARY).contains("Retries failed webhook deliveries"),
        "{item:?}"
    );
}
