//! The repository context enrichment needs before it tags: refreshed when stale, retried with a
//! backoff after a failure, and waited for (boundedly) when it was never stored.

use super::*;

/// After a repository's context refresh failed, this process waits this long before trying
/// again (at the next batch), twice as long after each further failure, up to
/// [`CONTEXT_RETRY_MAX`]: seconds, so a transient failure costs a batch, not the history.
pub(super) const CONTEXT_RETRY_AFTER: Duration = Duration::from_secs(5);

pub(super) const CONTEXT_RETRY_MAX: Duration = Duration::from_secs(60);

/// A row of a repository whose context was never stored is parked at least this long: the next
/// retry run after it refreshes the context first, then enriches the row.
pub(super) const CONTEXT_WAIT: Duration = Duration::from_secs(5);

/// A row waits for its repository's first context no longer than this (from when it was
/// received): then it is enriched without it, rather than held for GitHub's rate limit wait.
pub(super) const CONTEXT_MAX_WAIT: Duration = Duration::from_secs(15 * 60);

/// Whether a repository's context is there to tag its rows with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Stored (fresh or not), or not kept at all (no contexts table).
    Ready,
    /// Never stored, and its refresh failed: the repository's rows wait for it.
    Missing,
}

/// How long to wait before refreshing a context again after `failures` failures in a row.
pub(super) fn context_backoff(failures: u32) -> Duration {
    CONTEXT_RETRY_AFTER
        .saturating_mul(1 << failures.saturating_sub(1).min(8))
        .min(CONTEXT_RETRY_MAX)
}

/// What [`refresh_repo_context`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextRefresh {
    /// The stored context is younger than a day (and of this version): nothing asked.
    Fresh,
    /// Fetched and stored: how many packages, and where CODEOWNERS was found.
    Stored {
        packages: usize,
        codeowners: Option<String>,
    },
    /// Fetched, but another worker stored one first (either is right).
    StoredByAnother,
}

/// Why a repository's context was not refreshed (the stored one stays in use).
#[derive(Debug, thiserror::Error)]
pub enum ContextRefreshError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    GitHub(#[from] crate::context::ContextError),
}

impl ContextRefreshError {
    /// GitHub refused the token (401/403): asking again will not help.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            ContextRefreshError::GitHub(crate::context::ContextError::GitHub(
                GitHubError::Refused {
                    status: 401 | 403,
                    ..
                }
            ))
        )
    }
}

/// Refreshes `repo`'s stored context when it is older than a day (or another version's):
/// reads the stored `checkedAt` alone first (a fresh context costs one small read), then the
/// context for its ETags, fetches conditionally until `deadline`, and stores the result
/// conditional on the `checkedAt` it read, so an unreadable context is replaced and two
/// refreshes at once store one. Used by enrichment (each batch) and by backfill (before the
/// first page, so an imported history is tagged with the context from its first PR).
pub async fn refresh_repo_context(
    store: &crate::store::ContextStore,
    github: &GitHubClient,
    repo: &RepoName,
    now: OffsetDateTime,
    deadline: Instant,
) -> Result<ContextRefresh, ContextRefreshError> {
    use crate::context;
    let checked = store.checked(repo.as_str()).await?;
    let fresh = checked
        .as_ref()
        .is_some_and(|(at, version)| context::is_fresh(at, *version, now, context::DEFAULT_TTL));
    if fresh {
        return Ok(ContextRefresh::Fresh);
    }
    let previous = store.get(repo.as_str()).await?;
    let fetched = context::refresh(github, repo, previous.as_ref(), now, deadline).await?;
    // (A first context changes no page: the rows of a repository without one wait for it.)
    if previous.as_ref().is_some_and(|p| !p.same_layout(&fetched)) {
        // Marked before the context is stored: a crash in between rebuilds the pages once more,
        // never leaves them showing the old layout. (Retagging history is `chronicle reprocess`.)
        store
            .pages()
            .mark_layout_changed(
                repo.as_str(),
                crate::store::INDEX_MODULE,
                &fetched.checked_at,
                now,
            )
            .await?;
    }
    let replaces = checked.as_ref().map(|(at, _)| at.as_str());
    if store.put(repo.as_str(), &fetched, replaces).await? {
        tracing::info!(
            repo = %repo,
            packages = fetched.packages.len(),
            codeowners = fetched.codeowners_path.as_deref().unwrap_or("none"),
            "repository context refreshed"
        );
        Ok(ContextRefresh::Stored {
            packages: fetched.packages.len(),
            codeowners: fetched.codeowners_path,
        })
    } else {
        tracing::debug!(repo = %repo, "repository context refreshed by another worker");
        Ok(ContextRefresh::StoredByAnother)
    }
}

impl EnrichHandler {
    /// Fetches `repo`'s context again if the stored one is older than a day. Never fails the
    /// batch: whatever goes wrong is logged and the stored context stays in use; the refresh is
    /// tried again at a later batch, seconds later ([`CONTEXT_RETRY_AFTER`], doubling). A
    /// refresh gets at most half the time left, so the records still get theirs. `false`: the
    /// repository has no stored context to tag with (its rows wait for one).
    pub async fn refresh_context(
        &self,
        repo: &RepoName,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> bool {
        let (Some(store), Some(access)) = (&self.contexts, &self.github) else {
            return true;
        };
        let github = match access.for_repo(repo).await {
            Ok(github) => github,
            Err(e) if e.is_permanent() => {
                // Not installed there (any more): nothing to read, its rows go ahead without.
                tracing::warn!(repo = %repo, error = %e, "the repository's context cannot be read");
                return true;
            }
            Err(e) => {
                tracing::warn!(repo = %repo, error = %e, "no installation token for the repository's context");
                return false;
            }
        };
        let backing_off = self
            .context_failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(repo.as_str())
            .is_some_and(|(at, failures)| at.elapsed() < context_backoff(*failures));
        if !backing_off {
            let left = deadline.saturating_duration_since(Instant::now());
            let budget = Instant::now() + left / 2;
            match refresh_repo_context(store, &github.rest, repo, now, budget).await {
                Ok(_) => {
                    self.context_failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(repo.as_str());
                    return true;
                }
                Err(e) => {
                    let failures = {
                        let mut all = self
                            .context_failures
                            .lock()
                            .unwrap_or_else(|e| e.into_inner());
                        let entry = all
                            .entry(repo.as_str().to_string())
                            .or_insert((Instant::now(), 0));
                        *entry = (Instant::now(), entry.1 + 1);
                        entry.1
                    };
                    tracing::warn!(
                        repo = %repo,
                        error = %e,
                        retry_after_s = context_backoff(failures).as_secs(),
                        "repository context not refreshed; the stored one (if any) stays in use"
                    );
                    if e.is_refused() {
                        // The token may not read the repository's contents: there will be no
                        // context to wait for, and its rows go ahead without one.
                        return true;
                    }
                }
            }
        }
        // Not refreshed: an older stored context still tags correctly.
        match store.checked(repo.as_str()).await {
            Ok(stored) => stored.is_some(),
            Err(e) => {
                tracing::warn!(repo = %repo, error = %e, "could not tell whether a context is stored");
                false
            }
        }
    }
}
