//! The PR table in DynamoDB: one item per (repo, prNumber), written with conditional writes so
//! duplicates, races and stale events can never reset or roll back what is stored.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;

use chronicle_config::TableConfig;
use time::OffsetDateTime;

use chronicle_domain::{rfc3339_millis, rfc3339_seconds, Delivery, MergedPullRequest, RepoName};

/// Attribute names. They are a contract: later stages, the CLI and operators rely on them.
pub mod attr {
    // Key.
    pub const REPO: &str = "repo";
    pub const PR_NUMBER: &str = "prNumber";
    // The PR's own fields, written by the webhook.
    pub const TITLE: &str = "title";
    pub const BODY: &str = "body";
    pub const AUTHOR: &str = "author";
    pub const LABELS: &str = "labels";
    pub const URL: &str = "url";
    pub const BASE_REF: &str = "baseRef";
    pub const MERGE_COMMIT_SHA: &str = "mergeCommitSha";
    pub const MERGED_AT: &str = "mergedAt";
    pub const SOURCE_UPDATED_AT: &str = "sourceUpdatedAt";
    pub const DELIVERY_ID: &str = "deliveryId";
    /// The GitHub App installation that delivered the PR (`installation.id`).
    pub const INSTALLATION_ID: &str = "installationId";
    /// A hash of the PR's own fields: two events with the same `updated_at` second are told
    /// apart by it (the later one wins if the fields differ; an identical one writes nothing).
    pub const FIELDS_HASH: &str = "fieldsHash";
    /// A hash of the fields a PR's entries show (title, author, URL, merge time, labels; not
    /// the body, whose summary is kept): an edit that changes it rewrites the entries.
    pub const ENTRY_HASH: &str = "entryHash";
    // Written once, on insert.
    pub const RECEIVED_AT: &str = "receivedAt";
    /// The sparse "pending summary" marker: present only while the row awaits its summary.
    pub const PENDING_SHARD: &str = "pendingShard";
    // Pipeline state, owned by the later stages; the webhook never writes these.
    pub const ENRICHED_AT: &str = "enrichedAt";
    pub const SUMMARIZED_AT: &str = "summarizedAt";
    pub const FAILED_AT: &str = "failedAt";
    /// The sparse "given up" marker (always [`super::FAILED_MARK`]): the failed index's key.
    pub const FAILED_SHARD: &str = "failedShard";
    pub const FAILED_REASON: &str = "failedReason";
    pub const ATTEMPTS: &str = "attempts";
    pub const LEASE_OWNER: &str = "leaseOwner";
    pub const LEASE_UNTIL: &str = "leaseUntil";
    pub const ENQUEUED_UNTIL: &str = "enqueuedUntil";
    /// The enrich stage's lease: who is calling GitHub for this row, and until when.
    pub const ENRICH_LEASE_OWNER: &str = "enrichLeaseOwner";
    pub const ENRICH_LEASE_UNTIL: &str = "enrichLeaseUntil";
    /// GitHub's rate limit was spent past the enrich worker's deadline: retried after this time
    /// by the scheduled retry (the row is parked in the `deferred` partition of the pending index).
    pub const ENRICH_DEFERRED_UNTIL: &str = "enrichDeferredUntil";
    // Written by the enrich stage with `enrichedAt`.
    pub const FILES: &str = "files";
    pub const FILES_TRUNCATED: &str = "filesTruncated";
    pub const DIRECTORIES: &str = "directories";
    pub const ADDITIONS: &str = "additions";
    pub const DELETIONS: &str = "deletions";
    pub const CHANGED_FILES: &str = "changedFiles";
    pub const COMMITS: &str = "commits";
    pub const LINKED_ISSUES: &str = "linkedIssues";
    /// Who approved the PR or asked for changes (a list of logins), and its conversation's
    /// size (comments and reviews).
    pub const REVIEWERS: &str = "reviewers";
    pub const DISCUSSION: &str = "discussion";
    /// Why enrichment was given up for good (the PR is gone, the token lost access).
    pub const ENRICH_SKIPPED_REASON: &str = "enrichSkippedReason";
    // Written by the summarize stage with `summarizedAt`.
    pub const MODULES: &str = "modules";
    pub const SUMMARY: &str = "summary";
    /// The hash of the summary input, and the model, whose answer the model's filter or
    /// guardrail withheld (final for both: not asked again; `reprocess --new-summary` removes it).
    pub const SUMMARY_WITHHELD: &str = "summaryWithheld";
    /// Every module this PR has written an entry to (a string set): the summarize stage adds
    /// the modules it is about to write before writing them, and the commit sets it to exactly
    /// the modules written, so a retry with other modules can delete the entries left behind.
    pub const ENTRY_MODULES: &str = "entryModules";
    /// Counts every summarize claim, never reset: entries carry it, so a worker that lost its
    /// lease can never overwrite an entry written by a later claim.
    pub const GENERATION: &str = "generation";
    /// The last failure of the summarize stage, kept while it retries.
    pub const LAST_ERROR: &str = "lastError";
    /// TTL attribute (epoch seconds) for short-lived records.
    pub const EXPIRES_AT: &str = "expiresAt";

