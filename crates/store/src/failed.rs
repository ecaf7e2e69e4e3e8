//! What an operator asks of the PR table: counts per pending shard, the oldest pending row,
//! and the given-up rows, always through the sparse indexes (`Select=COUNT` for counts), never
//! a Scan: the cost is the backlog or the failures, not the history.

use aws_sdk_dynamodb::types::{AttributeValue, Select};
use serde::Serialize;
use time::OffsetDateTime;

use super::{
    attr, pending_shard, Item, PrStore, StoreError, Update, FAILED_INDEX, FAILED_MARK,
    PENDING_INDEX,
};
use chronicle_domain::{rfc3339_millis, RepoName};

/// What asking to reprocess a row did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Reprocessed {
    /// Pending again: the next sweep sends it to be summarized (its entries rewritten in
    /// place, its pages rebuilt).
    Pending,
    /// A worker holds its lease right now: left alone (ask again once it is done).
    Busy,
    /// No such row.
    Missing,
}

/// A given-up row, as the failed index holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedRow {
    pub repo: String,
    pub number: u64,
    pub failed_at: String,
    pub failed_reason: Option<String>,
    pub attempts: u64,
    pub last_error: Option<String>,
}

impl PrStore {
    /// Rows in one partition of the pending index (`"0"`..`"N-1"`, or `deferred`), counted by
    /// DynamoDB (`Select=COUNT`), page by page.
    pub async fn count_pending(&self, shard: &str) -> Result<u64, StoreError> {
        self.count(PENDING_INDEX, attr::PENDING_SHARD, shard).await
    }

    /// Rows given up (the failed index).
    pub async fn count_failed(&self) -> Result<u64, StoreError> {
        self.count(FAILED_INDEX, attr::FAILED_SHARD, FAILED_MARK)
            .await
    }

