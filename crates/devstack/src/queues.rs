//! The SQS event source mapping, emulated for the local stack: moto serves the queues (and their
//! visibility timeout and redrive to the DLQ) but invokes no Lambda from them, so this polls the
//! queue and feeds batches to the **same handler** the Lambda runs, honouring its partial-batch
//! response (`ReportBatchItemFailures`) as Lambda does:
//!
//! * ReceiveMessage with `WaitTimeSeconds` 0 (the emulator applies one request at a time, so a
//!   long poll would stall it), all system attributes (so `ApproximateReceiveCount` is set) and
//!   all message attributes; batches of at most `batch_size` messages in Lambda's event shape;
//! * the messages the handler did not list in `batchItemFailures` are deleted; the failed ones
//!   are left alone. An `Err`, a panic, or a failure list naming an unknown or empty
//!   `itemIdentifier` fails the whole batch (nothing deleted), as in Lambda;
//! * a message left alone becomes visible again after the queue's visibility timeout, and moto's
//!   own redrive moves it to the DLQ once it has been received `maxReceiveCount` times. Neither
//!   is emulated here: the queue's own settings, as [`ensure_queue_with_dlq`] creates them from
//!   the template, do it.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::encodings::Base64Data;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message, MessageAttributeValue, MessageSystemAttributeName,
    QueueAttributeName,
};
use futures::future::BoxFuture;

use crate::template::{Template, TemplateError};

/// Lambda-shaped SQS handler: batch in, partial-batch response out (ReportBatchItemFailures).
pub type SqsBatchHandler =
    Arc<dyn Fn(SqsEvent) -> BoxFuture<'static, Result<SqsBatchResponse, String>> + Send + Sync>;

/// Lambda's default batch size for SQS event sources.
pub const DEFAULT_BATCH_SIZE: usize = 10;
/// SQS's default visibility timeout.
pub const DEFAULT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);
/// ReceiveMessage returns at most this many messages per call.
const MAX_RECEIVE: usize = 10;
/// DeleteMessageBatch takes at most this many entries per call.
const MAX_DELETE: usize = 10;

/// How the queue delivers and how the event source feeds the handler: the template's queue and
/// event source settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSettings {
    /// At most this many messages per invocation (≥ 1).
    pub batch_size: usize,
    /// The queue's `VisibilityTimeout` (whole seconds on the wire; a fraction is rounded up).
    pub visibility_timeout: Duration,
    /// The queue's `RedrivePolicy.maxReceiveCount`: receives before moto moves a message to the
    /// DLQ.
    pub max_receive_count: u32,
}

impl QueueSettings {
    /// The settings of the queue `queue_id` and of the `Type: SQS` event `event_id` of
    /// `function_id` in the template, `!Ref Param` resolved to the parameter's Default. The event
    /// must read that queue and use `ReportBatchItemFailures` (the only response type this
    /// emulates), and the queue must have a redrive policy; anything else is an error rather than
    /// a silent difference from the deployment.
    pub fn from_template(
        t: &Template,
        queue_id: &str,
        function_id: &str,
        event_id: &str,
    ) -> Result<Self, TemplateError> {
        let event_ref = format!("{function_id}.Events.{event_id}");
        let invalid = |id: &str, message: String| TemplateError::Invalid {
            id: id.to_string(),
            message,
        };
        let queue = t.sqs_queue(queue_id)?;
        let event = t.sqs_event(function_id, event_id)?;
        if event.queue.as_deref() != Some(queue_id) {
            return Err(invalid(
                &event_ref,
                format!(
                    "Queue is {:?}, not !GetAtt {queue_id}.Arn",
                    event.queue.as_deref()
                ),
            ));
        }
        if !event
            .function_response_types
            .iter()
            .any(|r| r == "ReportBatchItemFailures")
        {
            return Err(invalid(
                &event_ref,
                "FunctionResponseTypes lacks ReportBatchItemFailures, the only response type \
                 the local event source emulates"
                    .into(),
            ));
        }
        let batch_size = match event.batch_size {
            None => DEFAULT_BATCH_SIZE,
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| invalid(&event_ref, format!("BatchSize {n}")))?,
        };
        let visibility_timeout = queue
            .visibility_timeout
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_VISIBILITY_TIMEOUT);
        let max_receive_count = match queue.max_receive_count {
            None => {
                return Err(invalid(
                    queue_id,
                    "has no RedrivePolicy.maxReceiveCount: a failing message would be \
                     redelivered forever"
                        .into(),
                ))
            }
            Some(n) => u32::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| invalid(queue_id, format!("maxReceiveCount {n}")))?,
        };
        Ok(QueueSettings {
            batch_size,
            visibility_timeout,
            max_receive_count,
        })
    }

    /// `VisibilityTimeout` as SQS takes it: whole seconds, rounded up.
    fn visibility_seconds(&self) -> u64 {
        let d = self.visibility_timeout;
        d.as_secs() + u64::from(d.subsec_nanos() > 0)
    }
}

