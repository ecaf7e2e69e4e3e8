//! What the pages say, as blocks: a module's page (header, its recent entries by month, links
//! to its archive pages), an archive page (a year, quarter, month or part of one), and the
//! repository's index of modules. Pure: the same entries always give the same blocks.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use super::blocks::title_spans;
use super::overview::Description;
use super::wording::{count_of, date, month_of};
use super::{Block, DocKey, Document, Span};
use chronicle_domain::{AuthorCount, ModuleEntry};
use chronicle_summary::{cap, collapse_whitespace};

/// How many of an entry's files in its module the page names.
pub const KEY_FILES: usize = 5;
/// How many authors a header or an index line names.
pub const TOP_AUTHORS: usize = 5;
/// A title longer than this is cut in its heading, with an ellipsis (the entry then starts with
/// the whole title).
pub const TITLE_MAX_CHARS: usize = 100;
/// The whole title shown under a cut heading stops here: GitHub's own limit on a PR title.
pub const FULL_TITLE_MAX_CHARS: usize = 256;
/// The longest summary paragraph shown.
pub const SUMMARY_MAX_CHARS: usize = 800;
/// A path longer than this is cut (keeps every paragraph within Notion's 2,000 characters).
pub const PATH_MAX_CHARS: usize = 150;
/// Issues an entry names.
pub const ISSUES_SHOWN: usize = 5;

/// What the module page's header says about the module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleFacts {
    pub repo: String,
    pub module: String,
    /// What the module covers (its globs, or the directory it stands for).
    pub paths: Vec<String>,
    pub entry_count: u64,
    pub first_merged_at: Option<String>,
    pub latest_merged_at: Option<String>,
    /// The most active authors of the entries on the module page.
    pub recent_authors: Vec<AuthorCount>,
    /// Years with archived entries, oldest first: (year, how many).
    pub archive_years: Vec<(String, u64)>,
    /// Every year's figures and digest, for the overview (none: no overview).
    pub years: BTreeMap<String, chronicle_domain::YearStats>,
    /// When the page is built (the overview's "recently" and "quiet" are relative to it).
    pub now: Option<OffsetDateTime>,
    /// What the module says it is (its README's lead, else its manifest's description).
    pub description: Option<Description>,
    /// The directory the module stands for, when it no longer exists on the default branch.
    pub gone: Option<String>,
    /// Its CODEOWNERS owners: those of its start-here files, as written (`@org/team`).
    pub owners: Vec<String>,
    /// The LLM-written story (grounded), shown above the years' lines.
    pub story: Option<String>,
    /// Its sentences left out as unsupported by the PRs they cite.
    pub story_dropped: u64,
    /// The model's filter or guardrail withheld the story for this input.
    pub story_withheld: bool,
    /// The team's `notes:` for the module (`.github/chronicle.yml`), shown as written.
    pub notes: Option<String>,
}

/// What a repository's context says of one module: its description (the README's lead of
/// the directory it is, else its package manifest's) and, for a module named after a top-level
/// directory that is no longer on the default branch, that directory (it is gone).
/// `layout`: the repository's layout as tagging sees it (which packages are which modules).
pub fn what_it_is(
    context: Option<&chronicle_tagging::context::RepoContext>,
    module: &str,
    paths: &[String],
    layout: Option<&chronicle_tagging::RepoLayout>,
) -> (Option<Description>, Option<String>) {
    let Some(context) = context else {
        return (None, None);
    };
    let package = layout
        .and_then(|l| l.package_dir(module))
        .and_then(|dir| context.packages.iter().find(|p| p.dir == dir));
    let top_level =
        (package.is_none() && paths == [format!("{module}/**")] && !module.contains('/'))
            .then(|| module.to_string());
    let dir = package.map(|p| p.dir.clone()).or(top_level.clone());
    let readme = dir.as_ref().and_then(|d| context.about.get(d));
    let description = match (readme, package) {
        (Some(about), _) => Some(Description {
            text: about.text.clone(),
            source: about.source.clone(),
        }),
        (None, Some(p)) => p
            .description
            .clone()
            .zip(p.manifest.clone())
            .map(|(text, source)| Description { text, source }),
        (None, None) => None,
    };
    let gone = top_level.filter(|d| {
        context
            .top_level
            .as_ref()
            .is_some_and(|dirs| !dirs.contains(d))
    });
    (description, gone)
}

