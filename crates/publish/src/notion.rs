//! Publishing pages to Notion, whole, through its Markdown content API.
//!
//! Pages nest as the documents do: the configured parent page holds one organisation page per
//! owner (`<owner> · repositories`, [`org`]), which holds one index page per repository
//! (`<repo> · modules`), which holds the module pages, which hold their archive pages. A
//! page's child pages are named in its content (`<page url=…>`), as Notion requires for
//! replacing content without deleting them.
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
use chronicle_domain::{NotionPage, OtherPage};
use chronicle_notion::{ChildPage, NotionClient, NotionError, PageState};
use chronicle_pages::render::{render, Flavor};
use chronicle_pages::{DocKey, Document, MAIN_LABEL};
use chronicle_store::{CreateClaim, PageStore, INDEX_MODULE};

mod org;
mod tree;

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

    fn publishes_org(&self) -> bool {
        true
    }

    fn publish_org<'a>(
        &'a self,
        set: &'a crate::OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(self.publish_org_page(set))
    }
}

/// Where the pages of one page item are, by label, as this build knows them.
type Known = BTreeMap<String, NotionPage>;

/// A page's expected children, compared with its live listing.
struct Children {
    /// The ids of the children recorded and listed.
    expected_ids: BTreeSet<String>,
    /// The children not listed, with their recorded id (`None`: never published).
    missing: Vec<(DocKey, Option<String>)>,
    /// For an index: each listed module page's URL, by module.
    module_urls: BTreeMap<String, String>,
}

/// The document's child pages against the ids `live_ids` lists: an index's children are its
/// modules' main pages (from the repository's items), a module page's its archive pages.
fn children_against(
    set: &PageSet<'_>,
    doc: &Document,
    known: &Known,
    live_ids: &BTreeSet<String>,
    is_index: bool,
) -> Children {
    let mut children = Children {
        expected_ids: BTreeSet::new(),
        missing: Vec::new(),
        module_urls: BTreeMap::new(),
    };
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
                children.missing.push((child.clone(), None));
            }
            continue;
        };
        if live_ids.contains(&normalize(&child_id)) {
            children.expected_ids.insert(normalize(&child_id));
            if let Some(url) = child_url {
                children
                    .module_urls
                    .insert(child.item_module().to_string(), url);
            }
        } else {
            children.missing.push((child.clone(), Some(child_id)));
        }
    }
    children
}

/// An index's module page URLs, for the modules whose page was listed late.
fn index_urls(
    set: &PageSet<'_>,
    doc: &Document,
    listed_late: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    let mut urls = BTreeMap::new();
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
                urls.insert(child.item_module().to_string(), url);
            }
        }
    }
    urls
}

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
                    // In the trash already (or under a page a person trashed): "archived".
                    Err(e) if e.is_archived() => {}
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
        if id_of(&known, MAIN_LABEL).is_none() {
            let parent = self.org_parent(set).await?;
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
        }
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
        let parent = self.org_parent(set).await?;
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
            if let Some(bytes) = self
                .replace_as_known(set, doc, id, known, module, &record)
                .await?
            {
                return Ok(bytes);
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
        let Children {
            mut expected_ids,
            mut missing,
            mut module_urls,
        } = children_against(set, doc, known, &live_ids, is_index);
        // Not in the listing of the page's top-level children: gone, or moved by a person (into a
        // toggle or a column, or under another page). Made sure of before anything is forgotten:
        // a moved page stays recorded, and is never published a second time.
        let (moved, listed_late) = self.look_for(set, id, is_index, &missing).await?;
        missing.retain(|(_, child_id)| {
            child_id
                .as_deref()
                .is_none_or(|c| !listed_late.contains(&normalize(c)))
        });
        if is_index && !listed_late.is_empty() {
            module_urls.extend(index_urls(set, doc, &listed_late));
        }
        expected_ids.extend(listed_late);
        if !moved.is_empty() {
            tracing::warn!(repo, module, pages = ?moved, "Chronicle's pages were moved by hand; they stay where they are and the page above them is not replaced until they are back");
            return Err(PublishError::Moved {
                parent: doc.title.clone(),
                pages: moved,
            });
        }
        self.forget_missing(set, module, &missing, known).await?;
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
        let (named, others) = self.others(&live, &expected_ids, set).await?;
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

    /// Where the children missing from page `id`'s listing are: moved by a person (their labels,
    /// or modules for an index), or still top-level children the listing lagged behind (their
    /// ids). One that is gone leaves both empty; a parent no longer shared is an error.
    async fn look_for(
        &self,
        set: &PageSet<'_>,
        id: &str,
        is_index: bool,
        missing: &[(DocKey, Option<String>)],
    ) -> Result<(Vec<String>, BTreeSet<String>), PublishError> {
        let mut moved = Vec::new();
        let mut listed_late = BTreeSet::new();
        for (child, child_id) in missing {
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
        Ok((moved, listed_late))
    }

    /// Replaces a page whose children were listed lately at once, naming the children it
    /// records and the pages a person put there. `None`: Notion refused the content (it would
    /// drop a child added since, or names one that is gone), so the children are to be listed.
    async fn replace_as_known(
        &self,
        set: &PageSet<'_>,
        doc: &Document,
        id: &str,
        known: &mut Known,
        module: &str,
        record: &NotionPage,
    ) -> Result<Option<usize>, PublishError> {
        let repo = set.item.repo.as_str();
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
                Ok(Some(markdown.len()))
            }
            Err(e) if e.is_not_found() || e.is_archived() => Err(self
                .gone(set, &doc.key, id, module, PublishError::Notion(e))
                .await?),
            Err(NotionError::Invalid { message, .. }) => {
                tracing::info!(
                    repo,
                    module,
                    page = id,
                    message,
                    "Notion refused the content: its child pages are listed, and it is sent again"
                );
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Forgets the child pages that are gone. For the index, its module is published again (and
    /// then listed here again; its archive pages went to the trash with it); for a module page,
    /// its own subpages went with it.
    async fn forget_missing(
        &self,
        set: &PageSet<'_>,
        module: &str,
        missing: &[(DocKey, Option<String>)],
        known: &mut Known,
    ) -> Result<(), PublishError> {
        let repo = set.item.repo.as_str();
        let is_index = module == INDEX_MODULE;
        for (child, child_id) in missing {
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
        Ok(())
    }

    /// The live children nobody expected, named so that replacing the content keeps them, and
    /// of those the ones a person put here (remembered). Those this integration made (a module
    /// page another build just created) are named too, but not remembered: the next listing
    /// tells what they are.
    async fn others(
        &self,
        live: &[ChildPage],
        expected_ids: &BTreeSet<String>,
        set: &PageSet<'_>,
    ) -> Result<(Vec<OtherPage>, Vec<OtherPage>), PublishError> {
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
            title: chronicle_domain::cap(&c.title, 200),
            database: c.database,
        };
        let named: Vec<OtherPage> = unexpected.iter().map(as_other).collect();
        let others: Vec<OtherPage> = unexpected
            .iter()
            .filter(|c| c.created_by != bot)
            .take(MAX_OTHERS)
            .map(as_other)
            .collect();
        Ok((named, others))
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
        .and_then(chronicle_domain::parse_rfc3339)
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
