//! The webhooks Chronicle has heard from, and what the redelivery stage did about their failed
//! deliveries, in the pages table's [`HOOKS_PARTITION`]:
//!
//! * one item per hook (module = its key, e.g. `repos/octo/app/hooks/42`): when it was first and
//!   last seen, when its deliveries were last listed, and since when GitHub says it is gone;
//! * one item per failed delivery looked at (module = `{hook}#{guid}`): its [`DeliveryState`] and
//!   when. A redelivery is claimed by creating this item (conditional), so a GUID is asked at
//!   most once; a delivery found stored or not merged is remembered the same way, so later runs
//!   do not read it again. Items past GitHub's window are deleted: the partition holds the last
//!   few days' failures, not the history.
//!
//! One Query reads the whole partition.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use super::{applied, dynamo_error, StoreError};
use chronicle_domain::hook::HookRef;
use chronicle_domain::rfc3339_millis;

/// The pages-table partition of hook items. Repository names never start with `#`.
pub const HOOKS_PARTITION: &str = "#hooks";
const FIRST_SEEN_AT: &str = "firstSeenAt";
const LAST_SEEN_AT: &str = "lastSeenAt";
const LISTED_AT: &str = "listedAt";
const GONE_AT: &str = "goneAt";
const STATE: &str = "state";
const AT: &str = "at";
const ASKS: &str = "asks";

/// What the redelivery stage knows of one failed delivery (by GUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    /// Claimed; GitHub not yet asked (a crash here leaves it claimed: reported, never asked).
    Claimed,
    /// GitHub accepted the redelivery (202).
    Asked,
    /// GitHub refused it for good (e.g. 422, too old), or its answer never came.
    Refused,
    Unknown,
    /// Chronicle stored it (or a newer state of its PR) after all: nothing to ask.
    Stored,
    /// Not a merged PR: nothing to store.
    NotMerged,
}

impl DeliveryState {
    fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Claimed => "claimed",
            DeliveryState::Asked => "asked",
            DeliveryState::Refused => "refused",
            DeliveryState::Unknown => "unknown",
            DeliveryState::Stored => "stored",
            DeliveryState::NotMerged => "notMerged",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "claimed" => DeliveryState::Claimed,
            "asked" => DeliveryState::Asked,
            "refused" => DeliveryState::Refused,
            "unknown" => DeliveryState::Unknown,
            "stored" => DeliveryState::Stored,
            "notMerged" => DeliveryState::NotMerged,
            _ => return None,
        })
    }
}

/// What is known of one failed delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub state: DeliveryState,
    /// When the state was reached (RFC 3339).
    pub at: String,
    /// How many times GitHub was asked to redeliver it.
    pub asks: u32,
}

/// A recorded hook and what is known of its failed deliveries (by GUID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRecord {
    pub hook: HookRef,
    pub last_seen_at: String,
    /// When its deliveries were last listed (`""`: never).
    pub listed_at: String,
    /// When GitHub last answered that the hook (or the token's access to it) is gone.
    pub gone_at: Option<String>,
    pub deliveries: BTreeMap<String, Known>,
}

impl HookRecord {
    /// GitHub said it was gone less than a day before `now`, and it has not delivered since:
    /// not worth asking again yet (once a day, the problem is reported again).
    pub fn dormant(&self, now: time::OffsetDateTime) -> bool {
        self.gone_at.as_deref().is_some_and(|gone| {
            self.last_seen_at.as_str() <= gone
                && chronicle_domain::parse_rfc3339(gone)
                    .is_some_and(|t| now - t < time::Duration::days(1))
        })
    }
}

#[derive(Clone, Debug)]
pub struct HookStore {
    client: Client,
    table: String,
}

fn key(module: String) -> std::collections::HashMap<String, AttributeValue> {
    std::collections::HashMap::from([
        (
            "repo".to_string(),
            AttributeValue::S(HOOKS_PARTITION.into()),
        ),
        ("module".to_string(), AttributeValue::S(module)),
    ])
}

fn delivery_module(hook: &HookRef, guid: &str) -> String {
    format!("{hook}#{guid}")
}

