//! Workspace manifests: which directories of a repository are packages, and what each package
//! is called and says it is. Pure parsing; the fetching is `context`'s.
//!
//! Read as their tools read them: Cargo's `[workspace] members` and `exclude` (`Cargo.toml`,
//! parsed with `toml`), npm's and Yarn's `workspaces` (an array, or `{ packages: [...] }`),
//! pnpm's `pnpm-workspace.yaml` `packages` (with `!` exclusions) and Go's `go.work` `use`
//! directives. A package's own manifest gives its name and description: `[package] name`,
//! package.json `name`, go.mod `module` (its last path element).

use globset::{GlobSet, GlobSetBuilder};
use serde::Deserialize;

pub use chronicle_domain::context::{Ecosystem, Members};

/// [`Members`] with their glob sets built.
#[derive(Debug, Clone)]
pub struct CompiledMembers {
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
}

/// The most member patterns (includes and excludes each) read from one manifest. Real
/// workspaces declare tens, the largest a few hundred; a manifest past this is cut, and the
/// log says so, so a hostile manifest cannot make a refresh's matching grow without bound.
pub const MAX_PATTERNS: usize = 1_000;
/// The longest member pattern read, in bytes (a real one is a path and maybe a `*`; a longer
/// one, such as a huge `{a,b,…}` alternation, is dropped).
pub const MAX_PATTERN_BYTES: usize = 256;

impl CompiledMembers {
    /// The patterns compiled once, to match many directories against.
    pub fn new(members: &Members) -> CompiledMembers {
        CompiledMembers {
            include: glob_set(&members.include),
            exclude: glob_set(&members.exclude),
        }
    }

    /// Whether a directory is a member: one include pattern matches it and no exclude does.
    pub fn contains(&self, dir: &str) -> bool {
        self.include.as_ref().is_some_and(|i| i.is_match(dir))
            && !self.exclude.as_ref().is_some_and(|e| e.is_match(dir))
    }
}

/// Why a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{file} is not valid TOML: {message}")]
    Toml { file: String, message: String },
    #[error("{file} is not valid JSON: {message}")]
    Json { file: String, message: String },
    #[error("{file} is not valid YAML: {message}")]
    Yaml { file: String, message: String },
}

/// The members a root manifest declares (empty when it declares no workspace).
pub fn members(ecosystem: Ecosystem, text: &str) -> Result<Members, ManifestError> {
    let file = ecosystem.root_manifest().to_string();
    Ok(match ecosystem {
        Ecosystem::Cargo => {
            #[derive(Deserialize)]
            struct Root {
                workspace: Option<Workspace>,
            }
            #[derive(Deserialize)]
            struct Workspace {
                #[serde(default)]
                members: Vec<String>,
                #[serde(default)]
                exclude: Vec<String>,
            }
            let root: Root = toml::from_str(text).map_err(|e| ManifestError::Toml {
                file,
                message: e.message().to_string(),
            })?;
            match root.workspace {
                Some(w) => Members {
                    include: clean_patterns(w.members),
                    exclude: clean_patterns(w.exclude),
                },
                None => Members::default(),
            }
        }
        Ecosystem::Npm => {
            #[derive(Deserialize)]
            #[serde(untagged)]
            enum Workspaces {
                List(Vec<String>),
                Object {
                    #[serde(default)]
                    packages: Vec<String>,
                },
            }
            #[derive(Deserialize)]
            struct Root {
                workspaces: Option<Workspaces>,
            }
            let root: Root = serde_json::from_str(text).map_err(|e| ManifestError::Json {
                file,
                message: e.to_string(),
            })?;
            let patterns = match root.workspaces {
                Some(Workspaces::List(p)) | Some(Workspaces::Object { packages: p }) => p,
                None => Vec::new(),
            };
            split_negations(patterns)
        }
        Ecosystem::Pnpm => {
            #[derive(Deserialize)]
            struct Root {
                #[serde(default)]
                packages: Vec<String>,
            }
            let root: Option<Root> =
                serde_yaml::from_str(text).map_err(|e| ManifestError::Yaml {
                    file,
                    message: e.to_string(),
                })?;
            split_negations(root.map(|r| r.packages).unwrap_or_default())
        }
        Ecosystem::Go => Members {
            include: clean_patterns(go_work_uses(text)),
            exclude: Vec::new(),
        },
    })
}

