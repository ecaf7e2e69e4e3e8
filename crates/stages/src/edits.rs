//! Edits after merge. A PR's title, body or labels can change after its row was summarized (the
//! webhook stores `edited`, `labeled` and `unlabeled` deliveries of a merged PR, and the
//! redeliverer asks for the ones that failed); its entries must show them. The PR table's
//! stream delivers such a change as a MODIFY whose old and new images are both summarized (the
//! event source's filter), and this puts the row back to be summarized, its summary kept: the
//! summarize worker rewrites its entries in place (title, labels, kind) with no LLM call, and
//! marks its pages stale.
//!
//! The webhook itself never touches pipeline state (invariant 3); a change that lands while a
//! summary is being written is caught by the summary's commit instead (it is conditional on
//! the row's own fields as the claim read them).

use aws_lambda_events::event::dynamodb::EventRecord;

use crate::domain::RepoName;
use crate::store::{attr, PrStore, StoreError};

/// What a MODIFY record came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditOutcome {
    /// The PR's own fields changed after its summary: put back to be summarized.
    Requeued,
    /// Not an edit of a summarized row (its own fields are the same, or it is not summarized).
    Unchanged,
    /// Summarized again (or put back) since this record was written: nothing to do.
    Superseded,
}

/// The PR's own fields changed between the record's images of a summarized row: the row goes
/// back to be summarized, if it is still summarized as the new image says.
pub async fn requeue_if_edited(
    store: &PrStore,
    repo: &RepoName,
    number: u64,
    record: &EventRecord,
) -> Result<EditOutcome, StoreError> {
    let text = |image: &serde_dynamo::Item, name: &str| -> Option<String> {
        match image.get(name) {
            Some(serde_dynamo::AttributeValue::S(s)) => Some(s.clone()),
            _ => None,
        }
    };
    let (old, new) = (&record.change.old_image, &record.change.new_image);
    let Some(summarized_at) = text(new, attr::SUMMARIZED_AT) else {
        return Ok(EditOutcome::Unchanged);
    };
    if text(old, attr::SUMMARIZED_AT).is_none()
        || text(old, attr::ENTRY_HASH) == text(new, attr::ENTRY_HASH)
    {
        return Ok(EditOutcome::Unchanged);
    }
    Ok(
        if store
            .requeue_summarized(repo, number, &summarized_at)
            .await?
        {
            tracing::info!(repo = %repo, pr = number, "edited after its summary: its entries are written again");
            EditOutcome::Requeued
        } else {
            EditOutcome::Superseded
        },
    )
}
