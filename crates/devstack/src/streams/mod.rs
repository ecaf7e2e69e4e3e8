//! The DynamoDB-stream event source mapping, emulated for the local stack: moto serves the
//! table's stream but invokes no Lambda from it, so this reads the stream (DescribeTable →
//! `LatestStreamArn` → DescribeStream / GetShardIterator / GetRecords), applies the template's
//! filter, converts records into Lambda's event shape and feeds them in batches to the **same
//! handler** the Lambda runs, honouring its partial-batch response as Lambda does:
//!
//! * per shard, in order; batches of at most `batch_size` records that pass the filter
//!   (filtered-out records are skipped, never delivered);
//! * `batchItemFailures`: records before the lowest failed sequence number are done
//!   (checkpoint), the rest of the batch is retried after a backoff; an `Err`, a panic, or a
//!   malformed failure list fails the whole batch;
//! * `BisectBatchOnFunctionError`: a batch that failed as a whole is split in two halves, each
//!   retried separately, until the failing record is alone;
//! * a record that failed more than `MaximumRetryAttempts` retries, once its failure is pinned on
//!   it, goes to the OnFailure queue (one SQS message per record, Lambda's OnFailure shape) and
//!   the shard moves past it, so a poison record neither blocks the shard nor loses the records
//!   behind it.

use std::collections::{HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use futures::future::BoxFuture;
use serde_json::json;
use time::OffsetDateTime;

use ops::stream_record::to_lambda_record;

use crate::template::{Template, TemplateError};

/// The Lambda-shaped handler: a batch in, partial-batch response out (lambda
/// ReportBatchItemFailures).
pub type BatchHandler =
    Arc<dyn Fn(Event) -> BoxFuture<'static, Result<DynamoDbEventResponse, String>> + Send + Sync>;

mod settings;
pub use settings::*;

/// Lambda's default batch size for DynamoDB stream event sources.
pub const DEFAULT_BATCH_SIZE: usize = 100;
/// Base of the backoff between retries when the settings come from the template (Lambda's own
/// backoff is not configurable); it doubles per failure of the record.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(500);
/// The backoff never exceeds this (or `retry_backoff`, if that is larger).
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(10);
/// `functionArn` in the OnFailure messages unless [`StreamEventSource::with_function_arn`].
pub const DEFAULT_FUNCTION_ARN: &str = "local:enrich";

/// What one [`StreamEventSource::poll_once`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PollReport {
    /// Records read from the stream.
    pub read: usize,
    /// Records skipped by the filter (never delivered).
    pub filtered_out: usize,
    /// Handler invocations.
    pub invocations: usize,
    /// Records done: the handler succeeded on them.
    pub succeeded: usize,
    /// Record deliveries to be repeated: for each failed invocation, the records of its batch
    /// from the failed one on that were queued again.
    pub retried: usize,
    /// Records sent to the OnFailure queue.
    pub dead_lettered: usize,
}

impl PollReport {
    fn add(&mut self, other: &PollReport) {
        self.read += other.read;
        self.filtered_out += other.filtered_out;
        self.invocations += other.invocations;
        self.succeeded += other.succeeded;
        self.retried += other.retried;
        self.dead_lettered += other.dead_lettered;
    }

    pub fn is_idle(&self) -> bool {
        *self == PollReport::default()
    }
}

/// A record read from the shard and not done yet.
struct Pending {
    record: EventRecord,
    sequence: String,
    arrival: Option<SystemTime>,
    invocations: u32,
    failures: u32,
}

struct Shard {
    id: String,
    parent: Option<String>,
    /// `None` before the first GetShardIterator, and after the shard closed.
    iterator: Option<String>,
    started: bool,
    closed: bool,
    last_read: Option<String>,
    pending: VecDeque<Pending>,
    /// Bisected or retried batches at the front of `pending`, as lengths; the last one is the
    /// front-most, the next batch to deliver. Empty = take up to `batch_size` records.
    segments: Vec<usize>,
}