/// Owners CODEOWNERS gives these files, each once, in order (at most five).
pub fn owners_of(codeowners: &chronicle_tagging::Codeowners, files: &[String]) -> Vec<String> {
    let mut owners: Vec<String> = Vec::new();
    for f in files {
        for o in codeowners.owners_of(f) {
            if !owners.contains(o) && owners.len() < 5 {
                owners.push(o.clone());
            }
        }
    }
    owners
}

/// `<repo> · <module>`
pub fn module_title(repo: &str, module: &str) -> String {
    format!("{repo} · {module}")
}

/// The module's page: its header, its entries (newest first, by month), then its archive.
pub fn module_page(facts: &ModuleFacts, entries: &[ModuleEntry]) -> Document {
    let key = DocKey::Module {
        repo: facts.repo.clone(),
        module: facts.module.clone(),
    };
    let mut blocks = header(facts, entries.len());
    if let (Some(now), false) = (facts.now, facts.years.is_empty()) {
        blocks.extend(super::overview::overview(&super::overview::OverviewInput {
            repo: &facts.repo,
            repo_url: entries.first().and_then(|e| repo_url(&e.url)),
            paths: &facts.paths,
            years: &facts.years,
            recent: entries,
            now,
            description: facts.description.as_ref(),
            story: facts.story.as_deref(),
            story_dropped: facts.story_dropped,
            story_withheld: facts.story_withheld,
            gone: facts.gone.as_deref(),
            owners: &facts.owners,
            notes: facts.notes.as_deref(),
        }));
        blocks.push(Block::Heading {
            level: 2,
            spans: vec![Span::text("Pull requests")],
        });
    }
    blocks.extend(entry_groups(entries));
    if !facts.archive_years.is_empty() {
        blocks.push(Block::Heading {
            level: 2,
            spans: vec![Span::text("Older pull requests")],
        });
        for (year, count) in facts.archive_years.iter().rev() {
            let child = DocKey::Archive {
                repo: facts.repo.clone(),
                module: facts.module.clone(),
                label: year.clone(),
            };
            blocks.push(Block::Child {
                title: archive_title(&facts.repo, &facts.module, year),
                key: child,
                note: vec![Span::text(count_of(*count, "merged pull request"))],
            });
        }
    }
    Document {
        title: module_title(&facts.repo, &facts.module),
        key,
        parent: Some(DocKey::Index {
            repo: facts.repo.clone(),
        }),
        blocks,
    }
}

fn header(facts: &ModuleFacts, shown: usize) -> Vec<Block> {
    let mut paths = vec![Span::text("Paths: ")];
    if facts.paths.is_empty() {
        paths.push(Span::text("not known (the changed files were not fetched)"));
    }
    for (i, p) in facts.paths.iter().enumerate() {
        if i > 0 {
            paths.push(Span::text(", "));
        }
        paths.push(Span::code(p.clone()));
    }
    paths.push(Span::text("."));
    let counts = if facts.entry_count == 0 {
        "No merged pull requests yet.".to_string()
    } else {
        let span = match (&facts.first_merged_at, &facts.latest_merged_at) {
            (Some(first), Some(latest)) => {
                format!(", first merged {}, latest {}", date(first), date(latest))
            }
            _ => String::new(),
        };
        let archived = facts.entry_count.saturating_sub(shown as u64);
        let rest = if archived > 0 {
            format!(
                " The {shown} most recent are below; the {archived} older ones are in the archive pages at the end."
            )
        } else {
            String::new()
        };
        format!(
            "{}{span}.{rest}",
            count_of(facts.entry_count, "merged pull request")
        )
    };
    let authors = if facts.recent_authors.is_empty() {
        "Most active recently: nobody yet.".to_string()
    } else {
        format!(
            "Most active recently: {}.",
            authors_list(&facts.recent_authors)
        )
    };
    vec![
        Block::Paragraph(paths),
        Block::Paragraph(vec![Span::text(counts)]),
        Block::Paragraph(vec![Span::text(authors)]),
    ]
}

