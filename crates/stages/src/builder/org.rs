//! The organisation index: each repository's bounded row, recorded by its index build, and the
//! owner's page, built from every row once per tick, after the indexes.
//!
//! - **Once per tick.** An index build records its row and marks the owner's page item
//!   (`#org/<owner>` / `#index`) stale; the tick then builds each stale organisation page once,
//!   however many of its repositories were built (a mass rebuild of N repositories reads the N
//!   rows and replaces the page once, not N times). One stale for longer than [`ORG_OVERDUE`]
//!   is built first instead, so a rebuild that takes every tick's time never starves it.
//! - **Best-effort.** Its failure is its own, never a repository's index's, which completes.
//!   What happened decides what follows ([`OrgRetry`]):
//!   - Notion's brief trouble (429/529, 409, 5xx, no answer, too little time left) is no
//!     failure: nothing is recorded, and the page waits its `Retry-After` or the rebuild
//!     interval, stale.
//!   - Content Notion refused (400/413): recorded on its item (`chronicle status` shows it);
//!     tried again after the rebuild interval, and then sent only if its rows changed (the
//!     publisher remembers the refused content).
//!   - Anything else only the operator can fix (access lost, a disk full): recorded, and held
//!     back for a growing delay ([`org_backoff`]) so it does not spend requests at every tick.
//! - **Under the build lease** of its item, like every page: rows recorded during its build
//!   mark it stale again (its version), and it is built again after the rebuild interval. No
//!   request is sent after the lease's end less [`ORG_LEASE_MARGIN`] ([`org_deadline`]).

use super::*;
use crate::notion::NotionError;
use crate::pages::MAIN_LABEL;
use crate::store::org_partition;

/// How long an organisation page's build lease lasts at most.
const ORG_LEASE: Duration = Duration::from_secs(120);
/// Kept back from the lease for the writes that follow the publish.
const ORG_LEASE_MARGIN: Duration = Duration::from_secs(5);
/// An organisation page stale longer than this is built at the start of a tick, before the
/// repositories' pages (which could otherwise take every tick's time in a large rebuild).
pub(super) const ORG_OVERDUE: Duration = Duration::from_secs(15 * 60);
/// The longest a failed organisation page waits before it is tried again.
const ORG_BACKOFF_MAX: Duration = Duration::from_secs(3600);

/// Until when an organisation build whose lease of `lease` was taken at `sent` sends requests:
/// the lease's end less a margin, for the writes that record what it sent.
pub(super) fn org_deadline(sent: Instant, lease: Duration) -> Instant {
    sent + lease.saturating_sub(ORG_LEASE_MARGIN)
}

/// What follows a failed organisation build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OrgRetry {
    /// Not a failure: built again after this long, nothing recorded.
    Wait(Duration),
    /// A failure (recorded on its item), built again after this long.
    Failed(Duration),
}

/// What follows an organisation build that failed with `error`, its `failures`-th in a row
/// (this one included), with rebuild interval `interval`.
pub(super) fn org_retry(error: &PublishError, interval: Duration, failures: u64) -> OrgRetry {
    match error {
        e if e.is_transient() => OrgRetry::Wait(e.retry_after().unwrap_or_default().max(interval)),
        // Refused content: not sent again until it changes (the publisher checks, at no
        // request), so the interval is enough.
        PublishError::StillRefused { .. } => OrgRetry::Wait(interval),
        PublishError::Notion(NotionError::Invalid { .. }) => OrgRetry::Failed(interval),
        _ => OrgRetry::Failed(org_backoff(interval, failures)),
    }
}

/// How long an organisation page whose build failed `failures` times in a row (this one
/// included) waits: the rebuild interval (a minute at least), doubled at each failure, up to an
/// hour.
pub(super) fn org_backoff(interval: Duration, failures: u64) -> Duration {
    let base = interval.max(Duration::from_secs(60));
    let doublings = failures.saturating_sub(1).min(16) as u32;
    base.saturating_mul(1 << doublings).min(ORG_BACKOFF_MAX)
}

