//! Repository contexts, one item per repository in the pages table at ([`CONTEXT_MODULE`]),
//! the context as JSON in one attribute. Written by enrichment, read by tagging and the page
//! builder. A write is conditional on the `checkedAt` it replaces, so of two refreshes that ran
//! at once exactly one is stored (both read the same files; either is right).

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use super::{applied, dynamo_error, StoreError};
use chronicle_domain::context::RepoContext;

/// The `module` of a repository's context item. Module names never start with `#`.
pub const CONTEXT_MODULE: &str = "#context";
const CONTEXT: &str = "context";
const CHECKED_AT: &str = "checkedAt";
const VERSION: &str = "contextVersion";

#[derive(Clone, Debug)]
pub struct ContextStore {
    client: Client,
    table: String,
}

impl ContextStore {
    /// The pages of the same table (a changed layout marks them for a rebuild).
    pub fn pages(&self) -> super::PageStore {
        super::PageStore::new(self.client.clone(), self.table.clone())
    }

    /// `table` is the pages table.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        ContextStore {
            client,
            table: table.into(),
        }
    }

    /// The stored context of `repo`; `None` if none was stored, or it cannot be read (logged:
    /// a context from an older version is refetched rather than failing anything).
    pub async fn get(&self, repo: &str) -> Result<Option<RepoContext>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("repo", AttributeValue::S(repo.to_string()))
            .key("module", AttributeValue::S(CONTEXT_MODULE.to_string()))
            // Only what is read: IAM's dynamodb:Attributes then bounds the read as well.
            .projection_expression("#context")
            .expression_attribute_names("#context", CONTEXT)
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "GetItem", &e))?;
        let Some(text) = out
            .item
            .as_ref()
            .and_then(|i| i.get(CONTEXT))
            .and_then(|v| v.as_s().ok())
        else {
            return Ok(None);
        };
        match serde_json::from_str(text) {
            Ok(context) => Ok(Some(context)),
            Err(e) => {
                tracing::warn!(repo, error = %e, "stored repository context unreadable; it will be fetched again");
                Ok(None)
            }
        }
    }

    /// When the stored context was checked, and by which version (`None`: none stored), read
    /// without the context itself: what enrichment asks on every batch.
    pub async fn checked(&self, repo: &str) -> Result<Option<(String, u32)>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("repo", AttributeValue::S(repo.to_string()))
            .key("module", AttributeValue::S(CONTEXT_MODULE.to_string()))
            .projection_expression("#checked, #version")
            .expression_attribute_names("#checked", CHECKED_AT)
            .expression_attribute_names("#version", VERSION)
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "GetItem", &e))?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let checked = item
            .get(CHECKED_AT)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        let version = item
            .get(VERSION)
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok(Some((checked, version)))
    }

    /// Stores `context` if the stored one is still the one checked at `replaces` (`None`: none
    /// stored). `false`: another refresh stored first.
    pub async fn put(
        &self,
        repo: &str,
        context: &RepoContext,
        replaces: Option<&str>,
    ) -> Result<bool, StoreError> {
        let json = fit(context).map_err(|e| StoreError::Dynamo {
            operation: "UpdateItem",
            table: self.table.clone(),
            message: format!("the context of {repo} cannot be written as JSON: {e}"),
        })?;
        // An update, not a put: it can only set these attributes, never replace an item whole
        // (enrichment is granted UpdateItem on this table, not PutItem).
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("repo", AttributeValue::S(repo.to_string()))
            .key("module", AttributeValue::S(CONTEXT_MODULE.to_string()))
            .update_expression("SET #checked = :new, #version = :version, #context = :context")
            .expression_attribute_names("#checked", CHECKED_AT)
            .expression_attribute_names("#version", VERSION)
            .expression_attribute_names("#context", CONTEXT)
            .expression_attribute_values(":new", AttributeValue::S(context.checked_at.clone()))
            .expression_attribute_values(":version", AttributeValue::N(context.version.to_string()))
            .expression_attribute_values(":context", AttributeValue::S(json));
        update = match replaces {
            None => update
                .condition_expression("attribute_not_exists(#module)")
                .expression_attribute_names("#module", "module"),
            Some(checked) => update
                .condition_expression("#checked = :checked")
                .expression_attribute_values(":checked", AttributeValue::S(checked.to_string())),
        };
        applied(&self.table, "UpdateItem", update.send().await)
    }
}

/// The most a stored context's JSON may hold: DynamoDB's item limit is 400 KB.
pub const MAX_CONTEXT_BYTES: usize = 350_000;

/// The context as JSON within [`MAX_CONTEXT_BYTES`]: what is least needed goes first (the
/// ETags of what was seen, so the next refresh asks unconditionally; then descriptions and
/// README leads; then packages beyond what fits; then CODEOWNERS).
fn fit(context: &RepoContext) -> Result<String, serde_json::Error> {
    let mut context = std::borrow::Cow::Borrowed(context);
    let mut json = serde_json::to_string(&*context)?;
    let mut step = 0;
    while json.len() > MAX_CONTEXT_BYTES {
        let c = context.to_mut();
        match step {
            0 => c.seen.clear(),
            1 => {
                c.packages.iter_mut().for_each(|p| p.description = None);
                c.about
                    .values_mut()
                    .for_each(|a| a.text = chronicle_domain::cap(&a.text, 120));
            }
            2 => c.about.clear(),
            _ if !c.packages.is_empty() => c.packages.truncate(c.packages.len() / 2),
            _ => {
                c.codeowners = None;
                c.top_level = None;
            }
        }
        if step > 64 {
            break; // nothing left to cut: what remains is a few fields
        }
        step += 1;
        json = serde_json::to_string(&*context)?;
    }
    if step > 0 {
        tracing::warn!(
            steps = step,
            bytes = json.len(),
            "repository context cut to fit one item"
        );
    }
    Ok(json)
}

