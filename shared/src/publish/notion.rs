//! Publishing pages to Notion, whole, through its Markdown content API.
//!
//! Pages nest as the documents do: the configured parent page holds one index page per
//! repository (`<repo> · modules`), which holds the module pages, which hold their archive
//! pages. A page's child pages are named in its content (`<page url=…>`), as Notion requires
//! for replacing content without deleting them.
//!
//! - **Created once**: a page's creation is claimed on its page item before the create request
//!   (conditional write), and its id recorded after. A builder that finds an expired claim
//!   without an id, or whose create failed ambiguously (no answer, 5xx), looks for the page by
//!   its title under its parent and adopts it before creating another; duplicates found that
//!   way are moved to the trash.
//! - **Replaced whole**: `replace_content` with the page's full rendering, children before
//!   parents. Retrying it is harmless.
//! - **Deleted by hand**: a page found gone (404, or in the trash) is forgotten and the build
//!   publishes it again ([`PublishError::Missing`]); the log says so. A child page someone added
//!   under one of Chronicle's pages is kept: it is named in the new content too.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::BoxFuture;
use time::OffsetDateTime;

use super::{PageSet, PublishError, Published, Publisher};
use crate::domain::{NotionPage, OtherPage};
use crate::notion::{ChildPage, NotionClient, NotionError, PageState};
use crate::pages::render::{render, Flavor};
use crate::pages::{DocKey, Document, MAIN_LABEL};
use crate::store::{CreateClaim, PageStore, INDEX_MODULE};

/// How long a creation claim lasts: longer than any create request takes.
pub const CREATE_CLAIM: Duration = Duration::from_secs(120);
/// How long to wait for another builder's creation before giving up for this build.
const CLAIM_WAIT: Duration = Duration::from_secs(10);
/// The content of a page created before its children exist (replaced in the same build).
const PLACEHOLDER: &str = "Chronicle is building this page.";

pub struct NotionPublisher {
    client: NotionClient,
    parent_page_id: String,
    pages: PageStore,
    create_claim: Duration,
}

impl NotionPublisher {
    pub fn new(client: NotionClient, parent_page_id: &str, pages: PageStore) -> Self {
        NotionPublisher {
            client,
            parent_page_id: parent_page_id.trim().to_string(),
            pages,
            create_claim: CREATE_CLAIM,
        }
    }

    /// How long a creation claim lasts (default [`CREATE_CLAIM`]).
    pub fn with_create_claim(mut self, claim: Duration) -> Self {
        self.create_claim = claim;
        self
    }

    pub fn client(&self) -> &NotionClient {
        &self.client
    }
}

impl Publisher for NotionPublisher {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            let before = self.client.requests();
            let mut published = Published::default();
            let is_index = set.item.module == INDEX_MODULE;
            let result = if is_index {
                self.publish_index(set, &mut published).await
            } else {
                self.publish_module(set, &mut published).await
            };
            published.requests = self.client.requests() - before;
            result.map(|()| published)
        })
    }

    fn name(&self) -> &'static str {
        "notion"
    }
}

/// Where the pages of one page item are, by label, as this build knows them.
type Known = BTreeMap<String, NotionPage>;

fn id_of(known: &Known, label: &str) -> Option<String> {
    known.get(label).and_then(|p| p.id.clone())
}

fn index_title(repo: &str) -> String {
    format!("{repo} · modules")
}

/// A page's URL from its id, for pages known only by id (a child someone added by hand).
fn url_of_id(id: &str) -> String {
    // Notion resolves a page or database by the 32 hex digits of its id.
    format!("https://www.notion.so/{}", id.replace('-', ""))
}

