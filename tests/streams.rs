//! The local stack's emulation of Lambda's DynamoDB-stream event source mapping
//! (`devstack::streams`), against moto: records written with the SDK to a table created from
//! template.yaml, read back from moto's stream and fed to closures standing in for the handler.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_dynamodb::types::AttributeValue;
use devstack::streams::{
    ensure_queue, BatchHandler, EventSourceSettings, FilterPattern, PollReport, StreamEventSource,
    DEFAULT_RETRY_BACKOFF,
};
use devstack::template::Template;
use serde_json::{json, Value};
use stages::store::PrStore;
use support::*;

const REPO: &str = "octo-org/streams";

struct Fixture {
    sdk: aws_config::SdkConfig,
    store: PrStore,
    sqs: aws_sdk_sqs::Client,
    dlq_url: String,
}

async fn fixture() -> Fixture {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let name = format!("stream-dlq-{}", uuid::Uuid::new_v4().simple());
    let dlq_url = ensure_queue(&sqs, &name).await.unwrap();
    assert_eq!(
        ensure_queue(&sqs, &name).await.unwrap(),
        dlq_url,
        "ensure_queue is idempotent"
    );
    Fixture {
        sdk,
        store,
        sqs,
        dlq_url,
    }
}

impl Fixture {
    async fn source(&self, settings: EventSourceSettings) -> StreamEventSource {
        StreamEventSource::new(
            &self.sdk,
            self.store.table_name(),
            self.dlq_url.clone(),
            settings,
        )
        .await
        .unwrap()
    }

    /// PutItem of a new row: an INSERT on the stream.
    async fn insert(&self, n: u64) {
        self.store
            .client()
            .put_item()
            .table_name(self.store.table_name())
            .item("repo", av_s(REPO))
            .item("prNumber", AttributeValue::N(n.to_string()))
            .item("title", av_s(&format!("PR {n}")))
            .send()
            .await
            .unwrap();
    }

    /// UpdateItem of an existing row: a MODIFY on the stream.
    async fn modify(&self, n: u64) {
        self.store
            .client()
            .update_item()
            .table_name(self.store.table_name())
            .key("repo", av_s(REPO))
            .key("prNumber", AttributeValue::N(n.to_string()))
            .update_expression("SET title = :t")
            .expression_attribute_values(":t", av_s(&format!("PR {n}, edited")))
            .send()
            .await
            .unwrap();
    }

    async fn stream_arn(&self) -> String {
        self.store
            .client()
            .describe_table()
            .table_name(self.store.table_name())
            .send()
            .await
            .unwrap()
            .table
            .unwrap()
            .latest_stream_arn
            .unwrap()
    }

    /// Every message in the DLQ, as JSON.
    async fn dead_letters(&self) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let received = self
                .sqs
                .receive_message()
                .queue_url(&self.dlq_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            let messages = received.messages.unwrap_or_default();
            if messages.is_empty() {
                return out;
            }
            for m in messages {
                out.push(serde_json::from_str(m.body().unwrap()).unwrap());
            }
        }
    }
}

/// The real template's settings for the enrich function's stream, with a short backoff.
fn enrich_settings() -> EventSourceSettings {
    let template = Template::bundled().unwrap();
    EventSourceSettings {
        retry_backoff: Duration::from_millis(5),
        ..EventSourceSettings::from_template(&template, "EnrichFunction", "PrStream").unwrap()
    }
}

fn settings(
    batch_size: usize,
    max_retry_attempts: u32,
    bisect_on_error: bool,
) -> EventSourceSettings {
    EventSourceSettings {
        batch_size,
        max_retry_attempts,
        bisect_on_error,
        filters: vec![devstack::streams::FilterPattern::event_names(&["INSERT"])],
        retry_backoff: Duration::from_millis(5),
    }
}

/// Every batch the handler was given, in order.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Vec<EventRecord>>>>);

impl Log {
    fn batches(&self) -> Vec<Vec<u64>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|b| b.iter().map(pr_number).collect())
            .collect()
    }

    fn records(&self) -> Vec<EventRecord> {
        self.0.lock().unwrap().iter().flatten().cloned().collect()
    }

    fn deliveries(&self) -> HashMap<u64, usize> {
        let mut counts = HashMap::new();
        for n in self.batches().into_iter().flatten() {
            *counts.entry(n).or_default() += 1;
        }
        counts
    }
}

