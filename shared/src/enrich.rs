//! The enrich stage: for each new PR row (a DynamoDB Streams INSERT), fetch its changed files,
//! linked issues and totals from GitHub and write them back once. Best-effort (invariant 5):
//! without a token it does nothing, quietly; a PR GitHub no longer has is skipped for good.
//!
//! Exactly once in effect (invariant 6): a lease is claimed with a conditional update before
//! GitHub is called, and the write-back is conditional on still holding it and on `enrichedAt`
//! being absent. A duplicate record, a concurrent invocation or a retry after completion finds
//! the row enriched (success) or leased (retried later, when it will find it enriched).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_dynamodb::types::AttributeValue;
use time::OffsetDateTime;

use crate::config::EnrichConfig;
use crate::domain::RepoName;
use crate::github::{
    closing_references, ChangedFile, GitHubClient, GitHubError, LinkedIssue, PullTotals,
};
use crate::secret::SecretError;
use crate::store::{attr, string, EnrichClaim, PrStore, StoreError};

/// Linked issues looked up per PR, bounding the requests one body can cause.
pub const MAX_LINKED_ISSUES: usize = 20;
/// Directory name counted for files at the repository root.
pub const ROOT_DIRECTORY: &str = "(root)";

#[derive(Debug, thiserror::Error)]
pub enum EnrichError {
    #[error("stream record {0} has no usable key (repo, prNumber)")]
    BadRecord(String),
    #[error(transparent)]
    GitHub(#[from] GitHubError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("another worker holds the enrichment lease until {0}")]
    LeaseHeld(String),
    #[error("the enrichment lease was lost before the write-back")]
    LeaseLost,
}

#[derive(Debug, thiserror::Error)]
pub enum EnrichInitError {
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error("building the GitHub HTTP client failed: {0}")]
    Http(String),
}

/// What happened to one record (all of these are successes for the stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    Enriched,
    /// Permanently skipped (`enrichSkippedReason`), e.g. the PR is gone.
    Skipped(String),
    AlreadyEnriched,
    /// The row no longer exists.
    Deleted,
    /// Not an INSERT: the template's filter should have dropped it.
    NotAnInsert,
    /// No token configured.
    Disabled,
}

/// What GitHub told us about a PR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enrichment {
    pub totals: PullTotals,
    pub files: Vec<ChangedFile>,
    pub linked_issues: Vec<LinkedIssue>,
}

