//! Bounded pages. A module page holds its header and the entries merged within a year of its
//! newest one (at most [`MAIN_MAX_ENTRIES`]); older entries go to yearly archive pages
//! ([`super::archive`]). No page exceeds [`MAX_PAGE_BYTES`] of Markdown or [`MAX_PAGE_BLOCKS`]
//! Notion blocks (Notion takes at most 1,000 blocks and 500 KB per request): a page that would
//! is cut in halves.
//!
//! Everything here depends on the entries only, not on the day it runs: the window is a year
//! back from the module's newest entry, so the same entries always give the same pages.

use time::Duration;

use super::content::{archive_page, entry_blocks, module_page, ModuleFacts};
use super::render::{render, Flavor};
use super::{Block, DocKey, Document};
use chronicle_domain::{parse_rfc3339, ModuleEntry};

pub const MAIN_MAX_ENTRIES: usize = 100;
/// The module page shows what merged within this long of its newest entry.
pub const MAIN_WINDOW: Duration = Duration::days(365);
pub const MAX_PAGE_BYTES: usize = 150_000;
pub const MAX_PAGE_BLOCKS: usize = 900;
/// Room kept for what a publisher adds that the measure does not know exactly.
pub const BYTES_MARGIN: usize = 10_000;
/// As long as any Notion page URL, for measuring the Notion rendering.
const PLACEHOLDER_URL: &str =
    "https://www.notion.so/Chronicle-placeholder-page-00000000000000000000000000000000";

/// What a document costs: its larger rendering in bytes, and its Notion blocks.
pub fn cost(doc: &Document) -> (usize, usize) {
    let resolve = |_: &DocKey| Some(PLACEHOLDER_URL.to_string());
    let bytes = render(doc, Flavor::CommonMark, &resolve)
        .len()
        .max(render(doc, Flavor::Notion, &resolve).len());
    let blocks = doc.blocks.iter().map(Block::notion_blocks).sum();
    (bytes, blocks)
}

/// Whether a document is within every page limit.
pub fn fits(doc: &Document) -> bool {
    let (bytes, blocks) = cost(doc);
    bytes + BYTES_MARGIN <= MAX_PAGE_BYTES && blocks <= MAX_PAGE_BLOCKS
}

/// How many of the module's newest entries (`newest`, newest first) go on its page: those merged
/// within [`MAIN_WINDOW`] of the newest, at most [`MAIN_MAX_ENTRIES`], and no more than fit.
/// Always at least one when there is one, so the page says what changed last.
pub fn main_count(facts: &ModuleFacts, newest: &[ModuleEntry]) -> usize {
    let Some(latest) = newest.first().and_then(|e| parse_rfc3339(&e.merged_at)) else {
        return newest.len().min(1);
    };
    let start = latest - MAIN_WINDOW;
    let mut n = newest
        .iter()
        .take(MAIN_MAX_ENTRIES)
        .take_while(|e| parse_rfc3339(&e.merged_at).is_some_and(|t| t >= start))
        .count()
        .max(1);
    while n > 1 && !fits(&module_page(facts, &newest[..n])) {
        n = (n * 9 / 10).min(n - 1).max(1);
    }
    n
}

/// An entry with its measured cost (bytes, blocks), as pages are sized.
pub(crate) type Sized = (ModuleEntry, (usize, usize));

fn archive_key(repo: &str, module: &str, label: String) -> DocKey {
    DocKey::Archive {
        repo: repo.to_string(),
        module: module.to_string(),
        label,
    }
}

/// The page of these entries (newest first), made sure of by rendering it; one that does not
/// fit is cut in two halves (`-a`, `-b`), and so on.
pub(crate) fn leaf(key: DocKey, parent: DocKey, entries: &[Sized], docs: &mut Vec<Document>) {
    let plain: Vec<ModuleEntry> = entries.iter().map(|(e, _)| e.clone()).collect();
    let doc = archive_page(key.clone(), parent.clone(), &plain, &[]);
    if entries.len() <= 1 || fits(&doc) {
        docs.push(doc);
        return;
    }
    let (first, second) = entries.split_at(entries.len() / 2);
    let label = key.label().to_string();
    let halves = [
        (format!("{label}-a"), first),
        (format!("{label}-b"), second),
    ];
    let children: Vec<(DocKey, u64)> = halves
        .iter()
        .map(|(l, es)| {
            (
                archive_key(key.repo(), key.item_module(), l.clone()),
                es.len() as u64,
            )
        })
        .collect();
    docs.push(archive_page(key.clone(), parent, &[], &children));
    for (l, half) in halves {
        leaf(
            archive_key(key.repo(), key.item_module(), l),
            key.clone(),
            half,
            docs,
        );
    }
}

/// What one entry costs on a page (bytes, Notion blocks).
pub(crate) fn entry_cost(e: &ModuleEntry) -> (usize, usize) {
    let doc = Document {
        key: DocKey::Index {
            repo: e.repo.clone(),
        },
        title: String::new(),
        parent: None,
        blocks: entry_blocks(e),
    };
    let (bytes, blocks) = cost(&doc);
    // Separating blank lines between the entry's blocks and the next.
    (bytes + blocks + 2, blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::sample::entry;
    use chronicle_domain::FileChange;

    fn facts() -> ModuleFacts {
        ModuleFacts {
            repo: "acme/widgets".into(),
            module: "src".into(),
            ..Default::default()
        }
    }

    fn big(number: u64, merged_at: &str) -> ModuleEntry {
        let mut e = entry(number, merged_at, "alice");
        // As long as a stored summary gets (chronicle_summary::SUMMARY_MAX_CHARS).
        e.summary = "A long summary of what changed and why. ".repeat(20);
        e.summary = chronicle_domain::cap(&e.summary, chronicle_summary::SUMMARY_MAX_CHARS);
        e.title = "A title that goes on for quite a while ".repeat(5);
        e.files = (0..5)
            .map(|i| FileChange {
                path: format!("src/some/deeply/nested/directory/file_{i}.rs"),
                additions: 10,
                deletions: 2,
                status: None,
            })
            .collect();
        e.files_here = 40;
        e
    }

    /// `count` entries merged one `step_hours` apart, newest first, ending at `newest`.
    fn history(count: u64, newest: &str, step_hours: i64) -> Vec<ModuleEntry> {
        let end = parse_rfc3339(newest).unwrap();
        (0..count)
            .map(|i| {
                let at = end - Duration::hours(step_hours * i as i64);
                big(count - i, &chronicle_domain::rfc3339_seconds(at))
            })
            .collect()
    }

    #[test]
    fn the_module_page_holds_a_year_at_most_100_entries() {
        let weekly = history(120, "2024-06-01T12:00:00Z", 24 * 7);
        assert_eq!(main_count(&facts(), &weekly), 53, "a year of weekly merges");
        let daily = history(300, "2024-06-01T12:00:00Z", 24);
        assert_eq!(main_count(&facts(), &daily), MAIN_MAX_ENTRIES);
        assert!(fits(&module_page(&facts(), &daily[..100])));
        let old = history(3, "2019-06-01T12:00:00Z", 24 * 400);
        assert_eq!(main_count(&facts(), &old), 1, "the newest always shows");
        assert_eq!(main_count(&facts(), &[]), 0);
    }
}