/// A handler that logs each batch, then (inside its future, as a Lambda would) runs `f`.
fn handler<F>(log: &Log, f: F) -> BatchHandler
where
    F: Fn(&[EventRecord]) -> Result<DynamoDbEventResponse, String> + Send + Sync + 'static,
{
    let log = log.clone();
    let f = Arc::new(f);
    Arc::new(move |event| {
        let log = log.clone();
        let f = f.clone();
        Box::pin(async move {
            log.0.lock().unwrap().push(event.records.clone());
            f(&event.records)
        })
    })
}

fn ok() -> Result<DynamoDbEventResponse, String> {
    Ok(DynamoDbEventResponse::default())
}

fn failures(records: &[&EventRecord]) -> Result<DynamoDbEventResponse, String> {
    let mut response = DynamoDbEventResponse::default();
    for r in records {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = r.change.sequence_number.clone();
        response.batch_item_failures.push(failure);
    }
    Ok(response)
}

/// The record as the function receives it (Lambda's JSON).
fn json(record: &EventRecord) -> Value {
    serde_json::to_value(record).unwrap()
}

fn pr_number(record: &EventRecord) -> u64 {
    json(record)["dynamodb"]["Keys"]["prNumber"]["N"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn sequence(record: &EventRecord) -> u128 {
    record
        .change
        .sequence_number
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn inserts_arrive_in_order_in_lambda_shape_and_modifies_are_filtered_out() {
    let fx = fixture().await;
    let settings = EventSourceSettings {
        batch_size: 2,
        ..enrich_settings()
    };
    let mut source = fx.source(settings).await;
    assert_eq!(source.stream_arn(), fx.stream_arn().await);
    for n in 1..=3 {
        fx.insert(n).await;
    }
    fx.modify(2).await;
    fx.insert(4).await;

    let log = Log::default();
    let h = handler(&log, |_| ok());
    let report = source.poll_once(&h).await.unwrap();
    assert_eq!(
        report,
        PollReport {
            read: 5,
            filtered_out: 1,
            invocations: 2,
            succeeded: 4,
            retried: 0,
            dead_lettered: 0,
        }
    );
    assert_eq!(log.batches(), [vec![1, 2], vec![3, 4]]);

    let records = log.records();
    let region = fx.sdk.region().unwrap().to_string();
    let stream_arn = fx.stream_arn().await;
    for (i, r) in records.iter().enumerate() {
        let n = i as u64 + 1;
        let v = json(r);
        assert_eq!(v["eventName"], "INSERT");
        assert_eq!(v["eventVersion"], "1.1");
        assert_eq!(v["eventSource"], "aws:dynamodb");
        assert_eq!(v["eventSourceARN"], stream_arn.as_str());
        assert_eq!(v["awsRegion"], region.as_str());
        assert!(!v["eventID"].as_str().unwrap().is_empty());
        let d = &v["dynamodb"];
        assert_eq!(
            d["Keys"],
            serde_json::json!({"repo": {"S": REPO}, "prNumber": {"N": n.to_string()}})
        );
        assert_eq!(d["NewImage"]["title"]["S"], format!("PR {n}"));
        assert_eq!(d["NewImage"]["repo"]["S"], REPO);
        // No old image for an INSERT (an empty map in this event type).
        assert!(d
            .get("OldImage")
            .is_none_or(|o| o == &serde_json::json!({})));
        assert_eq!(d["StreamViewType"], "NEW_AND_OLD_IMAGES");
        assert!(d["SizeBytes"].as_i64().unwrap() > 0);
        assert!(d["ApproximateCreationDateTime"].as_f64().unwrap() > 1.6e9);
        // The handler's own event type reads it back (what lambda_runtime would do).
        let back: EventRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.change.keys, r.change.keys);
        assert_eq!(back.change.new_image, r.change.new_image);
        assert_eq!(back.change.sequence_number, r.change.sequence_number);
    }
    let sequences: Vec<_> = records.iter().map(sequence).collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");

    // The checkpoint holds: nothing is delivered again, and only what is new afterwards.
    assert_eq!(source.poll_once(&h).await.unwrap(), PollReport::default());
    fx.insert(5).await;
    fx.modify(5).await;
    let report = source.poll_once(&h).await.unwrap();
    assert_eq!(
        (report.read, report.filtered_out, report.succeeded),
        (2, 1, 1)
    );
    assert_eq!(log.batches(), [vec![1, 2], vec![3, 4], vec![5]]);
    assert_eq!(source.in_flight(), 0);
}

#[tokio::test]
async fn without_a_filter_modifies_are_delivered_with_both_images() {
    let fx = fixture().await;
    let mut source = fx
        .source(EventSourceSettings {
            filters: vec![],
            ..settings(10, 2, true)
        })
        .await;
    fx.insert(1).await;
    fx.modify(1).await;
    let log = Log::default();
    let report = source.poll_once(&handler(&log, |_| ok())).await.unwrap();
    assert_eq!((report.read, report.filtered_out), (2, 0));
    let records = log.records();
    let names: Vec<_> = records.iter().map(|r| r.event_name.as_str()).collect();
    assert_eq!(names, ["INSERT", "MODIFY"]);
    let modify = json(&records[1]);
    assert_eq!(modify["dynamodb"]["OldImage"]["title"]["S"], "PR 1");
    assert_eq!(modify["dynamodb"]["NewImage"]["title"]["S"], "PR 1, edited");
}

#[tokio::test]
async fn a_record_failed_once_is_redelivered_with_the_ones_after_it_not_the_ones_before() {
    let fx = fixture().await;
    let mut source = fx.source(settings(10, 3, true)).await;
    for n in 1..=5 {
        fx.insert(n).await;
    }
    let log = Log::default();
    let failed_once = Arc::new(Mutex::new(false));
    let h = handler(&log, move |records| {
        let mut failed = failed_once.lock().unwrap();
        match records.iter().find(|r| pr_number(r) == 3) {
            Some(r) if !*failed => {
                *failed = true;
                failures(&[r])
            }
            _ => ok(),
        }
    });
    let report = source.poll_once(&h).await.unwrap();
    assert_eq!(log.batches(), [vec![1, 2, 3, 4, 5], vec![3, 4, 5]]);
    assert_eq!(
        report,
        PollReport {
            read: 5,
            filtered_out: 0,
            invocations: 2,
            succeeded: 5,
            retried: 3,
            dead_lettered: 0,
        }
    );
    let deliveries = log.deliveries();
    assert_eq!(deliveries[&1], 1);
    assert_eq!(deliveries[&2], 1);
    assert_eq!((deliveries[&3], deliveries[&4], deliveries[&5]), (2, 2, 2));
    assert_eq!(source.poll_once(&h).await.unwrap(), PollReport::default());
    assert!(fx.dead_letters().await.is_empty());
}

#[tokio::test]
async fn a_panicking_record_is_isolated_by_bisect_then_dead_lettered_and_the_shard_moves_on() {
    let fx = fixture().await;
    let mut source = fx.source(settings(10, 2, true)).await;
    for n in 1..=6 {
        fx.insert(n).await;
    }
    let log = Log::default();
    let h = handler(&log, |records| {
        if records.iter().any(|r| pr_number(r) == 3) {
            panic!("poison record");
        }
        ok()
    });
    let report = source.poll_once(&h).await.unwrap();
    // Halves until the poison record is alone; it has failed 3 times (1 + 2 retries) by then.
    assert_eq!(
        log.batches(),
        [
            vec![1, 2, 3, 4, 5, 6],
            vec![1, 2, 3],
            vec![1, 2],
            vec![3],
            vec![4, 5, 6],
        ]
    );
    assert_eq!(report.succeeded, 5);
    assert_eq!(report.dead_lettered, 1);
    assert_eq!(report.invocations, 5);
    // Every other record was delivered in exactly one batch that succeeded (without 3).
    let batches = log.batches();
    for n in [1, 2, 4, 5, 6] {
        let ok_batches = batches
            .iter()
            .filter(|b| b.contains(&n) && !b.contains(&3))
            .count();
        assert_eq!(ok_batches, 1, "record {n}");
    }

    let poison = log
        .records()
        .into_iter()
        .find(|r| pr_number(r) == 3)
        .unwrap();
    let letters = fx.dead_letters().await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(
        letter["requestContext"]["condition"],
        "RetryAttemptsExhausted"
    );
    assert_eq!(letter["requestContext"]["functionArn"], "local:enrich");
    assert_eq!(letter["requestContext"]["approximateInvokeCount"], 3);
    assert_eq!(letter["responseContext"]["functionError"], "Unhandled");
    let info = &letter["DDBStreamBatchInfo"];
    let seq = poison.change.sequence_number.clone().unwrap();
    assert_eq!(info["startSequenceNumber"], seq.as_str());
    assert_eq!(info["endSequenceNumber"], seq.as_str());
    assert_eq!(info["batchSize"], 1);
    assert_eq!(info["streamArn"], fx.stream_arn().await.as_str());
    assert!(info["shardId"].as_str().unwrap().starts_with("shardId-"));
    assert!(info["approximateArrivalOfFirstRecord"].is_string());
    assert!(letter["timestamp"].is_string());
    assert_eq!(letter["record"]["dynamodb"]["Keys"]["prNumber"]["N"], "3");
    assert_eq!(letter["record"]["dynamodb"]["Keys"]["repo"]["S"], REPO);
    assert_eq!(letter["record"], json(&poison));

    // The checkpoint is past the poison record: only new records are delivered.
    assert_eq!(source.poll_once(&h).await.unwrap(), PollReport::default());
    fx.insert(7).await;
    let report = source.poll_once(&h).await.unwrap();
    assert_eq!((report.invocations, report.succeeded), (1, 1));
    assert_eq!(log.batches().last().unwrap(), &[7]);
    assert!(fx.dead_letters().await.is_empty());
}

#[tokio::test]
async fn a_record_the_handler_keeps_failing_gets_exactly_its_retries_with_backoff() {
    let fx = fixture().await;
    let mut source = fx
        .source(EventSourceSettings {
            retry_backoff: Duration::from_millis(50),
            ..settings(10, 2, true)
        })
        .await;
    for n in 1..=4 {
        fx.insert(n).await;
    }
    let log = Log::default();
    let h = handler(&log, |records| {
        let bad: Vec<_> = records.iter().filter(|r| pr_number(r) == 2).collect();
        failures(&bad)
    });
    let started = Instant::now();
    let report = source.poll_once(&h).await.unwrap();
    // 1 attempt + 2 retries of the remainder from the reported record, then the DLQ.
    assert_eq!(
        log.batches(),
        [vec![1, 2, 3, 4], vec![2, 3, 4], vec![2, 3, 4], vec![3, 4]]
    );
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "backoff 50 ms then 100 ms, took {:?}",
        started.elapsed()
    );
    assert_eq!(
        report,
        PollReport {
            read: 4,
            filtered_out: 0,
            invocations: 4,
            succeeded: 3,
            retried: 8,
            dead_lettered: 1,
        }
    );
    let letters = fx.dead_letters().await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0]["requestContext"]["approximateInvokeCount"], 3);
    assert_eq!(
        letters[0]["record"]["dynamodb"]["Keys"]["prNumber"]["N"],
        "2"
    );
    assert!(letters[0]["responseContext"].get("functionError").is_none());
}

