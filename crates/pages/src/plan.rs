//! What one module build reads and rewrites. The page item keeps, per year, the figures of its
//! entries and of its archived ones (digests that merge), and its archive's parts; the module
//! page's oldest entry is the cutoff. So a build reads:
//!
//! - the entries from the old cutoff on (the module page's, and those merged since), always;
//! - for a year that gets entries into its archive, only its open part (fewer than
//!   [`PART_ENTRIES`]), or its archive when that is still one page;
//! - a whole year only when its archived entries changed (an entry rewritten or deleted there,
//!   by a reprocess or a late enrichment), when its pages must be published anew, when it was
//!   laid out by an older layout, or on a full rebuild.
//!
//! Appending is exact: the pages are those a full layout of the same entries gives
//! ([`super::archive`]); the digests' counts and milestones too, their top authors and files
//! within their bounds ([`super::overview::merge`]).

use std::collections::{BTreeMap, BTreeSet};

use super::archive::{self, in_parts, PART_ENTRIES};
use super::layout::MAIN_MAX_ENTRIES;
use super::overview::{digest, merge};
use super::{DocKey, Document};
use chronicle_domain::{year_of, ModuleEntry, PageItem, YearStats};
use chronicle_store::{EntryStore, StoreError};

/// What a build publishes and keeps.
#[derive(Debug, Default)]
pub struct Plan {
    /// The module page's entries, newest first.
    pub main: Vec<ModuleEntry>,
    /// The order key of the module page's oldest entry.
    pub cutoff: Option<String>,
    /// Every year's figures after the build.
    pub years: BTreeMap<String, YearStats>,
    /// The years whose figures changed or went (only those are written back).
    pub changed: BTreeSet<String>,
    /// Archive pages to publish, parents first.
    pub docs: Vec<Document>,
    /// Archive pages no longer produced.
    pub removed: Vec<DocKey>,
}

/// Plans the build of `item`'s module. `full`: every year is read again; `also`: these years
/// too (their pages must be published anew). `main_count` says how many of the newest entries
/// (newest first) the module page holds.
pub async fn plan(
    entries: &EntryStore,
    item: &PageItem,
    full: bool,
    also: &BTreeSet<i32>,
    main_count: impl Fn(&[ModuleEntry]) -> usize,
) -> Result<Plan, StoreError> {
    let (repo, module) = (item.repo.as_str(), item.module.as_str());
    let stored = &item.years;
    let old_cutoff = item.main_cutoff.clone();
    // The years read whole.
    let mut whole = whole_years(item, full, also);
    let recent: Vec<ModuleEntry> = match &old_cutoff {
        Some(cutoff) if !full => entries.since(repo, module, cutoff).await?,
        _ => Vec::new(),
    };
    let mut read: BTreeMap<i32, Vec<ModuleEntry>> = BTreeMap::new();
    // The module page must hold its newest entries: when those read are fewer (entries were
    // deleted from it), the newest archived year is read whole too, and so on.
    // Entries gone from the module page (deleted, or the keys that would say so lost): the page
    // may now reach below the old cutoff. Otherwise it cannot (its cutoff only moves on: the
    // window, the count and the size all start from its newest entry).
    let shrunk = item.stale_keys_lost
        || item.stale_keys.iter().any(|k| {
            old_cutoff.as_deref().is_some_and(|c| k.as_str() >= c)
                && !recent.iter().any(|e| e.order_key() == *k)
        });
    let tail = loop {
        for year in &whole {
            if !read.contains_key(year) {
                read.insert(*year, entries.year(repo, module, *year).await?);
            }
        }
        let (tail, stop) = fresh_tail(stored, &whole, &read, &recent);
        let total = total_entries(stored, &whole, &read, &recent);
        match stop {
            Some(year) if shrunk && tail.len() < total.min(MAIN_MAX_ENTRIES as u64) as usize => {
                whole.insert(year);
            }
            _ => break tail,
        }
    };
    let shown = if tail.is_empty() {
        0
    } else {
        main_count(&tail)
    };
    let main: Vec<ModuleEntry> = tail[..shown].to_vec();
    let cutoff = main.last().map(ModuleEntry::order_key);

    let mut plan = Plan {
        main,
        cutoff: cutoff.clone(),
        years: stored.clone(),
        ..Default::default()
    };
    let scope = Scope {
        entries,
        repo,
        module,
        stored,
        cutoff: cutoff.as_ref(),
        old_cutoff: old_cutoff.as_deref(),
    };
    lay_out_whole(&scope, &read, &mut plan);
    grow_held(&scope, &recent, &whole, &mut plan).await?;
    Ok(plan)
}

/// What the steps of a plan share.
struct Scope<'a> {
    entries: &'a EntryStore,
    repo: &'a str,
    module: &'a str,
    stored: &'a BTreeMap<String, YearStats>,
    /// The module page's new cutoff: entries below it are archived.
    cutoff: Option<&'a String>,
    /// The cutoff before this build.
    old_cutoff: Option<&'a str>,
}

