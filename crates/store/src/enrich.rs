//! The enrichment lease on a PR row: claimed before GitHub is called, the write-back conditional
//! on still holding it, released (or moved back to pending) when enrichment cannot finish.

use super::*;

/// The enrichment's attributes with `enrichedAt`, in one update.
pub(super) fn enrichment_update(
    attributes: Vec<(&'static str, AttributeValue)>,
    now: OffsetDateTime,
) -> Update {
    let mut update = Update::default();
    for (name, value) in attributes {
        update.set(name, value);
    }
    update.set(attr::ENRICHED_AT, AttributeValue::S(rfc3339_millis(now)));
    update
}

/// Whether an enrichment holds changed files (which tag the PR).
pub(super) fn has_files(attributes: &[(&'static str, AttributeValue)]) -> bool {
    attributes
        .iter()
        .any(|(name, value)| *name == attr::FILES && value.as_l().is_ok_and(|l| !l.is_empty()))
}

/// The clauses that put a summarized row back to be summarized (its summary, generation and
/// `entryModules` kept, so the rewrite replaces its entries and deletes those of modules it no
/// longer touches, with no new summary), and the condition that it is summarized. Attempts
/// start again: the earlier ones were for other inputs.
pub(super) fn requeue_clauses(update: &mut Update, number: u64, shards: u16) -> String {
    for gone in [
        attr::SUMMARIZED_AT,
        attr::ATTEMPTS,
        attr::ENQUEUED_UNTIL,
        attr::LAST_ERROR,
    ] {
        update.remove(gone);
    }
    update.set(
        attr::PENDING_SHARD,
        AttributeValue::S(pending_shard(number, shards)),
    );
    format!("attribute_exists({})", update.name(attr::SUMMARIZED_AT))
}

/// The row exists, is not enriched, and no enrich worker's lease is live at `now`.
pub(super) fn free_to_enrich(update: &mut Update, now: OffsetDateTime) -> String {
    format!(
        "attribute_exists({repo}) AND attribute_not_exists({enriched}) AND (attribute_not_exists({lease}) OR {lease} < {now})",
        repo = update.name(attr::REPO),
        enriched = update.name(attr::ENRICHED_AT),
        lease = update.name(attr::ENRICH_LEASE_UNTIL),
        now = update.value("now", Some(AttributeValue::S(rfc3339_millis(now)))),
    )
}

/// The enrich stage's claim on a row.
#[derive(Debug, Clone, PartialEq)]
pub enum EnrichClaim {
    /// This worker holds the lease; the row as it is now.
    Claimed(Item),
    /// `enrichedAt` is set: a duplicate or a redelivery after completion.
    AlreadyEnriched,
    /// Another worker's lease is live until the given time.
    Held { until: Option<String> },
    /// The row was deleted.
    Missing,
}

impl PrStore {
    /// Takes the enrichment lease: only if `enrichedAt` is absent and no live lease exists.
    pub async fn claim_enrichment(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<EnrichClaim, StoreError> {
        let mut update = Update::default();
        update.set(
            attr::ENRICH_LEASE_OWNER,
            AttributeValue::S(owner.to_string()),
        );
        update.set(
            attr::ENRICH_LEASE_UNTIL,
            AttributeValue::S(rfc3339_millis(until)),
        );
        let condition = free_to_enrich(&mut update, now);
        let request = self
            .client
            .update_item()
            .table_name(self.table_name())
            .set_key(Some(key(repo, number)))
            .condition_expression(condition)
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        match update.apply(request).send().await {
            Ok(out) => Ok(EnrichClaim::Claimed(out.attributes.unwrap_or_default())),
            Err(e) => match self.refused_item(&e, repo, number).await? {
                Refusal::Refused(None) => Ok(EnrichClaim::Missing),
                Refusal::Refused(Some(item)) if item.contains_key(attr::ENRICHED_AT) => {
                    Ok(EnrichClaim::AlreadyEnriched)
                }
                // Our own lease: the claim was applied but its answer lost, and the SDK retried.
                Refusal::Refused(Some(item))
                    if string(&item, attr::ENRICH_LEASE_OWNER) == Some(owner) =>
                {
                    Ok(EnrichClaim::Claimed(item))
                }
                Refusal::Refused(Some(item)) => Ok(EnrichClaim::Held {
                    until: string(&item, attr::ENRICH_LEASE_UNTIL).map(str::to_string),
                }),
                Refusal::Failed(e) => Err(e),
            },
        }
    }

    /// Writes the enrichment and `enrichedAt` and drops the lease, only while `owner` holds it and
    /// `enrichedAt` is absent. `false`: the lease was lost (nothing written). Never touches the
    /// webhook's fields. An enrichment with files that lands after the row was summarized
    /// without them (late: a burst, GitHub 5xx, a slow context) puts the row back to be
    /// summarized in the same write, so its entries move to the modules its files are in.
    pub async fn complete_enrichment(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        attributes: Vec<(&'static str, AttributeValue)>,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let requeue = has_files(&attributes);
        self.write_enrichment(repo, number, attributes, now, requeue, |update| {
            update.remove(attr::ENRICH_LEASE_OWNER);
            update.remove(attr::ENRICH_LEASE_UNTIL);
            update.remove(attr::ENRICH_DEFERRED_UNTIL);
            format!(
                "{} = {} AND attribute_not_exists({})",
                update.name(attr::ENRICH_LEASE_OWNER),
                update.value("owner", Some(AttributeValue::S(owner.to_string()))),
                update.name(attr::ENRICHED_AT)
            )
        })
        .await
    }

    /// Gives the lease back after a failure, so a retry need not wait for it to expire.
    pub async fn release_enrichment(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
    ) -> Result<(), StoreError> {
        let mut update = Update::default();
        update.remove(attr::ENRICH_LEASE_OWNER);
        update.remove(attr::ENRICH_LEASE_UNTIL);
        let condition = format!(
            "{} = {}",
            update.name(attr::ENRICH_LEASE_OWNER),
            update.value("owner", Some(AttributeValue::S(owner.to_string())))
        );
        self.update_if(repo, number, update, condition)
            .await
            .map(|_| ())
    }
}
