//! The sweeper's side of the PR table: read the sparse pending index, claim rows for the queue.

use aws_sdk_dynamodb::types::AttributeValue;
use time::OffsetDateTime;

use super::{attr, string, Item, PrStore, StoreError, Update, PENDING_INDEX};
use chronicle_domain::{rfc3339_millis, RepoName};

/// A row of the pending index (its projection: keys, `receivedAt`, `enrichedAt`, `enqueuedUntil`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRow {
    pub repo: RepoName,
    pub number: u64,
    pub merged_at: String,
    pub received_at: Option<String>,
    pub enriched: bool,
    pub enqueued_until: Option<String>,
}

/// One page of a shard of the pending index.
#[derive(Debug, Clone, Default)]
pub struct PendingPage {
    pub rows: Vec<PendingRow>,
    /// Items DynamoDB read for this page (`ScannedCount`): what the sweep costs.
    pub scanned: usize,
    pub next: Option<Item>,
}

impl PrStore {
    /// A page of pending rows of one shard, oldest merge first. Never a Scan: the index holds
    /// only rows that await their summary, so this costs the backlog, not the table.
    pub async fn pending_page(
        &self,
        shard: &str,
        start: Option<Item>,
        limit: i32,
    ) -> Result<PendingPage, StoreError> {
        let out = self
            .client
            .query()
            .table_name(self.table_name())
            .index_name(PENDING_INDEX)
            .key_condition_expression("#shard = :shard")
            .expression_attribute_names("#shard", attr::PENDING_SHARD)
            .expression_attribute_values(":shard", AttributeValue::S(shard.to_string()))
            .set_exclusive_start_key(start)
            .limit(limit)
            .send()
            .await
            .map_err(|e| self.dynamo_error("Query", &e))?;
        self.meter.read(out.scanned_count().max(0) as usize);
        let rows = out.items().iter().filter_map(pending_row).collect();
        Ok(PendingPage {
            rows,
            scanned: out.scanned_count().max(0) as usize,
            next: out.last_evaluated_key,
        })
    }

    /// Claims a row for the queue until `until` (the SKIP LOCKED analogue): only while it is
    /// still pending, not claimed by a live sweep, and not being enriched (a live enrich lease:
    /// its files are moments away, and a summary without them would misfile the PR; a lease
    /// lasts one invocation at most). `false`: someone else has it, or it is done.
    pub async fn claim_for_queue(
        &self,
        repo: &RepoName,
        number: u64,
        shard: &str,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut update = Update::default();
        update.set(
            attr::ENQUEUED_UNTIL,
            AttributeValue::S(rfc3339_millis(until)),
        );
        let condition = format!(
            "{pending} = {shard} AND attribute_not_exists({summarized}) AND attribute_not_exists({failed}) \
             AND (attribute_not_exists({claim}) OR {claim} < {now}) \
             AND (attribute_not_exists({enriching}) OR {enriching} < {now})",
            pending = update.name(attr::PENDING_SHARD),
            // Still in the shard the sweep read: a row parked for enrichment meanwhile is not taken.
            shard = update.value("shard", Some(AttributeValue::S(shard.to_string()))),
            summarized = update.name(attr::SUMMARIZED_AT),
            failed = update.name(attr::FAILED_AT),
            claim = update.name(attr::ENQUEUED_UNTIL),
            enriching = update.name(attr::ENRICH_LEASE_UNTIL),
            now = update.value("now", Some(AttributeValue::S(rfc3339_millis(now)))),
        );
        self.update_if(repo, number, update, condition).await
    }

    /// Gives back a claim this sweep made (its message could not be sent), so the next sweep
    /// need not wait for it to expire. Only the claim with exactly this expiry is removed.
    pub async fn release_queue_claim(
        &self,
        repo: &RepoName,
        number: u64,
        until: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut update = Update::default();
        update.remove(attr::ENQUEUED_UNTIL);
        let condition = format!(
            "{} = {}",
            update.name(attr::ENQUEUED_UNTIL),
            update.value("until", Some(AttributeValue::S(rfc3339_millis(until))))
        );
        self.update_if(repo, number, update, condition)
            .await
            .map(|_| ())
    }
}

impl PrStore {
    /// Gives back whatever sweep claim a still-pending row holds (its message was dropped
    /// unworked), so the next sweep need not wait for it to expire.
    pub async fn release_any_queue_claim(
        &self,
        repo: &RepoName,
        number: u64,
    ) -> Result<(), StoreError> {
        let mut update = Update::default();
        update.remove(attr::ENQUEUED_UNTIL);
        let condition = format!(
            "attribute_exists({}) AND attribute_not_exists({}) AND attribute_not_exists({})",
            update.name(attr::ENQUEUED_UNTIL),
            update.name(attr::SUMMARIZED_AT),
            update.name(attr::FAILED_AT),
        );
        self.update_if(repo, number, update, condition)
            .await
            .map(|_| ())
    }
}

fn pending_row(item: &Item) -> Option<PendingRow> {
    Some(PendingRow {
        repo: RepoName::parse(string(item, attr::REPO)?).ok()?,
        number: item.get(attr::PR_NUMBER)?.as_n().ok()?.parse().ok()?,
        merged_at: string(item, attr::MERGED_AT)?.to_string(),
        received_at: string(item, attr::RECEIVED_AT).map(str::to_string),
        enriched: item.contains_key(attr::ENRICHED_AT),
        enqueued_until: string(item, attr::ENQUEUED_UNTIL).map(str::to_string),
    })
}
