//! The sweeper: every minute, find the rows still waiting for a summary through the sparse
//! pending index (never a Scan), claim each with a conditional update, and enqueue its key.
//!
//! The claim (`enqueuedUntil`) is the SKIP LOCKED analogue: overlapping sweeps never enqueue a
//! row twice within the claim's lifetime, and a row whose message was lost goes again after it.
//! Queues carry keys only; the worker re-reads the row.
//!
//! Backpressure: each sweep tops the queue up to `SWEEP_MAX_QUEUED` messages (visible, in flight
//! and delayed, from `GetQueueAttributes`), spread over the shards, and leaves the rest pending
//! for a later sweep. A big import therefore never queues more than the consumers finish within
//! a claim, so claims do not expire on messages still waiting in the queue.

use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};
use serde::Serialize;
use time::OffsetDateTime;

use crate::config::SweeperConfig;
use crate::domain::message::SummarizeMessage;
use crate::domain::rfc3339_millis;
use crate::store::{PendingRow, PrStore, StoreError};

/// The most shards `PendingShards` allows (template.yaml, `PENDING_SHARDS`).
const MAX_PENDING_SHARDS: u16 = 32;
/// Rows read per index page.
const PAGE_SIZE: i32 = 100;
/// SQS's limit for one SendMessageBatch.
const SEND_BATCH: usize = 10;
/// Time kept back from the Lambda deadline to finish a batch and report.
const DEADLINE_MARGIN: Duration = Duration::from_secs(5);
const SEND_ATTEMPTS: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    /// Pending rows seen in the index (the backlog).
    pub seen: usize,
    pub enqueued: usize,
    /// Waiting for enrichment inside the grace window.
    pub skipped_grace: usize,
    /// Claimed by an earlier or concurrent sweep that has not expired.
    pub skipped_claimed: usize,
    /// Could not be sent; their claims were released.
    pub send_failed: usize,
    /// Items DynamoDB read for the sweep (the Query's `ScannedCount`, summed).
    pub items_read: usize,
    pub send_calls: usize,
    /// Age of the oldest pending row (by `receivedAt`), in seconds.
    pub oldest_pending_age_seconds: Option<i64>,
    /// Stopped before the end to respect the deadline.
    pub stopped_early: bool,
    /// Messages in the queue when the sweep began (visible, in flight and delayed).
    pub queue_depth: Option<usize>,
    /// Left pending for a later sweep: the queue held all it should.
    pub skipped_full: usize,
}

pub struct Sweeper {
    store: PrStore,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    enrich_grace: Duration,
    claim_ttl: Duration,
    enrich_enabled: bool,
    max_queued: usize,
}

impl Sweeper {
    pub fn new(store: PrStore, sqs: aws_sdk_sqs::Client, config: &SweeperConfig) -> Self {
        Sweeper {
            store,
            sqs,
            queue_url: config.queue_url.clone(),
            enrich_grace: config.enrich_grace,
            claim_ttl: config.claim_ttl,
            enrich_enabled: config.enrich_enabled,
            max_queued: config.max_queued,
        }
    }

    pub fn from_config(config: &SweeperConfig, sdk: &aws_config::SdkConfig) -> Self {
        let store = PrStore::new(aws_sdk_dynamodb::Client::new(sdk), config.table.clone());
        Self::new(store, aws_sdk_sqs::Client::new(sdk), config)
    }

    /// One sweep over every shard of the pending index, stopping before `deadline`.
    pub async fn sweep(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<SweepReport, SweepError> {
        let mut report = SweepReport::default();
        let until = now + self.claim_ttl;
        let mut batch: Vec<PendingRow> = Vec::with_capacity(SEND_BATCH);
        report.queue_depth = self.queue_depth().await;
        let mut room = match report.queue_depth {
            Some(depth) => self.max_queued.saturating_sub(depth),
            // Unknown depth: a trickle, so the queue can neither flood nor stall.
            None => SEND_BATCH.min(self.max_queued),
        };
        let shards = self.store.table().pending_shards.max(1);
        // The first shard is random from sweep to sweep, and each gets an equal share of the room
        // left (what one leaves goes to the next), so no shard waits for the others to drain.
        let first = crate::backoff::random_below(usize::from(shards)) as u16;
        // Then the shards above the current count: rows left there when PendingShards was
        // lowered are swept too (an empty shard costs one empty Query), never stranded.
        let order = (0..shards)
            .map(|k| (first + k) % shards)
            .chain(shards..MAX_PENDING_SHARDS.max(shards));
        'shards: for (i, shard) in order.enumerate() {
            let share = if i < usize::from(shards) {
                room.div_ceil(usize::from(shards) - i)
            } else {
                room
            };
            let mut claimed = 0usize;
            let mut start = None;
            loop {
                if Instant::now() + DEADLINE_MARGIN >= deadline {
                    report.stopped_early = true;
                    break 'shards;
                }
                let page = self
                    .store
                    .pending_page(&shard.to_string(), start, PAGE_SIZE)
                    .await?;
                report.items_read += page.scanned;
                for row in page.rows {
                    report.seen += 1;
                    if let Some(age) = row.received_at.as_deref().and_then(|r| age_seconds(r, now))
                    {
                        report.oldest_pending_age_seconds = Some(
                            report
                                .oldest_pending_age_seconds
                                .map_or(age, |o| o.max(age)),
                        );
                    }
                    if row
                        .enqueued_until
                        .as_deref()
                        .is_some_and(|u| u > rfc3339_millis(now).as_str())
                    {
                        report.skipped_claimed += 1;
                    } else if self.waiting_for_enrichment(&row, now) {
                        report.skipped_grace += 1;
                    } else if claimed >= share {
                        report.skipped_full += 1;
                    } else if self
                        .store
                        .claim_for_queue(&row.repo, row.number, &shard.to_string(), now, until)
                        .await?
                    {
                        claimed += 1;
                        batch.push(row);
                        if batch.len() == SEND_BATCH {
                            self.send(&mut batch, until, &mut report).await?;
                        }
                    } else {
                        report.skipped_claimed += 1;
                    }
                }
                match page.next {
                    Some(next) => start = Some(next),
                    None => break,
                }
            }
            room -= claimed;
        }
        self.send(&mut batch, until, &mut report).await?;
        Ok(report)
    }

