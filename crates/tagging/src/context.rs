//! Repository context: what a repository says about its own layout, fetched from GitHub and
//! kept per repository for a day: its CODEOWNERS (the first of `.github/`, the root, `docs/`, as
//! GitHub reads them) and the packages its workspace manifests declare (Cargo, npm/Yarn, pnpm,
//! Go), each with its name and description.
//!
//! Fetched at enrichment (never on the webhook path) with conditional requests: every file's
//! ETag is kept, so a refresh whose files did not change costs 304s, which GitHub does not count
//! against the rate limit. A 404 is kept too ("no such file"), until the next refresh. Tagging
//! reads the stored context; it never fetches.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::stream::{self, StreamExt};
use time::OffsetDateTime;

use crate::workspaces::{self, CompiledMembers, Ecosystem, Members};
pub use chronicle_domain::context::{
    is_fresh, About, Package, RepoContext, Seen, CONTEXT_VERSION, MAX_ABOUT_CHARS,
    MAX_CODEOWNERS_BYTES, MAX_DESCRIPTION_CHARS, MAX_LISTINGS, MAX_MANIFEST_BYTES, MAX_PACKAGES,
    MAX_READMES,
};
use chronicle_domain::RepoName;
use chronicle_github::{Conditional, GitHubClient, GitHubError};

/// Where GitHub looks for CODEOWNERS, in the order it looks.
pub const CODEOWNERS_PATHS: [&str; 3] = [".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"];
/// A context younger than this is not fetched again.
pub const DEFAULT_TTL: time::Duration = time::Duration::hours(24);
/// Requests in flight at once during a refresh.
const CONCURRENCY: usize = 8;

/// Why a refresh stopped: the previous context (if any) stays in use.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error("fetching the repository context: {0}")]
    GitHub(#[from] GitHubError),
}

/// Fetches `repo`'s context again, conditionally on what `previous` saw. Every request is
/// bounded (CODEOWNERS: at most 3; `.github/chronicle.yml`: 1; manifests: 4; listings: [`MAX_LISTINGS`]; member
/// manifests: [`MAX_PACKAGES`]); any error but a 404 stops the refresh (rate limit, 5xx after
/// retries, out of time), and the caller keeps the previous context.
pub async fn refresh(
    github: &GitHubClient,
    repo: &RepoName,
    previous: Option<&RepoContext>,
    now: OffsetDateTime,
    deadline: Instant,
) -> Result<RepoContext, ContextError> {
    let empty = RepoContext::default();
    let previous = previous
        .filter(|p| p.version == CONTEXT_VERSION)
        .unwrap_or(&empty);
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let fetcher = Fetcher {
        github,
        repo,
        previous,
        deadline,
    };

    let codeowners = codeowners(&fetcher, &mut seen).await?;
    // The team's own modules and notes; kept as text (and once, not again in `seen`).
    let mut team = fetcher
        .file(crate::team::TEAM_FILE, crate::team::TEAM_FILE_MAX_BYTES)
        .await?;
    let team_file = team.found.then(|| team.text.take().unwrap_or_default());
    seen.insert(file_key(crate::team::TEAM_FILE), team);
    // The root's directories: which top-level modules still exist.
    let root = fetcher.directories("").await?;
    let top_level = root.found.then(|| root.dirs.clone().unwrap_or_default());
    seen.insert("dir:".to_string(), root);

    let declared = root_manifests(&fetcher, &mut seen).await?;
    let dirs = member_dirs(&fetcher, &declared, &mut seen).await?;
    let packages = packages(&fetcher, dirs, &mut seen).await?;
    let about = about(&fetcher, &packages, &top_level, &mut seen).await?;

    let (codeowners_path, codeowners) = match codeowners {
        Some((path, text)) => (Some(path), Some(text)),
        None => (None, None),
    };
    // The CODEOWNERS text is kept once, on the context, not again in `seen`.
    if let Some(path) = &codeowners_path {
        if let Some(s) = seen.get_mut(&file_key(path)) {
            s.text = None;
        }
    }
    Ok(RepoContext {
        version: CONTEXT_VERSION,
        checked_at: chronicle_domain::rfc3339_seconds(now),
        codeowners,
        codeowners_path,
        packages,
        top_level,
        about,
        team_file,
        seen,
    })
}

