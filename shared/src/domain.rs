//! Chronicle's domain types: what a merged pull request is once GitHub's payload has been read.

use std::fmt;

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

#[cfg(test)]
mod tests {
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