/// `use ./a` and `use ( ./a \n ./b )` directives of a go.work file (comments and quotes
/// removed). The format is Go's own, with no maintained Rust parser; it is line-based.
fn go_work_uses(text: &str) -> Vec<String> {
    let mut uses = Vec::new();
    let mut in_block = false;
    for raw in text.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if in_block {
            if line.starts_with(')') {
                in_block = false;
            } else if !line.is_empty() {
                uses.push(line.trim_matches(['"', '`']).to_string());
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("use") {
            let rest = rest.trim();
            if rest.starts_with('(') {
                in_block = !rest.contains(')');
            } else if !rest.is_empty() && rest.len() < line.len() - 2 {
                uses.push(rest.trim_matches(['"', '`']).to_string());
            }
        }
    }
    uses
}

fn split_negations(patterns: Vec<String>) -> Members {
    let (exclude, include): (Vec<String>, Vec<String>) = patterns
        .into_iter()
        .partition(|p| p.trim().starts_with('!'));
    Members {
        include: clean_patterns(include),
        exclude: clean_patterns(
            exclude
                .into_iter()
                .map(|p| p.trim().trim_start_matches('!').to_string())
                .collect(),
        ),
    }
}

/// `./crates/*/` → `crates/*`, `crates/./a` → `crates/a`; the root itself (`.`), absolute
/// patterns and patterns with a `..` segment anywhere (`crates/../x`: GitHub's contents API
/// takes no such path) are dropped. At most [`MAX_PATTERNS`] are kept.
fn clean_patterns(patterns: Vec<String>) -> Vec<String> {
    let total = patterns.len();
    let cleaned: Vec<String> = patterns
        .into_iter()
        .filter_map(|p| {
            let p = p.trim();
            if p.starts_with('/') || p.starts_with('\\') || p.len() > MAX_PATTERN_BYTES {
                return None;
            }
            let mut segments = Vec::new();
            for segment in p.split('/') {
                match segment {
                    "" | "." => {}
                    ".." => return None,
                    s => segments.push(s),
                }
            }
            (!segments.is_empty()).then(|| segments.join("/"))
        })
        .take(MAX_PATTERNS)
        .collect();
    if total > MAX_PATTERNS {
        tracing::warn!(
            declared = total,
            kept = cleaned.len(),
            "a workspace manifest declares more member patterns than are read; the rest are ignored"
        );
    }
    cleaned
}

fn glob_set(patterns: &[String]) -> Option<GlobSet> {
    if patterns.is_empty() {
        return None;
    }
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        // `*` stays within a segment, as in the tools' own globs.
        if let Ok(glob) = globset::GlobBuilder::new(p).literal_separator(true).build() {
            builder.add(glob);
        }
    }
    builder.build().ok()
}

/// Where a pattern's directories are listed from: its literal leading segments (`crates/*` →
/// `crates`, `packages/**` → `packages`), or `None` for a pattern without a wildcard (it is a
/// directory itself).
pub fn listing_parent(pattern: &str) -> Option<String> {
    if !pattern.contains(['*', '?', '[', '{']) {
        return None;
    }
    let literal: Vec<&str> = pattern
        .split('/')
        .take_while(|s| !s.contains(['*', '?', '[', '{']))
        .collect();
    Some(literal.join("/"))
}

/// Whether a wildcard pattern can match a direct child of its listing parent (`crates/*`), as
/// opposed to deeper directories, which are not listed. Compiled once per pattern.
pub struct ChildMatcher {
    glob: Option<globset::GlobMatcher>,
    /// `packages/**`: every directory below `packages`.
    below: Option<String>,
}

