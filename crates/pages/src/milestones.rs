//! A year's milestones in a module's story: its first PR, its most significant PRs, its first
//! breaking changes and its biggest moves.
//!
//! Significance is measured in the module itself: a PR that changed two lines here and thousands
//! elsewhere is not one of this module's milestones. Its size here ranks it, with its kind
//! (breaking > feature > fix > the rest), the issues it closed and its discussion (comments and
//! reviews).
//!
//! Each entry is a candidate on its own, and candidates merge by keeping the best few, so the
//! milestones of more entries are those of the merged candidates (the page item keeps them per
//! year without reading the year again).

use chronicle_domain::{Candidates, Decision, Milestone, ModuleEntry, Problem, YearDigest};
use chronicle_summary::kind;

/// A milestone's title as kept (the overview shows 90 characters of it).
const MILESTONE_TITLE_CHARS: usize = 200;
/// A milestone's one-line summary as kept.
const MILESTONE_SUMMARY_CHARS: usize = 160;
/// Significant PRs kept per year: enough that those shown remain after the first PR, the
/// breaking changes and the moves (named as such) are left out.
const YEAR_NOTABLE: usize = NOTABLE_SHOWN + 1 + YEAR_BREAKING + YEAR_MOVES;
/// Significant PRs shown per year.
pub const NOTABLE_SHOWN: usize = 3;
/// Breaking changes kept per year as milestones.
const YEAR_BREAKING: usize = 2;
/// Renames and moves kept per year as milestones, and the renamed files that make one.
const YEAR_MOVES: usize = 2;
const MOVE_MIN_FILES: usize = 3;
/// Quotes and closed issues kept per year: as many as the overview shows in all.
pub const YEAR_DECISIONS: usize = 5;
pub const YEAR_PROBLEMS: usize = 5;
/// An issue's title as kept.
const PROBLEM_TITLE_CHARS: usize = 120;

fn milestone_order(m: &Milestone) -> String {
    chronicle_domain::order_key(&m.merged_at, m.number)
}

/// A year's milestones: its first PR; its most significant PRs other than the first; its first
/// breaking changes; its biggest moves.
pub fn year_milestones(digest: &YearDigest) -> Vec<Milestone> {
    milestones(&digest.candidates)
}

/// The lines a PR changed in this module. Entries written before `lines_here` was recorded
/// have only their kept files; one with no file list at all (not yet enriched) falls back to
/// the PR's size.
pub fn lines_here(e: &ModuleEntry) -> u64 {
    let known = !e.files.is_empty() || e.files_here > 0 || e.files_elsewhere > 0;
    if e.lines_here > 0 {
        e.lines_here
    } else if known {
        e.files.iter().map(|f| f.additions + f.deletions).sum()
    } else {
        e.additions + e.deletions
    }
}

/// Ten points per doubling of a size: a 1,000-line change outranks a 10-line one by 70, not by
/// a factor of 100, so a feature or a closed issue can still weigh against sheer size.
fn size_points(lines: u64) -> u64 {
    u64::from(64 - lines.leading_zeros()) * 10
}

/// Whether under a quarter of a PR's changed lines are in this module: it is a milestone of
/// the module where it mostly happened, not of this one.
pub fn mostly_elsewhere(e: &ModuleEntry) -> bool {
    lines_here(e).saturating_mul(4) < e.additions + e.deletions
}

/// How significant a PR is to this module: its size here, its kind, the issues it closed and
/// how much it was discussed.
pub fn significance(e: &ModuleEntry) -> u64 {
    let here = lines_here(e);
    let kind_points = if e.breaking {
        60
    } else {
        match e.kind.as_deref() {
            Some("feat") => 40,
            Some("fix") => 25,
            Some("perf" | "refactor" | "security") => 10,
            _ => 0,
        }
    };
    let issue_points = 15 * e.linked_issues.len().min(3) as u64;
    // A point per comment or review, to twenty: a long discussion marks a decision.
    let discussion_points = e.discussion.min(20);
    1 + size_points(here) + kind_points + issue_points + discussion_points
}

/// The rank of a kept candidate; those stored before significance was (score 0) are ranked by
/// what they kept: their size and whether they were a feature.
fn rank(m: &Milestone) -> u64 {
    if m.score > 0 {
        m.score
    } else {
        size_points(m.churn) + if m.feature { 40 } else { 0 }
    }
}

fn milestone(what: &str, e: &ModuleEntry) -> Milestone {
    Milestone {
        what: what.into(),
        number: e.number,
        // Bounded: the page item holds a few of these a year.
        title: chronicle_domain::cap(&e.title, MILESTONE_TITLE_CHARS),
        url: e.url.clone(),
        merged_at: e.merged_at.clone(),
        ..Default::default()
    }
}

