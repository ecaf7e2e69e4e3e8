//! Self-healing ingestion: GitHub never retries a failed delivery, so a webhook that answered
//! 5xx (or timed out) during an outage would be lost. Once an hour this stage lists each recorded
//! hook's recent deliveries and asks GitHub to redeliver the `pull_request` ones that
//!
//! * are within GitHub's redelivery window (3 days),
//! * never got a 2xx (no attempt with that GUID succeeded),
//! * carry a merged PR that Chronicle has not stored (checked against the PR row: its
//!   `deliveryId`, or a `sourceUpdatedAt` at least as new as the delivery's),
//! * and were not redelivered before (each GUID is claimed with a conditional write first).
//!
//! A redelivery keeps its GUID, so the webhook dedupes it as usual. What a run learns of a
//! delivery (asked, stored after all, not merged) is remembered, so later runs read nothing
//! twice. Runs are bounded (`max_per_run` failed deliveries looked into, [`MAX_PAGES_PER_HOOK`]
//! listing pages per hook, the deadline) and stop early when GitHub's REST budget runs low or
//! the token may not redeliver.

use crate::secret::Resolve;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use time::OffsetDateTime;

use crate::config::RedeliverConfig;
use crate::domain::hook::{HookRef, HookTarget};
use crate::domain::{parse_rfc3339, RepoName};
use crate::github::app::AppCredentials;
use crate::github::deliveries::{HookDelivery, Redelivery, REDELIVERY_WINDOW};
use crate::github::{GitHubClient, GitHubError};
use crate::payload::{self, Classified};
use crate::secret::SecretError;
use crate::store::{
    attr, string, DeliveryState, HookRecord, HookStore, Known, PrStore, StoreError,
};
use chronicle_ingest::lifecycle;

/// Listing pages read per hook per run (100 deliveries each).
pub const MAX_PAGES_PER_HOOK: usize = 20;
/// Below this many REST requests left, a run stops: enrichment shares the token.
pub const MIN_RATE_REMAINING: u64 = 200;
/// What is known of a delivery is kept this long after GitHub's window closes, then deleted.
const MEMORY_AFTER_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// A claim older than this that was never confirmed asked: a run stopped between the two.
const UNCONFIRMED_AFTER: Duration = Duration::from_secs(600);
/// Times one delivery is asked at most: GitHub's redelivery fails too while the webhook is
/// still down, so it is asked again on later runs (hourly), up to this many times.
pub const MAX_ASKS: u32 = 5;

#[derive(Debug, thiserror::Error)]
pub enum RedeliverError {
    #[error(
        "no GitHub token configured ({} / {} / {}): failed deliveries cannot be listed or \
         redelivered. Configure a token that can read and write the repository's webhooks \
         (classic: admin:repo_hook, or admin:org_hook for an organization's hook; \
         fine-grained: \"Webhooks\" read and write), or, for a GitHub App's hook, {} and {}",
        crate::config::GITHUB_TOKEN,
        crate::config::GITHUB_TOKEN_ARN,
        crate::config::GITHUB_TOKEN_PARAM,
        crate::config::GITHUB_APP_ID,
        crate::config::GITHUB_APP_PRIVATE_KEY
    )]
    NoToken,
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error("cannot build the GitHub client: {0}")]
    Http(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One redelivery asked of GitHub (or, in a dry run, that would be).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Redelivered {
    pub hook: String,
    pub guid: String,
    pub delivery_id: u64,
    pub repo: String,
    pub pr: u64,
    pub delivered_at: String,
}

/// A hook that could not be read, or a redelivery GitHub refused, with why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HookProblem {
    pub hook: String,
    pub message: String,
}

