//! The organisation index's rows: one item per repository under the partition `#org/<owner>`,
//! written by the repository's index build and read whole by the organisation's (bounded by the
//! repositories, never by their PRs). The owner's own page item, `#org/<owner>` / `#index`,
//! records where its index is published in Notion (it holds no row, so the rows skip it).

use super::*;

/// The attribute holding a repository's row.
const ORG: &str = "org";

/// The partition of an owner's organisation rows.
pub fn org_partition(owner: &str) -> String {
    format!("#org/{owner}")
}

impl PageStore {
    /// Records (replaces) one repository's row on its owner's index: one `UpdateItem` setting
    /// the row as one map attribute, as every other page item write is. Not while the name is
    /// forgotten (renamed, transferred or deleted: see `lifecycle.rs`): a late build of the
    /// old name does not list it again.
    pub async fn put_org_repo(
        &self,
        owner: &str,
        row: &chronicle_domain::OrgRepo,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(&org_partition(owner), &row.repo)))
            .update_expression("SET #org = :org")
            .condition_expression("attribute_not_exists(#gone)")
            .expression_attribute_names("#org", ORG)
            .expression_attribute_names("#gone", super::lifecycle::GONE_WHY)
            .expression_attribute_values(
                ":org",
                serde_dynamo::to_attribute_value(row).map_err(|e| self.bad(e))?,
            )
            .send()
            .await;
        if !applied(&self.table, "UpdateItem", result)? {
            tracing::debug!(owner, repo = %row.repo, "the repository's name is forgotten; its row is not listed");
        }
        Ok(())
    }

    /// The page item of `owner`'s organisation page (where it is in Notion), created with an
    /// empty Notion map if there is none, so a creation can be claimed on it. Its stale marker
    /// and build lease are left as they are (see `org_page.rs`).
    pub async fn org_page_item(&self, owner: &str) -> Result<PageItem, StoreError> {
        let out = self
            .update(&org_partition(owner), INDEX_MODULE)
            .update_expression("SET #notion = if_not_exists(#notion, :empty)")
            .expression_attribute_names("#notion", a::NOTION)
            .expression_attribute_values(":empty", AttributeValue::M(Default::default()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "UpdateItem", &e))?;
        self.meter.write();
        self.parse(out.attributes.unwrap_or_default())
    }

    /// Records that the index pages an earlier version left under the configured parent were
    /// looked for, for `owner`'s organisation page.
    pub async fn record_org_woken(
        &self,
        owner: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut u = Update::default();
        u.set(a::WOKEN_AT, AttributeValue::S(rfc3339_millis(now)));
        u.apply(self.update(&org_partition(owner), INDEX_MODULE))
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "UpdateItem", &e))?;
        self.meter.write();
        Ok(())
    }

    /// Every repository row of `owner`'s index; not those of forgotten names (renamed,
    /// transferred, deleted: `lifecycle.rs`), whose rows stay on their items.
    pub async fn org_repos(
        &self,
        owner: &str,
    ) -> Result<Vec<chronicle_domain::OrgRepo>, StoreError> {
        self.org_rows(owner, false).await
    }

    /// The rows of `owner`'s forgotten names, as their last build wrote them (where their
    /// index pages are, which stay under the organisation page as history).
    pub async fn forgotten_org_repos(
        &self,
        owner: &str,
    ) -> Result<Vec<chronicle_domain::OrgRepo>, StoreError> {
        self.org_rows(owner, true).await
    }

    async fn org_rows(
        &self,
        owner: &str,
        forgotten: bool,
    ) -> Result<Vec<chronicle_domain::OrgRepo>, StoreError> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#repo = :repo")
                .expression_attribute_names("#repo", a::REPO)
                .expression_attribute_values(":repo", AttributeValue::S(org_partition(owner)))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| dynamo_error(&self.table, "Query", &e))?;
            self.meter.read(out.items().len());
            for item in out.items.unwrap_or_default() {
                if item.contains_key(super::lifecycle::GONE_WHY) != forgotten {
                    continue;
                }
                if let Some(row) = item.get(ORG) {
                    rows.push(
                        serde_dynamo::from_attribute_value(row.clone()).map_err(|e| self.bad(e))?,
                    );
                }
            }
            match out.last_evaluated_key {
                Some(next) => start = Some(next),
                None => return Ok(rows),
            }
        }
    }
}
