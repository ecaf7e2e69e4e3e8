//! The organisation's page in Notion, `<owner> · repositories`, under the configured parent
//! page: every repository of the owner with its modules, and the repositories' index pages as
//! its child pages.
//!
//! - Its record is the owner's page item (`#org/<owner>` / `#index`): created under a claim,
//!   adopted after a lost answer, like every other page, so there is never a second one.
//! - A repository's index page is created under it. One an earlier version published under the
//!   configured parent is moved under it; one a person moved elsewhere stays there, linked.
//! - Replaced whole from the rows, its child pages listed first so that each index page is
//!   named (`<page>`) and a page a person put under it is kept. Unchanged content (same hash,
//!   listed within a day) costs no request.
//! - Replaced under its item's build lease (the builder builds it once per tick), fenced by it:
//!   the replace is retried after a 5xx, a 409 or no answer, but never past the build's
//!   deadline (the lease's end less a margin), and its hash is recorded only while the lease is
//!   still this build's. A replace that may have landed after another holder's (no answer, or
//!   answered after the lease ended) records nothing and marks the page to be sent again whole.
//! - Content Notion refused (400/413) is remembered by its hash: while the rows are unchanged
//!   it is not sent again (no listing, no replace) for [`REFUSAL_KEPT`]; rows that change are
//!   sent at once. Over Notion's size it is not listed and sent a second time.
//! - Deleted by hand: forgotten, and every repository's index is built again (its pages went to
//!   the trash with it), under a new organisation page.

use super::*;
use crate::OrgSet;
use chronicle_domain::PageItem;
use chronicle_pages::org::{normalize_id, org_page_notion};
use time::format_description::well_known::Rfc3339;

/// How long content Notion refused is not sent again while unchanged (a person may have moved
/// the page out of the toggle that made Notion refuse it; a merge sends it sooner).
const REFUSAL_KEPT: time::Duration = time::Duration::days(1);

/// The organisation page's title.
pub(super) fn org_title(org: &str) -> String {
    format!("{org} · repositories")
}

/// What the organisation page is made from: its rows and the other pages under it, as the
/// content they give when every index page is its child. Recorded after a replace, and
/// compared before the next, so an index page a person moved elsewhere (the content then
/// differs) does not make every build list and send the page again.
fn input_hash(set: &OrgSet<'_>, others: &[OtherPage]) -> String {
    let all: BTreeSet<String> = set
        .repos
        .iter()
        .filter_map(|r| r.notion_index.as_ref().map(|p| normalize_id(&p.id)))
        .collect();
    content_hash(&with_others(
        org_page_notion(set.org, set.repos, &all),
        others,
    ))
}

/// The owner of `owner/name`.
fn owner_of(repo: &str) -> &str {
    repo.split_once('/').map_or(repo, |(owner, _)| owner)
}

/// A page set for the organisation page's own item (its claims and records).
fn org_set<'a>(item: &'a PageItem, owner: &'a str, deadline: std::time::Instant) -> PageSet<'a> {
    PageSet {
        item,
        repo_items: &[],
        docs: &[],
        removed: &[],
        owner,
        deadline,
    }
}

impl NotionPublisher {
    /// The page a repository's index page is created under: its owner's organisation page,
    /// created (with a placeholder, filled by the organisation build that follows) if there is
    /// none or the recorded one is gone.
    pub(super) async fn org_parent(&self, set: &PageSet<'_>) -> Result<String, PublishError> {
        let org = owner_of(set.item.repo.as_str());
        let item = self.pages.org_page_item(org).await?;
        let page_set = org_set(&item, set.owner, set.deadline);
        let mut known: Known = item.notion.clone();
        if let Some(id) = id_of(&known, MAIN_LABEL) {
            if !self.is_gone(&id, &page_set).await? {
                return Ok(id);
            }
            let repos = self.pages.org_repos(org).await?;
            self.forget_org(org, &item, &id, &repos).await?;
            known.remove(MAIN_LABEL);
        }
        let id = self.ensure_org_page(&page_set, org, &mut known).await?;
        // Made with a placeholder: the next organisation build fills it whatever its hash says.
        self.pages
            .mark_org_stale(org, true, OffsetDateTime::now_utc())
            .await?;
        Ok(id)
    }