    /// Messages in the queue: visible, in flight and delayed. Unknown (an error) is logged; the
    /// sweep then sends one batch at most, so an unreadable depth neither stops nor floods it.
    async fn queue_depth(&self) -> Option<usize> {
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await;
        match out {
            Ok(out) => Some(
                out.attributes()
                    .map(|a| {
                        a.values()
                            .filter_map(|v| v.parse::<usize>().ok())
                            .sum::<usize>()
                    })
                    .unwrap_or(0),
            ),
            Err(e) => {
                tracing::warn!(error = %crate::aws::error_message(&e), "GetQueueAttributes failed; sweeping one batch at most");
                None
            }
        }
    }

    fn waiting_for_enrichment(&self, row: &PendingRow, now: OffsetDateTime) -> bool {
        if !self.enrich_enabled || row.enriched {
            return false;
        }
        let Some(received) = row.received_at.as_deref().and_then(parse_time) else {
            return false;
        };
        now < received + self.enrich_grace
    }

    /// Sends the claimed rows (≤ 10) in one SendMessageBatch, retrying the entries SQS reports
    /// as failed; rows still unsent get their claim back.
    async fn send(
        &self,
        batch: &mut Vec<PendingRow>,
        until: OffsetDateTime,
        report: &mut SweepReport,
    ) -> Result<(), SweepError> {
        let mut unsent: Vec<(String, PendingRow)> = batch
            .drain(..)
            .enumerate()
            .map(|(i, r)| (i.to_string(), r))
            .collect();
        for attempt in 0..SEND_ATTEMPTS {
            if unsent.is_empty() {
                break;
            }
            if attempt > 0 {
                tokio::time::sleep(crate::backoff::full_jitter(
                    Duration::from_millis(100),
                    attempt,
                ))
                .await;
            }
            let entries = unsent
                .iter()
                .map(|(id, row)| {
                    let body = SummarizeMessage::new(&row.repo, row.number).body();
                    SendMessageBatchRequestEntry::builder()
                        .id(id)
                        .message_body(body)
                        .build()
                        .expect("id and body are set")
                })
                .collect();
            report.send_calls += 1;
            match self
                .sqs
                .send_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
            {
                Ok(out) => {
                    let ok: Vec<&str> = out.successful().iter().map(|s| s.id()).collect();
                    report.enqueued += ok.len();
                    unsent.retain(|(id, _)| !ok.contains(&id.as_str()));
                    for failed in out.failed() {
                        tracing::warn!(
                            id = failed.id(),
                            code = failed.code(),
                            "SQS refused an entry; retrying"
                        );
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %crate::aws::error_message(&e), "SendMessageBatch failed; retrying")
                }
            }
        }
        for (_, row) in unsent {
            report.send_failed += 1;
            self.store
                .release_queue_claim(&row.repo, row.number, until)
                .await?;
        }
        Ok(())
    }
}

/// The run's figures as a CloudWatch Embedded Metric Format line: CloudWatch Logs turns it into
/// metrics (`Chronicle/PendingBacklog`, `Chronicle/OldestPendingAgeSeconds`, …) with no API call.
pub fn emf_line(report: &SweepReport, now: OffsetDateTime) -> String {
    use serde_json::json;
    crate::telemetry::emf_line(
        now,
        &[
            ("PendingBacklog", "Count", json!(report.seen)),
            (
                "OldestPendingAgeSeconds",
                "Seconds",
                json!(report.oldest_pending_age_seconds.unwrap_or(0)),
            ),
            ("Enqueued", "Count", json!(report.enqueued)),
            ("SkippedGrace", "Count", json!(report.skipped_grace)),
            ("SkippedQueueFull", "Count", json!(report.skipped_full)),
            (
                "SummarizeQueueDepth",
                "Count",
                json!(report.queue_depth.unwrap_or(0)),
            ),
            (
                "QueueDepthUnknown",
                "Count",
                json!(usize::from(report.queue_depth.is_none())),
            ),
            ("SendFailed", "Count", json!(report.send_failed)),
        ],
    )
}

fn parse_time(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
}

fn age_seconds(received_at: &str, now: OffsetDateTime) -> Option<i64> {
    parse_time(received_at).map(|t| (now - t).whole_seconds().max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_has_the_metrics_cloudwatch_expects() {
        let report = SweepReport {
            seen: 3,
            enqueued: 2,
            oldest_pending_age_seconds: Some(42),
            ..Default::default()
        };
        let line: serde_json::Value =
            serde_json::from_str(&emf_line(&report, OffsetDateTime::UNIX_EPOCH)).unwrap();
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][0]["Namespace"],
            "Chronicle"
        );
        assert_eq!(
            (
                line["PendingBacklog"].as_u64(),
                line["OldestPendingAgeSeconds"].as_i64()
            ),
            (Some(3), Some(42))
        );
    }
}