    /// Every pipeline-owned attribute, for tests and audits of invariant 3.
    pub const PIPELINE: &[&str] = &[
        ENRICHED_AT,
        SUMMARIZED_AT,
        FAILED_AT,
        FAILED_SHARD,
        FAILED_REASON,
        ATTEMPTS,
        LEASE_OWNER,
        LEASE_UNTIL,
        ENQUEUED_UNTIL,
        ENTRY_MODULES,
        GENERATION,
        ENRICH_DEFERRED_UNTIL,
    ];
}

/// The sparse GSI over rows awaiting a summary (hash `pendingShard`, range `mergedAt`).
pub const PENDING_INDEX: &str = "pending";
/// The sparse GSI over given-up rows (hash `failedShard`, range `failedAt`).
pub const FAILED_INDEX: &str = "failed";
/// The one value of `failedShard`: given-up rows are few, one partition holds them.
pub const FAILED_MARK: &str = "1";

pub type Item = HashMap<String, AttributeValue>;

mod backfill;
mod context;
mod deferred;
mod enrich;
mod entries;
mod failed;
mod hooks;
mod meter;
mod pages;
mod size;
mod summary;
mod sweep;
pub use backfill::{Checkpoint, CheckpointStore};
pub use context::{ContextCache, ContextStore, CONTEXT_MODULE};
pub use deferred::{Deferral, DEFERRED_SHARD};
pub use enrich::*;
pub use entries::{entry_attr, EntryStore};
pub use failed::{FailedRow, Reprocessed};
pub use hooks::{DeliveryState, HookRecord, HookStore, Known, HOOKS_PARTITION};
pub use meter::{Meter, MeterReading};
pub use pages::{
    org_owner, org_partition, page_attr, BuildClaim, BuildCompletion, BuildResult, CreateClaim,
    OrgRefusal, PageStore, StalePage, INDEX_MODULE, ORG_BACKOFF, STALE_INDEX,
};
pub use size::*;
pub use summary::{Commit, PrRow, RowError, SummaryClaim};
pub use sweep::{PendingPage, PendingRow};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("DynamoDB {operation} on table {table} failed: {message}")]
    Dynamo {
        operation: &'static str,
        table: String,
        message: String,
    },
    #[error("PR {repo}#{number} kept changing under concurrent writes; giving up after {attempts} attempts")]
    Contention {
        repo: String,
        number: u64,
        attempts: u32,
    },
}

/// What an upsert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpsertOutcome {
    /// First delivery: the item was created, pending its summary.
    Inserted,
    /// A newer event: the PR's own fields were updated, pipeline state untouched.
    Updated,
    /// Stale or equal `updated_at` (a redelivery, or an older event): nothing was written.
    Unchanged { stored_updated_at: Option<String> },
}

enum Refusal {
    Refused(Option<Item>),
    Failed(StoreError),
}

