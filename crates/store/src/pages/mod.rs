//! The pages table: one item per (repo, module) page, and one per repo for its index
//! ([`INDEX_MODULE`]). Pages are views of the entries table; this table only says which pages
//! are stale, holds the build lease, the figures of each year of entries (so a build reads only
//! the years that changed), and where the pages were published in Notion.
//!
//! - Marking a page stale bumps `version` and adds the changed years; the sparse `stale` index
//!   lists stale pages, so the builder's cost is the number of stale pages, not of pages.
//! - A build claims the page (a lease, at most once per rebuild interval), and completes it
//!   conditionally on `version`: a change that lands during the build keeps the page stale.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use time::OffsetDateTime;

use super::{applied, dynamo_error, Item, Meter, StoreError, Update};
use chronicle_domain::{rfc3339_millis, AuthorCount, NotionPage, PageItem, YearStats};

/// Attribute names of the pages table.
pub mod page_attr {
    pub const REPO: &str = "repo";
    pub const MODULE: &str = "module";
    pub const VERSION: &str = "version";
    pub const BUILT_VERSION: &str = "builtVersion";
    /// The stale index's partition key: present only while the page needs a build.
    pub const STALE: &str = "stale";
    pub const STALE_SINCE: &str = "staleSince";
    pub const STALE_YEARS: &str = "staleYears";
    pub const FULL_REBUILD: &str = "fullRebuild";
    pub const LAST_BUILT_AT: &str = "lastBuiltAt";
    pub const BUILD_OWNER: &str = "buildOwner";
    pub const BUILD_UNTIL: &str = "buildUntil";
    pub const YEARS: &str = "years";
    pub const MAIN_CUTOFF: &str = "mainCutoff";
    pub const ENTRY_COUNT: &str = "entryCount";
    pub const FIRST_MERGED_AT: &str = "firstMergedAt";
    pub const LATEST_MERGED_AT: &str = "latestMergedAt";
    pub const RECENT_AUTHORS: &str = "recentAuthors";
    pub const STORY: &str = "story";
    /// When the module's page was removed because it has no entries (see `PageItem`).
    pub const PAGE_REMOVED_AT: &str = "pageRemovedAt";
    /// On a repository's index item: when a context refresh changed the repository's layout
    /// (owners, packages, READMEs). The index build then marks every module page stale.
    pub const LAYOUT_CHANGED_AT: &str = "layoutChangedAt";
    pub const STALE_KEYS: &str = "staleKeys";
    pub const STALE_KEYS_LOST: &str = "staleKeysLost";
    pub const NOTION: &str = "notion";
    /// On an organisation page's item: see `PageItem::woken_at`.
    pub const WOKEN_AT: &str = "wokenAt";

    pub const LAST_ERROR: &str = "lastError";
    pub const ADVICE: &str = "advice";
    pub const LAST_ERROR_AT: &str = "lastErrorAt";
    pub const FAILED_BUILDS: &str = "failedBuilds";
}
use page_attr as a;

/// The `module` of a repository's index page item. Module names never start with `#`.
pub const INDEX_MODULE: &str = "#index";
/// The sparse GSI over stale pages (hash `stale`, range `staleSince`).
pub const STALE_INDEX: &str = "stale";
/// The one value of the `stale` marker.
const STALE_MARK: &str = "1";
/// Changed entries a page item remembers between builds (their order keys, about 35 bytes each).
pub const STALE_KEYS_MAX: usize = 100;
/// Why a mark with keys was refused: the page item holds [`STALE_KEYS_MAX`] already.
const KEYS_FULL: &str = "the page's changed-entry keys are full";

/// A stale page, as the stale index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StalePage {
    pub repo: String,
    pub module: String,
    pub stale_since: String,
    pub last_built_at: Option<String>,
    pub build_until: Option<String>,
}

impl StalePage {
    pub fn is_index(&self) -> bool {
        self.module == INDEX_MODULE
    }
}

/// What claiming a page's build gave.
#[derive(Debug, Clone, PartialEq)]
pub enum BuildClaim {
    /// This builder holds the build lease; the page as it is now.
    Claimed(Box<PageItem>),
    /// Built since it was listed: nothing to do.
    NotStale,
    /// Another builder's lease is live.
    Held,
    /// Built less than one rebuild interval ago; it waits for the next tick.
    TooSoon,
}

