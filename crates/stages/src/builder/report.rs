//! What a page builder tick reports: its outcome per page, its counts, its errors and its metrics
//! line.

use super::*;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Publish(#[from] PublishError),
    #[error("the page item names an invalid repository: {0}")]
    Repo(String),
}

impl BuildError {
    pub fn advice(&self) -> Option<&str> {
        match self {
            BuildError::Publish(e) => e.advice(),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuilderInitError {
    #[error(transparent)]
    Tagging(#[from] TaggingError),
    #[error("the Notion token: {0}")]
    Secret(#[from] crate::secret::SecretError),
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildReport {
    /// Stale pages listed.
    pub stale: usize,
    /// Builds completed (clean or still stale).
    pub built: usize,
    /// Of those, pages that changed again during their build (built again later).
    pub still_stale: usize,
    /// Built less than one rebuild interval ago: left for a later tick.
    pub too_soon: usize,
    /// Being built by another builder.
    pub held: usize,
    pub failed: usize,
    pub documents: usize,
    pub bytes: usize,
    pub removed: usize,
    pub publish_requests: u64,
    /// DynamoDB items read by the tick (the stale index, entries, page items).
    pub items_read: u64,
    pub stopped_early: bool,
    /// Story calls refused for their model or its grant (alarmed: `StoryModelRefused`).
    pub story_refused: u64,
    /// Sentences of new stories left out as unsupported by the PRs they cite.
    pub story_sentences_dropped: u64,
    /// New stories the model's filter or guardrail withheld (stored for their input, so not
    /// asked again: `StoriesWithheld`).
    pub story_withheld: u64,
}

/// What building one page did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildOutcome {
    Built {
        completion: BuildCompletion,
        published: Published,
    },
    NotStale,
    Held,
    TooSoon,
    /// The build failed; recorded on the page item.
    Failed(String),
    /// Another builder is creating a page this one needs: the lease is given back and the page,
    /// still stale, is built by a later tick. Not a failure.
    Busy(String),
    /// The lease was lost before the build completed.
    LeaseLost,
}

/// The run's figures as one Embedded Metric Format line (CloudWatch Logs turns it into metrics
/// with no API call), then `StoryModelRefused` on a line of its own (per function, alarmed).
pub fn emf_line(report: &BuildReport, now: OffsetDateTime) -> String {
    use serde_json::json;
    let refused =
        crate::telemetry::function_metric_line(now, "StoryModelRefused", report.story_refused);
    let line = crate::telemetry::emf_line(
        now,
        &[
            ("StalePages", "Count", json!(report.stale)),
            ("PagesBuilt", "Count", json!(report.built)),
            ("PageBuildsFailed", "Count", json!(report.failed)),
            ("PublishRequests", "Count", json!(report.publish_requests)),
            ("PageItemsRead", "Count", json!(report.items_read)),
            (
                "StorySentencesDropped",
                "Count",
                json!(report.story_sentences_dropped),
            ),
            ("StoriesWithheld", "Count", json!(report.story_withheld)),
        ],
    );
    format!("{line}\n{refused}")
}
