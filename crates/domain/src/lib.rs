//! Chronicle's domain types: what a merged pull request is once GitHub's payload has been read,
//! and the rows, entries, page items and module names built from it.
//!
//! Pure: no I/O, no clients, no configuration. Every other crate depends on this one, and it
//! depends on none of them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

pub mod context;
mod digest;
pub mod error;
pub mod hook;
pub mod message;
mod module_name;
mod text;
pub use digest::{
    AuthorActivity, Candidates, Decision, FileActivity, Milestone, Problem, YearDigest,
};
pub use module_name::{
    has_hash_suffix, is_invisible, short_hash, with_hash_suffix, InvalidModuleName, ModuleName,
    MODULE_NAME_MAX_BYTES,
};
pub use text::cap;

use time::format_description::FormatItem;
use time::macros::format_description;
use time::OffsetDateTime;

/// A repository's `owner/name`, the partition key of the PR table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoName(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("repository name {0:?} is not of the form owner/name")]
pub struct InvalidRepoName(pub String);

impl RepoName {
    pub fn parse(full_name: &str) -> Result<Self, InvalidRepoName> {
        match full_name.split_once('/') {
            Some((owner, name)) if !owner.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(RepoName(full_name.to_string()))
            }
            _ => Err(InvalidRepoName(full_name.to_string())),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn owner(&self) -> &str {
        self.0.split_once('/').map(|(o, _)| o).unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.0.split_once('/').map(|(_, n)| n).unwrap_or_default()
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a PR's linked issues may be looked up. The token reads what its owner can, but a PR
/// body is written by anyone who opens a PR: `Fixes other-org/private#42` must not make the
/// service fetch, and a page publish, another organisation's private issue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IssueScope {
    /// Only the PR's own repository (the default).
    #[default]
    Repository,
    /// Any repository of the PR's owner (an organisation that tracks issues in another repo).
    Owner,
}

impl IssueScope {
    /// `repository` or `owner` (`LINKED_ISSUES_SCOPE`).
    pub fn parse(value: &str) -> Option<IssueScope> {
        match value.trim().to_ascii_lowercase().as_str() {
            "repository" | "repo" => Some(IssueScope::Repository),
            "owner" => Some(IssueScope::Owner),
            _ => None,
        }
    }

    /// Whether an issue of `issue_repo` may be linked from a PR of `pr_repo` (GitHub compares
    /// names ASCII case-insensitively).
    pub fn allows(self, pr_repo: &RepoName, issue_repo: &RepoName) -> bool {
        match self {
            IssueScope::Repository => pr_repo.as_str().eq_ignore_ascii_case(issue_repo.as_str()),
            IssueScope::Owner => pr_repo.owner().eq_ignore_ascii_case(issue_repo.owner()),
        }
    }
}

/// A pull request that was merged, with the fields the pipeline needs (not the raw payload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergedPullRequest {
    pub repo: RepoName,
    pub number: u64,
    pub title: String,
    /// `None` when GitHub sent `"body": null`.
    pub body: Option<String>,
    pub author: String,
    pub labels: Vec<String>,
    pub url: String,
    pub base_ref: String,
    pub merge_commit_sha: String,
    pub merged_at: OffsetDateTime,
    /// `pull_request.updated_at`: orders deliveries, so an older event never overwrites a newer one.
    pub source_updated_at: OffsetDateTime,
    /// The GitHub App installation that delivered it (`installation.id`, signed with the rest
    /// of the delivery): enrichment mints that installation's token without asking GitHub
    /// which installation the repository has. `None`: a repository webhook, or backfill.
    pub installation: Option<u64>,
}

/// How one delivery reached us.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// `X-GitHub-Delivery`, the GUID GitHub keeps across redeliveries.
    pub id: String,
    pub received_at: OffsetDateTime,
}

const SECONDS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
const MILLIS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// RFC 3339 in UTC with whole seconds (`2019-05-15T15:20:33Z`), GitHub's own form. A fixed width
/// makes the strings order like the instants, which the conditional writes rely on.
pub fn rfc3339_seconds(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(SECONDS)
        .expect("a UTC timestamp always formats")
}

/// RFC 3339 in UTC with milliseconds, for the times Chronicle itself records.
pub fn rfc3339_millis(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(MILLIS)
        .expect("a UTC timestamp always formats")
}

/// One file a PR changed, with its line counts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    pub path: String,
    #[serde(default)]
    pub additions: u64,
    #[serde(default)]
    pub deletions: u64,
    /// GitHub's change type (`added`, `modified`, `removed`, `renamed`); unknown on rows
    /// enriched before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl FileChange {
    pub fn churn(&self) -> u64 {
        self.additions + self.deletions
    }
}

