//! A module's archive: the entries its page no longer holds, one page per year. A year of at
//! most [`PART_ENTRIES`] entries is one page of them; a bigger year's page lists its parts,
//! each [`PART_ENTRIES`] of its archived entries counted from the year's oldest (the last part
//! may hold fewer). Entries only join a year's archive at its newest end (they leave the module
//! page oldest first), so a part, once full, never changes: a build that moves entries into the
//! archive rewrites the newest part (read again: fewer than [`PART_ENTRIES`] entries) and the
//! year's page, and reads nothing else of the year.
//!
//! Everything here is a pure function of the entries: the same archived entries give the same
//! pages, whether laid out at once ([`year_docs`]) or appended to ([`append`]).

use super::content::archive_page;
use super::layout::leaf;
use super::wording::{count_of, date};
use super::{Block, DocKey, Document, Span};
use chronicle_domain::{ChunkStats, ModuleEntry};

/// Entries per archive part, and the most a year holds on one page.
pub const PART_ENTRIES: usize = 100;
/// The archive layout: a year laid out by an older one is laid out again from its entries.
pub const LAYOUT: u32 = 2;

/// A year's archive pages and parts, as laid out from its archived entries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct YearArchive {
    /// The documents, parents first.
    pub docs: Vec<Document>,
    /// Every page label of the year's archive (`2019`, `2019-p1`, …, halves included).
    pub labels: Vec<String>,
    pub chunks: Vec<ChunkStats>,
}

/// The label of part `index` (from 0) of `year`.
pub fn part_label(year: i32, index: usize) -> String {
    format!("{year:04}-p{}", index + 1)
}

fn key(repo: &str, module: &str, label: String) -> DocKey {
    DocKey::Archive {
        repo: repo.to_string(),
        module: module.to_string(),
        label,
    }
}

/// Whether a year of `total` entries (archived or not) has its archive in parts. Decided by the
/// whole year, not its archive, so a busy year is in parts from its first archived entry and
/// never has to move a full page's entries into a first part later.
pub fn in_parts(total: u64) -> bool {
    total > PART_ENTRIES as u64
}

/// The whole archive of `year`: `archived` are its entries not on the module page, oldest
/// first; `total` counts all of the year's entries.
pub fn year_docs(
    repo: &str,
    module: &str,
    year: i32,
    archived: &[ModuleEntry],
    total: u64,
) -> YearArchive {
    if archived.is_empty() {
        return YearArchive::default();
    }
    if !in_parts(total) {
        let mut docs = Vec::new();
        leaf(
            key(repo, module, format!("{year:04}")),
            module_key(repo, module),
            &newest_first(archived),
            &mut docs,
        );
        return YearArchive {
            labels: labels(&docs),
            docs,
            chunks: vec![chunk_of(archived)],
        };
    }
    let chunks: Vec<&[ModuleEntry]> = archived.chunks(PART_ENTRIES).collect();
    let stats: Vec<ChunkStats> = chunks.iter().map(|c| chunk_of(c)).collect();
    let mut docs = vec![year_page(repo, module, year, &stats)];
    for (i, chunk) in chunks.iter().enumerate() {
        part_docs(repo, module, year, i, chunk, &mut docs);
    }
    let mut labels = labels(&docs);
    labels.dedup();
    YearArchive {
        labels,
        docs,
        chunks: stats,
    }
}