/// What one run did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RedeliverReport {
    pub hooks: usize,
    /// Hooks GitHub said were gone that delivered nothing since: not asked again.
    pub dormant: usize,
    /// Delivery attempts listed (every event, within the window or the first older page).
    pub listed: usize,
    /// Distinct tracked `pull_request` deliveries in the window that never got a 2xx.
    pub failed: usize,
    /// Of those: Chronicle had stored the PR anyway (the answer was lost, not the delivery).
    pub already_stored: usize,
    /// Of those: redelivered (or refused) by an earlier run.
    pub already_asked: usize,
    /// Of those: not a merged PR: nothing to store.
    pub not_merged: usize,
    /// Of those: claimed by a run that stopped before it confirmed asking GitHub (reported, and
    /// asked again once the hook's delivery log settles it).
    pub unconfirmed: usize,
    pub redelivered: Vec<Redelivered>,
    pub problems: Vec<HookProblem>,
    /// Why the run stopped before looking at everything (budget, deadline, per-run cap).
    pub stopped: Option<String>,
    pub github_requests: u64,
    pub dry_run: bool,
}

pub struct Redeliverer {
    /// For repository and organization hooks.
    github: Option<GitHubClient>,
    /// For the GitHub App's own hook.
    app: Option<AppAccess>,
    hooks: HookStore,
    prs: PrStore,
    max_per_run: usize,
}

/// A GitHub App's access to its hook: a JWT is minted per run.
#[derive(Debug, Clone)]
pub struct AppAccess {
    pub credentials: AppCredentials,
    pub api_url: String,
    pub timeout: Duration,
    pub max_retries: u32,
}

impl AppAccess {
    fn client(&self, now: OffsetDateTime) -> Result<GitHubClient, String> {
        let jwt = self.credentials.jwt(now).map_err(|e| e.to_string())?;
        GitHubClient::new(&self.api_url, &jwt, self.timeout, self.max_retries)
            .map_err(|e| e.to_string())
    }
}

impl Redeliverer {
    /// `github`: the token's client (repository and organization hooks). `max_per_run`: failed
    /// deliveries looked into (payload read, maybe redelivered) per run.
    pub fn new(
        github: Option<GitHubClient>,
        hooks: HookStore,
        prs: PrStore,
        max_per_run: usize,
    ) -> Self {
        Redeliverer {
            github,
            app: None,
            hooks,
            prs,
            max_per_run: max_per_run.max(1),
        }
    }

    /// The GitHub App's hook is read with the app's JWT.
    pub fn with_app(mut self, app: AppAccess) -> Self {
        self.app = Some(app);
        self
    }

