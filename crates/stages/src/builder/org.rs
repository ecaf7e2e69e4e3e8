//! The organisation index: each repository's bounded row, and the owner's page published from
//! every row, again while the rows changed under it.

use super::*;

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
    ) -> Result<Published, BuildError> {
        const ROUNDS: usize = 3;
        let Some((owner, _)) = repo.split_once('/') else {
            return Err(BuildError::Repo(repo.to_string()));
        };
        if !self.publisher.publishes_org() {
            return Ok(Published::default());
        }
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
            })
            .collect();
        let row = crate::pages::org::org_row(repo, modules);
        self.pages.put_org_repo(owner, &row).await?;
        let mut repos = self.pages.org_repos(owner).await?;
        let mut published = Published::default();
        for _ in 0..ROUNDS {
            let markdown = crate::pages::org::org_page(owner, &repos);
            let p = self.publisher.publish_org(owner, &markdown).await?;
            published.documents += p.documents;
            published.bytes += p.bytes;
            published.requests += p.requests;
            let again = self.pages.org_repos(owner).await?;
            if again == repos {
                break;
            }
            repos = again;
        }
        Ok(published)
    }
}
