//! The enrich stage: for each new PR row (a DynamoDB Streams INSERT), fetch its changed files,
//! closing issues and totals from GitHub and write them back once. One GraphQL query per PR
//! (plus one per further 100 files); REST only where GraphQL cannot serve (an Enterprise Server
//! whose schema lacks a field). Best-effort (invariant 5): without a token it does nothing,
//! quietly; a PR GitHub no longer has, or a token GitHub refuses, is skipped for good.
//!
//! Exactly once in effect (invariant 6): a lease is claimed with a conditional update before
//! GitHub is called, and the write-back is conditional on still holding it and on `enrichedAt`
//! being absent. A duplicate record, a concurrent invocation or a retry after completion finds
//! the row enriched (success) or leased (retried later, when it will find it enriched).
//!
//! A rate limit that outlasts the invocation does not fail the record (stream retries are few and
//! end in the DLQ): the row is parked with `enrichDeferredUntil` and the record succeeds. The
//! scheduled retry ([`EnrichHandler::retry_deferred`]) enriches parked rows after the reset, or
//! lets them go ahead unenriched once they have waited `ENRICH_MAX_WAIT_SECONDS`.

use crate::secret::Resolve;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_dynamodb::types::AttributeValue;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::config::EnrichConfig;
use crate::domain::{rfc3339_millis, RepoName};
use crate::github::graphql::{GraphQlClient, GraphQlError};
use crate::github::{
    closing_references, issues_in_scope, ChangedFile, GitHubClient, GitHubError, IssueScope,
    LinkedIssue, PullTotals,
};
use crate::secret::{Secret, SecretError};
use crate::store::{
    attr, string, unsigned, Deferral, EnrichClaim, PendingRow, PrStore, StoreError, DEFERRED_SHARD,
};

pub use crate::domain::{top_level_directory, ROOT_DIRECTORY};

mod enrichment;
mod fetch;
mod repo_context;
mod setup;
mod trigger;
pub use enrichment::*;
pub use fetch::*;
pub use repo_context::*;
pub use setup::*;
pub use trigger::*;