impl Scope<'_> {
    fn below(&self, e: &ModuleEntry) -> bool {
        self.cutoff.is_none_or(|c| e.order_key() < *c)
    }
}

/// The years read whole: asked for (`also`), stale ones (all when `full`, the page is new or
/// its changed keys were lost), every year when `full`, years laid out by another archive
/// layout, and the years of entries rewritten or deleted below the module page.
fn whole_years(item: &PageItem, full: bool, also: &BTreeSet<i32>) -> BTreeSet<i32> {
    let stored = &item.years;
    let old_cutoff = item.main_cutoff.clone();
    let mut whole: BTreeSet<i32> = also.clone();
    whole.extend(
        item.stale_years
            .iter()
            .map(|y| year_of(y))
            .filter(|_| full || old_cutoff.is_none() || item.stale_keys_lost),
    );
    if full || old_cutoff.is_none() {
        whole.extend(stored.keys().map(|y| year_of(y)));
    }
    whole.extend(
        stored
            .iter()
            .filter(|(_, s)| s.layout != archive::LAYOUT)
            .map(|(y, _)| year_of(y)),
    );
    // Entries rewritten or deleted below the module page: their years' archives change.
    for key in &item.stale_keys {
        if old_cutoff.as_deref().is_none_or(|c| key.as_str() < c) {
            whole.insert(year_of(key));
        }
    }
    whole
}

/// Years read whole: laid out from their entries.
fn lay_out_whole(scope: &Scope<'_>, read: &BTreeMap<i32, Vec<ModuleEntry>>, plan: &mut Plan) {
    let (repo, module, stored) = (scope.repo, scope.module, scope.stored);
    let below = |e: &ModuleEntry| scope.below(e);
    for (year, all) in read {
        let label = format!("{year:04}");
        // The year's entries are in order: the archived ones are its first.
        let archived = &all[..all.partition_point(|e| below(e))];
        let laid = archive::year_docs(repo, module, *year, archived, all.len() as u64);
        let old_parts = stored
            .get(&label)
            .map(|s| s.parts.clone())
            .unwrap_or_default();
        for gone in old_parts.iter().filter(|p| !laid.labels.contains(p)) {
            plan.removed.push(archive_key(repo, module, gone));
        }
        plan.changed.insert(label.clone());
        match (all.first(), all.last()) {
            (Some(first), Some(last)) => {
                plan.years.insert(
                    label,
                    YearStats {
                        count: all.len() as u64,
                        first: first.merged_at.clone(),
                        last: last.merged_at.clone(),
                        archived: archived.len() as u64,
                        parts: laid.labels,
                        digest: digest(all),
                        // Kept apart only while the year has entries on the module page.
                        archive_digest: if archived.len() < all.len() {
                            digest(archived)
                        } else {
                            Default::default()
                        },
                        chunks: laid.chunks,
                        layout: archive::LAYOUT,
                    },
                );
            }
            _ => {
                plan.years.remove(&label);
            }
        }
        plan.docs.extend(laid.docs);
    }
}