    /// The organisation page's id: recorded in `known`, or created (with a placeholder) under
    /// the configured parent, or adopted after a create whose answer was lost.
    async fn ensure_org_page(
        &self,
        page_set: &PageSet<'_>,
        org: &str,
        known: &mut Known,
    ) -> Result<String, PublishError> {
        let parent = self.parent_page_id.clone();
        self.ensure(
            page_set,
            INDEX_MODULE,
            MAIN_LABEL,
            &org_title(org),
            &parent,
            None,
            known,
        )
        .await?;
        id_of(known, MAIN_LABEL).ok_or(PublishError::LeaseLost)
    }

    /// Marks stale the index of every repository of `org` whose index page this integration
    /// made directly under the configured parent (where an earlier version put them), so each
    /// one's next build moves it under the organisation page, not only those that happen to
    /// merge again. Only an index this deployment records as that very page: a page of another
    /// deployment, or of a repository it no longer tracks, makes no build.
    async fn wake_old_indexes(
        &self,
        org: &str,
        deadline: std::time::Instant,
    ) -> Result<(), PublishError> {
        let listed = self
            .client
            .child_pages(&self.parent_page_id, deadline)
            .await?;
        let indexes: Vec<(chronicle_domain::RepoName, ChildPage)> = listed
            .into_iter()
            .filter(|c| !c.database)
            .filter_map(|c| {
                let repo = c.title.strip_suffix(" · modules")?;
                let repo = chronicle_domain::RepoName::parse(repo).ok()?;
                (repo.owner() == org).then_some((repo, c))
            })
            .collect();
        if indexes.is_empty() {
            return Ok(());
        }
        let bot = self.client.bot_id(deadline).await?;
        let now = OffsetDateTime::now_utc();
        for (repo, child) in indexes {
            if child.created_by.as_deref() != Some(bot.as_str()) {
                continue;
            }
            let recorded = self
                .pages
                .get(repo.as_str(), INDEX_MODULE)
                .await?
                .and_then(|item| item.notion.get(MAIN_LABEL).and_then(|p| p.id.clone()));
            if recorded.as_deref().map(normalize) != Some(normalize(&child.id)) {
                continue;
            }
            tracing::info!(repo = %repo, page = %child.id, "an index page under the parent: its repository's index is built again, and moved");
            self.pages
                .mark_stale(repo.as_str(), INDEX_MODULE, &[], now)
                .await?;
        }
        Ok(())
    }

    /// Replaces the organisation page from its rows (created first if there is none).
    pub(super) async fn publish_org_page(
        &self,
        set: &OrgSet<'_>,
    ) -> Result<Published, PublishError> {
        let before = self.client.requests();
        let mut published = self.replace_org_page(set).await?;
        published.requests = self.client.requests() - before;
        Ok(published)
    }

