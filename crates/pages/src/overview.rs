//! The module overview at the top of a module page: what the module is, where to start reading,
//! who knows it, the story so far, what happened recently and its status. Deterministic: every
//! statement comes from stored entries and links the PRs behind it.
//!
//! Cost stays flat as history grows: a build reads only the years whose entries changed, so each
//! year keeps a [`YearDigest`] of its entries (kinds, authors, files, milestones) on the page
//! item, and the overview is made from the digests of all years plus the page's newest entries.

use std::collections::BTreeMap;

use time::{Duration, OffsetDateTime};

use super::blocks::title_spans;
use super::recency::{days_since, decay};
use super::wording::{count_of, date};
use super::{Block, Span};
use chronicle_domain::{parse_rfc3339, ModuleEntry, YearStats};
pub use chronicle_domain::{AuthorActivity, Candidates, FileActivity, Milestone, YearDigest};
use chronicle_summary::kind;

use super::milestones::{candidates_of, merge_candidates};
pub use super::milestones::{is_notable, year_milestones};

/// Authors kept per year (a bounded top list: "Who knows it" weighs them over the years).
const YEAR_AUTHORS: usize = 24;
/// Files kept per year (a bounded top list, for "Start here").
const YEAR_FILES: usize = 24;
pub const START_FILES: usize = 5;
/// A file's weight halves every this many days without a change.
const FILE_HALF_LIFE_DAYS: f64 = 365.0;
/// A significant PR's summary shown on its year's line has at least this many words ("Fix
/// tests", a squash list's leftover, says nothing).
const SUMMARY_MIN_WORDS: usize = 4;
/// "Recently" looks back this far.
pub const RECENT_DAYS: i64 = 90;
/// A module without a change for this long is quiet.
pub const QUIET_DAYS: i64 = 365;

/// Lockfiles, generated and vendored files: never where a newcomer starts reading.
pub fn is_incidental(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    const NAMES: &[&str] = &[
        "cargo.lock",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "go.sum",
        "poetry.lock",
        "pipfile.lock",
        "uv.lock",
        "gemfile.lock",
        "composer.lock",
        "flake.lock",
        "changelog.md",
        "changes.md",
    ];
    NAMES.contains(&name)
        || name.ends_with(".lock")
        || name.ends_with(".min.js")
        || name.ends_with(".snap")
        || name.ends_with(".pb.go")
        || name.contains("_generated.")
        || name.contains(".generated.")
        || lower.split('/').any(|s| {
            matches!(
                s,
                "vendor" | "node_modules" | "dist" | "generated" | "__snapshots__"
            )
        })
}

/// The digest of a year's entries (any order).
pub fn digest(entries: &[ModuleEntry]) -> YearDigest {
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    let mut authors: BTreeMap<&str, AuthorActivity> = BTreeMap::new();
    let mut files: BTreeMap<&str, FileActivity> = BTreeMap::new();
    let mut candidates = Candidates::default();
    for e in entries {
        *kinds
            .entry(kind::family(e.kind.as_deref()).to_string())
            .or_default() += 1;
        let churn_here: u64 = e.files.iter().map(|f| f.additions + f.deletions).sum();
        if !kind::is_bot(&e.author) && !kind::is_folded(e.kind.as_deref()) {
            let a = authors
                .entry(e.author.as_str())
                .or_insert_with(|| AuthorActivity {
                    login: e.author.clone(),
                    ..Default::default()
                });
            a.count += 1;
            a.churn += churn_here;
            a.last = a.last.clone().max(e.merged_at.clone());
            for login in e
                .reviewers
                .iter()
                .filter(|r| **r != e.author && !kind::is_bot(r))
            {
                let r = authors
                    .entry(login.as_str())
                    .or_insert_with(|| AuthorActivity {
                        login: login.clone(),
                        ..Default::default()
                    });
                r.reviews += 1;
                r.last = r.last.clone().max(e.merged_at.clone());
            }
        }
        candidates = merge_candidates(candidates, candidates_of(e));
        if kind::is_folded(e.kind.as_deref()) {
            continue;
        }
        for f in e.files.iter().filter(|f| !is_incidental(&f.path)) {
            let a = files
                .entry(f.path.as_str())
                .or_insert_with(|| FileActivity {
                    path: f.path.clone(),
                    ..Default::default()
                });
            a.count += 1;
            a.churn += f.additions + f.deletions;
            a.last = a.last.clone().max(e.merged_at.clone());
        }
    }
    finish(
        kinds,
        authors.into_values().collect(),
        files.into_values().collect(),
        candidates,
    )
}