enum FieldUpdate {
    Updated {
        enriched: bool,
    },
    NotNewer {
        stored: Option<String>,
        enriched: bool,
    },
    Missing,
}

/// What an import did: the upsert's outcome, and whether the row's enrichment came from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOutcome {
    pub upsert: UpsertOutcome,
    /// The import's files and issues were stored (a new row, or one not yet enriched).
    pub enriched: bool,
}

#[derive(Clone, Debug)]
pub struct PrStore {
    client: Client,
    table: TableConfig,
    meter: Meter,
}

impl PrStore {
    pub fn new(client: Client, table: TableConfig) -> Self {
        PrStore {
            client,
            table,
            meter: Meter::default(),
        }
    }

    /// The same store, counting its reads and writes into `meter`.
    pub fn with_meter(mut self, meter: Meter) -> Self {
        self.meter = meter;
        self
    }

    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    pub fn table_name(&self) -> &str {
        &self.table.table_name
    }

    /// `PENDING_SHARDS`: rows go to shards `"0"`..`"N-1"`.
    pub fn pending_shards(&self) -> u32 {
        u32::from(self.table.pending_shards)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &TableConfig {
        &self.table
    }

    /// Stores a merged PR: a conditional insert for the first delivery, otherwise a conditional
    /// update of the PR's own fields applied only if this event is newer than the stored one.
    pub async fn upsert(
        &self,
        pr: &MergedPullRequest,
        delivery: &Delivery,
    ) -> Result<UpsertOutcome, StoreError> {
        const ATTEMPTS: u32 = 3;
        for _ in 0..ATTEMPTS {
            if self.insert(pr, delivery, Vec::new()).await? {
                return Ok(UpsertOutcome::Inserted);
            }
            match self.update_fields(pr, delivery, true).await? {
                FieldUpdate::Updated { .. } => return Ok(UpsertOutcome::Updated),
                FieldUpdate::NotNewer { stored, .. } => {
                    return Ok(UpsertOutcome::Unchanged {
                        stored_updated_at: stored,
                    })
                }
                // Deleted between our two writes (an operator action): insert it again.
                FieldUpdate::Missing => continue,
            }
        }
        Err(StoreError::Contention {
            repo: pr.repo.to_string(),
            number: pr.number,
            attempts: ATTEMPTS,
        })
    }

    /// Stores a PR fetched by backfill through the webhook's upsert (same conditions, pipeline
    /// state never reset), together with its enrichment: a new row is inserted already enriched
    /// in the same write, and a stored row not yet enriched gets it if no enrich worker holds it.
    pub async fn import(
        &self,
        pr: &MergedPullRequest,
        delivery: &Delivery,
        enrichment: Vec<(&'static str, AttributeValue)>,
        now: OffsetDateTime,
    ) -> Result<ImportOutcome, StoreError> {
        const ATTEMPTS: u32 = 3;
        let mut extra = enrichment.clone();
        extra.push((attr::ENRICHED_AT, AttributeValue::S(rfc3339_millis(now))));
        for _ in 0..ATTEMPTS {
            if self.insert(pr, delivery, extra.clone()).await? {
                return Ok(ImportOutcome {
                    upsert: UpsertOutcome::Inserted,
                    enriched: true,
                });
            }
            // Not the same-second rule: GraphQL lists at most 20 labels, so a backfilled copy of
            // the second a webhook already stored must not replace the webhook's.
            let (upsert, enriched) = match self.update_fields(pr, delivery, false).await? {
                FieldUpdate::Updated { enriched } => (UpsertOutcome::Updated, enriched),
                FieldUpdate::NotNewer { stored, enriched } => (
                    UpsertOutcome::Unchanged {
                        stored_updated_at: stored,
                    },
                    enriched,
                ),
                FieldUpdate::Missing => continue,
            };
            let enriched = !enriched
                && self
                    .enrich_unclaimed(&pr.repo, pr.number, enrichment.clone(), now)
                    .await?;
            return Ok(ImportOutcome { upsert, enriched });
        }
        Err(StoreError::Contention {
            repo: pr.repo.to_string(),
            number: pr.number,
            attempts: ATTEMPTS,
        })
    }

    /// Writes an enrichment only if the row has none and no enrich worker's lease is live; a
    /// row summarized without it goes back to be summarized with it.
    async fn enrich_unclaimed(
        &self,
        repo: &RepoName,
        number: u64,
        attributes: Vec<(&'static str, AttributeValue)>,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let requeue = has_files(&attributes);
        self.write_enrichment(repo, number, attributes, now, requeue, |update| {
            free_to_enrich(update, now)
        })
        .await
    }

    /// An enrichment's write: with `requeue`, a row already summarized (without it) is put back
    /// to be summarized again in the same write ([`requeue_clauses`]); otherwise, or for a
    /// pending or given-up row, the enrichment alone. `condition` is the writer's guard.
    async fn write_enrichment(
        &self,
        repo: &RepoName,
        number: u64,
        attributes: Vec<(&'static str, AttributeValue)>,
        now: OffsetDateTime,
        requeue: bool,
        condition: impl Fn(&mut Update) -> String,
    ) -> Result<bool, StoreError> {
        if !requeue {
            let mut update = enrichment_update(attributes, now);
            let guard = condition(&mut update);
            return self.update_if(repo, number, update, guard).await;
        }
        // Two writes whose conditions exclude each other (summarized or not), tried in turn: a
        // summary committed between them makes the second refused, and the first is tried
        // again, so an enrichment never lands unseen on a row summarized without it.
        for _ in 0..3 {
            let mut update = enrichment_update(attributes.clone(), now);
            let guard = condition(&mut update);
            let summarized = requeue_clauses(&mut update, number, self.table.pending_shards);
            if self
                .update_if(repo, number, update, format!("{guard} AND {summarized}"))
                .await?
            {
                return Ok(true);
            }
            let mut update = enrichment_update(attributes.clone(), now);
            let guard = condition(&mut update);
            let pending = format!("attribute_not_exists({})", update.name(attr::SUMMARIZED_AT));
            if self
                .update_if(repo, number, update, format!("{guard} AND {pending}"))
                .await?
            {
                return Ok(true);
            }
            // Neither: the row was summarized (or put back) between the two, or the guard
            // itself fails (the lease lost, enriched already); tried again, a few times.
        }
        Ok(false)
    }

    /// Puts a summarized row back to be summarized, keeping its summary: its PR's own fields
    /// changed since (an edit, a label) and its entries must show them. Only while it is still
    /// summarized at `summarized_at` (a newer summary already shows them). `false`: it was not.
    pub async fn requeue_summarized(
        &self,
        repo: &RepoName,
        number: u64,
        summarized_at: &str,
    ) -> Result<bool, StoreError> {
        let mut update = Update::default();
        let summarized = requeue_clauses(&mut update, number, self.table.pending_shards);
        let condition = format!(
            "{summarized} AND {} = {}",
            update.name(attr::SUMMARIZED_AT),
            update.value(
                "summarizedAt",
                Some(AttributeValue::S(summarized_at.to_string()))
            )
        );
        self.update_if(repo, number, update, condition).await
    }

    /// `true` if the item was created, `false` if one already existed.
    async fn insert(
        &self,
        pr: &MergedPullRequest,
        delivery: &Delivery,
        extra: Vec<(&'static str, AttributeValue)>,
    ) -> Result<bool, StoreError> {
        let mut item = new_item(pr, delivery, self.table.pending_shards);
        item.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
        let result = self
            .client
            .put_item()
            .table_name(self.table_name())
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#repo)")
            .expression_attribute_names("#repo", attr::REPO)
            .send()
            .await;
        self.applied("PutItem", result)
    }

    /// Writes the PR's own fields if this event is newer, or (`same_second`) of the same second
    /// with other fields.
    async fn update_fields(
        &self,
        pr: &MergedPullRequest,
        delivery: &Delivery,
        same_second: bool,
    ) -> Result<FieldUpdate, StoreError> {
        let mut update = Update::default();
        for (name, value) in pr_fields(pr, delivery) {
            update.set(name, value);
        }
        // Newer, or the same second with other fields (last writer wins within the second); a
        // redelivery of the same event has the same hash and writes nothing.
        let newer = format!(
            "{} < {}",
            update.name(attr::SOURCE_UPDATED_AT),
            update.value("sourceUpdatedAt", None)
        );
        let condition = if same_second {
            format!(
                "attribute_exists({repo}) AND ({newer} OR ({at} = {new} AND (attribute_not_exists({hash}) OR {hash} <> {new_hash})))",
                repo = update.name(attr::REPO),
                at = update.name(attr::SOURCE_UPDATED_AT),
                new = update.value("sourceUpdatedAt", None),
                hash = update.name(attr::FIELDS_HASH),
                new_hash = update.value("fieldsHash", None),
            )
        } else {
            format!("attribute_exists({}) AND {newer}", update.name(attr::REPO))
        };
        let request = self
            .client
            .update_item()
            .table_name(self.table_name())
            .set_key(Some(key(&pr.repo, pr.number)))
            .condition_expression(condition)
            // Returned values cost no read capacity.
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        self.meter.write();
        match update.apply(request).send().await {
            Ok(out) => Ok(FieldUpdate::Updated {
                enriched: out
                    .attributes
                    .is_some_and(|i| i.contains_key(attr::ENRICHED_AT)),
            }),
            Err(e) => match self.refused_item(&e, &pr.repo, pr.number).await? {
                Refusal::Refused(Some(item)) => Ok(FieldUpdate::NotNewer {
                    stored: string(&item, attr::SOURCE_UPDATED_AT).map(str::to_string),
                    enriched: item.contains_key(attr::ENRICHED_AT),
                }),
                Refusal::Refused(None) => Ok(FieldUpdate::Missing),
                Refusal::Failed(e) => Err(e),
            },
        }
    }

    /// For an `UpdateItem` error: the stored item if the condition refused it (from `ALL_OLD`,
    /// or read again where an implementation does not return it), or the error as a `StoreError`.
    async fn refused_item(
        &self,
        err: &aws_sdk_dynamodb::error::SdkError<UpdateItemError>,
        repo: &RepoName,
        number: u64,
    ) -> Result<Refusal, StoreError> {
        match err.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(c)) => match c.item() {
                Some(item) => Ok(Refusal::Refused(Some(item.clone()))),
                None => Ok(Refusal::Refused(self.get(repo, number).await?)),
            },
            _ => Ok(Refusal::Failed(self.dynamo_error("UpdateItem", err))),
        }
    }

    /// Reads one PR item with a strongly consistent read.
    pub async fn get(&self, repo: &RepoName, number: u64) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(self.table_name())
            .set_key(Some(key(repo, number)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.dynamo_error("GetItem", &e))?;
        self.meter.read(usize::from(out.item.is_some()));
        Ok(out.item)
    }

    /// `true` if a conditional write was applied, `false` if its condition refused it.
    fn applied<T, E>(
        &self,
        operation: &'static str,
        result: Result<T, aws_sdk_dynamodb::error::SdkError<E>>,
    ) -> Result<bool, StoreError>
    where
        E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    {
        self.meter.write();
        applied(self.table_name(), operation, result)
    }

    fn dynamo_error<E>(
        &self,
        operation: &'static str,
        err: &aws_sdk_dynamodb::error::SdkError<E>,
    ) -> StoreError
    where
        E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    {
        dynamo_error(self.table_name(), operation, err)
    }

    /// Applies `update` if `condition` holds; `false` if it did not.
    async fn update_if(
        &self,
        repo: &RepoName,
        number: u64,
        update: Update,
        condition: String,
    ) -> Result<bool, StoreError> {
        let request = self
            .client
            .update_item()
            .table_name(self.table_name())
            .set_key(Some(key(repo, number)))
            .condition_expression(condition);
        self.applied("UpdateItem", update.apply(request).send().await)
    }
}

/// `true` if a conditional write on `table` was applied, `false` if its condition refused it.
fn applied<T, E>(
    table: &str,
    operation: &'static str,
    result: Result<T, aws_sdk_dynamodb::error::SdkError<E>>,
) -> Result<bool, StoreError>
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(e)
            if e.as_service_error().and_then(|s| s.code())
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(false)
        }
        Err(e) => Err(dynamo_error(table, operation, &e)),
    }
}