fn authors_list(authors: &[AuthorCount]) -> String {
    authors
        .iter()
        .take(TOP_AUTHORS)
        .map(|a| format!("@{} ({})", one_line(&a.login), a.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The most frequent authors of these entries, most first (ties by name).
pub fn recent_authors(entries: &[ModuleEntry]) -> Vec<AuthorCount> {
    let mut by_author: BTreeMap<&str, u64> = BTreeMap::new();
    // Bots are never "most active".
    for e in entries
        .iter()
        .filter(|e| !chronicle_summary::kind::is_bot(&e.author))
    {
        *by_author.entry(e.author.as_str()).or_default() += 1;
    }
    let mut authors: Vec<AuthorCount> = by_author
        .into_iter()
        .map(|(login, count)| AuthorCount {
            login: login.to_string(),
            count,
        })
        .collect();
    authors.sort_by(|a, b| b.count.cmp(&a.count).then(a.login.cmp(&b.login)));
    authors.truncate(TOP_AUTHORS);
    authors
}

/// The title of an archive page: `<repo> · <module> · 2019`, `… · 2019 Q1`, `… · March 2019`,
/// `… · March 2019, part 2`.
pub fn archive_title(repo: &str, module: &str, label: &str) -> String {
    format!("{} · {}", module_title(repo, module), period_name(label))
}

/// A label as words: `2019`, `2019, part 2`, `2019, part 2a`; and those of an older layout:
/// `2019 Q1`, `March 2019`, `March 2019, part 2`.
pub fn period_name(label: &str) -> String {
    let parts: Vec<&str> = label.split('-').collect();
    fn part(p: &str) -> Option<&str> {
        p.strip_prefix('p').filter(|n| n.parse::<u32>().is_ok())
    }
    match parts.as_slice() {
        [year] => year.to_string(),
        [year, p] if part(p).is_some() => format!("{year}, part {}", part(p).unwrap_or(p)),
        [year, p, half] if part(p).is_some() && half.len() == 1 => {
            format!("{year}, part {}{half}", part(p).unwrap_or(p))
        }
        [year, q] if q.starts_with('Q') => format!("{year} {q}"),
        [year, month] => format!("{} {year}", month_name(month)),
        [year, month, part] => format!(
            "{} {year}, part {}",
            month_name(month),
            part.trim_start_matches('p')
        ),
        _ => label.to_string(),
    }
}

fn month_name(month: &str) -> String {
    month
        .parse::<u8>()
        .ok()
        .and_then(|m| time::Month::try_from(m).ok())
        .map(|m| m.to_string())
        .unwrap_or_else(|| month.to_string())
}

/// An archive page: either its entries (newest first, by month) or, when the period was too big
/// for one page, links to the pages it was split into.
pub fn archive_page(
    key: DocKey,
    parent: DocKey,
    entries: &[ModuleEntry],
    children: &[(DocKey, u64)],
) -> Document {
    let (repo, module, label) = match &key {
        DocKey::Archive {
            repo,
            module,
            label,
        } => (repo.clone(), module.clone(), label.clone()),
        other => (
            other.repo().to_string(),
            other.item_module().to_string(),
            String::new(),
        ),
    };
    let module_key = DocKey::Module {
        repo: repo.clone(),
        module: module.clone(),
    };
    let count: u64 = if children.is_empty() {
        entries.len() as u64
    } else {
        children.iter().map(|(_, n)| n).sum()
    };
    let mut blocks = vec![Block::Paragraph(vec![
        Span::text(format!(
            "{} of {module} merged in {}, newest first. Back to ",
            count_of(count, "pull request"),
            period_name(&label)
        )),
        Span::page(module_title(&repo, &module), module_key),
        Span::text("."),
    ])];
    if children.is_empty() {
        blocks.extend(entry_groups(entries));
    } else {
        for (child, n) in children.iter().rev() {
            blocks.push(Block::Child {
                title: archive_title(&repo, &module, child.label()),
                key: child.clone(),
                note: vec![Span::text(count_of(*n, "merged pull request"))],
            });
        }
    }
    Document {
        title: archive_title(&repo, &module, &label),
        key,
        parent: Some(parent),
        blocks,
    }
}

/// One line of the repository index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRow {
    pub module: String,
    pub entry_count: u64,
    pub latest_merged_at: Option<String>,
    pub recent_authors: Vec<AuthorCount>,
}

/// Above this many modules the index names the modules without their figures (Notion's
/// limit of blocks per request).
pub const INDEX_MAX_NOTES: usize = 300;

/// The repository's index: every module, most recently active first, with its count, latest
/// merge and most active recent authors.
/// `max_notes`: how many modules (the most recently active) carry their figures.
pub fn index_page(repo: &str, rows: &[IndexRow], max_notes: usize) -> Document {
    let mut rows: Vec<&IndexRow> = rows.iter().collect();
    rows.sort_by(|a, b| {
        b.latest_merged_at
            .cmp(&a.latest_merged_at)
            .then(a.module.cmp(&b.module))
    });
    let total: u64 = rows.iter().map(|r| r.entry_count).sum();
    let mut blocks = vec![Block::Paragraph(vec![Span::text(format!(
        "{}, {} between them, most recently active first.",
        count_of(rows.len() as u64, "module"),
        count_of(total, "merged pull request")
    ))])];
    for (i, row) in rows.iter().enumerate() {
        let mut note = Vec::new();
        if i < max_notes {
            let mut text = count_of(row.entry_count, "merged pull request");
            if let Some(latest) = &row.latest_merged_at {
                text.push_str(&format!(", latest {}", date(latest)));
            }
            if !row.recent_authors.is_empty() {
                let names: Vec<String> = row
                    .recent_authors
                    .iter()
                    .take(3)
                    .map(|a| format!("@{}", one_line(&a.login)))
                    .collect();
                text.push_str(&format!(" · recently {}", names.join(", ")));
            }
            note.push(Span::text(text));
        }
        blocks.push(Block::Child {
            key: DocKey::Module {
                repo: repo.to_string(),
                module: row.module.clone(),
            },
            title: module_title(repo, &row.module),
            note,
        });
    }
    Document {
        key: DocKey::Index {
            repo: repo.to_string(),
        },
        title: format!("{repo} · modules"),
        parent: None,
        blocks,
    }
}

/// Entries (newest first) under a heading per month.
pub fn entry_groups(entries: &[ModuleEntry]) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    let mut folded: Vec<&ModuleEntry> = Vec::new();
    for entry in entries {
        let month = month_of(&entry.merged_at);
        if current.as_deref() != Some(month.as_str()) {
            blocks.extend(folded_lines(&std::mem::take(&mut folded)));
            blocks.push(Block::Heading {
                level: 2,
                spans: vec![Span::text(month.clone())],
            });
            current = Some(month);
        }
        if chronicle_summary::kind::is_folded(entry.kind.as_deref()) {
            folded.push(entry);
        } else {
            blocks.extend(entry_blocks(entry));
        }
    }
    blocks.extend(folded_lines(&folded));
    blocks
}

/// A month's dependency updates and releases, one line each kind: "3 dependency updates: tokio
/// 1.47.1 → 1.48.0 (#47), …", newest first as given.
fn folded_lines(entries: &[&ModuleEntry]) -> Vec<Block> {
    let mut blocks = Vec::new();
    for (kind, noun) in [
        (chronicle_summary::kind::DEPS, "dependency update"),
        (chronicle_summary::kind::RELEASE, "release"),
    ] {
        let of_kind: Vec<&&ModuleEntry> = entries
            .iter()
            .filter(|e| e.kind.as_deref() == Some(kind))
            .collect();
        if of_kind.is_empty() {
            continue;
        }
        let mut spans = vec![Span::bold(format!(
            "{}:",
            count_of(of_kind.len() as u64, noun)
        ))];
        for (i, e) in of_kind.iter().enumerate() {
            spans.push(Span::text(if i == 0 { " " } else { ", " }));
            spans.push(Span::text(format!("{} (", bump_label(&e.title))));
            spans.push(Span::link(format!("#{}", e.number), &e.url));
            spans.push(Span::text(")"));
        }
        spans.push(Span::text("."));
        blocks.push(Block::Paragraph(spans));
    }
    blocks
}

/// "Bump tokio from 1.47.1 to 1.48.0" → "tokio 1.47.1 → 1.48.0"; other titles as they are.
fn bump_label(title: &str) -> String {
    static BUMP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)(?:bump|update|upgrade)s?\s+(?:the\s+)?(?:dependency\s+|rust\s+crate\s+|module\s+|gem\s+|npm\s+package\s+)?(\S+?)\s+(?:requirement\s+)?(?:from\s+v?(\S+)\s+)?to\s+v?(\S+?)\.?$",
        )
        .expect("a valid pattern")
    });
    let title = one_line(title);
    match BUMP.captures(title.trim()) {
        Some(c) => match c.get(2) {
            Some(from) => format!("{} {} → {}", &c[1], from.as_str(), &c[3]),
            None => format!("{} → {}", &c[1], &c[3]),
        },
        None => cap(&title, 80),
    }
}

