//! The organisation index: each repository's bounded row, and the owner's page published from
//! every row under a lease, again while the rows changed under it.

use super::*;
use crate::pages::MAIN_LABEL;

/// How long a build waits for another build's publish of the same organisation page before it
/// gives up (its repository's index is built again at a later tick; the holder reads its row
/// anyway if it publishes again).
const ORG_WAIT: Duration = Duration::from_secs(10);
/// How long one round's lease lasts (renewed before each round, and no round's publish runs
/// past it): a build that dies holding it holds up the others this long at most.
const ORG_LEASE: Duration = Duration::from_secs(120);

impl PageBuilder {
    /// Records `repo`'s row on its owner's index from its index rows (bounded: see
    /// `org_row`), and publishes the owner's index anew from every repository's row.
    ///
    /// Builds of two repositories of one owner can overlap. Their publishes of the page take
    /// turns (a lease on the owner's page item: two at once could leave the older rows' content
    /// last, with the newer content's hash recorded, and Notion would never be sent it), and
    /// each reads the rows again after it published, and publishes again while they changed:
    /// the last publish was then made from rows read after every write before it.
    pub(super) async fn publish_org(
        &self,
        repo: &str,
        rows: &[IndexRow],
        items: &[PageItem],
        owner: &str,
        deadline: Instant,
    ) -> Result<Published, BuildError> {
        let Some((org, _)) = repo.split_once('/') else {
            return Err(BuildError::Repo(repo.to_string()));
        };
        if !self.publisher.publishes_org() {
            return Ok(Published::default());
        }
        // Where the pages are in Notion, for a publisher that links them there.
        let notion_url = |module: &str| {
            let item = items.iter().find(|i| i.module == module)?;
            let page = item.notion.get(MAIN_LABEL)?;
            page.id.as_ref()?;
            page.url.clone()
        };
        let notion_index = self.pages.get(repo, INDEX_MODULE).await?.and_then(|index| {
            let page = index.notion.get(MAIN_LABEL)?;
            Some(chronicle_domain::NotionLink {
                id: page.id.clone()?,
                url: page.url.clone()?,
            })
        });
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
        let Some(lease) = self.take_org_lease(org, owner, deadline, ORG_WAIT).await? else {
            return Err(BuildError::Publish(PublishError::Busy(format!(
                "another build is publishing the organisation index of {org}"
            ))));
        };
        let published = self.publish_org_rounds(org, owner, lease, deadline).await;
        if let Err(e) = self.pages.release_org_publish(org, owner).await {
            tracing::warn!(org, error = %e, "could not give the organisation page's lease back; it expires within two minutes");
        }
        published
    }

    /// Takes (or renews) the organisation page's publish lease for [`ORG_LEASE`] or until the
    /// build's deadline, waiting at most `wait` for another holder. `Some`: the instant this
    /// build's work under it must end (taken before the claim was sent, less a margin for the
    /// writes that follow a publish); `None`: another holds it.
    async fn take_org_lease(
        &self,
        org: &str,
        owner: &str,
        deadline: Instant,
        wait: Duration,
    ) -> Result<Option<Instant>, BuildError> {
        const MARGIN: Duration = Duration::from_secs(5);
        let give_up = Instant::now() + wait.min(deadline.saturating_duration_since(Instant::now()));
        loop {
            let sent = Instant::now();
            let now = OffsetDateTime::now_utc();
            let lease = ORG_LEASE.min(deadline.saturating_duration_since(sent));
            if self
                .pages
                .claim_org_publish(org, owner, now, now + lease)
                .await?
            {
                return Ok(Some(sent + lease.saturating_sub(MARGIN)));
            }
            if Instant::now() >= give_up {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Publishes the organisation page from the rows, again while they changed under it, each
    /// round within the lease (`lease`: when the first one's ends).
    async fn publish_org_rounds(
        &self,
        org: &str,
        owner: &str,
        mut lease: Instant,
        deadline: Instant,
    ) -> Result<Published, BuildError> {
        const ROUNDS: usize = 3;
        let mut repos = self.pages.org_repos(org).await?;
        let mut published = Published::default();
        for round in 0..ROUNDS {
            // The lease is renewed before each round, and no publish outlives it. Lost (it
            // expired and another build took it): that build reads the rows, this one's too.
            if round > 0 {
                match self
                    .take_org_lease(org, owner, deadline, Duration::ZERO)
                    .await?
                {
                    Some(renewed) => lease = renewed,
                    None => break,
                }
            }
            let set = OrgSet {
                org,
                repos: &repos,
                owner,
                deadline: lease,
            };
            let p = self.publisher.publish_org(&set).await?;
            published.documents += p.documents;
            published.bytes += p.bytes;
            published.requests += p.requests;
            let again = self.pages.org_repos(org).await?;
            if again == repos {
                break;
            }
            repos = again;
        }
        Ok(published)
    }
}