/// An issue a PR closes, as the page links it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueRef {
    #[serde(default)]
    pub number: u64,
    pub title: String,
    pub state: String,
    pub url: String,
}

/// A sentence quoted verbatim from a PR's body: the why of a change, in its own words.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quote {
    pub text: String,
    /// It gives a reason or a choice ("because", "instead of", under a "Why" heading…); else it
    /// is only the body's most informative sentence.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reason: bool,
}

/// The module (and directory count) of files at the repository root.
pub const ROOT_DIRECTORY: &str = "(root)";

/// Whether `login` can be a GitHub login: letters, digits and hyphens (and the `_shortcode`
/// of an enterprise's managed users), at most 39 characters before an app's `[bot]`. Anything
/// else named as a person (by a proxy, a stand-in) is not shown on a page.
pub fn is_github_login(login: &str) -> bool {
    let name = login.strip_suffix("[bot]").unwrap_or(login);
    !name.is_empty()
        && name.len() <= 39
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A path's top-level directory (`src/a/b.rs` → `src`), [`ROOT_DIRECTORY`] for a file at the
/// root.
pub fn top_level_directory(path: &str) -> &str {
    match path.split_once('/') {
        Some((dir, _)) if !dir.is_empty() => dir,
        _ => ROOT_DIRECTORY,
    }
}

/// Whether an issue's URL (`https://HOST/OWNER/REPO/issues/N`) is one of `owner`'s.
pub fn issue_of_owner(url: &str, owner: &str) -> bool {
    url.split_once("://")
        .and_then(|(_, rest)| rest.split('/').nth(1))
        .is_some_and(|o| !owner.is_empty() && o.eq_ignore_ascii_case(owner))
}

/// How many of a PR's files fall in one other module.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleCount {
    pub module: ModuleName,
    pub files: u64,
}

/// One PR's entry on one module's page: everything the page needs to show it, and nothing
/// else (no raw body, no other module's files). Written once per (PR, module) by the summarize
/// stage; pages are rendered from these alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleEntry {
    pub repo: String,
    pub module: ModuleName,
    pub number: u64,
    pub title: String,
    pub url: String,
    pub author: String,
    /// RFC 3339 in UTC with whole seconds, as stored on the PR row.
    pub merged_at: String,
    /// What kind of change (`kind::classify`: `feat`, `fix`, `deps`, `release`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A breaking change (`!` in the title's type, or a `breaking` label).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub breaking: bool,
    #[serde(default)]
    pub labels: Vec<String>,
    pub summary: String,
    #[serde(default)]
    pub linked_issues: Vec<IssueRef>,
    #[serde(default)]
    pub additions: u64,
    #[serde(default)]
    pub deletions: u64,
    /// The PR's files inside this module, most changed first (at most [`ENTRY_MAX_FILES`]).
    #[serde(default)]
    pub files: Vec<FileChange>,
    /// How many of the PR's known files are inside this module (`files` may hold fewer).
    #[serde(default)]
    pub files_here: u64,
    /// The lines the PR changed inside this module, over all its files here (0 on entries
    /// written before it was recorded: then `files` is the measure).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lines_here: u64,
    /// The other modules the PR touched, most files first (at most [`ENTRY_MAX_ELSEWHERE`]).
    #[serde(default)]
    pub elsewhere: Vec<ModuleCount>,
    /// How many of the PR's known files are outside this module.
    #[serde(default)]
    pub files_elsewhere: u64,
    /// The sentence of its body that best says why (`summary::decision`), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<Quote>,
    /// Who approved it or asked for changes (at most [`ENTRY_MAX_REVIEWERS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviewers: Vec<String>,
    /// Its comments and reviews, counted: how much it was discussed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub discussion: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Files kept on one entry: enough for "key files", bounded so an entry stays small.
pub const ENTRY_MAX_FILES: usize = 20;
/// Reviewers named on one entry.
pub const ENTRY_MAX_REVIEWERS: usize = 5;
/// Other modules named on one entry.
pub const ENTRY_MAX_ELSEWHERE: usize = 3;

impl ModuleEntry {
    /// The entry's place in its module's merge order: `mergedAt#number`, fixed width, so the
    /// strings sort like the merges (ties by PR number).
    pub fn order_key(&self) -> String {
        order_key(&self.merged_at, self.number)
    }