/// One entry: its heading (date, linked title, number); who, what kind, labels and size; the
/// summary; its key files in this module and what else it touched; the issues it closes.
pub fn entry_blocks(e: &ModuleEntry) -> Vec<Block> {
    let title = one_line(&e.title);
    let short = cap(&title, TITLE_MAX_CHARS);
    let mut heading = vec![Span::text(format!("{} — ", date(&e.merged_at)))];
    heading.extend(title_spans(&short, Some(&e.url)));
    heading.push(Span::text(format!(" (#{})", e.number)));
    let mut blocks = vec![Block::Heading {
        level: 3,
        spans: heading,
    }];
    let mut meta = Vec::new();
    if short != title {
        // The heading is cut; the whole title, however long, is the entry's first line.
        meta.push(Span::text("Title: "));
        meta.extend(title_spans(&cap(&title, FULL_TITLE_MAX_CHARS), None));
        meta.push(Span::text(" · "));
    }
    meta.push(Span::text(format!("by @{}", one_line(&e.author))));
    if let Some(kind) = &e.kind {
        meta.push(Span::text(" · "));
        meta.push(Span::code(kind.clone()));
    }
    if !e.labels.is_empty() {
        let labels: Vec<String> = e.labels.iter().map(|l| one_line(l)).collect();
        meta.push(Span::text(format!(" · labels: {}", labels.join(", "))));
    }
    if e.additions + e.deletions > 0 {
        meta.push(Span::text(format!(" · +{}/−{}", e.additions, e.deletions)));
    }
    blocks.push(Block::Paragraph(meta));

    let summary =
        super::blocks::inline_spans(&cap(&collapse_whitespace(&e.summary), SUMMARY_MAX_CHARS));
    if !summary.is_empty() {
        blocks.push(Block::Paragraph(summary));
    }

    if !e.files.is_empty() {
        let mut spans = vec![Span::text("Key files: ")];
        for (i, f) in e.files.iter().take(KEY_FILES).enumerate() {
            if i > 0 {
                spans.push(Span::text(", "));
            }
            spans.push(Span::code(cap(&one_line(&f.path), PATH_MAX_CHARS)));
            spans.push(Span::text(format!(" (+{}/−{})", f.additions, f.deletions)));
        }
        let shown = e.files.len().min(KEY_FILES) as u64;
        let more = e.files_here.saturating_sub(shown);
        spans.push(Span::text(if more > 0 {
            format!(
                " and {more} more {}.",
                if more == 1 { "file" } else { "files" }
            )
        } else {
            ".".to_string()
        }));
        blocks.push(Block::Paragraph(spans));
    }
    if e.files_elsewhere > 0 {
        let named: Vec<String> = e
            .elsewhere
            .iter()
            .map(|m| format!("{} ({})", one_line(&m.module), count_of(m.files, "file")))
            .collect();
        let text = if named.is_empty() {
            format!(
                "Also touched: {} elsewhere.",
                count_of(e.files_elsewhere, "file")
            )
        } else {
            format!("Also touched: {}.", named.join(", "))
        };
        blocks.push(Block::Paragraph(vec![Span::text(text)]));
    }

    // Entries written before linked issues were scoped may name another owner's issue.
    let owner = e.repo.split('/').next().unwrap_or_default();
    let issues: Vec<&chronicle_domain::IssueRef> = e
        .linked_issues
        .iter()
        .filter(|i| chronicle_domain::issue_of_owner(&i.url, owner))
        .collect();
    if !issues.is_empty() {
        let mut spans = vec![Span::text("Closes: ")];
        for (i, issue) in issues.iter().take(ISSUES_SHOWN).enumerate() {
            if i > 0 {
                spans.push(Span::text(", "));
            }
            let label = if issue.number > 0 {
                format!("#{} {}", issue.number, one_line(&issue.title))
            } else {
                one_line(&issue.title)
            };
            spans.push(Span::link(cap(&label, TITLE_MAX_CHARS), &issue.url));
            spans.push(Span::text(format!(" ({})", one_line(&issue.state))));
        }
        let more = e.linked_issues.len().saturating_sub(ISSUES_SHOWN);
        spans.push(Span::text(if more > 0 {
            format!(" and {more} more.")
        } else {
            ".".to_string()
        }));
        blocks.push(Block::Paragraph(spans));
    }
    blocks
}

