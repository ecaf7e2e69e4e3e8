//! The summarize worker's side of the PR table: a lease-guarded claim that counts the attempt,
//! the intent written before any entry, the commit that ends the row's pending state, and the
//! give-up (and revival) of a row that keeps failing.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use serde::Deserialize;
use time::OffsetDateTime;

use super::{attr, key, pending_shard, string, Item, PrStore, Refusal, StoreError, Update};
use chronicle_domain::{rfc3339_millis, FileChange, IssueRef, ModuleName, RepoName};

/// A PR row as the summarize stage reads it, parsed once from the item.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrRow {
    pub repo: String,
    pub pr_number: u64,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    pub author: String,
    #[serde(default)]
    pub labels: Vec<String>,
    pub url: String,
    pub merged_at: String,
    /// The changed files enrichment kept (most changed first), if it ran.
    #[serde(default)]
    pub files: Vec<FileChange>,
    #[serde(default)]
    pub changed_files: u64,
    #[serde(default)]
    pub linked_issues: Vec<IssueRef>,
    /// Who approved it or asked for changes (enrichment, from GitHub's reviews).
    #[serde(default)]
    pub reviewers: Vec<String>,
    /// Its comments and reviews, counted.
    #[serde(default)]
    pub discussion: u64,
    #[serde(default)]
    pub additions: u64,
    #[serde(default)]
    pub deletions: u64,
    /// The summary paragraph, once written (kept so it is generated once).
    #[serde(default)]
    pub summary: Option<String>,
    /// The hash of the summary input the model withheld ([`attr::SUMMARY_WITHHELD`]).
    #[serde(default)]
    pub summary_withheld: Option<String>,
    /// Summarize attempts so far, this one included (counted when the claim is taken).
    #[serde(default)]
    pub attempts: u32,
    /// This claim's generation (every claim bumps it; entries carry it).
    #[serde(default)]
    pub generation: u64,
    /// Modules this PR may have entries in.
    #[serde(default)]
    pub entry_modules: BTreeSet<String>,
    #[serde(default)]
    pub last_error: Option<String>,
    /// When enrichment wrote the files this summary is made from (absent: none yet).
    #[serde(default)]
    pub enriched_at: Option<String>,
    /// The hash of the fields this row's entries show ([`attr::ENTRY_HASH`]).
    #[serde(default)]
    pub entry_hash: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("the PR row {repo}#{number} cannot be summarized: {message}")]
pub struct RowError {
    pub repo: String,
    pub number: u64,
    pub message: String,
}

impl PrRow {
    /// Its linked issues of its own owner, by their URL (`https://HOST/OWNER/REPO/issues/N`):
    /// a row enriched before linked issues were scoped could name another owner's issue, which
    /// is never published or given to a model.
    pub fn own_issues(&self) -> impl Iterator<Item = &IssueRef> {
        let owner = self.repo.split('/').next().unwrap_or_default();
        self.linked_issues
            .iter()
            .filter(move |i| chronicle_domain::issue_of_owner(&i.url, owner))
    }

    pub fn from_item(item: &Item) -> Result<Self, RowError> {
        let row: PrRow = serde_dynamo::from_item(item.clone()).map_err(|e| RowError {
            repo: string(item, attr::REPO).unwrap_or("?").to_string(),
            number: item
                .get(attr::PR_NUMBER)
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            message: e.to_string(),
        })?;
        if chronicle_domain::parse_rfc3339(&row.merged_at).is_none() {
            return Err(RowError {
                repo: row.repo.clone(),
                number: row.pr_number,
                message: format!("mergedAt {:?} is not an RFC 3339 time", row.merged_at),
            });
        }
        Ok(row)
    }
}

/// How a commit ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Commit {
    Done,
    /// Another worker holds the row now: nothing written.
    LeaseLost,
    /// Still this worker's, but what the entries were made from changed meanwhile (enrichment
    /// landed, or the PR was edited): nothing written; the row as it is now, to write again.
    InputsChanged(Item),
}

/// The summarize worker's claim on a row.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryClaim {
    /// This worker holds the lease; the row as it is now (its attempt already counted).
    Claimed(Item),
    /// `summarizedAt` or `failedAt` is set: nothing left to do.
    Done,
    /// Another worker's lease is live. Not an attempt: nothing was written.
    Held { until: Option<String> },
    /// The row does not exist.
    Missing,
}