    async fn replace_org_page(&self, set: &OrgSet<'_>) -> Result<Published, PublishError> {
        let item = self.pages.org_page_item(set.org).await?;
        let page_set = org_set(&item, set.owner, set.deadline);
        let mut known: Known = item.notion.clone();
        let id = self.ensure_org_page(&page_set, set.org, &mut known).await?;
        if item.woken_at.is_none() {
            // Once per organisation page, until it succeeds.
            self.wake_old_indexes(set.org, set.deadline).await?;
            self.pages
                .record_org_woken(set.org, OffsetDateTime::now_utc())
                .await?;
        }
        let record = known.get(MAIN_LABEL).cloned().unwrap_or_default();
        let now = OffsetDateTime::now_utc();
        // Steady state: the same rows and other pages as last sent, listed within a day (unless
        // what the page holds is in doubt).
        if !item.full_rebuild
            && record.hash.as_deref() == Some(input_hash(set, &record.others).as_str())
            && listed_within(&record, now, RELIST_AFTER)
        {
            return Ok(Published::default());
        }
        // The same rows as Notion refused lately: refused again, so not sent.
        let rows = input_hash(set, &[]);
        let refusal = self.pages.org_refusal(set.org).await?;
        if let Some(refused) = refusal.as_ref().filter(|r| r.hash == rows) {
            let at = OffsetDateTime::parse(&refused.at, &Rfc3339).ok();
            if at.is_some_and(|at| now - at < REFUSAL_KEPT) {
                return Err(PublishError::StillRefused {
                    at: refused.at.clone(),
                    error: refused.error.clone(),
                });
            }
        }
        // A repository's index page created under it between the listing and the replace is
        // not named, and Notion refuses the content: listed again, and sent again once (not
        // when it is too large: listing again cannot shrink it). A second refusal is the
        // build's failure, recorded with Notion's message.
        let result = match self.list_and_replace(set, &item, &id, now).await? {
            Err(e) if !e.is_too_large() => {
                tracing::info!(
                    org = set.org,
                    page = %id,
                    "Notion refused the organisation page: its child pages are listed, and it is sent again"
                );
                self.list_and_replace(set, &item, &id, now).await?
            }
            first => first,
        };
        match result {
            Ok(published) => {
                if refusal.is_some() {
                    self.pages.record_org_refusal(set.org, None).await?;
                }
                Ok(published)
            }
            Err(e) => {
                let refused = chronicle_store::OrgRefusal {
                    hash: rows,
                    at: chronicle_domain::rfc3339_millis(now),
                    error: e.to_string(),
                };
                self.pages
                    .record_org_refusal(set.org, Some(&refused))
                    .await?;
                Err(e.into())
            }
        }
    }

