//! What starts the enrich stage (a stream batch, or the scheduled retry) and what it answers:
//! the partial-batch response, the retry report and its metrics line.

use super::*;

/// What the enrich function is invoked with: its stream's records, or the retry schedule.
#[derive(Debug)]
pub enum EnrichTrigger {
    Stream(Event),
    Schedule(EventBridgeEvent),
}

/// By shape: `Records` is a stream batch (and its own decoding error is the one reported), anything
/// else must be a scheduled event.
impl<'de> Deserialize<'de> for EnrichTrigger {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        if value.get("Records").is_some() {
            serde_json::from_value(value)
                .map(EnrichTrigger::Stream)
                .map_err(|e| D::Error::custom(format!("a DynamoDB stream event: {e}")))
        } else {
            serde_json::from_value(value)
                .map(EnrichTrigger::Schedule)
                .map_err(|e| {
                    D::Error::custom(format!(
                        "neither a DynamoDB stream event (no Records) nor a scheduled event: {e}"
                    ))
                })
        }
    }
}

/// What it answers: the stream's partial-batch response, or the retry run's report.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum EnrichResponse {
    Stream(DynamoDbEventResponse),
    Retry(RetryReport),
}

/// What one scheduled retry of deferred rows did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryReport {
    /// Rows found parked.
    pub seen: usize,
    pub enriched: usize,
    /// Finished without enrichment for good (`enrichSkippedReason`).
    pub skipped: usize,
    /// Deferred again: GitHub's budget is still spent.
    pub deferred: usize,
    /// Left parked this run: the budget was found spent on an earlier row.
    pub waiting: usize,
    /// Waited `ENRICH_MAX_WAIT_SECONDS` (or enrichment is off): sent on to be summarized unenriched.
    pub released_unenriched: usize,
    /// Enriched already (a crash between the write-back and the move): moved back.
    pub released_enriched: usize,
    pub failed: usize,
    /// Stopped before the end to respect the deadline.
    pub stopped_early: bool,
}

/// A retry run's figures as an Embedded Metric Format line (`Chronicle/DeferredRows`, …).
pub fn emf_line(report: &RetryReport, now: OffsetDateTime) -> String {
    use serde_json::json;
    crate::telemetry::emf_line(
        now,
        &[
            ("DeferredRows", "Count", json!(report.seen)),
            ("DeferredEnriched", "Count", json!(report.enriched)),
            (
                "DeferredReleasedUnenriched",
                "Count",
                json!(report.released_unenriched),
            ),
            ("DeferredRetryFailed", "Count", json!(report.failed)),
        ],
    )
}

/// `(repo, prNumber)` from a stream record's `Keys`.
pub fn record_key(record: &EventRecord) -> Option<(RepoName, u64)> {
    let keys = &record.change.keys;
    let repo = match keys.get(attr::REPO)? {
        serde_dynamo::AttributeValue::S(s) => RepoName::parse(s).ok()?,
        _ => return None,
    };
    let number = match keys.get(attr::PR_NUMBER)? {
        serde_dynamo::AttributeValue::N(n) => n.parse().ok()?,
        _ => return None,
    };
    Some((repo, number))
}

/// The App installation that delivered the record's PR (`installationId` of its new image).
pub fn record_installation(record: &EventRecord) -> Option<u64> {
    match record.change.new_image.get(attr::INSTALLATION_ID)? {
        serde_dynamo::AttributeValue::N(n) => n.parse().ok(),
        _ => None,
    }
}

/// Below this a "deadline" cannot be an epoch time (it would be before September 2001).
pub(super) const EARLIEST_EPOCH_DEADLINE_MS: u64 = 1_000_000_000_000;

/// The Lambda context's deadline (epoch milliseconds) as an `Instant`. `cargo lambda watch`
/// (1.9) sends the function's timeout itself (600000) instead of an epoch time: a value that
/// small is read as time left, so locally served functions do not see their deadline as past.
pub fn deadline_from_epoch_millis(deadline_ms: u64) -> Instant {
    if deadline_ms < EARLIEST_EPOCH_DEADLINE_MS {
        return Instant::now() + Duration::from_millis(deadline_ms);
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}