    /// From configuration; [`RedeliverError::NoToken`] when neither a token nor an app is
    /// configured.
    pub async fn from_config(
        config: &RedeliverConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, RedeliverError> {
        let github = match config.token.resolve(sdk).await? {
            Some(token) => Some(
                GitHubClient::new(&config.api_url, &token, config.timeout, config.max_retries)
                    .map_err(|e| RedeliverError::Http(e.to_string()))?,
            ),
            None => None,
        };
        let app = match (&config.app_id, config.app_key.resolve(sdk).await?) {
            (Some(id), Some(key)) => Some(AppAccess {
                credentials: AppCredentials::new(id, &key)
                    .map_err(|e| RedeliverError::Http(e.to_string()))?,
                api_url: config.api_url.clone(),
                timeout: config.timeout,
                max_retries: config.max_retries,
            }),
            _ => None,
        };
        if github.is_none() && app.is_none() {
            return Err(RedeliverError::NoToken);
        }
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let redeliverer = Self::new(
            github,
            HookStore::new(dynamo.clone(), &config.pages_table),
            PrStore::new(dynamo, config.table.clone()),
            config.max_per_run,
        );
        Ok(match app {
            Some(app) => redeliverer.with_app(app),
            None => redeliverer,
        })
    }

    /// One run over every recorded hook, the least recently listed first (a run cut short by
    /// the budget or the cap does not starve the same hooks every time). With `dry_run`,
    /// nothing is written or asked: the report lists what would be redelivered.
    pub async fn run(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
        dry_run: bool,
    ) -> Result<RedeliverReport, RedeliverError> {
        let mut run = Run {
            report: RedeliverReport {
                dry_run,
                ..Default::default()
            },
            now,
            cutoff: now - REDELIVERY_WINDOW,
            deadline,
            dry_run,
            looked_into: 0,
        };
        let mut records = self.hooks.list().await?;
        records.sort_by(|a, b| a.listed_at.cmp(&b.listed_at));
        run.report.hooks = records.len();
        for record in &records {
            if !dry_run {
                self.forget_old(&run, record).await;
            }
            if run.report.stopped.is_some() {
                continue;
            }
            if record.dormant(now) {
                run.report.dormant += 1;
                continue;
            }
            // The app's JWT is minted per hook (it lasts nine minutes).
            let app_client = match (&record.hook.target, &self.app) {
                (HookTarget::App, Some(app)) => Some(app.client(OffsetDateTime::now_utc())),
                _ => None,
            };
            let client = match (&record.hook.target, &self.github, &app_client) {
                (HookTarget::App, _, Some(Ok(client))) => client,
                (HookTarget::App, _, Some(Err(e))) => {
                    run.problem(&record.hook, format!("the GitHub App's JWT: {e}"));
                    continue;
                }
                (HookTarget::App, _, None) => {
                    run.problem(
                        &record.hook,
                        format!(
                            "a GitHub App's hook: its deliveries are listed with the app's JWT; \
                             configure {} and {} (or …_ARN, …_PARAM)",
                            crate::config::GITHUB_APP_ID,
                            crate::config::GITHUB_APP_PRIVATE_KEY
                        ),
                    );
                    continue;
                }
                (_, Some(client), _) => client,
                (_, None, _) => {
                    run.problem(&record.hook, RedeliverError::NoToken.to_string());
                    continue;
                }
            };
            self.hook(&mut run, client, record).await?;
        }
        let report = run.report;
        tracing::info!(
            hooks = report.hooks,
            listed = report.listed,
            failed = report.failed,
            redelivered = report.redelivered.len(),
            already_stored = report.already_stored,
            already_asked = report.already_asked,
            problems = report.problems.len(),
            stopped = report.stopped.as_deref().unwrap_or("-"),
            dry_run,
            "redelivery run"
        );
        for problem in &report.problems {
            tracing::warn!(hook = %problem.hook, "{}", problem.message);
        }
        Ok(report)
    }

    async fn hook(
        &self,
        run: &mut Run,
        github: &GitHubClient,
        record: &HookRecord,
    ) -> Result<(), RedeliverError> {
        let hook = &record.hook;
        let listing = self.list(run, github, hook).await;
        if !run.dry_run {
            self.hooks
                .listed(hook, run.now, matches!(listing, Listing::Gone))
                .await?;
        }
        let Listing::Attempts(attempts) = listing else {
            return Ok(());
        };
        for (guid, delivery) in candidates(&attempts, run.cutoff) {
            run.report.failed += 1;
            let known = record.deliveries.get(guid);
            let failed_again = known.filter(|k| ask_again(k, delivery, run.now));
            match (known, failed_again) {
                (Some(k), Some(_)) if k.asks >= MAX_ASKS => {
                    run.problem(
                        hook,
                        format!(
                            "delivery {guid} was redelivered {} times and failed each time: \
                             is the webhook answering? It is not asked again",
                            k.asks
                        ),
                    );
                    continue;
                }
                (Some(k), Some(_)) if k.state == DeliveryState::Claimed => {
                    run.unconfirmed(hook, guid, &k.at);
                }
                (Some(_), Some(_)) => {}
                (Some(k), None) => {
                    run.known(k.state);
                    continue;
                }
                (None, _) => {}
            }
            if run.report.stopped.is_some() {
                continue;
            }
            if run.looked_into >= self.max_per_run {
                run.report.stopped = Some(format!(
                    "{} failed deliveries looked into: the per-run cap (the rest wait for the next run)",
                    self.max_per_run
                ));
                continue;
            }
            run.looked_into += 1;
            self.consider(run, github, hook, guid, delivery, failed_again)
                .await?;
        }
        Ok(())
    }

    /// The hook's delivery attempts back to the window's start.
    async fn list(&self, run: &mut Run, github: &GitHubClient, hook: &HookRef) -> Listing {
        let mut attempts = Vec::new();
        let mut next: Option<String> = None;
        for page in 1..=MAX_PAGES_PER_HOOK {
            let answer = github
                .hook_deliveries(hook, next.as_deref(), run.deadline)
                .await;
            run.report.github_requests += 1;
            let page_of = match answer {
                Ok(p) => p,
                Err(e) => return run.github_failed(hook, e),
            };
            run.report.listed += page_of.deliveries.len();
            let reached_cutoff = page_of
                .deliveries
                .iter()
                .any(|d| parse_rfc3339(&d.delivered_at).is_none_or(|t| t < run.cutoff));
            attempts.extend(page_of.deliveries);
            if let Some(left) = page_of.rate_remaining.filter(|r| *r < MIN_RATE_REMAINING) {
                run.report.stopped = Some(format!(
                    "GitHub's REST budget is low ({left} requests left in the hour): the rest \
                     waits for the next run"
                ));
                break;
            }
            match page_of.next {
                Some(url) if !reached_cutoff => next = Some(url),
                _ => break,
            }
            if page == MAX_PAGES_PER_HOOK {
                run.problem(
                    hook,
                    format!(
                        "more than {} deliveries in GitHub's 3-day window: only the newest were \
                         looked at; older failures may need `chronicle redeliver` runs or \
                         GitHub's delivery log",
                        MAX_PAGES_PER_HOOK * crate::github::deliveries::DELIVERIES_PER_PAGE
                    ),
                );
            }
        }
        Listing::Attempts(attempts)
    }

    /// One failed delivery not looked at before (or asked before and failed again: `again`):
    /// stored already? merged? if it should be, claim it and ask GitHub.
    async fn consider(
        &self,
        run: &mut Run,
        github: &GitHubClient,
        hook: &HookRef,
        guid: &str,
        delivery: &HookDelivery,
        again: Option<&Known>,
    ) -> Result<(), RedeliverError> {
        if delivery.event != "pull_request" {
            // A repository's lifecycle event: applied again it changes no row, so it is asked
            // again without reading its payload (`repo` names the event).
            let action = delivery.action.as_deref().unwrap_or("-");
            let line = Redelivered {
                hook: hook.to_string(),
                guid: guid.to_string(),
                delivery_id: delivery.id,
                repo: format!("{}.{action}", delivery.event),
                pr: 0,
                delivered_at: delivery.delivered_at.clone(),
            };
            return self
                .ask(run, github, hook, guid, delivery, again, line)
                .await;
        }
        let payload = github
            .hook_delivery_payload(hook, delivery.id, run.deadline)
            .await;
        run.report.github_requests += 1;
        let payload = match payload {
            Ok(payload) => payload,
            Err(e) => {
                run.github_failed(hook, e);
                return Ok(());
            }
        };
        let json = serde_json::to_vec(&payload).unwrap_or_default();
        let pr = match payload::classify_action(delivery.action.as_deref().unwrap_or(""), &json) {
            Ok(Classified::Merged(pr)) => pr,
            Ok(Classified::Ignored(_)) => {
                run.report.not_merged += 1;
                self.remember(run, hook, guid, DeliveryState::NotMerged)
                    .await?;
                return Ok(());
            }
            Err(e) => {
                run.problem(
                    hook,
                    format!("delivery {guid}: its payload is not a pull_request event: {e}"),
                );
                return Ok(());
            }
        };
        if self
            .stored(&pr.repo, pr.number, guid, pr.source_updated_at)
            .await?
        {
            run.report.already_stored += 1;
            self.remember(run, hook, guid, DeliveryState::Stored)
                .await?;
            return Ok(());
        }
        let line = Redelivered {
            hook: hook.to_string(),
            guid: guid.to_string(),
            delivery_id: delivery.id,
            repo: pr.repo.to_string(),
            pr: pr.number,
            delivered_at: delivery.delivered_at.clone(),
        };
        self.ask(run, github, hook, guid, delivery, again, line)
            .await
    }

    /// Claims the delivery and asks GitHub to redeliver it (in a dry run, only reports it).
    #[allow(clippy::too_many_arguments)]
    async fn ask(
        &self,
        run: &mut Run,
        github: &GitHubClient,
        hook: &HookRef,
        guid: &str,
        delivery: &HookDelivery,
        again: Option<&Known>,
        line: Redelivered,
    ) -> Result<(), RedeliverError> {
        if run.dry_run {
            run.report.redelivered.push(line);
            return Ok(());
        }
        let claimed = match again {
            Some(k) => {
                self.hooks
                    .reclaim(hook, guid, k.state, &k.at, run.now)
                    .await?
            }
            None => self.hooks.claim(hook, guid, run.now).await?,
        };
        if !claimed {
            run.report.already_asked += 1;
            return Ok(());
        }
        let answer = github.redeliver(hook, delivery.id, run.deadline).await;
        run.report.github_requests += 1;
        let what = format!("{guid} ({}#{})", line.repo, line.pr);
        match answer {
            Redelivery::Accepted => {
                self.hooks
                    .set_state(hook, guid, DeliveryState::Asked, run.now)
                    .await?;
                run.report.redelivered.push(line);
            }
            Redelivery::Refused { status, message } => {
                self.hooks
                    .set_state(hook, guid, DeliveryState::Refused, run.now)
                    .await?;
                run.problem(
                    hook,
                    format!("GitHub refused to redeliver {what} with {status}: {message}"),
                );
            }
            Redelivery::NoAccess { status, message } => {
                // Nothing was done: the claim goes back, and the run stops (every other
                // redelivery would be refused the same way).
                self.hooks.forget(hook, guid).await?;
                run.problem(
                    hook,
                    format!(
                        "GitHub answered {status} to the redelivery of {what} ({message}): the \
                         token may list deliveries but not redeliver them; it needs {}",
                        access_needed(hook)
                    ),
                );
                run.report.stopped = Some(format!("GitHub refused redeliveries with {status}"));
            }
            Redelivery::NotDone(message) => {
                // Certainly not redelivered: the claim goes back, the next run asks again.
                self.hooks.forget(hook, guid).await?;
                run.problem(hook, format!("redelivery of {what} not done: {message}"));
            }
            Redelivery::Unknown(message) => {
                self.hooks
                    .set_state(hook, guid, DeliveryState::Unknown, run.now)
                    .await?;
                run.problem(
                    hook,
                    format!(
                        "no clear answer to the redelivery of {what} ({message}): GitHub may have \
                         done it; the hook's delivery log settles it on a later run (asked again \
                         if GitHub did not act, or its redelivery failed too)"
                    ),
                );
            }
        }
        Ok(())
    }

    /// Remembers a delivery that needs nothing (not in a dry run).
    async fn remember(
        &self,
        run: &Run,
        hook: &HookRef,
        guid: &str,
        state: DeliveryState,
    ) -> Result<(), StoreError> {
        if run.dry_run {
            return Ok(());
        }
        self.hooks.set_state(hook, guid, state, run.now).await
    }

    /// Whether the PR row holds this delivery, or a newer state of the PR.
    async fn stored(
        &self,
        repo: &RepoName,
        number: u64,
        guid: &str,
        updated_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let Some(item) = self.prs.get(repo, number).await? else {
            return Ok(false);
        };
        let same_delivery = string(&item, attr::DELIVERY_ID) == Some(guid);
        let as_new = string(&item, attr::SOURCE_UPDATED_AT)
            .and_then(parse_rfc3339)
            .is_some_and(|stored| stored >= updated_at);
        Ok(same_delivery || as_new)
    }

    /// What is known of deliveries past GitHub's window (and a day) can never matter again.
    async fn forget_old(&self, run: &Run, record: &HookRecord) {
        let horizon = run.cutoff - MEMORY_AFTER_WINDOW;
        for (guid, known) in &record.deliveries {
            if parse_rfc3339(&known.at).is_some_and(|t| t >= horizon) {
                continue;
            }
            if let Err(e) = self.hooks.forget(&record.hook, guid).await {
                tracing::warn!(hook = %record.hook, error = %e, "could not forget an old delivery");
                return;
            }
        }
    }
}

/// What listing a hook gave.
enum Listing {
    Attempts(Vec<HookDelivery>),
    /// GitHub said the hook, or the token's access to it, is gone (401/403/404).
    Gone,
    /// Another failure (reported): nothing to do this run.
    Failed,
}

/// The token scope a hook's deliveries need.
fn access_needed(hook: &HookRef) -> &'static str {
    match hook.target {
        HookTarget::App => {
            "the app's own JWT: check GITHUB_APP_ID and its private key (the app's webhook \
             deliveries need no extra permission)"
        }
        HookTarget::Organization(_) => {
            "admin:org_hook (classic token) or the organization's \"Webhooks\" read and write \
             permission (fine-grained token or GitHub App)"
        }
        _ => {
            "admin:repo_hook (classic token) or \"Webhooks\" read and write (fine-grained token \
             or GitHub App installation)"
        }
    }
}

