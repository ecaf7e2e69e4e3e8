//! What kind of change a PR is, from what every PR carries (title, author, labels): the
//! conventional-commit type when the title has one, else its labels, and two kinds pages fold
//! rather than list: `deps` (dependency bots, `chore(deps)`, "Bump x from 1 to 2") and
//! `release` (`chore(release)`, release-please, changesets, "Release v1.2.3"). Pure.

use std::sync::LazyLock;

use regex::Regex;

use crate::conventional_type;

/// Dependency updates: folded into one line per month on a page.
pub const DEPS: &str = "deps";
/// Releases and version bumps: folded like dependency updates.
pub const RELEASE: &str = "release";

/// Kinds a page folds instead of listing one by one.
pub fn is_folded(kind: Option<&str>) -> bool {
    matches!(kind, Some(DEPS) | Some(RELEASE))
}

/// A bot account (`dependabot[bot]`, `renovate-bot`, `github-actions`): never an expert.
pub fn is_bot(login: &str) -> bool {
    let l = login.trim().to_ascii_lowercase();
    l.ends_with("[bot]")
        || l.ends_with("-bot")
        || l.ends_with("_bot")
        || matches!(
            l.as_str(),
            "dependabot"
                | "dependabot-preview"
                | "renovate"
                | "greenkeeper"
                | "snyk-bot"
                | "pyup-bot"
                | "depfu"
                | "github-actions"
                | "imgbot"
                | "allcontributors"
                | "mergify"
                | "codecov-io"
                | "web-flow"
                | "ghost"
        )
}

fn is_dependency_bot(login: &str) -> bool {
    let l = login.trim().to_ascii_lowercase();
    [
        "dependabot",
        "renovate",
        "greenkeeper",
        "snyk",
        "pyup",
        "depfu",
        "scala-steward",
    ]
    .iter()
    .any(|b| l.starts_with(b))
}

/// The PR's kind: `deps`, `release`, else the title's conventional type (`feat`, `fix`, …),
/// else one its labels imply (`bug` → `fix`, `enhancement` → `feat`, `documentation` →
/// `docs`), else none.
pub fn classify(title: &str, author: &str, labels: &[String]) -> Option<String> {
    static DEPS_TITLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?ix)^\s*(?:\[[^\]]*\]\s*)?(?:[a-z]+\((?:deps|deps-dev|dependencies|dependency)\)!?:\s*.*
            |(?:[a-z]+(?:\([^)]*\))?!?:\s*)?(?:bump|update|upgrade)s?\s+\S+.*\s+from\s+\S+\s+to\s+\S+
            |(?:[a-z]+(?:\([^)]*\))?!?:\s*)?update\s+(?:dependency|module|rust\s+crate|gem|npm\s+package|docker\s+tag|actions?)\s+\S+.*
            |(?:[a-z]+(?:\([^)]*\))?!?:\s*)?update\s+(?:all\s+)?(?:non-major\s+)?dependencies\b.*
            |(?:[a-z]+(?:\([^)]*\))?!?:\s*)?lock\s+file\s+maintenance.*)$",
        )
        .expect("a valid pattern")
    });
    static RELEASE_TITLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?ix)^\s*(?:[a-z]+\(release\)!?:\s*.*
            |chore(?:\([^)]*\))?:\s*release\s+\S*\d.*
            |(?:release|releasing|prepare\s+(?:for\s+)?release|prep\s+release|cut\s+release)\b.*\d.*
            |(?:chore(?:\([^)]*\))?:\s*)?(?:bump|update|set)\s+(?:the\s+)?(?:crate\s+|package\s+)?version(?:s)?\b.*
            |version\s+packages?\b.*
            |v?\d+\.\d+\.\d+(?:[-+.][\w.]+)?)\s*$",
        )
        .expect("a valid pattern")
    });
    let labels: Vec<String> = labels.iter().map(|l| l.trim().to_lowercase()).collect();
    let has = |names: &[&str]| labels.iter().any(|l| names.contains(&l.as_str()));
    if is_dependency_bot(author)
        || DEPS_TITLE.is_match(title)
        || has(&[
            "dependencies",
            "deps",
            "dependency",
            "renovate",
            "dependabot",
        ])
    {
        return Some(DEPS.into());
    }
    if RELEASE_TITLE.is_match(title)
        || has(&["release", "autorelease: pending", "autorelease: tagged"])
    {
        return Some(RELEASE.into());
    }
    if let (Some(kind), _) = conventional_type(title) {
        return Some(kind);
    }
    if has(&["bug", "bugfix", "type: bug", "kind/bug", "fix"]) {
        return Some("fix".into());
    }
    if has(&[
        "enhancement",
        "feature",
        "type: feature",
        "kind/feature",
        "new feature",
    ]) {
        return Some("feat".into());
    }
    if has(&["documentation", "docs", "type: docs", "kind/documentation"]) {
        return Some("docs".into());
    }
    if has(&["refactor", "refactoring", "kind/cleanup", "cleanup"]) {
        return Some("refactor".into());
    }
    from_verb(title)
}

