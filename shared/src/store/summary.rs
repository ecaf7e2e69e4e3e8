//! The summarize worker's side of the PR table: a lease-guarded claim, the commit that ends the
//! row's pending state, failures counted on the row, and the summarized rows a page is made of.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use time::OffsetDateTime;

use super::{attr, key, string, Item, PrStore, Refusal, StoreError, Update};
use crate::domain::{rfc3339_millis, RepoName};

/// The summarize worker's claim on a row.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryClaim {
    /// This worker holds the lease; the row as it is now.
    Claimed(Item),
    /// `summarizedAt` or `failedAt` is set: nothing left to do.
    Done,
    /// Another worker's lease is live.
    Held { until: Option<String> },
    /// The row does not exist.
    Missing,
}

/// What recording a failure did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryFailure {
    /// Counted; the message should come back.
    Retry { attempts: u32 },
    /// `MAX_ATTEMPTS` reached: `failedAt`/`failedReason` set, pending marker removed.
    GaveUp { attempts: u32 },
}

impl PrStore {
    /// Takes the summary lease: only if the row is neither summarized nor failed and no live lease exists.
    pub async fn claim_summary(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<SummaryClaim, StoreError> {
        let mut update = Update::default();
        update.set(attr::LEASE_OWNER, AttributeValue::S(owner.to_string()));
        update.set(attr::LEASE_UNTIL, AttributeValue::S(rfc3339_millis(until)));
        let condition = format!(
            "attribute_exists({repo}) AND attribute_not_exists({summarized}) AND attribute_not_exists({failed}) \
             AND (attribute_not_exists({lease}) OR {lease} < {now})",
            repo = update.name(attr::REPO),
            summarized = update.name(attr::SUMMARIZED_AT),
            failed = update.name(attr::FAILED_AT),
            lease = update.name(attr::LEASE_UNTIL),
            now = update.value("now", Some(AttributeValue::S(rfc3339_millis(now)))),
        );
        let request = self
            .client
            .update_item()
            .table_name(self.table_name())
            .set_key(Some(key(repo, number)))
            .condition_expression(condition)
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        match update.apply(request).send().await {
            Ok(out) => Ok(SummaryClaim::Claimed(out.attributes.unwrap_or_default())),
            Err(e) => match self.refused_item(&e, repo, number).await? {
                Refusal::Refused(None) => Ok(SummaryClaim::Missing),
                Refusal::Refused(Some(item))
                    if item.contains_key(attr::SUMMARIZED_AT)
                        || item.contains_key(attr::FAILED_AT) =>
                {
                    Ok(SummaryClaim::Done)
                }
                Refusal::Refused(Some(item)) => Ok(SummaryClaim::Held {
                    until: string(&item, attr::LEASE_UNTIL).map(str::to_string),
                }),
                Refusal::Failed(e) => Err(e),
            },
        }
    }

    /// Ends the row's pending state: sets `summarizedAt`, `modules`, `summary`, and REMOVEs the
    /// pending marker, the lease and the sweep's claim, only while `owner` still holds the lease.
    /// `false`: the lease was lost, nothing written.
    pub async fn commit_summary(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        modules: &[String],
        summary: &str,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut update = Update::default();
        update.set(attr::SUMMARIZED_AT, AttributeValue::S(rfc3339_millis(now)));
        update.set(
            attr::MODULES,
            AttributeValue::L(
                modules
                    .iter()
                    .map(|m| AttributeValue::S(m.clone()))
                    .collect(),
            ),
        );
        update.set(attr::SUMMARY, AttributeValue::S(summary.to_string()));
        for gone in [
            attr::PENDING_SHARD,
            attr::LEASE_OWNER,
            attr::LEASE_UNTIL,
            attr::ENQUEUED_UNTIL,
            attr::LAST_ERROR,
        ] {
            update.remove(gone);
        }
        let condition = lease_condition(&mut update, owner);
        self.update_if(repo, number, update, condition).await
    }

    /// Keeps the PR's summary paragraph on the row while `owner` holds the lease, before anything
    /// is published, so a retry reuses it (an LLM is never asked twice). `false`: lease lost.
    pub async fn save_summary(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        summary: &str,
    ) -> Result<bool, StoreError> {
        let mut update = Update::default();
        update.set(attr::SUMMARY, AttributeValue::S(summary.to_string()));
        let condition = lease_condition(&mut update, owner);
        self.update_if(repo, number, update, condition).await
    }

    /// Counts a failed attempt and releases the lease; at `max_attempts` gives up on the row for
    /// good (`failedAt`, `failedReason`, pending marker removed). `None`: the lease was lost.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_summary_failure(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        attempts_before: u32,
        max_attempts: u32,
        error: &str,
        now: OffsetDateTime,
    ) -> Result<Option<SummaryFailure>, StoreError> {
        let attempts = attempts_before + 1;
        let mut update = Update::default();
        update.set(attr::ATTEMPTS, AttributeValue::N(attempts.to_string()));
        update.set(attr::LAST_ERROR, AttributeValue::S(error.to_string()));
        update.remove(attr::LEASE_OWNER);
        update.remove(attr::LEASE_UNTIL);
        let gave_up = attempts >= max_attempts;
        if gave_up {
            update.set(attr::FAILED_AT, AttributeValue::S(rfc3339_millis(now)));
            update.set(
                attr::FAILED_REASON,
                AttributeValue::S(format!(
                    "gave up after {attempts} attempt{}; last error: {error}",
                    if attempts == 1 { "" } else { "s" }
                )),
            );
            update.remove(attr::PENDING_SHARD);
            update.remove(attr::ENQUEUED_UNTIL);
        }
        let condition = lease_condition(&mut update, owner);
        let applied = self.update_if(repo, number, update, condition).await?;
        Ok(applied.then_some(if gave_up {
            SummaryFailure::GaveUp { attempts }
        } else {
            SummaryFailure::Retry { attempts }
        }))
    }

