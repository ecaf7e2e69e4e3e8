//! The numbers a story may state: the module's figures, each tied to what it counts, and the
//! numbers of the PRs a sentence cites.
//!
//! A sentence's number is allowed when:
//! - the PRs it cites hold it (their titles, summaries, decisions and issues; not their dates);
//! - or it is one of the module's years ("In 2023 …");
//! - or it counts what the module's figures count, with that unit within three words: a year's
//!   pull requests ("57 pull requests"), a family of them ("15 features", "11 fixes", "3 new
//!   refactors"), all of them, or its years ("over 6 years"); or it counts the pull requests
//!   the sentence cites ("across 3 PRs (#4, #5, #6)");
//! - or, written inside a name (`OAuth2`, `S3`, `IPv6`, `HTTP/2`, `UTF-8`), any of the
//!   prompt's facts hold it: a name is a term, not a figure.
//!
//! So "took 3 attempts (#158)" is not excused by a year that had 3 fixes, nor "5 features" by
//! a year's 5 fixes.

use std::collections::{BTreeMap, BTreeSet};

/// What a count counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    PullRequests,
    Features,
    Fixes,
    Refactors,
    Docs,
    DependencyUpdates,
    Releases,
    Maintenance,
    Years,
}

impl Unit {
    /// The unit a word of a sentence names.
    fn of_word(word: &str) -> Option<Unit> {
        Some(match word.to_ascii_lowercase().as_str() {
            "pull" | "pr" | "prs" | "request" | "requests" | "change" | "changes" | "merge"
            | "merges" | "contribution" | "contributions" => Unit::PullRequests,
            "feature" | "features" => Unit::Features,
            "fix" | "fixes" | "bugfix" | "bugfixes" => Unit::Fixes,
            "refactor" | "refactors" | "refactoring" | "refactorings" => Unit::Refactors,
            "doc" | "docs" | "documentation" => Unit::Docs,
            "dependency" | "dependencies" | "update" | "updates" => Unit::DependencyUpdates,
            "release" | "releases" => Unit::Releases,
            "maintenance" => Unit::Maintenance,
            "year" | "years" => Unit::Years,
            _ => return None,
        })
    }

    /// The unit of a kind's family as the pages count it (`summary::kind::family`).
    fn of_family(family: &str) -> Option<Unit> {
        Some(match family {
            "features" => Unit::Features,
            "fixes" => Unit::Fixes,
            "refactors" => Unit::Refactors,
            "docs" => Unit::Docs,
            "dependency updates" => Unit::DependencyUpdates,
            "releases" => Unit::Releases,
            "maintenance" => Unit::Maintenance,
            _ => return None,
        })
    }
}

/// The module's figures as the prompt gives them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    years: BTreeSet<u64>,
    counts: BTreeMap<u64, BTreeSet<Unit>>,
    total: u64,
}

impl Figures {
    /// One year's line: its pull requests, and how many of each kind (the digest counts them
    /// by family, "features"; a kind, "feat", is read as its family).
    pub fn add_year(&mut self, year: u64, count: u64, kinds: &BTreeMap<String, u64>) {
        self.years.insert(year);
        self.count(count, Unit::PullRequests);
        self.total += count;
        let mut families: BTreeMap<Unit, u64> = BTreeMap::new();
        for (kind, n) in kinds {
            let unit =
                Unit::of_family(kind).or_else(|| Unit::of_family(crate::kind::family(Some(kind))));
            if let Some(unit) = unit {
                *families.entry(unit).or_default() += n;
            }
        }
        for (unit, n) in families {
            self.count(n, unit);
        }
    }

    fn count(&mut self, n: u64, unit: Unit) {
        self.counts.entry(n).or_default().insert(unit);
    }

    pub fn is_year(&self, n: u64) -> bool {
        self.years.contains(&n)
    }

    /// Whether `n` `unit` is one of the figures (a year's, all years' pull requests, the
    /// years'), or counts the `cited` pull requests.
    pub fn counts(&self, n: u64, unit: Unit, cited: usize) -> bool {
        match unit {
            Unit::Years => n == self.years.len() as u64,
            Unit::PullRequests if n == cited as u64 || n == self.total => true,
            _ => self
                .counts
                .get(&n)
                .is_some_and(|units| units.contains(&unit)),
        }
    }
}