/// What a build leaves on the page item.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildResult {
    pub years: std::collections::BTreeMap<String, YearStats>,
    /// The years whose figures the build changed (or removed): only those are written.
    pub changed_years: std::collections::BTreeSet<String>,
    pub main_cutoff: Option<String>,
    pub entry_count: u64,
    pub first_merged_at: Option<String>,
    pub latest_merged_at: Option<String>,
    pub recent_authors: Vec<AuthorCount>,
    /// The module's LLM-written story, when one is configured (`None`: left as it is, unless
    /// the page was removed: then removed too).
    pub story: Option<chronicle_domain::StoredStory>,
    /// The module has no entries: its pages were removed, none published
    /// ([`page_attr::PAGE_REMOVED_AT`] is set; any other build clears it).
    pub page_removed: bool,
}

/// How a build ended on the page item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildCompletion {
    /// Nothing changed during the build: the page is no longer stale.
    Clean,
    /// Entries changed during the build: it stays stale and is built again later.
    StillStale,
}

mod lifecycle;
mod notion;
mod org;
mod org_page;
pub use notion::*;
pub use org_page::*;

#[derive(Clone, Debug)]
pub struct PageStore {
    client: Client,
    table: String,
    meter: Meter,
}

impl PageStore {
    /// The repository contexts, kept in this table.
    pub fn contexts(&self) -> super::ContextStore {
        super::ContextStore::new(self.client.clone(), self.table.clone())
    }

    pub fn new(client: Client, table: impl Into<String>) -> Self {
        PageStore {
            client,
            table: table.into(),
            meter: Meter::default(),
        }
    }

    pub fn with_meter(mut self, meter: Meter) -> Self {
        self.meter = meter;
        self
    }

    pub fn table_name(&self) -> &str {
        &self.table
    }

    fn key(repo: &str, module: &str) -> Item {
        HashMap::from([
            (a::REPO.to_string(), AttributeValue::S(repo.to_string())),
            (a::MODULE.to_string(), AttributeValue::S(module.to_string())),
        ])
    }