    /// The year of the merge (`2019`), the unit of the archive pages.
    pub fn year(&self) -> i32 {
        year_of(&self.merged_at)
    }
}

/// `mergedAt#number` with the number zero-padded to 10 digits.
pub fn order_key(merged_at: &str, number: u64) -> String {
    format!("{merged_at}#{number:010}")
}

/// The year of an RFC 3339 timestamp from its first four digits (0 when it has none).
pub fn year_of(rfc3339: &str) -> i32 {
    rfc3339.get(..4).and_then(|y| y.parse().ok()).unwrap_or(0)
}

/// Parses an RFC 3339 timestamp.
pub fn parse_rfc3339(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
}

/// A page's state in the pages table: one item per (repo, module), plus one per repo for its
/// index (`store::INDEX_MODULE`). It holds what the builder needs to rebuild the page
/// from the module's entries without reading them all: whether it is stale and since when,
/// which years changed, each year's figures, and where the pages were published.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageItem {
    pub repo: String,
    pub module: String,
    /// Bumped by every change of the module's entries.
    #[serde(default)]
    pub version: u64,
    /// The version the last successful build saw.
    #[serde(default)]
    pub built_version: u64,
    /// Present (the sparse stale index's key) while the page needs a build.
    #[serde(default)]
    pub stale: Option<String>,
    #[serde(default)]
    pub stale_since: Option<String>,
    /// Years whose entries changed since the last build (`"2019"`).
    #[serde(default)]
    pub stale_years: BTreeSet<String>,
    /// Rebuild every year (a page was recreated, or an operator asked).
    #[serde(default)]
    pub full_rebuild: bool,
    #[serde(default)]
    pub last_built_at: Option<String>,
    #[serde(default)]
    pub build_owner: Option<String>,
    #[serde(default)]
    pub build_until: Option<String>,
    /// Year → its figures and archive pages, as of the last build that read that year.
    #[serde(default)]
    pub years: BTreeMap<String, YearStats>,
    /// The order key of the oldest entry on the module page: older ones are archived.
    #[serde(default)]
    pub main_cutoff: Option<String>,
    #[serde(default)]
    pub entry_count: u64,
    #[serde(default)]
    pub first_merged_at: Option<String>,
    #[serde(default)]
    pub latest_merged_at: Option<String>,
    /// The most active authors of the module page's entries.
    #[serde(default)]
    pub recent_authors: Vec<AuthorCount>,

    /// Page label (`main`, an archive label) → the Notion page published for it.
    #[serde(default)]
    pub notion: BTreeMap<String, NotionPage>,
    /// Why the last build failed, and what the operator must do about it.
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub advice: Option<String>,
    #[serde(default)]
    pub last_error_at: Option<String>,
    /// Builds that failed in a row.
    #[serde(default)]
    pub failed_builds: u64,
    /// The LLM-written story of the module, when one is configured and was grounded.
    #[serde(default)]
    pub story: Option<StoredStory>,
    /// When the module's page was last removed from every publisher because the module has no
    /// entries (its PRs moved to other modules); cleared when a build publishes it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_removed_at: Option<String>,
    /// On an index item: when the repository's layout (context) last changed, until the index
    /// build has marked its module pages stale.
    #[serde(default)]
    pub layout_changed_at: Option<String>,
    /// On an organisation page's item: when the index pages an earlier version left under the
    /// configured parent were last looked for (once, after the page is made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken_at: Option<String>,
    /// The order keys of the entries changed since the last build (bounded): a build reads
    /// again only the years of those its module page does not hold.
    #[serde(default)]
    pub stale_keys: BTreeSet<String>,
    /// More entries changed than `staleKeys` holds: every stale year is read again.
    #[serde(default)]
    pub stale_keys_lost: bool,
}

/// One year of a module's entries, as the builder last read it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct YearStats {
    pub count: u64,
    #[serde(default)]
    pub first: String,
    #[serde(default)]
    pub last: String,
    /// Entries of the year that are not on the module page (they are on its archive pages).
    #[serde(default)]
    pub archived: u64,
    /// The archive pages published for the year, parents first (`2019`, `2019-p1`, …).
    #[serde(default)]
    pub parts: Vec<String>,
    /// What the module overview needs of the year (kinds, authors, files, milestones).
    #[serde(default)]
    pub digest: YearDigest,
    /// The same of the year's archived entries only: merged with the entries that move into
    /// the archive, so the year is not read again for them.
    #[serde(default)]
    pub archive_digest: YearDigest,
    /// The year's archive parts, oldest first: `pages::archive::PART_ENTRIES` entries
    /// each (the last may hold fewer), filled from the oldest end.
    #[serde(default)]
    pub chunks: Vec<ChunkStats>,
    /// The archive layout these figures follow (`pages::archive::LAYOUT`); a year of
    /// another is laid out again from its entries.
    #[serde(default)]
    pub layout: u32,
}

