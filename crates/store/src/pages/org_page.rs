//! The organisation page's own item (`#org/<owner>` / `#index`) as a page to build: marked
//! stale when a repository's index build recorded its row, built once per builder tick under
//! the build lease like every page (`claim_build`, `complete_build`), and, when its build
//! failed, held back instead of being tried again at every tick: for a refusal only the
//! operator can fix, a growing delay; for Notion's brief trouble, its `Retry-After` (or the
//! rebuild interval), with nothing recorded as a failure. Content Notion refused is remembered
//! by its hash ([`OrgRefusal`]), so the same content is not sent again while unchanged.

pub use super::org::org_partition;
use super::*;

/// The lease owner of an organisation page whose last build failed: no build claims it before
/// its `buildUntil` (the retry time).
pub const ORG_BACKOFF: &str = "#backoff";

/// Content of an organisation page that Notion refused (400/413): its hash, when, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgRefusal {
    pub hash: String,
    pub at: String,
    pub error: String,
}

/// The attributes of an [`OrgRefusal`] on the organisation page's item.
const REFUSED_HASH: &str = "refusedHash";
const REFUSED_AT: &str = "refusedAt";
const REFUSED_ERROR: &str = "refusedError";

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

    /// Holds `owner`'s organisation page back until `retry_at` without recording a failure
    /// (Notion rate limited it, had brief trouble, or the content it refused is unchanged):
    /// its lease passes to [`ORG_BACKOFF`]; it stays stale. Only while `lease_owner` holds it.
    pub async fn hold_org(
        &self,
        owner: &str,
        lease_owner: &str,
        retry_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut u = Update::default();
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

    /// The content of `owner`'s organisation page Notion last refused, if any.
    pub async fn org_refusal(&self, owner: &str) -> Result<Option<OrgRefusal>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(&org_partition(owner), INDEX_MODULE)))
            .projection_expression("#h, #at, #e")
            .expression_attribute_names("#h", REFUSED_HASH)
            .expression_attribute_names("#at", REFUSED_AT)
            .expression_attribute_names("#e", REFUSED_ERROR)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "GetItem", &e))?;
        self.meter.read(usize::from(out.item.is_some()));
        let item = out.item.unwrap_or_default();
        let text = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
        Ok(match (text(REFUSED_HASH), text(REFUSED_AT)) {
            (Some(hash), Some(at)) => Some(OrgRefusal {
                hash,
                at,
                error: text(REFUSED_ERROR).unwrap_or_default(),
            }),
            _ => None,
        })
    }

    /// Records that Notion refused `owner`'s organisation page made from content `hash`
    /// (`None`: forgets the refusal, after content was accepted).
    pub async fn record_org_refusal(
        &self,
        owner: &str,
        refusal: Option<&OrgRefusal>,
    ) -> Result<(), StoreError> {
        let mut u = Update::default();
        match refusal {
            Some(r) => {
                u.set(REFUSED_HASH, AttributeValue::S(r.hash.clone()));
                u.set(REFUSED_AT, AttributeValue::S(r.at.clone()));
                u.set(REFUSED_ERROR, AttributeValue::S(r.error.clone()));
            }
            None => {
                for gone in [REFUSED_HASH, REFUSED_AT, REFUSED_ERROR] {
                    u.remove(gone);
                }
            }
        }
        u.apply(self.update(&org_partition(owner), INDEX_MODULE))
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "UpdateItem", &e))?;
        self.meter.write();
        Ok(())
    }
}
