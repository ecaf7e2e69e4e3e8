//! `chronicle bench quality`: how readable the pages of a synthetic history are, measured the way
//! the module-story issue measured a real one. Pure (no emulator): each PR goes through the same
//! functions as the summarize worker (tagging, the extractive summary, module entries), each
//! module's page through the page builder's layout and overview.
//!
//! Figures: the share of entries whose summary is the title again or a trailer, the share whose
//! key files lie outside their module, the share of entries in `docs` (with the bundled default
//! config and with the old `**/*.md` one), folded dependency/release entries, entries left as
//! "other changes", significant-PR milestones that mostly happened in another module, modules
//! shown as quiet, and the largest module page. `--git DIR` measures a real clone's history
//! ([`crate::git_history`]) instead.

use std::collections::BTreeMap;

use stages::domain::{ModuleEntry, RepoName, YearStats};
use stages::pages::content::{self, ModuleFacts};
use stages::pages::layout::{self, MAIN_MAX_ENTRIES};
use stages::pages::render::commonmark;
use stages::store::PrRow;
use stages::summary::{comparable, extractive, SummaryInput};
use stages::tagging::{self, ModulesConfig, RepoModules};
use time::OffsetDateTime;

use standins::synthetic::{history, HistorySpec, SyntheticPr};

/// The default config before the module-story issue: every Markdown file in `docs`.
const OLD_DEFAULT: &str =
    "\"*\":\n  docs: [\"**/*.md\", \"docs/**\"]\n  ci: [\".github/workflows/**\"]\n";

/// A module this busy should have its why quoted.
const QUOTED_MIN_ENTRIES: usize = 30;

/// Unclassified titles printed as examples.
const OTHER_TITLES_SHOWN: usize = 12;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct QualityFigures {
    pub prs: usize,
    pub entries: usize,
    pub modules: usize,
    /// Entries whose summary is the title again (letters and digits compared) or a trailer.
    pub summary_title_or_trailer: usize,
    /// Entries with no summary (the body and the files said nothing the title does not).
    pub summary_empty: usize,
    /// Entries whose key files include one outside their module.
    pub key_files_outside: usize,
    /// Backticked paths in entries' summaries, and those outside the entry's module.
    pub summary_paths: usize,
    pub summary_paths_outside: usize,
    /// Entries in `docs`.
    pub docs_entries: usize,
    /// Dependency and release entries (folded on the pages).
    pub folded_entries: usize,
    /// Modules whose overview says "quiet".
    pub quiet_modules: Vec<String>,
    /// Modules whose overview says "gone" (their directory is not at HEAD).
    pub gone_modules: Vec<String>,
    /// Entries naming a reviewer, and modules whose overview shows a knowledge risk.
    pub reviewed_entries: usize,
    pub risk_modules: Vec<String>,
    /// Modules whose "What it is" quotes their README.
    pub described_modules: usize,
    /// The largest module page, in bytes, and its module.
    pub largest_page: (usize, String),
    /// Entries the story counts as "other changes" (no kind from type, label, verb or files).
    pub other_entries: usize,
    /// Titles of a few of them, to see what the classifier misses.
    pub other_titles: Vec<String>,
    /// Significant-PR milestones, and those with under a quarter of their PR's changed lines
    /// in the module whose page shows them.
    pub notable_milestones: usize,
    pub misplaced_milestones: usize,
    /// Modules with at least [`QUOTED_MIN_ENTRIES`] entries besides dependency and release
    /// updates, and those whose overview quotes
    /// at least two sentences of their PRs' bodies under "Key decisions" (reasons among them).
    pub big_modules: usize,
    pub quoted_modules: usize,
    /// Those of them quoting fewer.
    pub unquoted_modules: Vec<String>,
    pub reason_quotes: usize,
    pub quotes: usize,
    /// The largest module's year figures as stored on its page item (JSON bytes), and its years.
    pub largest_years: (usize, usize),
    /// A few quotes of the busiest module, to read.
    pub sample_quotes: Vec<String>,
    /// Modules whose first two "Start here" files include a manifest or a test ahead of one of
    /// their source files.
    pub start_manifest_or_test: Vec<String>,
}

/// The code spans of a summary that look like repository paths (`src/a.rs`, `lib/x/`).
fn backticked_paths(summary: &str) -> impl Iterator<Item = &str> {
    summary
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.trim_start_matches("./"))
        .filter(|s| {
            s.contains('/')
                && !s.contains(char::is_whitespace)
                && !s.contains("://")
                && !s.starts_with('/')
                && s.rsplit('/').next().is_some_and(|name| name.contains('.'))
        })
}

