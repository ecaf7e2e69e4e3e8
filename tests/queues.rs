//! The local stack's emulation of Lambda's SQS event source mapping (`devstack::queues`), against
//! moto: queues created with their redrive policy as the template defines them, messages sent
//! with the SDK, polled and fed to closures standing in for the summarize handler. Visibility and
//! the moves to the DLQ are moto's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsMessage};
use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName};
use devstack::queues::{
    ensure_queue_with_dlq, queue_arn, QueuePollReport, QueueSettings, SqsBatchHandler,
    SqsEventSource,
};
use devstack::template::{QueueDefinition, SqsEventDefinition, Template};
use support::*;

struct Fixture {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    dlq_url: String,
    source: SqsEventSource,
}

fn settings(batch_size: usize, visibility_secs: u64, max_receive_count: u32) -> QueueSettings {
    QueueSettings {
        batch_size,
        visibility_timeout: Duration::from_secs(visibility_secs),
        max_receive_count,
    }
}

async fn fixture(settings: QueueSettings) -> Fixture {
    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let name = format!("summarize-{}", uuid::Uuid::new_v4().simple());
    let (queue_url, dlq_url) = ensure_queue_with_dlq(&sqs, &name, &settings).await.unwrap();
    let arn = queue_arn(&sqs, &queue_url).await.unwrap();
    let source = SqsEventSource::new(sqs.clone(), queue_url.clone(), arn, settings);
    Fixture {
        sqs,
        queue_url,
        dlq_url,
        source,
    }
}

impl Fixture {
    /// Sends a message; returns its MessageId.
    async fn send(&self, body: &str) -> String {
        self.send_md5(body).await.0
    }