/// The digest of two disjoint sets of a year's entries, from theirs.
pub fn merge(a: &YearDigest, b: &YearDigest) -> YearDigest {
    let mut kinds = a.kinds.clone();
    for (k, n) in &b.kinds {
        *kinds.entry(k.clone()).or_default() += n;
    }
    let mut authors: BTreeMap<String, AuthorActivity> = BTreeMap::new();
    for x in a.authors.iter().chain(&b.authors) {
        let e = authors
            .entry(x.login.clone())
            .or_insert_with(|| AuthorActivity {
                login: x.login.clone(),
                ..Default::default()
            });
        e.count += x.count;
        e.churn += x.churn;
        e.reviews += x.reviews;
        e.last = e.last.clone().max(x.last.clone());
    }
    let mut files: BTreeMap<String, FileActivity> = BTreeMap::new();
    for x in a.files.iter().chain(&b.files) {
        let e = files.entry(x.path.clone()).or_insert_with(|| FileActivity {
            path: x.path.clone(),
            ..Default::default()
        });
        e.count += x.count;
        e.churn += x.churn;
        e.last = e.last.clone().max(x.last.clone());
    }
    finish(
        kinds,
        authors.into_values().collect(),
        files.into_values().collect(),
        merge_candidates(a.candidates.clone(), b.candidates.clone()),
    )
}

fn finish(
    kinds: BTreeMap<String, u64>,
    mut authors: Vec<AuthorActivity>,
    mut files: Vec<FileActivity>,
    candidates: Candidates,
) -> YearDigest {
    // A review weighs half a PR, as in "Who knows it".
    authors.sort_by(|a, b| {
        (2 * b.count + b.reviews)
            .cmp(&(2 * a.count + a.reviews))
            .then(b.churn.cmp(&a.churn))
            .then(a.login.cmp(&b.login))
    });
    authors.truncate(YEAR_AUTHORS);
    files.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(b.churn.cmp(&a.churn))
            .then(a.path.cmp(&b.path))
    });
    files.truncate(YEAR_FILES);
    YearDigest {
        kinds,
        authors,
        files,
        candidates,
    }
}

/// `#123` in a story's text.
fn pr_refs() -> &'static regex::Regex {
    static PR: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PR.get_or_init(|| regex::Regex::new(r"#(\d+)\b").expect("a valid pattern"))
}

/// A module's own description and the file it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub text: String,
    /// A repository path (`crates/x/Cargo.toml`); empty for the modules config's `description:`.
    pub source: String,
}

/// What the overview is made from.
pub struct OverviewInput<'a> {
    pub repo: &'a str,
    /// `https://github.com/owner/repo` (from an entry's URL; GitHub Enterprise keeps its host).
    pub repo_url: Option<String>,
    pub paths: &'a [String],
    pub years: &'a BTreeMap<String, YearStats>,
    /// The page's newest entries, newest first.
    pub recent: &'a [ModuleEntry],
    pub now: OffsetDateTime,
    /// The module's own description (its README's lead or its manifest's), when it has one.
    pub description: Option<&'a Description>,
    /// The LLM-written story (grounded), when one is configured.
    pub story: Option<&'a str>,
    /// Its sentences left out as unsupported by the PRs they cite.
    pub story_dropped: u64,
    /// The model's filter or guardrail withheld the story (the page says so, briefly).
    pub story_withheld: bool,
    /// The directory it stands for, when that no longer exists on the default branch.
    pub gone: Option<&'a str>,
    /// Its CODEOWNERS owners (of its start-here files).
    pub owners: &'a [String],
    /// The team's notes (`.github/chronicle.yml`), shown as written, never as Markdown.
    pub notes: Option<&'a str>,
}

