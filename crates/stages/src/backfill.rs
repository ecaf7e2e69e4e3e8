//! The backfill stage: a repository's merged pull requests, fetched page by page with GitHub's
//! GraphQL API and written through the webhook's own upsert, already enriched.
//!
//! - Same rules as a delivery: the conditional insert, the newer-event update, pipeline state
//!   never reset. A second run, or webhooks arriving meanwhile, change nothing already there.
//! - Resumable: a checkpoint (cursor and counts) is written after each page; a run with the same
//!   window continues from it.
//! - Frugal: a page of K PRs costs `1 + 6K` connections (reviews and comments included), 2
//!   points for K = 40 ([`DEFAULT_PAGE_SIZE`]), 50 points per 1,000 PRs. The budget is
//!   read from every answer, and the run waits for `resetAt` before it would eat into the reserve
//!   left for others. After a timeout or a 502 the page size halves, then grows back.

use std::time::{Duration, Instant};

use futures::StreamExt;
use time::OffsetDateTime;

use crate::domain::{rfc3339_millis, rfc3339_seconds, Delivery, RepoName};
use crate::enrich::Enrichment;
use crate::github::graphql::{GraphPull, GraphQlClient, GraphQlError, RateLimit};
use crate::store::{Checkpoint, CheckpointStore, PrStore, StoreError, UpsertOutcome};

/// PR writes in flight at once within a page.
const WRITE_CONCURRENCY: usize = 8;

#[derive(Debug, Clone)]
pub struct BackfillOptions {
    pub repo: RepoName,
    /// Only PRs merged at or after this instant.
    pub since: Option<OffsetDateTime>,
    /// Only PRs merged at or before this instant.
    pub until: Option<OffsetDateTime>,
    /// At most this many PRs (inside the window) in this run.
    pub limit: Option<u64>,
    /// PRs per GraphQL page (K), at most 100.
    pub page_size: u32,
    /// The smallest page after repeated timeouts.
    pub min_page_size: u32,
    /// Points left to other users of the token: the run waits for the reset rather than go below.
    pub reserve_points: u64,
    /// Ignore the checkpoint and start from the oldest PR.
    pub restart: bool,
    /// Paths stored per PR (`ENRICH_MAX_PATHS`).
    pub max_paths: usize,
    /// Transient failures in a row before the run stops (resumable).
    pub max_failures: u32,
    /// Where linked issues may be (`LINKED_ISSUES_SCOPE`).
    pub issue_scope: crate::domain::IssueScope,
}

/// PRs per page: GitHub rounds a query's cost to the nearest point, so 40 PRs (241 connections)
/// cost 2 points where 50 (301) cost 3 — 50 points per 1,000 PRs instead of 60.
pub const DEFAULT_PAGE_SIZE: u32 = 40;

impl BackfillOptions {
    pub fn new(repo: RepoName) -> Self {
        BackfillOptions {
            repo,
            since: None,
            until: None,
            limit: None,
            page_size: DEFAULT_PAGE_SIZE,
            min_page_size: 5,
            reserve_points: 500,
            restart: false,
            max_paths: 500,
            max_failures: 8,
            issue_scope: Default::default(),
        }
    }

    /// Checked before anything is fetched or written.
    pub fn validate(&self) -> Result<(), BackfillError> {
        if let (Some(since), Some(until)) = (self.since, self.until) {
            if since > until {
                return Err(BackfillError::BadWindow {
                    since: rfc3339_seconds(since),
                    until: rfc3339_seconds(until),
                });
            }
        }
        if !(1..=100).contains(&self.page_size) {
            return Err(BackfillError::BadPageSize(self.page_size));
        }
        Ok(())
    }

    fn window(&self) -> String {
        let side = |t: Option<OffsetDateTime>| t.map(rfc3339_seconds).unwrap_or_default();
        format!("{}..{}", side(self.since), side(self.until))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    #[error("--since {since} is after --until {until}: nothing could match")]
    BadWindow { since: String, until: String },
    #[error("the page size must be 1 to 100 (GitHub's limit), not {0}")]
    BadPageSize(u32),
    #[error(transparent)]
    GitHub(#[from] GraphQlError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("GitHub failed {attempts} times in a row (last: {last}); run the same command again to resume from the checkpoint")]
    GaveUp { attempts: u32, last: String },
}

impl BackfillError {
    /// Bad input or access, found before anything was written: exit status 2.
    pub fn is_usage(&self) -> bool {
        match self {
            BackfillError::BadWindow { .. } | BackfillError::BadPageSize(_) => true,
            BackfillError::GitHub(e) => e.is_permanent(),
            _ => false,
        }
    }
}

/// What one run did (the checkpoint holds the totals over every run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackfillReport {
    /// New rows.
    pub imported: u64,
    /// Rows that existed with older fields.
    pub updated: u64,
    /// Already present with the same or newer fields: nothing written.
    pub unchanged: u64,
    /// Rows whose enrichment this run wrote (new rows, and stored rows not yet enriched).
    pub enriched: u64,
    pub outside_window: u64,
    pub points: u64,
    pub requests: u64,
    pub pages: u64,
    /// Merged PRs in the repository, as GitHub counts them.
    pub total: u64,
    pub waited: Duration,
    pub elapsed: Duration,
    /// The run continued an earlier one's checkpoint.
    pub resumed: bool,
    /// Every page was read (not stopped by `--limit`).
    pub complete: bool,
    pub last_rate: Option<RateLimit>,
}

/// What a terminal shows while a backfill runs.
pub trait Progress: Send + Sync {
    fn page(&self, report: &BackfillReport);
    fn waiting(&self, wait: Duration, why: &str);
}

/// No output (tests, benches).
pub struct Quiet;

impl Progress for Quiet {
    fn page(&self, _: &BackfillReport) {}
    fn waiting(&self, _: Duration, _: &str) {}
}

pub struct Backfill<'a> {
    pub github: &'a GraphQlClient,
    pub store: &'a PrStore,
    pub checkpoints: &'a CheckpointStore,
}