fn is_trailer(s: &str) -> bool {
    let lower = s.trim().to_lowercase();
    [
        "signed-off-by:",
        "co-authored-by:",
        "reviewed-by:",
        "change-id:",
        "acked-by:",
    ]
    .iter()
    .any(|t| lower.starts_with(t))
}

fn row(repo: &RepoName, pr: &SyntheticPr) -> PrRow {
    let mut files = pr.files.clone();
    files.sort_by(|a, b| b.churn().cmp(&a.churn()).then(a.path.cmp(&b.path)));
    serde_json::from_value(serde_json::json!({
        "repo": repo.as_str(),
        "prNumber": pr.number,
        "title": pr.title,
        "body": Some(pr.body.clone()).filter(|b| !b.is_empty()),
        "author": pr.author,
        "labels": pr.labels,
        "reviewers": pr.reviewers,
        "discussion": pr.comments + pr.reviewers.len() as u64,
        "url": format!("https://github.com/{repo}/pull/{}", pr.number),
        "mergedAt": stages::domain::rfc3339_seconds(pr.merged_at),
        "files": files,
        "changedFiles": pr.files.len(),
        "additions": pr.files.iter().map(|f| f.additions).sum::<u64>(),
        "deletions": pr.files.iter().map(|f| f.deletions).sum::<u64>(),
    }))
    .expect("a PR row")
}

/// Every entry of the history, tagged with `config`, as the summarize worker writes them.
pub fn entries(
    repo: &RepoName,
    prs: &[SyntheticPr],
    config: Option<&RepoModules>,
) -> Vec<ModuleEntry> {
    let mut out = Vec::new();
    for pr in prs {
        let row = row(repo, pr);
        let paths: Vec<&str> = row.files.iter().map(|f| f.path.as_str()).collect();
        let modules = tagging::tag_modules(repo, &paths, config, None);
        let files: Vec<String> = row.files.iter().map(|f| f.path.clone()).collect();
        let summary = extractive(&SummaryInput {
            title: &row.title,
            body: row.body.as_deref(),
            labels: &row.labels,
            files: &files,
            issues: &[],
            modules: &modules,
        });
        out.extend(stages::entries::module_entries(
            repo,
            &row,
            &modules,
            &summary.text,
            config,
            None,
        ));
    }
    out
}

fn years_of(entries: &[&ModuleEntry]) -> BTreeMap<String, YearStats> {
    let mut by_year: BTreeMap<String, Vec<ModuleEntry>> = BTreeMap::new();
    for e in entries {
        by_year
            .entry(format!("{:04}", e.year()))
            .or_default()
            .push((*e).clone());
    }
    by_year
        .into_iter()
        .map(|(year, mut of_year)| {
            of_year.sort_by_key(|e| e.order_key());
            let stats = YearStats {
                count: of_year.len() as u64,
                first: of_year
                    .first()
                    .map(|e| e.merged_at.clone())
                    .unwrap_or_default(),
                last: of_year
                    .last()
                    .map(|e| e.merged_at.clone())
                    .unwrap_or_default(),
                digest: stages::pages::overview::digest(&of_year),
                ..Default::default()
            };
            (year, stats)
        })
        .collect()
}

/// The module page the builder would publish for these entries (newest first), as CommonMark.
pub fn module_page(
    repo: &RepoName,
    module: &str,
    entries: &[&ModuleEntry],
    config: Option<&RepoModules>,
    context: Option<&stages::context::RepoContext>,
    now: OffsetDateTime,
) -> String {
    let mut newest: Vec<ModuleEntry> = entries.iter().map(|e| (*e).clone()).collect();
    newest.sort_by_key(|e| std::cmp::Reverse(e.order_key()));
    newest.truncate(MAIN_MAX_ENTRIES);
    let facts = ModuleFacts {
        repo: repo.to_string(),
        module: module.to_string(),
        paths: tagging::module_paths(repo, module, config, None),
        entry_count: entries.len() as u64,
        first_merged_at: entries.iter().map(|e| e.merged_at.clone()).min(),
        latest_merged_at: newest.first().map(|e| e.merged_at.clone()),
        recent_authors: content::recent_authors(&newest),
        years: years_of(entries),
        now: Some(now),
        ..Default::default()
    };
    let mut facts = facts;
    let layout = context.map(|c| tagging::RepoLayout::from_context(c, true, config));
    (facts.description, facts.gone) =
        content::what_it_is(context, module, &facts.paths, layout.as_ref());
    if let Some(codeowners) = layout.as_ref().and_then(|l| l.codeowners()) {
        facts.owners = content::owners_of(
            codeowners,
            &stages::pages::overview::start_files(&facts.years, now),
        );
    }
    let shown = layout::main_count(&facts, &newest);
    // The older entries' years, as the builder lists its archive pages.
    let cutoff = newest
        .get(shown.saturating_sub(1))
        .map(ModuleEntry::order_key);
    let mut archived: BTreeMap<String, u64> = BTreeMap::new();
    for e in entries {
        if cutoff.as_ref().is_some_and(|c| e.order_key() < *c) {
            *archived.entry(format!("{:04}", e.year())).or_default() += 1;
        }
    }
    facts.archive_years = archived.into_iter().collect();
    commonmark(&content::module_page(&facts, &newest[..shown]))
}