/// Where to start reading: the module's entry points (`lib.rs`, `main.rs`, `index.ts`,
/// `__init__.py`, its README…: the shallowest two), then its source files by churn weighted by
/// recency, then its tests, its other docs, and last its manifests (a version bump makes
/// `Cargo.toml` the most changed file, not the place to start).
pub fn start_files(years: &BTreeMap<String, YearStats>, now: OffsetDateTime) -> Vec<String> {
    let mut score: BTreeMap<&str, f64> = BTreeMap::new();
    for y in years.values() {
        for f in &y.digest.files {
            *score.entry(f.path.as_str()).or_default() += (f.count as f64
                + ((1 + f.churn) as f64).ln())
                * decay(&f.last, now, FILE_HALF_LIFE_DAYS);
        }
    }
    // The shallowest code entry points (a crate's `src/lib.rs` over its `src/x/mod.rs`), most
    // changed first, then the shallowest README; two in all.
    let shallowest = |readme: bool| -> Vec<&str> {
        let depth = |p: &str| p.matches('/').count();
        let of_kind =
            |p: &str| is_entry_point(p) && is_readme(p) == readme && !kind::is_test_path(p);
        let min = score.keys().filter(|p| of_kind(p)).map(|p| depth(p)).min();
        let mut found: Vec<&str> = score
            .keys()
            .copied()
            .filter(|p| of_kind(p) && Some(depth(p)) == min)
            .collect();
        found.sort_by(|a, b| score[b].total_cmp(&score[a]).then(a.cmp(b)));
        found
    };
    let code = shallowest(false);
    let readme = shallowest(true);
    let mut entry_points: Vec<&str> = code.iter().take(1).copied().collect();
    entry_points.extend(readme.first());
    entry_points.extend(code.iter().skip(1));
    entry_points.truncate(START_ENTRY_POINTS);
    let tier = |p: &str| -> u8 {
        if entry_points.contains(&p) {
            0
        } else if is_manifest(p) {
            4
        } else if kind::is_test_path(p) {
            2
        } else if kind::is_docs_path(p) {
            3
        } else {
            1
        }
    };
    let mut out: Vec<(&str, f64)> = score.into_iter().collect();
    out.sort_by(|a, b| {
        tier(a.0)
            .cmp(&tier(b.0))
            .then(b.1.total_cmp(&a.1))
            .then(a.0.cmp(b.0))
    });
    out.into_iter()
        .take(START_FILES)
        .map(|(p, _)| p.to_string())
        .collect()
}

/// Entry points shown first in "Start here".
const START_ENTRY_POINTS: usize = 2;

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase()
}

/// Where a reader enters a package or a directory: `lib.rs`, `main.rs`, `mod.rs`, `index.*`,
/// `__init__.py`, `main.go`, `main.py`, a README.
pub fn is_entry_point(path: &str) -> bool {
    let name = file_name(path);
    let stem = name.split('.').next().unwrap_or(&name);
    matches!(
        name.as_str(),
        "lib.rs" | "main.rs" | "mod.rs" | "__init__.py" | "main.go" | "main.py" | "__main__.py"
    ) || (stem == "index"
        && [".ts", ".tsx", ".js", ".mjs", ".cjs", ".jsx", ".mts"]
            .iter()
            .any(|ext| name.ends_with(ext))
        && !name.contains(".d."))
        || is_readme(path)
}

fn is_readme(path: &str) -> bool {
    file_name(path).split('.').next() == Some("readme")
}

/// Manifests and release notes: changed by every version bump, read last.
pub fn is_manifest(path: &str) -> bool {
    let name = file_name(path);
    matches!(
        name.as_str(),
        "cargo.toml"
            | "package.json"
            | "pyproject.toml"
            | "setup.py"
            | "setup.cfg"
            | "go.mod"
            | "pom.xml"
            | "build.gradle"
            | "build.gradle.kts"
            | "gemfile"
            | "composer.json"
            | "deno.json"
            | "jsr.json"
            | "tsconfig.json"
    ) || {
        // Release notes are documents (`CHANGELOG.md`, `RELEASES`), not `release.rs`.
        let (stem, ext) = name.split_once('.').unwrap_or((name.as_str(), ""));
        matches!(ext, "" | "md" | "markdown" | "txt" | "rst" | "adoc")
            && matches!(
                stem,
                "changelog" | "changes" | "history" | "release" | "releases" | "news"
            )
    } || name.ends_with(".gemspec")
}

fn pr_link(number: u64, url: &str) -> Span {
    Span::link(format!("#{number}"), url)
}

fn short_title(title: &str) -> String {
    chronicle_domain::cap(&title.replace(['\n', '\r', '\t'], " "), 90)
}