struct Run {
    report: RedeliverReport,
    now: OffsetDateTime,
    cutoff: OffsetDateTime,
    deadline: Instant,
    dry_run: bool,
    /// Failed deliveries looked into this run (payload read), against the per-run cap.
    looked_into: usize,
}

impl Run {
    fn problem(&mut self, hook: &HookRef, message: String) {
        self.report.problems.push(HookProblem {
            hook: hook.to_string(),
            message,
        });
    }

    /// A delivery an earlier run looked into, and that needs nothing this run.
    fn known(&mut self, state: DeliveryState) {
        match state {
            DeliveryState::Stored => self.report.already_stored += 1,
            DeliveryState::NotMerged => self.report.not_merged += 1,
            // Claimed: another run is asking right now.
            DeliveryState::Asked
            | DeliveryState::Refused
            | DeliveryState::Unknown
            | DeliveryState::Claimed => self.report.already_asked += 1,
        }
    }

    /// A claim older than [`UNCONFIRMED_AFTER`] never confirmed asked: its run stopped in
    /// between. Reported, and asked again as the delivery log settles it.
    fn unconfirmed(&mut self, hook: &HookRef, guid: &str, at: &str) {
        self.report.unconfirmed += 1;
        self.problem(
            hook,
            format!(
                "delivery {guid} was claimed at {at} by a run that stopped before confirming it \
                 asked GitHub: settled by the hook's delivery log, it is asked again"
            ),
        );
    }