/// The figures for one history under one config.
pub fn measure(spec: &HistorySpec, config: &ModulesConfig) -> QualityFigures {
    let prs = history(spec);
    let now = spec.end + time::Duration::days(1);
    measure_prs(&prs, config, &standins::synthetic::context(spec), now)
}

/// The figures for these PRs (oldest first) of a repository with this context.
pub fn measure_prs(
    prs: &[SyntheticPr],
    config: &ModulesConfig,
    context: &stages::context::RepoContext,
    now: OffsetDateTime,
) -> QualityFigures {
    let repo = RepoName::parse("acme/platform").expect("a repo name");
    let repo_config = config.for_repo(&repo);
    let all = entries(&repo, prs, repo_config);
    let mut figures = QualityFigures {
        prs: prs.len(),
        entries: all.len(),
        ..Default::default()
    };
    let titles: BTreeMap<u64, &str> = prs.iter().map(|p| (p.number, p.title.as_str())).collect();
    for e in &all {
        let summary = e.summary.trim();
        if summary.is_empty() {
            figures.summary_empty += 1;
        } else if comparable(summary) == comparable(titles[&e.number])
            || comparable(summary) == comparable(stages::summary::conventional_type(&e.title).1)
            || is_trailer(summary)
        {
            figures.summary_title_or_trailer += 1;
        }
        if e.files
            .iter()
            .any(|f| !tagging::file_modules(&f.path, repo_config, None).contains(&e.module))
        {
            figures.key_files_outside += 1;
        }
        for path in backticked_paths(&e.summary) {
            figures.summary_paths += 1;
            if !tagging::file_modules(path, repo_config, None).contains(&e.module) {
                figures.summary_paths_outside += 1;
            }
        }
        if e.module == "docs" {
            figures.docs_entries += 1;
        }
        if !e.reviewers.is_empty() {
            figures.reviewed_entries += 1;
        }
        if stages::kind::is_folded(e.kind.as_deref()) {
            figures.folded_entries += 1;
        }
        if stages::kind::family(e.kind.as_deref()) == "other changes" {
            figures.other_entries += 1;
            if figures.other_titles.len() < OTHER_TITLES_SHOWN && e.number % 7 == 0 {
                figures.other_titles.push(e.title.clone());
            }
        }
    }
    let mut by_module: BTreeMap<&str, Vec<&ModuleEntry>> = BTreeMap::new();
    for e in &all {
        by_module.entry(e.module.as_str()).or_default().push(e);
    }
    figures.modules = by_module.len();
    let mut biggest = 0;
    for (module, entries) in &by_module {
        count_milestones(&mut figures, entries);
        let years = years_of(entries);
        let stored = serde_json::to_vec(&years).map_or(0, |v| v.len());
        if stored > figures.largest_years.0 {
            figures.largest_years = (stored, years.len());
        }
        let substantive = entries
            .iter()
            .filter(|e| !stages::kind::is_folded(e.kind.as_deref()))
            .count();
        if substantive >= QUOTED_MIN_ENTRIES {
            figures.big_modules += 1;
            let quotes = stages::pages::decisions::key_decisions(&years);
            figures.quotes += quotes.len();
            figures.reason_quotes += quotes.iter().filter(|d| d.quote.reason).count();
            if quotes.len() >= 2 {
                figures.quoted_modules += 1;
            } else {
                figures.unquoted_modules.push(module.to_string());
            }
            if entries.len() > biggest {
                biggest = entries.len();
                figures.sample_quotes = quotes
                    .iter()
                    .map(|d| format!("#{} {}: {}", d.number, module, d.quote.text))
                    .collect();
            }
        }
        let start = stages::pages::overview::start_files(&years, now);
        let late =
            |p: &String| stages::pages::overview::is_manifest(p) || stages::kind::is_test_path(p);
        if let Some(first_late) = start.iter().take(2).position(late) {
            if start[first_late..].iter().any(|p| !late(p)) {
                figures.start_manifest_or_test.push(module.to_string());
            }
        }
        let page = module_page(&repo, module, entries, repo_config, Some(context), now);
        if page.contains("**Status:** quiet") {
            figures.quiet_modules.push(module.to_string());
        }
        if page.contains("**Knowledge risk:**") {
            figures.risk_modules.push(module.to_string());
        }
        if page.contains("**Status:** gone") {
            figures.gone_modules.push(module.to_string());
        }
        if page.contains(" crate of the platform") {
            figures.described_modules += 1;
        }
        if page.len() > figures.largest_page.0 {
            figures.largest_page = (page.len(), module.to_string());
        }
    }
    figures
}

