//! The summarize worker against the emulator: exactly one effect per PR, counted by a recording
//! publisher, whatever is duplicated, raced, retried or killed.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use futures::future::BoxFuture;
use shared::domain::RepoName;
use shared::narrative::ModulePage;
use shared::publish::{Publication, PublishError, Publisher};
use shared::store::{attr, Item, PrStore};
use shared::summarize::SummarizeHandler;
use shared::tagging::ModulesConfig;
use support::*;
use time::OffsetDateTime;

const REPO: &str = "Codertocat/Hello-World";

/// What the recorder does on its next calls, in order; then it succeeds.
#[derive(Clone)]
enum Step {
    Fail,
    Delay(Duration),
    /// Signals `entered`, then never returns (the worker is killed while in it).
    Hang,
}

#[derive(Default)]
struct Recorder {
    /// (module, PR numbers on the page) of every completed publish.
    published: Mutex<Vec<(String, Vec<u64>)>>,
    steps: Mutex<VecDeque<Step>>,
    entered: tokio::sync::Notify,
}

impl Recorder {
    fn then(&self, step: Step) {
        self.steps.lock().unwrap().push_back(step);
    }
    fn count(&self) -> usize {
        self.published.lock().unwrap().len()
    }
}

impl Publisher for Recorder {
    fn publish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        let page = p.page;
        Box::pin(async move {
            let step = self.steps.lock().unwrap().pop_front();
            match step {
                Some(Step::Fail) => {
                    return Err(PublishError::Remote {
                        target: "the recorder".into(),
                        message: "the publisher is down".into(),
                    })
                }
                Some(Step::Delay(d)) => tokio::time::sleep(d).await,
                Some(Step::Hang) => {
                    self.entered.notify_one();
                    futures::future::pending::<()>().await;
                }
                None => {}
            }
            let numbers = page.entries.iter().map(|e| e.number).collect();
            self.published
                .lock()
                .unwrap()
                .push((page.module.clone(), numbers));
            Ok(())
        })
    }

    fn name(&self) -> &'static str {
        "recorder"
    }
}

async fn pending(store: &PrStore, number: u64) {
    let mut payload = merged_payload();
    payload["pull_request"]["number"] = serde_json::json!(number);
    store_merged(store, &payload, OffsetDateTime::now_utc()).await;
}

fn message(id: &str, number: u64) -> SqsMessage {
    summarize_message(id, REPO, number)
}

fn batch(messages: Vec<SqsMessage>) -> SqsEvent {
    sqs_batch(messages)
}

async fn setup(max_attempts: u32) -> (PrStore, Arc<Recorder>, Arc<SummarizeHandler>) {
    let store = fresh_table(&sdk().await).await;
    let recorder = Arc::new(Recorder::default());
    let handler = Arc::new(SummarizeHandler::new(
        store.clone(),
        recorder.clone(),
        ModulesConfig::empty(),
        max_attempts,
    ));
    (store, recorder, handler)
}

async fn row(store: &PrStore, number: u64) -> Item {
    stored_row(store, REPO, number).await
}