fn dynamo_error<E>(
    table: &str,
    operation: &'static str,
    err: &aws_sdk_dynamodb::error::SdkError<E>,
) -> StoreError
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
{
    StoreError::Dynamo {
        operation,
        table: table.to_string(),
        message: chronicle_aws::error_message(err),
    }
}

/// An `UpdateItem` expression under construction: every attribute goes through a name
/// placeholder (no reserved-word surprises) and every value through a value placeholder.
#[derive(Default)]
struct Update {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
    sets: Vec<String>,
    removes: Vec<String>,
    adds: Vec<String>,
}

impl Update {
    fn name(&mut self, attribute: &str) -> String {
        let placeholder = format!("#{attribute}");
        self.names
            .insert(placeholder.clone(), attribute.to_string());
        placeholder
    }

    /// A value placeholder `:key`; `None` refers to one already set under that key.
    fn value(&mut self, key: &str, value: Option<AttributeValue>) -> String {
        let placeholder = format!(":{key}");
        if let Some(value) = value {
            self.values.insert(placeholder.clone(), value);
        }
        placeholder
    }

    fn set(&mut self, attribute: &str, value: AttributeValue) {
        let clause = format!(
            "{} = {}",
            self.name(attribute),
            self.value(attribute, Some(value))
        );
        self.sets.push(clause);
    }

