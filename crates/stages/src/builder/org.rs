//! The organisation index: each repository's bounded row, recorded by its index build, and the
//! owner's page, built from every row once per tick, after the indexes.
//!
//! - **Once per tick.** An index build records its row and marks the owner's page item
//!   (`#org/<owner>` / `#index`) stale; the tick then builds each stale organisation page once,
//!   however many of its repositories were built (a mass rebuild of N repositories reads the N
//!   rows and replaces the page once, not N times).
//! - **Best-effort.** Its failure is its own: recorded on its item (`chronicle status` shows
//!   it), never on a repository's index, which completes. A failed page is held back for a
//!   growing delay ([`org_backoff`]), so a page Notion keeps refusing does not spend the
//!   integration's requests at every tick.
//! - **Under the build lease** of its item, like every page: rows recorded during its build
//!   mark it stale again (its version), and it is built again at the next tick.

use super::*;
use crate::pages::MAIN_LABEL;
use crate::store::org_partition;

/// How long an organisation page's build lease lasts at most.
const ORG_LEASE: Duration = Duration::from_secs(120);
/// Kept back from the lease for the writes that follow the publish.
const ORG_LEASE_MARGIN: Duration = Duration::from_secs(5);
/// The longest a failed organisation page waits before it is tried again.
const ORG_BACKOFF_MAX: Duration = Duration::from_secs(3600);

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
        let notion_index = match known {
            Some(known) => Some(known),
            None => self
                .pages
                .get(repo, INDEX_MODULE)
                .await?
                .as_ref()
                .and_then(link),
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
            deadline: sent + lease.saturating_sub(ORG_LEASE_MARGIN),
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
                let wait = org_backoff(self.interval, item.failed_builds + 1);
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
}