impl PageBuilder {
    /// Records `repo`'s row on its owner's index from its index rows (bounded: see `org_row`),
    /// and marks the owner's page to be built after this tick's indexes.
    pub(super) async fn record_org_row(
        &self,
        repo: &str,
        rows: &[IndexRow],
        items: &[PageItem],
    ) -> Result<(), BuildError> {
        let Some((org, _)) = repo.split_once('/') else {
            return Err(BuildError::Repo(repo.to_string()));
        };
        if !self.publisher.publishes_org() {
            return Ok(());
        }
        // Where the pages are in Notion, for a publisher that links them there.
        let notion_url = |module: &str| {
            let item = items.iter().find(|i| i.module == module)?;
            let page = item.notion.get(MAIN_LABEL)?;
            page.id.as_ref()?;
            page.url.clone()
        };
        let link = |index: &PageItem| {
            let page = index.notion.get(MAIN_LABEL)?;
            Some(chronicle_domain::NotionLink {
                id: page.id.clone()?,
                url: page.url.clone()?,
            })
        };
        // Where the index page is: as read before its publish, or read again if that publish
        // created it.
        let known = items
            .iter()
            .find(|i| i.module == INDEX_MODULE)
            .and_then(link);
        // Read again only where pages are in Notion: a Markdown publisher records none, and a
        // Notion index page is created by its modules' builds, which record theirs.
        let in_notion = items.iter().any(|i| !i.notion.is_empty());
        let notion_index = match known {
            Some(known) => Some(known),
            None if in_notion => self
                .pages
                .get(repo, INDEX_MODULE)
                .await?
                .as_ref()
                .and_then(link),
            None => None,
        };
        let modules = rows
            .iter()
            .map(|r| chronicle_domain::OrgModule {
                module: r.module.clone(),
                entry_count: r.entry_count,
                latest_merged_at: r.latest_merged_at.clone(),
                authors: r
                    .recent_authors
                    .iter()
                    .take(3)
                    .map(|a| a.login.clone())
                    .collect(),
                notion_url: notion_url(&r.module),
            })
            .collect();
        let mut row = crate::pages::org::org_row(repo, modules);
        row.notion_index = notion_index;
        self.pages.put_org_repo(org, &row).await?;
        self.pages
            .mark_org_stale(org, false, OffsetDateTime::now_utc())
            .await?;
        Ok(())
    }