    fn remove(&mut self, attribute: &str) {
        let name = self.name(attribute);
        self.removes.push(name);
    }

    /// `ADD attribute :value`: a number added to, or a set merged into, what is stored.
    fn add(&mut self, attribute: &str, value: AttributeValue) {
        let clause = format!(
            "{} {}",
            self.name(attribute),
            self.value(attribute, Some(value))
        );
        self.adds.push(clause);
    }

    fn apply(self, request: UpdateItemFluentBuilder) -> UpdateItemFluentBuilder {
        let mut expression = Vec::new();
        if !self.sets.is_empty() {
            expression.push(format!("SET {}", self.sets.join(", ")));
        }
        if !self.removes.is_empty() {
            expression.push(format!("REMOVE {}", self.removes.join(", ")));
        }
        if !self.adds.is_empty() {
            expression.push(format!("ADD {}", self.adds.join(", ")));
        }
        request
            .update_expression(expression.join(" "))
            .set_expression_attribute_names(Some(self.names))
            .set_expression_attribute_values((!self.values.is_empty()).then_some(self.values))
    }
}

pub fn key(repo: &RepoName, number: u64) -> Item {
    HashMap::from([
        (attr::REPO.to_string(), AttributeValue::S(repo.to_string())),
        (
            attr::PR_NUMBER.to_string(),
            AttributeValue::N(number.to_string()),
        ),
    ])
}