    /// Every summarized row of a repository (one partition, paginated), for regenerating its pages.
    pub async fn summarized_rows(&self, repo: &RepoName) -> Result<Vec<Item>, StoreError> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(self.table_name())
                .key_condition_expression("#repo = :repo")
                .filter_expression("attribute_exists(#summarizedAt)")
                // A commit that just happened must be seen (pages are rebuilt from these rows).
                .consistent_read(true)
                .expression_attribute_names("#repo", attr::REPO)
                .expression_attribute_names("#summarizedAt", attr::SUMMARIZED_AT)
                .expression_attribute_values(":repo", AttributeValue::S(repo.to_string()))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.dynamo_error("Query", &e))?;
            rows.extend(out.items.unwrap_or_default());
            match out.last_evaluated_key {
                Some(next) => start = Some(next),
                None => return Ok(rows),
            }
        }
    }
}

/// What the Notion publisher recorded on a PR row for one module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotionRecord {
    /// The entry's top-level blocks are on this page.
    Appended { page: String, blocks: Vec<String> },
    /// An append was started and may or may not have happened.
    Appending { page: String },
}

/// The row's record for `module`, if any.
pub fn notion_record(item: &Item, module: &str) -> Option<NotionRecord> {
    let record = item
        .get(attr::NOTION)?
        .as_m()
        .ok()?
        .get(module)?
        .as_m()
        .ok()?;
    let page = record.get("page")?.as_s().ok()?.clone();
    match record.get("blocks") {
        Some(AttributeValue::L(ids)) => Some(NotionRecord::Appended {
            page,
            blocks: ids.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
        }),
        _ => Some(NotionRecord::Appending { page }),
    }
}

impl PrStore {
    /// Records, under the lease, what was put on `module`'s Notion page for this PR.
    pub async fn save_notion_record(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        module: &str,
        record: &NotionRecord,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let value = match record {
            NotionRecord::Appended { page, blocks } => AttributeValue::M(
                [
                    ("page".to_string(), AttributeValue::S(page.clone())),
                    (
                        "blocks".to_string(),
                        AttributeValue::L(blocks.iter().cloned().map(AttributeValue::S).collect()),
                    ),
                ]
                .into(),
            ),
            NotionRecord::Appending { page } => AttributeValue::M(
                [
                    ("page".to_string(), AttributeValue::S(page.clone())),
                    (
                        "appendingSince".to_string(),
                        AttributeValue::S(rfc3339_millis(now)),
                    ),
                ]
                .into(),
            ),
        };
        // `notion.<module>` needs the map to exist: on a first record, create it, then retry.
        for _ in 0..2 {
            let nested = self
                .client
                .update_item()
                .table_name(self.table_name())
                .set_key(Some(key(repo, number)))
                .update_expression("SET #notion.#module = :record")
                .condition_expression("attribute_exists(#notion) AND #owner = :owner")
                .expression_attribute_names("#notion", attr::NOTION)
                .expression_attribute_names("#module", module)
                .expression_attribute_names("#owner", attr::LEASE_OWNER)
                .expression_attribute_values(":record", value.clone())
                .expression_attribute_values(":owner", AttributeValue::S(owner.to_string()))
                .send()
                .await;
            if self.applied("UpdateItem", nested)? {
                return Ok(true);
            }
            let create = self
                .client
                .update_item()
                .table_name(self.table_name())
                .set_key(Some(key(repo, number)))
                .update_expression("SET #notion = if_not_exists(#notion, :empty)")
                .condition_expression("#owner = :owner")
                .expression_attribute_names("#notion", attr::NOTION)
                .expression_attribute_names("#owner", attr::LEASE_OWNER)
                .expression_attribute_values(":empty", AttributeValue::M(Default::default()))
                .expression_attribute_values(":owner", AttributeValue::S(owner.to_string()))
                .send()
                .await;
            if !self.applied("UpdateItem", create)? {
                return Ok(false);
            }
        }
        Ok(false)
    }
}

/// `leaseOwner = :owner`, the guard of every write after a claim.
fn lease_condition(update: &mut Update, owner: &str) -> String {
    format!(
        "{} = {}",
        update.name(attr::LEASE_OWNER),
        update.value("owner", Some(AttributeValue::S(owner.to_string())))
    )
}
