//! "Who knows it": the people who changed and reviewed a module, recently weighted, its
//! CODEOWNERS, and a knowledge-risk line after CodeScene's knowledge islands (one person made
//! most of its recent changes, or nobody who knows it has been active in it lately).

use std::collections::BTreeMap;

use time::{Duration, OffsetDateTime};

use super::recency::decay;
use super::wording::date;
use super::{Block, Span};
use chronicle_domain::{parse_rfc3339, ModuleEntry, YearStats};
use chronicle_summary::kind;

pub const EXPERTS_SHOWN: usize = 5;
/// An expert's weight halves every this many days without a change.
const EXPERT_HALF_LIFE_DAYS: f64 = 180.0;
/// A review weighs this much of an authored PR: reviewers know the code, authors more.
const REVIEW_WEIGHT: f64 = 0.5;
/// Knowledge risk: one person made more than this share of the last year's changes…
const ISLAND_SHARE: f64 = 0.6;
/// …of at least this many changes (two of three PRs is no island).
const ISLAND_MIN_CHANGES: usize = 5;
/// Knowledge risk: nobody who knows it has been active in it for this long.
const ABSENT_DAYS: i64 = 180;

/// One person who knows the module.
#[derive(Debug, Clone, PartialEq)]
pub struct Expert {
    pub login: String,
    pub weight: f64,
    /// Their latest change or review of it.
    pub last: String,
    pub prs: u64,
    pub reviews: u64,
}

/// Recent experts: each year's PRs and reviews weigh by how long ago the person last changed or
/// reviewed the module that year (half-life [`EXPERT_HALF_LIFE_DAYS`]); a PR by its size, a
/// review by [`REVIEW_WEIGHT`]. Bots never count.
pub fn experts(years: &BTreeMap<String, YearStats>, now: OffsetDateTime) -> Vec<Expert> {
    let mut by_login: BTreeMap<&str, Expert> = BTreeMap::new();
    for y in years.values() {
        for a in &y.digest.authors {
            if kind::is_bot(&a.login) {
                continue;
            }
            let size = 1.0 + ((1 + a.churn) as f64).ln() / 10.0;
            let w = (a.count as f64 * size + a.reviews as f64 * REVIEW_WEIGHT)
                * decay(&a.last, now, EXPERT_HALF_LIFE_DAYS);
            let e = by_login.entry(a.login.as_str()).or_insert_with(|| Expert {
                login: a.login.clone(),
                weight: 0.0,
                last: String::new(),
                prs: 0,
                reviews: 0,
            });
            e.weight += w;
            e.last = e.last.clone().max(a.last.clone());
            e.prs += a.count;
            e.reviews += a.reviews;
        }
    }
    let mut out: Vec<Expert> = by_login.into_values().collect();
    out.sort_by(|a, b| b.weight.total_cmp(&a.weight).then(a.login.cmp(&b.login)));
    out.truncate(EXPERTS_SHOWN);
    out
}

fn describe(e: &Expert) -> String {
    let mut counts = Vec::new();
    if e.prs > 0 {
        counts.push(super::wording::count_of(e.prs, "PR"));
    }
    if e.reviews > 0 {
        counts.push(super::wording::count_of(e.reviews, "review"));
    }
    format!(
        "@{} ({}; last active {})",
        e.login,
        counts.join(", "),
        date(&e.last)
    )
}

/// "Who knows it:" who changed and reviewed it most, recently weighted, and its CODEOWNERS
/// (`owners`); then the knowledge risk, if there is one. `recent`: the page's newest entries.
pub fn who_knows_it(
    years: &BTreeMap<String, YearStats>,
    recent: &[ModuleEntry],
    now: OffsetDateTime,
    owners: &[String],
    blocks: &mut Vec<Block>,
) {
    let experts = experts(years, now);
    if !experts.is_empty() || !owners.is_empty() {
        let mut text = experts.iter().map(describe).collect::<Vec<_>>().join(", ");
        if !owners.is_empty() {
            if !text.is_empty() {
                text.push_str("; ");
            }
            text.push_str(&format!("owners in CODEOWNERS: {}", owners.join(", ")));
        }
        blocks.push(Block::Paragraph(vec![
            Span::bold("Who knows it:"),
            Span::text(" "),
            Span::text(format!("{text}.")),
        ]));
    }
    if let Some(risk) = knowledge_risk(recent, now, &experts) {
        blocks.push(Block::Paragraph(vec![
            Span::bold("Knowledge risk:"),
            Span::text(format!(" {risk}")),
        ]));
    }
}

