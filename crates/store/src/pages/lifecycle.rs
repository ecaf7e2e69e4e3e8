//! A repository name's life on its owner's organisation page, as the webhook learns it from
//! GitHub (`repository` renamed / transferred / deleted / created, `installation_repositories`
//! removed / added).
//!
//! - A name that no longer exists (or that the App no longer sees) is forgotten: its row is
//!   removed and a tombstone (`goneWhy`) is left on its item, so that a late build of that
//!   name (a PR of the old name delivered after the rename) cannot write the row back:
//!   [`PageStore::put_org_repo`] is conditional on it.
//! - A name that exists again (renamed back, a new repository of a deleted one's name, added
//!   to the installation again) has its tombstone lifted; its next index build lists it.
//! - Each write is conditional on the delivery not having been applied (`lifeDeliveries`, the
//!   deliveries applied to this name) and on no later event of the name having been (`lifeAt`,
//!   when the last one was received): a duplicate or late delivery changes nothing.
//!
//! The webhook makes these writes; its role may write only these attributes, only in the
//! `#org/` partitions (template.yaml, `ForgetOrgRows`).

use super::org::{org_partition, ORG};
use super::*;

/// Why the name's row was forgotten; present while it is.
pub(super) const GONE_WHY: &str = "goneWhy";
/// When the last lifecycle event applied to the name was received.
const LIFE_AT: &str = "lifeAt";
/// The deliveries applied to the name (a handful over a repository's life).
const LIFE_DELIVERIES: &str = "lifeDeliveries";

impl PageStore {
    /// Forgets `repo`'s row on its owner's organisation page (`why`: "renamed to …",
    /// "deleted", …), for the delivery `delivery` received at `at`. `false`: that delivery, or
    /// a later event of the name, was applied already; nothing was written.
    pub async fn forget_org_repo(
        &self,
        repo: &chronicle_domain::RepoName,
        why: &str,
        delivery: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut u = Update::default();
        u.remove(ORG);
        u.set(GONE_WHY, AttributeValue::S(why.to_string()));
        self.apply_life(u, repo, delivery, at, None).await
    }

    /// Lifts the tombstone of `repo`'s row, if it has one: the name exists again (a delivery
    /// received at `at`). `false`: no tombstone, or the delivery (or a later one) was applied.
    pub async fn restore_org_repo(
        &self,
        repo: &chronicle_domain::RepoName,
        delivery: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut u = Update::default();
        u.remove(GONE_WHY);
        let gone = format!("attribute_exists({})", u.name(GONE_WHY));
        self.apply_life(u, repo, delivery, at, Some(gone)).await
    }

    async fn apply_life(
        &self,
        mut u: Update,
        repo: &chronicle_domain::RepoName,
        delivery: &str,
        at: OffsetDateTime,
        also: Option<String>,
    ) -> Result<bool, StoreError> {
        let (owner, _) = repo.as_str().split_once('/').unwrap_or_default();
        u.set(LIFE_AT, AttributeValue::S(rfc3339_millis(at)));
        u.add(
            LIFE_DELIVERIES,
            AttributeValue::Ss(vec![delivery.to_string()]),
        );
        let mut condition = format!(
            "(attribute_not_exists({life}) OR {life} <= {at}) AND NOT contains({deliveries}, {delivery})",
            life = u.name(LIFE_AT),
            at = u.value(LIFE_AT, None),
            deliveries = u.name(LIFE_DELIVERIES),
            delivery = u.value("delivery", Some(AttributeValue::S(delivery.to_string()))),
        );
        if let Some(also) = also {
            condition = format!("{also} AND {condition}");
        }
        let result = u
            .apply(self.update(&org_partition(owner), repo.as_str()))
            .condition_expression(condition)
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "UpdateItem", result)
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
        u.set(a::STALE, AttributeValue::S(STALE_MARK.into()));
        let since = u.name(a::STALE_SINCE);
        let now_value = u.value("now", Some(AttributeValue::S(rfc3339_millis(now))));
        u.sets
            .push(format!("{since} = if_not_exists({since}, {now_value})"));
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