    /// A failed GitHub request: a clear problem, and a stop when the budget or time is gone.
    fn github_failed(&mut self, hook: &HookRef, error: GitHubError) -> Listing {
        match &error {
            // A refused JWT (expired, clock skew, wrong key) says nothing about the app's hook.
            GitHubError::Refused { status: 401, .. } if hook.target == HookTarget::App => {
                self.problem(
                    hook,
                    format!(
                        "{error}. The app's JWT was refused: {}",
                        access_needed(hook)
                    ),
                );
                Listing::Failed
            }
            GitHubError::Gone { status, .. } | GitHubError::Refused { status, .. }
                if matches!(status, 401 | 403 | 404) =>
            {
                self.problem(
                    hook,
                    format!(
                        "{error}. The hook was deleted, or the token cannot read its \
                         deliveries: it needs {}",
                        access_needed(hook)
                    ),
                );
                Listing::Gone
            }
            GitHubError::RateLimited { .. } | GitHubError::OutOfTime { .. } => {
                self.report.stopped = Some(error.to_string());
                self.problem(hook, error.to_string());
                Listing::Failed
            }
            _ => {
                self.problem(hook, error.to_string());
                Listing::Failed
            }
        }
    }
}

/// Whether a delivery an earlier run left open is to be asked again, settled by the hook's own
/// delivery log (`newest`: the GUID's newest attempt, which has no 2xx since it is a candidate):
/// - asked: GitHub's redelivery came and failed too (the webhook still down);
/// - no clear answer (a timeout, 502 or 504) or claimed by a run that stopped before asking:
///   an attempt since then means GitHub acted and that attempt failed; none after
///   [`UNCONFIRMED_AFTER`] means GitHub did not act. Either way it is asked again; a redelivery
///   asked twice is deduplicated by the webhook (same GUID).
fn ask_again(known: &Known, newest: &HookDelivery, now: OffsetDateTime) -> bool {
    let attempted_since = newest.redelivery && redelivered_since(&newest.delivered_at, &known.at);
    let settled = || parse_rfc3339(&known.at).is_none_or(|t| t + UNCONFIRMED_AFTER < now);
    match known.state {
        DeliveryState::Asked => attempted_since,
        DeliveryState::Unknown => attempted_since || settled(),
        // A fresh claim is a run asking right now.
        DeliveryState::Claimed => settled(),
        DeliveryState::Refused | DeliveryState::Stored | DeliveryState::NotMerged => false,
    }
}

