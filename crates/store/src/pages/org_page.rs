//! The organisation page's own item (`#org/<owner>` / `#index`) as a page to build: marked
//! stale when a repository's index build recorded its row, built once per builder tick under
//! the build lease like every page (`claim_build`, `complete_build`), and, when its build
//! failed, held back for a growing delay instead of being tried again at every tick.

pub use super::org::org_partition;
use super::*;

/// The lease owner of an organisation page whose last build failed: no build claims it before
/// its `buildUntil` (the retry time).
pub const ORG_BACKOFF: &str = "#backoff";

/// The owner an organisation page's partition (`#org/<owner>`) belongs to; `None` for a
/// repository's.
pub fn org_owner(partition: &str) -> Option<&str> {
    partition.strip_prefix("#org/")
}

impl PageStore {
    /// Marks `owner`'s organisation page to be built at the next tick. `full`: its content is
    /// sent again even where its recorded hash says it is unchanged (a replace may have landed
    /// after another's, or the page was created empty).
    pub async fn mark_org_stale(
        &self,
        owner: &str,
        full: bool,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.mark(&org_partition(owner), INDEX_MODULE, &[], None, full, now)
            .await
    }

    /// Records a failed build of `owner`'s organisation page on its item (the error, what the
    /// operator must do, when) and holds it back until `retry_at`: its lease passes to
    /// [`ORG_BACKOFF`], so no tick claims it before then. Only while `lease_owner` holds it;
    /// `false`: it did not (nothing written).
    pub async fn record_org_failure(
        &self,
        owner: &str,
        lease_owner: &str,
        error: &str,
        advice: Option<&str>,
        now: OffsetDateTime,
        retry_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut u = Update::default();
        u.set(a::LAST_ERROR, AttributeValue::S(error.to_string()));
        match advice {
            Some(text) => u.set(a::ADVICE, AttributeValue::S(text.to_string())),
            None => u.remove(a::ADVICE),
        }
        u.set(a::LAST_ERROR_AT, AttributeValue::S(rfc3339_millis(now)));
        u.set(a::LAST_BUILT_AT, AttributeValue::S(rfc3339_millis(now)));
        u.add(a::FAILED_BUILDS, AttributeValue::N("1".into()));
        let holder = u.name(a::BUILD_OWNER);
        let me = u.value("me", Some(AttributeValue::S(lease_owner.to_string())));
        u.set(a::BUILD_OWNER, AttributeValue::S(ORG_BACKOFF.to_string()));
        u.set(a::BUILD_UNTIL, AttributeValue::S(rfc3339_millis(retry_at)));
        let result = u
            .apply(self.update(&org_partition(owner), INDEX_MODULE))
            .condition_expression(format!("{holder} = {me}"))
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "UpdateItem", result)
    }
}