/// Creates (or finds) the DLQ `<name>-dlq` and the queue `name` with
/// `RedrivePolicy {deadLetterTargetArn, maxReceiveCount}` and `VisibilityTimeout`, as the template
/// does. A queue that already exists gets these attributes set again, so it matches `settings`.
/// Returns `(queue_url, dlq_url)`.
pub async fn ensure_queue_with_dlq(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    settings: &QueueSettings,
) -> anyhow::Result<(String, String)> {
    anyhow::ensure!(
        settings.max_receive_count >= 1,
        "maxReceiveCount must be at least 1"
    );
    let dlq_name = format!("{name}-dlq");
    let dlq_url = crate::streams::ensure_queue(sqs, &dlq_name).await?;
    let dlq_arn = queue_arn(sqs, &dlq_url).await?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": settings.max_receive_count,
    })
    .to_string();
    let visibility = settings.visibility_seconds().to_string();
    let attributes = HashMap::from([
        (QueueAttributeName::RedrivePolicy, redrive),
        (QueueAttributeName::VisibilityTimeout, visibility),
    ]);
    let queue_url = match sqs
        .create_queue()
        .queue_name(name)
        .set_attributes(Some(attributes.clone()))
        .send()
        .await
    {
        Ok(out) => out
            .queue_url
            .ok_or_else(|| anyhow::anyhow!("CreateQueue {name} returned no URL"))?,
        Err(e) => sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .map_err(|_| anyhow::anyhow!("CreateQueue {name}: {}", stages::aws::error_message(&e)))?
            .queue_url
            .ok_or_else(|| anyhow::anyhow!("GetQueueUrl {name} returned no URL"))?,
    };
    // Created or found: make its settings the template's either way.
    sqs.set_queue_attributes()
        .queue_url(&queue_url)
        .set_attributes(Some(attributes))
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "SetQueueAttributes {name}: {}",
                stages::aws::error_message(&e)
            )
        })?;
    Ok((queue_url, dlq_url))
}

/// The queue's ARN (GetQueueAttributes `QueueArn`).
pub async fn queue_arn(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> anyhow::Result<String> {
    let out = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "GetQueueAttributes {queue_url}: {}",
                stages::aws::error_message(&e)
            )
        })?;
    out.attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| anyhow::anyhow!("GetQueueAttributes {queue_url} returned no QueueArn"))
}

/// What one [`SqsEventSource::poll_once`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueuePollReport {
    /// Messages received (a message received twice in one poll counts twice).
    pub received: usize,
    /// Handler invocations.
    pub invocations: usize,
    /// Messages deleted: the handler succeeded on them.
    pub deleted: usize,
    /// Messages the handler failed (listed in `batchItemFailures`, or in a batch that failed as
    /// a whole), left in the queue for redelivery or the DLQ.
    pub failed: usize,
}

impl QueuePollReport {
    pub fn is_idle(&self) -> bool {
        *self == QueuePollReport::default()
    }
}

/// A received message, with what deleting it needs.
struct Received {
    message_id: String,
    receipt_handle: String,
    lambda: SqsMessage,
}

/// The emulated event source mapping of one queue.
pub struct SqsEventSource {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    queue_arn: String,
    region: String,
    settings: QueueSettings,
}

impl SqsEventSource {
    /// `queue_arn` is the `eventSourceARN` of the delivered messages (see [`queue_arn`]).
    pub fn new(
        sqs: aws_sdk_sqs::Client,
        queue_url: String,
        queue_arn: String,
        settings: QueueSettings,
    ) -> Self {
        let region = sqs
            .config()
            .region()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "us-east-1".to_string());
        SqsEventSource {
            sqs,
            queue_url,
            queue_arn,
            region,
            settings,
        }
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    pub fn queue_arn(&self) -> &str {
        &self.queue_arn
    }

    pub fn settings(&self) -> &QueueSettings {
        &self.settings
    }

