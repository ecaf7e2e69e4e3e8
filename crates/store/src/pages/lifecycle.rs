//! A repository name's life on its owner's organisation page, as the webhook learns it from
//! GitHub (`repository` renamed / transferred / deleted / created, and
//! `installation_repositories.added`).
//!
//! - A name that no longer exists is forgotten: a tombstone (`goneWhy`) is put on its item.
//!   Readers skip a tombstoned item ([`PageStore::org_repos`]), and a late build of that name
//!   (a PR of the old name delivered after the rename) cannot write the row back:
//!   [`PageStore::put_org_repo`] is conditional on it. The row itself is left in place: the
//!   webhook's role may write only the tombstone's attributes, never a row's content.
//! - A name that exists again (renamed back, a new repository of a deleted one's name, added
//!   to the installation) has its tombstone lifted; its index is marked stale, and its build
//!   writes the row afresh.
//! - Events of one name are applied in the order they happened (`lifeAt`, the event's time
//!   from its payload, recorded by every ordered event, a restore of a name never forgotten
//!   included): an earlier event delivered late changes nothing. `lifeDelivery` is the last
//!   delivery applied (one id, not a growing list), so a delivery applied again is told apart.
//!   A tombstone's `goneWhy` names its delivery too.
//!
//! The webhook makes these writes; its role may write only these attributes, only in the
//! `#org/` partitions (template.yaml, `ForgetOrgRows`).

use super::org::org_partition;
use super::*;

/// Why the name's row was forgotten; present while it is.
pub(super) const GONE_WHY: &str = "goneWhy";
/// When the last ordered lifecycle event applied to the name happened.
const LIFE_AT: &str = "lifeAt";
/// The last delivery applied to the name, and when: `<delivery id> <time written>`.
const LIFE_DELIVERY: &str = "lifeDelivery";

/// A lifecycle write that was applied, and what the name's item held before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifeApplied {
    /// The name was forgotten before this write.
    pub was_gone: bool,
    /// This same delivery was the last one applied: it is delivered again (an earlier
    /// attempt's later steps may have failed).
    pub again: bool,
}

impl PageStore {
    /// Forgets `repo`'s row on its owner's organisation page (`why`: "renamed to …",
    /// "deleted", …), for the delivery `delivery` of an event that happened at `at`. `None`: a
    /// later event of the name was applied already; nothing was written.
    pub async fn forget_org_repo(
        &self,
        repo: &chronicle_domain::RepoName,
        why: &str,
        delivery: &str,
        at: OffsetDateTime,
    ) -> Result<Option<LifeApplied>, StoreError> {
        let mut u = Update::default();
        // Named with its delivery: only a repeat of it writes the same value (see apply_life).
        let why = format!("{why} (delivery {delivery})");
        u.set(GONE_WHY, AttributeValue::S(why));
        self.apply_life(u, repo, delivery, Some(at), None).await
    }

    /// Lifts the tombstone of `repo`'s row, if it has one: the name exists (again), by an
    /// event that happened at `at`. `at` `None` (an event whose payload has no time): the
    /// tombstone is lifted only if there is one (or this delivery lifted it), and no order is
    /// recorded. `None`: a later event of the name was applied already, or (unordered) there
    /// was nothing to lift.
    pub async fn restore_org_repo(
        &self,
        repo: &chronicle_domain::RepoName,
        delivery: &str,
        at: Option<OffsetDateTime>,
    ) -> Result<Option<LifeApplied>, StoreError> {
        let mut u = Update::default();
        u.remove(GONE_WHY);
        // Unordered: only a tombstone is lifted (or this delivery's own, delivered again).
        let also = at.is_none().then(|| {
            format!(
                "(attribute_exists({}) OR begins_with({}, {}))",
                u.name(GONE_WHY),
                u.name(LIFE_DELIVERY),
                u.value("delivery", Some(AttributeValue::S(format!("{delivery} "))))
            )
        });
        self.apply_life(u, repo, delivery, at, also).await
    }

    async fn apply_life(
        &self,
        mut u: Update,
        repo: &chronicle_domain::RepoName,
        delivery: &str,
        at: Option<OffsetDateTime>,
        also: Option<String>,
    ) -> Result<Option<LifeApplied>, StoreError> {
        let (owner, _) = repo.as_str().split_once('/').unwrap_or_default();
        // UPDATED_OLD may leave out an attribute whose value a write does not change (the
        // emulator does): the delivery is recorded with the write's own time, so its old value
        // always comes back, and tells a repeat of this delivery from a first time.
        let written = format!("{delivery} {}", rfc3339_millis(OffsetDateTime::now_utc()));
        u.set(LIFE_DELIVERY, AttributeValue::S(written));
        let mut conditions: Vec<String> = also.into_iter().collect();
        if let Some(at) = at {
            u.set(LIFE_AT, AttributeValue::S(rfc3339_millis(at)));
            // Ties apply: two events of one name in the same second are both applied.
            conditions.push(format!(
                "(attribute_not_exists({life}) OR {life} <= {at})",
                life = u.name(LIFE_AT),
                at = u.value(LIFE_AT, None),
            ));
        }
        let mut request = u
            .apply(self.update(&org_partition(owner), repo.as_str()))
            // Only the attributes this write changes, all of them its own.
            .return_values(ReturnValue::UpdatedOld);
        if !conditions.is_empty() {
            request = request.condition_expression(conditions.join(" AND "));
        }
        let result = request.send().await;
        self.meter.write();
        match result {
            Ok(out) => {
                let old = out.attributes.unwrap_or_default();
                Ok(Some(LifeApplied {
                    was_gone: old.contains_key(GONE_WHY),
                    again: old
                        .get(LIFE_DELIVERY)
                        .and_then(|v| v.as_s().ok())
                        .and_then(|v| v.split_once(' '))
                        .is_some_and(|(id, _)| id == delivery),
                }))
            }
            // A refused condition is `None`; any other error is the caller's.
            Err(e) => applied(&self.table, "UpdateItem", Err::<(), _>(e)).map(|_| None),
        }
    }

    /// Marks `repo`'s index page stale, if it has one: its build records its row on its
    /// owner's organisation page (or, forgotten, does not) and publishes that page again.
    /// Only the stale marker and `version` are written (the webhook's grant names them).
    pub async fn mark_index_rebuild(
        &self,
        repo: &str,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut u = Update::default();
        super::set_stale(&mut u, now);
        u.add(a::VERSION, AttributeValue::N("1".into()));
        let exists = format!("attribute_exists({})", u.name(a::MODULE));
        let result = u
            .apply(self.update(repo, INDEX_MODULE))
            .condition_expression(exists)
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "UpdateItem", result)
    }
}