/// Counts the module's significant-PR milestones, and those whose PR changed under a quarter
/// of its lines here.
fn count_milestones(figures: &mut QualityFigures, entries: &[&ModuleEntry]) {
    let by_number: BTreeMap<u64, &ModuleEntry> = entries.iter().map(|e| (e.number, *e)).collect();
    for stats in years_of(entries).values() {
        for m in stages::pages::overview::year_milestones(&stats.digest) {
            if !stages::pages::milestones::is_notable(&m) {
                continue;
            }
            figures.notable_milestones += 1;
            let Some(e) = by_number.get(&m.number) else {
                continue;
            };
            if stages::pages::milestones::mostly_elsewhere(e) {
                figures.misplaced_milestones += 1;
            }
        }
    }
}

fn percent(n: usize, of: usize) -> String {
    format!("{:.1}%", 100.0 * n as f64 / of.max(1) as f64)
}

/// Prints the figures for a history of `prs` PRs over `modules` modules, with the bundled
/// default config and with the old one.
pub fn run_bench(prs: usize, modules: usize, seed: u64) -> anyhow::Result<()> {
    let spec = HistorySpec {
        prs,
        modules,
        per_day: 1.0,
        seed,
        end: time::macros::datetime!(2026-11-30 12:00 UTC),
    };
    let bundled = ModulesConfig::from_yaml(tagging::BUNDLED_MODULES_YAML)?;
    let old = ModulesConfig::from_yaml(OLD_DEFAULT)?;
    let started = std::time::Instant::now();
    let new = measure(&spec, &bundled);
    let before = measure(&spec, &old);
    println!(
        "quality of the pages of a synthetic history: {} PRs over {} years, {} modules (seed {seed}), {:.1} s",
        new.prs,
        (prs as f64 / 365.0).ceil(),
        modules,
        started.elapsed().as_secs_f64()
    );
    print_figures(&new, Some(&before));
    Ok(())
}

/// Prints the figures for the merged PRs of the git clone at `dir` (its last `limit`), tagged
/// with the bundled default config and the directories at the root of its HEAD.
pub fn run_bench_git(dir: &std::path::Path, limit: Option<usize>) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let history = crate::git_history::read(dir, limit)?;
    let context = stages::context::RepoContext {
        checked_at: stages::domain::rfc3339_seconds(history.end),
        top_level: Some(history.top_level.clone()),
        ..Default::default()
    };
    let bundled = ModulesConfig::from_yaml(tagging::BUNDLED_MODULES_YAML)?;
    let figures = measure_prs(
        &history.prs,
        &bundled,
        &context,
        history.end + time::Duration::days(1),
    );
    println!(
        "quality of the pages of {}: {} merged PRs, {:.1} s",
        dir.display(),
        figures.prs,
        started.elapsed().as_secs_f64()
    );
    print_figures(&figures, None);
    Ok(())
}