/// CODEOWNERS: the first location that has one (its path and text).
async fn codeowners(
    fetcher: &Fetcher<'_>,
    seen: &mut BTreeMap<String, Seen>,
) -> Result<Option<(String, String)>, ContextError> {
    let mut codeowners = None;
    for path in CODEOWNERS_PATHS {
        let s = fetcher.file(path, MAX_CODEOWNERS_BYTES).await?;
        let found = s.found;
        seen.insert(file_key(path), s.clone());
        if found {
            codeowners = Some((path.to_string(), s.text.unwrap_or_default()));
            break;
        }
    }
    Ok(codeowners)
}

/// The root manifests' member patterns, by ecosystem.
async fn root_manifests(
    fetcher: &Fetcher<'_>,
    seen: &mut BTreeMap<String, Seen>,
) -> Result<Vec<(Ecosystem, Members)>, ContextError> {
    let repo = fetcher.repo;
    let mut declared: Vec<(Ecosystem, Members)> = Vec::new();
    for ecosystem in Ecosystem::ALL {
        let path = ecosystem.root_manifest();
        let mut s = fetcher.file(path, MAX_MANIFEST_BYTES).await?;
        if s.found && s.members.is_none() {
            let text = s.text.take().unwrap_or_default();
            s.members = Some(match workspaces::members(ecosystem, &text) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(repo = %repo, error = %e, "workspace manifest ignored");
                    Members::default()
                }
            });
        }
        s.text = None; // only what was read from it is kept
        if let Some(m) = s.members.clone().filter(|m| !m.is_empty()) {
            declared.push((ecosystem, m));
        }
        seen.insert(file_key(path), s);
    }
    Ok(declared)
}

/// Member directories: literal ones as they are, wildcard ones from their parent's listing.
/// Directories seen in a listing exist; literal members may not (a hostile manifest can name
/// thousands). Listed ones are kept first when there are more than can be read.
async fn member_dirs(
    fetcher: &Fetcher<'_>,
    declared: &[(Ecosystem, Members)],
    seen: &mut BTreeMap<String, Seen>,
) -> Result<Vec<(String, Ecosystem)>, ContextError> {
    let (repo, deadline) = (fetcher.repo, fetcher.deadline);
    let mut dirs: BTreeMap<String, Ecosystem> = BTreeMap::new();
    let mut literal: BTreeMap<String, Ecosystem> = BTreeMap::new();
    let mut listed = 0usize;
    for (ecosystem, members) in declared {
        // Compiled once per manifest: matching is then linear in the patterns and directories.
        let compiled = CompiledMembers::new(members);
        for pattern in &members.include {
            if Instant::now() >= deadline {
                return Err(GitHubError::OutOfTime {
                    path: ecosystem.root_manifest().to_string(),
                }
                .into());
            }
            match workspaces::listing_parent(pattern) {
                None => {
                    if compiled.contains(pattern) {
                        literal.entry(pattern.clone()).or_insert(*ecosystem);
                    }
                }
                Some(parent) => {
                    let key = format!("dir:{parent}");
                    let listing = match seen.get(&key) {
                        Some(s) => s.clone(),
                        None if listed < MAX_LISTINGS => {
                            listed += 1;
                            let s = fetcher.directories(&parent).await?;
                            seen.insert(key, s.clone());
                            s
                        }
                        None => {
                            tracing::warn!(repo = %repo, pattern, "too many workspace directories to list; pattern skipped");
                            continue;
                        }
                    };
                    let child = workspaces::ChildMatcher::new(pattern);
                    for name in listing.dirs.unwrap_or_default() {
                        let dir = if parent.is_empty() {
                            name
                        } else {
                            format!("{parent}/{name}")
                        };
                        if child.matches(&dir) && compiled.contains(&dir) {
                            dirs.entry(dir).or_insert(*ecosystem);
                        }
                    }
                }
            }
        }
    }
    let declared_dirs = dirs.len() + literal.len();
    if declared_dirs > MAX_PACKAGES {
        tracing::warn!(repo = %repo, packages = declared_dirs, kept = MAX_PACKAGES, "more workspace packages than kept");
    }
    let mut dirs: BTreeMap<String, Ecosystem> = dirs.into_iter().take(MAX_PACKAGES).collect();
    for (dir, ecosystem) in literal {
        if dirs.len() >= MAX_PACKAGES {
            break;
        }
        dirs.entry(dir).or_insert(ecosystem);
    }
    let dirs: Vec<(String, Ecosystem)> = dirs.into_iter().collect();
    Ok(dirs)
}