/// `https://github.com/owner/repo` from a PR's URL (`…/pull/12`).
fn repo_url(pr_url: &str) -> Option<String> {
    pr_url
        .rsplit_once("/pull/")
        .map(|(base, _)| base.to_string())
        .filter(|b| b.starts_with("https://") || b.starts_with("http://"))
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r', '\t'], " ")
}

/// An entry for unit tests of the pages and the publishers.
#[cfg(test)]
pub(crate) mod sample {
    use chronicle_domain::ModuleEntry;

    pub fn entry(number: u64, merged_at: &str, author: &str) -> ModuleEntry {
        ModuleEntry {
            repo: "acme/widgets".into(),
            module: "src".into(),
            number,
            title: format!("Change {number}"),
            url: format!("https://github.com/acme/widgets/pull/{number}"),
            author: author.into(),
            merged_at: merged_at.into(),
            kind: None,
            breaking: false,
            labels: vec![],
            summary: format!("Summary of {number}."),
            linked_issues: vec![],
            additions: 0,
            deletions: 0,
            files: vec![],
            files_here: 0,
            lines_here: 0,
            elsewhere: vec![],
            files_elsewhere: 0,
            why: None,
            reviewers: vec![],
            discussion: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sample::entry;
    use super::*;
    use chronicle_domain::{FileChange, IssueRef, ModuleCount};

    #[test]
    fn an_entry_says_who_what_why_where() {
        let mut e = entry(12, "2024-02-10T08:00:00Z", "alice");
        e.kind = Some("fix".into());
        e.labels = vec!["bug".into()];
        e.additions = 30;
        e.deletions = 4;
        e.files = (1..=7)
            .map(|i| FileChange {
                path: format!("src/f{i}.rs"),
                additions: 10 - i,
                deletions: 0,
                status: None,
            })
            .collect();
        e.files_here = 9;
        e.files_elsewhere = 3;
        e.elsewhere = vec![ModuleCount {
            module: "docs".into(),
            files: 3,
        }];
        e.linked_issues = vec![IssueRef {
            number: 4,
            title: "Parser crash".into(),
            state: "closed".into(),
            url: "https://github.com/acme/widgets/issues/4".into(),
        }];
        let text: Vec<String> = entry_blocks(&e).iter().map(Block::plain_text).collect();
        assert_eq!(
            text,
            [
                "2024-02-10 — Change 12 (#12)",
                "by @alice · fix · labels: bug · +30/−4",
                "Summary of 12.",
                "Key files: src/f1.rs (+9/−0), src/f2.rs (+8/−0), src/f3.rs (+7/−0), src/f4.rs (+6/−0), src/f5.rs (+5/−0) and 4 more files.",
                "Also touched: docs (3 files).",
                "Closes: #4 Parser crash (closed).",
            ]
        );
    }

    /// The stored figures of a module whose only entry is `e` (merged in 2024).
    fn one_year(e: &ModuleEntry) -> BTreeMap<String, chronicle_domain::YearStats> {
        BTreeMap::from([(
            "2024".to_string(),
            chronicle_domain::YearStats {
                count: 1,
                first: e.merged_at.clone(),
                last: e.merged_at.clone(),
                digest: super::super::overview::digest(std::slice::from_ref(e)),
                ..Default::default()
            },
        )])
    }

    /// A workspace package's own description says what the module is, linked to its manifest.
    #[test]
    fn what_it_is_comes_from_the_manifest_description() {
        let e = entry(12, "2024-02-10T08:00:00Z", "alice");
        let years = one_year(&e);
        let facts = ModuleFacts {
            repo: "acme/widgets".into(),
            module: "acme-api".into(),
            paths: vec!["crates/api/**".into()],
            entry_count: 1,
            years,
            now: chronicle_domain::parse_rfc3339("2024-03-01T00:00:00Z"),
            description: Some(Description {
                text: "The public HTTP API.".into(),
                source: "crates/api/Cargo.toml".into(),
            }),
            owners: owners_of(
                &chronicle_tagging::Codeowners::parse("* @all\n/crates/api/ @acme/api @bob\n"),
                &["crates/api/src/lib.rs".into(), "README.md".into()],
            ),
            ..Default::default()
        };
        assert_eq!(facts.owners, ["@acme/api", "@bob", "@all"]);
        let md = super::super::render::commonmark(&module_page(&facts, &[e]));
        assert!(
            md.contains("**Who knows it:** @alice (1 PR; last active 2024-02-10); owners in CODEOWNERS: @acme/api, @bob, @all."),
            "{md}"
        );
        assert!(
            md.contains("**What it is:** The public HTTP API ([`crates/api/Cargo.toml`](https://github.com/acme/widgets/blob/HEAD/crates/api/Cargo.toml)); it lives under `crates/api/**`"),
            "{md}"
        );
    }

    /// The modules config's `description:` (no file behind it) is said to come from the config.
    #[test]
    fn what_it_is_may_come_from_the_modules_config() {
        let e = entry(12, "2024-02-10T08:00:00Z", "alice");
        let facts = ModuleFacts {
            repo: "acme/widgets".into(),
            module: "api".into(),
            paths: vec!["api/**".into()],
            entry_count: 1,
            years: one_year(&e),
            now: chronicle_domain::parse_rfc3339("2024-03-01T00:00:00Z"),
            description: Some(Description {
                text: "The public HTTP API.".into(),
                source: String::new(),
            }),
            ..Default::default()
        };
        let md = super::super::render::commonmark(&module_page(&facts, &[e]));
        assert!(
            md.contains(
                "**What it is:** The public HTTP API (modules config); it lives under `api/**`"
            ),
            "{md}"
        );
    }

    /// A top-level module whose directory is no longer on the default branch says so.
    #[test]
    fn a_removed_directory_is_gone() {
        let e = entry(12, "2024-02-10T08:00:00Z", "alice");
        let years = one_year(&e);
        let facts = ModuleFacts {
            repo: "acme/widgets".into(),
            module: "core".into(),
            paths: vec!["core/**".into()],
            entry_count: 1,
            years,
            now: chronicle_domain::parse_rfc3339("2024-03-01T00:00:00Z"),
            gone: Some("core".into()),
            ..Default::default()
        };
        let md = super::super::render::commonmark(&module_page(&facts, &[e]));
        assert!(
            md.contains("**Status:** gone — its directory `core/` no longer exists on the default branch; the last change was on 2024-02-10."),
            "{md}"
        );
    }

    /// The header's "latest" and the Status date come from the same entries, even when a
    /// year's kept figures still name a later merge (an entry that has since left the module).
    #[test]
    fn the_header_and_the_status_agree_on_the_latest_change() {
        let e = entry(12, "2026-04-17T08:00:00Z", "alice");
        let mut years = one_year(&e);
        years
            .values_mut()
            .for_each(|y| y.last = "2026-05-05T08:00:00Z".into());
        let facts = ModuleFacts {
            repo: "acme/widgets".into(),
            module: "api".into(),
            paths: vec!["api/**".into()],
            entry_count: 1,
            first_merged_at: Some(e.merged_at.clone()),
            latest_merged_at: Some(e.merged_at.clone()),
            years,
            now: chronicle_domain::parse_rfc3339("2026-05-10T00:00:00Z"),
            ..Default::default()
        };
        let md = super::super::render::commonmark(&module_page(&facts, &[e]));
        assert!(md.contains("latest 2026-04-17"), "{md}");
        assert!(md.contains("last changed on 2026-04-17"), "{md}");
        assert!(!md.contains("2026-05-05"), "{md}");
    }

    #[test]
    fn archive_labels_read_as_periods() {
        assert_eq!(period_name("2019"), "2019");
        assert_eq!(period_name("2019-Q3"), "2019 Q3");
        assert_eq!(period_name("2019-03"), "March 2019");
        assert_eq!(period_name("2019-03-p2"), "March 2019, part 2");
    }

    #[test]
    fn recent_authors_are_counted_and_ranked() {
        let entries = vec![
            entry(1, "2024-01-01T00:00:00Z", "bob"),
            entry(2, "2024-01-02T00:00:00Z", "alice"),
            entry(3, "2024-01-03T00:00:00Z", "bob"),
        ];
        assert_eq!(
            recent_authors(&entries),
            vec![
                AuthorCount {
                    login: "bob".into(),
                    count: 2
                },
                AuthorCount {
                    login: "alice".into(),
                    count: 1
                }
            ]
        );
    }
}