fn print_figures(new: &QualityFigures, before: Option<&QualityFigures>) {
    println!("  entries                                 {}", new.entries);
    println!(
        "  summary = the title or a trailer        {} ({})",
        new.summary_title_or_trailer,
        percent(new.summary_title_or_trailer, new.entries)
    );
    println!(
        "  no summary (nothing beyond the title)   {} ({})",
        new.summary_empty,
        percent(new.summary_empty, new.entries)
    );
    println!(
        "  backticked paths outside their module   {} of {} ({})",
        new.summary_paths_outside,
        new.summary_paths,
        percent(new.summary_paths_outside, new.summary_paths)
    );
    println!(
        "  key files outside their module          {} ({})",
        new.key_files_outside,
        percent(new.key_files_outside, new.entries)
    );
    print!(
        "  entries in docs                         {} ({})",
        new.docs_entries,
        percent(new.docs_entries, new.entries),
    );
    match before {
        Some(before) => println!(
            "; with the old **/*.md default: {} ({})",
            before.docs_entries,
            percent(before.docs_entries, before.entries)
        ),
        None => println!(),
    }
    println!(
        "  dependency and release entries folded   {} ({})",
        new.folded_entries,
        percent(new.folded_entries, new.entries)
    );
    println!(
        "  entries counted as \"other changes\"      {} ({})",
        new.other_entries,
        percent(new.other_entries, new.entries)
    );
    for title in &new.other_titles {
        println!("      e.g. {title}");
    }
    println!(
        "  milestones mostly elsewhere             {} of {} ({})",
        new.misplaced_milestones,
        new.notable_milestones,
        percent(new.misplaced_milestones, new.notable_milestones)
    );
    println!(
        "  entries naming a reviewer               {} ({})",
        new.reviewed_entries,
        percent(new.reviewed_entries, new.entries)
    );
    println!("  modules                                 {}", new.modules);
    println!(
        "  modules with a knowledge risk           {:?}",
        new.risk_modules
    );
    println!(
        "  modules of {QUOTED_MIN_ENTRIES}+ PRs quoting 2+ PR sentences   {} of {} ({} quotes, {} giving a reason); not: {:?}",
        new.quoted_modules, new.big_modules, new.quotes, new.reason_quotes, new.unquoted_modules
    );
    for quote in &new.sample_quotes {
        println!("      {}", stages::domain::cap(quote, 160));
    }
    println!(
        "  manifest or test ahead of source        {:?}",
        new.start_manifest_or_test
    );
    println!(
        "  modules shown as quiet                  {:?}",
        new.quiet_modules
    );
    println!(
        "  modules shown as gone                   {:?}",
        new.gone_modules
    );
    println!(
        "  modules described by their README       {}",
        new.described_modules
    );
    println!(
        "  largest year figures on a page item     {} bytes over {} years (DynamoDB's item limit is 400 KB)",
        new.largest_years.0, new.largest_years.1
    );
    println!(
        "  largest module page                     {} bytes ({}; the layout's bound is {})",
        new.largest_page.0,
        new.largest_page.1,
        layout::MAX_PAGE_BYTES
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_pr_history_reads_well() {
        let spec = HistorySpec {
            prs: 1_000,
            modules: 12,
            per_day: 1.0,
            seed: 7,
            end: time::macros::datetime!(2026-11-30 12:00 UTC),
        };
        let f = measure(
            &spec,
            &ModulesConfig::from_yaml(tagging::BUNDLED_MODULES_YAML).unwrap(),
        );
        assert_eq!(f.summary_title_or_trailer, 0, "{f:?}");
        assert_eq!(f.key_files_outside, 0, "{f:?}");
        let old = measure(&spec, &ModulesConfig::from_yaml(OLD_DEFAULT).unwrap());
        assert!(f.docs_entries < old.docs_entries, "{f:?} vs {old:?}");
        assert!(f.folded_entries > 0);
        // The module removed 60% of the way through reads as gone (its directory is not at
        // HEAD), and only it; every module with a README says what it is in its words.
        assert_eq!(f.gone_modules, ["core"], "{f:?}");
        assert!(f.quiet_modules.is_empty(), "{f:?}");
        assert_eq!(f.described_modules, 11, "{f:?}");
        assert!(f.largest_page.0 <= layout::MAX_PAGE_BYTES, "{f:?}");
        // Every PR has a kind, and no year's significant PR mostly happened in another module.
        assert!(f.other_entries * 100 <= f.entries * 15, "{f:?}");
        assert!(f.notable_milestones > 0, "{f:?}");
        assert_eq!(f.misplaced_milestones, 0, "{f:?}");
        assert!(f.start_manifest_or_test.is_empty(), "{f:?}");
        assert!(f.big_modules > 0, "{f:?}");
        assert!(f.summary_paths > 0, "{f:?}");
        assert!(f.reviewed_entries * 2 > f.entries, "{f:?}");
        assert!(f.summary_paths_outside * 10 <= f.summary_paths, "{f:?}");
        assert_eq!(f.quoted_modules, f.big_modules, "{f:?}");
    }
}
