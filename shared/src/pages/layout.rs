//! Bounded pages. A module page holds its header and the entries merged within a year of its
//! newest one (at most [`MAIN_MAX_ENTRIES`]); older entries go to yearly archive pages. A year
//! too big for one page becomes a page per quarter, a quarter a page per month, a month
//! numbered parts. No page exceeds [`MAX_PAGE_BYTES`] of Markdown or [`MAX_PAGE_BLOCKS`]
//! Notion blocks (Notion takes at most 1,000 blocks and 500 KB per request).
//!
//! Everything here depends on the entries only, not on the day it runs: the window is a year
//! back from the module's newest entry, so the same entries always give the same pages.

use time::Duration;

use super::content::{archive_page, entry_blocks, module_page, ModuleFacts};
use super::render::{render, Flavor};
use super::{Block, DocKey, Document};
use crate::domain::{parse_rfc3339, ModuleEntry};

pub const MAIN_MAX_ENTRIES: usize = 100;
/// The module page shows what merged within this long of its newest entry.
pub const MAIN_WINDOW: Duration = Duration::days(365);
pub const MAX_PAGE_BYTES: usize = 150_000;
pub const MAX_PAGE_BLOCKS: usize = 900;
/// Room kept for what a publisher adds that the measure does not know exactly.
const BYTES_MARGIN: usize = 10_000;
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Year,
    Quarter,
    Month,
}

/// The archive pages of one year of a module, parents first (the year's page first):
/// `archived` holds the year's entries that are not on the module page, in any order.
pub fn archive_year(
    repo: &str,
    module: &str,
    year: i32,
    archived: &[ModuleEntry],
) -> Vec<Document> {
    let mut entries: Vec<ModuleEntry> = archived.to_vec();
    entries.sort_by_key(|e| std::cmp::Reverse(e.order_key()));
    // Each entry is measured once; periods are sized by adding these up.
    let costs: Vec<(usize, usize)> = entries.iter().map(entry_cost).collect();
    let sized: Vec<(ModuleEntry, (usize, usize))> = entries.into_iter().zip(costs).collect();
    let key = archive_key(repo, module, format!("{year:04}"));
    let parent = DocKey::Module {
        repo: repo.to_string(),
        module: module.to_string(),
    };
    let mut docs = Vec::new();
    split(key, parent, &sized, Level::Year, &mut docs);
    docs
}

fn archive_key(repo: &str, module: &str, label: String) -> DocKey {
    DocKey::Archive {
        repo: repo.to_string(),
        module: module.to_string(),
        label,
    }
}

type Sized = (ModuleEntry, (usize, usize));

/// What a page of these entries (newest first) would cost, from their measured costs: a
/// header, a heading per month, and the entries.
fn estimate(entries: &[Sized]) -> (usize, usize) {
    let mut months = 0;
    let mut last: Option<&str> = None;
    for (e, _) in entries {
        let month = e.merged_at.get(..7);
        if month != last {
            months += 1;
            last = month;
        }
    }
    let bytes: usize = entries.iter().map(|(_, (b, _))| b).sum();
    let blocks: usize = entries.iter().map(|(_, (_, k))| k).sum();
    (HEADER_BYTES + months * 40 + bytes, 1 + months + blocks)
}

/// What an archive page's own lines cost at most (title, the line back to the module page).
const HEADER_BYTES: usize = 2_000;

fn within(cost: (usize, usize)) -> bool {
    cost.0 + BYTES_MARGIN <= MAX_PAGE_BYTES && cost.1 <= MAX_PAGE_BLOCKS
}

/// Appends the page of `key` with `entries` (newest first) or, when they do not fit, a page
/// linking the finer pages they are split into, followed by those.
fn split(key: DocKey, parent: DocKey, entries: &[Sized], level: Level, docs: &mut Vec<Document>) {
    if entries.len() <= 1 || within(estimate(entries)) {
        leaf(key, parent, entries, docs);
        return;
    }
    let label = key.label().to_string();
    let (repo, module) = (key.repo().to_string(), key.item_module().to_string());
    let groups: Vec<(String, &[Sized])> = match level {
        Level::Year => group_by(entries, |e| {
            let month: u32 = e
                .merged_at
                .get(5..7)
                .and_then(|m| m.parse().ok())
                .unwrap_or(1);
            format!("{label}-Q{}", (month.clamp(1, 12) - 1) / 3 + 1)
        }),
        Level::Quarter => group_by(entries, |e| {
            format!("{}-{}", &label[..4], e.merged_at.get(5..7).unwrap_or("01"))
        }),
        Level::Month => parts(entries)
            .into_iter()
            .enumerate()
            .map(|(i, es)| (format!("{label}-p{}", i + 1), es))
            .collect(),
    };
    let children: Vec<(DocKey, u64)> = groups
        .iter()
        .map(|(l, es)| (archive_key(&repo, &module, l.clone()), es.len() as u64))
        .collect();
    docs.push(archive_page(key.clone(), parent, &[], &children));
    for (l, group) in groups {
        let child = archive_key(&repo, &module, l);
        match level {
            Level::Year => split(child, key.clone(), group, Level::Quarter, docs),
            Level::Quarter => split(child, key.clone(), group, Level::Month, docs),
            Level::Month => leaf(child, key.clone(), group, docs),
        }
    }
}