/// The PR's own fields: written on insert, and the only attributes a later event may change.
fn pr_fields(pr: &MergedPullRequest, delivery: &Delivery) -> Vec<(&'static str, AttributeValue)> {
    let s = |v: &str| AttributeValue::S(v.to_string());
    let mut fields = vec![
        (attr::TITLE, s(&pr.title)),
        (attr::BODY, s(pr.body.as_deref().unwrap_or_default())),
        (attr::AUTHOR, s(&pr.author)),
        (
            attr::LABELS,
            AttributeValue::L(pr.labels.iter().map(|l| s(l)).collect()),
        ),
        (attr::URL, s(&pr.url)),
        (attr::BASE_REF, s(&pr.base_ref)),
        (attr::MERGE_COMMIT_SHA, s(&pr.merge_commit_sha)),
        (attr::MERGED_AT, s(&rfc3339_seconds(pr.merged_at))),
        (
            attr::SOURCE_UPDATED_AT,
            s(&rfc3339_seconds(pr.source_updated_at)),
        ),
        (attr::FIELDS_HASH, s(&fields_hash(pr))),
        (attr::ENTRY_HASH, s(&entry_hash(pr))),
        (attr::DELIVERY_ID, s(&delivery.id)),
    ];
    // Kept when a later event carries none (a redelivery through a repository webhook).
    if let Some(id) = pr.installation {
        fields.push((attr::INSTALLATION_ID, AttributeValue::N(id.to_string())));
    }
    fields
}