impl Shard {
    fn finished(&self) -> bool {
        self.closed && self.pending.is_empty()
    }
}

/// How one invocation ended.
enum Outcome {
    Success,
    /// The lowest failed index in the batch, and the failed sequence numbers.
    Partial(usize, HashSet<String>),
    /// `Err`, panic, or a failure list Lambda would treat as a complete failure.
    Whole(String),
}

/// The emulated event source mapping of one table's stream.
pub struct StreamEventSource {
    streams: aws_sdk_dynamodbstreams::Client,
    sqs: aws_sdk_sqs::Client,
    stream_arn: String,
    region: String,
    dlq_url: String,
    function_arn: String,
    settings: EventSourceSettings,
    shards: Vec<Shard>,
}

impl StreamEventSource {
    /// Finds the table's LatestStreamArn, lists shards, starts each at TRIM_HORIZON. `dlq_url`
    /// is an SQS queue (the local OnFailure destination).
    pub async fn new(
        sdk: &aws_config::SdkConfig,
        table_name: &str,
        dlq_url: String,
        settings: EventSourceSettings,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(settings.batch_size >= 1, "batch_size must be at least 1");
        let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
        let table = dynamodb
            .describe_table()
            .table_name(table_name)
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "DescribeTable {table_name}: {}",
                    stages::aws::error_message(&e)
                )
            })?;
        let stream_arn = table
            .table
            .and_then(|t| t.latest_stream_arn)
            .ok_or_else(|| anyhow::anyhow!("table {table_name} has no stream enabled"))?;
        let region = sdk
            .region()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "us-east-1".to_string());
        let mut source = StreamEventSource {
            streams: aws_sdk_dynamodbstreams::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            stream_arn,
            region,
            dlq_url,
            function_arn: DEFAULT_FUNCTION_ARN.to_string(),
            settings,
            shards: Vec::new(),
        };
        source.discover_shards().await?;
        for shard in &mut source.shards {
            start_shard(&source.streams, &source.stream_arn, shard).await?;
        }
        Ok(source)
    }

    /// The `functionArn` written into OnFailure messages (default `local:enrich`).
    pub fn with_function_arn(mut self, arn: impl Into<String>) -> Self {
        self.function_arn = arn.into();
        self
    }

    pub fn stream_arn(&self) -> &str {
        &self.stream_arn
    }

    pub fn dlq_url(&self) -> &str {
        &self.dlq_url
    }

    pub fn settings(&self) -> &EventSourceSettings {
        &self.settings
    }

    /// Records read and not done yet (being retried, or behind a retried one).
    pub fn in_flight(&self) -> usize {
        self.shards.iter().map(|s| s.pending.len()).sum()
    }

    /// Reads what is new on every shard, filters, and delivers batches to the handler until
    /// every record read so far is either succeeded, filtered out or dead-lettered (sleeping the
    /// backoff between retries). Returns counts.
    pub async fn poll_once(&mut self, handler: &BatchHandler) -> anyhow::Result<PollReport> {
        self.discover_shards().await?;
        let mut report = PollReport::default();
        // A child shard (after a shard split) starts once its parent is finished, as Lambda
        // keeps a key's records in order across shards.
        for i in 0..self.shards.len() {
            let parent_done = match &self.shards[i].parent {
                None => true,
                Some(p) => self
                    .shards
                    .iter()
                    .find(|s| &s.id == p)
                    .is_none_or(Shard::finished),
            };
            if !parent_done {
                continue;
            }
            let shard = &mut self.shards[i];
            if !shard.started {
                start_shard(&self.streams, &self.stream_arn, shard).await?;
            }
            let read = read_shard(
                &self.streams,
                &self.stream_arn,
                &self.region,
                &self.settings,
                shard,
            )
            .await?;
            report.add(&read);
        }
        let ctx = Deliver {
            sqs: &self.sqs,
            stream_arn: &self.stream_arn,
            dlq_url: &self.dlq_url,
            function_arn: &self.function_arn,
            settings: &self.settings,
            handler,
        };
        let results = futures::future::join_all(self.shards.iter_mut().map(|s| ctx.drain(s))).await;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(r) => report.add(&r),
                Err((r, e)) => {
                    report.add(&r);
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => {
                tracing::warn!(?report, "stream event source: poll ended with an error");
                Err(e)
            }
            None => Ok(report),
        }
    }

    /// Loops poll_once every `interval` until `stop` turns true; logs errors and goes on.
    /// Stopping mid-poll is safe: a record leaves `pending` only once the handler's answer (or
    /// the DLQ send) is in, so an interrupted batch is delivered again.
    pub async fn run(
        self,
        handler: BatchHandler,
        interval: Duration,
        stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut state = (self, handler);
        crate::poll::until_stopped(&mut state, interval, stop, |(source, handler)| {
            Box::pin(async move {
                match source.poll_once(handler).await {
                    Ok(report) if report.is_idle() => {}
                    Ok(report) => tracing::info!(
                        stream = %source.stream_arn,
                        read = report.read,
                        filtered_out = report.filtered_out,
                        invocations = report.invocations,
                        succeeded = report.succeeded,
                        retried = report.retried,
                        dead_lettered = report.dead_lettered,
                        "stream event source delivered"
                    ),
                    Err(e) => tracing::error!(stream = %source.stream_arn, error = %e, "stream event source poll failed"),
                }
            })
        })
        .await
    }

    async fn discover_shards(&mut self) -> anyhow::Result<()> {
        let mut start: Option<String> = None;
        loop {
            let out = self
                .streams
                .describe_stream()
                .stream_arn(&self.stream_arn)
                .set_exclusive_start_shard_id(start.take())
                .send()
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "DescribeStream {}: {}",
                        self.stream_arn,
                        stages::aws::error_message(&e)
                    )
                })?;
            let Some(description) = out.stream_description else {
                break;
            };
            for shard in description.shards.unwrap_or_default() {
                let Some(id) = shard.shard_id else { continue };
                if self.shards.iter().any(|s| s.id == id) {
                    continue;
                }
                self.shards.push(Shard {
                    id,
                    parent: shard.parent_shard_id,
                    iterator: None,
                    started: false,
                    closed: false,
                    last_read: None,
                    pending: VecDeque::new(),
                    segments: Vec::new(),
                });
            }
            match description.last_evaluated_shard_id {
                Some(last) => start = Some(last),
                None => break,
            }
        }
        Ok(())
    }
}