impl Enrichment {
    /// The attributes to store: at most `max_paths` paths (the most changed first), counts per
    /// top-level directory over every file fetched, and `filesTruncated` when anything was cut.
    pub fn attributes(&self, max_paths: usize) -> Vec<(&'static str, AttributeValue)> {
        let n = |v: u64| AttributeValue::N(v.to_string());
        let s = |v: &str| AttributeValue::S(v.to_string());
        let mut directories: BTreeMap<&str, u64> = BTreeMap::new();
        for f in &self.files {
            *directories.entry(top_level_directory(&f.path)).or_default() += 1;
        }
        let mut kept: Vec<&ChangedFile> = self.files.iter().collect();
        // Stable: equally changed files keep GitHub's order.
        kept.sort_by_key(|f| std::cmp::Reverse(f.additions + f.deletions));
        kept.truncate(max_paths);
        let truncated =
            kept.len() < self.files.len() || (self.files.len() as u64) < self.totals.changed_files;
        let files = kept
            .into_iter()
            .map(|f| {
                AttributeValue::M(
                    [
                        ("path", s(&f.path)),
                        ("status", s(&f.status)),
                        ("additions", n(f.additions)),
                        ("deletions", n(f.deletions)),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                )
            })
            .collect();
        let issues = self
            .linked_issues
            .iter()
            .map(|i| {
                AttributeValue::M(
                    [
                        ("repo", s(i.repo.as_str())),
                        ("number", n(i.number)),
                        ("title", s(&i.title)),
                        ("state", s(&i.state)),
                        ("url", s(&i.url)),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                )
            })
            .collect();
        vec![
            (attr::FILES, AttributeValue::L(files)),
            (attr::FILES_TRUNCATED, AttributeValue::Bool(truncated)),
            (
                attr::DIRECTORIES,
                AttributeValue::M(
                    directories
                        .into_iter()
                        .map(|(d, c)| (d.to_string(), n(c)))
                        .collect(),
                ),
            ),
            (attr::ADDITIONS, n(self.totals.additions)),
            (attr::DELETIONS, n(self.totals.deletions)),
            (attr::CHANGED_FILES, n(self.totals.changed_files)),
            (attr::COMMITS, n(self.totals.commits)),
            (attr::LINKED_ISSUES, AttributeValue::L(issues)),
        ]
    }
}

pub fn top_level_directory(path: &str) -> &str {
    match path.split_once('/') {
        Some((dir, _)) if !dir.is_empty() => dir,
        _ => ROOT_DIRECTORY,
    }
}

pub struct EnrichHandler {
    store: PrStore,
    github: Option<GitHubClient>,
    concurrency: usize,
    max_paths: usize,
}

impl EnrichHandler {
    pub fn new(
        store: PrStore,
        github: Option<GitHubClient>,
        concurrency: usize,
        max_paths: usize,
    ) -> Self {
        EnrichHandler {
            store,
            github,
            concurrency: concurrency.max(1),
            max_paths,
        }
    }

    /// From configuration; the token is read once (cold start). No token = disabled.
    pub async fn from_config(
        config: &EnrichConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, EnrichInitError> {
        let github = match config.token.resolve(sdk).await? {
            Some(token) => Some(
                GitHubClient::new(&config.api_url, &token, config.timeout, config.max_retries)
                    .map_err(|e| EnrichInitError::Http(e.to_string()))?,
            ),
            None => {
                tracing::info!(
                    "no GitHub token configured ({} / {} / {}): enrichment is skipped",
                    crate::config::GITHUB_TOKEN,
                    crate::config::GITHUB_TOKEN_ARN,
                    crate::config::GITHUB_TOKEN_PARAM
                );
                None
            }
        };
        let store = PrStore::new(aws_sdk_dynamodb::Client::new(sdk), config.table.clone());
        Ok(Self::new(
            store,
            github,
            config.concurrency,
            config.max_paths,
        ))
    }

    pub fn enabled(&self) -> bool {
        self.github.is_some()
    }

    /// One Lambda invocation: every record independently and concurrently (bounded); the ones
    /// that failed, or whose work panicked, are returned as `batchItemFailures`.
    pub async fn handle(
        self: &Arc<Self>,
        event: Event,
        deadline: Instant,
        invocation: &str,
    ) -> DynamoDbEventResponse {
        let mut response = DynamoDbEventResponse::default();
        if self.github.is_none() {
            tracing::info!(
                records = event.records.len(),
                "enrichment disabled (no GitHub token configured); records skipped"
            );
            return response;
        }
        let records = event
            .records
            .into_iter()
            .map(|record| {
                (
                    record.change.sequence_number.clone().unwrap_or_default(),
                    record,
                )
            })
            .collect();
        let this = Arc::clone(self);
        let invocation = invocation.to_string();
        let failed =
            crate::batch::failed_items(records, self.concurrency, move |record: EventRecord| {
                let this = Arc::clone(&this);
                let owner = format!("{invocation}/{}", record.event_id);
                async move { this.process(&record, deadline, &owner).await }
            })
            .await;
        for (sequence, error) in failed {
            tracing::warn!(sequence = %sequence, error = %error, "record failed; the stream will retry it");
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(sequence);
            response.batch_item_failures.push(failure);
        }
        response
    }

    /// One record, logged in one line.
    pub async fn process(
        &self,
        record: &EventRecord,
        deadline: Instant,
        owner: &str,
    ) -> Result<RecordOutcome, EnrichError> {
        let started = Instant::now();
        let key = record_key(record);
        let result = match &key {
            _ if record.event_name != "INSERT" => Ok(RecordOutcome::NotAnInsert),
            None => Err(EnrichError::BadRecord(record.event_id.clone())),
            Some((repo, number)) => self.enrich(repo, *number, deadline, owner).await,
        };
        let (repo, pr) = key
            .as_ref()
            .map(|(r, n)| (r.as_str(), *n))
            .unwrap_or(("-", 0));
        let outcome = match &result {
            Ok(o) => format!("{o:?}"),
            Err(e) => format!("failed: {e}"),
        };
        tracing::info!(
            repo,
            pr,
            outcome,
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            "enrich record"
        );
        result
    }

    async fn enrich(
        &self,
        repo: &RepoName,
        number: u64,
        deadline: Instant,
        owner: &str,
    ) -> Result<RecordOutcome, EnrichError> {
        let Some(github) = &self.github else {
            return Ok(RecordOutcome::Disabled);
        };
        let now = OffsetDateTime::now_utc();
        let lease = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let item = match self
            .store
            .claim_enrichment(repo, number, owner, now, now + lease)
            .await?
        {
            EnrichClaim::Claimed(item) => item,
            EnrichClaim::AlreadyEnriched => return Ok(RecordOutcome::AlreadyEnriched),
            EnrichClaim::Missing => return Ok(RecordOutcome::Deleted),
            EnrichClaim::Held { until } => {
                return Err(EnrichError::LeaseHeld(until.unwrap_or_default()))
            }
        };
        let body = string(&item, attr::BODY).unwrap_or_default().to_string();
        let result = match fetch(github, repo, number, &body, deadline).await {
            Ok(enrichment) => {
                let written = self
                    .store
                    .complete_enrichment(
                        repo,
                        number,
                        owner,
                        enrichment.attributes(self.max_paths),
                        now_utc(),
                    )
                    .await?;
                if written {
                    Ok(RecordOutcome::Enriched)
                } else {
                    Err(EnrichError::LeaseLost)
                }
            }
            Err(GitHubError::Gone { status, path })
                if path.ends_with(&format!("/pulls/{number}")) =>
            {
                let reason = format!("GitHub answered {status} for {path}: the pull request is gone or the token lost access");
                let attributes = vec![(
                    attr::ENRICH_SKIPPED_REASON,
                    AttributeValue::S(reason.clone()),
                )];
                let written = self
                    .store
                    .complete_enrichment(repo, number, owner, attributes, now_utc())
                    .await?;
                if written {
                    Ok(RecordOutcome::Skipped(reason))
                } else {
                    Err(EnrichError::LeaseLost)
                }
            }
            Err(e) => Err(e.into()),
        };
        if result.is_err() {
            self.store.release_enrichment(repo, number, owner).await?;
        }
        result
    }
}

/// The GitHub requests for one PR: totals, files (paginated), each linked issue.
pub async fn fetch(
    github: &GitHubClient,
    repo: &RepoName,
    number: u64,
    body: &str,
    deadline: Instant,
) -> Result<Enrichment, GitHubError> {
    let totals = github.pull_totals(repo, number, deadline).await?;
    let files = github.pull_files(repo, number, deadline).await?;
    let mut linked_issues = Vec::new();
    for (issue_repo, issue_number) in closing_references(body, repo, MAX_LINKED_ISSUES) {
        if let Some(issue) = github.issue(&issue_repo, issue_number, deadline).await? {
            linked_issues.push(issue);
        }
    }
    Ok(Enrichment {
        totals,
        files,
        linked_issues,
    })
}

fn now_utc() -> OffsetDateTime {
    OffsetDateTime::now_utc()
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

/// The Lambda context's deadline (epoch milliseconds) as an `Instant`.
pub fn deadline_from_epoch_millis(deadline_ms: u64) -> Instant {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, additions: u64) -> ChangedFile {
        ChangedFile {
            path: path.into(),
            status: "modified".into(),
            additions,
            deletions: 0,
        }
    }

    #[test]
    fn directories_and_truncation() {
        let e = Enrichment {
            totals: PullTotals {
                commits: 1,
                additions: 6,
                deletions: 0,
                changed_files: 3,
            },
            files: vec![
                file("src/a.rs", 1),
                file("README.md", 3),
                file("src/b/c.rs", 2),
            ],
            linked_issues: vec![],
        };
        let attrs: std::collections::HashMap<_, _> = e.attributes(2).into_iter().collect();
        assert_eq!(attrs[attr::FILES_TRUNCATED], AttributeValue::Bool(true));
        let AttributeValue::L(files) = &attrs[attr::FILES] else {
            panic!()
        };
        let paths: Vec<_> = files
            .iter()
            .map(|f| f.as_m().unwrap()["path"].as_s().unwrap().as_str())
            .collect();
        assert_eq!(paths, ["README.md", "src/b/c.rs"]);
        let AttributeValue::M(dirs) = &attrs[attr::DIRECTORIES] else {
            panic!()
        };
        assert_eq!(dirs["src"], AttributeValue::N("2".into()));
        assert_eq!(dirs[ROOT_DIRECTORY], AttributeValue::N("1".into()));
        let attrs: std::collections::HashMap<_, _> = e.attributes(500).into_iter().collect();
        assert_eq!(attrs[attr::FILES_TRUNCATED], AttributeValue::Bool(false));
    }
}
