//! The team's own word on its modules: `.github/chronicle.yml` in the repository, read with the
//! repository context, in the manner of `.github/labeler.yml` and `.github/release-drafter.yml`.
//!
//! ```yaml
//! modules:
//!   api:
//!     paths: ["api/**"]
//!     description: The public HTTP API.
//!     notes: |
//!       Retries are bounded on purpose (#451); ask @alice before changing them.
//!     ignore: ["api/generated/**"]
//!   web: ["web/**"]
//! ```
//!
//! Each module is written as in the central modules config (a glob list, or a mapping with
//! `paths`, `description`, `notes` and `ignore`). When the file is present and valid it replaces
//! the central config's entry for that repository; when it is invalid the central config is kept
//! and the error is logged with the file's name and the place.

use std::borrow::Cow;

use chronicle_domain::RepoName;

use chronicle_domain::context::RepoContext;
use serde_yaml::Value;

use crate::{parse_repo, ModulesConfig, RepoModules, TaggingError};

/// Where the file is in the repository.
pub const TEAM_FILE: &str = ".github/chronicle.yml";
/// The largest file read: a modules file, not a document.
pub const TEAM_FILE_MAX_BYTES: usize = chronicle_domain::context::MAX_TEAM_FILE_BYTES;

/// The modules of a repository's `.github/chronicle.yml`; `None` for a file that configures
/// nothing (empty, or only comments).
pub fn parse(text: &str, repo: &RepoName) -> Result<Option<RepoModules>, TaggingError> {
    let origin = format!("{TEAM_FILE} of {repo}");
    if text.len() > TEAM_FILE_MAX_BYTES {
        return Err(TaggingError::Config {
            origin,
            location: "the file".into(),
            message: format!("{} bytes, at most {TEAM_FILE_MAX_BYTES}", text.len()),
        });
    }
    let value: Value = serde_yaml::from_str(text).map_err(|source| TaggingError::Yaml {
        origin: origin.clone(),
        source,
    })?;
    let top = match value {
        Value::Null => return Ok(None),
        Value::Mapping(m) => m,
        _ => {
            return Err(TaggingError::Config {
                origin,
                location: "top level".into(),
                message: "expected a mapping with `modules:`".into(),
            })
        }
    };
    let mut modules = None;
    for (key, value) in top {
        match key.as_str() {
            Some("modules") => modules = Some(value),
            _ => {
                return Err(TaggingError::Config {
                    origin,
                    location: "top level".into(),
                    message: format!(
                        "unknown key {}, expected modules",
                        serde_yaml::to_string(&key).unwrap_or_default().trim_end()
                    ),
                })
            }
        }
    }
    match modules {
        None | Some(Value::Null) => Ok(None),
        Some(value) => parse_repo(repo.as_str(), value, &origin).map(Some),
    }
}

/// A repository's modules as Chronicle uses them: its `.github/chronicle.yml` when the context
/// holds a valid one, else the central config's entry.
#[derive(Debug)]
pub struct Effective<'a> {
    pub modules: Option<Cow<'a, RepoModules>>,
    /// The repository has modules of its own (its file, or its own central entry): workspace
    /// packages then do not name modules.
    pub own: bool,
    /// The modules are the repository's file's: its descriptions are the team's own word.
    pub team: bool,
    /// Why the repository's file was not used, when it is invalid.
    pub error: Option<TaggingError>,
}

impl Effective<'_> {
    pub fn config(&self) -> Option<&RepoModules> {
        self.modules.as_deref()
    }
}

/// The modules of `repo`: from its `.github/chronicle.yml` (in `context`) when valid, else from
/// `central`. An invalid file is logged, once per call, and the central config kept.
pub fn effective<'a>(
    central: &'a ModulesConfig,
    repo: &RepoName,
    context: Option<&RepoContext>,
) -> Effective<'a> {
    let central_entry = Effective {
        modules: central.for_repo(repo).map(Cow::Borrowed),
        own: central.has_own_entry(repo),
        team: false,
        error: None,
    };
    let Some(text) = context.and_then(|c| c.team_file.as_deref()) else {
        return central_entry;
    };
    match parse(text, repo) {
        Ok(Some(modules)) => Effective {
            modules: Some(Cow::Owned(modules)),
            own: true,
            team: true,
            error: None,
        },
        Ok(None) => central_entry,
        Err(error) => {
            tracing::error!(repo = %repo, error = %error, "the repository's {TEAM_FILE} is invalid; the central modules config is used");
            Effective {
                error: Some(error),
                ..central_entry
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> RepoName {
        RepoName::parse("acme/widgets").unwrap()
    }

    fn context(text: &str) -> RepoContext {
        RepoContext {
            team_file: Some(text.to_string()),
            ..Default::default()
        }
    }

    #[test]
    fn the_file_replaces_the_central_entry_with_notes_and_ignores() {
        let central = ModulesConfig::from_yaml("\"*\":\n  docs: [\"*.md\"]\n").unwrap();
        let file = "modules:\n  api:\n    paths: [\"api/**\"]\n    description: The public API.\n    notes: |\n      Ask @alice before changing retries.\n    ignore: [\"api/generated/**\"]\n  web: [\"web/**\"]\n";
        let ctx = context(file);
        let e = effective(&central, &repo(), Some(&ctx));
        assert!(e.own && e.error.is_none());
        let m = e.config().unwrap();
        assert_eq!(
            m.modules_of("api/src/lib.rs")
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>(),
            ["api"]
        );
        assert!(m.modules_of("api/generated/client.rs").is_empty());
        assert!(
            m.modules_of("README.md").is_empty(),
            "the central entry is replaced"
        );
        assert_eq!(
            m.notes_of("api"),
            Some("Ask @alice before changing retries.")
        );
        assert_eq!(m.description_of("api"), Some("The public API."));
        assert_eq!(m.paths_of("api").unwrap(), ["api/**", "!api/generated/**"]);
    }

    #[test]
    fn an_invalid_file_keeps_the_central_config_and_says_where() {
        let central = ModulesConfig::from_yaml("\"*\":\n  docs: [\"*.md\"]\n").unwrap();
        for (file, expected) in [
            (
                "modules:\n  api:\n    paths: [\"api/**\"]\n    colour: red\n",
                "unknown key colour",
            ),
            ("modules:\n  api: [\"\"]\n", "empty glob"),
            ("modules: [api]\n", "expected a mapping of module to globs"),
            ("labels:\n  x: y\n", "unknown key labels"),
            (
                "modules:\n  api: [\"api/**\"\n",
                ".github/chronicle.yml of acme/widgets",
            ),
            (
                "modules:\n  api:\n    paths: [\"api/**\"]\n    notes: 12\n",
                "notes is a number",
            ),
        ] {
            let ctx = context(file);
            let e = effective(&central, &repo(), Some(&ctx));
            let error = e.error.as_ref().expect(file).to_string();
            assert!(error.contains(expected), "{file}: {error}");
            assert!(error.contains(TEAM_FILE), "{error}");
            assert_eq!(
                e.config().unwrap().modules_of("README.md").len(),
                1,
                "the central config is kept"
            );
            assert!(!e.own);
        }
        let huge = format!(
            "modules:\n  api: [\"api/**\"]\n#{}\n",
            "x".repeat(TEAM_FILE_MAX_BYTES)
        );
        assert!(parse(&huge, &repo()).is_err());
        // No file, or an empty one: the central config.
        assert!(effective(&central, &repo(), None).error.is_none());
        let empty = context("# nothing yet\n");
        assert!(effective(&central, &repo(), Some(&empty))
            .config()
            .is_some());
    }
}
