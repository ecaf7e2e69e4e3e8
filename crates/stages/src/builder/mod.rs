//! The page builder: on each tick, find the stale pages (the sparse `stale` index), and for
//! each claim its build (at most once per rebuild interval, however many PRs landed), read only
//! that module's entries (its newest ones, plus the years whose entries changed), lay out its
//! documents, publish them whole, and complete the build conditionally on the page's version.
//!
//! Cost of one build: at most [`MAIN_MAX_ENTRIES`] entries for the module page, plus one read
//! of each changed year of that module; never the repository's history.

use crate::secret::Resolve;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;
use time::OffsetDateTime;

use crate::config::BuilderConfig;
use crate::domain::{rfc3339_millis, year_of, ModuleEntry, PageItem, RepoName, YearStats};
use crate::pages::content::{self, IndexRow, ModuleFacts};
use crate::pages::layout;
use crate::pages::DocKey;
use crate::publish::{
    MarkdownPublisher, NotionPublisher, OrgSet, PageSet, PublishError, Published, Publisher,
    Publishers, S3MarkdownPublisher,
};
use crate::store::{
    BuildClaim, BuildCompletion, BuildResult, EntryStore, Meter, MeterReading, PageStore,
    StalePage, StoreError, INDEX_MODULE,
};
use crate::tagging::{self, ModulesConfig, TaggingError};

mod empty;
mod org;
mod report;
mod story;
pub use report::*;

/// Time kept back from the invocation's deadline: no build starts after it.
const DEADLINE_MARGIN: Duration = Duration::from_secs(10);
/// The shortest build lease.
const MIN_LEASE: Duration = Duration::from_secs(1);
/// Builds of one page in one invocation when published pages turn out deleted.
const PUBLISH_ATTEMPTS: usize = 3;

pub struct PageBuilder {
    entries: EntryStore,
    pages: PageStore,
    publisher: Arc<dyn Publisher>,
    modules: ModulesConfig,
    interval: Duration,
    concurrency: usize,
    deadline_margin: Duration,
    meter: Meter,
    /// Repository contexts: a package module's directory and description.
    contexts: Arc<crate::store::ContextCache>,
    /// The optional LLM story: its writer and the new entries that make a stored one stale.
    story: Option<(Arc<chronicle_llm::Writer>, u64)>,
    /// Stories this instance wrote (newer than the page items it was given).
    stories:
        std::sync::Mutex<std::collections::HashMap<(String, String), crate::story::StoredStory>>,
    /// When this instance's recent story calls began.
    story_calls: std::sync::Mutex<std::collections::VecDeque<Instant>>,
    /// Story calls whose model was refused, and sentences dropped, since the last report.
    story_refused: std::sync::atomic::AtomicU64,
    story_dropped: std::sync::atomic::AtomicU64,
    /// New stories the model's filter withheld, since the last report.
    story_withheld: std::sync::atomic::AtomicU64,
    /// When a story's fixed prompt is marked for the prompt cache.
    cache: crate::story::CachePolicy,
}

/// Story calls one builder instance makes at most per minute (each up to a minute long).
pub const STORY_CALLS_PER_MINUTE: usize = 4;

impl PageBuilder {
    /// A builder over these stores (their reads counted into a meter of its own).
    pub fn new(
        entries: EntryStore,
        pages: PageStore,
        publisher: Arc<dyn Publisher>,
        modules: ModulesConfig,
        interval: Duration,
    ) -> Self {
        let meter = Meter::default();
        PageBuilder {
            contexts: Arc::new(crate::store::ContextCache::new(pages.contexts())),
            entries: entries.with_meter(meter.clone()),
            pages: pages.with_meter(meter.clone()),
            publisher,
            modules,
            interval,
            concurrency: 2,
            deadline_margin: DEADLINE_MARGIN,
            meter,
            story: None,
            stories: Default::default(),
            story_calls: Default::default(),
            story_refused: Default::default(),
            story_dropped: Default::default(),
            story_withheld: Default::default(),
            cache: Default::default(),
        }
    }