/// The archive of a year in parts ([`in_parts`]) that grows by `movers` (oldest first, all
/// newer than what it holds): `chunks` are its parts so far, `open` the entries of its last
/// part if that is not full (oldest first), `labels_before` its page labels. Returns the pages
/// that change (the year's page and the parts that got entries), the parts after the move and
/// every page label of the year's archive.
pub fn append(
    repo: &str,
    module: &str,
    year: i32,
    chunks: &[ChunkStats],
    open: &[ModuleEntry],
    movers: &[ModuleEntry],
    labels_before: &[String],
) -> YearArchive {
    let full = chunks
        .iter()
        .take_while(|c| c.count as usize == PART_ENTRIES)
        .count();
    let mut stats: Vec<ChunkStats> = chunks[..full].to_vec();
    let mut fresh: Vec<ModuleEntry> = open.to_vec();
    fresh.extend(movers.iter().cloned());
    let new_chunks: Vec<&[ModuleEntry]> = fresh.chunks(PART_ENTRIES).collect();
    stats.extend(new_chunks.iter().map(|c| chunk_of(c)));
    let mut docs = vec![year_page(repo, module, year, &stats)];
    for (i, chunk) in new_chunks.iter().enumerate() {
        part_docs(repo, module, year, full + i, chunk, &mut docs);
    }
    let mut labels: Vec<String> = labels_before.to_vec();
    for label in self::labels(&docs) {
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    YearArchive {
        docs,
        labels,
        chunks: stats,
    }
}

fn module_key(repo: &str, module: &str) -> DocKey {
    DocKey::Module {
        repo: repo.to_string(),
        module: module.to_string(),
    }
}

fn newest_first(entries: &[ModuleEntry]) -> Vec<(ModuleEntry, (usize, usize))> {
    entries
        .iter()
        .rev()
        .map(|e| (e.clone(), super::layout::entry_cost(e)))
        .collect()
}

fn part_docs(
    repo: &str,
    module: &str,
    year: i32,
    index: usize,
    entries: &[ModuleEntry],
    docs: &mut Vec<Document>,
) {
    leaf(
        key(repo, module, part_label(year, index)),
        key(repo, module, format!("{year:04}")),
        &newest_first(entries),
        docs,
    );
}

fn labels(docs: &[Document]) -> Vec<String> {
    docs.iter().map(|d| d.key.label().to_string()).collect()
}

fn chunk_of(entries: &[ModuleEntry]) -> ChunkStats {
    ChunkStats {
        count: entries.len() as u64,
        first: entries
            .first()
            .map(|e| e.merged_at.clone())
            .unwrap_or_default(),
        last: entries
            .last()
            .map(|e| e.merged_at.clone())
            .unwrap_or_default(),
    }
}

/// A year's page that lists its parts, newest first, each with its count and dates.
fn year_page(repo: &str, module: &str, year: i32, chunks: &[ChunkStats]) -> Document {
    let label = format!("{year:04}");
    let mut doc = archive_page(
        key(repo, module, label),
        module_key(repo, module),
        &[],
        &chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (key(repo, module, part_label(year, i)), c.count))
            .collect::<Vec<_>>(),
    );
    // Each part's note says when, too: a reader looking for a date finds its part.
    for block in doc.blocks.iter_mut() {
        if let Block::Child { key, note, .. } = block {
            let index = key
                .label()
                .rsplit_once("-p")
                .and_then(|(_, n)| n.parse::<usize>().ok())
                .and_then(|n| n.checked_sub(1));
            if let Some(c) = index.and_then(|i| chunks.get(i)) {
                *note = vec![Span::text(format!(
                    "{}, {} – {}",
                    count_of(c.count, "merged pull request"),
                    date(&c.first),
                    date(&c.last)
                ))];
            }
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::sample::entry;
    use crate::layout::{cost, MAX_PAGE_BLOCKS, MAX_PAGE_BYTES};

    fn year_of_entries(count: usize) -> Vec<ModuleEntry> {
        (0..count)
            .map(|i| {
                let day = 1 + (i / 20) as i64;
                let at = chronicle_domain::parse_rfc3339("2019-01-01T00:00:00Z").unwrap()
                    + time::Duration::days(day)
                    + time::Duration::minutes(i as i64);
                entry(
                    i as u64 + 1,
                    &chronicle_domain::rfc3339_seconds(at),
                    "alice",
                )
            })
            .collect()
    }

    #[test]
    fn a_small_year_is_one_page() {
        let entries = year_of_entries(30);
        let archive = year_docs("acme/widgets", "src", 2019, &entries, 30);
        assert_eq!(archive.labels, ["2019"]);
        assert_eq!(archive.docs[0].children().len(), 0);
        assert_eq!(archive.chunks.len(), 1);
    }

    #[test]
    fn a_busy_year_is_in_parts_of_a_hundred_each_fitting_a_page() {
        let entries = year_of_entries(2_350);
        let archive = year_docs("acme/widgets", "src", 2019, &entries, 2_400);
        assert_eq!(archive.chunks.len(), 24);
        assert_eq!(archive.chunks[23].count, 50);
        assert_eq!(archive.labels[0], "2019");
        assert_eq!(archive.docs[0].children().len(), 24);
        for doc in &archive.docs {
            let (bytes, blocks) = cost(doc);
            assert!(
                bytes <= MAX_PAGE_BYTES && blocks <= MAX_PAGE_BLOCKS,
                "{}",
                doc.title
            );
        }
    }

    #[test]
    fn appending_gives_what_laying_out_at_once_gives() {
        let entries = year_of_entries(430);
        let at_once = year_docs("acme/widgets", "src", 2019, &entries, 500);
        // The same archive grown by moves of 7 entries at a time.
        let mut chunks: Vec<ChunkStats> = Vec::new();
        let mut labels: Vec<String> = Vec::new();
        let mut archived = 0usize;
        let mut last_docs = Vec::new();
        let mut first = true;
        while archived < entries.len() {
            let movers = &entries[archived..(archived + 7).min(entries.len())];
            let grown = if first {
                first = false;
                year_docs("acme/widgets", "src", 2019, movers, 500)
            } else {
                let full = chunks
                    .iter()
                    .take_while(|c| c.count as usize == PART_ENTRIES)
                    .count();
                let open = &entries[full * PART_ENTRIES..archived];
                append("acme/widgets", "src", 2019, &chunks, open, movers, &labels)
            };
            archived += movers.len();
            chunks = grown.chunks;
            labels = grown.labels;
            for doc in grown.docs {
                last_docs.retain(|d: &Document| d.key != doc.key);
                last_docs.push(doc);
            }
        }
        assert_eq!(chunks, at_once.chunks);
        let mut sorted_labels = labels.clone();
        sorted_labels.sort();
        let mut expected = at_once.labels.clone();
        expected.sort();
        assert_eq!(sorted_labels, expected);
        for doc in &at_once.docs {
            let latest = last_docs.iter().find(|d| d.key == doc.key).unwrap();
            assert_eq!(latest, doc, "{}", doc.title);
        }
    }
}