/// A number a sentence states, and whether it is written inside a name (`OAuth2`, `UTF-8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stated {
    pub n: u64,
    pub in_name: bool,
    /// What it counts, when a unit follows it within three words.
    pub unit: Option<Unit>,
}

/// The numbers of a text (digits joined by `,`, `.` or `_` read as one, as the facts' are).
pub fn stated(text: &str) -> Vec<Stated> {
    static NUMBER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let number = NUMBER
        .get_or_init(|| regex::Regex::new(r"[0-9](?:[0-9]|[,._][0-9])*").expect("a valid pattern"));
    number
        .find_iter(text)
        .map(|m| {
            let before: Vec<char> = text[..m.start()].chars().rev().take(2).collect();
            let in_name = match before.as_slice() {
                [c, ..] if c.is_alphabetic() => true,
                ['-' | '/', c, ..] => c.is_alphabetic(),
                _ => false,
            };
            let digits: String = m.as_str().chars().filter(char::is_ascii_digit).collect();
            let unit = text[m.end()..]
                .split(|c: char| !(c.is_alphanumeric() || c == '-'))
                .filter(|w| !w.is_empty())
                .take(3)
                .find_map(Unit::of_word);
            Stated {
                // Past u64: kept as the largest, which no fact holds.
                n: digits.parse().unwrap_or(u64::MAX),
                in_name,
                // "5x", "10ms": the number's own suffix is no unit.
                unit: unit.filter(|_| !text[m.end()..].starts_with(|c: char| c.is_alphanumeric())),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> Figures {
        let mut f = Figures::default();
        f.add_year(
            2022,
            12,
            &[("feat".to_string(), 4), ("fix".to_string(), 3)].into(),
        );
        f.add_year(
            2023,
            5,
            &[
                ("refactor".to_string(), 2),
                ("perf".to_string(), 1),
                ("fix".to_string(), 2),
            ]
            .into(),
        );
        f
    }

    fn unit(text: &str) -> Vec<(u64, Option<Unit>, bool)> {
        stated(text)
            .into_iter()
            .map(|s| (s.n, s.unit, s.in_name))
            .collect()
    }

    #[test]
    fn counts_are_tied_to_what_they_count() {
        let f = figures();
        assert!(f.is_year(2022) && !f.is_year(2024));
        assert!(f.counts(12, Unit::PullRequests, 0));
        assert!(f.counts(17, Unit::PullRequests, 0), "all of them");
        assert!(f.counts(4, Unit::Features, 0));
        assert!(
            f.counts(3, Unit::Refactors, 0),
            "refactor and perf are one family"
        );
        assert!(
            !f.counts(3, Unit::Features, 0),
            "3 were fixes, not features"
        );
        assert!(f.counts(2, Unit::Years, 0));
        assert!(
            f.counts(3, Unit::PullRequests, 3),
            "the PRs the sentence cites"
        );
        assert!(!f.counts(3, Unit::PullRequests, 2));
    }

    #[test]
    fn a_number_reads_its_unit_and_whether_it_is_in_a_name() {
        assert_eq!(
            unit("In 2022 it had 12 pull requests: 4 new features."),
            [
                (2022, None, false),
                (12, Some(Unit::PullRequests), false),
                (4, Some(Unit::Features), false)
            ]
        );
        assert_eq!(
            unit("The fix took 3 attempts to get right."),
            [(3, None, false)]
        );
        assert_eq!(
            unit("It is 5x faster on 2 cores."),
            [(5, None, false), (2, None, false)]
        );
        assert_eq!(
            unit("OAuth2 over HTTP/2, UTF-8 and S3."),
            [
                (2, None, true),
                (2, None, true),
                (8, None, true),
                (3, None, true)
            ]
        );
        assert_eq!(unit("1,200 notable merged pull requests")[0].0, 1200);
        assert_eq!(
            unit("1,200 notable merged pull requests")[0].1,
            Some(Unit::PullRequests)
        );
    }
}
