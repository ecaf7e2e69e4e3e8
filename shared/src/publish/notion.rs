//! The Notion publisher: one Notion page per (repo, module) under a configured parent page,
//! with the same header, month groups and entries as the Markdown page, newest first.
//!
//! A Notion page is not rewritten: each PR's entry is appended once, at its place in page order.
//! What makes that exactly once:
//! - **the page lock** (a conditional write in the pages table, [`NotionPages`]) is taken before
//!   anything is created or appended, so two workers publishing the first PRs of a new module
//!   create one page: the second waits for the lock and finds the page id;
//! - a worker that dies after creating a page but before recording it left `createStartedAt`:
//!   the next lock holder looks for the page under the parent before creating one;
//! - the PR row records `appending` before the append and the appended block ids after it
//!   ([`NotionRecord`]): a retry with block ids checks they are still there and appends nothing;
//!   a retry that finds only `appending` removes whatever that append left, then appends again.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::Value;
use time::OffsetDateTime;

use super::{Publication, PublishError, Publisher};
use crate::domain::RepoName;
use crate::narrative::{self, Block, Entry, ModulePage, HEADER_BLOCKS};
use crate::notion::{self, NotionClient};
use crate::store::{
    notion_record, NotionPages, NotionRecord, PageEntry, PageLock, PageRow, PrStore,
};

/// How long a worker waits for another worker's page lock before giving the message back.
const LOCK_WAIT: Duration = Duration::from_secs(20);
/// The longest a page lock is taken for (a worker that dies holds it no longer than this).
const LOCK_TTL: Duration = Duration::from_secs(120);

pub struct NotionPublisher {
    client: NotionClient,
    parent_page_id: String,
    pages: NotionPages,
    prs: PrStore,
}

impl NotionPublisher {
    pub fn new(
        client: NotionClient,
        parent_page_id: &str,
        pages: NotionPages,
        prs: PrStore,
    ) -> Self {
        NotionPublisher {
            client,
            parent_page_id: parent_page_id.trim().to_string(),
            pages,
            prs,
        }
    }

    async fn publish_entry(&self, p: &Publication<'_>) -> Result<(), PublishError> {
        let repo = RepoName::parse(&p.page.repo)
            .map_err(|e| PublishError::Other(format!("the page's repository: {e}")))?;
        let module = p.page.module.as_str();
        let entry = p.page.entry(p.number).ok_or_else(|| {
            PublishError::Other(format!(
                "the page of {module} lacks the entry of #{}",
                p.number
            ))
        })?;
        // The lock is this worker's: the lease owner names the message being worked on.
        let owner = p.lease_owner;
        let row = self.lock(&repo, module, owner, p.deadline).await?;
        let result = self.publish_locked(&repo, p, entry, row).await;
        if let Err(e) = self.pages.unlock(&repo, module, owner).await {
            // The lock expires on its own; the entry is already recorded.
            tracing::warn!(repo = %repo, module, error = %e, "releasing the Notion page lock failed");
        }
        result
    }