/// One archive part of a year: how many entries, merged from when to when.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkStats {
    pub count: u64,
    pub first: String,
    pub last: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorCount {
    pub login: String,
    pub count: u64,
}

/// A Notion page Chronicle created (`id`, `url`), or is creating (`createOwner` until
/// `createUntil`: claimed before the create request, so two builders never both create it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotionPage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_until: Option<String>,
    /// A hash of the content last sent to it: the same content is not sent again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// No page is recorded, but one may exist (its record was forgotten as gone, or a create
    /// claim was given back): the next create looks for it by title first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub look_first: bool,
    /// When its children were last listed (or it was created): within a day, its content is
    /// replaced without listing them first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_at: Option<String>,
    /// Pages and databases a person put under it, as last listed: named in its content so that
    /// replacing it keeps them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<OtherPage>,
}

/// A page or database a person put under one of Chronicle's pages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OtherPage {
    pub id: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub database: bool,
}

/// One repository on its organisation's index: kept by the repository's index build.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgRepo {
    /// `owner/name`.
    pub repo: String,
    #[serde(default)]
    pub latest_merged_at: Option<String>,
    /// Its most recently active modules (at most the index shows).
    #[serde(default)]
    pub modules: Vec<OrgModule>,
    /// All its modules and their entries (`modules` holds only the most recent).
    #[serde(default)]
    pub module_count: u64,
    #[serde(default)]
    pub entry_count: u64,
    /// Its people by the modules they recently wrote in, the most first (bounded).
    #[serde(default)]
    pub people: Vec<OrgPerson>,
    /// Its index page in Notion, once published there (the Notion org page nests it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notion_index: Option<NotionLink>,
}

/// A published Notion page as the organisation's index links it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotionLink {
    pub id: String,
    pub url: String,
}

/// One person of a repository on the organisation's index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgPerson {
    pub login: String,
    pub modules: u64,
}

/// One module of a repository on the organisation's index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgModule {
    pub module: String,
    pub entry_count: u64,
    #[serde(default)]
    pub latest_merged_at: Option<String>,
    /// Its most active recent authors (logins).
    #[serde(default)]
    pub authors: Vec<String>,
    /// Its page's Notion URL, once published there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notion_url: Option<String>,
}

/// A module's LLM story as stored on the page item (`story` writes it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredStory {
    pub text: String,
    /// SHA-256 of the prompt it was written from (hex).
    pub input_hash: String,
    /// The module's entries when it was written.
    pub entry_count: u64,
    pub generated_at: String,
    pub model: String,
    /// Sentences left out because the PRs they cite do not support them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// Why the model was not asked successfully, when the configuration is at fault, and what
    /// the operator must do (kept until a call succeeds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
    /// The model's own filter or guardrail withheld its answer for this input (the stop
    /// reason: `content_filtered`, `guardrail_intervened`, `refusal`, `content_filter`): final
    /// for `input_hash`, so that input is not asked again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
}

#[cfg(test)]
mod tests {

    #[test]
    fn github_logins_and_what_cannot_be_one() {
        for ok in ["octocat", "a-b-c", "dependabot[bot]", "alice_acme", "x1"] {
            assert!(is_github_login(ok), "{ok}");
        }
        for bad in [
            "",
            "[evil](javascript:x)",
            "<script>",
            "a b",
            "ünïcode",
            &"a".repeat(40),
        ] {
            assert!(!is_github_login(bad), "{bad}");
        }
    }
    use super::*;
    use time::macros::datetime;

    #[test]
    fn repo_names() {
        let r = RepoName::parse("Codertocat/Hello-World").unwrap();
        assert_eq!((r.owner(), r.name()), ("Codertocat", "Hello-World"));
        for bad in ["", "a", "/b", "a/", "a/b/c"] {
            assert!(RepoName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_are_fixed_width_utc() {
        assert_eq!(
            rfc3339_seconds(datetime!(2019-05-15 17:20:33 +2)),
            "2019-05-15T15:20:33Z"
        );
        assert_eq!(
            rfc3339_millis(datetime!(2019-05-15 15:20:33.5 UTC)),
            "2019-05-15T15:20:33.500Z"
        );
    }
}