/// Gets the shard's first iterator: TRIM_HORIZON, or after the last record read if it had one.
async fn start_shard(
    streams: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
    shard: &mut Shard,
) -> anyhow::Result<()> {
    let request = streams
        .get_shard_iterator()
        .stream_arn(stream_arn)
        .shard_id(&shard.id);
    let request = match &shard.last_read {
        None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        Some(seq) => request
            .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
            .sequence_number(seq),
    };
    let out = request.send().await.map_err(|e| {
        anyhow::anyhow!(
            "GetShardIterator {} {}: {}",
            stream_arn,
            shard.id,
            stages::aws::error_message(&e)
        )
    })?;
    shard.iterator = out.shard_iterator;
    shard.started = true;
    shard.closed = shard.iterator.is_none();
    Ok(())
}

/// Reads everything new on the shard into `pending` (filtered).
async fn read_shard(
    streams: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
    region: &str,
    settings: &EventSourceSettings,
    shard: &mut Shard,
) -> anyhow::Result<PollReport> {
    let mut report = PollReport::default();
    let mut renewed = false;
    while let Some(iterator) = shard.iterator.clone() {
        let out = match streams.get_records().shard_iterator(iterator).send().await {
            Ok(out) => out,
            Err(e)
                if !renewed
                    && e.as_service_error().is_some_and(|s| {
                        s.is_expired_iterator_exception() || s.is_trimmed_data_access_exception()
                    }) =>
            {
                // Iterators expire (15 min in AWS): get a new one after the last record read.
                renewed = true;
                start_shard(streams, stream_arn, shard).await?;
                continue;
            }
            Err(e) => {
                return Err(anyhow::anyhow!(
                    "GetRecords {} {}: {}",
                    stream_arn,
                    shard.id,
                    stages::aws::error_message(&e)
                ))
            }
        };
        shard.iterator = out.next_shard_iterator.clone();
        if shard.iterator.is_none() {
            shard.closed = true;
        }
        let records = out.records.unwrap_or_default();
        if records.is_empty() {
            break;
        }
        for record in &records {
            report.read += 1;
            let lambda = to_lambda_record(record, stream_arn, region);
            let Some(sequence) = lambda.change.sequence_number.clone() else {
                tracing::warn!(shard = %shard.id, "stream record without a sequence number skipped");
                continue;
            };
            shard.last_read = Some(sequence.clone());
            if !settings.passes(&lambda) {
                report.filtered_out += 1;
                continue;
            }
            let arrival = record
                .dynamodb
                .as_ref()
                .and_then(|d| d.approximate_creation_date_time)
                .and_then(|t| SystemTime::try_from(t).ok());
            shard.pending.push_back(Pending {
                record: lambda,
                sequence,
                arrival,
                invocations: 0,
                failures: 0,
            });
        }
    }
    Ok(report)
}