/// A significant PR's summary on its year's line: one line, without its closing period (the
/// line's own punctuation follows).
fn short_summary(summary: &str) -> String {
    let one_line = summary.replace(['\n', '\r', '\t'], " ");
    let capped = chronicle_domain::cap(one_line.trim(), 140);
    capped.trim_end_matches(['.', ';']).to_string()
}

/// Whether a significant PR's summary is worth its place on the year's line: a sentence of a
/// few words that is not the title again, nor only the names of its files.
fn adds_to_title(summary: &str, title: &str) -> bool {
    let s = chronicle_summary::comparable(summary);
    summary.split_whitespace().count() >= SUMMARY_MIN_WORDS
        && !chronicle_summary::is_files_summary(summary)
        && !chronicle_summary::comparable(title).contains(&s)
}

/// The overview's blocks: a heading and its sections.
pub fn overview(input: &OverviewInput) -> Vec<Block> {
    let years = input.years;
    // The page's newest entry, as the header says; the years' figures only without entries
    // (a year's kept `last` can outlive an entry that left the module).
    let latest = input
        .recent
        .first()
        .map(|e| e.merged_at.clone())
        .or_else(|| years.values().map(|y| y.last.clone()).max())
        .filter(|s| !s.is_empty());
    let created = years.values().next().and_then(|y| {
        year_milestones(&y.digest)
            .into_iter()
            .find(|m| m.what == "first")
    });
    let mut blocks = vec![
        Block::Heading {
            level: 2,
            spans: vec![Span::text("Overview")],
        },
        what_it_is(input, created.as_ref()),
        status(input, latest.as_deref()),
    ];
    from_the_team(input.notes, &mut blocks);
    start_here(input, &mut blocks);
    super::experts::who_knows_it(
        input.years,
        input.recent,
        input.now,
        input.owners,
        &mut blocks,
    );
    super::decisions::key_decisions_blocks(years, &mut blocks);
    super::decisions::problems_blocks(years, &mut blocks);
    story_so_far(input, created.as_ref(), &mut blocks);
    blocks.push(recently(input));
    blocks
}

/// "What it is:": the module's own words (a README's lead or a manifest's description) and
/// where it lives, and its first pull request.
fn what_it_is(input: &OverviewInput, created: Option<&Milestone>) -> Block {
    let mut what = vec![Span::bold("What it is:"), Span::text(" ")];
    // The globs that say where it lives: not exclusions, not lockfiles.
    let paths: Vec<&String> = input
        .paths
        .iter()
        .filter(|p| !p.starts_with('!') && !is_incidental(p))
        .collect();
    if let Some(d) = input.description {
        // Its own words first, with where they come from, then where it lives.
        // A README's lead is inline Markdown (code spans, links); a manifest's is text.
        what.extend(super::blocks::inline_spans(d.text.trim_end_matches('.')));
        if d.source.is_empty() {
            what.push(Span::text(" (modules config)"));
        } else {
            what.push(Span::text(" ("));
            let source = Span::code(d.source.clone());
            what.push(match &input.repo_url {
                Some(base) => Span {
                    link: Some(super::Link::Url(format!("{base}/blob/HEAD/{}", d.source))),
                    ..source
                },
                None => source,
            });
            what.push(Span::text(")"));
        }
        what.push(Span::text(if paths.is_empty() {
            ""
        } else {
            "; it lives under "
        }));
        for (i, p) in paths.iter().take(4).enumerate() {
            if i > 0 {
                what.push(Span::text(", "));
            }
            what.push(Span::code((*p).clone()));
        }
    } else if paths.is_empty() {
        what.push(Span::text("the files tagged with this module"));
    } else if paths.len() == 1 && paths[0] == "*" {
        what.push(Span::text("the files at the root of the repository"));
    } else {
        what.push(Span::text("the code under "));
        for (i, p) in paths.iter().take(4).enumerate() {
            if i > 0 {
                what.push(Span::text(", "));
            }
            what.push(Span::code((*p).clone()));
        }
        if paths.len() > 4 {
            what.push(Span::text(format!(" and {} more", paths.len() - 4)));
        }
    }
    if let Some(m) = created {
        what.push(Span::text("; its first pull request here was “"));
        what.extend(title_spans(&short_title(&m.title), None));
        what.push(Span::text("” ("));
        what.push(pr_link(m.number, &m.url));
        what.push(Span::text(format!(", {})", date(&m.merged_at))));
    }
    what.push(Span::text("."));
    Block::Paragraph(what)
}