    /// Takes the page lock, waiting for another holder for at most [`LOCK_WAIT`].
    async fn lock(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
        deadline: Instant,
    ) -> Result<PageRow, PublishError> {
        let started = Instant::now();
        let mut wait = Duration::from_millis(100);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let now = OffsetDateTime::now_utc();
            match self
                .pages
                .lock(repo, module, owner, now, now + left.min(LOCK_TTL))
                .await?
            {
                PageLock::Held(row) => return Ok(row),
                PageLock::Busy { until } => {
                    let out_of_patience = started.elapsed() + wait > LOCK_WAIT
                        || Instant::now() + wait + Duration::from_secs(5) > deadline;
                    if out_of_patience {
                        return Err(PublishError::Busy {
                            page: format!("{repo} · {module}"),
                            until: until.unwrap_or_default(),
                        });
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    async fn publish_locked(
        &self,
        repo: &RepoName,
        p: &Publication<'_>,
        entry: &Entry,
        row: PageRow,
    ) -> Result<(), PublishError> {
        let module = p.page.module.as_str();
        let owner = p.lease_owner;
        let deadline = p.deadline;
        let mut row = row;
        let page_id = match row.page_id.clone() {
            Some(id) => id,
            None => {
                self.create_page(repo, p.page, owner, &mut row, deadline)
                    .await?
            }
        };

        let recorded = notion_record(p.row, module);
        let on_page = match &recorded {
            Some(NotionRecord::Appended { page, blocks })
                if *page == page_id && !blocks.is_empty() =>
            {
                // Still there? Someone may have deleted the entry by hand: then it goes back.
                self.client
                    .live_block(&blocks[0], deadline)
                    .await?
                    .map(|_| blocks.clone())
            }
            Some(NotionRecord::Appending { page }) if *page == page_id => {
                self.remove_partial(&page_id, entry, &row, deadline).await?;
                None
            }
            _ => None,
        };
        match on_page {
            Some(blocks) => {
                // Appended before a crash; the page row may not know it yet.
                let mark = page_entry(entry, blocks.last().cloned().unwrap_or_default());
                if row.entries.get(&p.number) != Some(&mark) {
                    self.ensure(
                        self.pages
                            .set_entry(repo, module, owner, p.number, &mark, None)
                            .await?,
                        "page lock",
                    )?;
                    row.entries.insert(p.number, mark);
                }
                tracing::info!(repo = %repo, module, pr = p.number, "Notion entry already on the page");
            }
            None => {
                self.append_entry(repo, p, entry, &page_id, &mut row, deadline)
                    .await?
            }
        }
        self.update_header(repo, p.page, owner, &row, deadline)
            .await
    }

    /// Creates the module's page with its header (or adopts the one a crashed worker created).
    async fn create_page(
        &self,
        repo: &RepoName,
        page: &ModulePage,
        owner: &str,
        row: &mut PageRow,
        deadline: Instant,
    ) -> Result<String, PublishError> {
        let module = page.module.as_str();
        let title = page.title();
        let found = if row.create_started {
            self.find_page(&title, deadline).await?
        } else {
            None
        };
        let page_id = match found {
            Some(id) => {
                tracing::info!(repo = %repo, module, page_id = %id, "adopted the Notion page a previous attempt created");
                id
            }
            None => {
                self.ensure(
                    self.pages
                        .mark_creating(repo, module, owner, OffsetDateTime::now_utc())
                        .await?,
                    "page lock",
                )?;
                let header = notion::to_notion(&narrative::header_blocks(page));
                let children = notion::chunks(&header)
                    .into_iter()
                    .next()
                    .map(|c| c.children)
                    .unwrap_or_default();
                let id = self
                    .client
                    .create_page(&self.parent_page_id, &title, children, deadline)
                    .await?;
                tracing::info!(repo = %repo, module, page_id = %id, "created the Notion page");
                id
            }
        };
        let children = self.client.children(&page_id, deadline).await?;
        let header: Vec<&Value> = children.iter().take(HEADER_BLOCKS).collect();
        let header_ids: Vec<String> = header
            .iter()
            .filter_map(|b| b["id"].as_str().map(str::to_string))
            .collect();
        let header_text: Vec<String> = header.iter().map(|b| notion::block_text(b)).collect();
        self.ensure(
            self.pages
                .set_page(repo, module, owner, &page_id, &header_ids, &header_text)
                .await?,
            "page lock",
        )?;
        row.page_id = Some(page_id.clone());
        row.header_ids = header_ids;
        row.header_text = header_text;
        Ok(page_id)
    }

    /// The parent's child page with this title, if there is one.
    async fn find_page(
        &self,
        title: &str,
        deadline: Instant,
    ) -> Result<Option<String>, PublishError> {
        let children = self.client.children(&self.parent_page_id, deadline).await?;
        Ok(children
            .iter()
            .find(|b| b["type"] == "child_page" && b["child_page"]["title"] == title)
            .and_then(|b| b["id"].as_str().map(str::to_string)))
    }

    /// Appends the entry at its place (and its month's heading if the month is new), recording
    /// `appending` on the PR row first and the block ids after.
    async fn append_entry(
        &self,
        repo: &RepoName,
        p: &Publication<'_>,
        entry: &Entry,
        page_id: &str,
        row: &mut PageRow,
        deadline: Instant,
    ) -> Result<(), PublishError> {
        let module = p.page.module.as_str();
        let (anchor, new_month) = placement(entry, row);
        let mut blocks: Vec<Block> = Vec::new();
        if new_month {
            blocks.push(narrative::month_heading(entry));
        }
        blocks.extend(narrative::entry_blocks(entry));
        let notion_blocks = notion::to_notion(&blocks);

        let now = OffsetDateTime::now_utc();
        let appending = NotionRecord::Appending {
            page: page_id.to_string(),
        };
        self.ensure(
            self.prs
                .save_notion_record(repo, p.number, p.lease_owner, module, &appending, now)
                .await?,
            "summary lease",
        )?;
        let mut ids = self
            .client
            .append_all(page_id, &notion_blocks, anchor.as_deref(), deadline)
            .await?;
        let month = if new_month && !ids.is_empty() {
            Some(ids.remove(0))
        } else {
            None
        };
        let appended = NotionRecord::Appended {
            page: page_id.to_string(),
            blocks: ids.clone(),
        };
        self.ensure(
            self.prs
                .save_notion_record(repo, p.number, p.lease_owner, module, &appended, now)
                .await?,
            "summary lease",
        )?;
        let label = narrative::month(entry);
        let mark = page_entry(entry, ids.last().cloned().unwrap_or_default());
        self.ensure(
            self.pages
                .set_entry(
                    repo,
                    module,
                    p.lease_owner,
                    p.number,
                    &mark,
                    month.as_deref().map(|id| (label.as_str(), id)),
                )
                .await?,
            "page lock",
        )?;
        row.entries.insert(p.number, mark);
        if let Some(id) = month {
            row.months.insert(label, id);
        }
        tracing::info!(repo = %repo, module, pr = p.number, blocks = ids.len(), new_month, "appended the Notion entry");
        Ok(())
    }

    /// Moves to the trash what an interrupted append of this entry left on the page: the run of
    /// blocks from its heading (the heading that links to the PR) to the next heading, and a
    /// month heading just before it that the page row does not know.
    async fn remove_partial(
        &self,
        page_id: &str,
        entry: &Entry,
        row: &PageRow,
        deadline: Instant,
    ) -> Result<(), PublishError> {
        let children = self.client.children(page_id, deadline).await?;
        let known_months: Vec<&String> = row.months.values().collect();
        let is_heading = |b: &Value| matches!(b["type"].as_str(), Some("heading_2" | "heading_3"));
        let mut doomed: Vec<String> = Vec::new();
        let mut i = 0;
        while i < children.len() {
            let block = &children[i];
            let ours =
                block["type"] == "heading_3" && notion::block_links(block).contains(&entry.url);
            if !ours {
                i += 1;
                continue;
            }
            if i > 0 {
                let before = &children[i - 1];
                let id = before["id"].as_str().unwrap_or_default().to_string();
                if before["type"] == "heading_2" && !known_months.contains(&&id) {
                    doomed.push(id);
                }
            }
            doomed.push(block["id"].as_str().unwrap_or_default().to_string());
            i += 1;
            while i < children.len() && !is_heading(&children[i]) {
                doomed.push(children[i]["id"].as_str().unwrap_or_default().to_string());
                i += 1;
            }
        }
        if !doomed.is_empty() {
            tracing::warn!(
                page_id,
                pr = entry.number,
                blocks = doomed.len(),
                "removing what an interrupted append left"
            );
        }
        for id in doomed.iter().filter(|id| !id.is_empty()) {
            self.client.delete_block(id, deadline).await?;
        }
        Ok(())
    }

    /// Rewrites the header blocks whose text changed (counts, dates, authors), from the entries
    /// on the Notion page (the page row): workers publishing at once each see them all.
    async fn update_header(
        &self,
        repo: &RepoName,
        page: &ModulePage,
        owner: &str,
        row: &PageRow,
        deadline: Instant,
    ) -> Result<(), PublishError> {
        let header = narrative::header_of(
            &page.paths,
            row.entries
                .values()
                .map(|e| (e.merged_at.as_str(), e.author.as_str())),
        );
        let text: Vec<String> = header.iter().map(Block::plain_text).collect();
        if text == row.header_text {
            return Ok(());
        }
        for (i, (block, id)) in header.iter().zip(&row.header_ids).enumerate() {
            if row.header_text.get(i) == Some(&text[i]) {
                continue;
            }
            let spans = match block {
                Block::Paragraph(spans) => spans,
                _ => continue,
            };
            self.client
                .update_text(id, "paragraph", notion::rich_text(spans), deadline)
                .await?;
        }
        self.ensure(
            self.pages
                .set_header_text(repo, &page.module, owner, &text)
                .await?,
            "page lock",
        )
    }

    fn ensure(&self, applied: bool, what: &'static str) -> Result<(), PublishError> {
        if applied {
            Ok(())
        } else {
            Err(PublishError::LockLost(what))
        }
    }
}

fn page_entry(entry: &Entry, last: String) -> PageEntry {
    PageEntry {
        last,
        merged_at: entry.merged_at.clone(),
        author: entry.author.clone(),
    }
}

/// Where the entry goes, from what is on the page (the page row, read under the lock): after
/// the last block of the nearest newer entry of its month, else after its month's heading; if
/// the month has no heading yet (`true`), the heading and the entry go after the nearest newer
/// entry, else after the header.
fn placement(entry: &Entry, row: &PageRow) -> (Option<String>, bool) {
    let key = narrative::order_key(&entry.merged_at, entry.number);
    let month = narrative::month(entry);
    let nearest_newer = row
        .entries
        .iter()
        .filter(|(n, _)| **n != entry.number)
        .map(|(n, e)| (narrative::order_key(&e.merged_at, *n), e))
        .filter(|(k, _)| *k > key)
        .min_by_key(|(k, _)| *k)
        .map(|(_, e)| e);
    if let Some(newer) = nearest_newer {
        if narrative::month_of(&newer.merged_at) == month {
            return (Some(newer.last.clone()), false);
        }
    }
    if let Some(heading) = row.months.get(&month) {
        return (Some(heading.clone()), false);
    }
    match nearest_newer {
        Some(newer) => (Some(newer.last.clone()), true),
        None => (row.header_ids.last().cloned(), true),
    }
}

impl Publisher for NotionPublisher {
    fn publish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        Box::pin(self.publish_entry(p))
    }

    fn rewrites_pages(&self) -> bool {
        // Entries are placed and the header counted under the page lock: nothing to mend.
        false
    }

    fn name(&self) -> &'static str {
        "notion"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::narrative::Entry;

    fn entry(number: u64, merged_at: &str) -> Entry {
        crate::narrative::sample::entry(number, merged_at, "alice")
    }

    fn on_page(merged_at: &str, last: &str) -> PageEntry {
        PageEntry {
            last: last.into(),
            merged_at: merged_at.into(),
            author: "alice".into(),
        }
    }

    #[test]
    fn entries_are_placed_in_page_order() {
        let e5 = entry(5, "2024-03-20T00:00:00Z");
        let e4 = entry(4, "2024-03-10T00:00:00Z");
        let e3 = entry(3, "2024-02-10T00:00:00Z");
        let e2 = entry(2, "2024-02-01T00:00:00Z");
        let mut row = PageRow {
            header_ids: vec!["h1".into(), "h2".into(), "h3".into()],
            ..PageRow::default()
        };
        // An empty page: the first entry and its month go after the header.
        assert_eq!(placement(&e3, &row), (Some("h3".into()), true));
        row.months.insert("February 2024".into(), "feb".into());
        row.entries.insert(3, on_page(&e3.merged_at, "e3"));
        // #2 is older than #3, same month: after #3. Its own record is ignored.
        row.entries.insert(2, on_page(&e2.merged_at, "stale"));
        assert_eq!(placement(&e2, &row), (Some("e3".into()), false));
        row.entries.remove(&2);
        // #4 is in a new, newer month: its heading goes after the header (nothing newer on it).
        assert_eq!(placement(&e4, &row), (Some("h3".into()), true));
        row.months.insert("March 2024".into(), "mar".into());
        row.entries.insert(5, on_page(&e5.merged_at, "e5"));
        // #4 under March, after #5 which is newer.
        assert_eq!(placement(&e4, &row), (Some("e5".into()), false));
        // #3 is older than everything of March, first of February: after February's heading.
        row.entries.remove(&3);
        assert_eq!(placement(&e3, &row), (Some("feb".into()), false));
        // Without a February heading, #3 would open February after #5, the nearest newer entry.
        row.months.remove("February 2024");
        assert_eq!(placement(&e3, &row), (Some("e5".into()), true));
    }
}
