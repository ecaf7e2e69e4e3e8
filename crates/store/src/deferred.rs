//! Enrichment deferred past a rate-limit reset. A deferred row moves from its numeric shard of
//! the pending index to the `deferred` partition: the sweeper (which reads the numeric shards)
//! leaves it alone, and the enrich stage's scheduled retry reads only that partition, so a retry
//! run costs the deferred rows, not the backlog. Every move is conditional on where the row is.

use aws_sdk_dynamodb::types::AttributeValue;
use time::OffsetDateTime;

use super::{attr, pending_shard, PendingPage, PrStore, StoreError, Update};
use chronicle_domain::{rfc3339_millis, RepoName};

/// The pending index partition of rows whose enrichment waits for GitHub's rate-limit reset.
pub const DEFERRED_SHARD: &str = "deferred";

/// Where a deferral left the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deferral {
    /// Moved to the deferred partition: nothing summarizes it before it is enriched or released.
    Parked,
    /// Already summarized (no pending marker): only the deferral time is recorded.
    Recorded,
    /// This worker no longer held the lease, or the row is enriched: nothing written.
    LeaseLost,
}

impl PrStore {
    /// Records that this row's enrichment waits until `until` and gives the lease back, only
    /// while `owner` holds it and `enrichedAt` is absent. A pending row is parked in the
    /// deferred partition; one summarized meanwhile keeps its state.
    pub async fn defer_enrichment(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        until: OffsetDateTime,
    ) -> Result<Deferral, StoreError> {
        for park in [true, false] {
            let mut update = Update::default();
            update.set(
                attr::ENRICH_DEFERRED_UNTIL,
                AttributeValue::S(rfc3339_millis(until)),
            );
            update.remove(attr::ENRICH_LEASE_OWNER);
            update.remove(attr::ENRICH_LEASE_UNTIL);
            let mut condition = format!(
                "{} = {} AND attribute_not_exists({})",
                update.name(attr::ENRICH_LEASE_OWNER),
                update.value("owner", Some(AttributeValue::S(owner.to_string()))),
                update.name(attr::ENRICHED_AT)
            );
            if park {
                update.set(
                    attr::PENDING_SHARD,
                    AttributeValue::S(DEFERRED_SHARD.to_string()),
                );
                condition.push_str(&format!(
                    " AND attribute_exists({})",
                    update.name(attr::PENDING_SHARD)
                ));
            } else {
                condition.push_str(&format!(
                    " AND attribute_not_exists({})",
                    update.name(attr::PENDING_SHARD)
                ));
            }
            if self.update_if(repo, number, update, condition).await? {
                return Ok(if park {
                    Deferral::Parked
                } else {
                    Deferral::Recorded
                });
            }
        }
        Ok(Deferral::LeaseLost)
    }

    /// A page of the deferred partition, oldest merge first.
    pub async fn deferred_page(
        &self,
        start: Option<super::Item>,
        limit: i32,
    ) -> Result<PendingPage, StoreError> {
        self.pending_page(DEFERRED_SHARD, start, limit).await
    }

    /// Moves a parked row back to its own shard of the pending index (enriched, or going ahead
    /// without enrichment), dropping the deferral time. `false`: it was not parked (any more).
    pub async fn release_deferred(&self, repo: &RepoName, number: u64) -> Result<bool, StoreError> {
        let mut update = Update::default();
        update.set(
            attr::PENDING_SHARD,
            AttributeValue::S(pending_shard(number, self.table.pending_shards)),
        );
        update.remove(attr::ENRICH_DEFERRED_UNTIL);
        let condition = format!(
            "{} = {}",
            update.name(attr::PENDING_SHARD),
            update.value("deferred", Some(AttributeValue::S(DEFERRED_SHARD.into())))
        );
        self.update_if(repo, number, update, condition).await
    }
}