/// "Status:": active, quiet (no change for a year) or gone (its directory removed).
fn status(input: &OverviewInput, latest: Option<&str>) -> Block {
    let status = match latest {
        Some(at) if input.gone.is_some() => format!(
            "gone — its directory no longer exists on the default branch; the last change was on {}.",
            date(at)
        ),
        None => "no merged pull requests yet.".to_string(),
        Some(at) => match days_since(at, input.now) {
            Some(d) if d as i64 > QUIET_DAYS => {
                format!(
                    "quiet — no change for over a year; the last was on {}.",
                    date(at)
                )
            }
            _ => format!("active — last changed on {}.", date(at)),
        },
    };
    let mut spans = vec![Span::bold("Status:"), Span::text(format!(" {status}"))];
    if let Some(dir) = input.gone {
        // Name the directory: "gone — its directory (`core/`) no longer exists …".
        spans = vec![
            Span::bold("Status:"),
            Span::text(" gone — its directory "),
            Span::code(format!("{dir}/")),
            Span::text(
                status
                    .trim_start_matches("gone — its directory")
                    .to_string(),
            ),
        ];
    }
    Block::Paragraph(spans)
}

/// "Start here:": the entry points, then the files most changed, recently weighted.
fn start_here(input: &OverviewInput, blocks: &mut Vec<Block>) {
    let years = input.years;
    let files = start_files(years, input.now);
    if !files.is_empty() {
        let mut spans = vec![Span::bold("Start here:"), Span::text(" ")];
        for (i, f) in files.iter().enumerate() {
            if i > 0 {
                spans.push(Span::text(", "));
            }
            match &input.repo_url {
                Some(base) => spans.push(Span {
                    code: true,
                    ..Span::link(
                        chronicle_domain::cap(f, 120),
                        &format!("{base}/blob/HEAD/{f}"),
                    )
                }),
                None => spans.push(Span::code(chronicle_domain::cap(f, 120))),
            }
        }
        spans.push(Span::text(
            " (entry points first, then the most changed, recently weighted).",
        ));
        blocks.push(Block::Paragraph(spans));
    }
}

/// "From the team:" the team's notes, paragraph by paragraph, as plain text: whatever
/// Markdown or HTML they hold is shown, never interpreted.
fn from_the_team(notes: Option<&str>, blocks: &mut Vec<Block>) {
    let Some(notes) = notes.map(str::trim).filter(|n| !n.is_empty()) else {
        return;
    };
    for (i, paragraph) in notes
        .split("\n\n")
        .map(chronicle_summary::collapse_whitespace)
        .filter(|p| !p.is_empty())
        .enumerate()
    {
        let mut spans = Vec::new();
        if i == 0 {
            spans.push(Span::bold("From the team:"));
            spans.push(Span::text(" "));
        }
        spans.push(Span::text(paragraph));
        blocks.push(Block::Paragraph(spans));
    }
}

/// "The story so far:": the LLM's paragraphs (grounded: every #N is one of the module's PRs,
/// linked here), then a line per year.
fn story_so_far(input: &OverviewInput, created: Option<&Milestone>, blocks: &mut Vec<Block>) {
    let years = input.years;
    if !years.is_empty() {
        blocks.push(Block::Paragraph(vec![Span::bold("The story so far:")]));
        for paragraph in input
            .story
            .unwrap_or_default()
            .split("\n\n")
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let linked = match &input.repo_url {
                Some(base) => pr_refs().replace_all(paragraph, |c: &regex::Captures| {
                    format!("[#{n}]({base}/pull/{n})", n = &c[1])
                }),
                None => std::borrow::Cow::Borrowed(paragraph),
            };
            blocks.push(Block::Paragraph(super::blocks::inline_spans(&linked)));
        }
        if input.story.is_some_and(|s| !s.trim().is_empty()) {
            let dropped = match input.story_dropped {
                0 => String::new(),
                1 => " One sentence the cited PRs did not support was left out.".to_string(),
                n => format!(" {n} sentences the cited PRs did not support were left out."),
            };
            blocks.push(Block::Paragraph(vec![Span::text(format!(
                "(Written by an LLM; every sentence was checked against the PRs it cites.{dropped})"
            ))]));
        }
        if input.story_withheld && input.story.is_none_or(|s| s.trim().is_empty()) {
            blocks.push(Block::Paragraph(vec![Span::text(
                "(The model's content filter withheld the written story; the figures below are \
                 from the pull requests.)",
            )]));
        }
        for (year, stats) in years {
            blocks.push(Block::Bullet(story_line(year, stats, created)));
        }
    }
}