    /// Sends a message; returns its MessageId and the MD5OfMessageBody SQS answered.
    async fn send_md5(&self, body: &str) -> (String, String) {
        let out = self
            .sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_attributes(
                "kind",
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value("pr")
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
        (out.message_id.unwrap(), out.md5_of_message_body.unwrap())
    }

    async fn counts(&self, url: &str) -> (u64, u64) {
        let attrs = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap_or_default();
        let n = |k: QueueAttributeName| attrs.get(&k).map_or(0, |v| v.parse().unwrap());
        (
            n(QueueAttributeName::ApproximateNumberOfMessages),
            n(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
        )
    }

    /// What a plain ReceiveMessage (no wait) gets from `url` now.
    async fn receive(&self, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
        self.sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default()
    }

    async fn assert_empty(&self) {
        assert_eq!(self.counts(&self.queue_url).await, (0, 0), "queue is empty");
        assert!(self.receive(&self.queue_url).await.is_empty());
    }
}

type Seen = Arc<Mutex<Vec<Vec<SqsMessage>>>>;

/// A handler that records every batch and reports failed the messages `fails` picks.
fn recording(
    fails: impl Fn(&SqsMessage) -> bool + Send + Sync + 'static,
) -> (SqsBatchHandler, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let fails = Arc::new(fails);
    let handler: SqsBatchHandler = Arc::new(move |event| {
        let log = log.clone();
        let fails = fails.clone();
        Box::pin(async move {
            log.lock().unwrap().push(event.records.clone());
            let mut response = SqsBatchResponse::default();
            for m in event.records.iter().filter(|m| fails(m)) {
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = m.message_id.clone().unwrap();
                response.batch_item_failures.push(failure);
            }
            Ok(response)
        })
    });
    (handler, seen)
}

fn report(received: usize, invocations: usize, deleted: usize, failed: usize) -> QueuePollReport {
    QueuePollReport {
        received,
        invocations,
        deleted,
        failed,
    }
}

fn receive_count(m: &SqsMessage) -> &str {
    m.attributes
        .get("ApproximateReceiveCount")
        .map(String::as_str)
        .unwrap_or("")
}

#[tokio::test]
async fn delivers_in_lambda_shape_and_deletes_on_success() {
    let f = fixture(settings(10, 30, 5)).await;
    let mut ids = HashMap::new();
    for body in [
        r#"{"repo":"o/r","prNumber":1}"#,
        r#"{"repo":"o/r","prNumber":2}"#,
    ] {
        let (id, md5) = f.send_md5(body).await;
        ids.insert(id, (body.to_string(), md5));
    }
    let (handler, seen) = recording(|_| false);
    let r = f.source.poll_once(&handler).await.unwrap();
    assert_eq!(r, report(2, 1, 2, 0));

    let batches = seen.lock().unwrap().clone();
    assert_eq!(batches.len(), 1);
    let arn = f.source.queue_arn().to_string();
    assert!(arn.starts_with("arn:aws:sqs:"), "{arn}");
    for m in &batches[0] {
        let id = m.message_id.as_deref().unwrap();
        assert_eq!(m.body.as_deref(), Some(ids[id].0.as_str()), "body of {id}");
        assert!(m.receipt_handle.as_deref().is_some_and(|h| !h.is_empty()));
        assert_eq!(m.md5_of_body.as_deref(), Some(ids[id].1.as_str()));
        assert_eq!(receive_count(m), "1");
        assert!(
            m.attributes.contains_key("SentTimestamp"),
            "{:?}",
            m.attributes
        );
        assert_eq!(m.event_source.as_deref(), Some("aws:sqs"));
        assert_eq!(m.event_source_arn.as_deref(), Some(arn.as_str()));
        assert!(m.aws_region.as_deref().is_some_and(|r| !r.is_empty()));
        assert_eq!(
            m.message_attributes["kind"].string_value.as_deref(),
            Some("pr")
        );
        assert_eq!(
            m.message_attributes["kind"].data_type.as_deref(),
            Some("String")
        );
    }
    // It serializes as Lambda's event does.
    let json = serde_json::to_value(&batches[0][0]).unwrap();
    for key in [
        "messageId",
        "receiptHandle",
        "body",
        "md5OfBody",
        "attributes",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    ] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }

    f.assert_empty().await;
    assert_eq!(
        f.source.poll_once(&handler).await.unwrap(),
        QueuePollReport::default()
    );
}

#[tokio::test]
async fn batches_hold_at_most_batch_size_messages() {
    let f = fixture(settings(3, 30, 5)).await;
    for i in 0..7 {
        f.send(&format!("m{i}")).await;
    }
    let (handler, seen) = recording(|_| false);
    assert_eq!(
        f.source.poll_once(&handler).await.unwrap(),
        report(7, 3, 7, 0)
    );
    let sizes: Vec<usize> = seen.lock().unwrap().iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![3, 3, 1]);
    f.assert_empty().await;

    // Above SQS's 10 per ReceiveMessage: several receives make one batch.
    let f = fixture(settings(15, 30, 5)).await;
    for i in 0..22 {
        f.send(&format!("m{i}")).await;
    }
    let (handler, seen) = recording(|_| false);
    assert_eq!(
        f.source.poll_once(&handler).await.unwrap(),
        report(22, 2, 22, 0)
    );
    let sizes: Vec<usize> = seen.lock().unwrap().iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![15, 7]);
    f.assert_empty().await;
}

#[tokio::test]
async fn a_partial_failure_deletes_only_the_others_and_the_failed_one_comes_back() {
    let f = fixture(settings(10, 1, 5)).await;
    f.send("ok-1").await;
    let bad = f.send("bad").await;
    f.send("ok-2").await;
    let fail_once = Arc::new(Mutex::new(true));
    let flag = fail_once.clone();
    let (handler, seen) = recording(move |m| {
        m.body.as_deref() == Some("bad") && std::mem::replace(&mut *flag.lock().unwrap(), false)
    });
    assert_eq!(
        f.source.poll_once(&handler).await.unwrap(),
        report(3, 1, 2, 1)
    );
    // Only the failed one is left, in flight until its visibility timeout ends.
    assert_eq!(f.counts(&f.queue_url).await, (0, 1));
    assert_eq!(
        f.source.poll_once(&handler).await.unwrap(),
        QueuePollReport::default(),
        "invisible during the visibility timeout"
    );

    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        f.source.poll_once(&handler).await.unwrap(),
        report(1, 1, 1, 0)
    );
    let batches = seen.lock().unwrap().clone();
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[1].len(), 1);
    assert_eq!(batches[1][0].message_id.as_deref(), Some(bad.as_str()));
    assert_eq!(receive_count(&batches[1][0]), "2");
    f.assert_empty().await;
    assert_eq!(f.counts(&f.dlq_url).await, (0, 0));
}