impl ChildMatcher {
    pub fn new(pattern: &str) -> ChildMatcher {
        ChildMatcher {
            glob: globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .ok()
                .map(|g| g.compile_matcher()),
            below: pattern.strip_suffix("/**").map(str::to_string),
        }
    }

    pub fn matches(&self, dir: &str) -> bool {
        self.glob.as_ref().is_some_and(|g| g.is_match(dir))
            || self.below.as_deref().is_some_and(|b| dir.starts_with(b))
    }
}

/// A member's name and description from its own manifest (`None`: none given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageInfo {
    pub name: Option<String>,
    pub description: Option<String>,
}

pub fn package_info(ecosystem: Ecosystem, text: &str) -> PackageInfo {
    match ecosystem {
        Ecosystem::Cargo => {
            // `description.workspace = true` is a table, not a string: no description.
            let value: Option<toml::Table> = toml::from_str(text).ok();
            let package = value.as_ref().and_then(|v| v.get("package"));
            let text_of = |key: &str| {
                package
                    .and_then(|p| p.get(key))
                    .and_then(|v| v.as_str())
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
            };
            PackageInfo {
                name: text_of("name"),
                description: text_of("description"),
            }
        }
        Ecosystem::Npm | Ecosystem::Pnpm => {
            let value: Option<serde_json::Value> = serde_json::from_str(text).ok();
            let text_of = |key: &str| {
                value
                    .as_ref()
                    .and_then(|v| v.get(key))
                    .and_then(|v| v.as_str())
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
            };
            PackageInfo {
                name: text_of("name"),
                description: text_of("description"),
            }
        }
        Ecosystem::Go => PackageInfo {
            name: text
                .lines()
                .map(|l| l.split("//").next().unwrap_or("").trim())
                .find_map(|l| l.strip_prefix("module "))
                .map(|m| m.trim().trim_matches('"'))
                .and_then(|m| {
                    // `…/api/v2`: the major-version suffix is not the name.
                    let mut parts = m.rsplit('/');
                    let last = parts.next()?;
                    let major = last.len() > 1
                        && last.starts_with('v')
                        && last[1..].bytes().all(|b| b.is_ascii_digit());
                    if major {
                        parts.next()
                    } else {
                        Some(last)
                    }
                })
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            description: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_member(members: &Members, dir: &str) -> bool {
        CompiledMembers::new(members).contains(dir)
    }

    #[test]
    fn cargo_members_and_excludes() {
        let m = members(
            Ecosystem::Cargo,
            r#"
[workspace]
resolver = "2"
members = ["lambda-runtime", "lambda-events", "./examples/*/", "."]
exclude = ["examples/old"]
"#,
        )
        .unwrap();
        assert_eq!(m.include, ["lambda-runtime", "lambda-events", "examples/*"]);
        assert_eq!(m.exclude, ["examples/old"]);
        assert!(is_member(&m, "examples/basic"));
        assert!(!is_member(&m, "examples/old"));
        assert!(
            !is_member(&m, "examples/basic/nested"),
            "* stays in one segment"
        );
        assert!(members(Ecosystem::Cargo, "[package]\nname = \"x\"\n")
            .unwrap()
            .is_empty());
        assert!(matches!(
            members(Ecosystem::Cargo, "[workspace\n"),
            Err(ManifestError::Toml { .. })
        ));
    }

    #[test]
    fn npm_and_yarn_workspaces_and_pnpm_packages() {
        let npm = members(
            Ecosystem::Npm,
            r#"{"name":"root","workspaces":["packages/*","apps/web"]}"#,
        )
        .unwrap();
        assert_eq!(npm.include, ["packages/*", "apps/web"]);
        let yarn = members(
            Ecosystem::Npm,
            r#"{"workspaces":{"packages":["packages/*"],"nohoist":["**/react"]}}"#,
        )
        .unwrap();
        assert_eq!(yarn.include, ["packages/*"]);
        assert!(members(Ecosystem::Npm, r#"{"name":"x"}"#)
            .unwrap()
            .is_empty());
        let pnpm = members(
            Ecosystem::Pnpm,
            "packages:\n  - 'packages/*'\n  - 'components/**'\n  - '!**/test/**'\n",
        )
        .unwrap();
        assert_eq!(pnpm.include, ["packages/*", "components/**"]);
        assert_eq!(pnpm.exclude, ["**/test/**"]);
        assert!(is_member(&pnpm, "components/ui/button"));
        assert!(!is_member(&pnpm, "components/test/x"));
        assert!(members(Ecosystem::Pnpm, "").unwrap().is_empty());
    }

    #[test]
    fn go_work_uses() {
        let m = members(
            Ecosystem::Go,
            "go 1.22\n\nuse ./cmd/tool // the CLI\n\nuse (\n\t./api\n\t\"./internal/store\"\n)\n",
        )
        .unwrap();
        assert_eq!(m.include, ["cmd/tool", "api", "internal/store"]);
    }

    #[test]
    fn member_names_and_descriptions() {
        let cargo = package_info(
            Ecosystem::Cargo,
            "[package]\nname = \"lambda_runtime\"\ndescription = \"AWS Lambda Runtime\"\nversion.workspace = true\n",
        );
        assert_eq!(cargo.name.as_deref(), Some("lambda_runtime"));
        assert_eq!(cargo.description.as_deref(), Some("AWS Lambda Runtime"));
        let inherited = package_info(
            Ecosystem::Cargo,
            "[package]\nname = \"x\"\ndescription.workspace = true\n",
        );
        assert_eq!(inherited.description, None);
        let npm = package_info(
            Ecosystem::Npm,
            r#"{"name":"@acme/ui","description":"Buttons"}"#,
        );
        assert_eq!(npm.name.as_deref(), Some("@acme/ui"));
        let go = package_info(Ecosystem::Go, "module github.com/acme/api/v2\n\ngo 1.22\n");
        assert_eq!(go.name.as_deref(), Some("api"));
        assert_eq!(
            package_info(Ecosystem::Npm, "not json"),
            PackageInfo::default()
        );
    }

    #[test]
    fn patterns_are_normalized_capped_and_never_leave_the_repository() {
        let cleaned = clean_patterns(
            [
                "./crates/./api/",
                "crates/../x",
                "a//b",
                "/abs",
                "..",
                ".",
                "x/..",
                "ok/*",
            ]
            .map(String::from)
            .to_vec(),
        );
        assert_eq!(cleaned, ["crates/api", "a/b", "ok/*"]);
        let huge = format!("{{{}}}", vec!["x"; 200].join(","));
        assert!(
            clean_patterns(vec![huge]).is_empty(),
            "a huge alternation is dropped"
        );
        let many: Vec<String> = (0..5_000).map(|i| format!("m/{i}")).collect();
        let members = Members {
            include: clean_patterns(many),
            exclude: vec!["m/7".into()],
        };
        assert_eq!(members.include.len(), MAX_PATTERNS);
        let compiled = CompiledMembers::new(&members);
        assert!(compiled.contains("m/999"));
        assert!(!compiled.contains("m/7"), "excluded");
        assert!(!compiled.contains("m/1000"), "past the cap");
        assert!(!CompiledMembers::new(&Members::default()).contains("m/1"));
    }

    #[test]
    fn listing_parents() {
        assert_eq!(listing_parent("crates/*").as_deref(), Some("crates"));
        assert_eq!(listing_parent("packages/**").as_deref(), Some("packages"));
        assert_eq!(listing_parent("*").as_deref(), Some(""));
        assert_eq!(listing_parent("tools/xtask"), None);
        assert!(ChildMatcher::new("crates/*").matches("crates/a"));
        assert!(!ChildMatcher::new("crates/*").matches("other/a"));
        assert!(ChildMatcher::new("packages/**").matches("packages/a"));
    }
}