/// "Recently:": what was merged in the last [`RECENT_DAYS`] days, by whom, and the latest.
fn recently(input: &OverviewInput) -> Block {
    let cutoff = input.now - Duration::days(RECENT_DAYS);
    let recent: Vec<&ModuleEntry> = input
        .recent
        .iter()
        .filter(|e| parse_rfc3339(&e.merged_at).is_some_and(|t| t >= cutoff))
        .collect();
    let mut spans = vec![Span::bold("Recently:"), Span::text(" ")];
    if recent.is_empty() {
        spans.push(Span::text(format!(
            "nothing merged in the last {RECENT_DAYS} days."
        )));
    } else {
        let substantive: Vec<&&ModuleEntry> = recent
            .iter()
            .filter(|e| !kind::is_folded(e.kind.as_deref()))
            .collect();
        let folded = recent.len() - substantive.len();
        let mut people: Vec<&str> = substantive
            .iter()
            .map(|e| e.author.as_str())
            .filter(|a| !kind::is_bot(a))
            .collect();
        people.sort();
        people.dedup();
        let mut text = format!(
            "{} in the last {RECENT_DAYS} days",
            count_of(recent.len() as u64, "pull request")
        );
        if !people.is_empty() {
            let named: Vec<String> = people.iter().take(4).map(|p| format!("@{p}")).collect();
            text.push_str(&format!(" by {}", named.join(", ")));
            if people.len() > 4 {
                text.push_str(&format!(" and {} more", people.len() - 4));
            }
        }
        if folded > 0 {
            text.push_str(&format!(
                " ({folded} dependency or release updates among them)"
            ));
        }
        spans.push(Span::text(text));
        if let Some(e) = substantive.first() {
            spans.push(Span::text("; the latest: “"));
            spans.extend(title_spans(&short_title(&e.title), None));
            spans.push(Span::text("” ("));
            spans.push(pr_link(e.number, &e.url));
            spans.push(Span::text(format!(", {})", date(&e.merged_at))));
        }
        spans.push(Span::text("."));
    }
    Block::Paragraph(spans)
}

/// One year of the story: "2019: 34 pull requests — 12 features, 8 fixes; 9 dependency updates
/// folded. Milestones: …".
fn story_line(year: &str, stats: &YearStats, created: Option<&Milestone>) -> Vec<Span> {
    let d = &stats.digest;
    let mut spans = vec![Span::bold(format!("{year}:")), Span::text(" ")];
    let order = [
        "features",
        "fixes",
        "refactors",
        "docs",
        "maintenance",
        "other changes",
    ];
    let parts: Vec<String> = order
        .iter()
        .filter_map(|f| {
            d.kinds
                .get(*f)
                .filter(|n| **n > 0)
                .map(|n| format!("{n} {}", singular(f, *n)))
        })
        .collect();
    let folded: Vec<String> = ["dependency updates", "releases"]
        .iter()
        .filter_map(|f| {
            d.kinds
                .get(*f)
                .filter(|n| **n > 0)
                .map(|n| format!("{n} {}", singular(f, *n)))
        })
        .collect();
    let mut text = count_of(stats.count, "pull request");
    if !parts.is_empty() {
        text.push_str(&format!(": {}", parts.join(", ")));
    }
    if !folded.is_empty() {
        text.push_str(&format!("; {} folded", folded.join(" and ")));
    }
    text.push('.');
    spans.push(Span::text(text));
    let mut named = 0;
    for m in &year_milestones(d) {
        let label = match m.what.as_str() {
            "first" if created.is_some_and(|c| c.number == m.number) => "created in",
            "first" => continue,
            _ if is_notable(m) => "notable",
            "breaking" => "breaking",
            "moved" => "files moved or renamed in",
            _ => continue,
        };
        spans.push(Span::text(if named == 0 { " Milestones: " } else { "; " }));
        spans.push(Span::text(format!("{label} “")));
        spans.extend(title_spans(&short_title(&m.title), None));
        spans.push(Span::text("” ("));
        spans.push(pr_link(m.number, &m.url));
        spans.push(Span::text(")"));
        if is_notable(m) && adds_to_title(&m.summary, &m.title) {
            spans.push(Span::text(": "));
            spans.extend(title_spans(&short_summary(&m.summary), None));
        }
        named += 1;
    }
    if named > 0 {
        spans.push(Span::text("."));
    }
    spans
}