    async fn count(&self, index: &str, key: &str, value: &str) -> Result<u64, StoreError> {
        let mut total = 0u64;
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(self.table_name())
                .index_name(index)
                .key_condition_expression("#k = :v")
                .expression_attribute_names("#k", key)
                .expression_attribute_values(":v", AttributeValue::S(value.to_string()))
                .select(Select::Count)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.dynamo_error("Query", &e))?;
            total += out.count().max(0) as u64;
            match out.last_evaluated_key {
                Some(next) => start = Some(next),
                None => return Ok(total),
            }
        }
    }

    /// Puts a row back to be summarized again: `summarizedAt`, `failedAt` (and its index
    /// marker), `failedReason`, `attempts` and any sweep claim removed (with `new_summary`, the
    /// summary and `summaryWithheld` too), the pending marker set,
    /// only if the row exists and no worker holds its lease. Its entries are rewritten by the
    /// summarize worker under a new generation (one per module, never appended), which marks
    /// its pages stale.
    pub async fn reprocess(
        &self,
        repo: &RepoName,
        number: u64,
        new_summary: bool,
        now: OffsetDateTime,
    ) -> Result<Reprocessed, StoreError> {
        let mut update = Update::default();
        for gone in [
            attr::SUMMARIZED_AT,
            attr::FAILED_AT,
            attr::FAILED_SHARD,
            attr::FAILED_REASON,
            attr::ATTEMPTS,
            attr::LAST_ERROR,
        ] {
            update.remove(gone);
        }
        if new_summary {
            // The summary paragraph is written again (an LLM asked anew), even one the model
            // withheld: the operator asks on purpose (a guardrail may have changed where
            // Chronicle cannot see it).
            update.remove(attr::SUMMARY);
            update.remove(attr::SUMMARY_WITHHELD);
        }
        // A row already pending keeps its partition: one parked for GitHub's rate limit
        // (`deferred`) is not summarized before it is enriched.
        let shard = update.name(attr::PENDING_SHARD);
        let value = update.value(
            "shard",
            Some(AttributeValue::S(pending_shard(
                number,
                self.table.pending_shards,
            ))),
        );
        update
            .sets
            .push(format!("{shard} = if_not_exists({shard}, {value})"));
        let condition = format!(
            "attribute_exists({repo}) AND (attribute_not_exists({lease}) OR {lease} < {now})",
            repo = update.name(attr::REPO),
            lease = update.name(attr::LEASE_UNTIL),
            now = update.value("now", Some(AttributeValue::S(rfc3339_millis(now)))),
        );
        if self.update_if(repo, number, update, condition).await? {
            return Ok(Reprocessed::Pending);
        }
        // Refused: absent, or leased (read to tell which).
        Ok(match self.get(repo, number).await? {
            None => Reprocessed::Missing,
            Some(_) => Reprocessed::Busy,
        })
    }

    /// Gives the failed index's marker to rows given up before the index existed (`failedAt`
    /// without `failedShard`): a one-time Scan, the only one Chronicle makes, run by
    /// `chronicle failed --index-old` after an upgrade. Returns how many rows were marked.
    pub async fn index_old_failed(&self) -> Result<u64, StoreError> {
        let mut marked = 0u64;
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(self.table_name())
                .filter_expression("attribute_exists(#failed) AND attribute_not_exists(#mark)")
                .expression_attribute_names("#failed", attr::FAILED_AT)
                .expression_attribute_names("#mark", attr::FAILED_SHARD)
                .projection_expression("#repo, #number")
                .expression_attribute_names("#repo", attr::REPO)
                .expression_attribute_names("#number", attr::PR_NUMBER)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.dynamo_error("Scan", &e))?;
            for item in out.items() {
                let repo = item
                    .get(attr::REPO)
                    .and_then(|v| v.as_s().ok())
                    .and_then(|r| RepoName::parse(r).ok());
                let number = item
                    .get(attr::PR_NUMBER)
                    .and_then(|v| v.as_n().ok())
                    .and_then(|n| n.parse::<u64>().ok());
                let (Some(repo), Some(number)) = (repo, number) else {
                    continue;
                };
                let mut update = Update::default();
                update.set(
                    attr::FAILED_SHARD,
                    AttributeValue::S(FAILED_MARK.to_string()),
                );
                let condition = format!("attribute_exists({})", update.name(attr::FAILED_AT));
                if self.update_if(&repo, number, update, condition).await? {
                    marked += 1;
                }
            }
            match out.last_evaluated_key {
                Some(next) => start = Some(next),
                None => return Ok(marked),
            }
        }
    }

    /// The given-up rows, newest first, of one repository or all (the failed index; the
    /// repository is a filter on that index, whose rows are few).
    pub async fn failed_rows(&self, repo: Option<&str>) -> Result<Vec<FailedRow>, StoreError> {
        let mut rows = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(self.table_name())
                .index_name(FAILED_INDEX)
                .key_condition_expression("#k = :v")
                .expression_attribute_names("#k", attr::FAILED_SHARD)
                .expression_attribute_values(":v", AttributeValue::S(FAILED_MARK.to_string()))
                .scan_index_forward(false)
                .set_exclusive_start_key(start);
            if let Some(repo) = repo {
                query = query
                    .filter_expression("#repo = :repo")
                    .expression_attribute_names("#repo", attr::REPO)
                    .expression_attribute_values(":repo", AttributeValue::S(repo.to_string()));
            }
            let out = query
                .send()
                .await
                .map_err(|e| self.dynamo_error("Query", &e))?;
            for item in out.items() {
                let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
                let number = |name: &str| {
                    item.get(name)
                        .and_then(|v| v.as_n().ok())
                        .and_then(|n| n.parse::<u64>().ok())
                };
                rows.push(FailedRow {
                    repo: text(attr::REPO).unwrap_or_default(),
                    number: number(attr::PR_NUMBER).unwrap_or_default(),
                    failed_at: text(attr::FAILED_AT).unwrap_or_default(),
                    failed_reason: text(attr::FAILED_REASON),
                    attempts: number(attr::ATTEMPTS).unwrap_or_default(),
                    last_error: text(attr::LAST_ERROR),
                });
            }
            match out.last_evaluated_key {
                Some(next) => start = Some(next),
                None => return Ok(rows),
            }
        }
    }
}