/// When one person made more than [`ISLAND_SHARE`] of the last year's changes (the page's
/// newest entries, dependency and release updates and bots left out), or when nobody who knows
/// the module has changed or reviewed it for [`ABSENT_DAYS`] days.
pub fn knowledge_risk(
    recent: &[ModuleEntry],
    now: OffsetDateTime,
    experts: &[Expert],
) -> Option<String> {
    let year_ago = now - Duration::days(365);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut changes = 0;
    for e in recent.iter().filter(|e| {
        !kind::is_folded(e.kind.as_deref())
            && !kind::is_bot(&e.author)
            && parse_rfc3339(&e.merged_at).is_some_and(|t| t >= year_ago)
    }) {
        *counts.entry(e.author.as_str()).or_default() += 1;
        changes += 1;
    }
    let top = counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)));
    if let Some((login, n)) = top.filter(|_| changes >= ISLAND_MIN_CHANGES) {
        if *n as f64 > ISLAND_SHARE * changes as f64 {
            return Some(format!(
                "@{login} made {n} of its {changes} changes in the last year ({}%); few others know it.",
                n * 100 / changes
            ));
        }
    }
    let absent = now - Duration::days(ABSENT_DAYS);
    let latest = experts.iter().map(|e| e.last.as_str()).max()?;
    if parse_rfc3339(latest).is_some_and(|t| t < absent) {
        return Some(format!(
            "nobody who knows it has changed or reviewed it in the last {ABSENT_DAYS} days (the latest on {}).",
            date(latest)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_domain::{AuthorActivity, YearDigest};

    fn years(authors: Vec<AuthorActivity>) -> BTreeMap<String, YearStats> {
        [(
            "2024".to_string(),
            YearStats {
                digest: YearDigest {
                    authors,
                    ..Default::default()
                },
                ..Default::default()
            },
        )]
        .into()
    }

    fn person(login: &str, count: u64, reviews: u64, last: &str) -> AuthorActivity {
        AuthorActivity {
            login: login.into(),
            count,
            churn: 0,
            last: last.into(),
            reviews,
        }
    }

    /// A reviewer counts, below an author: two reviews weigh one PR.
    #[test]
    fn reviewers_count_below_authors() {
        let at = "2024-06-01T00:00:00Z";
        let years = years(vec![
            person("author", 4, 0, at),
            person("reviewer", 0, 7, at),
            person("both", 2, 4, at),
            person("bot[bot]", 50, 50, at),
        ]);
        let now = parse_rfc3339("2024-06-02T00:00:00Z").unwrap();
        let shown: Vec<(String, u64, u64)> = experts(&years, now)
            .into_iter()
            .map(|e| (e.login, e.prs, e.reviews))
            .collect();
        assert_eq!(
            shown,
            [
                ("author".to_string(), 4, 0),
                ("both".to_string(), 2, 4),
                ("reviewer".to_string(), 0, 7),
            ]
        );
        let e = &experts(&years, now)[1];
        assert_eq!(
            describe(e),
            "@both (2 PRs, 4 reviews; last active 2024-06-01)"
        );
    }

    fn entry(number: u64, author: &str, at: &str) -> ModuleEntry {
        let mut e = crate::content::sample::entry(number, at, author);
        e.kind = Some("feat".into());
        e
    }

    #[test]
    fn a_knowledge_island_and_an_absent_team_are_risks() {
        let at = |d: u32| format!("2024-05-{d:02}T00:00:00Z");
        let recent: Vec<ModuleEntry> = (1..=10)
            .map(|n| entry(n, if n <= 7 { "alice" } else { "bob" }, &at(n as u32)))
            .collect();
        let people = years(vec![
            person("alice", 7, 0, &at(7)),
            person("bob", 3, 0, &at(10)),
        ]);
        let now = "2024-06-01T00:00:00Z";
        let experts_now = experts(&people, parse_rfc3339(now).unwrap());
        assert_eq!(
            knowledge_risk(&recent, parse_rfc3339(now).unwrap(), &experts_now).as_deref(),
            Some("@alice made 7 of its 10 changes in the last year (70%); few others know it.")
        );
        // Six of ten is no island; and the team was active within 180 days.
        let shared: Vec<ModuleEntry> = (1..=10)
            .map(|n| entry(n, if n <= 6 { "alice" } else { "bob" }, &at(n as u32)))
            .collect();
        assert_eq!(
            knowledge_risk(&shared, parse_rfc3339(now).unwrap(), &experts_now),
            None
        );
        // A year later nobody who knows it has been back.
        let later = "2025-05-01T00:00:00Z";
        let experts_later = experts(&people, parse_rfc3339(later).unwrap());
        assert_eq!(
            knowledge_risk(&shared, parse_rfc3339(later).unwrap(), &experts_later).as_deref(),
            Some("nobody who knows it has changed or reviewed it in the last 180 days (the latest on 2024-05-10).")
        );
    }
}