    fn update(&self, repo: &str, module: &str) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(repo, module)))
    }

    /// Marks a page stale: its entries of `years` changed (none: only its figures did), which
    /// ones not said, so those years are read again whole. Never conditional: marking twice
    /// costs one more build at most, never a lost one.
    pub async fn mark_stale(
        &self,
        repo: &str,
        module: &str,
        years: &[i32],
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.mark(repo, module, years, None, false, now).await
    }

    /// Marks a page stale because these entries (their order keys) were written or deleted: a
    /// build reads again only the years of those its module page does not hold. Up to
    /// [`STALE_KEYS_MAX`] keys are kept; past that, their years are read again whole.
    pub async fn mark_entries_stale(
        &self,
        repo: &str,
        module: &str,
        keys: &[String],
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let years: Vec<i32> = keys.iter().map(|k| chronicle_domain::year_of(k)).collect();
        self.mark(repo, module, &years, Some(keys), false, now)
            .await
    }

    /// Marks a page for a rebuild of every year (its pages must be published anew).
    pub async fn mark_full_rebuild(
        &self,
        repo: &str,
        module: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.mark(repo, module, &[], None, true, now).await
    }

    /// Notes that `repo`'s layout changed in its context checked at `checked_at`, and marks the
    /// page stale: the index's build passes it on to every module page, whose build then reads
    /// a context at least that new (not a cached older one). A clean build clears it.
    ///
    /// Only a page that exists is marked (one that does not has nothing to rebuild; its first
    /// build reads the context anyway), and only `layoutChangedAt`, the stale marker and
    /// `version` are written: enrichment, which parses untrusted content, may write nothing else
    /// to this table (its IAM grant names these attributes).
    pub async fn mark_layout_changed(
        &self,
        repo: &str,
        module: &str,
        checked_at: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut u = Update::default();
        u.set(
            a::LAYOUT_CHANGED_AT,
            AttributeValue::S(checked_at.to_string()),
        );
        set_stale(&mut u, now);
        u.add(a::VERSION, AttributeValue::N("1".into()));
        let exists = format!("attribute_exists({})", u.name(a::MODULE));
        let result = u
            .apply(self.update(repo, module))
            .condition_expression(exists)
            .send()
            .await;
        self.meter.write();
        // `false`: no such page, nothing to mark.
        applied(&self.table, "UpdateItem", result).map(|_| ())
    }

    async fn mark(
        &self,
        repo: &str,
        module: &str,
        years: &[i32],
        keys: Option<&[String]>,
        full: bool,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        if let Some(keys) = keys.filter(|k| !k.is_empty()) {
            if self
                .mark_with(
                    Update::default(),
                    repo,
                    module,
                    years,
                    Some(keys),
                    full,
                    now,
                )
                .await
                .map(|()| true)
                .or_else(|e| match e {
                    StoreError::Dynamo { ref message, .. } if message == KEYS_FULL => Ok(false),
                    e => Err(e),
                })?
            {
                return Ok(());
            }
        }
        self.mark_with(Update::default(), repo, module, years, None, full, now)
            .await
    }

    /// [`Self::mark`], in the same write as `u`'s own clauses. `keys`: added to `staleKeys` if
    /// it holds fewer than [`STALE_KEYS_MAX`] (else refused with [`KEYS_FULL`]); `None` with
    /// years: which entries is not known (`staleKeysLost`).
    #[allow(clippy::too_many_arguments)]
    async fn mark_with(
        &self,
        mut u: Update,
        repo: &str,
        module: &str,
        years: &[i32],
        keys: Option<&[String]>,
        full: bool,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        set_stale(&mut u, now);
        // The maps nested writes go into must exist.
        for map in [a::NOTION, a::YEARS] {
            let name = u.name(map);
            let empty = u.value("empty", Some(AttributeValue::M(HashMap::new())));
            u.sets
                .push(format!("{name} = if_not_exists({name}, {empty})"));
        }
        if full {
            u.set(a::FULL_REBUILD, AttributeValue::Bool(true));
        }
        u.add(a::VERSION, AttributeValue::N("1".into()));
        if !years.is_empty() {
            let mut set: Vec<String> = years.iter().map(|y| format!("{y:04}")).collect();
            set.sort();
            set.dedup();
            u.add(a::STALE_YEARS, AttributeValue::Ss(set));
        }
        let mut condition = None;
        match keys {
            Some(keys) => {
                let mut set = keys.to_vec();
                set.sort();
                set.dedup();
                u.add(a::STALE_KEYS, AttributeValue::Ss(set));
                condition = Some(format!(
                    "attribute_not_exists({keys}) OR size({keys}) < {max}",
                    keys = u.name(a::STALE_KEYS),
                    max = u.value(
                        "maxKeys",
                        Some(AttributeValue::N(STALE_KEYS_MAX.to_string()))
                    ),
                ));
            }
            None if !years.is_empty() => u.set(a::STALE_KEYS_LOST, AttributeValue::Bool(true)),
            None => {}
        }
        let request = u
            .apply(self.update(repo, module))
            .set_condition_expression(condition);
        let result = request.send().await;
        self.meter.write();
        if applied(&self.table, "UpdateItem", result)? {
            Ok(())
        } else {
            Err(StoreError::Dynamo {
                operation: "UpdateItem",
                table: self.table.clone(),
                message: KEYS_FULL.into(),
            })
        }
    }

    /// Every stale page, oldest first (the sparse index: its cost is the stale pages only).
    pub async fn stale_pages(&self) -> Result<Vec<StalePage>, StoreError> {
        let mut pages = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(STALE_INDEX)
                .key_condition_expression("#stale = :stale")
                .expression_attribute_names("#stale", a::STALE)
                .expression_attribute_values(":stale", AttributeValue::S(STALE_MARK.into()))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| dynamo_error(&self.table, "Query", &e))?;
            self.meter.read(out.items().len());
            for item in out.items() {
                let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
                if let (Some(repo), Some(module), Some(stale_since)) =
                    (text(a::REPO), text(a::MODULE), text(a::STALE_SINCE))
                {
                    pages.push(StalePage {
                        repo,
                        module,
                        stale_since,
                        last_built_at: text(a::LAST_BUILT_AT),
                        build_until: text(a::BUILD_UNTIL),
                    });
                }
            }
            match out.last_evaluated_key {
                Some(next) => start = Some(next),
                None => return Ok(pages),
            }
        }
    }

    /// Takes a stale page's build lease until `until`, if no other build holds it and the last
    /// build ended no later than `built_before` (at most one build per rebuild interval).
    pub async fn claim_build(
        &self,
        repo: &str,
        module: &str,
        owner: &str,
        now: OffsetDateTime,
        until: OffsetDateTime,
        built_before: OffsetDateTime,
    ) -> Result<BuildClaim, StoreError> {
        let mut u = Update::default();
        u.set(a::BUILD_OWNER, AttributeValue::S(owner.to_string()));
        u.set(a::BUILD_UNTIL, AttributeValue::S(rfc3339_millis(until)));
        let condition = format!(
            "attribute_exists({stale}) AND (attribute_not_exists({lease}) OR {lease} < {now}) \
             AND (attribute_not_exists({built}) OR {built} <= {before})",
            stale = u.name(a::STALE),
            lease = u.name(a::BUILD_UNTIL),
            built = u.name(a::LAST_BUILT_AT),
            now = u.value("now", Some(AttributeValue::S(rfc3339_millis(now)))),
            before = u.value(
                "before",
                Some(AttributeValue::S(rfc3339_millis(built_before)))
            ),
        );
        let request = u
            .apply(self.update(repo, module))
            .condition_expression(condition)
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let result = request.send().await;
        self.meter.write();
        match result {
            Ok(out) => Ok(BuildClaim::Claimed(Box::new(
                self.parse(out.attributes.unwrap_or_default())?,
            ))),
            Err(e) => match refused(&e) {
                Some(None) => Ok(BuildClaim::NotStale),
                Some(Some(old)) => {
                    let old = self.parse(old)?;
                    let now = rfc3339_millis(now);
                    Ok(if old.stale.is_none() {
                        BuildClaim::NotStale
                    } else if old
                        .build_until
                        .as_deref()
                        .is_some_and(|u| u >= now.as_str())
                    {
                        BuildClaim::Held
                    } else {
                        BuildClaim::TooSoon
                    })
                }
                None => Err(dynamo_error(&self.table, "UpdateItem", &e)),
            },
        }
    }

    /// Saves a module's story on its page item (what an LLM call produced, at once, whatever the
    /// build's publish does next).
    pub async fn set_story(
        &self,
        repo: &str,
        module: &str,
        story: &chronicle_domain::StoredStory,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(repo, module)))
            .update_expression("SET #story = :story")
            .expression_attribute_names("#story", a::STORY)
            .expression_attribute_values(
                ":story",
                serde_dynamo::to_attribute_value(story).map_err(|e| self.bad(e))?,
            )
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "UpdateItem", &e))?;
        Ok(())
    }

    /// Ends a build: records its figures and, when `version` is still the page's version,
    /// clears the stale marker. `None`: the lease was lost (nothing written).
    pub async fn complete_build(
        &self,
        repo: &str,
        module: &str,
        owner: &str,
        version: u64,
        result: &BuildResult,
        now: OffsetDateTime,
    ) -> Result<Option<BuildCompletion>, StoreError> {
        for completion in [BuildCompletion::Clean, BuildCompletion::StillStale] {
            let mut u = Update::default();
            // Only the years that changed: a busy module's item holds many.
            for (i, label) in result.changed_years.iter().enumerate() {
                let years = u.name(a::YEARS);
                let year = format!("#year{i}");
                u.names.insert(year.clone(), label.clone());
                match result.years.get(label) {
                    Some(stats) => {
                        let value = u.value(
                            &format!("year{i}"),
                            Some(serde_dynamo::to_attribute_value(stats).map_err(|e| self.bad(e))?),
                        );
                        u.sets.push(format!("{years}.{year} = {value}"));
                    }
                    None => u.removes.push(format!("{years}.{year}")),
                }
            }
            u.set(
                a::ENTRY_COUNT,
                AttributeValue::N(result.entry_count.to_string()),
            );

            u.set(
                a::RECENT_AUTHORS,
                serde_dynamo::to_attribute_value(&result.recent_authors)
                    .map_err(|e| self.bad(e))?,
            );
            if let Some(story) = &result.story {
                u.set(
                    a::STORY,
                    serde_dynamo::to_attribute_value(story).map_err(|e| self.bad(e))?,
                );
            } else if result.page_removed {
                // The story cites PRs that all moved away: it goes with the page, so a module
                // that comes back is asked for a new one.
                u.remove(a::STORY);
            }
            for (name, value) in [
                (a::MAIN_CUTOFF, &result.main_cutoff),
                (a::FIRST_MERGED_AT, &result.first_merged_at),
                (a::LATEST_MERGED_AT, &result.latest_merged_at),
            ] {
                match value {
                    Some(v) => u.set(name, AttributeValue::S(v.clone())),
                    None => u.remove(name),
                }
            }
            match result.page_removed {
                true => u.set(a::PAGE_REMOVED_AT, AttributeValue::S(rfc3339_millis(now))),
                false => u.remove(a::PAGE_REMOVED_AT),
            }
            u.set(a::LAST_BUILT_AT, AttributeValue::S(rfc3339_millis(now)));
            u.set(a::FAILED_BUILDS, AttributeValue::N("0".into()));
            for gone in [
                a::BUILD_OWNER,
                a::BUILD_UNTIL,
                a::LAST_ERROR,
                a::ADVICE,
                a::LAST_ERROR_AT,
            ] {
                u.remove(gone);
            }
            let mut condition = format!(
                "{} = {}",
                u.name(a::BUILD_OWNER),
                u.value("owner", Some(AttributeValue::S(owner.to_string())))
            );
            if completion == BuildCompletion::Clean {
                u.set(a::BUILT_VERSION, AttributeValue::N(version.to_string()));
                for gone in [
                    a::STALE,
                    a::STALE_SINCE,
                    a::STALE_YEARS,
                    a::FULL_REBUILD,
                    a::LAYOUT_CHANGED_AT,
                    a::STALE_KEYS,
                    a::STALE_KEYS_LOST,
                ] {
                    u.remove(gone);
                }
                condition = format!(
                    "{condition} AND {} = {}",
                    u.name(a::VERSION),
                    u.value("version", Some(AttributeValue::N(version.to_string())))
                );
            }
            // Entries that changed during the build keep their years and the marker: the
            // next build reads them again (never a lost change; at most a repeated one).
            let request = u
                .apply(self.update(repo, module))
                .condition_expression(condition);
            let sent = request.send().await;
            self.meter.write();
            if applied(&self.table, "UpdateItem", sent)? {
                return Ok(Some(completion));
            }
        }
        Ok(None)
    }

    /// Records a failed build on the page (and releases its lease): the error, what the operator
    /// must do, and when, so the next build waits a rebuild interval before trying again.
    pub async fn record_build_failure(
        &self,
        repo: &str,
        module: &str,
        owner: &str,
        error: &str,
        advice: Option<&str>,
        now: OffsetDateTime,
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
        self.release_lease(u, repo, module, owner).await
    }

    /// Gives the build lease back without recording anything: the build could not go on for a
    /// reason that is not a failure (another builder is creating a page it needs). The page
    /// stays stale and the next tick may build it.
    pub async fn release_build(
        &self,
        repo: &str,
        module: &str,
        owner: &str,
    ) -> Result<bool, StoreError> {
        self.release_lease(Update::default(), repo, module, owner)
            .await
    }

    /// Applies `u` with the build lease removed, only while `owner` holds it.
    async fn release_lease(
        &self,
        mut u: Update,
        repo: &str,
        module: &str,
        owner: &str,
    ) -> Result<bool, StoreError> {
        u.remove(a::BUILD_OWNER);
        u.remove(a::BUILD_UNTIL);
        let condition = format!(
            "{} = {}",
            u.name(a::BUILD_OWNER),
            u.value("owner", Some(AttributeValue::S(owner.to_string())))
        );
        let request = u
            .apply(self.update(repo, module))
            .condition_expression(condition);
        let result = request.send().await;
        self.meter.write();
        applied(&self.table, "UpdateItem", result)
    }

    /// One page item, read consistently.
    pub async fn get(&self, repo: &str, module: &str) -> Result<Option<PageItem>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(repo, module)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| dynamo_error(&self.table, "GetItem", &e))?;
        self.meter.read(usize::from(out.item.is_some()));
        out.item.map(|item| self.parse(item)).transpose()
    }

    /// Every page item of a repository (its modules and its index): one partition.
    pub async fn repo_pages(&self, repo: &str) -> Result<Vec<PageItem>, StoreError> {
        self.repo_items(repo, None).await
    }

    /// Every page item of a repository with only its stored story (for `chronicle status`: the
    /// stories whose model was refused, with the advice).
    pub async fn repo_stories(&self, repo: &str) -> Result<Vec<PageItem>, StoreError> {
        self.repo_items(repo, Some(&[a::REPO, a::MODULE, a::STORY]))
            .await
    }

    /// Every page item of a repository with only what its index page shows of a module (its
    /// figures and where its Notion page is), not its years: the index build reads this.
    pub async fn repo_index_rows(&self, repo: &str) -> Result<Vec<PageItem>, StoreError> {
        self.repo_items(
            repo,
            Some(&[
                a::REPO,
                a::MODULE,
                a::ENTRY_COUNT,
                a::LATEST_MERGED_AT,
                a::RECENT_AUTHORS,
                a::NOTION,
                a::LAYOUT_CHANGED_AT,
            ]),
        )
        .await
    }

    async fn repo_items(
        &self,
        repo: &str,
        only: Option<&[&str]>,
    ) -> Result<Vec<PageItem>, StoreError> {
        let mut pages = Vec::new();
        let mut start = None;
        loop {
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#repo = :repo")
                .expression_attribute_names("#repo", a::REPO)
                .expression_attribute_values(":repo", AttributeValue::S(repo.to_string()))
                .consistent_read(true)
                .set_exclusive_start_key(start);
            if let Some(names) = only {
                let mut projection = Vec::new();
                for (i, name) in names.iter().enumerate() {
                    let placeholder = format!("#p{i}");
                    request = request.expression_attribute_names(&placeholder, *name);
                    projection.push(placeholder);
                }
                request = request.projection_expression(projection.join(", "));
            }
            let out = request
                .send()
                .await
                .map_err(|e| dynamo_error(&self.table, "Query", &e))?;
            self.meter.read(out.items().len());
            for item in out.items.unwrap_or_default() {
                let module = item.get(a::MODULE).and_then(|v| v.as_s().ok());
                if module.is_some_and(|m| m == super::CONTEXT_MODULE) {
                    continue; // the repository's context, not a page
                }
                pages.push(self.parse(item)?);
            }
            match out.last_evaluated_key {
                Some(next) => start = Some(next),
                None => return Ok(pages),
            }
        }
    }

    fn parse(&self, item: Item) -> Result<PageItem, StoreError> {
        serde_dynamo::from_item(item).map_err(|e| self.bad(e))
    }

    fn bad(&self, e: serde_dynamo::Error) -> StoreError {
        StoreError::Dynamo {
            operation: "convert",
            table: self.table.clone(),
            message: format!("a page item does not convert: {e}"),
        }
    }
}

/// What a forgotten page's (or a given-back claim's) label holds: look before creating.
fn look_first() -> AttributeValue {
    AttributeValue::M(HashMap::from([(
        "lookFirst".to_string(),
        AttributeValue::Bool(true),
    )]))
}

/// For a refused conditional update: `Some(old item)` (`None` inside when there was no item);
/// `None` when the error was not a refusal.
fn refused(err: &aws_sdk_dynamodb::error::SdkError<UpdateItemError>) -> Option<Option<Item>> {
    match err.as_service_error() {
        Some(UpdateItemError::ConditionalCheckFailedException(c)) => {
            Some(c.item().cloned().filter(|i| !i.is_empty()))
        }
        _ => None,
    }
}

/// The stale marker's clauses: `stale` set, `staleSince` kept from the first mark.
pub(crate) fn set_stale(u: &mut Update, now: OffsetDateTime) {
    u.set(a::STALE, AttributeValue::S(STALE_MARK.into()));
    let since = u.name(a::STALE_SINCE);
    let now_value = u.value("now", Some(AttributeValue::S(rfc3339_millis(now))));
    u.sets
        .push(format!("{since} = if_not_exists({since}, {now_value})"));
}