#[tokio::test]
async fn a_function_error_without_bisect_fails_the_batch_and_dead_letters_it() {
    let fx = fixture().await;
    let mut source = fx.source(settings(1, 1, false)).await;
    for n in 1..=3 {
        fx.insert(n).await;
    }
    let log = Log::default();
    let h = handler(&log, |records| {
        if records.iter().any(|r| pr_number(r) == 2) {
            return Err("GitHub is down".into());
        }
        ok()
    });
    let report = source.poll_once(&h).await.unwrap();
    assert_eq!(log.batches(), [vec![1], vec![2], vec![2], vec![3]]);
    assert_eq!((report.succeeded, report.dead_lettered), (2, 1));
    let letters = fx.dead_letters().await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        letters[0]["record"]["dynamodb"]["Keys"]["prNumber"]["N"],
        "2"
    );
    assert_eq!(letters[0]["requestContext"]["approximateInvokeCount"], 2);
}

#[tokio::test]
async fn a_failure_list_naming_no_record_of_the_batch_fails_it_whole() {
    let fx = fixture().await;
    let mut source = fx.source(settings(10, 0, true)).await;
    fx.insert(1).await;
    let log = Log::default();
    let h = handler(&log, |_| {
        let mut response = DynamoDbEventResponse::default();
        response
            .batch_item_failures
            .push(DynamoDbBatchItemFailure::default()); // null itemIdentifier
        Ok(response)
    });
    let report = source.poll_once(&h).await.unwrap();
    assert_eq!((report.invocations, report.dead_lettered), (1, 1));
    assert_eq!(fx.dead_letters().await.len(), 1);
}