/// Whether an attempt GitHub made at `delivered_at` (whole seconds) came after an ask at
/// `asked_at` (milliseconds): same second or later.
fn redelivered_since(delivered_at: &str, asked_at: &str) -> bool {
    match (parse_rfc3339(delivered_at), parse_rfc3339(asked_at)) {
        (Some(d), Some(a)) => d.unix_timestamp() >= a.unix_timestamp(),
        _ => false,
    }
}

/// The deliveries worth a redelivery, oldest first (the closest to leaving the window): per GUID,
/// `pull_request` deliveries of an action Chronicle stores (`closed`, and `edited` or label
/// changes of a merged PR) and repository lifecycle events ([`worth_redelivery`]) none of whose
/// attempts got a 2xx, the newest attempt within the window (it is the one asked again).
pub fn candidates(attempts: &[HookDelivery], cutoff: OffsetDateTime) -> Vec<(&str, &HookDelivery)> {
    let mut by_guid: HashMap<&str, Vec<&HookDelivery>> = HashMap::new();
    for attempt in attempts {
        by_guid.entry(&attempt.guid).or_default().push(attempt);
    }
    let mut chosen: Vec<(&str, &HookDelivery, OffsetDateTime)> = by_guid
        .into_iter()
        .filter(|(_, tries)| !tries.iter().any(|t| t.ok()))
        .filter_map(|(guid, tries)| {
            let newest = tries
                .iter()
                .filter_map(|t| Some((parse_rfc3339(&t.delivered_at)?, *t)))
                .max_by_key(|(at, t)| (*at, t.id))?;
            let (at, delivery) = newest;
            (worth_redelivery(delivery) && at >= cutoff).then_some((guid, delivery, at))
        })
        .collect();
    chosen.sort_by_key(|(_, d, at)| (*at, d.id));
    chosen.into_iter().map(|(g, d, _)| (g, d)).collect()
}

