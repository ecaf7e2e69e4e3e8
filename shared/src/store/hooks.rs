//! The webhooks Chronicle has heard from, one item per hook in the pages table's
//! [`HOOKS_PARTITION`] (module = the hook's key, e.g. `repos/octo/app/hooks/42`), and the
//! redeliveries asked of each: `attempts` maps a delivery GUID to when it was redelivered, so a
//! GUID is redelivered at most once (the claim is a conditional write). One Query lists them.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use super::{applied, dynamo_error, StoreError};
use crate::domain::rfc3339_millis;
use crate::hooks::HookRef;

/// The pages-table partition of hook items. Repository names never start with `#`.
pub const HOOKS_PARTITION: &str = "#hooks";
const FIRST_SEEN_AT: &str = "firstSeenAt";
const LAST_SEEN_AT: &str = "lastSeenAt";
const ATTEMPTS: &str = "attempts";

/// A recorded hook and the GUIDs already redelivered for it (GUID → when).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRecord {
    pub hook: HookRef,
    pub last_seen_at: String,
    pub attempts: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
pub struct HookStore {
    client: Client,
    table: String,
}

impl HookStore {
    /// `table` is the pages table.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        HookStore {
            client,
            table: table.into(),
        }
    }

    fn key(&self, hook: &HookRef) -> [(String, AttributeValue); 2] {
        [
            ("repo".into(), AttributeValue::S(HOOKS_PARTITION.into())),
            ("module".into(), AttributeValue::S(hook.to_string())),
        ]
    }

    /// Records that `hook` delivered at `now` (creating its item and empty `attempts` map).
    pub async fn remember(
        &self,
        hook: &HookRef,
        now: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        let at = AttributeValue::S(rfc3339_millis(now));
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(hook).into_iter().collect()))
            .update_expression(
                "SET #last = :now, #first = if_not_exists(#first, :now), \
                 #attempts = if_not_exists(#attempts, :empty)",
            )
            .expression_attribute_names("#last", LAST_SEEN_AT)
            .expression_attribute_names("#first", FIRST_SEEN_AT)
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_values(":now", at)
            .expression_attribute_values(":empty", AttributeValue::M(Default::default()))
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "UpdateItem", &e))?;
        Ok(())
    }

    /// Every recorded hook (one Query of the hooks partition; unreadable keys are skipped).
    pub async fn list(&self) -> Result<Vec<HookRecord>, StoreError> {
        let mut records = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#repo = :hooks")
                .expression_attribute_names("#repo", "repo")
                .expression_attribute_values(":hooks", AttributeValue::S(HOOKS_PARTITION.into()))
                .set_exclusive_start_key(start)
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| dynamo_error(&self.table, "Query", &e))?;
            for item in out.items() {
                let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
                let Some(hook) = text("module").as_deref().and_then(HookRef::parse) else {
                    continue;
                };
                let attempts = item
                    .get(ATTEMPTS)
                    .and_then(|v| v.as_m().ok())
                    .map(|m| {
                        m.iter()
                            .filter_map(|(guid, at)| Some((guid.clone(), at.as_s().ok()?.clone())))
                            .collect()
                    })
                    .unwrap_or_default();
                records.push(HookRecord {
                    hook,
                    last_seen_at: text(LAST_SEEN_AT).unwrap_or_default(),
                    attempts,
                });
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(records),
            }
        }
    }

    /// Claims the redelivery of `guid`: `false` if it was already claimed (by an earlier run or
    /// a concurrent one). The claim is written before GitHub is asked, so a crash after asking
    /// never leads to asking twice.
    pub async fn claim_attempt(
        &self,
        hook: &HookRef,
        guid: &str,
        now: time::OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(hook).into_iter().collect()))
            .update_expression("SET #attempts.#guid = :now")
            .condition_expression(
                "attribute_exists(#attempts) AND attribute_not_exists(#attempts.#guid)",
            )
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_names("#guid", guid)
            .expression_attribute_values(":now", AttributeValue::S(rfc3339_millis(now)))
            .send()
            .await;
        applied(&self.table, "UpdateItem", result)
    }

    /// Gives a claim back: GitHub certainly did not redeliver (it refused with a server error or
    /// a rate limit), so the next run may ask again.
    pub async fn release_attempt(&self, hook: &HookRef, guid: &str) -> Result<(), StoreError> {
        self.forget(hook, &[guid.to_string()]).await
    }

    /// Drops the claims of `guids` (those past GitHub's redelivery window: they can never be
    /// asked again, so they need no memory).
    pub async fn forget(&self, hook: &HookRef, guids: &[String]) -> Result<(), StoreError> {
        // A bounded expression per request (DynamoDB caps an expression at 4 KB).
        for chunk in guids.chunks(50) {
            let mut update = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(self.key(hook).into_iter().collect()))
                .expression_attribute_names("#attempts", ATTEMPTS)
                .condition_expression("attribute_exists(#attempts)");
            let mut removes = Vec::with_capacity(chunk.len());
            for (i, guid) in chunk.iter().enumerate() {
                update = update.expression_attribute_names(format!("#g{i}"), guid);
                removes.push(format!("#attempts.#g{i}"));
            }
            let result = update
                .update_expression(format!("REMOVE {}", removes.join(", ")))
                .send()
                .await;
            applied(&self.table, "UpdateItem", result)?;
        }
        Ok(())
    }
}