/// One entry as a candidate for each kind of milestone it can be.
pub fn candidates_of(e: &ModuleEntry) -> Candidates {
    let mut c = Candidates {
        first: Some(milestone("first", e)),
        ..Default::default()
    };
    if !kind::is_folded(e.kind.as_deref()) {
        let score = significance(e);
        let elsewhere = mostly_elsewhere(e);
        if !elsewhere {
            c.notable.push(Milestone {
                feature: e.kind.as_deref() == Some("feat"),
                churn: lines_here(e),
                score,
                summary: chronicle_domain::cap(e.summary.trim(), MILESTONE_SUMMARY_CHARS),
                ..milestone("notable", e)
            });
        }
        if let Some(quote) = &e.why {
            c.decisions.push(Decision {
                number: e.number,
                url: e.url.clone(),
                merged_at: e.merged_at.clone(),
                quote: quote.clone(),
                score,
                elsewhere,
            });
        }
    }
    if !kind::is_folded(e.kind.as_deref()) && !mostly_elsewhere(e) {
        let score = significance(e);
        for issue in e.linked_issues.iter().take(YEAR_PROBLEMS) {
            c.problems.push(Problem {
                issue: chronicle_domain::IssueRef {
                    title: chronicle_domain::cap(&issue.title, PROBLEM_TITLE_CHARS),
                    ..issue.clone()
                },
                number: e.number,
                url: e.url.clone(),
                merged_at: e.merged_at.clone(),
                score,
            });
        }
    }
    if e.breaking {
        c.breaking.push(milestone("breaking", e));
    }
    // Renames and moves: PRs most of whose files here GitHub reports as renamed.
    let renamed = e
        .files
        .iter()
        .filter(|f| f.status.as_deref() == Some("renamed"))
        .count();
    if renamed >= MOVE_MIN_FILES && renamed * 2 >= e.files.len() {
        c.moves.push(Milestone {
            renamed: renamed as u64,
            ..milestone("moved", e)
        });
    }
    c
}

/// The candidates of two disjoint sets of entries, from theirs.
pub fn merge_candidates(a: Candidates, b: Candidates) -> Candidates {
    let first = [a.first, b.first]
        .into_iter()
        .flatten()
        .min_by_key(milestone_order);
    let mut notable: Vec<Milestone> = a.notable.into_iter().chain(b.notable).collect();
    // The most significant first; the lower number wins a tie.
    notable.sort_by(|x, y| rank(y).cmp(&rank(x)).then(x.number.cmp(&y.number)));
    notable.dedup_by_key(|m| m.number);
    notable.truncate(YEAR_NOTABLE);
    let mut breaking: Vec<Milestone> = a.breaking.into_iter().chain(b.breaking).collect();
    breaking.sort_by_key(milestone_order);
    breaking.truncate(YEAR_BREAKING);
    let mut moves: Vec<Milestone> = a.moves.into_iter().chain(b.moves).collect();
    moves.sort_by(|x, y| y.renamed.cmp(&x.renamed).then(x.number.cmp(&y.number)));
    moves.truncate(YEAR_MOVES);
    let decisions = best_decisions(a.decisions.into_iter().chain(b.decisions), YEAR_DECISIONS);
    let problems = best_problems(a.problems.into_iter().chain(b.problems), YEAR_PROBLEMS);
    Candidates {
        first,
        notable,
        breaking,
        moves,
        decisions,
        problems,
    }
}

/// The best `limit` quotes ([`decision_order`]), one per PR.
pub fn best_decisions(all: impl IntoIterator<Item = Decision>, limit: usize) -> Vec<Decision> {
    let mut decisions: Vec<Decision> = all.into_iter().collect();
    decisions.sort_by_key(|d| std::cmp::Reverse(decision_order(d)));
    decisions.dedup_by_key(|d| d.number);
    decisions.truncate(limit);
    decisions
}

/// The `limit` closed issues of the most significant PRs; an issue two PRs closed is the more
/// significant one's.
pub fn best_problems(all: impl IntoIterator<Item = Problem>, limit: usize) -> Vec<Problem> {
    let mut problems: Vec<Problem> = all.into_iter().collect();
    problems.sort_by(|x, y| {
        y.score
            .cmp(&x.score)
            .then(x.number.cmp(&y.number))
            .then(x.issue.url.cmp(&y.issue.url))
    });
    let mut seen = std::collections::HashSet::new();
    problems.retain(|p| seen.insert(p.issue.url.clone()));
    problems.truncate(limit);
    problems
}

/// The module's own PRs first, then reasons, then the most significant PR's; the lower number
/// wins a tie (as a key that sorts descending).
pub fn decision_order(d: &Decision) -> (bool, bool, u64, std::cmp::Reverse<u64>) {
    (
        !d.elsewhere,
        d.quote.reason,
        d.score,
        std::cmp::Reverse(d.number),
    )
}

/// The year's milestones, from its candidates: its first PR; its most significant PRs other
/// than the first; its first breaking changes; its biggest moves.
fn milestones(c: &Candidates) -> Vec<Milestone> {
    let mut out = Vec::new();
    let first_number = c.first.as_ref().map(|f| f.number);
    if let Some(first) = &c.first {
        out.push(first.clone());
    }
    // A breaking change or a move is named as such, not again among the significant.
    let named_otherwise = |n: u64| c.breaking.iter().chain(&c.moves).any(|m| m.number == n);
    out.extend(
        c.notable
            .iter()
            .filter(|m| Some(m.number) != first_number && !named_otherwise(m.number))
            .take(NOTABLE_SHOWN)
            .cloned(),
    );
    for m in c.breaking.iter().chain(&c.moves) {
        if !out.iter().any(|o| o.number == m.number) {
            out.push(m.clone());
        }
    }
    out
}

/// Whether a milestone is one of the year's significant PRs (`largest` on those kept before).
pub fn is_notable(m: &Milestone) -> bool {
    matches!(m.what.as_str(), "notable" | "largest")
}
