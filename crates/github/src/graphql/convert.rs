//! GraphQL answers as Chronicle's types: a pull request's fields (one conversion, generated
//! for each operation's copy of the fragment), its files' statuses, times and rate limits.

use super::*;

pub(super) fn rate_limit(cost: i64, remaining: i64, limit: i64, reset_at: &str) -> RateLimit {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    RateLimit {
        cost: n(cost),
        remaining: n(remaining),
        limit: n(limit),
        reset_at: OffsetDateTime::parse(reset_at, &time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| OffsetDateTime::now_utc() + Duration::from_secs(3600)),
    }
}

pub(super) fn changed_file(
    path: String,
    additions: i64,
    deletions: i64,
    status: &str,
) -> ChangedFile {
    ChangedFile {
        path,
        status: status.to_string(),
        additions: u64::try_from(additions).unwrap_or(0),
        deletions: u64::try_from(deletions).unwrap_or(0),
    }
}

pub(super) fn parse_time(
    what: &str,
    field: &str,
    value: &str,
) -> Result<OffsetDateTime, GraphQlError> {
    OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339).map_err(|e| {
        GraphQlError::Decode {
            what: what.to_string(),
            message: format!("{field} {value:?}: {e}"),
        }
    })
}

/// The REST `status` of a GraphQL `PatchStatus`, so rows read the same whichever API filled them.
macro_rules! patch_status_fn {
    ($name:ident, $module:ident) => {
        pub(super) fn $name(status: &$module::PatchStatus) -> &'static str {
            use $module::PatchStatus as P;
            match status {
                P::ADDED => "added",
                P::DELETED => "removed",
                P::RENAMED => "renamed",
                P::COPIED => "copied",
                P::CHANGED => "changed",
                _ => "modified",
            }
        }
    };
}
patch_status_fn!(patch_status_merged, merged_pull_requests);
patch_status_fn!(patch_status_number, pull_request_by_number);
patch_status_fn!(patch_status_files, pull_request_files);

/// The same fragment, generated once per operation: one conversion, instantiated for each.
macro_rules! from_fields_fn {
    ($name:ident, $module:ident, $status:ident) => {
        pub(super) fn $name(
            repo: &RepoName,
            node: $module::PullRequestFields,
            what: &str,
        ) -> Result<Option<GraphPull>, GraphQlError> {
            use $module::PullRequestFieldsAuthorOn as On;
            let Some(merged_at) = node.merged_at.as_deref().filter(|_| node.merged) else {
                return Ok(None);
            };
            let number = u64::try_from(node.number).unwrap_or_default();
            let author = match node.author {
                // GitHub's REST and webhooks name apps `name[bot]`; GraphQL gives `name`.
                Some(a) if matches!(a.on, On::Bot) => format!("{}[bot]", a.login),
                Some(a) => a.login,
                None => "ghost".to_string(),
            };
            let pr = MergedPullRequest {
                repo: repo.clone(),
                number,
                title: node.title,
                body: Some(node.body).filter(|b| !b.is_empty()),
                author,
                labels: node
                    .labels
                    .and_then(|l| l.nodes)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|l| l.name)
                    .collect(),
                url: node.url,
                base_ref: node.base_ref_name,
                merge_commit_sha: node.merge_commit.map(|c| c.oid).unwrap_or_default(),
                merged_at: parse_time(what, "mergedAt", merged_at)?,
                source_updated_at: parse_time(what, "updatedAt", &node.updated_at)?,
                installation: None,
            };
            let files = node.files;
            let (file_list, more_files) = match files {
                Some(f) => (
                    f.nodes
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|f| {
                            changed_file(f.path, f.additions, f.deletions, $status(&f.change_type))
                        })
                        .collect::<Vec<_>>(),
                    f.page_info
                        .has_next_page
                        .then_some(f.page_info.end_cursor)
                        .flatten(),
                ),
                None => (Vec::new(), None),
            };
            let linked_issues = node
                .closing_issues_references
                .and_then(|c| c.nodes)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|i| {
                    Some(LinkedIssue {
                        repo: RepoName::parse(&i.repository.name_with_owner).ok()?,
                        number: u64::try_from(i.number).ok()?,
                        title: i.title,
                        state: format!("{:?}", i.state).to_ascii_lowercase(),
                        url: i.url,
                    })
                })
                .collect();
            let reviews = node.reviews;
            let mut reviewers: Vec<String> = Vec::new();
            for author in reviews
                .as_ref()
                .and_then(|r| r.nodes.as_ref())
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|r| r.author.as_ref())
            {
                // Apps review too (a bot's approval says nothing of who knows the code).
                let bot = matches!(
                    author.on,
                    $module::PullRequestFieldsReviewsNodesAuthorOn::Bot
                ) || author.login.ends_with("[bot]");
                if !bot
                    && author.login != pr.author
                    && chronicle_domain::is_github_login(&author.login)
                    && !reviewers.contains(&author.login)
                {
                    reviewers.push(author.login.clone());
                }
            }
            reviewers.truncate(MAX_REVIEWERS);
            Ok(Some(GraphPull {
                totals: PullTotals {
                    commits: u64::try_from(node.commits.total_count).unwrap_or_default(),
                    additions: u64::try_from(node.additions).unwrap_or_default(),
                    deletions: u64::try_from(node.deletions).unwrap_or_default(),
                    changed_files: u64::try_from(node.changed_files).unwrap_or_default(),
                    comments: u64::try_from(node.comments.total_count).unwrap_or_default(),
                    reviews: reviews
                        .map_or(0, |r| u64::try_from(r.total_count).unwrap_or_default()),
                },
                created_at: parse_time(what, "createdAt", &node.created_at)?,
                pr,
                files: file_list,
                more_files,
                linked_issues,
                reviewers,
            }))
        }
    };
}
from_fields_fn!(
    from_fields_merged,
    merged_pull_requests,
    patch_status_merged
);
from_fields_fn!(
    from_fields_by_number,
    pull_request_by_number,
    patch_status_number
);