    /// Receives up to `batch_size` messages, delivers them to the handler in Lambda's event
    /// shape, deletes exactly the ones it did not report failed, and goes on until a receive
    /// returns nothing. A poll also ends after a batch holding a message it already delivered
    /// (a visibility timeout shorter than the poll), so it always ends. Returns counts.
    pub async fn poll_once(&self, handler: &SqsBatchHandler) -> anyhow::Result<QueuePollReport> {
        let mut report = QueuePollReport::default();
        let mut delivered: HashSet<String> = HashSet::new();
        loop {
            let (batch, drained) = match self.receive_batch().await {
                Ok(r) => r,
                Err(e) => {
                    if !report.is_idle() {
                        tracing::warn!(?report, "sqs event source: poll ended with an error");
                    }
                    return Err(e);
                }
            };
            if batch.is_empty() {
                break;
            }
            report.received += batch.len();
            let mut repeated = false;
            for m in &batch {
                repeated |= !delivered.insert(m.message_id.clone());
            }
            let n = batch.len();
            report.invocations += 1;
            let started = Instant::now();
            let failed = self.invoke(handler, &batch).await;
            let elapsed = started.elapsed();
            if elapsed > self.settings.visibility_timeout {
                tracing::warn!(
                    queue = %self.queue_url,
                    ?elapsed,
                    visibility_timeout = ?self.settings.visibility_timeout,
                    "the handler ran longer than the visibility timeout: its messages may have been \
                     delivered again"
                );
            }
            let done: Vec<&Received> = match &failed {
                None => batch.iter().collect(),
                Some(failed) => batch
                    .iter()
                    .filter(|m| !failed.contains(&m.message_id))
                    .collect(),
            };
            report.failed += n - done.len();
            match self.delete(&done).await {
                Ok(deleted) => report.deleted += deleted,
                Err(e) => {
                    tracing::warn!(?report, "sqs event source: poll ended with an error");
                    return Err(e);
                }
            }
            if drained || repeated {
                break;
            }
        }
        Ok(report)
    }

    /// Loops poll_once every `interval` until `stop` turns true; logs errors and goes on.
    /// Stopping mid-poll is safe: a message is deleted only once the handler's answer is in, so
    /// an interrupted batch comes back after the visibility timeout.
    pub async fn run(
        self,
        handler: SqsBatchHandler,
        interval: Duration,
        stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut state = (self, handler);
        crate::poll::until_stopped(&mut state, interval, stop, |(source, handler)| {
            Box::pin(async move {
                match source.poll_once(handler).await {
                    Ok(report) if report.is_idle() => {}
                    Ok(report) => tracing::info!(
                        queue = %source.queue_url,
                        received = report.received,
                        invocations = report.invocations,
                        deleted = report.deleted,
                        failed = report.failed,
                        "sqs event source delivered"
                    ),
                    Err(e) => tracing::error!(queue = %source.queue_url, error = %e, "sqs event source poll failed"),
                }
            })
        })
        .await
    }