impl PrStore {
    /// Takes the summary lease, only if the row is neither summarized nor failed and no live
    /// lease exists, and counts the attempt in the same write: a worker that then crashes,
    /// times out or panics has still used it up.
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
        update.add(attr::ATTEMPTS, AttributeValue::N("1".into()));
        update.add(attr::GENERATION, AttributeValue::N("1".into()));
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
        self.meter.write();
        match update.apply(request).send().await {
            Ok(out) => {
                // The claim returns the row: the one item a summary reads.
                self.meter.read(1);
                Ok(SummaryClaim::Claimed(out.attributes.unwrap_or_default()))
            }
            Err(e) => match self.refused_item(&e, repo, number).await? {
                Refusal::Refused(None) => Ok(SummaryClaim::Missing),
                Refusal::Refused(Some(item))
                    if item.contains_key(attr::SUMMARIZED_AT)
                        || item.contains_key(attr::FAILED_AT) =>
                {
                    Ok(SummaryClaim::Done)
                }
                // Our own lease: the claim was applied but its answer lost, and the SDK retried.
                Refusal::Refused(Some(item)) if string(&item, attr::LEASE_OWNER) == Some(owner) => {
                    Ok(SummaryClaim::Claimed(item))
                }
                Refusal::Refused(Some(item)) => Ok(SummaryClaim::Held {
                    until: string(&item, attr::LEASE_UNTIL).map(str::to_string),
                }),
                Refusal::Failed(e) => Err(e),
            },
        }
    }

    /// Before any entry is written: keeps the summary paragraph (so a retry reuses it and an
    /// LLM is never asked twice), and the hash of its input when the model withheld it (so
    /// that input is never asked again), and adds the modules about to get entries to
    /// `entryModules`, so a retry that tags the PR differently knows which entries to delete.
    /// `false`: the lease was lost, nothing written.
    pub async fn prepare_entries(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        summary: Option<&str>,
        withheld: Option<&str>,
        modules: &[ModuleName],
    ) -> Result<bool, StoreError> {
        let mut update = Update::default();
        if let Some(summary) = summary {
            update.set(attr::SUMMARY, AttributeValue::S(summary.to_string()));
        }
        if let Some(hash) = withheld {
            update.set(attr::SUMMARY_WITHHELD, AttributeValue::S(hash.to_string()));
        }
        if !modules.is_empty() {
            update.add(
                attr::ENTRY_MODULES,
                AttributeValue::Ss(modules.iter().map(|m| m.to_string()).collect()),
            );
        }
        if update.sets.is_empty() && update.adds.is_empty() {
            return Ok(true);
        }
        let condition = lease_condition(&mut update, owner);
        self.update_if(repo, number, update, condition).await
    }

    /// Ends the row's pending state after its entries are written: sets `summarizedAt`,
    /// `modules`, `entryModules` (exactly the modules written), and REMOVEs the pending marker,
    /// the lease, the sweep's claim and the last error, only while `owner` still holds the
    /// lease and the row's inputs are still those of `row` (its enrichment and its own fields):
    /// an enrichment or an edit that landed while the entries were written would otherwise
    /// never reach them.
    pub async fn commit_summary(
        &self,
        row: &PrRow,
        owner: &str,
        modules: &[ModuleName],
        now: OffsetDateTime,
    ) -> Result<Commit, StoreError> {
        let repo = RepoName::parse(&row.repo).map_err(|e| StoreError::Dynamo {
            operation: "UpdateItem",
            table: self.table_name().to_string(),
            message: e.to_string(),
        })?;
        let number = row.pr_number;
        let mut update = Update::default();
        update.set(attr::SUMMARIZED_AT, AttributeValue::S(rfc3339_millis(now)));
        update.set(
            attr::MODULES,
            AttributeValue::L(
                modules
                    .iter()
                    .map(|m| AttributeValue::S(m.to_string()))
                    .collect(),
            ),
        );
        if modules.is_empty() {
            update.remove(attr::ENTRY_MODULES);
        } else {
            update.set(
                attr::ENTRY_MODULES,
                AttributeValue::Ss(modules.iter().map(|m| m.to_string()).collect()),
            );
        }
        for gone in [
            attr::PENDING_SHARD,
            attr::LEASE_OWNER,
            attr::LEASE_UNTIL,
            attr::ENQUEUED_UNTIL,
            attr::LAST_ERROR,
        ] {
            update.remove(gone);
        }
        let lease = lease_condition(&mut update, owner);
        let same = |update: &mut Update, name: &str, value: &Option<String>| match value {
            Some(v) => format!(
                "{} = {}",
                update.name(name),
                update.value(&format!("was{name}"), Some(AttributeValue::S(v.clone())))
            ),
            None => format!("attribute_not_exists({})", update.name(name)),
        };
        let enriched = same(&mut update, attr::ENRICHED_AT, &row.enriched_at);
        let fields = same(&mut update, attr::ENTRY_HASH, &row.entry_hash);
        let request = self
            .client
            .update_item()
            .table_name(self.table_name())
            .set_key(Some(key(&repo, number)))
            .condition_expression(format!("{lease} AND {enriched} AND {fields}"))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        self.meter.write();
        match update.apply(request).send().await {
            Ok(_) => Ok(Commit::Done),
            Err(e) => match self.refused_item(&e, &repo, number).await? {
                Refusal::Refused(Some(item)) if string(&item, attr::LEASE_OWNER) == Some(owner) => {
                    Ok(Commit::InputsChanged(item))
                }
                Refusal::Refused(_) => Ok(Commit::LeaseLost),
                Refusal::Failed(e) => Err(e),
            },
        }
    }

    /// Records a failed attempt (already counted by the claim) and releases the lease, so the
    /// message's next delivery can try again at once. `false`: the lease was lost.
    pub async fn record_summary_failure(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        error: &str,
    ) -> Result<bool, StoreError> {
        let mut update = Update::default();
        update.set(attr::LAST_ERROR, AttributeValue::S(error.to_string()));
        update.remove(attr::LEASE_OWNER);
        update.remove(attr::LEASE_UNTIL);
        let condition = lease_condition(&mut update, owner);
        self.update_if(repo, number, update, condition).await
    }

    /// Gives the row up for good under `owner`'s lease: `failedAt` (= `at`), `failedReason`,
    /// the pending marker and the claims removed. The caller has already sent its message to
    /// the DLQ, so the alarm never misses a given-up row. `false`: the lease was lost.
    pub async fn give_up_summary(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        reason: &str,
        at: &str,
    ) -> Result<bool, StoreError> {
        let mut update = Update::default();
        update.set(attr::FAILED_AT, AttributeValue::S(at.to_string()));
        update.set(
            attr::FAILED_SHARD,
            AttributeValue::S(super::FAILED_MARK.to_string()),
        );
        update.set(attr::FAILED_REASON, AttributeValue::S(reason.to_string()));
        for gone in [
            attr::PENDING_SHARD,
            attr::ENQUEUED_UNTIL,
            attr::LEASE_OWNER,
            attr::LEASE_UNTIL,
        ] {
            update.remove(gone);
        }
        let condition = lease_condition(&mut update, owner);
        self.update_if(repo, number, update, condition).await
    }

    /// A given-up row comes back to life when the message it was given up with is redriven:
    /// only if it is still failed at `failed_at` (that give-up, not a later one), `failedAt`,
    /// `failedReason` and `attempts` are cleared and the pending marker is back. `false`: it
    /// was not failed at that time (already revived, reprocessed, or failed again since).
    pub async fn revive_failed(
        &self,
        repo: &RepoName,
        number: u64,
        failed_at: &str,
    ) -> Result<bool, StoreError> {
        let mut update = Update::default();
        for gone in [
            attr::FAILED_AT,
            attr::FAILED_SHARD,
            attr::FAILED_REASON,
            attr::ATTEMPTS,
        ] {
            update.remove(gone);
        }
        update.set(
            attr::PENDING_SHARD,
            AttributeValue::S(pending_shard(number, self.table.pending_shards)),
        );
        let condition = format!(
            "attribute_not_exists({summarized}) AND {failed} = {at}",
            summarized = update.name(attr::SUMMARIZED_AT),
            failed = update.name(attr::FAILED_AT),
            at = update.value("at", Some(AttributeValue::S(failed_at.to_string()))),
        );
        self.update_if(repo, number, update, condition).await
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