/// SHA-256 over the PR's own fields (not the delivery): equal for a redelivery of one event,
/// different for another event of the same second that changed anything.
pub fn fields_hash(pr: &MergedPullRequest) -> String {
    hash_fields(
        &[
            &pr.title,
            pr.body.as_deref().unwrap_or_default(),
            &pr.author,
            &pr.url,
            &pr.base_ref,
            &pr.merge_commit_sha,
            &rfc3339_seconds(pr.merged_at),
        ],
        &pr.labels,
    )
}

/// SHA-256 over the fields a PR's entries show: a body edit (whose summary is kept) or a
/// bot's repeated edits of it change nothing on the page.
pub fn entry_hash(pr: &MergedPullRequest) -> String {
    hash_fields(
        &[
            &pr.title,
            &pr.author,
            &pr.url,
            &rfc3339_seconds(pr.merged_at),
        ],
        &pr.labels,
    )
}

fn hash_fields(fields: &[&str], labels: &[String]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    // Labels as a set: GraphQL and webhooks list them in different orders.
    let mut labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    labels.sort_unstable();
    for field in fields.iter().copied().chain(labels) {
        // Length-prefixed, so no two field lists hash alike by shifting text between fields.
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    hex::encode(&hasher.finalize()[..16])
}

/// The item a first delivery creates: key, PR fields, `receivedAt` and the pending marker.
/// Pipeline attributes are absent: their absence *is* the state "not done yet".
pub fn new_item(pr: &MergedPullRequest, delivery: &Delivery, pending_shards: u16) -> Item {
    let mut item = key(&pr.repo, pr.number);
    item.extend(
        pr_fields(pr, delivery)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v)),
    );
    item.insert(
        attr::RECEIVED_AT.into(),
        AttributeValue::S(rfc3339_millis(delivery.received_at)),
    );
    item.insert(
        attr::PENDING_SHARD.into(),
        AttributeValue::S(pending_shard(pr.number, pending_shards)),
    );
    item
}

/// Spreads pending rows over `shards` GSI partitions, deterministically per PR.
pub fn pending_shard(number: u64, shards: u16) -> String {
    (number % u64::from(shards.max(1))).to_string()
}

pub fn string<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// A whole, non-negative number attribute (`None`: absent, or not such a number).
pub fn unsigned(item: &Item, name: &str) -> Option<u64> {
    item.get(name).and_then(|v| v.as_n().ok())?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_dynamodb_rules() {
        let item: Item = HashMap::from([
            ("a".to_string(), AttributeValue::S("xyz".into())),
            ("n".to_string(), AttributeValue::N("1234".into())),
            (
                "l".to_string(),
                AttributeValue::L(vec![AttributeValue::S("ab".into())]),
            ),
        ]);
        assert_eq!(item_size(&item), (1 + 3) + (1 + 3) + (1 + 3 + 1 + 2));
        assert_eq!(write_units(1), 1);
        assert_eq!(write_units(1024), 1);
        assert_eq!(write_units(1025), 2);
    }

    #[test]
    fn shards_are_stable_and_bounded() {
        assert_eq!(pending_shard(7, 4), "3");
        assert_eq!(pending_shard(7, 1), "0");
        assert!((0..1000).all(|n| pending_shard(n, 4).parse::<u16>().unwrap() < 4));
    }
}