fn singular(family: &str, n: u64) -> String {
    if n != 1 {
        return family.to_string();
    }
    match family {
        "features" => "feature",
        "fixes" => "fix",
        "refactors" => "refactor",
        "dependency updates" => "dependency update",
        "releases" => "release",
        "other changes" => "other change",
        other => other,
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::sample::entry;
    use chronicle_domain::FileChange;

    fn with_files(number: u64, statuses: &[&str]) -> ModuleEntry {
        let mut e = entry(number, &format!("2024-0{number}-01T00:00:00Z"), "alice");
        e.files = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| FileChange {
                path: format!("src/f{i}.rs"),
                additions: 1,
                deletions: 1,
                status: Some(s.to_string()),
            })
            .collect();
        e
    }

    /// A PR most of whose files here were renamed (at least three) is a "moved" milestone; a
    /// couple of renames among many edits is not.
    #[test]
    fn renames_and_moves_are_milestones() {
        let entries = vec![
            with_files(1, &["added", "added"]),
            with_files(2, &["renamed", "renamed", "renamed", "modified"]),
            with_files(
                3,
                &["renamed", "renamed", "modified", "modified", "modified"],
            ),
            with_files(4, &["renamed", "renamed"]),
        ];
        let moved: Vec<u64> = year_milestones(&digest(&entries))
            .iter()
            .filter(|m| m.what == "moved")
            .map(|m| m.number)
            .collect();
        assert_eq!(moved, vec![2]);
    }

    /// A PR large elsewhere and small here is not among this module's milestones: its
    /// size here is its changed lines in this module's files.
    #[test]
    fn the_largest_change_is_measured_in_the_module() {
        let mut elsewhere = with_files(2, &["modified"]);
        elsewhere.kind = Some("feat".into());
        elsewhere.additions = 4_000;
        elsewhere.files_here = 1;
        elsewhere.files_elsewhere = 60;
        let mut here = with_files(3, &["modified", "modified", "modified"]);
        here.kind = Some("feat".into());
        here.files.iter_mut().for_each(|f| f.additions = 100);
        here.additions = 300;
        here.files_here = 3;
        let first = with_files(1, &["added"]);
        let notable: Vec<u64> = year_milestones(&digest(&[first, elsewhere, here]))
            .iter()
            .filter(|m| is_notable(m))
            .map(|m| m.number)
            .collect();
        assert_eq!(notable, vec![3]);
    }

    /// A year's digest is the merge of its parts' digests, wherever it is cut: counts and
    /// milestones exactly, and authors and files while they fit the kept top lists.
    #[test]
    fn digests_merge_as_if_read_at_once() {
        let kinds = ["feat", "fix", "refactor", "chore(deps)", "feat"];
        let entries: Vec<ModuleEntry> = (1..=60u64)
            .map(|n| {
                let day = 1 + (n % 28);
                let month = 1 + (n / 28);
                let mut e = entry(
                    n,
                    &format!("2024-{month:02}-{day:02}T{:02}:00:00Z", n % 24),
                    &format!("dev{}", n % 7),
                );
                e.kind = Some(kinds[(n % 5) as usize].to_string());
                e.breaking = n % 17 == 0;
                e.why = (n % 3 == 0).then(|| chronicle_domain::Quote {
                    text: format!("Sentence {n} of a body, long enough to be quoted here."),
                    reason: n % 2 == 0,
                });
                e.linked_issues = (0..n % 3)
                    .map(|i| chronicle_domain::IssueRef {
                        number: 1000 + (n + i) % 13,
                        title: format!("Issue {}", (n + i) % 13),
                        state: "CLOSED".into(),
                        url: format!("https://github.com/acme/w/issues/{}", 1000 + (n + i) % 13),
                    })
                    .collect();
                e.additions = (n * 37) % 500;
                e.files = (0..(n % 4 + 1))
                    .map(|i| FileChange {
                        path: format!("src/m{}.rs", (n + i) % 9),
                        additions: (n * i) % 50,
                        deletions: i,
                        status: Some(if n % 11 == 0 { "renamed" } else { "modified" }.into()),
                    })
                    .collect();
                e
            })
            .collect();
        let mut sorted = entries.clone();
        sorted.sort_by_key(ModuleEntry::order_key);
        let whole = digest(&sorted);
        assert!(year_milestones(&whole).iter().any(|m| m.what == "breaking"));
        assert_eq!(whole.candidates.decisions.len(), 5);
        assert!(whole.candidates.decisions[0].quote.reason);
        assert_eq!(whole.candidates.problems.len(), 5);
        for cut in [0, 1, 7, 30, 59, 60] {
            let merged = merge(&digest(&sorted[..cut]), &digest(&sorted[cut..]));
            assert_eq!(merged, whole, "cut at {cut}");
        }
        // Merged in many small steps, as builds append.
        let mut stepwise = YearDigest::default();
        for chunk in sorted.chunks(3) {
            stepwise = merge(&stepwise, &digest(chunk));
        }
        assert_eq!(stepwise, whole);
    }

    /// "Start here" opens with the module's entry points, then its source by churn; tests come
    /// after the source, and a manifest that every version bump changes comes last.
    #[test]
    fn start_here_opens_with_entry_points_and_leaves_manifests_last() {
        let file = |path: &str, count: u64| FileActivity {
            path: path.into(),
            count,
            churn: count * 10,
            last: "2024-06-01T00:00:00Z".into(),
        };
        let mut years = BTreeMap::new();
        years.insert(
            "2024".to_string(),
            YearStats {
                digest: YearDigest {
                    files: vec![
                        file("crates/cli/Cargo.toml", 90),
                        file("crates/cli/src/version.test.ts", 60),
                        file("crates/cli/tests/parse.rs", 50),
                        file("crates/cli/src/parser.rs", 20),
                        file("crates/cli/src/args/mod.rs", 15),
                        file("crates/cli/src/lib.rs", 3),
                        file("crates/cli/README.md", 2),
                        file("crates/cli/CHANGELOG.md", 80),
                    ],
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        let now = parse_rfc3339("2024-07-01T00:00:00Z").unwrap();
        assert_eq!(
            start_files(&years, now),
            [
                "crates/cli/src/lib.rs",
                "crates/cli/README.md",
                "crates/cli/src/parser.rs",
                "crates/cli/src/args/mod.rs",
                "crates/cli/src/version.test.ts",
            ]
        );
    }

    /// A significant PR's summary is shown when it says more than the title and its files.
    #[test]
    fn a_milestone_summary_must_add_to_its_title() {
        let title = "feat(api): add paging";
        assert!(adds_to_title(
            "Listing 10,000 rows timed out, so results now come in pages.",
            title
        ));
        assert!(!adds_to_title("Fix tests", title));
        assert!(!adds_to_title(
            "Add paging to the api",
            "Add paging to the api"
        ));
        assert!(!adds_to_title("Changes `a.rs`, `b.rs` and `c.rs`.", title));
    }

    /// The first PR is never its own year's significant one; the others are, most significant
    /// first, and a feature outranks a larger fix only while its size is comparable.
    #[test]
    fn the_significant_are_chosen_from_the_candidates_as_from_all_entries() {
        let mut first = entry(1, "2024-01-01T00:00:00Z", "alice");
        first.kind = Some("feat".into());
        first.additions = 900;
        let mut fix = entry(2, "2024-01-02T00:00:00Z", "bob");
        fix.kind = Some("fix".into());
        fix.additions = 50;
        let mut feature = entry(3, "2024-01-03T00:00:00Z", "bob");
        feature.kind = Some("feat".into());
        feature.additions = 40;
        let mut chore = entry(4, "2024-01-04T00:00:00Z", "carol");
        chore.kind = Some("chore".into());
        chore.additions = 5_000;
        let notable = |entries: &[ModuleEntry]| -> Vec<u64> {
            year_milestones(&digest(entries))
                .iter()
                .filter(|m| is_notable(m))
                .map(|m| m.number)
                .collect()
        };
        assert_eq!(notable(&[first.clone(), fix.clone()]), [2]);
        assert_eq!(notable(&[first, fix, feature, chore]), [4, 3, 2]);
    }
}