/// The page of these entries, made sure of by rendering it; one that still does not fit (the
/// estimate adds renderings up) is cut in two numbered halves.
fn leaf(key: DocKey, parent: DocKey, entries: &[Sized], docs: &mut Vec<Document>) {
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

/// Entries (newest first) grouped by a label, the oldest period first (pages list them newest
/// first).
fn group_by<'a>(
    entries: &'a [Sized],
    label: impl Fn(&ModuleEntry) -> String,
) -> Vec<(String, &'a [Sized])> {
    let mut groups: Vec<(String, &'a [Sized])> = Vec::new();
    let mut start = 0;
    for i in 1..=entries.len() {
        if i == entries.len() || label(&entries[i].0) != label(&entries[start].0) {
            groups.push((label(&entries[start].0), &entries[start..i]));
            start = i;
        }
    }
    groups.reverse();
    groups
}

/// A month's entries (newest first) cut into parts that each fit one page, filled greedily;
/// the oldest part first, as the numbering goes.
fn parts(entries: &[Sized]) -> Vec<&[Sized]> {
    // A part is within one month: its header and one month heading.
    const EMPTY: (usize, usize) = (HEADER_BYTES + 40, 2);
    // Filled from the oldest end: a newer merge changes only the newest part, so the older
    // parts stay as published (and are not published again).
    let mut out = Vec::new();
    let mut end = entries.len();
    let (mut bytes, mut blocks) = EMPTY;
    for i in (0..entries.len()).rev() {
        let (b, k) = entries[i].1;
        if i + 1 < end && !within((bytes + b, blocks + k)) {
            out.push(&entries[i + 1..end]);
            end = i + 1;
            (bytes, blocks) = EMPTY;
        }
        bytes += b;
        blocks += k;
    }
    if end > 0 {
        out.push(&entries[..end]);
    }
    out
}

fn entry_cost(e: &ModuleEntry) -> (usize, usize) {
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
    use crate::domain::FileChange;
    use crate::pages::content::sample::entry;

    fn facts() -> ModuleFacts {
        ModuleFacts {
            repo: "acme/widgets".into(),
            module: "src".into(),
            ..Default::default()
        }
    }

    fn big(number: u64, merged_at: &str) -> ModuleEntry {
        let mut e = entry(number, merged_at, "alice");
        // As long as a stored summary gets (crate::summary::SUMMARY_MAX_CHARS).
        e.summary = "A long summary of what changed and why. ".repeat(20);
        e.summary = crate::summary::cap(&e.summary, crate::summary::SUMMARY_MAX_CHARS);
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
                big(count - i, &crate::domain::rfc3339_seconds(at))
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

    #[test]
    fn a_small_year_is_one_page() {
        let entries = history(30, "2019-12-01T00:00:00Z", 24 * 7);
        let docs = archive_year("acme/widgets", "src", 2019, &entries);
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].key.label(), "2019");
        assert!(fits(&docs[0]));
    }

    #[test]
    fn a_big_year_is_split_into_pages_that_each_fit() {
        // A merge an hour for a hundred days: quarters, months and parts.
        let entries = history(2_500, "2019-12-31T23:00:00Z", 1);
        let docs = archive_year("acme/widgets", "src", 2019, &entries);
        let labels: Vec<&str> = docs.iter().map(|d| d.key.label()).collect();
        assert_eq!(labels[0], "2019");
        assert!(labels.contains(&"2019-Q4"), "{labels:?}");
        assert!(labels.contains(&"2019-12"), "{labels:?}");
        assert!(
            labels.iter().any(|l| l.starts_with("2019-12-p")),
            "{labels:?}"
        );
        for doc in &docs {
            let (bytes, blocks) = cost(doc);
            assert!(
                bytes <= MAX_PAGE_BYTES && blocks <= MAX_PAGE_BLOCKS,
                "{}",
                doc.title
            );
        }
        // Every entry is on exactly one page.
        let mut numbers: Vec<String> = docs
            .iter()
            .flat_map(|d| d.blocks.iter())
            .filter_map(|b| match b {
                Block::Heading { level: 3, spans } => spans.last().map(|s| s.text.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(numbers.len(), 2_500);
        numbers.sort();
        numbers.dedup();
        assert_eq!(numbers.len(), 2_500);
        // Parents come before their children, and each child is linked from its parent.
        for (i, doc) in docs.iter().enumerate().skip(1) {
            let parent = doc.parent.as_ref().unwrap();
            let at = docs.iter().position(|d| &d.key == parent).unwrap();
            assert!(at < i);
            assert!(docs[at].children().contains(&&doc.key));
        }
    }
}