    /// Up to `batch_size` messages (several receives if it is above 10). `drained` = the last
    /// receive returned fewer than asked, so the queue had nothing more visible.
    async fn receive_batch(&self) -> anyhow::Result<(Vec<Received>, bool)> {
        let want = self.settings.batch_size.max(1);
        let mut batch = Vec::new();
        while batch.len() < want {
            let ask = (want - batch.len()).min(MAX_RECEIVE);
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(ask as i32)
                .wait_time_seconds(0)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "ReceiveMessage {}: {}",
                        self.queue_url,
                        stages::aws::error_message(&e)
                    )
                })?;
            let messages = out.messages.unwrap_or_default();
            let got = messages.len();
            for message in messages {
                match to_lambda_message(&message, &self.queue_arn, &self.region) {
                    Some(lambda) => batch.push(Received {
                        message_id: lambda.message_id.clone().unwrap_or_default(),
                        receipt_handle: lambda.receipt_handle.clone().unwrap_or_default(),
                        lambda,
                    }),
                    None => tracing::warn!(
                        queue = %self.queue_url,
                        "message without a MessageId or ReceiptHandle skipped"
                    ),
                }
            }
            if got < ask {
                return Ok((batch, true));
            }
        }
        Ok((batch, false))
    }

    /// Runs the handler in its own task (a panic is a function error, as a crashed Lambda) and
    /// reads its partial-batch response: `None` = every message succeeded, else the failed
    /// message ids (all of them when the batch failed as a whole).
    async fn invoke(
        &self,
        handler: &SqsBatchHandler,
        batch: &[Received],
    ) -> Option<HashSet<String>> {
        let all = || -> Option<HashSet<String>> {
            Some(batch.iter().map(|m| m.message_id.clone()).collect())
        };
        let whole = |reason: String| {
            tracing::warn!(
                queue = %self.queue_url,
                messages = batch.len(),
                %reason,
                "sqs event source: the batch failed as a whole"
            );
            all()
        };
        let event = {
            let mut event = SqsEvent::default();
            event.records = batch.iter().map(|m| m.lambda.clone()).collect();
            event
        };
        let handler = handler.clone();
        let future = match std::panic::catch_unwind(AssertUnwindSafe(move || handler(event))) {
            Ok(f) => f,
            Err(_) => return whole("the handler panicked".into()),
        };
        let response = match tokio::spawn(future).await {
            Ok(Ok(response)) => response,
            Ok(Err(message)) => return whole(format!("function error: {message}")),
            Err(e) if e.is_panic() => return whole("the handler panicked".into()),
            Err(e) => return whole(format!("the handler task failed: {e}")),
        };
        if response.batch_item_failures.is_empty() {
            return None;
        }
        let ids: HashSet<&str> = batch.iter().map(|m| m.message_id.as_str()).collect();
        let mut failed = HashSet::new();
        for failure in &response.batch_item_failures {
            let id = failure.item_identifier.as_str();
            if id.is_empty() {
                return whole("batchItemFailures has an empty itemIdentifier".into());
            }
            if !ids.contains(id) {
                return whole(format!(
                    "batchItemFailures names {id:?}, which is not a messageId of the batch"
                ));
            }
            failed.insert(id.to_string());
        }
        Some(failed)
    }

    /// Deletes the messages (DeleteMessageBatch, 10 per call). Returns how many were deleted;
    /// an entry SQS refuses is logged and not counted (it comes back and is delivered again).
    async fn delete(&self, messages: &[&Received]) -> anyhow::Result<usize> {
        let mut deleted = 0;
        for chunk in messages.chunks(MAX_DELETE) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(format!("m{i}"))
                        .receipt_handle(&m.receipt_handle)
                        .build()
                        .map_err(|e| anyhow::anyhow!("DeleteMessageBatch entry: {e}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let out = self
                .sqs
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "DeleteMessageBatch {}: {}",
                        self.queue_url,
                        stages::aws::error_message(&e)
                    )
                })?;
            deleted += out.successful.len();
            for f in &out.failed {
                tracing::warn!(
                    queue = %self.queue_url,
                    entry = %f.id,
                    code = %f.code,
                    message = ?f.message,
                    "DeleteMessageBatch refused an entry; the message will be delivered again"
                );
            }
        }
        Ok(deleted)
    }
}

/// A received message as Lambda delivers it to a function (`Records[]` of the SQS event).
/// `None` if it lacks a MessageId or ReceiptHandle (SQS always sets both).
pub fn to_lambda_message(message: &Message, queue_arn: &str, region: &str) -> Option<SqsMessage> {
    let mut out = SqsMessage::default();
    out.message_id = Some(message.message_id.clone()?);
    out.receipt_handle = Some(message.receipt_handle.clone()?);
    out.body = message.body.clone();
    out.md5_of_body = message.md5_of_body.clone();
    out.md5_of_message_attributes = message.md5_of_message_attributes.clone();
    out.attributes = message
        .attributes
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str().to_string(), v.clone()))
        .collect();
    out.message_attributes = message
        .message_attributes
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), to_lambda_attribute(v)))
        .collect();
    out.event_source = Some("aws:sqs".to_string());
    out.event_source_arn = Some(queue_arn.to_string());
    out.aws_region = Some(region.to_string());
    Some(out)
}

fn to_lambda_attribute(value: &MessageAttributeValue) -> SqsMessageAttribute {
    let base64 = |bytes: &[u8]| {
        let mut data = Base64Data::default();
        data.extend_from_slice(bytes);
        data
    };
    let mut out = SqsMessageAttribute::default();
    out.data_type = Some(value.data_type.clone());
    out.string_value = value.string_value.clone();
    out.binary_value = value.binary_value.as_ref().map(|b| base64(b.as_ref()));
    out.string_list_values = value.string_list_values.clone().unwrap_or_default();
    out.binary_list_values = value
        .binary_list_values
        .iter()
        .flatten()
        .map(|b| base64(b.as_ref()))
        .collect();
    out
}