/// The kind a plain title's first word implies ("Fix …", "Add …", "Refactor …"), for the many
/// repositories that use neither conventional commits nor labels.
fn from_verb(title: &str) -> Option<String> {
    let word = title
        .trim_start_matches(|c: char| !c.is_alphabetic())
        .split(|c: char| !c.is_alphanumeric())
        .next()?
        .to_lowercase();
    let kind = match word.as_str() {
        "fix" | "fixes" | "fixed" | "fixing" | "correct" | "corrects" | "resolve" | "resolves"
        | "repair" | "handle" | "prevent" | "avoid" => "fix",
        "add" | "adds" | "added" | "implement" | "implements" | "introduce" | "introduces"
        | "support" | "supports" | "allow" | "allows" | "enable" | "enables" | "new" => "feat",
        "refactor" | "refactors" | "refactored" | "simplify" | "simplifies" | "rename"
        | "renames" | "move" | "moves" | "extract" | "cleanup" | "clean" | "restructure"
        | "reorganize" | "split" | "remove" | "removes" | "drop" | "drops" | "delete"
        | "deletes" => "refactor",
        "speed" | "optimize" | "optimise" | "optimizes" | "optimises" | "faster" => "perf",
        "harden" | "hardens" | "secure" => "fix",
        "doc" | "docs" | "document" | "documents" | "documentation" | "readme" => "docs",
        "test" | "tests" => "test",
        _ => return None,
    };
    Some(kind.into())
}

/// A breaking change: `feat!:` / `fix(api)!:` in the title, or a `breaking` label.
pub fn is_breaking(title: &str, labels: &[String]) -> bool {
    static BANG: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s*[A-Za-z]+(?:\([^()]*\))?!:").expect("a valid pattern"));
    BANG.is_match(title)
        || labels.iter().any(|l| {
            let l = l.to_lowercase();
            l.contains("breaking") || l == "semver-major" || l == "major"
        })
}

/// The family a kind counts in on a module's story.
pub fn family(kind: Option<&str>) -> &'static str {
    match kind {
        Some("feat") => "features",
        Some("fix") => "fixes",
        Some("refactor" | "perf" | "style") => "refactors",
        Some("docs") => "docs",
        Some(DEPS) => "dependency updates",
        Some(RELEASE) => "releases",
        Some("test" | "ci" | "build" | "chore" | "revert" | "security") => "maintenance",
        _ => "other changes",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(title: &str, author: &str, labels: &[&str]) -> Option<String> {
        let labels: Vec<String> = labels.iter().map(|s| s.to_string()).collect();
        classify(title, author, &labels)
    }

    #[test]
    fn dependency_updates_by_bot_title_or_label() {
        for (title, author, labels) in [
            (
                "Bump tokio from 1.47.0 to 1.48.0",
                "dependabot[bot]",
                &[][..],
            ),
            (
                "chore(deps): update rust crate serde to v1.0.228",
                "renovate[bot]",
                &[],
            ),
            ("build(deps-dev): bump eslint from 8.1 to 9.0", "alice", &[]),
            (
                "Bump the cargo group across 1 directory with 3 updates",
                "dependabot[bot]",
                &[],
            ),
            ("Update dependency typescript to v5.6.3", "bob", &[]),
            ("Upgrade hyper from 0.14 to 1.0", "carol", &[]),
            ("Update all non-major dependencies", "renovate-bot", &[]),
            ("Refresh lockfile", "dave", &["dependencies"]),
        ] {
            assert_eq!(
                kind(title, author, labels).as_deref(),
                Some(DEPS),
                "{title}"
            );
        }
    }

    #[test]
    fn releases_and_version_bumps() {
        for title in [
            "chore(release): 1.4.0",
            "chore(main): release 0.9.1",
            "chore: release v2.0.0",
            "Release v1.2.3",
            "Prepare release 0.8.0",
            "Bump version to 0.3.1",
            "Version Packages",
            "v1.0.0",
        ] {
            assert_eq!(
                kind(title, "alice", &[]).as_deref(),
                Some(RELEASE),
                "{title}"
            );
        }
    }

    #[test]
    fn conventional_types_then_labels_then_nothing() {
        assert_eq!(kind("feat(api): add x", "a", &[]).as_deref(), Some("feat"));
        assert_eq!(kind("fix!: drop v1", "a", &[]).as_deref(), Some("fix"));
        assert_eq!(
            kind("Handle empty bodies", "a", &["bug"]).as_deref(),
            Some("fix")
        );
        assert_eq!(
            kind("New flag", "a", &["enhancement"]).as_deref(),
            Some("feat")
        );
        assert_eq!(
            kind("Typos", "a", &["documentation"]).as_deref(),
            Some("docs")
        );
        assert_eq!(
            kind("Refactor the reader", "a", &[]).as_deref(),
            Some("refactor")
        );
        assert_eq!(
            kind("Fixes a panic on empty input", "a", &[]).as_deref(),
            Some("fix")
        );
        assert_eq!(
            kind("Add the Bedrock client", "a", &[]).as_deref(),
            Some("feat")
        );
        assert_eq!(
            kind("Handle empty bodies", "a", &[]).as_deref(),
            Some("fix")
        );
        assert_eq!(kind("Lambda runtime 2.0 groundwork", "a", &[]), None);
        // "release" inside ordinary prose is not a release.
        assert_eq!(
            kind("Fix the release notes link", "a", &[]).as_deref(),
            Some("fix")
        );
        assert_eq!(kind("Update README.md", "a", &[]), None);
    }

    #[test]
    fn breaking_changes_and_bots() {
        assert!(is_breaking("feat(api)!: drop v1", &[]));
        assert!(is_breaking("Drop v1", &["breaking-change".into()]));
        assert!(!is_breaking("feat: add v2", &[]));
        for bot in [
            "dependabot[bot]",
            "renovate-bot",
            "github-actions",
            "Mergify",
        ] {
            assert!(is_bot(bot), "{bot}");
        }
        assert!(!is_bot("octocat"));
        assert_eq!(family(Some("perf")), "refactors");
        assert_eq!(family(None), "other changes");
    }
}