#[derive(Debug, thiserror::Error)]
pub enum EnrichError {
    #[error("stream record {0} has no usable key (repo, prNumber)")]
    BadRecord(String),
    #[error(transparent)]
    GitHub(#[from] GitHubError),
    #[error(transparent)]
    GraphQl(#[from] GraphQlError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("another worker holds the enrichment lease until {0}")]
    LeaseHeld(String),
    #[error("the enrichment lease was lost before the write-back")]
    LeaseLost,
    #[error(transparent)]
    Installation(#[from] crate::github::installation::InstallationError),
}

impl EnrichError {
    /// The App's installation error behind this one, if any.
    pub fn installation(&self) -> Option<&crate::github::installation::InstallationError> {
        match self {
            EnrichError::Installation(e)
            | EnrichError::GraphQl(GraphQlError::Installation(e))
            | EnrichError::GitHub(GitHubError::Installation(e)) => Some(e),
            _ => None,
        }
    }
}

/// What happened to one record (all of these are successes for the stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    Enriched,
    /// Permanently skipped (`enrichSkippedReason`), e.g. the PR is gone.
    Skipped(String),
    AlreadyEnriched,
    /// GitHub's budget is spent past the deadline: parked until this time (RFC 3339).
    Deferred(String),
    /// Already parked until this time, still ahead: GitHub was not asked.
    StillParked(String),
    /// The row no longer exists.
    Deleted,
    /// A MODIFY of a summarized row whose PR was edited: put back to be summarized.
    Edited,
    /// Neither an INSERT nor an edit: nothing to do.
    NotAnInsert,
    /// No token configured.
    Disabled,
}

/// Rows read per page of the deferred partition.
const RETRY_PAGE: i32 = 100;
/// Time kept back from the deadline by the retry run.
const RETRY_MARGIN: Duration = Duration::from_secs(5);

pub struct EnrichHandler {
    store: PrStore,
    github: Option<GitHubAccess>,
    /// Where repository contexts are kept; `None`: none fetched.
    contexts: Option<crate::store::ContextStore>,
    /// This invocation's outcomes, for its EMF line.
    outcomes: crate::telemetry::OutcomeCounts,
    /// The GraphQL client's request count at the last EMF line.
    requests_seen: std::sync::atomic::AtomicU64,
    /// When a refresh of a repository's context last failed in this process, and how many
    /// failed in a row.
    context_failures: std::sync::Mutex<std::collections::HashMap<String, (Instant, u32)>>,
    concurrency: usize,
    max_paths: usize,
    max_wait: Duration,
}

impl EnrichHandler {
    pub fn new(
        store: PrStore,
        github: Option<impl Into<GitHubAccess>>,
        concurrency: usize,
        max_paths: usize,
    ) -> Self {
        EnrichHandler {
            store,
            github: github.map(Into::into),
            contexts: None,
            outcomes: Default::default(),
            requests_seen: Default::default(),
            context_failures: Default::default(),
            concurrency: concurrency.max(1),
            max_paths,
            max_wait: Duration::from_secs(6 * 3600),
        }
    }

    /// Keeps each repository's context (CODEOWNERS, workspace packages) in this store,
    /// refreshed at most once per [`crate::context::DEFAULT_TTL`].
    pub fn with_contexts(mut self, contexts: crate::store::ContextStore) -> Self {
        self.contexts = Some(contexts);
        self
    }

    /// How long a deferred row may wait for GitHub before it goes ahead unenriched.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    pub fn enabled(&self) -> bool {
        self.github.is_some()
    }

    /// One invocation, whichever its trigger.
    pub async fn invoke(
        self: &Arc<Self>,
        trigger: EnrichTrigger,
        deadline: Instant,
        invocation: &str,
    ) -> Result<EnrichResponse, EnrichError> {
        match trigger {
            EnrichTrigger::Stream(event) => Ok(EnrichResponse::Stream(
                self.handle(event, deadline, invocation).await,
            )),
            EnrichTrigger::Schedule(_) => {
                let report = self
                    .retry_deferred(OffsetDateTime::now_utc(), deadline, invocation)
                    .await?;
                Ok(EnrichResponse::Retry(report))
            }
        }
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
            // Inserts are skipped (counted `Disabled`); edits of summarized rows still go on.
            tracing::info!(
                records = event.records.len(),
                "enrichment disabled (no GitHub token configured)"
            );
        }
        // The installation each App delivery named: no request asks GitHub for it.
        if let Some(access) = &self.github {
            for record in event.records.iter().filter(|r| r.event_name == "INSERT") {
                if let Some((repo, _)) = record_key(record) {
                    access.remember(&repo, record_installation(record));
                }
            }
        }
        // Each repository's context first (at most once a day each): the rows enriched below
        // are then summarized with it.
        let repos: std::collections::BTreeSet<RepoName> = event
            .records
            .iter()
            .filter(|r| r.event_name == "INSERT")
            .filter_map(|r| record_key(r).map(|(repo, _)| repo))
            .collect();
        let mut waiting = std::collections::BTreeSet::new();
        for repo in &repos {
            if !self
                .refresh_context(repo, OffsetDateTime::now_utc(), deadline)
                .await
            {
                waiting.insert(repo.clone());
            }
        }
        let waiting = Arc::new(waiting);
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
        // Each copy gets its own owner: a claim finding its owner's lease takes it as its own
        // (an applied claim whose answer was lost), so two copies must never share one.
        let copy = std::sync::atomic::AtomicU64::new(0);
        let failed =
            crate::batch::failed_items(records, self.concurrency, move |record: EventRecord| {
                let this = Arc::clone(&this);
                let owner = format!(
                    "{invocation}/{}/{}",
                    record.event_id,
                    copy.fetch_add(1, Ordering::Relaxed)
                );
                let context = match record_key(&record) {
                    Some((repo, _)) if waiting.contains(&repo) => Context::Missing,
                    _ => Context::Ready,
                };
                async move { this.process_with(&record, deadline, &owner, context).await }
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

    /// The stream records' outcomes since the last call as one EMF line (`RecordsEnriched`, …,
    /// `RecordsFailed`) with the GraphQL requests made (`RecordsGitHubRequests`) and, once GitHub
    /// said it, the hour's GraphQL points left (`GitHubPointsRemaining`); the counts start again.
    pub fn emf_line(&self, now: OffsetDateTime) -> String {
        let mut remaining = None;
        if let Some(github) = &self.github {
            let total = github.requests();
            let before = self.requests_seen.swap(total, Ordering::Relaxed);
            self.outcomes
                .add_n("GitHubRequests", total.saturating_sub(before));
            // Only when this invocation asked: an old figure would outlive the hour's reset.
            if total > before {
                remaining = github.rate_remaining();
            }
        }
        let line = crate::telemetry::outcomes_emf_line(
            now,
            "Records",
            &[
                "Enriched",
                "Skipped",
                "AlreadyEnriched",
                "Deferred",
                "StillParked",
                "Deleted",
                "Edited",
                "NotAnInsert",
                "Disabled",
                "Failed",
                "GitHubRequests",
            ],
            &self.outcomes.take(),
        );
        match remaining {
            Some(n) => crate::telemetry::with_gauge(&line, "GitHubPointsRemaining", n),
            None => line,
        }
    }

    /// One record, logged in one line.
    pub async fn process(
        &self,
        record: &EventRecord,
        deadline: Instant,
        owner: &str,
    ) -> Result<RecordOutcome, EnrichError> {
        self.process_with(record, deadline, owner, Context::Ready)
            .await
    }

    async fn process_with(
        &self,
        record: &EventRecord,
        deadline: Instant,
        owner: &str,
        context: Context,
    ) -> Result<RecordOutcome, EnrichError> {
        let started = Instant::now();
        let key = record_key(record);
        let result = match &key {
            None => Err(EnrichError::BadRecord(record.event_id.clone())),
            Some((repo, number)) if record.event_name == "MODIFY" => {
                match crate::edits::requeue_if_edited(&self.store, repo, *number, record).await {
                    Ok(crate::edits::EditOutcome::Requeued) => Ok(RecordOutcome::Edited),
                    Ok(_) => Ok(RecordOutcome::NotAnInsert),
                    Err(e) => Err(e.into()),
                }
            }
            _ if record.event_name != "INSERT" => Ok(RecordOutcome::NotAnInsert),
            Some((repo, number)) => self.enrich(repo, *number, deadline, owner, context).await,
        };
        self.outcomes.add(match &result {
            Ok(RecordOutcome::Enriched) => "Enriched",
            Ok(RecordOutcome::Skipped(_)) => "Skipped",
            Ok(RecordOutcome::AlreadyEnriched) => "AlreadyEnriched",
            Ok(RecordOutcome::Deferred(_)) => "Deferred",
            Ok(RecordOutcome::StillParked(_)) => "StillParked",
            Ok(RecordOutcome::Deleted) => "Deleted",
            Ok(RecordOutcome::Edited) => "Edited",
            Ok(RecordOutcome::NotAnInsert) => "NotAnInsert",
            Ok(RecordOutcome::Disabled) => "Disabled",
            Err(_) => "Failed",
        });
        let (repo, pr) = key
            .as_ref()
            .map(|(r, n)| (r.as_str(), *n))
            .unwrap_or(("-", 0));
        log_outcome(repo, pr, &result, started);
        result
    }

    /// Enriches one row under a lease. Every failure gives the lease back; a row parked by an
    /// earlier deferral is moved back to its shard once it is finished. A row of a repository
    /// whose context is [`Context::Missing`] is parked instead, for [`CONTEXT_WAIT`], until it
    /// has waited `ENRICH_MAX_WAIT_SECONDS` (then it goes ahead without).
    pub async fn enrich(
        &self,
        repo: &RepoName,
        number: u64,
        deadline: Instant,
        owner: &str,
        context: Context,
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
        let parked = string(&item, attr::PENDING_SHARD) == Some(DEFERRED_SHARD);
        // Parked until a reset still ahead: GitHub is not asked before it (it discourages calls
        // under a spent limit). The lease goes back, the row stays parked.
        if let Some(until) = string(&item, attr::ENRICH_DEFERRED_UNTIL)
            .filter(|u| parked && *u > rfc3339_millis(now).as_str())
            .map(str::to_string)
        {
            self.store.release_enrichment(repo, number, owner).await?;
            return Ok(RecordOutcome::StillParked(until));
        }
        let waited_since = string(&item, attr::RECEIVED_AT)
            .and_then(parse_time)
            .unwrap_or(now);
        if context == Context::Missing && now < waited_since + CONTEXT_MAX_WAIT.min(self.max_wait) {
            let until = now + CONTEXT_WAIT;
            tracing::info!(repo = %repo, pr = number, until = %rfc3339_millis(until), "the repository's context is not stored yet; the row waits for it");
            return match self
                .store
                .defer_enrichment(repo, number, owner, until)
                .await?
            {
                Deferral::Parked | Deferral::Recorded => {
                    Ok(RecordOutcome::Deferred(rfc3339_millis(until)))
                }
                Deferral::LeaseLost => Err(EnrichError::LeaseLost),
            };
        }
        let body = string(&item, attr::BODY).unwrap_or_default().to_string();
        github.remember(repo, unsigned(&item, attr::INSTALLATION_ID));
        let result = self
            .enrich_claimed(github, repo, number, &body, deadline, owner)
            .await;
        match &result {
            Err(error) => {
                if let Err(e) = self.store.release_enrichment(repo, number, owner).await {
                    tracing::warn!(repo = %repo, pr = number, error = %e, cause = %error, "could not give the enrichment lease back; it expires on its own");
                }
            }
            Ok(RecordOutcome::Enriched | RecordOutcome::Skipped(_)) if parked => {
                self.store.release_deferred(repo, number).await?;
            }
            Ok(_) => {}
        }
        result
    }

    /// Everything after the claim: fetch, then write the enrichment, the skip, or the deferral.
    async fn enrich_claimed(
        &self,
        access: &GitHubAccess,
        repo: &RepoName,
        number: u64,
        body: &str,
        deadline: Instant,
        owner: &str,
    ) -> Result<RecordOutcome, EnrichError> {
        // The App is not installed on it (any more): summarized unenriched, never asked again.
        // An installation found gone while minting is asked for once more: a reinstall has a
        // new id, and the first answer came from this process's memory (or a delivery). So is
        // a repository the installation's token cannot see: it may have been removed from the
        // installation, which GitHub then says in so many words.
        let mut fetched = None;
        for asked in 0..2 {
            // Which installation (asked of the token function, perhaps): within the deadline.
            let found = tokio::time::timeout_at(deadline.into(), access.for_repo(repo))
                .await
                .unwrap_or_else(|_| {
                    Err(crate::github::installation::InstallationError::Transport {
                        what: format!("the installation of {repo}"),
                        message: "no answer before the record's deadline".into(),
                    })
                });
            let github = match found {
                Ok(github) => github,
                Err(e) if e.is_permanent() => {
                    fetched = Some(Fetched::Skip(e.to_string()));
                    break;
                }
                Err(e) => match e.deferral() {
                    Some(wait) => {
                        fetched = Some(deferred(repo, number, &e, wait));
                        break;
                    }
                    None => return Err(e.into()),
                },
            };
            match fetch(&github, repo, number, body, deadline).await {
                Ok(Fetched::Unseen(reason)) if asked == 0 && access.forget(repo) => {
                    fetched = Some(Fetched::Skip(reason));
                    continue;
                }
                // A rate-limited mint, or a refused JWT (a key being rotated): temporary, the
                // row is parked as for REST's rate limit (see `KEY_REFUSED_WAIT` for the rule).
                Err(e) if e.installation().and_then(|i| i.deferral()).is_some() => {
                    let installation = e.installation().expect("checked above");
                    let wait = installation.deferral().expect("checked above");
                    fetched = Some(deferred(repo, number, installation, wait));
                    break;
                }
                Err(e) if e.installation().is_some_and(|i| i.is_permanent()) => {
                    if asked == 0 && e.installation().is_some_and(|i| i.is_gone()) {
                        continue;
                    }
                    fetched = Some(Fetched::Skip(e.to_string()));
                    break;
                }
                other => {
                    fetched = Some(other?);
                    break;
                }
            }
        }
        let fetched = fetched.unwrap_or_else(|| {
            Fetched::Skip(format!("the GitHub App's installation of {repo} is gone"))
        });
        let (attributes, outcome) = match fetched {
            Fetched::Enriched(enrichment) => (
                enrichment.attributes(self.max_paths),
                RecordOutcome::Enriched,
            ),
            Fetched::Skip(reason) | Fetched::Unseen(reason) => (
                vec![(
                    attr::ENRICH_SKIPPED_REASON,
                    AttributeValue::S(reason.clone()),
                )],
                RecordOutcome::Skipped(reason),
            ),
            Fetched::Defer(until) => {
                return match self
                    .store
                    .defer_enrichment(repo, number, owner, until)
                    .await?
                {
                    Deferral::Parked | Deferral::Recorded => {
                        Ok(RecordOutcome::Deferred(rfc3339_millis(until)))
                    }
                    Deferral::LeaseLost => Err(EnrichError::LeaseLost),
                };
            }
        };
        if self
            .store
            .complete_enrichment(repo, number, owner, attributes, now_utc())
            .await?
        {
            Ok(outcome)
        } else {
            Err(EnrichError::LeaseLost)
        }
    }

    /// The scheduled retry: every row parked in the deferred partition is enriched (when
    /// GitHub's budget is back), or, once it has waited `max_wait` or enrichment is off, sent on
    /// to be summarized unenriched. Once a row meets a spent budget (or three fail in a row), no
    /// further call is started this run (those in flight finish): the rest wait for the next, and
    /// rows past their wait are still released, so a GitHub outage cannot hold them. A row
    /// parked until a reset still ahead is not sent to GitHub at all.
    pub async fn retry_deferred(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
        invocation: &str,
    ) -> Result<RetryReport, EnrichError> {
        let mut report = RetryReport::default();
        let breaker = Breaker::default();
        // Owners unique to this run, even if the schedule's event is delivered twice.
        let run = format!(
            "{invocation}/retry-{}",
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        );
        let mut start = None;
        let mut contexts: BTreeMap<RepoName, bool> = BTreeMap::new();
        loop {
            if Instant::now() + RETRY_MARGIN >= deadline {
                report.stopped_early = true;
                break;
            }
            let page = self.store.deferred_page(start, RETRY_PAGE).await?;
            report.seen += page.rows.len();
            // Each repository's context first (its rows may be waiting for it).
            for repo in page.rows.iter().map(|r| &r.repo) {
                if !contexts.contains_key(repo) {
                    let ready = self
                        .refresh_context(repo, OffsetDateTime::now_utc(), deadline)
                        .await;
                    contexts.insert(repo.clone(), ready);
                }
            }
            let outcomes: Vec<RetryOutcome> = futures::stream::iter(page.rows)
                .map(|row| {
                    let context = match contexts.get(&row.repo) {
                        Some(false) => Context::Missing,
                        _ => Context::Ready,
                    };
                    self.retry_row(row, now, deadline, &run, &breaker, context)
                })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
            for outcome in outcomes {
                match outcome {
                    RetryOutcome::Enriched => report.enriched += 1,
                    RetryOutcome::Skipped => report.skipped += 1,
                    RetryOutcome::Deferred => report.deferred += 1,
                    RetryOutcome::Waiting => report.waiting += 1,
                    RetryOutcome::ReleasedUnenriched => report.released_unenriched += 1,
                    RetryOutcome::ReleasedEnriched => report.released_enriched += 1,
                    RetryOutcome::Failed => report.failed += 1,
                }
            }
            match page.next {
                Some(next) => start = Some(next),
                None => break,
            }
        }
        if report.seen > 0 {
            tracing::info!(
                seen = report.seen,
                enriched = report.enriched,
                deferred = report.deferred + report.waiting,
                released_unenriched = report.released_unenriched,
                failed = report.failed,
                "deferred enrichment retry"
            );
        }
        Ok(report)
    }

    async fn retry_row(
        &self,
        row: PendingRow,
        now: OffsetDateTime,
        deadline: Instant,
        run: &str,
        breaker: &Breaker,
        context: Context,
    ) -> RetryOutcome {
        let (repo, number) = (&row.repo, row.number);
        let waited_since = row
            .received_at
            .as_deref()
            .and_then(parse_time)
            .or_else(|| parse_time(&row.merged_at))
            .unwrap_or(now);
        let release = |outcome: RetryOutcome| async move {
            match self.store.release_deferred(repo, number).await {
                Ok(_) => outcome,
                Err(e) => {
                    tracing::warn!(repo = %repo, pr = number, error = %e, "could not move a deferred row back");
                    RetryOutcome::Failed
                }
            }
        };
        if row.enriched {
            return release(RetryOutcome::ReleasedEnriched).await;
        }
        if self.github.is_none() || now >= waited_since + self.max_wait {
            tracing::warn!(repo = %repo, pr = number, waited_since = %rfc3339_millis(waited_since), "enrichment waited too long for GitHub's rate limit (ENRICH_MAX_WAIT_SECONDS); summarized without it");
            return release(RetryOutcome::ReleasedUnenriched).await;
        }
        if breaker.open() || Instant::now() + RETRY_MARGIN >= deadline {
            return RetryOutcome::Waiting;
        }
        let owner = format!("{run}/{repo}#{number}");
        let started = Instant::now();
        let result = self.enrich(repo, number, deadline, &owner, context).await;
        log_outcome(repo.as_str(), number, &result, started);
        match result {
            Ok(RecordOutcome::Enriched) => {
                breaker.success();
                RetryOutcome::Enriched
            }
            Ok(RecordOutcome::Skipped(_)) => {
                breaker.success();
                RetryOutcome::Skipped
            }
            // Still waiting for its repository's context: not GitHub's budget.
            Ok(RecordOutcome::Deferred(_)) if context == Context::Missing => RetryOutcome::Waiting,
            Ok(RecordOutcome::Deferred(_)) => {
                breaker.trip();
                RetryOutcome::Deferred
            }
            Ok(RecordOutcome::AlreadyEnriched) => release(RetryOutcome::ReleasedEnriched).await,
            // Held by a stream worker, or gone: nothing to do here.
            Ok(_) | Err(EnrichError::LeaseHeld(_)) => RetryOutcome::Waiting,
            // One row failing is that row's problem; several in a row mean GitHub (or the table)
            // is failing: then stop calling it for this run.
            Err(_) => {
                breaker.failure();
                RetryOutcome::Failed
            }
        }
    }
}

/// When a retry run stops calling GitHub: at once on a spent budget, after
/// [`Breaker::FAILURES`] failures in a row otherwise.
#[derive(Default)]
struct Breaker {
    open: AtomicBool,
    failures: std::sync::atomic::AtomicU32,
}

impl Breaker {
    const FAILURES: u32 = 3;

    fn open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    fn trip(&self) {
        self.open.store(true, Ordering::Relaxed);
    }

    fn success(&self) {
        self.failures.store(0, Ordering::Relaxed);
    }

    fn failure(&self) {
        if self.failures.fetch_add(1, Ordering::Relaxed) + 1 >= Self::FAILURES {
            self.trip();
        }
    }
}

enum RetryOutcome {
    Enriched,
    Skipped,
    Deferred,
    Waiting,
    ReleasedUnenriched,
    ReleasedEnriched,
    Failed,
}

fn log_outcome(repo: &str, pr: u64, result: &Result<RecordOutcome, EnrichError>, started: Instant) {
    let outcome = match result {
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
}

/// A temporary refusal of the App's token, logged once: the row waits `wait`.
fn deferred(
    repo: &RepoName,
    number: u64,
    error: &crate::github::installation::InstallationError,
    wait: Duration,
) -> Fetched {
    tracing::warn!(repo = %repo, pr = number, error = %error, wait_s = wait.as_secs(), "no installation token for now; the row waits");
    Fetched::Defer(now_utc() + wait)
}

fn parse_time(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
}

fn now_utc() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_is_an_epoch_time_or_else_the_time_left() {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let left = |d: Instant| d.saturating_duration_since(Instant::now()).as_secs();
        assert!((58..=60).contains(&left(deadline_from_epoch_millis(now_ms + 60_000))));
        assert_eq!(
            left(deadline_from_epoch_millis(now_ms - 1_000)),
            0,
            "already past"
        );
        assert!((598..=600).contains(&left(deadline_from_epoch_millis(600_000))));
    }

    fn file(path: &str, additions: u64) -> ChangedFile {
        ChangedFile {
            path: path.into(),
            status: "modified".into(),
            additions,
            deletions: 0,
        }
    }

    #[test]
    fn stored_paths_are_bounded_by_bytes_so_the_largest_row_fits() {
        use crate::domain::{Delivery, MergedPullRequest};
        // The worst case of every part at once: 3,000 long paths over 300 top-level directories
        // with 255-byte names, 20 linked issues with 256-character 4-byte titles, 100 labels of
        // 50 4-byte characters, and GitHub's largest body.
        let dir = |i: usize| format!("{i:03}{}", "d".repeat(252));
        let long = |i: usize| format!("{}/{}/{i:05}.rs", dir(i % 300), "nested".repeat(20));
        let e = Enrichment {
            totals: PullTotals {
                commits: 1,
                additions: 3000,
                deletions: 0,
                changed_files: 3000,
                ..Default::default()
            },
            files: (0..3000)
                .map(|i| ChangedFile {
                    path: long(i),
                    status: "modified".into(),
                    additions: 1,
                    deletions: 0,
                })
                .collect(),
            linked_issues: (0..MAX_LINKED_ISSUES as u64)
                .map(|n| crate::github::LinkedIssue {
                    repo: RepoName::parse("some-organisation/some-repository").unwrap(),
                    number: 100_000 + n,
                    title: "𝄞".repeat(300),
                    state: "closed".into(),
                    url: format!("https://github.com/some-organisation/some-repository/issues/{n}"),
                })
                .collect(),
            // GitHub's longest logins, as many as are kept.
            reviewers: (0..20)
                .map(|i| format!("{i:02}{}", "r".repeat(37)))
                .collect(),
        };
        let attrs = e.attributes(3000);
        let map: std::collections::HashMap<_, _> = attrs.iter().cloned().collect();
        let kept = map[attr::FILES].as_l().unwrap().len();
        assert!(kept < 3000 && kept > 100, "{kept}");
        assert_eq!(map[attr::FILES_TRUNCATED], AttributeValue::Bool(true));
        let dirs = map[attr::DIRECTORIES].as_m().unwrap();
        assert!(dirs.keys().map(String::len).sum::<usize>() <= MAX_DIRECTORY_BYTES);
        assert!(!dirs.is_empty());
        // GitHub's largest body: 65,536 characters of 4-byte UTF-8.
        let pr = MergedPullRequest {
            repo: RepoName::parse("o/r").unwrap(),
            number: 1,
            title: "t".repeat(256),
            body: Some("𝄞".repeat(65_536)),
            author: "a".into(),
            labels: (0..100).map(|_| "𝄞".repeat(50)).collect(),
            url: "https://github.com/o/r/pull/1".into(),
            base_ref: "main".into(),
            merge_commit_sha: "0".repeat(40),
            merged_at: OffsetDateTime::UNIX_EPOCH,
            source_updated_at: OffsetDateTime::UNIX_EPOCH,
            installation: Some(u64::MAX),
        };
        let delivery = Delivery {
            id: "d".into(),
            received_at: OffsetDateTime::UNIX_EPOCH,
        };
        let mut item = crate::store::new_item(&pr, &delivery, 4);
        item.extend(attrs.into_iter().map(|(k, v)| (k.to_string(), v)));
        let size = crate::store::item_size(&item);
        assert!(size < 390 * 1024, "{size} bytes, DynamoDB allows 400 KB");
    }

    #[test]
    fn directories_and_truncation() {
        let e = Enrichment {
            totals: PullTotals {
                commits: 1,
                additions: 6,
                deletions: 0,
                changed_files: 3,
                ..Default::default()
            },
            files: vec![
                file("src/a.rs", 1),
                file("README.md", 3),
                file("src/b/c.rs", 2),
            ],
            linked_issues: vec![],
            reviewers: vec![],
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