impl Backfill<'_> {
    pub async fn run(
        &self,
        options: &BackfillOptions,
        progress: &dyn Progress,
    ) -> Result<BackfillReport, BackfillError> {
        options.validate()?;
        let started = Instant::now();
        let repo = &options.repo;
        let window = options.window();
        let now = OffsetDateTime::now_utc();
        let mut checkpoint = match self.checkpoints.get(repo).await? {
            Some(c) if !options.restart && c.window == window => c,
            _ => Checkpoint::new(repo, &window, rfc3339_millis(now)),
        };
        let mut report = BackfillReport {
            resumed: checkpoint.cursor.is_some(),
            ..Default::default()
        };
        checkpoint.finished_at = None;
        let base = checkpoint.clone();
        // Names the run on the rows it creates, as a delivery GUID would.
        let delivery = Delivery {
            id: format!("backfill-{}", rfc3339_millis(now)),
            received_at: now,
        };
        let mut size = options.page_size;
        let mut failures = 0u32;
        let mut taken = 0u64;
        loop {
            if options.limit.is_some_and(|l| taken >= l) {
                // The limit was reached at the end of the last page: nothing more to fetch.
                report.elapsed = started.elapsed();
                return Ok(report);
            }
            self.wait_for_points(&mut report, size, options, progress)
                .await;
            let requests_before = self.github.requests();
            // A page never reaches past --limit, so the cursor can always move to its end.
            let first = options
                .limit
                .map_or(size, |l| {
                    size.min(u32::try_from(l - taken).unwrap_or(u32::MAX))
                })
                .max(1);
            let page = match self
                .github
                .merged_pulls(repo, first, checkpoint.cursor.as_deref(), None)
                .await
            {
                Ok(page) => page,
                Err(GraphQlError::Transient { what, message }) => {
                    report.requests += self.github.requests() - requests_before;
                    failures += 1;
                    if failures >= options.max_failures {
                        return Err(BackfillError::GaveUp {
                            attempts: failures,
                            last: format!("{what}: {message}"),
                        });
                    }
                    size = (size / 2).max(options.min_page_size.min(options.page_size));
                    let wait = crate::backoff::full_jitter(Duration::from_millis(500), failures);
                    tracing::warn!(%repo, message, page_size = size, wait_ms = wait.as_millis() as u64, "GitHub GraphQL failed; retrying a smaller page");
                    tokio::time::sleep(wait).await;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            failures = 0;
            report.requests += self.github.requests() - requests_before;
            report.pages += 1;
            report.total = page.total;
            self.spend(&mut report, page.rate.clone());
            // Back towards the configured size after a success.
            size = (size.saturating_mul(2)).min(options.page_size);

            let (chosen, past_until) = choose(page.pulls, options, &mut report, &mut taken);
            self.import_all(chosen, &delivery, options, &mut report)
                .await?;
            let finished = page.next.is_none() || past_until;
            if let Some(end) = page.end_cursor {
                checkpoint.cursor = Some(end);
            }
            report.complete = finished;
            if finished {
                checkpoint.finished_at = Some(rfc3339_millis(OffsetDateTime::now_utc()));
            }
            add_to(&mut checkpoint, &base, &report);
            self.checkpoints.put(&checkpoint).await?;
            report.elapsed = started.elapsed();
            progress.page(&report);
            if finished {
                return Ok(report);
            }
        }
    }

    /// Waits for GitHub's `resetAt` when the points left would not pay for the next page.
    async fn wait_for_points(
        &self,
        report: &mut BackfillReport,
        size: u32,
        options: &BackfillOptions,
        progress: &dyn Progress,
    ) {
        // This run's last answer, else the client's (an earlier run over the same budget: the
        // repositories of one installation).
        let Some(rate) = report.last_rate.clone().or_else(|| self.github.last_rate()) else {
            return;
        };
        let expected = expected_cost(size) + options.reserve_points;
        let wait = rate.reset_at - OffsetDateTime::now_utc();
        if rate.remaining < expected && wait.is_positive() {
            let wait = Duration::try_from(wait).unwrap_or_default() + Duration::from_secs(1);
            progress.waiting(
                wait,
                "GitHub's hourly points are spent: waiting for resetAt",
            );
            tracing::info!(repo = %options.repo, remaining = rate.remaining, wait_s = wait.as_secs(), "waiting for GitHub's rate limit to reset");
            tokio::time::sleep(wait).await;
            report.waited += wait;
            report.last_rate = None;
        }
    }

    /// Imports a page's chosen pulls, a few at a time, and counts what each write did.
    async fn import_all(
        &self,
        chosen: Vec<GraphPull>,
        delivery: &Delivery,
        options: &BackfillOptions,
        report: &mut BackfillReport,
    ) -> Result<(), BackfillError> {
        let results: Vec<Result<Imported, BackfillError>> = futures::stream::iter(chosen)
            .map(|pull| self.import(pull, delivery, options))
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for result in results {
            let Imported {
                outcome,
                rate,
                requests,
            } = result?;
            report.requests += requests;
            if rate.is_some() {
                self.spend(report, rate);
            }
            match outcome.upsert {
                UpsertOutcome::Inserted => report.imported += 1,
                UpsertOutcome::Updated => report.updated += 1,
                UpsertOutcome::Unchanged { .. } => report.unchanged += 1,
            }
            report.enriched += u64::from(outcome.enriched);
        }
        Ok(())
    }

    fn spend(&self, report: &mut BackfillReport, rate: Option<RateLimit>) {
        if let Some(rate) = rate {
            report.points += rate.cost;
            report.last_rate = Some(rate);
        }
    }

    /// One PR: the rest of its files if it has more than one page of them, then the write.
    async fn import(
        &self,
        mut pull: GraphPull,
        delivery: &Delivery,
        options: &BackfillOptions,
    ) -> Result<Imported, BackfillError> {
        let mut rate = None;
        let before = self.github.requests();
        if pull.more_files.is_some() {
            let mut failures = 0;
            loop {
                match self.github.remaining_files(&mut pull, None).await {
                    Ok(r) => {
                        rate = r;
                        break;
                    }
                    Err(GraphQlError::Transient { what, message })
                        if failures + 1 < options.max_failures =>
                    {
                        failures += 1;
                        tracing::warn!(what, message, "retrying a PR's files");
                        tokio::time::sleep(crate::backoff::full_jitter(
                            Duration::from_millis(500),
                            failures,
                        ))
                        .await;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let requests = self.github.requests() - before;
        let enrichment = Enrichment {
            totals: pull.totals,
            files: pull.files,
            linked_issues: crate::github::issues_in_scope(
                options.issue_scope,
                &options.repo,
                pull.linked_issues,
            ),
            reviewers: pull.reviewers,
        };
        let outcome = self
            .store
            .import(
                &pull.pr,
                delivery,
                enrichment.attributes(options.max_paths),
                OffsetDateTime::now_utc(),
            )
            .await?;
        Ok(Imported {
            outcome,
            rate,
            requests,
        })
    }
}

/// One PR written: what the store did, the last rate limit seen, the requests made for it.
struct Imported {
    outcome: crate::store::ImportOutcome,
    rate: Option<RateLimit>,
    requests: u64,
}

/// Connections each PR of a page asks for (commits, labels, files, comments, reviews, closing
/// issues: `queries.graphql`).
const CONNECTIONS_PER_PR: u32 = 6;

/// Points a page of `size` PRs costs by GitHub's rule: (1 + 6 connections per PR) / 100,
/// rounded, at least 1.
pub fn expected_cost(size: u32) -> u64 {
    ((u64::from(1 + CONNECTIONS_PER_PR * size) + 50) / 100).max(1)
}

/// The checkpoint's totals: those before this run plus this run's.
fn add_to(checkpoint: &mut Checkpoint, base: &Checkpoint, report: &BackfillReport) {
    checkpoint.imported = base.imported + report.imported;
    checkpoint.updated = base.updated + report.updated;
    checkpoint.unchanged = base.unchanged + report.unchanged;
    checkpoint.outside_window = base.outside_window + report.outside_window;
    checkpoint.points = base.points + report.points;
    checkpoint.requests = base.requests + report.requests;
    checkpoint.pages = base.pages + report.pages;
    checkpoint.total = report.total;
    checkpoint.updated_at = rfc3339_millis(OffsetDateTime::now_utc());
}

/// The page's pulls merged inside the window, counted into `taken`, and whether the page reached
/// past `until` (ordered by creation: nothing created after `until` can be merged before it).
fn choose(
    pulls: Vec<GraphPull>,
    options: &BackfillOptions,
    report: &mut BackfillReport,
    taken: &mut u64,
) -> (Vec<GraphPull>, bool) {
    let mut chosen = Vec::new();
    for pull in pulls {
        if options.until.is_some_and(|u| pull.created_at > u) {
            return (chosen, true);
        }
        let merged = pull.pr.merged_at;
        if options.since.is_some_and(|s| merged < s) || options.until.is_some_and(|u| merged > u) {
            report.outside_window += 1;
            continue;
        }
        *taken += 1;
        chosen.push(pull);
    }
    (chosen, false)
}