/// When a context was read, and what it was.
type Cached = (std::time::Instant, Option<std::sync::Arc<RepoContext>>);

/// Stored contexts read at most once per [`ContextCache::REFRESH`] per repository and process:
/// a worker tagging thousands of PRs of one repository reads its context once every few
/// minutes, not once per PR.
#[derive(Debug)]
pub struct ContextCache {
    store: ContextStore,
    cached: std::sync::Mutex<std::collections::HashMap<String, Cached>>,
}

impl ContextCache {
    /// How long a context read stays in use. A refresh lands in DynamoDB at most a day apart,
    /// so minutes of delay change nothing.
    pub const REFRESH: std::time::Duration = std::time::Duration::from_secs(300);
    /// How long "none stored" stays in use.
    pub const REFRESH_MISSING: std::time::Duration = std::time::Duration::from_secs(30);

    pub fn new(store: ContextStore) -> Self {
        ContextCache {
            store,
            cached: Default::default(),
        }
    }

    /// The repository's context (`None`: none stored yet). A read error is an error: tagging
    /// without the context it should have would name modules differently.
    pub async fn get(&self, repo: &str) -> Result<Option<std::sync::Arc<RepoContext>>, StoreError> {
        self.get_at_least(repo, None).await
    }

    /// [`Self::get`], read again unless the cached context was checked at `checked_at` or
    /// later (RFC 3339, as the context writes it).
    pub async fn get_at_least(
        &self,
        repo: &str,
        checked_at: Option<&str>,
    ) -> Result<Option<std::sync::Arc<RepoContext>>, StoreError> {
        let now = std::time::Instant::now();
        if let Some((at, context)) = self
            .cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(repo)
        {
            let new_enough = checked_at.is_none_or(|wanted| {
                context
                    .as_ref()
                    .is_some_and(|c| c.checked_at.as_str() >= wanted)
            });
            // No context yet: asked again sooner, as one is about to be stored.
            let keep = if context.is_some() {
                Self::REFRESH
            } else {
                Self::REFRESH_MISSING
            };
            if now.duration_since(*at) < keep && new_enough {
                return Ok(context.clone());
            }
        }
        let context = self.store.get(repo).await?.map(std::sync::Arc::new);
        self.cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(repo.to_string(), (now, context.clone()));
        Ok(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_domain::context::{About, Package, Seen, MAX_ABOUT_CHARS, MAX_READMES};

    #[test]
    fn the_largest_context_fits_one_item() {
        let description = "d".repeat(chronicle_domain::context::MAX_DESCRIPTION_CHARS);
        let context = RepoContext {
            version: chronicle_domain::context::CONTEXT_VERSION,
            checked_at: "2026-12-03T00:00:00Z".into(),
            codeowners: Some("x".repeat(chronicle_domain::context::MAX_CODEOWNERS_BYTES)),
            codeowners_path: Some(".github/CODEOWNERS".into()),
            team_file: Some("t".repeat(chronicle_domain::context::MAX_TEAM_FILE_BYTES)),
            packages: (0..chronicle_domain::context::MAX_PACKAGES)
                .map(|i| Package {
                    name: format!("{}-{i}", "n".repeat(200)),
                    dir: format!("{}/{i}", "d".repeat(250)),
                    description: Some(description.clone()),
                    manifest: Some(format!("{}/{i}/Cargo.toml", "d".repeat(250))),
                })
                .collect(),
            seen: (0..chronicle_domain::context::MAX_PACKAGES)
                .map(|i| {
                    (
                        format!("file:{}/{i}/Cargo.toml", "d".repeat(250)),
                        Seen {
                            etag: Some(format!("W/\"{}\"", "e".repeat(64))),
                            found: true,
                            ..Seen::default()
                        },
                    )
                })
                .collect(),
            top_level: Some(
                (0..MAX_READMES)
                    .map(|i| format!("{}{i}", "t".repeat(100)))
                    .collect(),
            ),
            about: (0..chronicle_domain::context::MAX_PACKAGES + MAX_READMES)
                .map(|i| {
                    (
                        format!("{}/{i}", "d".repeat(250)),
                        About {
                            text: "a".repeat(MAX_ABOUT_CHARS),
                            source: format!("{}/{i}/README.md", "d".repeat(250)),
                        },
                    )
                })
                .collect(),
        };
        let json = fit(&context).unwrap();
        assert!(json.len() <= MAX_CONTEXT_BYTES, "{}", json.len());
        let back: RepoContext = serde_json::from_str(&json).unwrap();
        assert!(!back.packages.is_empty(), "packages are kept before ETags");
        let small = RepoContext::default();
        assert_eq!(fit(&small).unwrap(), serde_json::to_string(&small).unwrap());
    }
}