fn failed(r: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<String> {
    r.batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

#[tokio::test]
async fn a_sequential_duplicate_and_a_redelivery_after_done_publish_once() {
    let (store, recorder, handler) = setup(5).await;
    pending(&store, 2).await;
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
    assert_eq!(recorder.count(), 1);
    let item = row(&store, 2).await;
    assert!(item.contains_key(attr::SUMMARIZED_AT));
    // No files known (not enriched): the repo itself is the one module.
    assert_eq!(item[attr::MODULES].as_l().unwrap()[0].as_s().unwrap(), REPO);
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
}

#[tokio::test]
async fn ten_concurrent_duplicates_publish_once() {
    let (store, recorder, handler) = setup(5).await;
    pending(&store, 3).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..10 {
        let handler = handler.clone();
        tasks.spawn(async move {
            handler
                .handle(
                    batch(vec![message("same", 3)]),
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
    assert!(failures <= 9, "at least one copy did the work");
    // The copies that met a live lease come back later and find the row done.
    let retry = handler
        .handle(batch(vec![message("same", 3)]), within(30), "inv-late")
        .await;
    assert!(retry.batch_item_failures.is_empty());
    assert_eq!(
        recorder.count(),
        1,
        "{:?}",
        recorder.published.lock().unwrap()
    );
    assert!(row(&store, 3).await.contains_key(attr::SUMMARIZED_AT));
}

#[tokio::test]
async fn a_failure_is_counted_then_the_retry_publishes_once() {
    let (store, recorder, handler) = setup(5).await;
    pending(&store, 4).await;
    recorder.then(Step::Fail);
    let first = handler
        .handle(batch(vec![message("m", 4)]), within(30), "inv-1")
        .await;
    assert_eq!(failed(&first), ["m"]);
    let item = row(&store, 4).await;
    assert_eq!(item[attr::ATTEMPTS].as_n().unwrap(), "1");
    assert!(s(&item, attr::LAST_ERROR).contains("the publisher is down"));
    assert!(
        !item.contains_key(attr::LEASE_OWNER),
        "the lease is released on failure"
    );
    assert!(item.contains_key(attr::PENDING_SHARD));
    let second = handler
        .handle(batch(vec![message("m", 4)]), within(30), "inv-2")
        .await;
    assert!(second.batch_item_failures.is_empty());
    assert_eq!(recorder.count(), 1);
    assert!(!row(&store, 4).await.contains_key(attr::LAST_ERROR));
}

#[tokio::test]
async fn a_worker_killed_mid_work_publishes_nothing_and_the_next_delivery_after_the_lease_publishes_once(
) {
    let (store, recorder, handler) = setup(5).await;
    pending(&store, 5).await;
    recorder.then(Step::Hang);
    let doomed = {
        let handler = handler.clone();
        // A 2 s invocation: its lease lasts as long.
        tokio::spawn(async move {
            handler
                .handle(batch(vec![message("m", 5)]), within(2), "inv-killed")
                .await
        })
    };
    recorder.entered.notified().await;
    doomed.abort(); // killed after the claim, inside the publish
    assert!(doomed.await.unwrap_err().is_cancelled());
    assert_eq!(recorder.count(), 0, "nothing was published");
    assert!(
        row(&store, 5).await.contains_key(attr::LEASE_OWNER),
        "the dead worker's lease is still there"
    );

    let early = handler
        .handle(batch(vec![message("m", 5)]), within(30), "inv-early")
        .await;
    assert_eq!(failed(&early), ["m"], "a live lease sends the message back");
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let after = handler
        .handle(batch(vec![message("m", 5)]), within(30), "inv-after")
        .await;
    assert!(after.batch_item_failures.is_empty(), "{after:?}");
    assert_eq!(recorder.count(), 1);
    assert!(row(&store, 5).await.contains_key(attr::SUMMARIZED_AT));
}

#[tokio::test]
async fn a_lost_commit_race_ends_in_one_effect() {
    let (store, recorder, handler) = setup(5).await;
    pending(&store, 6).await;
    // Worker A's publish takes 2.5 s, beyond its 1 s... lease of a 2 s invocation.
    recorder.then(Step::Delay(Duration::from_millis(2_500)));
    let slow = {
        let handler = handler.clone();
        tokio::spawn(async move {
            handler
                .handle(batch(vec![message("m", 6)]), within(2), "inv-slow")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    // Worker B finds the lease expired, takes it, publishes and commits.
    let fast = handler
        .handle(batch(vec![message("m", 6)]), within(30), "inv-fast")
        .await;
    assert!(fast.batch_item_failures.is_empty(), "{fast:?}");
    let committed = row(&store, 6).await;
    // A wakes up: its commit is refused (lease stolen), the effect abandoned, the message failed.
    let slow = slow.await.unwrap();
    assert_eq!(failed(&slow), ["m"]);
    let after = row(&store, 6).await;
    assert_eq!(
        after.get(attr::SUMMARIZED_AT),
        committed.get(attr::SUMMARIZED_AT),
        "one commit, B's"
    );
    // Both published the same regenerated page: it holds the entry once.
    let pages = recorder.published.lock().unwrap().clone();
    assert!(
        pages.iter().all(|(_, numbers)| numbers == &[6]),
        "{pages:?}"
    );
}

#[tokio::test]
async fn a_row_that_always_fails_is_given_up_at_max_attempts() {
    let (store, recorder, handler) = setup(3).await;
    pending(&store, 7).await;
    for _ in 0..3 {
        recorder.then(Step::Fail);
    }
    for attempt in 1..=3 {
        let r = handler
            .handle(
                batch(vec![message("m", 7)]),
                within(30),
                &format!("inv-{attempt}"),
            )
            .await;
        if attempt < 3 {
            assert_eq!(failed(&r), ["m"], "attempt {attempt}");
        } else {
            assert!(
                r.batch_item_failures.is_empty(),
                "at MAX_ATTEMPTS the message is done: SQS stops"
            );
        }
    }
    let item = row(&store, 7).await;
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
    assert_eq!(recorder.count(), 0);
    // A later redelivery is a no-op.
    let r = handler
        .handle(batch(vec![message("m", 7)]), within(30), "inv-late")
        .await;
    assert!(r.batch_item_failures.is_empty());
}

#[tokio::test]
async fn an_unreadable_message_fails_and_a_deleted_row_is_done() {
    let (store, recorder, handler) = setup(5).await;
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
        "the unreadable one fails every time (and reaches the DLQ by redrive)"
    );
    assert_eq!(recorder.count(), 0);
    assert!(store
        .get(&RepoName::parse(REPO).unwrap(), 404)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn poison_messages_end_in_the_moto_dlq_and_the_failing_row_is_marked_failed() {
    use infra::queues::{ensure_queue_with_dlq, queue_arn, QueueSettings, SqsEventSource};
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    pending(&store, 8).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let settings = QueueSettings {
        batch_size: 5,
        visibility_timeout: Duration::from_secs(1),
        max_receive_count: 3,
    };
    let (url, dlq) = ensure_queue_with_dlq(
        &sqs,
        &format!("poison-{}", uuid::Uuid::new_v4().simple()),
        &settings,
    )
    .await
    .unwrap();
    let recorder = Arc::new(Recorder::default());
    for _ in 0..10 {
        recorder.then(Step::Fail);
    }
    let handler = Arc::new(
        SummarizeHandler::new(store.clone(), recorder.clone(), ModulesConfig::empty(), 3)
            .with_dead_letter_queue(sqs.clone(), dlq.clone()),
    );
    sqs.send_message()
        .queue_url(&url)
        .message_body(format!(r#"{{"repo":"{REPO}","prNumber":8}}"#))
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
    let batch_handler = infra::dev::summarize_batch_handler(handler);
    let mut dead = Vec::new();
    for _ in 0..40 {
        source.poll_once(&batch_handler).await.unwrap();
        let out = sqs
            .receive_message()
            .queue_url(&dlq)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        dead.extend(out.messages.unwrap_or_default());
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
            r#"{"repo":"Codertocat/Hello-World","prNumber":8}"#
        ]
    );
    let given_up = dead
        .iter()
        .find(|m| m.body().unwrap().contains("prNumber"))
        .unwrap();
    let reason = given_up.message_attributes().unwrap()["failedReason"]
        .string_value()
        .unwrap();
    assert!(reason.contains("the publisher is down"), "{reason}");

    let item = row(&store, 8).await;
    assert_eq!(item[attr::ATTEMPTS].as_n().unwrap(), "3");
    assert!(item.contains_key(attr::FAILED_AT));
    assert!(s(&item, attr::FAILED_REASON).contains("gave up after 3 attempts"));
    assert!(!item.contains_key(attr::PENDING_SHARD));
    // Nothing is left in the queue.
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

#[tokio::test]
async fn pages_can_be_published_to_s3_and_a_retry_leaves_one_copy() {
    use shared::publish::S3MarkdownPublisher;
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    pending(&store, 9).await;
    let s3 = shared::aws::s3_client(&sdk);
    let bucket = format!("narratives-{}", uuid::Uuid::new_v4().simple());
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let publisher = Arc::new(S3MarkdownPublisher::new(s3.clone(), &bucket, "narratives"));
    let key = publisher.key(REPO, REPO);
    assert_eq!(
        key,
        "narratives/Codertocat/Hello-World/Codertocat__Hello-World.md"
    );
    let handler = Arc::new(SummarizeHandler::new(
        store.clone(),
        publisher.clone(),
        ModulesConfig::empty(),
        5,
    ));
    let r = handler
        .handle(batch(vec![message("m", 9)]), within(30), "inv")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    let read = || async {
        let object = s3
            .get_object()
            .bucket(&bucket)
            .key(&key)
            .send()
            .await
            .unwrap();
        String::from_utf8(object.body.collect().await.unwrap().into_bytes().to_vec()).unwrap()
    };
    let first = read().await;
    assert!(
        first.starts_with("# Codertocat/Hello-World · Codertocat/Hello-World"),
        "{first}"
    );
    assert_eq!(first.matches("(#9)").count(), 1);
    // Publishing the regenerated page again (a retry) replaces it: still one entry.
    let entry = shared::narrative::entry_from_item(&row(&store, 9).await).unwrap();
    let page = ModulePage::new(REPO, REPO, vec![entry]);
    let item = row(&store, 9).await;
    // (A PR without known files: its module is the repository, which has no paths.)
    let deadline = Instant::now() + Duration::from_secs(30);
    publisher
        .publish(&Publication::of_page(&page, 9, &item, deadline))
        .await
        .unwrap();
    assert_eq!(read().await, first);
}

#[tokio::test]
async fn the_sample_sqs_event_is_handled_by_the_worker() {
    let (store, recorder, handler) = setup(5).await;
    pending(&store, 2).await;
    let root = infra::emulator::repo_root();
    let sample: SqsEvent = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/summarize.sqs.json")).unwrap(),
    )
    .unwrap();
    let r = handler.handle(sample, within(30), "sample").await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    assert_eq!(recorder.count(), 1);
    assert!(row(&store, 2).await.contains_key(attr::SUMMARIZED_AT));
    // The scheduler's sample event is JSON the sweeper function accepts as is.
    let scheduled: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("events/sweeper.scheduled.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(scheduled["source"], "aws.scheduler");
}

/// Counts its calls, answers a fixed paragraph (as an LLM would).
struct CountingSummarizer(std::sync::atomic::AtomicUsize);

impl shared::summary::Summarizer for CountingSummarizer {
    fn summarize<'a>(
        &'a self,
        _input: &'a shared::summary::SummaryInput<'a>,
    ) -> BoxFuture<'a, shared::summary::Summary> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async {
            shared::summary::Summary {
                text: "Written once, kept on the row.".into(),
                kind: None,
                source: shared::summary::SummarySource::Llm {
                    model: "stand-in".into(),
                },
            }
        })
    }
}

#[tokio::test]
async fn the_summary_is_generated_once_even_when_publishing_is_retried() {
    let store = fresh_table(&sdk().await).await;
    pending(&store, 11).await;
    let recorder = Arc::new(Recorder::default());
    recorder.then(Step::Fail);
    let summarizer = Arc::new(CountingSummarizer(Default::default()));
    let handler = Arc::new(
        SummarizeHandler::new(store.clone(), recorder.clone(), ModulesConfig::empty(), 5)
            .with_summarizer(summarizer.clone()),
    );
    assert_eq!(
        failed(
            &handler
                .handle(batch(vec![message("m", 11)]), within(30), "inv-1")
                .await
        ),
        ["m"]
    );
    assert_eq!(
        s(&row(&store, 11).await, attr::SUMMARY),
        "Written once, kept on the row."
    );
    assert!(handler
        .handle(batch(vec![message("m", 11)]), within(30), "inv-2")
        .await
        .batch_item_failures
        .is_empty());
    assert_eq!(
        summarizer.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "never generated twice"
    );
    assert_eq!(recorder.count(), 1);
}

/// Holds every first publish until two are waiting, so both workers render the module's page
/// before either has committed: each page lacks the other's entry.
struct Gate {
    inner: shared::publish::MarkdownPublisher,
    barrier: tokio::sync::Barrier,
    passed: std::sync::atomic::AtomicUsize,
}

impl Publisher for Gate {
    fn publish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        Box::pin(async move {
            let n = self
                .passed
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n < 2 {
                assert_eq!(
                    p.page.entries.len(),
                    1,
                    "each worker sees only its own entry"
                );
                self.barrier.wait().await;
            }
            self.inner.publish(p).await
        })
    }

    fn name(&self) -> &'static str {
        "gate"
    }
}

#[tokio::test]
async fn two_workers_publishing_one_module_at_once_leave_both_entries_on_the_page() {
    let store = fresh_table(&sdk().await).await;
    let dir =
        std::env::temp_dir().join(format!("chronicle-race-{}", uuid::Uuid::new_v4().simple()));
    let gate = Arc::new(Gate {
        inner: shared::publish::MarkdownPublisher::new(&dir),
        barrier: tokio::sync::Barrier::new(2),
        passed: Default::default(),
    });
    let handler = Arc::new(SummarizeHandler::new(
        store.clone(),
        gate.clone(),
        ModulesConfig::empty(),
        5,
    ));
    pending(&store, 31).await;
    pending(&store, 32).await;
    let a = tokio::spawn({
        let h = handler.clone();
        async move {
            h.handle(batch(vec![message("a", 31)]), within(30), "inv-a")
                .await
        }
    });
    let b = tokio::spawn({
        let h = handler.clone();
        async move {
            h.handle(batch(vec![message("b", 32)]), within(30), "inv-b")
                .await
        }
    });
    assert!(a.await.unwrap().batch_item_failures.is_empty());
    assert!(b.await.unwrap().batch_item_failures.is_empty());
    let page =
        std::fs::read_to_string(dir.join("Codertocat/Hello-World/Codertocat__Hello-World.md"))
            .unwrap();
    assert_eq!(page.matches("(#31)\n").count(), 1, "{page}");
    assert_eq!(page.matches("(#32)\n").count(), 1, "{page}");
    // The mending publish happened (2 gated first publishes + at least one more).
    assert!(gate.passed.load(std::sync::atomic::Ordering::SeqCst) >= 3);
    let _ = std::fs::remove_dir_all(&dir);
}