#[tokio::test]
async fn a_message_that_always_fails_ends_in_the_dlq_after_max_receive_count() {
    let max = 2;
    let f = fixture(settings(10, 1, max)).await;
    let poison = f.send("poison").await;
    f.send("fine").await;
    let (handler, seen) = recording(|m| m.body.as_deref() == Some("poison"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let dead = loop {
        f.source.poll_once(&handler).await.unwrap();
        let dead = f.receive(&f.dlq_url).await;
        if !dead.is_empty() {
            break dead;
        }
        assert!(
            Instant::now() < deadline,
            "the poison message never reached the DLQ"
        );
        tokio::time::sleep(Duration::from_millis(1200)).await;
    };
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].body.as_deref(), Some("poison"));
    assert_eq!(dead[0].message_id.as_deref(), Some(poison.as_str()));

    let deliveries: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .flatten()
        .filter(|m| m.message_id.as_deref() == Some(poison.as_str()))
        .map(|m| receive_count(m).to_string())
        .collect();
    assert_eq!(
        deliveries,
        (1..=max).map(|n| n.to_string()).collect::<Vec<_>>(),
        "the handler saw the poison message exactly maxReceiveCount times"
    );
    let fine = seen
        .lock()
        .unwrap()
        .iter()
        .flatten()
        .filter(|m| m.body.as_deref() == Some("fine"))
        .count();
    assert_eq!(fine, 1, "the other message was delivered once and deleted");
    f.assert_empty().await;
}

/// A handler that fails the batch as a whole in some way.
async fn assert_whole_batch_fails(handler: SqsBatchHandler) {
    let f = fixture(settings(10, 1, 5)).await;
    f.send("a").await;
    f.send("b").await;
    assert_eq!(
        f.source.poll_once(&handler).await.unwrap(),
        report(2, 1, 0, 2)
    );
    assert_eq!(f.counts(&f.queue_url).await, (0, 2), "nothing deleted");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (ok, seen) = recording(|_| false);
    assert_eq!(f.source.poll_once(&ok).await.unwrap(), report(2, 1, 2, 0));
    let seen = seen.lock().unwrap().clone();
    assert!(seen[0].iter().all(|m| receive_count(m) == "2"));
    f.assert_empty().await;
}

#[tokio::test]
async fn a_panicking_handler_fails_the_batch_and_nothing_is_deleted() {
    let in_future: SqsBatchHandler = Arc::new(|_| Box::pin(async { panic!("handler crashed") }));
    assert_whole_batch_fails(in_future).await;
    let before_future: SqsBatchHandler = Arc::new(|_| panic!("handler crashed early"));
    assert_whole_batch_fails(before_future).await;
}

#[tokio::test]
async fn an_error_or_a_bad_failure_list_fails_the_batch() {
    let err: SqsBatchHandler = Arc::new(|_| Box::pin(async { Err("boom".to_string()) }));
    assert_whole_batch_fails(err).await;
    let unknown: SqsBatchHandler = Arc::new(|_| {
        Box::pin(async {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = "not-a-message-of-this-batch".into();
            let mut response = SqsBatchResponse::default();
            response.batch_item_failures.push(failure);
            Ok(response)
        })
    });
    assert_whole_batch_fails(unknown).await;
    let empty: SqsBatchHandler = Arc::new(|_| {
        Box::pin(async {
            let mut response = SqsBatchResponse::default();
            response
                .batch_item_failures
                .push(BatchItemFailure::default());
            Ok(response)
        })
    });
    assert_whole_batch_fails(empty).await;
}

