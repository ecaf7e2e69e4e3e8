//! The why of a module, in its PRs' own words: "Key decisions" (sentences quoted verbatim from
//! the bodies of its most significant PRs, reasons first) and "Problems it solved" (the issues
//! those PRs closed). Each is linked to its PR and dated. Deterministic: the quotes were chosen
//! when the PR was summarized (`summary::decision`), and each year's digest keeps the best few.

use std::collections::BTreeMap;

use chronicle_domain::{Decision, Problem, YearStats};

use super::milestones::{best_decisions, best_problems};
use super::wording::date;
use super::{Block, Span};

/// Quotes shown under "Key decisions".
pub const DECISIONS_SHOWN: usize = 5;
/// Closed issues shown under "Problems it solved".
pub const PROBLEMS_SHOWN: usize = 5;

/// The module's key decisions: the best [`DECISIONS_SHOWN`] over all years (reasons first, then
/// the most significant PRs), oldest first, so they read as a history.
pub fn key_decisions(years: &BTreeMap<String, YearStats>) -> Vec<Decision> {
    let all = years
        .values()
        .flat_map(|y| y.digest.candidates.decisions.iter().cloned());
    let mut shown = best_decisions(all, DECISIONS_SHOWN);
    shown.sort_by(|a, b| a.merged_at.cmp(&b.merged_at).then(a.number.cmp(&b.number)));
    shown
}

/// The issues the module's most significant PRs closed, newest first.
pub fn problems_solved(years: &BTreeMap<String, YearStats>) -> Vec<Problem> {
    let all = years
        .values()
        .flat_map(|y| y.digest.candidates.problems.iter().cloned());
    let mut shown = best_problems(all, PROBLEMS_SHOWN);
    shown.sort_by(|a, b| b.merged_at.cmp(&a.merged_at).then(a.number.cmp(&b.number)));
    shown
}

/// "Key decisions:" and its quotes, one bullet each: “…” (#N, date).
pub fn key_decisions_blocks(years: &BTreeMap<String, YearStats>, blocks: &mut Vec<Block>) {
    let decisions = key_decisions(years);
    if decisions.is_empty() {
        return;
    }
    blocks.push(Block::Paragraph(vec![
        Span::bold("Key decisions"),
        Span::text(" (in the words of their pull requests):"),
    ]));
    for d in decisions {
        let mut spans = vec![Span::text("“")];
        spans.extend(super::blocks::inline_spans(&d.quote.text));
        spans.push(Span::text("” ("));
        spans.push(Span::link(format!("#{}", d.number), &d.url));
        spans.push(Span::text(format!(", {})", date(&d.merged_at))));
        blocks.push(Block::Bullet(spans));
    }
}

/// "Problems it solved:" the closed issues, each with the PR that closed it.
pub fn problems_blocks(years: &BTreeMap<String, YearStats>, blocks: &mut Vec<Block>) {
    let problems = problems_solved(years);
    if problems.is_empty() {
        return;
    }
    let mut spans = vec![Span::bold("Problems it solved:"), Span::text(" ")];
    for (i, p) in problems.iter().enumerate() {
        if i > 0 {
            spans.push(Span::text("; "));
        }
        spans.push(Span::text(format!(
            "“{}” (",
            chronicle_summary::collapse_whitespace(&p.issue.title)
        )));
        spans.push(Span::link(format!("#{}", p.issue.number), &p.issue.url));
        spans.push(Span::text(", closed by "));
        spans.push(Span::link(format!("#{}", p.number), &p.url));
        spans.push(Span::text(format!(", {})", date(&p.merged_at))));
    }
    spans.push(Span::text("."));
    blocks.push(Block::Paragraph(spans));
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_domain::{IssueRef, Quote, YearDigest};

    fn decision(number: u64, at: &str, text: &str, reason: bool, score: u64) -> Decision {
        Decision {
            number,
            url: format!("https://github.com/acme/w/pull/{number}"),
            merged_at: at.into(),
            quote: Quote {
                text: text.into(),
                reason,
            },
            score,
            elsewhere: false,
        }
    }

    fn years(decisions: Vec<Decision>, problems: Vec<Problem>) -> BTreeMap<String, YearStats> {
        let mut digest = YearDigest::default();
        digest.candidates.decisions = decisions;
        digest.candidates.problems = problems;
        [(
            "2024".to_string(),
            YearStats {
                digest,
                ..Default::default()
            },
        )]
        .into()
    }

    /// Reasons win a place over more significant PRs without one; the five shown read oldest
    /// first; a quote's Markdown is inline text, never a link or a block.
    #[test]
    fn reasons_first_shown_as_a_history_and_hostile_text_stays_text() {
        let mut all: Vec<Decision> = (1..=6)
            .map(|n| {
                decision(
                    n,
                    &format!("2024-0{n}-01T00:00:00Z"),
                    "Plain sentence.",
                    false,
                    100 + n,
                )
            })
            .collect();
        all.push(decision(
            7,
            "2024-07-01T00:00:00Z",
            "We chose \\[this\\]\\(javascript:alert(1)\\) because `a.b()` was slow.",
            true,
            1,
        ));
        let shown: Vec<u64> = key_decisions(&years(all.clone(), vec![]))
            .iter()
            .map(|d| d.number)
            .collect();
        assert_eq!(shown, [3, 4, 5, 6, 7]);
        let mut blocks = Vec::new();
        key_decisions_blocks(&years(all, vec![]), &mut blocks);
        let md = crate::render::commonmark(&crate::Document {
            key: crate::DocKey::Index {
                repo: "acme/w".into(),
            },
            title: "t".into(),
            parent: None,
            blocks,
        });
        assert!(md.contains("**Key decisions**"), "{md}");
        assert!(
            md.contains(
                "because `a.b()` was slow.” ([#7](https://github.com/acme/w/pull/7), 2024-07-01)"
            ),
            "{md}"
        );
        assert!(
            md.contains(r"\[this\](javascript:"),
            "escaped, not a link: {md}"
        );
    }

    #[test]
    fn problems_are_the_closed_issues_of_the_most_significant_prs() {
        let problem = |issue: u64, pr: u64, score: u64| Problem {
            issue: IssueRef {
                number: issue,
                title: format!("Listing times out ({issue})"),
                state: "CLOSED".into(),
                url: format!("https://github.com/acme/w/issues/{issue}"),
            },
            number: pr,
            url: format!("https://github.com/acme/w/pull/{pr}"),
            merged_at: format!("2024-01-{:02}T00:00:00Z", pr),
            score,
        };
        let shown: Vec<(u64, u64)> = problems_solved(&years(
            vec![],
            vec![
                problem(1, 10, 50),
                problem(1, 11, 90),
                problem(2, 12, 10),
                problem(3, 13, 70),
            ],
        ))
        .iter()
        .map(|p| (p.issue.number, p.number))
        .collect();
        // Newest first; issue 1 is the more significant PR's.
        assert_eq!(shown, [(3, 13), (2, 12), (1, 11)]);
    }
}