    /// Lists the organisation page's children (moving index pages under it), then replaces its
    /// content naming them. The inner error: Notion refused the content.
    async fn list_and_replace(
        &self,
        set: &OrgSet<'_>,
        item: &PageItem,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<Result<Published, NotionError>, PublishError> {
        let mut published = Published::default();
        let page_set = org_set(item, set.owner, set.deadline);
        let listed = match self.client.child_pages(id, set.deadline).await {
            Ok(listed) => listed,
            Err(e) if e.is_not_found() => return self.org_gone(set, item, id, e).await.map(Ok),
            Err(e) => return Err(e.into()),
        };
        let mut children: BTreeSet<String> = listed.iter().map(|c| normalize_id(&c.id)).collect();
        for row in set.repos {
            let Some(index) = &row.notion_index else {
                continue;
            };
            if children.contains(&normalize_id(&index.id)) {
                continue;
            }
            if self.adopt_index(id, &index.id, set).await? {
                tracing::info!(repo = %row.repo, page = %index.id, "moved a repository's index page under its organisation page");
                children.insert(normalize_id(&index.id));
            }
        }
        let markdown = org_page_notion(set.org, set.repos, &children);
        let indexes: BTreeSet<String> = set
            .repos
            .iter()
            .filter_map(|r| r.notion_index.as_ref().map(|p| normalize_id(&p.id)))
            .filter(|i| children.contains(i))
            .collect();
        let (named, others) = self.others(&listed, &indexes, &page_set).await?;
        let (earlier, named) = self.earlier_indexes(set.org, named).await?;
        let markdown = with_earlier(with_others(markdown, &named), &earlier);
        // Retried only until the deadline, which ends before the lease: no attempt of this
        // build is sent while another holds the page.
        match self
            .client
            .replace_markdown(id, &markdown, set.deadline)
            .await
        {
            Ok(()) => {
                published.documents = 1;
                published.bytes = markdown.len();
                let recorded = self
                    .pages
                    .record_notion_hash_leased(
                        &item.repo,
                        INDEX_MODULE,
                        MAIN_LABEL,
                        id,
                        &input_hash(set, &others),
                        Some((now, &others)),
                        set.owner,
                        OffsetDateTime::now_utc(),
                    )
                    .await?;
                if !recorded {
                    // The lease ended during the replace: another build may have replaced the
                    // page before this one landed. Sent again whole by the next build.
                    tracing::warn!(
                        org = set.org,
                        page = %id,
                        "the organisation page's lease ended during its replace; it is published again"
                    );
                    self.pages
                        .mark_org_stale(set.org, true, OffsetDateTime::now_utc())
                        .await?;
                    return Err(PublishError::LeaseLost);
                }
                Ok(Ok(published))
            }
            Err(e) if e.is_not_found() || e.is_archived() => {
                self.org_gone(set, item, id, e).await.map(Ok)
            }
            Err(e @ NotionError::Invalid { .. }) => Ok(Err(e)),
            Err(e) => {
                if e.maybe_applied() {
                    // It may still land, after any other replace: what the page holds is in
                    // doubt until a later one is answered in time.
                    self.pages
                        .mark_org_stale(set.org, true, OffsetDateTime::now_utc())
                        .await?;
                }
                Err(e.into())
            }
        }
    }

    /// Moves index page `index` under the organisation page `org_id` if it is where an earlier
    /// version created it (under the configured parent). `false`: it is gone, or a person put
    /// it elsewhere (it stays there, linked).
    async fn adopt_index(
        &self,
        org_id: &str,
        index: &str,
        set: &OrgSet<'_>,
    ) -> Result<bool, PublishError> {
        let state = self.client.page_state(index, set.deadline).await?;
        if state.parent_page().map(normalize) == Some(normalize(org_id)) {
            // A listing that lagged behind.
            return Ok(true);
        }
        if state.parent_page().map(normalize) != Some(normalize(&self.parent_page_id)) {
            return Ok(false);
        }
        match self.client.move_page(index, org_id, set.deadline).await {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() || e.is_archived() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The organisation page answered 404 or "archived": if it is gone (the configured parent
    /// still reachable), it is forgotten and every repository's index is built again under a
    /// new one; if access was lost, [`PublishError::Unreachable`].
    async fn org_gone(
        &self,
        set: &OrgSet<'_>,
        item: &PageItem,
        id: &str,
        error: NotionError,
    ) -> Result<Published, PublishError> {
        let page_set = org_set(item, set.owner, set.deadline);
        if !self.is_gone(id, &page_set).await? {
            return Err(error.into());
        }
        self.forget_org(set.org, item, id, set.repos).await?;
        Ok(Published::default())
    }

    /// Forgets the organisation page `id`, gone, and marks every repository's index stale: its
    /// pages went to the trash with it, and each is published again under a new one.
    async fn forget_org(
        &self,
        org: &str,
        item: &PageItem,
        id: &str,
        repos: &[chronicle_domain::OrgRepo],
    ) -> Result<(), PublishError> {
        tracing::warn!(
            org,
            "the Notion organisation page was deleted by hand; every repository's index is published again"
        );
        self.pages
            .forget_notion_page(&item.repo, INDEX_MODULE, MAIN_LABEL, id)
            .await?;
        let now = OffsetDateTime::now_utc();
        for row in repos {
            self.pages
                .mark_stale(&row.repo, INDEX_MODULE, &[], now)
                .await?;
        }
        Ok(())
    }
}

/// Index pages of repositories renamed, transferred or deleted (their rows forgotten, see
/// `chronicle-store`'s `pages/lifecycle.rs`): their history, still under the organisation page.
impl NotionPublisher {
    /// Splits the organisation page's unexpected children into forgotten repositories' index
    /// pages and the rest (pages people put there).
    async fn earlier_indexes(
        &self,
        org: &str,
        named: Vec<OtherPage>,
    ) -> Result<(Vec<OtherPage>, Vec<OtherPage>), PublishError> {
        if named.is_empty() {
            return Ok((named, Vec::new()));
        }
        let forgotten: BTreeSet<String> = self
            .pages
            .forgotten_org_repos(org)
            .await?
            .iter()
            .filter_map(|r| r.notion_index.as_ref().map(|p| normalize_id(&p.id)))
            .collect();
        Ok(named
            .into_iter()
            .partition(|p| forgotten.contains(&normalize_id(&p.id))))
    }
}

/// The page's content with the forgotten repositories' index pages named under their own
/// heading (Notion keeps a child page only if the content names it).
fn with_earlier(mut markdown: String, earlier: &[OtherPage]) -> String {
    if earlier.is_empty() {
        return markdown;
    }
    markdown.push_str("\n## Earlier repositories\n");
    for page in earlier {
        markdown.push_str(&format!(
            "\n<page url=\"{}\">{}</page>\n",
            url_of_id(&page.id),
            page.title.replace(['<', '>'], "")
        ));
    }
    markdown
}