/// What delivering needs, borrowed from the source while its shards are drained concurrently.
struct Deliver<'a> {
    sqs: &'a aws_sdk_sqs::Client,
    stream_arn: &'a str,
    dlq_url: &'a str,
    function_arn: &'a str,
    settings: &'a EventSourceSettings,
    handler: &'a BatchHandler,
}

impl Deliver<'_> {
    /// Delivers the shard's pending records until none is left. On an error (the DLQ send
    /// failed) the records stay pending for the next poll.
    async fn drain(&self, shard: &mut Shard) -> Result<PollReport, (PollReport, anyhow::Error)> {
        let mut report = PollReport::default();
        let max = self.settings.max_retry_attempts;
        while !shard.pending.is_empty() {
            let n = match shard.segments.last() {
                Some(&s) => s,
                None => self.settings.batch_size,
            }
            .clamp(1, shard.pending.len());
            let most_failures = shard.pending.iter().take(n).map(|p| p.failures).max();
            let wait = self.settings.backoff(most_failures.unwrap_or(0));
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let mut event = Event::default();
            for p in shard.pending.iter_mut().take(n) {
                p.invocations = p.invocations.saturating_add(1);
                event.records.push(p.record.clone());
            }
            report.invocations += 1;
            let outcome = self.invoke(event, shard, n).await;
            // The segment this batch was (if any) is consumed; what is retried is pushed again.
            shard.segments.pop();
            let (done, whole, failed) = match outcome {
                Outcome::Success => (n, None, HashSet::new()),
                Outcome::Partial(i, failed) => (i, None, failed),
                Outcome::Whole(reason) => (0, Some(reason), HashSet::new()),
            };
            for _ in 0..done {
                shard.pending.pop_front();
            }
            report.succeeded += done;
            let rest = n - done;
            if rest == 0 {
                continue;
            }
            // Attempts are counted per record: the records the failure is on.
            for p in shard.pending.iter_mut().take(rest) {
                if whole.is_some() || failed.contains(&p.sequence) {
                    p.failures = p.failures.saturating_add(1);
                }
            }
            if whole.is_some() && self.settings.bisect_on_error && rest > 1 {
                // Not pinned on one record yet: bisect, retry each half (front half first).
                let front = rest.div_ceil(2);
                shard.segments.push(rest - front);
                shard.segments.push(front);
                report.retried += rest;
                continue;
            }
            // The failure is pinned on the first record (it was reported, or is alone in the
            // batch); without bisect a whole-batch failure is the batch's, as in Lambda.
            let exhausted = if whole.is_some() && !self.settings.bisect_on_error {
                shard
                    .pending
                    .iter()
                    .take(rest)
                    .take_while(|p| p.failures > max)
                    .count()
            } else {
                usize::from(shard.pending.front().is_some_and(|p| p.failures > max))
            };
            let mut left = rest;
            for _ in 0..exhausted {
                let front = shard.pending.front().expect("rest > 0 records are pending");
                if let Err(e) = self.dead_letter(&shard.id, front, whole.is_some()).await {
                    shard.segments.push(left);
                    return Err((report, e));
                }
                shard.pending.pop_front();
                left -= 1;
                report.dead_lettered += 1;
            }
            if left > 0 {
                shard.segments.push(left);
                report.retried += left;
            }
        }
        shard.segments.clear();
        Ok(report)
    }

    /// Runs the handler in its own task (a panic is a function error, as a crashed Lambda) and
    /// reads its partial-batch response.
    async fn invoke(&self, event: Event, shard: &Shard, n: usize) -> Outcome {
        let handler = self.handler.clone();
        let future = match std::panic::catch_unwind(AssertUnwindSafe(move || handler(event))) {
            Ok(f) => f,
            Err(_) => return self.whole(shard, n, "the handler panicked".into()),
        };
        let response = match tokio::spawn(future).await {
            Ok(Ok(response)) => response,
            Ok(Err(message)) => return self.whole(shard, n, format!("function error: {message}")),
            Err(e) if e.is_panic() => {
                return self.whole(shard, n, "the handler panicked".into());
            }
            Err(e) => return self.whole(shard, n, format!("the handler task failed: {e}")),
        };
        if response.batch_item_failures.is_empty() {
            return Outcome::Success;
        }
        let mut failed = HashSet::new();
        for failure in &response.batch_item_failures {
            match failure.item_identifier.as_deref() {
                Some(id) if !id.is_empty() => {
                    failed.insert(id.to_string());
                }
                _ => {
                    return self.whole(
                        shard,
                        n,
                        "batchItemFailures has an empty itemIdentifier".into(),
                    )
                }
            }
        }
        let lowest = shard
            .pending
            .iter()
            .take(n)
            .position(|p| failed.contains(&p.sequence));
        let known = shard
            .pending
            .iter()
            .take(n)
            .filter(|p| failed.contains(&p.sequence))
            .count();
        match lowest {
            Some(i) if known == failed.len() => {
                tracing::warn!(
                    shard = %shard.id,
                    failed = failed.len(),
                    batch = n,
                    from = %shard.pending[i].sequence,
                    "stream batch partly failed; retrying from the lowest failed record"
                );
                Outcome::Partial(i, failed)
            }
            _ => self.whole(
                shard,
                n,
                format!("batchItemFailures names records not in the batch: {failed:?}"),
            ),
        }
    }

    fn whole(&self, shard: &Shard, n: usize, reason: String) -> Outcome {
        tracing::warn!(shard = %shard.id, batch = n, %reason, "stream batch failed as a whole");
        Outcome::Whole(reason)
    }

    /// Sends one record to the OnFailure queue in Lambda's shape (plus the record itself).
    async fn dead_letter(&self, shard_id: &str, p: &Pending, whole: bool) -> anyhow::Result<()> {
        let arrival = p.arrival.map(|t| rfc3339(OffsetDateTime::from(t)));
        let mut response_context = json!({"statusCode": 200, "executedVersion": "$LATEST"});
        if whole {
            response_context["functionError"] = json!("Unhandled");
        }
        let body = json!({
            "requestContext": {
                "requestId": format!("local-{shard_id}-{}-{}", p.sequence, p.invocations),
                "functionArn": self.function_arn,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": p.invocations,
            },
            "responseContext": response_context,
            "version": "1.0",
            "timestamp": rfc3339(OffsetDateTime::now_utc()),
            "DDBStreamBatchInfo": {
                "shardId": shard_id,
                "startSequenceNumber": p.sequence,
                "endSequenceNumber": p.sequence,
                "approximateArrivalOfFirstRecord": arrival,
                "approximateArrivalOfLastRecord": arrival,
                "batchSize": 1,
                "streamArn": self.stream_arn,
            },
            "record": p.record,
        });
        self.sqs
            .send_message()
            .queue_url(self.dlq_url)
            .message_body(body.to_string())
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "SendMessage to the stream DLQ {}: {}",
                    self.dlq_url,
                    stages::aws::error_message(&e)
                )
            })?;
        tracing::error!(
            shard = %shard_id,
            sequence = %p.sequence,
            invocations = p.invocations,
            dlq = %self.dlq_url,
            "stream record exhausted its retries; sent to the stream DLQ"
        );
        Ok(())
    }
}