/// The other years the module page held entries of, or holds now: their archives grow by the
/// entries that left the page (never shrink: the cutoff only moves on).
async fn grow_held(
    scope: &Scope<'_>,
    recent: &[ModuleEntry],
    whole: &BTreeSet<i32>,
    plan: &mut Plan,
) -> Result<(), StoreError> {
    let (entries, repo, module, stored) = (scope.entries, scope.repo, scope.module, scope.stored);
    let below = |e: &ModuleEntry| scope.below(e);
    let mut recent_by_year: BTreeMap<i32, Vec<ModuleEntry>> = BTreeMap::new();
    for e in recent {
        recent_by_year.entry(e.year()).or_default().push(e.clone());
    }
    let held: BTreeSet<i32> = stored
        .iter()
        .filter(|(_, s)| s.count > s.archived)
        .map(|(y, _)| year_of(y))
        .chain(recent_by_year.keys().copied())
        .filter(|y| !whole.contains(y))
        .collect();
    for year in held {
        let label = format!("{year:04}");
        let before = stored.get(&label).cloned().unwrap_or_default();
        let here = recent_by_year.remove(&year).unwrap_or_default();
        let (movers, on_page): (Vec<ModuleEntry>, Vec<ModuleEntry>) =
            here.into_iter().partition(|e| below(e));
        let total = before.archived + (movers.len() + on_page.len()) as u64;
        let mut after = before.clone();
        let reshaped = in_parts(total) != in_parts(before.count) && before.archived > 0;
        if !movers.is_empty() || reshaped {
            let old_cutoff = scope.old_cutoff.unwrap_or("~");
            let laid = if !in_parts(total) || reshaped || before.archived == 0 {
                // One page (or about to be parts): the whole archive, at most a page of it.
                let mut archived = entries
                    .year_before(repo, module, year, old_cutoff, before.archived as usize)
                    .await?;
                archived.extend(movers.iter().cloned());
                after.archive_digest = digest(&archived);
                archive::year_docs(repo, module, year, &archived, total)
            } else {
                let open = before
                    .chunks
                    .last()
                    .map(|c| c.count as usize)
                    .filter(|n| *n < PART_ENTRIES)
                    .unwrap_or(0);
                let open = entries
                    .year_before(repo, module, year, old_cutoff, open)
                    .await?;
                after.archive_digest = merge(&archive_digest(&before), &digest(&movers));
                archive::append(
                    repo,
                    module,
                    year,
                    &before.chunks,
                    &open,
                    &movers,
                    &before.parts,
                )
            };
            // A year laid out anew (one page that became parts, say) drops the pages of its
            // old shape.
            for gone in before.parts.iter().filter(|p| !laid.labels.contains(p)) {
                plan.removed.push(archive_key(repo, module, gone));
            }
            after.parts = laid.labels;
            after.chunks = laid.chunks;
            plan.docs.extend(laid.docs);
        }
        after.count = total;
        after.archived = before.archived + movers.len() as u64;
        let oldest = if before.archived > 0 {
            Some(before.first.clone())
        } else {
            movers
                .first()
                .or(on_page.first())
                .map(|e| e.merged_at.clone())
        };
        after.first = oldest.unwrap_or_default();
        after.last = on_page
            .last()
            .or(movers.last())
            .map(|e| e.merged_at.clone())
            .or_else(|| after.chunks.last().map(|c| c.last.clone()))
            .unwrap_or_else(|| before.last.clone());
        after.digest = merge(&after.archive_digest, &digest(&on_page));
        if on_page.is_empty() {
            // All archived now: the year's digest is its archive's.
            after.archive_digest = Default::default();
        }
        after.layout = archive::LAYOUT;
        plan.changed.insert(label.clone());
        if after.count == 0 {
            plan.years.remove(&label);
        } else {
            plan.years.insert(label, after);
        }
    }
    Ok(())
}

/// The digest of a year's archived entries: its own, or, for a year with none on the module
/// page, the year's (they are the same, and only one is kept).
fn archive_digest(stats: &YearStats) -> super::overview::YearDigest {
    if stats.count == stats.archived {
        stats.digest.clone()
    } else {
        stats.archive_digest.clone()
    }
}

fn archive_key(repo: &str, module: &str, label: &str) -> DocKey {
    DocKey::Archive {
        repo: repo.to_string(),
        module: module.to_string(),
        label: label.to_string(),
    }
}

/// The newest entries known entry by entry, newest first (no more than a module page holds),
/// back to the first year with archived entries not read whole (`Some(that year)`, where more
/// would have to be read).
fn fresh_tail(
    stored: &BTreeMap<String, YearStats>,
    whole: &BTreeSet<i32>,
    read: &BTreeMap<i32, Vec<ModuleEntry>>,
    recent: &[ModuleEntry],
) -> (Vec<ModuleEntry>, Option<i32>) {
    let mut years: BTreeSet<i32> = stored.keys().map(|y| year_of(y)).collect();
    years.extend(read.keys());
    years.extend(recent.iter().map(ModuleEntry::year));
    let mut tail = Vec::new();
    for year in years.into_iter().rev() {
        if tail.len() >= MAIN_MAX_ENTRIES {
            break;
        }
        if whole.contains(&year) {
            tail.extend(
                read[&year]
                    .iter()
                    .rev()
                    .take(MAIN_MAX_ENTRIES - tail.len())
                    .cloned(),
            );
            continue;
        }
        tail.extend(
            recent
                .iter()
                .rev()
                .filter(|e| e.year() == year)
                .take(MAIN_MAX_ENTRIES - tail.len())
                .cloned(),
        );
        let archived = stored.get(&format!("{year:04}")).map_or(0, |s| s.archived);
        if archived > 0 {
            return (tail, Some(year));
        }
    }
    (tail, None)
}

/// How many entries the module has, by what was read and what the years say.
fn total_entries(
    stored: &BTreeMap<String, YearStats>,
    whole: &BTreeSet<i32>,
    read: &BTreeMap<i32, Vec<ModuleEntry>>,
    recent: &[ModuleEntry],
) -> u64 {
    let read_whole: u64 = read.values().map(|v| v.len() as u64).sum();
    let archived: u64 = stored
        .iter()
        .filter(|(y, _)| !whole.contains(&year_of(y)))
        .map(|(_, s)| s.archived)
        .sum();
    let recent: u64 = recent.iter().filter(|e| !whole.contains(&e.year())).count() as u64;
    read_whole + archived + recent
}