    /// Builds `org`'s organisation page if it is stale and may be built now: claim its item's
    /// lease, read every row once, publish, complete. Never fails a repository's page.
    pub(super) async fn build_org_if_time(
        &self,
        org: &str,
        deadline: Instant,
        invocation: &str,
    ) -> BuildOutcome {
        if Instant::now() + self.deadline_margin >= deadline {
            return BuildOutcome::TooSoon;
        }
        match self.build_org(org, deadline, invocation).await {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::warn!(org, error = %e, "the organisation page's build failed before it could be recorded");
                BuildOutcome::Failed(e.to_string())
            }
        }
    }

    async fn build_org(
        &self,
        org: &str,
        deadline: Instant,
        invocation: &str,
    ) -> Result<BuildOutcome, StoreError> {
        let partition = org_partition(org);
        let owner = format!("{invocation}/{partition}");
        let sent = Instant::now();
        let now = OffsetDateTime::now_utc();
        let lease = ORG_LEASE
            .min(deadline.saturating_duration_since(sent))
            .max(MIN_LEASE);
        let claim = self
            .pages
            .claim_build(
                &partition,
                INDEX_MODULE,
                &owner,
                now,
                now + lease,
                now - self.interval,
            )
            .await?;
        let item = match claim {
            BuildClaim::Claimed(item) => item,
            BuildClaim::NotStale => return Ok(BuildOutcome::NotStale),
            BuildClaim::Held => return Ok(BuildOutcome::Held),
            BuildClaim::TooSoon => return Ok(BuildOutcome::TooSoon),
        };
        let repos = self.pages.org_repos(org).await?;
        let set = OrgSet {
            org,
            repos: &repos,
            owner: &owner,
            deadline: org_deadline(sent, lease),
        };
        match self.publisher.publish_org(&set).await {
            Ok(published) => {
                let completion = self
                    .pages
                    .complete_build(
                        &partition,
                        INDEX_MODULE,
                        &owner,
                        item.version,
                        &BuildResult::default(),
                        OffsetDateTime::now_utc(),
                    )
                    .await?;
                tracing::info!(org, repositories = repos.len(), outcome = ?completion, requests = published.requests, "organisation page built");
                Ok(match completion {
                    Some(completion) => BuildOutcome::Built {
                        completion,
                        published,
                    },
                    None => {
                        // Another build took it over meanwhile: what this one sent may be
                        // older than the other's. Sent again whole.
                        self.pages
                            .mark_org_stale(org, true, OffsetDateTime::now_utc())
                            .await?;
                        BuildOutcome::LeaseLost
                    }
                })
            }
            // The publisher marked it to be published again.
            Err(PublishError::LeaseLost) => Ok(BuildOutcome::LeaseLost),
            Err(PublishError::Busy(why)) => {
                self.pages
                    .release_build(&partition, INDEX_MODULE, &owner)
                    .await?;
                Ok(BuildOutcome::Busy(why))
            }
            Err(error) => {
                let now = OffsetDateTime::now_utc();
                match org_retry(&error, self.interval, item.failed_builds + 1) {
                    OrgRetry::Wait(wait) => {
                        tracing::info!(
                            org,
                            error = %error,
                            retry_in_s = wait.as_secs(),
                            "the organisation page waits; it is built again later"
                        );
                        self.pages.hold_org(org, &owner, now + wait).await?;
                        Ok(BuildOutcome::Busy(error.to_string()))
                    }
                    OrgRetry::Failed(wait) => {
                        tracing::warn!(
                            org,
                            error = %error,
                            advice = error.advice().unwrap_or(""),
                            retry_in_s = wait.as_secs(),
                            "the organisation page's build failed; the repositories' pages are not held up by it"
                        );
                        self.pages
                            .record_org_failure(
                                org,
                                &owner,
                                &error.to_string(),
                                error.advice(),
                                now,
                                now + wait,
                            )
                            .await?;
                        Ok(BuildOutcome::Failed(error.to_string()))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_organisation_page_waits_longer_each_time_up_to_an_hour() {
        let minute = Duration::from_secs(60);
        assert_eq!(org_backoff(Duration::ZERO, 1), minute);
        assert_eq!(org_backoff(Duration::ZERO, 2), 2 * minute);
        assert_eq!(org_backoff(Duration::from_secs(300), 1), 5 * minute);
        assert_eq!(org_backoff(Duration::from_secs(300), 3), 20 * minute);
        assert_eq!(org_backoff(minute, 40), 60 * minute);
    }

    #[test]
    fn an_organisation_build_sends_nothing_in_the_last_seconds_of_its_lease() {
        let sent = Instant::now();
        assert_eq!(
            org_deadline(sent, ORG_LEASE),
            sent + ORG_LEASE - ORG_LEASE_MARGIN
        );
        assert_eq!(org_deadline(sent, Duration::from_secs(3)), sent);
    }

    #[test]
    fn only_a_refusal_or_a_lasting_failure_counts_as_a_failure() {
        let minute = Duration::from_secs(60);
        let notion = |e| PublishError::Notion(e);
        let limited = notion(NotionError::RateLimited {
            what: "w".into(),
            status: 429,
            retry_after: Some(Duration::from_secs(90)),
        });
        assert_eq!(
            org_retry(&limited, minute, 3),
            OrgRetry::Wait(90 * Duration::from_secs(1))
        );
        let server = notion(NotionError::Server {
            what: "w".into(),
            status: 503,
            message: "m".into(),
        });
        assert_eq!(org_retry(&server, minute, 3), OrgRetry::Wait(minute));
        let out = notion(NotionError::OutOfTime { what: "w".into() });
        assert_eq!(org_retry(&out, minute, 1), OrgRetry::Wait(minute));
        let refused = notion(NotionError::Invalid {
            what: "w".into(),
            status: 400,
            code: "validation_error".into(),
            message: "m".into(),
        });
        assert_eq!(org_retry(&refused, minute, 5), OrgRetry::Failed(minute));
        let still = PublishError::StillRefused {
            at: "t".into(),
            error: "e".into(),
        };
        assert_eq!(org_retry(&still, minute, 5), OrgRetry::Wait(minute));
        let access = notion(NotionError::Access {
            status: 401,
            code: "unauthorized".into(),
            what: "w".into(),
            message: "m".into(),
            advice: "a".into(),
        });
        assert_eq!(org_retry(&access, minute, 3), OrgRetry::Failed(4 * minute));
    }
}