#[tokio::test]
async fn ensure_queue_with_dlq_sets_the_redrive_policy_and_is_idempotent() {
    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let name = format!("summarize-{}", uuid::Uuid::new_v4().simple());
    let (url, dlq) = ensure_queue_with_dlq(&sqs, &name, &settings(10, 360, 5))
        .await
        .unwrap();
    // Again, with other settings: same queues, the new settings.
    let again = ensure_queue_with_dlq(&sqs, &name, &settings(10, 7, 3))
        .await
        .unwrap();
    assert_eq!(again, (url.clone(), dlq.clone()));
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    assert_eq!(attrs[&QueueAttributeName::VisibilityTimeout], "7");
    let policy: serde_json::Value =
        serde_json::from_str(&attrs[&QueueAttributeName::RedrivePolicy]).unwrap();
    assert_eq!(
        policy["deadLetterTargetArn"].as_str(),
        Some(queue_arn(&sqs, &dlq).await.unwrap().as_str())
    );
    assert_eq!(policy["maxReceiveCount"].to_string().trim_matches('"'), "3");
}

#[tokio::test]
async fn run_delivers_until_stopped() {
    let f = fixture(settings(10, 30, 5)).await;
    let (handler, seen) = recording(|_| false);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let Fixture {
        sqs,
        queue_url,
        source,
        ..
    } = f;
    let task = tokio::spawn(source.run(handler, Duration::from_millis(100), stop_rx));
    for i in 0..3 {
        sqs.send_message()
            .queue_url(&queue_url)
            .message_body(format!("m{i}"))
            .send()
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().iter().map(Vec::len).sum::<usize>() < 3 {
        assert!(Instant::now() < deadline, "run never delivered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("run stops")
        .unwrap();
}

const YAML: &str = r#"
Parameters:
  MaxReceives:
    Type: Number
    Default: 4
  Batch:
    Type: Number
    Default: 8
Resources:
  Dlq:
    Type: AWS::SQS::Queue
  Q:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 120
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt Dlq.Arn
        maxReceiveCount: !Ref MaxReceives
  NoRedrive:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        Ev:
          Type: SQS
          Properties:
            Queue: !GetAtt Q.Arn
            BatchSize: !Ref Batch
            FunctionResponseTypes: [ReportBatchItemFailures]
        Defaults:
          Type: SQS
          Properties:
            Queue: !GetAtt Q.Arn
            FunctionResponseTypes: [ReportBatchItemFailures]
        NoPartial:
          Type: SQS
          Properties:
            Queue: !GetAtt Q.Arn
        OnDlq:
          Type: SQS
          Properties:
            Queue: !GetAtt Dlq.Arn
            FunctionResponseTypes: [ReportBatchItemFailures]
        OnNoRedrive:
          Type: SQS
          Properties:
            Queue: !GetAtt NoRedrive.Arn
            FunctionResponseTypes: [ReportBatchItemFailures]
"#;

#[test]
fn settings_from_inline_template() {
    let t = Template::parse(YAML).unwrap();
    assert_eq!(
        QueueSettings::from_template(&t, "Q", "Fn", "Ev").unwrap(),
        QueueSettings {
            batch_size: 8,
            visibility_timeout: Duration::from_secs(120),
            max_receive_count: 4,
        }
    );
    // Lambda's default batch size for SQS is 10.
    assert_eq!(
        QueueSettings::from_template(&t, "Q", "Fn", "Defaults")
            .unwrap()
            .batch_size,
        10
    );
    // The event must read that queue, report partial failures, and the queue must redrive.
    assert!(QueueSettings::from_template(&t, "Q", "Fn", "NoPartial").is_err());
    assert!(QueueSettings::from_template(&t, "Q", "Fn", "OnDlq").is_err());
    assert!(QueueSettings::from_template(&t, "NoRedrive", "Fn", "OnNoRedrive").is_err());
    assert!(QueueSettings::from_template(&t, "Missing", "Fn", "Ev").is_err());
    assert!(QueueSettings::from_template(&t, "Q", "Fn", "Missing").is_err());
}

#[tokio::test]
async fn settings_from_the_real_template_create_the_queue() {
    let t = Template::bundled().unwrap();
    let s =
        QueueSettings::from_template(&t, "SummarizeQueue", "SummarizeFunction", SUMMARIZE_EVENT)
            .unwrap();
    assert_eq!(
        s,
        QueueSettings {
            batch_size: 5,
            visibility_timeout: Duration::from_secs(360),
            max_receive_count: 8,
        },
        "SummarizeBatchSize / VisibilityTimeout / SummarizeMaxReceiveCount defaults"
    );
    let dlq = t.sqs_queue("SummarizeQueue").unwrap().dead_letter_target;
    assert_eq!(dlq.as_deref(), Some("SummarizeDlq"));

    // The local stack's queue, made from them, is the template's.
    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let name = format!("summarize-{}", uuid::Uuid::new_v4().simple());
    let (url, dlq_url) = ensure_queue_with_dlq(&sqs, &name, &s).await.unwrap();
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    assert_eq!(attrs[&QueueAttributeName::VisibilityTimeout], "360");
    let policy: serde_json::Value =
        serde_json::from_str(&attrs[&QueueAttributeName::RedrivePolicy]).unwrap();
    assert_eq!(policy["maxReceiveCount"].to_string().trim_matches('"'), "8");
    assert_eq!(
        policy["deadLetterTargetArn"].as_str(),
        Some(queue_arn(&sqs, &dlq_url).await.unwrap().as_str())
    );
}

/// The summarize function's SQS event in template.yaml.
const SUMMARIZE_EVENT: &str = "SummarizeMessages";

// The template readers under QueueSettings::from_template.

const SQS_YAML: &str = r#"
Parameters:
  MaxReceives:
    Type: Number
    Default: 5
  Batch:
    Type: Number
    Default: "7"
Resources:
  Dlq:
    Type: AWS::SQS::Queue
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 360
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt Dlq.Arn
        maxReceiveCount: !Ref MaxReceives
  JsonQueue:
    Type: AWS::SQS::Queue
    Properties:
      RedrivePolicy: '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:1:d", "maxReceiveCount": 3}'
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        Q:
          Type: SQS
          Properties:
            Queue: { "Fn::GetAtt": [Queue, Arn] }
            BatchSize: !Ref Batch
            MaximumBatchingWindowInSeconds: 2
            FunctionResponseTypes: [ReportBatchItemFailures]
            ScalingConfig:
              MaximumConcurrency: 4
        S:
          Type: DynamoDB
"#;

#[test]
fn template_reads_queues_and_sqs_events() {
    let t = Template::parse(SQS_YAML).unwrap();
    assert_eq!(
        t.sqs_queue("Queue").unwrap(),
        QueueDefinition {
            visibility_timeout: Some(360),
            max_receive_count: Some(5),
            dead_letter_target: Some("Dlq".into()),
        }
    );
    assert_eq!(
        t.sqs_queue("Dlq").unwrap(),
        QueueDefinition {
            visibility_timeout: None,
            max_receive_count: None,
            dead_letter_target: None,
        }
    );
    assert_eq!(t.sqs_queue("JsonQueue").unwrap().max_receive_count, Some(3));
    assert_eq!(
        t.sqs_event("Fn", "Q").unwrap(),
        SqsEventDefinition {
            queue: Some("Queue".into()),
            batch_size: Some(7),
            maximum_batching_window_in_seconds: Some(2),
            function_response_types: vec!["ReportBatchItemFailures".into()],
            maximum_concurrency: Some(4),
        }
    );
}

#[test]
fn template_refuses_what_is_not_a_queue_or_an_sqs_event() {
    let t = Template::parse(SQS_YAML).unwrap();
    assert!(t.sqs_queue("Fn").is_err());
    assert!(t.sqs_queue("Missing").is_err());
    assert!(t.sqs_event("Fn", "S").is_err());
    assert!(t.sqs_event("Fn", "Missing").is_err());
}