impl NotionPublisher {
    async fn publish_module(
        &self,
        set: &PageSet<'_>,
        published: &mut Published,
    ) -> Result<(), PublishError> {
        let repo = set.item.repo.as_str();
        let module = set.item.module.as_str();
        let mut known: Known = set.item.notion.clone();
        let index_id = self.index_page(set).await?;

        // 1. Every page exists, parents first; leaves are created with their content.
        let mut fresh: BTreeSet<String> = BTreeSet::new();
        for doc in set.docs {
            let parent_id = match &doc.parent {
                Some(DocKey::Index { .. }) | None => index_id.clone(),
                Some(parent) => id_of(&known, parent.label())
                    .ok_or_else(|| PublishError::Missing(vec![parent.clone()]))?,
            };
            let content = doc
                .children()
                .is_empty()
                .then(|| render(doc, Flavor::Notion, &resolver(&known, repo, module)));
            let created = match self
                .ensure(
                    set,
                    module,
                    doc.key.label(),
                    &doc.title,
                    &parent_id,
                    content.as_deref(),
                    &mut known,
                )
                .await
            {
                Ok(created) => created,
                // Its parent page was deleted by hand: that one is published again first.
                Err(PublishError::Notion(e)) if e.is_archived() || e.is_not_found() => {
                    match &doc.parent {
                        Some(parent @ (DocKey::Module { .. } | DocKey::Archive { .. })) => {
                            return Err(self
                                .gone(set, parent, &parent_id, module, PublishError::Notion(e))
                                .await?);
                        }
                        _ => return Err(PublishError::Notion(e)),
                    }
                }
                Err(e) => return Err(e),
            };
            if created {
                fresh.insert(doc.key.label().to_string());
                published.documents += 1;
                published.bytes += content.map_or(0, |c| c.len());
            }
        }

        // 2. Pages no longer produced go to the trash.
        for key in set.removed {
            if let Some(id) = id_of(&known, key.label()) {
                match self.client.trash_page(&id, set.deadline).await {
                    Ok(()) => {}
                    // Gone already, if the integration can still see its tree.
                    Err(e) if e.is_not_found() && self.is_gone(&id, set).await? => {}
                    Err(e) => return Err(e.into()),
                }
                self.pages
                    .drop_notion_page(repo, module, key.label(), &id)
                    .await?;
                known.remove(key.label());
                published.removed += 1;
            }
        }

        // 3. Contents replaced, children before parents. A page whose content is the one last
        // sent (its recorded hash) is left alone: a parent that is replaced checks its children.
        let mut listings = Listings::default();
        for doc in set.docs.iter().rev() {
            if fresh.contains(doc.key.label()) {
                continue;
            }
            let id = id_of(&known, doc.key.label())
                .ok_or_else(|| PublishError::Missing(vec![doc.key.clone()]))?;
            let unchanged = known.get(doc.key.label()).and_then(|p| p.hash.clone())
                == Some(content_hash(&render(
                    doc,
                    Flavor::Notion,
                    &resolver(&known, repo, module),
                )));
            if unchanged {
                continue;
            }
            match self
                .replace(set, doc, &id, &mut known, module, &mut listings)
                .await
            {
                Ok(bytes) => {
                    published.documents += 1;
                    published.bytes += bytes;
                }
                Err(PublishError::Missing(keys)) => {
                    tracing::warn!(repo, module, pages = ?keys, "Notion pages were deleted by hand; they are published again");
                    return Err(PublishError::Missing(keys));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn publish_index(
        &self,
        set: &PageSet<'_>,
        published: &mut Published,
    ) -> Result<(), PublishError> {
        let repo = set.item.repo.as_str();
        let Some(doc) = set.docs.first() else {
            return Ok(());
        };
        let mut known: Known = set.item.notion.clone();
        let parent = self.parent_page_id.clone();
        self.ensure(
            set,
            INDEX_MODULE,
            MAIN_LABEL,
            &doc.title,
            &parent,
            None,
            &mut known,
        )
        .await?;
        let id = id_of(&known, MAIN_LABEL).ok_or(PublishError::LeaseLost)?;
        let mut listings = Listings::default();
        match self
            .replace(set, doc, &id, &mut known, INDEX_MODULE, &mut listings)
            .await
        {
            Ok(bytes) => {
                published.documents += 1;
                published.bytes += bytes;
                Ok(())
            }
            Err(PublishError::Missing(keys)) if keys.contains(&doc.key) => {
                // The index went to the trash with every module page under it: each module is
                // published again, under a new index.
                tracing::warn!(repo, "the Notion index page was deleted by hand; every module page is published again");
                let now = OffsetDateTime::now_utc();
                for item in set.repo_items {
                    if item.module != INDEX_MODULE {
                        self.pages
                            .mark_full_rebuild(repo, &item.module, now)
                            .await?;
                    }
                }
                Err(PublishError::Missing(keys))
            }
            Err(e) => Err(e),
        }
    }

    /// The repository's index page id, created (empty for now; the index build fills it) if
    /// there is none, or if the one recorded was deleted.
    async fn index_page(&self, set: &PageSet<'_>) -> Result<String, PublishError> {
        let repo = set.item.repo.as_str();
        let index = self.pages.get(repo, INDEX_MODULE).await?;
        let mut known: Known = index.map(|i| i.notion).unwrap_or_default();
        if let Some(id) = id_of(&known, MAIN_LABEL) {
            // Only checked when a page must be created under it (the module page, rarely): a
            // replace needs no parent, and an archive page's parent is not the index.
            let must_create = set.docs.iter().any(|d| {
                matches!(d.parent, Some(DocKey::Index { .. }) | None)
                    && id_of(&set.item.notion, d.key.label()).is_none()
            });
            if !must_create || !self.is_gone(&id, set).await? {
                return Ok(id);
            }
            tracing::warn!(
                repo,
                "the Notion index page was deleted by hand; it is created again"
            );
            self.pages
                .forget_notion_page(repo, INDEX_MODULE, MAIN_LABEL, &id)
                .await?;
            self.pages
                .mark_stale(repo, INDEX_MODULE, &[], OffsetDateTime::now_utc())
                .await?;
            known.remove(MAIN_LABEL);
        }
        let parent = self.parent_page_id.clone();
        self.ensure(
            set,
            INDEX_MODULE,
            MAIN_LABEL,
            &index_title(repo),
            &parent,
            None,
            &mut known,
        )
        .await?;
        id_of(&known, MAIN_LABEL).ok_or(PublishError::LeaseLost)
    }

    /// Makes sure the page `label` of page item `module` exists: recorded, adopted, or created
    /// under `parent_id` (with `content`, or a placeholder). `true`: created with `content`.
    #[allow(clippy::too_many_arguments)]
    async fn ensure(
        &self,
        set: &PageSet<'_>,
        module: &str,
        label: &str,
        title: &str,
        parent_id: &str,
        content: Option<&str>,
        known: &mut Known,
    ) -> Result<bool, PublishError> {
        if id_of(known, label).is_some() {
            return Ok(false);
        }
        let repo = set.item.repo.as_str();
        let waited_until = std::time::Instant::now() + CLAIM_WAIT;
        loop {
            let now = OffsetDateTime::now_utc();
            let claim = self
                .pages
                .claim_notion_create(repo, module, label, set.owner, now, now + self.create_claim)
                .await?;
            match claim {
                CreateClaim::Exists(page) => {
                    known.insert(label.to_string(), page);
                    return Ok(false);
                }
                CreateClaim::Held => {
                    if std::time::Instant::now() >= waited_until {
                        return Err(PublishError::Busy(format!(
                            "another builder is creating the Notion page {title:?}; it is built again later"
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    if let Some(item) = self.pages.get(repo, module).await? {
                        if let Some(page) = item.notion.get(label).filter(|p| p.id.is_some()) {
                            known.insert(label.to_string(), page.clone());
                            return Ok(false);
                        }
                    }
                }
                CreateClaim::Claimed { retry } => {
                    // Never outlive the claim: past it another builder may create the page.
                    let until = set.deadline.min(
                        std::time::Instant::now()
                            + self
                                .create_claim
                                .saturating_sub(Duration::from_secs(10))
                                .max(self.create_claim / 2),
                    );
                    if retry
                        && self
                            .adopt(set, module, label, parent_id, title, known)
                            .await?
                    {
                        return Ok(false);
                    }
                    let markdown = content.unwrap_or(PLACEHOLDER);
                    match self
                        .client
                        .create_page(parent_id, title, markdown, until)
                        .await
                    {
                        Ok(page) => {
                            let hash = content.map(content_hash);
                            if let Err(e) = self
                                .record(set, module, label, &page.id, &page.url, hash, true, known)
                                .await
                            {
                                // The claim was lost: another builder owns this page now.
                                tracing::warn!(repo, module, label, page = %page.id, "a page created after its claim was lost goes to the trash");
                                self.client.trash_page(&page.id, set.deadline).await?;
                                return Err(e);
                            }
                            tracing::info!(repo, module, label, page = %page.id, "created a Notion page");
                            return Ok(content.is_some());
                        }
                        Err(e) if e.maybe_applied() => {
                            // It may exist: look before anyone creates another.
                            if self
                                .adopt(set, module, label, parent_id, title, known)
                                .await?
                            {
                                return Ok(false);
                            }
                            // The claim stays until it expires: the next build looks again.
                            return Err(e.into());
                        }
                        Err(e) => {
                            self.pages
                                .release_notion_claim(repo, module, label, set.owner)
                                .await?;
                            return Err(e.into());
                        }
                    }
                }
            }
        }
    }

    /// Records the child of `parent_id` titled `title` as `label`'s page, if Notion has one: a
    /// create that was applied though its answer never came. `true` if one was found.
    async fn adopt(
        &self,
        set: &PageSet<'_>,
        module: &str,
        label: &str,
        parent_id: &str,
        title: &str,
        known: &mut Known,
    ) -> Result<bool, PublishError> {
        let Some(found) = self.find_child(parent_id, title, set).await? else {
            return Ok(false);
        };
        tracing::info!(repo = %set.item.repo, module, label, page = %found.id, "adopted a page an interrupted create made");
        let url = url_of_id(&found.id);
        self.record(set, module, label, &found.id, &url, None, false, known)
            .await?;
        Ok(true)
    }

    /// Records the page created (or adopted) for `label`. Refused: recorded by this same call
    /// already (an answer lost and the write sent again) is fine; another page recorded (this
    /// builder's claim expired) is [`PublishError::LeaseLost`].
    #[allow(clippy::too_many_arguments)]
    async fn record(
        &self,
        set: &PageSet<'_>,
        module: &str,
        label: &str,
        id: &str,
        url: &str,
        hash: Option<String>,
        created: bool,
        known: &mut Known,
    ) -> Result<(), PublishError> {
        let repo = set.item.repo.as_str();
        let page = NotionPage {
            id: Some(id.to_string()),
            // Module and index pages keep Notion's URL (the index links them); archive pages
            // are linked by id, so a busy module's page item stays small.
            url: (label == MAIN_LABEL).then(|| url.to_string()),
            hash,
            // A page just created has no children but those this build creates.
            listed_at: created.then(|| crate::domain::rfc3339_millis(OffsetDateTime::now_utc())),
            ..Default::default()
        };
        if !self
            .pages
            .record_notion_page(repo, module, label, set.owner, &page)
            .await?
        {
            let recorded = self
                .pages
                .get(repo, module)
                .await?
                .and_then(|item| item.notion.get(label).and_then(|p| p.id.clone()));
            if recorded.as_deref().map(normalize) != Some(normalize(id)) {
                return Err(PublishError::LeaseLost);
            }
        }
        known.insert(label.to_string(), page);
        Ok(())
    }

    /// Fails with [`PublishError::Unreachable`] unless the configured parent page is reachable
    /// (a page of its tree that is not found is then gone; else access was lost).
    async fn ensure_reachable(&self, set: &PageSet<'_>) -> Result<(), PublishError> {
        match self
            .client
            .page_state(&self.parent_page_id, set.deadline)
            .await?
        {
            PageState::Live(_) => Ok(()),
            _ => Err(PublishError::Unreachable {
                parent: self.parent_page_id.clone(),
            }),
        }
    }

    /// Whether page `id` is gone for good: in the trash, or not found while the configured
    /// parent page is still reachable. A 404 with the parent out of reach too is lost access
    /// (the integration removed from Connections, the tree moved out of its reach): every
    /// record is kept and the build fails with advice ([`PublishError::Unreachable`]), so that
    /// once access is back the same pages are updated, never a second tree created.
    async fn is_gone(&self, id: &str, set: &PageSet<'_>) -> Result<bool, PublishError> {
        match self.client.page_state(id, set.deadline).await? {
            PageState::Live(_) => Ok(false),
            PageState::Trashed | PageState::NotFound => {
                self.ensure_reachable(set).await?;
                Ok(true)
            }
        }
    }

    /// The child pages of `id`, listed once per build.
    async fn listing<'a>(
        &self,
        listings: &'a mut Listings,
        id: &str,
        set: &PageSet<'_>,
    ) -> Result<&'a Vec<ChildPage>, PublishError> {
        let key = normalize(id);
        if !listings.0.contains_key(&key) {
            let children = self.client.child_pages(id, set.deadline).await?;
            listings.0.insert(key.clone(), children);
        }
        Ok(&listings.0[&key])
    }

    /// The child page of `parent_id` titled `title`, if there is one. More than one (a create
    /// that was applied twice): the first is kept, the others go to the trash.
    async fn find_child(
        &self,
        parent_id: &str,
        title: &str,
        set: &PageSet<'_>,
    ) -> Result<Option<ChildPage>, PublishError> {
        let bot = self.client.bot_id(set.deadline).await?;
        let children = self.client.child_pages(parent_id, set.deadline).await?;
        // Only pages this integration created: a person's page of the same title is theirs.
        let mut matching = children.into_iter().filter(|c| {
            !c.database && c.title == title && c.created_by.as_deref() == Some(bot.as_str())
        });
        let first = matching.next();
        for duplicate in matching {
            tracing::warn!(page = %duplicate.id, title, "a duplicate page from an interrupted create goes to the trash");
            self.client.trash_page(&duplicate.id, set.deadline).await?;
        }
        Ok(first)
    }

    /// Replaces a page's content with the document. Its child pages are checked first: one
    /// that is gone is forgotten ([`PublishError::Missing`], or for the index left out), one
    /// nobody expected (added by a person) is named too, so Notion keeps it. Returns the bytes.
    async fn replace(
        &self,
        set: &PageSet<'_>,
        doc: &Document,
        id: &str,
        known: &mut Known,
        module: &str,
        listings: &mut Listings,
    ) -> Result<usize, PublishError> {
        let repo = set.item.repo.as_str();
        let now = OffsetDateTime::now_utc();
        let record = known.get(doc.key.label()).cloned().unwrap_or_default();
        if listed_within(&record, now, RELIST_AFTER) {
            // Its children were listed lately: replaced at once, naming the children it records
            // and the pages a person put there. Notion refuses content that would drop a child
            // (one added since) or names one that is gone: then they are listed, below.
            let markdown = self.render_known(set, doc, known, module);
            let hash = content_hash(&markdown);
            let markdown = with_others(markdown, &record.others);
            match self
                .client
                .replace_markdown(id, &markdown, set.deadline)
                .await
            {
                Ok(()) => {
                    self.pages
                        .record_notion_hash(repo, module, doc.key.label(), id, &hash, None)
                        .await?;
                    return Ok(markdown.len());
                }
                Err(e) if e.is_not_found() || e.is_archived() => {
                    return Err(self
                        .gone(set, &doc.key, id, module, PublishError::Notion(e))
                        .await?)
                }
                Err(NotionError::Invalid { message, .. }) => {
                    tracing::info!(repo, module, page = id, message, "Notion refused the content: its child pages are listed, and it is sent again");
                }
                Err(e) => return Err(e.into()),
            }
        }
        let live = match self.listing(listings, id, set).await {
            Ok(live) => live.clone(),
            Err(PublishError::Notion(e)) if e.is_not_found() => {
                return Err(self
                    .gone(set, &doc.key, id, module, PublishError::Notion(e))
                    .await?)
            }
            Err(e) => return Err(e),
        };
        let live_ids: BTreeSet<String> = live.iter().map(|c| normalize(&c.id)).collect();
        let is_index = module == INDEX_MODULE;
        let mut expected_ids: BTreeSet<String> = BTreeSet::new();
        let mut missing = Vec::new();
        let mut module_urls: BTreeMap<String, String> = BTreeMap::new();
        for child in doc.children() {
            let (child_id, child_url) = if is_index {
                let page = set
                    .repo_items
                    .iter()
                    .find(|i| i.module == child.item_module())
                    .and_then(|i| i.notion.get(MAIN_LABEL));
                (
                    page.and_then(|p| p.id.clone()),
                    page.and_then(|p| p.url.clone()),
                )
            } else {
                let page = known.get(child.label());
                (page.and_then(|p| p.id.clone()), page.and_then(page_url))
            };
            let Some(child_id) = child_id else {
                // Never published (or forgotten): an index names it once its module is built;
                // a module page needs its archive page published first.
                if !is_index {
                    missing.push((child.clone(), None));
                }
                continue;
            };
            if live_ids.contains(&normalize(&child_id)) {
                expected_ids.insert(normalize(&child_id));
                if let Some(url) = child_url {
                    module_urls.insert(child.item_module().to_string(), url);
                }
            } else {
                missing.push((child.clone(), Some(child_id)));
            }
        }
        // Not in the listing of the page's top-level children: gone, or moved by a person (into a
        // toggle or a column, or under another page). Made sure of before anything is forgotten:
        // a moved page stays recorded, and is never published a second time.
        let mut moved = Vec::new();
        let mut listed_late = BTreeSet::new();
        for (child, child_id) in &missing {
            let Some(child_id) = child_id else {
                continue;
            };
            match self.client.page_state(child_id, set.deadline).await? {
                // Still a top-level child of this page (a listing that lags a create).
                state @ PageState::Live(_)
                    if state.parent_page().map(normalize) == Some(normalize(id)) =>
                {
                    listed_late.insert(normalize(child_id));
                }
                PageState::Live(_) => moved.push(
                    if is_index {
                        child.item_module()
                    } else {
                        child.label()
                    }
                    .to_string(),
                ),
                _ => self.ensure_reachable(set).await?,
            }
        }
        missing.retain(|(_, child_id)| {
            child_id
                .as_deref()
                .is_none_or(|c| !listed_late.contains(&normalize(c)))
        });
        if is_index && !listed_late.is_empty() {
            for child in doc.children() {
                let page = set
                    .repo_items
                    .iter()
                    .find(|i| i.module == child.item_module())
                    .and_then(|i| i.notion.get(MAIN_LABEL));
                if let (Some(child_id), Some(url)) =
                    (page.and_then(|p| p.id.as_deref()), page.and_then(page_url))
                {
                    if listed_late.contains(&normalize(child_id)) {
                        module_urls.insert(child.item_module().to_string(), url);
                    }
                }
            }
        }
        expected_ids.extend(listed_late);
        if !moved.is_empty() {
            tracing::warn!(repo, module, pages = ?moved, "Chronicle's pages were moved by hand; they stay where they are and the page above them is not replaced until they are back");
            return Err(PublishError::Moved {
                parent: doc.title.clone(),
                pages: moved,
            });
        }
        for (child, child_id) in &missing {
            let Some(child_id) = child_id else {
                continue;
            };
            self.pages
                .forget_notion_page(repo, child.item_module(), child.label(), child_id)
                .await?;
            if is_index {
                // Its module is published again (and then listed here again); its archive
                // pages went to the trash with it.
                let module_pages = set
                    .repo_items
                    .iter()
                    .find(|i| i.module == child.item_module())
                    .map(|i| i.notion.clone())
                    .unwrap_or_default();
                for (l, p) in module_pages {
                    if let Some(old) = p.id {
                        self.pages
                            .forget_notion_page(repo, child.item_module(), &l, &old)
                            .await?;
                    }
                }
                self.pages
                    .mark_full_rebuild(repo, child.item_module(), OffsetDateTime::now_utc())
                    .await?;
            } else {
                known.remove(child.label());
                // Its own subpages went to the trash with it.
                self.forget_subtree(repo, module, child.label(), known)
                    .await?;
            }
        }
        if !missing.is_empty() && !is_index {
            tracing::warn!(repo, module, pages = ?missing.iter().map(|(k, _)| k.label()).collect::<Vec<_>>(), "archive pages were deleted by hand; they are published again");
            return Err(PublishError::Missing(
                missing.into_iter().map(|(k, _)| k).collect(),
            ));
        }
        let markdown = if is_index {
            let urls = module_urls;
            render(doc, Flavor::Notion, &move |k: &DocKey| {
                urls.get(k.item_module()).cloned()
            })
        } else {
            render(doc, Flavor::Notion, &resolver(known, repo, module))
        };
        let hash = content_hash(&markdown);
        // Pages a person put here: named so that replacing the content keeps them. Those this
        // integration made (a module page another build just created) are named too, but not
        // remembered: the next listing tells what they are.
        let unexpected: Vec<&ChildPage> = live
            .iter()
            .filter(|c| !expected_ids.contains(&normalize(&c.id)))
            .collect();
        let bot = if unexpected.is_empty() {
            None
        } else {
            Some(self.client.bot_id(set.deadline).await?)
        };
        let as_other = |c: &&ChildPage| OtherPage {
            id: c.id.clone(),
            title: crate::domain::cap(&c.title, 200),
            database: c.database,
        };
        let named: Vec<OtherPage> = unexpected.iter().map(as_other).collect();
        let others: Vec<OtherPage> = unexpected
            .iter()
            .filter(|c| c.created_by != bot)
            .take(MAX_OTHERS)
            .map(as_other)
            .collect();
        let markdown = with_others(markdown, &named);
        match self
            .client
            .replace_markdown(id, &markdown, set.deadline)
            .await
        {
            Ok(()) => {
                self.pages
                    .record_notion_hash(
                        repo,
                        module,
                        doc.key.label(),
                        id,
                        &hash,
                        Some((now, &others)),
                    )
                    .await?;
                Ok(markdown.len())
            }
            Err(e) if e.is_not_found() || e.is_archived() => Err(self
                .gone(set, &doc.key, id, module, PublishError::Notion(e))
                .await?),
            Err(e) => Err(e.into()),
        }
    }

    /// The page's content with its children as this build knows them (for the index, every
    /// module page recorded).
    fn render_known(
        &self,
        set: &PageSet<'_>,
        doc: &Document,
        known: &Known,
        module: &str,
    ) -> String {
        if module == INDEX_MODULE {
            let urls: BTreeMap<String, String> = set
                .repo_items
                .iter()
                .filter_map(|i| {
                    let page = i.notion.get(MAIN_LABEL)?;
                    page.id.as_ref()?;
                    Some((i.module.clone(), page.url.clone()?))
                })
                .collect();
            render(doc, Flavor::Notion, &move |k: &DocKey| {
                urls.get(k.item_module()).cloned()
            })
        } else {
            render(
                doc,
                Flavor::Notion,
                &resolver(known, set.item.repo.as_str(), module),
            )
        }
    }

    /// A page found gone: it, or the page it went to the trash with (an archive page goes with
    /// its year, its year with the module page), is forgotten with everything under it, so the
    /// build creates them again.
    async fn gone(
        &self,
        set: &PageSet<'_>,
        key: &DocKey,
        id: &str,
        module: &str,
        original: PublishError,
    ) -> Result<PublishError, PublishError> {
        let repo = set.item.repo.as_str();
        // Made sure of first: a live page, or one out of the integration's reach, is never
        // forgotten (that would make a duplicate).
        if !self.is_gone(id, set).await? {
            return Ok(original);
        }
        let mut known = set.item.notion.clone();
        let label = match key {
            DocKey::Archive { label, .. } => label,
            DocKey::Module { .. } => {
                // Its archive pages went to the trash with it.
                known.entry(MAIN_LABEL.to_string()).or_default().id = Some(id.to_string());
                for (l, p) in &known {
                    if let Some(old) = &p.id {
                        self.pages.forget_notion_page(repo, module, l, old).await?;
                    }
                }
                return Ok(PublishError::Missing(vec![key.clone()]));
            }
            DocKey::Index { .. } => {
                self.pages
                    .forget_notion_page(repo, module, key.label(), id)
                    .await?;
                return Ok(PublishError::Missing(vec![key.clone()]));
            }
        };
        // Its recorded ancestors, outermost first: the module page, then the year (or, in an
        // older layout, the year, quarter, month).
        let mut ancestors: Vec<(String, String)> = known
            .iter()
            .filter(|(l, _)| *l != label && (l.as_str() == MAIN_LABEL || archive_under(l, label)))
            .filter_map(|(l, p)| Some((l.clone(), p.id.clone()?)))
            .collect();
        ancestors.sort_by_key(|(l, _)| if l == MAIN_LABEL { 0 } else { l.len() });
        for (ancestor, ancestor_id) in ancestors {
            // The parent page is reachable (made sure of above): a 404 here is gone.
            if matches!(
                self.client.page_state(&ancestor_id, set.deadline).await?,
                PageState::Live(_)
            ) {
                continue;
            }
            if ancestor == MAIN_LABEL {
                // The module page went: everything under it did.
                for (l, p) in &known {
                    if let Some(old) = &p.id {
                        self.pages.forget_notion_page(repo, module, l, old).await?;
                    }
                }
                return Ok(PublishError::Missing(vec![DocKey::Module {
                    repo: repo.to_string(),
                    module: module.to_string(),
                }]));
            }
            self.pages
                .forget_notion_page(repo, module, &ancestor, &ancestor_id)
                .await?;
            self.forget_subtree(repo, module, &ancestor, &mut known)
                .await?;
            return Ok(PublishError::Missing(vec![DocKey::Archive {
                repo: repo.to_string(),
                module: module.to_string(),
                label: ancestor,
            }]));
        }
        self.pages
            .forget_notion_page(repo, module, label, id)
            .await?;
        self.forget_subtree(repo, module, label, &mut known).await?;
        Ok(PublishError::Missing(vec![key.clone()]))
    }

    /// Forgets every recorded archive page under `root` (they went to the trash with it).
    async fn forget_subtree(
        &self,
        repo: &str,
        module: &str,
        root: &str,
        known: &mut Known,
    ) -> Result<(), PublishError> {
        let under: Vec<(String, String)> = known
            .iter()
            .filter(|(label, _)| *label != root && archive_under(root, label))
            .filter_map(|(label, page)| Some((label.clone(), page.id.clone()?)))
            .collect();
        for (label, id) in under {
            self.pages
                .forget_notion_page(repo, module, &label, &id)
                .await?;
            known.remove(&label);
        }
        Ok(())
    }
}

/// A page's children are listed again before its content is replaced once this long has passed
/// (a page a person deleted under it is then noticed and published again).
const RELIST_AFTER: time::Duration = time::Duration::hours(24);
/// Pages a person put under one page that are remembered (more are named at each listing).
const MAX_OTHERS: usize = 50;

/// Whether the page's children were listed (or it was created) less than `within` ago.
fn listed_within(page: &NotionPage, now: OffsetDateTime, within: time::Duration) -> bool {
    page.listed_at
        .as_deref()
        .and_then(crate::domain::parse_rfc3339)
        .is_some_and(|at| now - at < within)
}

/// The content with the pages a person put under the page named at its end, so that replacing
/// it keeps them.
fn with_others(mut markdown: String, others: &[OtherPage]) -> String {
    if others.is_empty() {
        return markdown;
    }
    markdown.push_str("\n## Other pages\n");
    for other in others {
        let tag = if other.database { "database" } else { "page" };
        markdown.push_str(&format!(
            "\n<{tag} url=\"{}\">{}</{tag}>\n",
            url_of_id(&other.id),
            other.title.replace(['<', '>'], "")
        ));
    }
    markdown
}

/// Links to the module's own pages, from what this build knows of them.
fn resolver<'a>(
    known: &'a Known,
    repo: &'a str,
    module: &'a str,
) -> impl Fn(&DocKey) -> Option<String> + 'a {
    move |key: &DocKey| {
        if key.repo() != repo || key.item_module() != module {
            return None;
        }
        known.get(key.label()).and_then(page_url)
    }
}

/// A recorded page's URL: as Notion gave it, else (archive pages keep only their id, the page
/// item of a busy module holds many) from its id.
fn page_url(page: &NotionPage) -> Option<String> {
    page.url
        .clone()
        .or_else(|| page.id.as_deref().map(url_of_id))
}

/// Whether archive page `label` is `root` or below it: a year holds its parts (`2019-p3`) and
/// their halves; in the older layout, its quarters, months and parts, a quarter its three
/// months and their parts, and a month its parts.
pub fn archive_under(root: &str, label: &str) -> bool {
    if let Some((year, quarter)) = root.split_once("-Q") {
        let Ok(q) = quarter.parse::<u32>() else {
            return false;
        };
        if label == root || label.starts_with(&format!("{root}-")) {
            return true;
        }
        let month: Option<u32> = label
            .strip_prefix(year)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|rest| rest.get(..2))
            .and_then(|m| m.parse().ok());
        return month.is_some_and(|m| (3 * q - 2..=3 * q).contains(&m));
    }
    label == root || label.starts_with(&format!("{root}-"))
}

/// Child listings fetched during one build, by page id.
#[derive(Default)]
struct Listings(std::collections::HashMap<String, Vec<ChildPage>>);

/// A short hash of the Markdown sent to a page (its URLs included): equal means unchanged.
fn content_hash(markdown: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(markdown.as_bytes())[..12])
}

/// Notion ids with or without dashes, compared alike.
fn normalize(id: &str) -> String {
    id.replace('-', "").to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::archive_under;

    #[test]
    fn archive_subtrees() {
        assert!(archive_under("2019", "2019-Q3"));
        assert!(archive_under("2019", "2019-07-p2"));
        assert!(!archive_under("2019", "2020"));
        assert!(archive_under("2019-Q3", "2019-08"));
        assert!(archive_under("2019-Q3", "2019-09-p1"));
        assert!(!archive_under("2019-Q3", "2019-10"));
        assert!(!archive_under("2019-Q3", "2019"));
        assert!(archive_under("2019-03", "2019-03-p1-a"));
        assert!(!archive_under("2019-03", "2019-04"));
        assert!(
            !archive_under("2019-03-p1", "2019-03-p10"),
            "parts are not prefixes"
        );
        assert!(archive_under("2019-Q1", "2019-Q1-a"), "a quarter's halves");
    }
}