/// Each member's own manifest: its name and description, and so its package.
async fn packages(
    fetcher: &Fetcher<'_>,
    dirs: Vec<(String, Ecosystem)>,
    seen: &mut BTreeMap<String, Seen>,
) -> Result<Vec<Package>, ContextError> {
    let repo = fetcher.repo;
    let manifests: Vec<(String, Ecosystem, Result<Seen, GitHubError>)> = stream::iter(dirs)
        .map(|(dir, ecosystem)| {
            async move {
                let path = format!("{dir}/{}", ecosystem.member_manifest());
                let result = fetcher.file(&path, MAX_MANIFEST_BYTES).await.map(|mut s| {
                    // Parsed only when served: a 304 keeps what was read before.
                    if let Some(text) = s.text.take() {
                        let info = workspaces::package_info(ecosystem, &text);
                        s.name = info.name;
                        s.description = info.description.map(|d| {
                            chronicle_domain::cap(
                                &chronicle_summary::collapse_whitespace(&d),
                                MAX_DESCRIPTION_CHARS,
                            )
                        });
                    }
                    s.text = None;
                    s
                });
                (dir, ecosystem, result)
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let mut packages: Vec<Package> = Vec::with_capacity(manifests.len());
    let mut names: std::collections::HashSet<String> = Default::default();
    for (dir, ecosystem, result) in manifests {
        let path = format!("{dir}/{}", ecosystem.member_manifest());
        let Some(s) = readable(repo, &path, result)? else {
            continue;
        };
        // A directory without its manifest is not a package (the tools skip or refuse it).
        if s.found {
            let last = dir.rsplit('/').next().unwrap_or(&dir).to_string();
            let mut name = s.name.clone().unwrap_or(last);
            // Two packages with one name (a Go module and a crate both called `api`): the
            // first by directory keeps it, the others are named by their path, so modules
            // never merge by accident.
            if !names.insert(name.clone()) {
                name = dir.clone();
            }
            packages.push(Package {
                name,
                dir,
                description: s.description.clone(),
                manifest: Some(path.clone()),
            });
        }
        seen.insert(file_key(&path), s);
    }
    Ok(packages)
}

/// READMEs' lead paragraphs: each package's, each top-level directory's (dot-directories aside).
async fn about(
    fetcher: &Fetcher<'_>,
    packages: &[Package],
    top_level: &Option<Vec<String>>,
    seen: &mut BTreeMap<String, Seen>,
) -> Result<BTreeMap<String, About>, ContextError> {
    let repo = fetcher.repo;
    let mut readme_dirs: Vec<String> = packages.iter().map(|p| p.dir.clone()).collect();
    readme_dirs.extend(
        top_level
            .iter()
            .flatten()
            .filter(|d| !d.starts_with('.'))
            .take(MAX_READMES)
            .cloned(),
    );
    readme_dirs.sort();
    readme_dirs.dedup();
    let readmes: Vec<(String, ReadmeAnswer)> = stream::iter(readme_dirs)
        .map(|dir| async move {
            let result = fetcher.readme(&dir).await;
            (dir, result)
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let mut about = BTreeMap::new();
    for (dir, result) in readmes {
        let Some((s, lead)) = readable(repo, &format!("{dir}/README"), result)? else {
            continue;
        };
        if let Some(lead) = lead {
            about.insert(dir.clone(), lead);
        }
        seen.insert(format!("readme:{dir}"), s);
    }
    Ok(about)
}

/// What one member's file gave: `None` when it cannot be read for a reason of its own (a path
/// refused before it was asked, such as `crates/../x`; a 400, 422 or 451 on that one path; an
/// answer that is not the expected JSON): the member is then simply not a package, and the rest
/// of the refresh goes on. Anything that may be the token's or passing (401, 403, rate limits,
/// 5xx, transport failures, the deadline) stops the refresh, and the previous context stays,
/// rather than storing one with packages missing.
fn readable<T>(
    repo: &RepoName,
    path: &str,
    result: Result<T, GitHubError>,
) -> Result<Option<T>, GitHubError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(
            e @ GitHubError::Refused {
                status: 0 | 400 | 422 | 451,
                ..
            },
        )
        | Err(e @ GitHubError::Decode { .. }) => {
            tracing::warn!(repo = %repo, path, error = %e, "a workspace member could not be read; skipped");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// What asking for one README gave.
type ReadmeAnswer = Result<(Seen, Option<About>), GitHubError>;

fn file_key(path: &str) -> String {
    format!("file:{path}")
}

struct Fetcher<'a> {
    github: &'a GitHubClient,
    repo: &'a RepoName,
    previous: &'a RepoContext,
    deadline: Instant,
}

impl Fetcher<'_> {
    /// A file, conditional on the previous ETag; a 304 keeps what was read before (and, for the
    /// previous CODEOWNERS, its text from the context).
    async fn file(&self, path: &str, max_bytes: usize) -> Result<Seen, GitHubError> {
        let before = self.previous.seen.get(&file_key(path));
        let etag = before.filter(|s| s.found).and_then(|s| s.etag.as_deref());
        Ok(
            match self
                .github
                .file(self.repo, path, etag, max_bytes, self.deadline)
                .await?
            {
                Conditional::NotModified => {
                    let mut s = before.cloned().unwrap_or_default();
                    if self.previous.codeowners_path.as_deref() == Some(path) {
                        s.text = self.previous.codeowners.clone();
                    }
                    if path == crate::team::TEAM_FILE {
                        s.text = self.previous.team_file.clone();
                    }
                    s
                }
                Conditional::Missing => Seen::default(),
                Conditional::Found { value, etag } => Seen {
                    etag,
                    found: true,
                    text: Some(value),
                    ..Seen::default()
                },
            },
        )
    }

    /// A directory's README: what was seen (its ETag) and its lead paragraph; a 304 keeps the
    /// paragraph read before.
    async fn readme(&self, dir: &str) -> Result<(Seen, Option<About>), GitHubError> {
        let key = format!("readme:{dir}");
        let before = self.previous.seen.get(&key);
        let etag = before.filter(|s| s.found).and_then(|s| s.etag.as_deref());
        Ok(
            match self
                .github
                .readme(self.repo, dir, etag, MAX_MANIFEST_BYTES, self.deadline)
                .await?
            {
                Conditional::NotModified => (
                    before.cloned().unwrap_or_default(),
                    self.previous.about.get(dir).cloned(),
                ),
                Conditional::Missing => (Seen::default(), None),
                Conditional::Found {
                    value: (path, text),
                    etag,
                } => (
                    Seen {
                        etag,
                        found: true,
                        ..Seen::default()
                    },
                    chronicle_summary::lead_paragraph(&text, MAX_ABOUT_CHARS)
                        .map(|text| About { text, source: path }),
                ),
            },
        )
    }

    async fn directories(&self, dir: &str) -> Result<Seen, GitHubError> {
        let key = format!("dir:{dir}");
        let before = self.previous.seen.get(&key);
        let etag = before.filter(|s| s.found).and_then(|s| s.etag.as_deref());
        Ok(
            match self
                .github
                .directories(self.repo, dir, etag, self.deadline)
                .await?
            {
                Conditional::NotModified => before.cloned().unwrap_or_default(),
                Conditional::Missing => Seen::default(),
                Conditional::Found { value, etag } => Seen {
                    etag,
                    found: true,
                    dirs: Some(value),
                    ..Seen::default()
                },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_means_this_version_within_the_ttl() {
        let now = time::macros::datetime!(2026-12-03 12:00 UTC);
        let day = DEFAULT_TTL;
        assert!(is_fresh("2026-12-03T00:00:00Z", CONTEXT_VERSION, now, day));
        assert!(!is_fresh("2026-12-02T11:00:00Z", CONTEXT_VERSION, now, day));
        assert!(
            !is_fresh("2026-12-03T00:00:00Z", 0, now, day),
            "another version's"
        );
        assert!(!is_fresh("", CONTEXT_VERSION, now, day));
    }
}