    /// Module pages get an LLM-written story (grounded, stored, written again after
    /// `min_new_entries` new entries or a week).
    pub fn with_story(mut self, writer: chronicle_llm::Writer, min_new_entries: u64) -> Self {
        self.story = Some((Arc::new(writer), min_new_entries));
        self
    }

    /// No build starts later than this before the deadline (default 10 s).
    pub fn with_deadline_margin(mut self, margin: Duration) -> Self {
        self.deadline_margin = margin;
        self
    }

    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// From configuration: the publishers (Markdown to a directory or S3; Notion when
    /// configured, with Markdown too if asked), the modules config.
    pub async fn from_config(
        config: &BuilderConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, BuilderInitError> {
        let modules = ModulesConfig::load_or_bundled(
            config.modules_file.as_deref(),
            config.modules_param.as_deref(),
            sdk,
        )
        .await?;
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let pages = PageStore::new(dynamo.clone(), config.pages_table.clone());
        let markdown: Arc<dyn Publisher> = match &config.output_s3 {
            Some((bucket, prefix)) => Arc::new(S3MarkdownPublisher::new(
                crate::publish::s3_client(sdk),
                bucket,
                prefix,
            )),
            None => Arc::new(MarkdownPublisher::new(&config.output_dir)),
        };
        let publisher: Arc<dyn Publisher> = match &config.notion {
            None => markdown,
            Some(notion) => {
                let token = notion.token.resolve(sdk).await?.ok_or_else(|| {
                    crate::secret::SecretError::EmptyParameter {
                        name: crate::config::NOTION_TOKEN.into(),
                    }
                })?;
                // A token rotated while the function stays warm is read again after a 401.
                let (source, sdk_copy) = (notion.token.clone(), sdk.clone());
                let refresh: crate::notion::TokenRefresh = Arc::new(move || {
                    let (source, sdk) = (source.clone(), sdk_copy.clone());
                    Box::pin(async move { source.resolve(&sdk).await.ok().flatten() })
                });
                let notion: Arc<dyn Publisher> = Arc::new(NotionPublisher::new(
                    crate::notion::NotionClient::new(&notion.api_url, token)
                        .with_token_refresh(refresh),
                    &notion.parent_page_id,
                    pages.clone(),
                ));
                if config.markdown_with_notion {
                    Arc::new(Publishers(vec![markdown, notion]))
                } else {
                    notion
                }
            }
        };
        tracing::info!(publisher = publisher.name(), "page builder publisher");
        let builder = Self::new(
            EntryStore::new(dynamo, config.entries_table.clone()),
            pages,
            publisher,
            modules,
            config.rebuild_interval,
        )
        .with_concurrency(config.concurrency);
        let Some(story) = &config.story else {
            return Ok(builder);
        };
        let writer = chronicle_llm::Writer::from_config(&story.llm, sdk).await?;
        tracing::info!(model = %writer.model(), "module stories written by an LLM");
        Ok(builder.with_story(writer, story.min_new_entries))
    }

    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// One tick: every stale page that may be built now, module pages first, then the index
    /// pages of their repositories; none started after the deadline's margin.
    pub async fn tick(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
        invocation: &str,
    ) -> Result<BuildReport, StoreError> {
        let before = self.meter.reading();
        let mut report = BuildReport::default();
        let stale = self.pages.stale_pages().await?;
        report.stale = stale.len();
        let built_before = rfc3339_millis(now - self.interval);
        let now_text = rfc3339_millis(now);
        let mut modules: Vec<StalePage> = Vec::new();
        let mut indexes: BTreeSet<String> = BTreeSet::new();
        let mut orgs: BTreeSet<String> = BTreeSet::new();
        // Organisation pages counted above as too soon or held (a back-off): an index built
        // below does not try them again (nor count them twice).
        let mut waiting: BTreeSet<String> = BTreeSet::new();
        let mut overdue: Vec<String> = Vec::new();
        for page in stale {
            let org = crate::store::org_owner(&page.repo);
            if page
                .last_built_at
                .as_deref()
                .is_some_and(|t| t > built_before.as_str())
            {
                report.too_soon += 1;
                waiting.extend(org.map(str::to_string));
            } else if page
                .build_until
                .as_deref()
                .is_some_and(|t| t >= now_text.as_str())
            {
                report.held += 1;
                waiting.extend(org.map(str::to_string));
            } else if let Some(org) = org {
                // Stale for long (a large rebuild took every tick's time): built first, once.
                if page.stale_since < rfc3339_millis(now - org::ORG_OVERDUE) {
                    waiting.insert(org.to_string());
                    overdue.push(org.to_string());
                } else {
                    orgs.insert(org.to_string());
                }
            } else if page.is_index() {
                indexes.insert(page.repo);
            } else {
                modules.push(page);
            }
        }
        let mut early = Vec::new();
        for org in overdue {
            let outcome = self.build_org_if_time(&org, deadline, invocation).await;
            early.push((org, outcome));
        }
        let outcomes: Vec<(String, BuildOutcome)> = futures::stream::iter(modules)
            .map(|page| async move {
                let outcome = self
                    .build_if_time(&page.repo, &page.module, deadline, invocation)
                    .await;
                (page.repo, outcome)
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        for (repo, outcome) in &outcomes {
            if matches!(outcome, BuildOutcome::Built { .. }) {
                indexes.insert(repo.clone());
            }
        }
        let mut all = outcomes;
        all.extend(early);
        for repo in indexes {
            let outcome = self
                .build_if_time(&repo, INDEX_MODULE, deadline, invocation)
                .await;
            if let (BuildOutcome::Built { .. }, Some((org, _))) = (&outcome, repo.split_once('/')) {
                if self.publisher.publishes_org() && !waiting.contains(org) {
                    orgs.insert(org.to_string());
                }
            }
            all.push((repo, outcome));
        }
        // Each owner's organisation page once, after its repositories' indexes, counted as
        // every page is.
        for org in orgs {
            let outcome = self.build_org_if_time(&org, deadline, invocation).await;
            all.push((org, outcome));
        }
        for (_, outcome) in all {
            match outcome {
                BuildOutcome::Built {
                    completion,
                    published,
                } => {
                    report.built += 1;
                    if completion == BuildCompletion::StillStale {
                        report.still_stale += 1;
                    }
                    report.documents += published.documents;
                    report.bytes += published.bytes;
                    report.removed += published.removed;
                    report.publish_requests += published.requests;
                }
                BuildOutcome::NotStale => {}
                BuildOutcome::Held | BuildOutcome::LeaseLost | BuildOutcome::Busy(_) => {
                    report.held += 1
                }
                BuildOutcome::TooSoon => report.too_soon += 1,
                BuildOutcome::Failed(_) => report.failed += 1,
            }
        }
        report.stopped_early = Instant::now() + self.deadline_margin >= deadline;
        report.items_read = (self.meter.reading() - before).items_read;
        report.story_refused = self
            .story_refused
            .swap(0, std::sync::atomic::Ordering::Relaxed);
        report.story_sentences_dropped = self
            .story_dropped
            .swap(0, std::sync::atomic::Ordering::Relaxed);
        report.story_withheld = self
            .story_withheld
            .swap(0, std::sync::atomic::Ordering::Relaxed);
        Ok(report)
    }

    async fn build_if_time(
        &self,
        repo: &str,
        module: &str,
        deadline: Instant,
        invocation: &str,
    ) -> BuildOutcome {
        if Instant::now() + self.deadline_margin >= deadline {
            return BuildOutcome::TooSoon;
        }
        let owner = format!("{invocation}/{repo}/{module}");
        match self.build(repo, module, &owner, deadline).await {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::warn!(repo, module, error = %e, "page build failed before it could be recorded");
                BuildOutcome::Failed(e.to_string())
            }
        }
    }

    /// Builds one page if it is stale and may be built now: claim, build, publish, complete.
    /// A failure of the build is recorded on the page item (with advice), never on PR rows.
    pub async fn build(
        &self,
        repo: &str,
        module: &str,
        owner: &str,
        deadline: Instant,
    ) -> Result<BuildOutcome, StoreError> {
        let now = OffsetDateTime::now_utc();
        let lease = deadline
            .saturating_duration_since(Instant::now())
            .max(MIN_LEASE);
        let claim = self
            .pages
            .claim_build(repo, module, owner, now, now + lease, now - self.interval)
            .await?;
        let item = match claim {
            BuildClaim::Claimed(item) => item,
            BuildClaim::NotStale => return Ok(BuildOutcome::NotStale),
            BuildClaim::Held => return Ok(BuildOutcome::Held),
            BuildClaim::TooSoon => return Ok(BuildOutcome::TooSoon),
        };
        let started = Instant::now();
        let built = if module == INDEX_MODULE {
            self.build_index(&item, owner, deadline).await
        } else {
            self.build_module(&item, owner, deadline).await
        };
        match built {
            Ok((result, published)) => {
                let completion = self
                    .pages
                    .complete_build(
                        repo,
                        module,
                        owner,
                        item.version,
                        &result,
                        OffsetDateTime::now_utc(),
                    )
                    .await?;
                tracing::info!(
                    repo,
                    module,
                    outcome = ?completion,
                    documents = published.documents,
                    bytes = published.bytes,
                    requests = published.requests,
                    duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                    "page built"
                );
                Ok(match completion {
                    Some(completion) => {
                        if module != INDEX_MODULE {
                            // Its figures are on its item now: the index lists them. (Marking
                            // it before the publish too, so its Notion page exists, is not
                            // enough: an index build in between would read the old figures.)
                            self.pages
                                .mark_stale(repo, INDEX_MODULE, &[], OffsetDateTime::now_utc())
                                .await?;
                        }
                        BuildOutcome::Built {
                            completion,
                            published,
                        }
                    }
                    None => {
                        // Another builder took the page over while this one was publishing:
                        // any page this one wrote may be older than the other's. All rebuilt.
                        tracing::warn!(
                            repo,
                            module,
                            "the build lease expired during the build; the page is built again"
                        );
                        self.pages
                            .mark_full_rebuild(repo, module, OffsetDateTime::now_utc())
                            .await?;
                        BuildOutcome::LeaseLost
                    }
                })
            }
            Err(BuildError::Publish(PublishError::LeaseLost)) => Ok(BuildOutcome::LeaseLost),
            Err(BuildError::Publish(PublishError::Busy(why))) => {
                tracing::info!(
                    repo,
                    module,
                    why,
                    "page build waits for another builder; it is built later"
                );
                self.pages.release_build(repo, module, owner).await?;
                Ok(BuildOutcome::Busy(why))
            }
            Err(error) => {
                tracing::warn!(repo, module, error = %error, advice = error.advice().unwrap_or(""), "page build failed; it is retried after the rebuild interval");
                self.pages
                    .record_build_failure(
                        repo,
                        module,
                        owner,
                        &error.to_string(),
                        error.advice(),
                        OffsetDateTime::now_utc(),
                    )
                    .await?;
                Ok(BuildOutcome::Failed(error.to_string()))
            }
        }
    }

    async fn build_module(
        &self,
        item: &PageItem,
        owner: &str,
        deadline: Instant,
    ) -> Result<(BuildResult, Published), BuildError> {
        let mut item = item.clone();
        let mut full = item.full_rebuild;
        let mut also: BTreeSet<i32> = BTreeSet::new();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self
                .build_module_once(&item, owner, deadline, full, &also)
                .await
            {
                Err(BuildError::Publish(PublishError::Missing(keys)))
                    if attempt < PUBLISH_ATTEMPTS =>
                {
                    for key in keys {
                        // Kept on the item too, so a later build still republishes them if
                        // this one does not finish.
                        let now = OffsetDateTime::now_utc();
                        match key {
                            DocKey::Archive { label, .. } => {
                                also.insert(year_of(&label));
                                self.pages
                                    .mark_stale(&item.repo, &item.module, &[year_of(&label)], now)
                                    .await?;
                            }
                            _ => {
                                full = true;
                                self.pages
                                    .mark_full_rebuild(&item.repo, &item.module, now)
                                    .await?;
                            }
                        }
                    }
                    // The publisher forgot the pages that are gone: read what it recorded.
                    if let Some(fresh) = self.pages.get(&item.repo, &item.module).await? {
                        if fresh.build_owner.as_deref() != Some(owner) {
                            return Err(PublishError::LeaseLost.into());
                        }
                        item.notion = fresh.notion;
                    }
                }
                other => return other,
            }
        }
    }

    async fn build_module_once(
        &self,
        item: &PageItem,
        owner: &str,
        deadline: Instant,
        full: bool,
        also: &BTreeSet<i32>,
    ) -> Result<(BuildResult, Published), BuildError> {
        let (repo, module) = (item.repo.as_str(), item.module.as_str());
        let repo_name = RepoName::parse(repo).map_err(|e| BuildError::Repo(e.to_string()))?;
        // A changed layout: a context at least as new as the change, not an older cached one.
        let context = self
            .contexts
            .get_at_least(repo, item.layout_changed_at.as_deref())
            .await?;
        // The repository's `.github/chronicle.yml` when valid, else the central config.
        let effective = tagging::team::effective(&self.modules, &repo_name, context.as_deref());
        let config = effective.config();
        let layout = context
            .as_deref()
            .map(|c| tagging::RepoLayout::from_context(c, !effective.own, config));
        let paths = tagging::module_paths(&repo_name, module, config, layout.as_ref());
        let (description, gone) =
            crate::pages::content::what_it_is(context.as_deref(), module, &paths, layout.as_ref());
        let configured = config.and_then(|c| c.description_of(module)).map(|text| {
            crate::pages::overview::Description {
                text: text.to_string(),
                source: if effective.team {
                    tagging::team::TEAM_FILE.to_string()
                } else {
                    String::new()
                },
            }
        });
        // The team's file has the last word; else the module's own files, else what the
        // central modules config says of it.
        let description = match effective.team {
            true => configured.or(description),
            false => description.or(configured),
        };
        let mut facts = ModuleFacts {
            repo: repo.to_string(),
            module: module.to_string(),
            paths,
            description,
            notes: config.and_then(|c| c.notes_of(module)).map(str::to_string),
            gone,
            archive_years: archive_years(&item.years),
            ..Default::default()
        };
        let planned = crate::pages::plan::plan(&self.entries, item, full, also, |newest| {
            layout::main_count(&facts, newest)
        })
        .await?;
        let main: &[ModuleEntry] = &planned.main;
        let cutoff = planned.cutoff.clone();
        let years = planned.years.clone();
        let docs = planned.docs;
        let removed = planned.removed;

        facts.entry_count = years.values().map(|y| y.count).sum();
        facts.first_merged_at = years.values().map(|y| y.first.clone()).min();
        facts.latest_merged_at = main.first().map(|e| e.merged_at.clone());
        facts.recent_authors = content::recent_authors(main);
        facts.archive_years = archive_years(&years);
        facts.years = years.clone();
        facts.now = Some(OffsetDateTime::now_utc());
        // Who owns it by CODEOWNERS: the owners of the files a newcomer starts with.
        if let Some(codeowners) = layout.as_ref().and_then(|l| l.codeowners()) {
            facts.owners = crate::pages::content::owners_of(
                codeowners,
                &crate::pages::overview::start_files(&facts.years, OffsetDateTime::now_utc()),
            );
        }
        // A module with no entries (its PRs moved to other modules) has no page: every page it
        // had is removed and none is made (`empty`).
        let no_entries = facts.entry_count == 0;
        // The LLM's story, grounded, or the stored one while it is current; never fatal.
        let story = match &self.story {
            Some((writer, min_new)) if !no_entries => {
                self.story_of(repo, module, item, &facts, main, writer, *min_new, deadline)
                    .await?
            }
            _ => {
                if no_entries {
                    // Its story goes with its pages (the item's too: `complete_build`).
                    self.forget_story(repo, module);
                }
                None
            }
        };
        facts.story = story
            .as_ref()
            .map(|s| s.text.clone())
            .filter(|t| !t.is_empty());
        facts.story_dropped = story.as_ref().map(|s| s.dropped).unwrap_or(0);
        facts.story_withheld = story.as_ref().is_some_and(|s| s.withheld.is_some());
        let (all_docs, removed) = match no_entries {
            true => (Vec::new(), empty::withdrawn(item, removed)),
            false => (
                [vec![content::module_page(&facts, main)], docs].concat(),
                removed,
            ),
        };
        // The index lists this module (and, in Notion, holds its page): its item must exist.
        self.pages
            .mark_stale(repo, INDEX_MODULE, &[], OffsetDateTime::now_utc())
            .await?;
        let published = self
            .publisher
            .publish(&PageSet {
                item,
                repo_items: &[],
                docs: &all_docs,
                removed: &removed,
                owner,
                deadline,
            })
            .await?;
        Ok((
            BuildResult {
                years,
                changed_years: planned.changed,
                main_cutoff: cutoff,
                entry_count: facts.entry_count,
                first_merged_at: facts.first_merged_at,
                latest_merged_at: facts.latest_merged_at,
                recent_authors: facts.recent_authors,
                story,
                page_removed: no_entries,
            },
            published,
        ))
    }

    async fn build_index(
        &self,
        item: &PageItem,
        owner: &str,
        deadline: Instant,
    ) -> Result<(BuildResult, Published), BuildError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let items = self.pages.repo_index_rows(&item.repo).await?;
            let rows: Vec<IndexRow> = items
                .iter()
                .filter(|i| i.module != INDEX_MODULE && i.entry_count > 0)
                .map(|i| IndexRow {
                    module: i.module.clone(),
                    entry_count: i.entry_count,
                    latest_merged_at: i.latest_merged_at.clone(),
                    recent_authors: i.recent_authors.clone(),
                })
                .collect();
            let current = items
                .iter()
                .find(|i| i.module == INDEX_MODULE)
                .cloned()
                .unwrap_or_else(|| item.clone());
            // Within the page limits: fewer modules with their figures when there are very many.
            let mut notes = content::INDEX_MAX_NOTES;
            let mut doc = content::index_page(&item.repo, &rows, notes);
            while notes > 0 && !layout::fits(&doc) {
                notes /= 2;
                doc = content::index_page(&item.repo, &rows, notes);
            }
            let result = self
                .publisher
                .publish(&PageSet {
                    item: &current,
                    repo_items: &items,
                    docs: std::slice::from_ref(&doc),
                    removed: &[],
                    owner,
                    deadline,
                })
                .await;
            match result {
                Ok(published) => {
                    // This repository's row on its owner's page, built after the tick's indexes.
                    self.record_org_row(&item.repo, &rows, &items).await?;
                    if let Some(at) = &current.layout_changed_at {
                        // The repository's layout changed: every module page shows it anew
                        // (the clean completion of this build clears the note).
                        let now = OffsetDateTime::now_utc();
                        for module in items.iter().filter(|i| i.module != INDEX_MODULE) {
                            self.pages
                                .mark_layout_changed(&item.repo, &module.module, at, now)
                                .await?;
                        }
                    }
                    let result = BuildResult {
                        entry_count: rows.iter().map(|r| r.entry_count).sum(),
                        latest_merged_at: rows
                            .iter()
                            .filter_map(|r| r.latest_merged_at.clone())
                            .max(),
                        ..Default::default()
                    };
                    return Ok((result, published));
                }
                Err(PublishError::Missing(_)) if attempt < PUBLISH_ATTEMPTS => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Items read so far by this builder.
    pub fn reading(&self) -> MeterReading {
        self.meter.reading()
    }
}

/// Years with archived entries, oldest first.
fn archive_years(years: &BTreeMap<String, YearStats>) -> Vec<(String, u64)> {
    years
        .iter()
        .filter(|(_, s)| s.archived > 0)
        .map(|(y, s)| (y.clone(), s.archived))
        .collect()
}