#[tokio::test]
async fn run_delivers_as_records_arrive_until_stopped() {
    let fx = fixture().await;
    let source = fx.source(enrich_settings()).await;
    let log = Log::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task =
        tokio::spawn(source.run(handler(&log, |_| ok()), Duration::from_millis(20), stopped));
    let wait_for = |n: usize| {
        let log = log.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while log.records().len() < n {
                assert!(
                    Instant::now() < deadline,
                    "{n} records not delivered in 10 s"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    fx.insert(1).await;
    wait_for(1).await;
    fx.modify(1).await;
    fx.insert(2).await;
    wait_for(2).await;
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("run returns once stopped")
        .unwrap();
    let numbers: Vec<_> = log.records().iter().map(pr_number).collect();
    assert_eq!(numbers, [1, 2]);
}

#[test]
fn settings_from_the_real_template() {
    let template = Template::bundled().unwrap();
    let s = EventSourceSettings::from_template(&template, "EnrichFunction", "PrStream").unwrap();
    let parameter = |name: &str| -> u64 {
        let v = template.parameter_default(name).unwrap();
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .unwrap()
    };
    assert_eq!(s.batch_size as u64, parameter("EnrichBatchSize"));
    assert_eq!(
        u64::from(s.max_retry_attempts),
        parameter("EnrichMaximumRetryAttempts")
    );
    assert!(s.bisect_on_error);
    assert_eq!(s.filters.len(), 2, "inserts, and edits of summarized rows");
    assert_eq!(s.filters[0], FilterPattern::event_names(&["INSERT"]));
    let modify = |old: bool| {
        let image = |summarized: bool| {
            if summarized {
                json!({"summarizedAt": {"S": "2024-01-01T00:00:00.000Z"}})
            } else {
                json!({})
            }
        };
        json!({"eventName": "MODIFY", "dynamodb": {"OldImage": image(old), "NewImage": image(true)}})
    };
    assert!(
        s.filters[1].matches(&modify(true)),
        "an edit of a summarized row"
    );
    assert!(
        !s.filters[1].matches(&modify(false)),
        "not the summary's commit"
    );
    assert_eq!(s.retry_backoff, DEFAULT_RETRY_BACKOFF);
    let event = template.stream_event("EnrichFunction", "PrStream").unwrap();
    assert_eq!(event.starting_position.as_deref(), Some("TRIM_HORIZON"));
    assert_eq!(event.on_failure_type.as_deref(), Some("SQS"));
}

#[test]
fn settings_from_an_inline_template() {
    let yaml = |props: &str| {
        format!(
            r#"
Parameters:
  Size: {{ Type: Number, Default: "7" }}
  Retries: {{ Type: Number, Default: 4 }}
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        S:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt T.StreamArn
            StartingPosition: TRIM_HORIZON
{props}"#
        )
    };
    let parse = |props: &str| {
        let t = Template::parse(&yaml(props)).unwrap();
        EventSourceSettings::from_template(&t, "Fn", "S")
    };
    let s = parse(
        r#"            BatchSize: !Ref Size
            MaximumRetryAttempts: !Ref Retries
            BisectBatchOnFunctionError: true
            FunctionResponseTypes: [ReportBatchItemFailures]
            FilterCriteria:
              Filters:
                - Pattern: '{"eventName": ["INSERT"]}'
                - Pattern: '{"eventName": ["REMOVE"]}'
"#,
    )
    .unwrap();
    assert_eq!(
        s,
        EventSourceSettings {
            batch_size: 7,
            max_retry_attempts: 4,
            bisect_on_error: true,
            filters: vec![
                FilterPattern::event_names(&["INSERT"]),
                FilterPattern::event_names(&["REMOVE"]),
            ],
            retry_backoff: DEFAULT_RETRY_BACKOFF,
        }
    );
    // Lambda's defaults: 100 records, retry forever, no bisect, no filter.
    let s = parse("            FunctionResponseTypes: [ReportBatchItemFailures]\n").unwrap();
    assert_eq!(
        (s.batch_size, s.max_retry_attempts, s.bisect_on_error),
        (100, u32::MAX, false)
    );
    assert!(s.filters.is_empty());
    // What the local stack would not emulate faithfully is refused.
    assert!(
        parse("            BatchSize: 5\n").is_err(),
        "no ReportBatchItemFailures"
    );
    assert!(parse(
        r#"            FunctionResponseTypes: [ReportBatchItemFailures]
            FilterCriteria:
              Filters:
                - Pattern: '{"dynamodb": {"NewImage": {"title": {"S": [{"prefix": "feat"}]}}}}'
"#
    )
    .is_err());
    // Value lists and `exists` on nested fields are evaluated as Lambda does.
    let s = parse(
        r#"            FunctionResponseTypes: [ReportBatchItemFailures]
            FilterCriteria:
              Filters:
                - Pattern: '{"dynamodb": {"NewImage": {"merged": {"BOOL": [true]}}}}'
"#,
    )
    .unwrap();
    assert!(s.filters[0].matches(&json!({"dynamodb": {"NewImage": {"merged": {"BOOL": true}}}})));
    assert!(!s.filters[0].matches(&json!({"dynamodb": {"NewImage": {"merged": {"BOOL": false}}}})));
    assert!(parse(
        "            FunctionResponseTypes: [ReportBatchItemFailures]\n            BatchSize: !Ref Nope\n"
    )
    .is_err());
}