fn rfc3339(t: OffsetDateTime) -> String {
    stages::domain::rfc3339_millis(t)
}

/// Creates the SQS queue `name` unless it exists; returns its URL.
pub async fn ensure_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> anyhow::Result<String> {
    match sqs.create_queue().queue_name(name).send().await {
        Ok(out) => out
            .queue_url
            .ok_or_else(|| anyhow::anyhow!("CreateQueue {name} returned no URL")),
        Err(e) => {
            // Exists with other attributes: use it as it is.
            let url = sqs
                .get_queue_url()
                .queue_name(name)
                .send()
                .await
                .map_err(|_| {
                    anyhow::anyhow!("CreateQueue {name}: {}", stages::aws::error_message(&e))
                })?;
            url.queue_url
                .ok_or_else(|| anyhow::anyhow!("GetQueueUrl {name} returned no URL"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_patterns() {
        let inserts = FilterPattern::parse(r#"{"eventName": ["INSERT"]}"#).unwrap();
        assert_eq!(inserts, FilterPattern::event_names(&["INSERT"]));
        assert!(inserts.matches(&serde_json::json!({"eventName": "INSERT"})));
        assert!(!inserts.matches(&serde_json::json!({"eventName": "MODIFY"})));
        let edits = FilterPattern::parse(
            r#"{"eventName": ["MODIFY"], "dynamodb": {"OldImage": {"summarizedAt": {"S": [{"exists": true}]}}, "NewImage": {"summarizedAt": {"S": [{"exists": true}]}}}}"#,
        )
        .unwrap();
        let image = |summarized: bool| {
            let mut i = serde_json::json!({"title": {"S": "t"}});
            if summarized {
                i["summarizedAt"] = serde_json::json!({"S": "2024-01-01T00:00:00Z"});
            }
            i
        };
        let modify = |old: bool, new: bool| serde_json::json!({"eventName": "MODIFY", "dynamodb": {"OldImage": image(old), "NewImage": image(new)}});
        assert!(edits.matches(&modify(true, true)));
        assert!(!edits.matches(&modify(false, true)), "the commit itself");
        assert!(
            !edits.matches(&modify(true, false)),
            "put back to be summarized"
        );
        let absent =
            FilterPattern::parse(r#"{"dynamodb": {"NewImage": {"x": [{"exists": false}]}}}"#)
                .unwrap();
        assert!(absent.matches(&modify(true, true)));
        for unsupported in [
            r#"{"dynamodb": {"Keys": {}}}"#,
            r#"{"eventName": [{"anything-but": "REMOVE"}]}"#,
            r#"{"eventName": [{"prefix": "INS"}]}"#,
            r#"{"eventName": "INSERT"}"#,
            "not json",
        ] {
            assert!(FilterPattern::parse(unsupported).is_err(), "{unsupported}");
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let s = EventSourceSettings {
            batch_size: 10,
            max_retry_attempts: 3,
            bisect_on_error: true,
            filters: vec![],
            retry_backoff: Duration::from_millis(100),
        };
        assert_eq!(s.backoff(0), Duration::ZERO);
        assert_eq!(s.backoff(1), Duration::from_millis(100));
        assert_eq!(s.backoff(3), Duration::from_millis(400));
        assert_eq!(s.backoff(40), MAX_RETRY_BACKOFF);
        let mut remove = EventRecord::default();
        remove.event_name = "REMOVE".into();
        assert!(s.passes(&remove), "no filter: every record");
    }
}
