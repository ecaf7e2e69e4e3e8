//! What the overview keeps of one year of a module's entries, stored on the page item. The
//! types only: how a digest is made, merged and read is `pages::overview`'s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One author's changes to the module in one year.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorActivity {
    pub login: String,
    /// PRs they authored.
    pub count: u64,
    /// Lines added and deleted in the module's files.
    pub churn: u64,
    /// Their latest merge (or review of one) in the year.
    pub last: String,
    /// PRs of others they approved or asked changes of.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reviews: u64,
}

/// One file's changes in one year.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileActivity {
    pub path: String,
    pub count: u64,
    pub churn: u64,
    pub last: String,
}

/// A PR worth naming in the module's story.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Milestone {
    /// `first` (the year's first PR), `notable` (one of its most significant PRs; `largest`
    /// on digests kept before), `breaking`, `moved`.
    pub what: String,
    pub number: u64,
    pub title: String,
    pub url: String,
    pub merged_at: String,
    /// What ranks it among the candidates (a feature; its changed lines in the module; its
    /// renamed files; its significance, 0 on digests kept before it was measured).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub feature: bool,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub churn: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub renamed: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub score: u64,
    /// Its one-line summary (bounded), shown beside a significant PR.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A sentence quoted from a significant PR's body, for the module's "Key decisions".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub number: u64,
    pub url: String,
    pub merged_at: String,
    pub quote: crate::Quote,
    /// The PR's significance in the module (`pages::milestones::significance`).
    pub score: u64,
    /// The PR mostly changed other modules: quoted only when the module's own say too little.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub elsewhere: bool,
}

/// An issue a significant PR closed: a problem the module solved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub issue: crate::IssueRef,
    /// The PR that closed it.
    pub number: u64,
    pub url: String,
    pub merged_at: String,
    pub score: u64,
}

/// The PRs that may be a year's milestones, kept so that the digest of more entries is the
/// merge of digests: its first, its most significant few, its two earliest breaking changes
/// and its two biggest moves. The milestones are chosen from them exactly as from all
/// of the year's entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<Milestone>,
    /// Kept under the name it had when only the largest changes were candidates.
    #[serde(default, rename = "largest", skip_serializing_if = "Vec::is_empty")]
    pub notable: Vec<Milestone>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaking: Vec<Milestone>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<Milestone>,
    /// The why of its most significant PRs, in their own words (reasons first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Decision>,
    /// The issues its most significant PRs closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
}

/// What the overview needs of one year of entries. Digests merge (`pages::overview::merge`): the digest of a
/// year is kept up to date from the entries that change it, without reading the year again.
/// Counts and milestones merge exactly; authors and files are bounded top lists, so after many
/// merges their tail may differ from a full read's (the next full read makes them exact).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct YearDigest {
    /// Family (`kind::family`) → entries.
    #[serde(default)]
    pub kinds: BTreeMap<String, u64>,
    #[serde(default)]
    pub authors: Vec<AuthorActivity>,
    #[serde(default)]
    pub files: Vec<FileActivity>,
    /// What the year's milestones are chosen from (`pages::overview::year_milestones`).
    #[serde(default)]
    pub candidates: Candidates,
}
