//! The organisation index: each repository's bounded row, and the owner's page published from
//! every row, again while the rows changed under it.

use super::*;
use crate::pages::MAIN_LABEL;

impl PageBuilder {
    /// Records `repo`'s row on its owner's index from its index rows (bounded: see
    /// `org_row`), and publishes the owner's index anew from every repository's row.
    ///
    /// Builds of two repositories of one owner can overlap, and the one that read the rows
    /// first can publish last. So each build reads the rows again after it published, and
    /// publishes again while they changed: the last publish to land was then made from rows
    /// read after every write before it.
    pub(super) async fn publish_org(
        &self,
        repo: &str,
        rows: &[IndexRow],
        items: &[PageItem],
        owner: &str,
        deadline: Instant,
    ) -> Result<Published, BuildError> {
        const ROUNDS: usize = 3;
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
        let mut repos = self.pages.org_repos(org).await?;
        let mut published = Published::default();
        for _ in 0..ROUNDS {
            let set = OrgSet {
                org,
                repos: &repos,
                owner,
                deadline,
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