impl HookStore {
    /// `table` is the pages table.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        HookStore {
            client,
            table: table.into(),
        }
    }

    /// Records that `hook` delivered at `now`. Touches only `firstSeenAt` and `lastSeenAt`
    /// (the webhook's grant allows no other attribute).
    pub async fn remember(
        &self,
        hook: &HookRef,
        now: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(hook.to_string())))
            .update_expression("SET #last = :now, #first = if_not_exists(#first, :now)")
            .expression_attribute_names("#last", LAST_SEEN_AT)
            .expression_attribute_names("#first", FIRST_SEEN_AT)
            .expression_attribute_values(":now", AttributeValue::S(rfc3339_millis(now)))
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "UpdateItem", &e))?;
        Ok(())
    }

    /// Every recorded hook with its deliveries' states (one Query of the partition).
    pub async fn list(&self) -> Result<Vec<HookRecord>, StoreError> {
        let mut hooks: BTreeMap<String, HookRecord> = BTreeMap::new();
        let mut deliveries: Vec<(String, String, Known)> = Vec::new();
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
                let Some(module) = text("module") else {
                    continue;
                };
                if let Some((hook, guid)) = module.split_once('#') {
                    if let Some(state) = text(STATE).as_deref().and_then(DeliveryState::parse) {
                        let asks = item
                            .get(ASKS)
                            .and_then(|v| v.as_n().ok())
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0);
                        deliveries.push((
                            hook.to_string(),
                            guid.to_string(),
                            Known {
                                state,
                                at: text(AT).unwrap_or_default(),
                                asks,
                            },
                        ));
                    }
                    continue;
                }
                let Some(hook) = HookRef::parse(&module) else {
                    continue;
                };
                hooks.insert(
                    module,
                    HookRecord {
                        hook,
                        last_seen_at: text(LAST_SEEN_AT).unwrap_or_default(),
                        listed_at: text(LISTED_AT).unwrap_or_default(),
                        gone_at: text(GONE_AT),
                        deliveries: BTreeMap::new(),
                    },
                );
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        for (hook, guid, known) in deliveries {
            if let Some(record) = hooks.get_mut(&hook) {
                record.deliveries.insert(guid, known);
            }
        }
        Ok(hooks.into_values().collect())
    }

    /// Notes that the hook's deliveries were listed at `now` (`gone`: GitHub answered that the
    /// hook, or the token's access to it, is gone).
    pub async fn listed(
        &self,
        hook: &HookRef,
        now: time::OffsetDateTime,
        gone: bool,
    ) -> Result<(), StoreError> {
        let at = AttributeValue::S(rfc3339_millis(now));
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(hook.to_string())))
            .expression_attribute_names("#listed", LISTED_AT)
            .expression_attribute_names("#gone", GONE_AT)
            .expression_attribute_values(":now", at)
            // Only a hook the webhook recorded (never one made up here).
            .condition_expression("attribute_exists(#module)")
            .expression_attribute_names("#module", "module");
        let update = if gone {
            update.update_expression("SET #listed = :now, #gone = :now")
        } else {
            update.update_expression("SET #listed = :now REMOVE #gone")
        };
        applied(&self.table, "UpdateItem", update.send().await)?;
        Ok(())
    }

    /// Claims the redelivery of `guid`: `false` if it is already known (claimed or remembered by
    /// an earlier run, or a concurrent one). Written before GitHub is asked, so a crash after
    /// asking never leads to asking twice.
    pub async fn claim(
        &self,
        hook: &HookRef,
        guid: &str,
        now: time::OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(key(delivery_module(hook, guid))))
            .item(
                STATE,
                AttributeValue::S(DeliveryState::Claimed.as_str().into()),
            )
            .item(AT, AttributeValue::S(rfc3339_millis(now)))
            .item(ASKS, AttributeValue::N("1".into()))
            .condition_expression("attribute_not_exists(#module)")
            .expression_attribute_names("#module", "module");
        applied(&self.table, "PutItem", put.send().await)
    }

    /// Claims `guid` again once the hook's delivery log settled what an earlier run left (its
    /// redelivery failed too, or GitHub did not act on an unanswered ask or an unconfirmed
    /// claim): only while it is still in that state (`from` at `at`), so of two runs one asks.
    pub async fn reclaim(
        &self,
        hook: &HookRef,
        guid: &str,
        from: DeliveryState,
        at: &str,
        now: time::OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(delivery_module(hook, guid))))
            .update_expression("SET #state = :claimed, #at = :now ADD #asks :one")
            .condition_expression("#state = :asked AND #at = :asked_at")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#at", AT)
            .expression_attribute_names("#asks", ASKS)
            .expression_attribute_values(
                ":claimed",
                AttributeValue::S(DeliveryState::Claimed.as_str().into()),
            )
            .expression_attribute_values(":asked", AttributeValue::S(from.as_str().into()))
            .expression_attribute_values(":asked_at", AttributeValue::S(at.to_string()))
            .expression_attribute_values(":now", AttributeValue::S(rfc3339_millis(now)))
            .expression_attribute_values(":one", AttributeValue::N("1".into()));
        applied(&self.table, "UpdateItem", update.send().await)
    }

    /// Records what became of a claimed (or looked-at) delivery; its ask count is kept.
    pub async fn set_state(
        &self,
        hook: &HookRef,
        guid: &str,
        state: DeliveryState,
        now: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(delivery_module(hook, guid))))
            .update_expression("SET #state = :state, #at = :now")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#at", AT)
            .expression_attribute_values(":state", AttributeValue::S(state.as_str().into()))
            .expression_attribute_values(":now", AttributeValue::S(rfc3339_millis(now)))
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "UpdateItem", &e))?;
        Ok(())
    }

    /// Drops what is known of `guid`: a claim GitHub certainly did not act on (the next run may
    /// ask again), or a memory past GitHub's window.
    pub async fn forget(&self, hook: &HookRef, guid: &str) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(delivery_module(hook, guid))))
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "DeleteItem", &e))?;
        Ok(())
    }
}
