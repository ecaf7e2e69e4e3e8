//! The numbers a story may state: the module's figures, each tied to what it counts, and the
//! numbers of the PRs a sentence cites.
//!
//! A sentence's number is allowed when:
//! - the PRs it cites hold it (their titles, summaries, decisions and issues; not their dates);
//! - or it is one of the module's years ("In 2023 …");
//! - or it counts what the module's figures count, with that unit within three words (before
//!   any other number or the clause's end): a year's pull requests ("57 pull requests"), a
//!   family of them ("15 features", "11 fixes", "3 new refactors", "5 other changes"), all of
//!   them, or its years ("over 6 years"), and of the year the sentence names if it names one;
//!   or it counts the pull requests the sentence cites ("across 3 PRs (#4, #5, #6)");
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
    OtherChanges,
    Years,
}

impl Unit {
    /// The unit a word of a sentence names (`after`: the word before it, for "other changes",
    /// "dependency updates").
    fn of_word(word: &str, after: Option<&str>) -> Option<Unit> {
        let word = word.to_ascii_lowercase();
        let after = after.map(str::to_ascii_lowercase);
        Some(match (word.as_str(), after.as_deref()) {
            ("changes" | "change", Some("other")) => Unit::OtherChanges,
            ("updates" | "update", Some("dependency")) => Unit::DependencyUpdates,
            ("pull" | "pr" | "prs" | "pull-requests" | "merges" | "contributions", _) => {
                Unit::PullRequests
            }
            ("feature" | "features", _) => Unit::Features,
            ("fix" | "fixes" | "bugfix" | "bugfixes" | "bug" | "bugs", _) => Unit::Fixes,
            ("refactor" | "refactors" | "refactoring" | "refactorings", _) => Unit::Refactors,
            ("doc" | "docs" | "documentation", _) => Unit::Docs,
            ("release" | "releases", _) => Unit::Releases,
            ("maintenance", _) => Unit::Maintenance,
            ("year" | "years", _) => Unit::Years,
            _ => return None,
        })
    }

    /// The unit of a family as the digests count them (`summary::kind::family`).
    fn of_family(family: &str) -> Option<Unit> {
        Some(match family {
            "features" => Unit::Features,
            "fixes" => Unit::Fixes,
            "refactors" => Unit::Refactors,
            "docs" => Unit::Docs,
            "dependency updates" => Unit::DependencyUpdates,
            "releases" => Unit::Releases,
            "maintenance" => Unit::Maintenance,
            "other changes" => Unit::OtherChanges,
            _ => return None,
        })
    }
}

/// The module's figures as the prompt gives them: per year, each count and what it counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    years: BTreeMap<u64, BTreeMap<u64, BTreeSet<Unit>>>,
    total: u64,
}

impl Figures {
    /// One year's line: its pull requests, and how many of each family (the digests count
    /// them by family, "features"; a kind, "feat", is read as its family).
    pub fn add_year(&mut self, year: u64, count: u64, kinds: &BTreeMap<String, u64>) {
        let counts = self.years.entry(year).or_default();
        counts.entry(count).or_default().insert(Unit::PullRequests);
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
            counts.entry(n).or_default().insert(unit);
        }
    }

    pub fn is_year(&self, n: u64) -> bool {
        self.years.contains_key(&n)
    }

    /// Whether `n` `unit` is one of the figures: of the years the sentence names (`named`),
    /// else of any year; or all years' pull requests, the years (how many, or the span they
    /// cover); or the `cited` pull requests.
    pub fn counts(&self, n: u64, unit: Unit, cited: usize, named: &[u64]) -> bool {
        let span = match (self.years.keys().next(), self.years.keys().next_back()) {
            (Some(first), Some(last)) => last - first + 1,
            _ => 0,
        };
        match unit {
            Unit::Years => n == self.years.len() as u64 || n == span,
            Unit::PullRequests if n == cited as u64 || (named.is_empty() && n == self.total) => {
                true
            }
            _ => self
                .years
                .iter()
                .filter(|(year, _)| named.is_empty() || named.contains(year))
                .any(|(_, counts)| counts.get(&n).is_some_and(|units| units.contains(&unit))),
        }
    }
}

/// A number a sentence states, and whether it is written inside a name (`OAuth2`, `UTF-8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stated {
    pub n: u64,
    pub in_name: bool,
    /// What it counts: a unit within the three words after it, before any other number or
    /// `,` `;` `:` `.` `(`.
    pub unit: Option<Unit>,
}

/// A number as written: digits joined by `,`, `.` or `_` are one number, read without them
/// (`1,000` is 1000, `9.5` is 95), so a grouped or decimal figure is checked whole, the same
/// way in a story and in its facts.
fn number_pattern() -> &'static regex::Regex {
    static NUMBER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    NUMBER
        .get_or_init(|| regex::Regex::new(r"[0-9](?:[0-9]|[,._][0-9])*").expect("a valid pattern"))
}