/// A `pull_request` delivery of an action Chronicle stores, or a repository lifecycle event it
/// applies (renamed, transferred, deleted, created; added to the installation).
fn worth_redelivery(delivery: &HookDelivery) -> bool {
    let actions = match delivery.event.as_str() {
        "pull_request" => payload::OUR_ACTIONS,
        "repository" => lifecycle::REPOSITORY_ACTIONS,
        "installation_repositories" => lifecycle::INSTALLATION_REPOSITORIES_ACTIONS,
        _ => return false,
    };
    delivery
        .action
        .as_deref()
        .is_some_and(|a| actions.contains(&a))
}

/// The run's figures as one EMF line.
pub fn emf_line(report: &RedeliverReport, now: OffsetDateTime) -> String {
    use serde_json::json;
    crate::telemetry::emf_line(
        now,
        &[
            ("Redelivered", "Count", json!(report.redelivered.len())),
            ("DeliveriesFailed", "Count", json!(report.failed)),
            ("RedeliveryProblems", "Count", json!(report.problems.len())),
            (
                "RedeliverGitHubRequests",
                "Count",
                json!(report.github_requests),
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape CloudWatch parses: every figure a declared metric in the Chronicle namespace.
    #[test]
    fn the_emf_line_declares_every_figure() {
        let report = RedeliverReport {
            failed: 3,
            github_requests: 7,
            problems: vec![HookProblem {
                hook: "repos/o/r/hooks/1".into(),
                message: "m".into(),
            }],
            ..Default::default()
        };
        let line: serde_json::Value =
            serde_json::from_str(&emf_line(&report, OffsetDateTime::UNIX_EPOCH)).unwrap();
        let metrics = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(metrics["Namespace"], "Chronicle");
        let names: Vec<&str> = metrics["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Redelivered",
                "DeliveriesFailed",
                "RedeliveryProblems",
                "RedeliverGitHubRequests"
            ]
        );
        assert_eq!(
            (
                &line["Redelivered"],
                &line["DeliveriesFailed"],
                &line["RedeliveryProblems"],
                &line["RedeliverGitHubRequests"]
            ),
            (
                &serde_json::json!(0),
                &serde_json::json!(3),
                &serde_json::json!(1),
                &serde_json::json!(7)
            )
        );
    }

    fn attempt(
        id: u64,
        guid: &str,
        at: &str,
        status: u16,
        event: &str,
        action: &str,
    ) -> HookDelivery {
        HookDelivery {
            id,
            guid: guid.into(),
            delivered_at: at.into(),
            redelivery: false,
            status_code: status,
            status: String::new(),
            event: event.into(),
            action: Some(action.into()),
        }
    }

    #[test]
    fn only_failed_merged_candidates_in_the_window_are_chosen_oldest_first() {
        let cutoff = parse_rfc3339("2026-12-01T00:00:00Z").unwrap();
        let attempts = vec![
            attempt(
                1,
                "late",
                "2026-12-03T00:00:00Z",
                502,
                "pull_request",
                "closed",
            ),
            attempt(
                2,
                "early",
                "2026-12-01T10:00:00Z",
                0,
                "pull_request",
                "closed",
            ),
            attempt(
                3,
                "ok",
                "2026-12-02T00:00:00Z",
                200,
                "pull_request",
                "closed",
            ),
            // Failed, then redelivered successfully: nothing to do.
            attempt(
                4,
                "healed",
                "2026-12-02T00:00:00Z",
                500,
                "pull_request",
                "closed",
            ),
            attempt(
                5,
                "healed",
                "2026-12-02T01:00:00Z",
                202,
                "pull_request",
                "closed",
            ),
            attempt(
                6,
                "old",
                "2026-11-29T00:00:00Z",
                500,
                "pull_request",
                "closed",
            ),
            attempt(
                7,
                "opened",
                "2026-12-02T00:00:00Z",
                500,
                "pull_request",
                "opened",
            ),
            attempt(8, "push", "2026-12-02T00:00:00Z", 500, "push", "closed"),
            // A repository's rename and an installation's added repositories: applied by the
            // webhook, so worth healing; a removal or an edit is not (nothing is applied).
            attempt(
                12,
                "renamed",
                "2026-12-02T03:00:00Z",
                500,
                "repository",
                "renamed",
            ),
            attempt(
                13,
                "added",
                "2026-12-02T04:00:00Z",
                502,
                "installation_repositories",
                "added",
            ),
            attempt(
                14,
                "removed",
                "2026-12-02T04:00:00Z",
                500,
                "installation_repositories",
                "removed",
            ),
            attempt(
                15,
                "edited",
                "2026-12-02T04:00:00Z",
                500,
                "repository",
                "edited",
            ),
            // A label change of a merged PR: stored by Chronicle, so worth healing too.
            attempt(
                11,
                "labeled",
                "2026-12-02T02:00:00Z",
                500,
                "pull_request",
                "labeled",
            ),
            // Two failed attempts: the newest is the one asked again.
            attempt(
                9,
                "twice",
                "2026-12-01T12:00:00Z",
                500,
                "pull_request",
                "closed",
            ),
            attempt(
                10,
                "twice",
                "2026-12-01T13:00:00Z",
                504,
                "pull_request",
                "closed",
            ),
        ];
        let chosen: Vec<(&str, u64)> = candidates(&attempts, cutoff)
            .into_iter()
            .map(|(g, d)| (g, d.id))
            .collect();
        assert_eq!(
            chosen,
            vec![
                ("early", 2),
                ("twice", 10),
                ("labeled", 11),
                ("renamed", 12),
                ("added", 13),
                ("late", 1)
            ]
        );
    }
}
