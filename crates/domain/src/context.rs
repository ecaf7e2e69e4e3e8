//! What a repository says of its modules, as stored: its CODEOWNERS, its workspace packages,
//! its top-level directories and what their READMEs say. Fetched by `context`, stored by
//! `store::ContextStore`, read by tagging and the pages.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

// The bounds a stored context keeps to: it must fit one DynamoDB item.
/// The most packages kept per repository (monorepos beyond this keep the first, by path).
pub const MAX_PACKAGES: usize = 300;
/// The most directories listed to expand wildcard members.
pub const MAX_LISTINGS: usize = 20;
/// Text kept of one file: CODEOWNERS beyond this is cut (GitHub itself reads 3 MB; a stored
/// context must stay well within DynamoDB's 400 KB item).
pub const MAX_CODEOWNERS_BYTES: usize = 64 * 1024;
/// The largest `.github/chronicle.yml` read: a modules file, not a document.
pub const MAX_TEAM_FILE_BYTES: usize = 64 * 1024;
/// A manifest beyond this is cut (and then, most likely, unparseable: no package read from it).
pub const MAX_MANIFEST_BYTES: usize = 256 * 1024;
/// A description kept of a package, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 300;
/// Top-level directories whose README is read (beyond these, none).
pub const MAX_READMES: usize = 100;
/// A README's lead paragraph kept, in characters.
pub const MAX_ABOUT_CHARS: usize = 400;
/// The manifests at a repository's root that declare a workspace, and the file each member
/// holds its own name in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ecosystem {
    Cargo,
    Npm,
    Pnpm,
    Go,
}

impl Ecosystem {
    pub const ALL: [Ecosystem; 4] = [
        Ecosystem::Cargo,
        Ecosystem::Npm,
        Ecosystem::Pnpm,
        Ecosystem::Go,
    ];

    /// The root file that declares the workspace.
    pub fn root_manifest(self) -> &'static str {
        match self {
            Ecosystem::Cargo => "Cargo.toml",
            Ecosystem::Npm => "package.json",
            Ecosystem::Pnpm => "pnpm-workspace.yaml",
            Ecosystem::Go => "go.work",
        }
    }

    /// The file in a member directory that names the package.
    pub fn member_manifest(self) -> &'static str {
        match self {
            Ecosystem::Cargo => "Cargo.toml",
            Ecosystem::Npm | Ecosystem::Pnpm => "package.json",
            Ecosystem::Go => "go.mod",
        }
    }
}

/// What a root manifest declares: member patterns (directories, possibly with `*`), and
/// patterns excluded from them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Members {
    pub include: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

impl Members {
    pub fn is_empty(&self) -> bool {
        self.include.is_empty()
    }
}

/// One package of a workspace: a directory, the module its files belong to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// The package's name (its manifest's), else its directory's last segment.
    pub name: String,
    /// Relative to the repository root, without a trailing `/`.
    pub dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The manifest the name and description come from (`crates/x/Cargo.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// What was last seen of one file or directory: its ETag (to ask again conditionally) and
/// what was read from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// `false`: GitHub answered 404.
    pub found: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Members>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirs: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The shape of what is read from the files: a context stored by another version is fetched
/// again without its ETags (what was parsed from a 304'd file would otherwise stay as the
/// older parser read it).
/// 2: member patterns cleaned and capped, package names made module names at tagging.
/// 3: the repository's `.github/chronicle.yml` is read too.
pub const CONTEXT_VERSION: u32 = 3;

/// A repository's context as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepoContext {
    /// [`CONTEXT_VERSION`] when it was read.
    #[serde(default)]
    pub version: u32,
    /// When it was fetched (RFC 3339).
    pub checked_at: String,
    /// The CODEOWNERS text GitHub would use, and where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codeowners: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codeowners_path: Option<String>,
    /// Packages by directory, longest first is left to the reader.
    #[serde(default)]
    pub packages: Vec<Package>,
    /// The directories at the root of the default branch (`None`: not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_level: Option<Vec<String>>,
    /// The text of the repository's `.github/chronicle.yml` (the team's modules and notes), as
    /// fetched: parsed where it is used, so an invalid file is reported there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_file: Option<String>,
    /// What a directory's README says first, by directory (packages and top-level ones).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub about: BTreeMap<String, About>,
    /// Everything requested, by `kind:path` (`file:Cargo.toml`, `dir:crates`, `readme:api`).
    #[serde(default)]
    pub seen: BTreeMap<String, Seen>,
}

/// A README's lead paragraph and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct About {
    pub text: String,
    /// The README's path (`crates/api/README.md`).
    pub source: String,
}

/// Whether a context checked at `checked_at` (RFC 3339) by version `version` is still to be
/// used at `now`: read by this version, within `ttl`.
pub fn is_fresh(checked_at: &str, version: u32, now: OffsetDateTime, ttl: time::Duration) -> bool {
    version == CONTEXT_VERSION && crate::parse_rfc3339(checked_at).is_some_and(|t| now - t < ttl)
}

impl RepoContext {
    /// Whether both say the same of the repository's modules: their owners (CODEOWNERS), its
    /// packages, its top-level directories and what their READMEs say. A refresh that changes
    /// any of these changes what module pages show (and how new PRs are tagged).
    pub fn same_layout(&self, other: &RepoContext) -> bool {
        self.codeowners == other.codeowners
            && self.packages == other.packages
            && self.top_level == other.top_level
            && self.about == other.about
            && self.team_file == other.team_file
    }

    /// The package that is the module `name`.
    pub fn package_named(&self, name: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.name == name)
    }
}