/// A number's value (past u64: kept as the largest, which no fact holds).
fn value(written: &str) -> u64 {
    let digits: String = written.chars().filter(char::is_ascii_digit).collect();
    digits.parse().unwrap_or(u64::MAX)
}

/// The numbers a fact holds.
pub fn numbers(text: &str) -> BTreeSet<u64> {
    number_pattern()
        .find_iter(text)
        .map(|m| value(m.as_str()))
        .collect()
}

/// The numbers a sentence states, each with what it counts and whether it is inside a name.
pub fn stated(text: &str) -> Vec<Stated> {
    number_pattern()
        .find_iter(text)
        .map(|m| {
            let before: Vec<char> = text[..m.start()].chars().rev().take(2).collect();
            let in_name = match before.as_slice() {
                [c, ..] if c.is_alphabetic() => true,
                ['-' | '/', c, ..] => c.is_alphabetic(),
                _ => false,
            };
            let rest = &text[m.end()..];
            // "5x", "10ms": a suffix of the number's own is no unit.
            let unit = if rest.starts_with(|c: char| c.is_alphanumeric()) {
                None
            } else {
                unit_after(rest)
            };
            Stated {
                n: value(m.as_str()),
                in_name,
                unit,
            }
        })
        .collect()
}

/// The unit among the first three words of `rest`, before a number or a clause's end.
fn unit_after(rest: &str) -> Option<Unit> {
    let clause = rest
        .split([',', ';', ':', '.', '(', ')'])
        .next()
        .unwrap_or_default();
    let words: Vec<&str> = clause
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .filter(|w| !w.is_empty())
        .take_while(|w| !w.starts_with(|c: char| c.is_ascii_digit()))
        .take(3)
        .collect();
    words.iter().enumerate().find_map(|(i, w)| {
        let before = i.checked_sub(1).map(|j| words[j]);
        Unit::of_word(w, before)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two years, as the digests count them: by family.
    fn figures() -> Figures {
        let mut f = Figures::default();
        let families = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
        };
        f.add_year(
            2022,
            12,
            &families(&[("features", 4), ("fixes", 3), ("other changes", 5)]),
        );
        f.add_year(2024, 5, &families(&[("refactors", 3), ("fixes", 2)]));
        f
    }

    fn read(text: &str) -> Vec<(u64, Option<Unit>, bool)> {
        stated(text)
            .into_iter()
            .map(|s| (s.n, s.unit, s.in_name))
            .collect()
    }

    #[test]
    fn counts_are_tied_to_what_they_count_and_to_their_year() {
        let f = figures();
        assert!(f.is_year(2022) && !f.is_year(2023));
        assert!(f.counts(12, Unit::PullRequests, 0, &[]));
        assert!(f.counts(17, Unit::PullRequests, 0, &[]), "all of them");
        assert!(f.counts(4, Unit::Features, 0, &[2022]));
        assert!(!f.counts(4, Unit::Features, 0, &[2024]), "not that year's");
        assert!(
            !f.counts(3, Unit::Features, 0, &[]),
            "3 were fixes, not features"
        );
        assert!(f.counts(5, Unit::OtherChanges, 0, &[]));
        assert!(f.counts(2, Unit::Years, 0, &[]), "two years had PRs");
        assert!(
            f.counts(3, Unit::Years, 0, &[]),
            "over three years, 2022 to 2024"
        );
        assert!(
            f.counts(3, Unit::PullRequests, 3, &[2024]),
            "the PRs it cites"
        );
        assert!(!f.counts(3, Unit::PullRequests, 2, &[]));
    }

    #[test]
    fn a_number_reads_its_own_unit_and_whether_it_is_in_a_name() {
        assert_eq!(
            read("In 2022 it had 12 pull requests: 4 new features."),
            [
                (2022, None, false),
                (12, Some(Unit::PullRequests), false),
                (4, Some(Unit::Features), false)
            ]
        );
        assert_eq!(
            read("The fix took 3 attempts to get right."),
            [(3, None, false)]
        );
        assert_eq!(
            read("After 2 attempts, 4 fixes landed."),
            [(2, None, false), (4, Some(Unit::Fixes), false)],
            "a unit is not borrowed across a comma or another number"
        );
        assert_eq!(
            read("3 of the 15 features"),
            [(3, None, false), (15, Some(Unit::Features), false)]
        );
        assert_eq!(read("3 other changes")[0].1, Some(Unit::OtherChanges));
        assert_eq!(read("3 changes")[0].1, None, "a bare change counts nothing");
        assert_eq!(read("11 bugs fixed")[0].1, Some(Unit::Fixes));
        assert_eq!(
            read("It is 5x faster on 2 cores."),
            [(5, None, false), (2, None, false)]
        );
        assert_eq!(
            read("OAuth2 over HTTP/2, UTF-8 and S3."),
            [
                (2, None, true),
                (2, None, true),
                (8, None, true),
                (3, None, true)
            ]
        );
        assert_eq!(
            read("1,200 notable merged pull requests")[0],
            (1200, Some(Unit::PullRequests), false)
        );
    }
}
