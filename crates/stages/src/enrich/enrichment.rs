//! What enrichment writes back to a PR row, bounded so the row stays within one DynamoDB item.

use super::*;

/// Linked issues looked up per PR, bounding the requests one body can cause.
pub const MAX_LINKED_ISSUES: usize = 20;

/// Bytes of stored paths per PR (with each file's overhead): with GitHub's largest PR body
/// (65,536 characters, up to 256 KB of UTF-8) the row stays well under DynamoDB's 400 KB.
pub const MAX_PATH_BYTES: usize = 64 * 1024;

/// Top-level directories counted per PR (the busiest), bounding the row like the paths.
pub const MAX_DIRECTORIES: usize = 200;

/// And at most this many bytes of directory names (GitHub allows 255-byte names).
pub const MAX_DIRECTORY_BYTES: usize = 8 * 1024;

/// A linked issue's title as stored, in characters (GitHub's own limit is 256).
pub const MAX_ISSUE_TITLE_CHARS: usize = 256;

/// What one stored file costs besides its path (its map's names, status and counts).
pub(super) const FILE_OVERHEAD_BYTES: usize = 48;

/// What GitHub told us about a PR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enrichment {
    pub totals: PullTotals,
    pub files: Vec<ChangedFile>,
    pub linked_issues: Vec<LinkedIssue>,
    /// Who approved it or asked for changes (GraphQL only: REST lists no reviews in the
    /// requests enrichment makes).
    pub reviewers: Vec<String>,
}

/// A reviewer's login as stored, in characters (GitHub's own limit is 39).
const MAX_LOGIN_CHARS: usize = 39;

impl Enrichment {
    /// The attributes to store: at most `max_paths` paths and [`MAX_PATH_BYTES`] (the most
    /// changed first), counts per top-level directory over every file fetched, and
    /// `filesTruncated` when anything was cut.
    pub fn attributes(&self, max_paths: usize) -> Vec<(&'static str, AttributeValue)> {
        let n = |v: u64| AttributeValue::N(v.to_string());
        let s = |v: &str| AttributeValue::S(v.to_string());
        let mut directories: BTreeMap<&str, u64> = BTreeMap::new();
        for f in &self.files {
            *directories.entry(top_level_directory(&f.path)).or_default() += 1;
        }
        if directories.len() > MAX_DIRECTORIES {
            // A PR over thousands of top-level directories: the busiest are kept, bounded.
            let mut by_count: Vec<(&str, u64)> = directories.into_iter().collect();
            by_count.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
            by_count.truncate(MAX_DIRECTORIES);
            directories = by_count.into_iter().collect();
        }
        if directories.keys().map(|d| d.len()).sum::<usize>() > MAX_DIRECTORY_BYTES {
            // Long names: the busiest are kept within the byte budget (the row's 400 KB).
            let mut by_count: Vec<(&str, u64)> = directories.into_iter().collect();
            by_count.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
            let mut bytes = 0usize;
            by_count.retain(|(d, _)| {
                bytes += d.len();
                bytes <= MAX_DIRECTORY_BYTES
            });
            directories = by_count.into_iter().collect();
        }
        let mut kept: Vec<&ChangedFile> = self.files.iter().collect();
        // Stable: equally changed files keep GitHub's order.
        kept.sort_by_key(|f| std::cmp::Reverse(f.additions + f.deletions));
        kept.truncate(max_paths);
        let mut bytes = 0usize;
        kept.retain(|f| {
            bytes += f.path.len() + FILE_OVERHEAD_BYTES;
            bytes <= MAX_PATH_BYTES
        });
        let truncated =
            kept.len() < self.files.len() || (self.files.len() as u64) < self.totals.changed_files;
        let files = kept
            .into_iter()
            .map(|f| {
                AttributeValue::M(
                    [
                        ("path", s(&f.path)),
                        ("status", s(&f.status)),
                        ("additions", n(f.additions)),
                        ("deletions", n(f.deletions)),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                )
            })
            .collect();
        let issues = self
            .linked_issues
            .iter()
            .map(|i| {
                AttributeValue::M(
                    [
                        ("repo", s(i.repo.as_str())),
                        ("number", n(i.number)),
                        (
                            "title",
                            s(&i.title
                                .chars()
                                .take(MAX_ISSUE_TITLE_CHARS)
                                .collect::<String>()),
                        ),
                        ("state", s(&i.state)),
                        ("url", s(&i.url)),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                )
            })
            .collect();
        vec![
            (attr::FILES, AttributeValue::L(files)),
            (attr::FILES_TRUNCATED, AttributeValue::Bool(truncated)),
            (
                attr::DIRECTORIES,
                AttributeValue::M(
                    directories
                        .into_iter()
                        .map(|(d, c)| (d.to_string(), n(c)))
                        .collect(),
                ),
            ),
            (attr::ADDITIONS, n(self.totals.additions)),
            (attr::DELETIONS, n(self.totals.deletions)),
            (attr::CHANGED_FILES, n(self.totals.changed_files)),
            (attr::COMMITS, n(self.totals.commits)),
            (attr::LINKED_ISSUES, AttributeValue::L(issues)),
            (
                attr::REVIEWERS,
                AttributeValue::L(
                    self.reviewers
                        .iter()
                        .take(crate::github::graphql::MAX_REVIEWERS)
                        .map(|r| s(&r.chars().take(MAX_LOGIN_CHARS).collect::<String>()))
                        .collect(),
                ),
            ),
            (
                attr::DISCUSSION,
                n(self.totals.comments + self.totals.reviews),
            ),
        ]
    }
}
