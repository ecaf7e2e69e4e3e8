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

/// The PR's kind, from the first that has an answer: `deps` and `release` (bots, titles,
/// labels); the title's conventional type (`feat`, `fix`, …); its labels (`bug` → `fix`,
/// `enhancement` → `feat`); the title's leading verb, past an area prefix (`net: add …` →
/// `feat`, see [`from_verb`]); the changed files (only docs → `docs`, only tests → `test`, only
/// CI → `ci`), which also overrule a verb that would call tests or docs a feature. `None` is
/// left for what none of these can place.
pub fn classify(title: &str, author: &str, labels: &[String], files: &[&str]) -> Option<String> {
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
            |release(?:\s+all\s+the\s+crates|\s+[\w-]+(?:(?:,\s*and\s+|,\s*|\s+and\s+)[\w-]+)+)?
            |(?:[\w./-]{1,40}:?\s+)?(?:version\s+)?v?\d+\.\d+(?:\.\d+)?(?:[-+.][\w.]+)?)\s*$",
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
    let by_files = from_files(files);
    match (from_verb(title), by_files) {
        (Some("feat" | "refactor" | "chore"), Some(files)) => Some(files.into()),
        (Some(verb), _) => Some(verb.into()),
        (None, files) => files.map(str::to_string),
    }
}

/// The kind a plain title's leading verb implies ("Fix …", "Add …", "Removed …"), for the many
/// repositories that use neither conventional commits nor labels. An area prefix (`net:`,
/// `runtime/io:`, `[docs]`) is skipped first; the verb is matched with its `-s`, `-es`, `-ed`,
/// `-d` and `-ing` forms.
fn from_verb(title: &str) -> Option<&'static str> {
    static AREA: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(?:\[[^\]]{1,40}\]\s*|[\w./-]{1,40}:\s+)+").expect("a valid pattern")
    });
    let rest = AREA.replace(title, "");
    let lower = rest.trim().to_lowercase();
    if lower.starts_with("don't ") || lower.starts_with("do not ") || lower.starts_with("dont ") {
        return Some("fix");
    }
    // The verb may follow an adverb or two: "Correctly handle …", "More clearly document …".
    lower
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .replace('-', "")
        })
        .filter(|w| !w.is_empty())
        .take(3)
        .find(|w| !is_adverb(w))
        .and_then(|word| stems(&word).find_map(verb_kind))
}

fn is_adverb(word: &str) -> bool {
    (word.ends_with("ly") && word.len() > 4 && word != "apply" && word != "supply")
        || matches!(
            word,
            "more" | "further" | "also" | "now" | "then" | "again" | "always" | "never" | "even"
        )
}

/// `word` and the stems it may be a form of: `adds` → `add`, `fixes` → `fix`, `added` → `add`,
/// `handled` → `handle`, `adding` → `add`, `making` → `make`.
fn stems(word: &str) -> impl Iterator<Item = String> {
    let strip = |suffix: &str, add: &str| {
        word.strip_suffix(suffix)
            .filter(|s| s.len() >= 2)
            .map(|s| format!("{s}{add}"))
    };
    let doubled = word
        .strip_suffix("ed")
        .or_else(|| word.strip_suffix("ing"))
        .filter(|s| {
            // Characters, not bytes: `丸ed` ends in two equal bytes of one character.
            let mut last = s.chars().rev();
            s.chars().count() >= 3 && last.next().is_some_and(|a| Some(a) == last.next())
        })
        .map(|s| {
            let mut t = s.to_string();
            t.pop();
            t
        });
    [
        Some(word.to_string()),
        strip("s", ""),
        strip("es", ""),
        strip("ed", ""),
        strip("d", ""),
        strip("ing", ""),
        strip("ing", "e"),
        strip("ies", "y"),
        strip("ied", "y"),
        doubled,
    ]
    .into_iter()
    .flatten()
}

/// The verb table: common English verbs a title starts with, by kind.
fn verb_kind(verb: String) -> Option<&'static str> {
    let kind = match verb.as_str() {
        "add" | "introduce" | "implement" | "support" | "allow" | "enable" | "new" | "create"
        | "expose" | "provide" | "extend" | "accept" | "improve" | "enhance" | "initial"
        | "init" | "let" | "teach" | "make" | "generate" | "port" | "expand" | "offer"
        | "export" | "reexport" | "derive" | "declare" | "show" | "ship" | "store" | "redirect"
        | "fallback" | "unseal" | "integrate" | "embed" | "register" | "bring" | "relax"
        | "give" | "log" | "made" | "include" | "start" => "feat",
        "fix" | "handle" | "avoid" | "prevent" | "correct" | "resolve" | "repair" | "patch"
        | "guard" | "ensure" | "restore" | "recover" | "stop" | "harden" | "secure"
        | "workaround" | "bugfix" | "hotfix" | "unbreak" | "check" | "validate" | "reject"
        | "respect" | "honor" | "honour" | "catch" | "protect" | "panic" | "return" | "require"
        | "enforce" | "limit" | "ignore" | "silence" | "sort" | "forbid" | "disallow"
        | "guarantee" | "respond" | "bug" => "fix",
        "remove" | "drop" | "rename" | "move" | "simplify" | "refactor" | "extract" | "cleanup"
        | "clean" | "restructure" | "reorganize" | "reorganise" | "split" | "delete"
        | "replace" | "rewrite" | "rework" | "unify" | "consolidate" | "inline" | "deduplicate"
        | "dedupe" | "tidy" | "use" | "switch" | "migrate" | "convert" | "deprecate"
        | "decouple" | "generalize" | "generalise" | "hide" | "reuse" | "prune" | "break"
        | "breakup" | "revamp" | "overhaul" | "isolate" => "refactor",
        "speed" | "optimize" | "optimise" | "faster" | "perf" | "reduce" | "cache" | "shrink"
        | "accelerate" => "perf",
        "doc" | "docs" | "document" | "documentation" | "readme" | "typo" | "clarify"
        | "comment" | "explain" | "describe" | "mention" | "tell" | "example" | "examples"
        | "reference" | "spelling" | "wording" | "grammar" | "guide" => "docs",
        "test" | "tests" | "testing" | "fuzz" | "benchmark" | "bench" => "test",
        "ci" | "workflow" => "ci",
        "format" | "fmt" | "lint" | "rustfmt" | "prettier" | "reformat" | "style" => "style",
        "build" | "compile" | "package" | "vendor" => "build",
        "revert" | "undo" | "rollback" => "revert",
        "update" | "upgrade" | "bump" | "change" | "tweak" | "adjust" | "set" | "configure"
        | "prepare" | "chore" | "maintain" | "misc" | "minor" | "pin" | "unpin" | "sync"
        | "regenerate" | "annotate" | "try" | "merge" => "chore",
        _ => return None,
    };
    Some(kind)
}

/// The kind a PR's files imply when they are all of one sort: docs, tests, or CI.
fn from_files(files: &[&str]) -> Option<&'static str> {
    let all = |f: fn(&str) -> bool| !files.is_empty() && files.iter().all(|p| f(p));
    if all(is_ci_path) {
        Some("ci")
    } else if all(is_test_path) {
        Some("test")
    } else if all(is_docs_path) {
        Some("docs")
    } else {
        None
    }
}

/// Documentation: Markdown, reStructuredText, and AsciiDoc files, and anything under a
/// `docs/` or `doc/` directory.
pub fn is_docs_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    [".md", ".mdx", ".rst", ".adoc"]
        .iter()
        .any(|ext| name.ends_with(ext))
        || lower
            .split('/')
            .rev()
            .skip(1)
            .any(|d| matches!(d, "docs" | "doc" | "documentation"))
}

/// Tests: under a `tests`/`test`/`__tests__`/`spec` directory, or named as a test
/// (`*_test.go`, `*.test.ts`, `*.spec.js`, `test_*.py`, `*_tests.rs`).
pub fn is_test_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let stem = name.split('.').next().unwrap_or(name);
    lower.split('/').rev().skip(1).any(|d| {
        matches!(
            d,
            "tests" | "test" | "__tests__" | "spec" | "testdata" | "fixtures"
        )
    }) || name.contains(".test.")
        || name.contains(".spec.")
        || stem.ends_with("_test")
        || stem.ends_with("_tests")
        || stem.starts_with("test_")
}

/// CI configuration: GitHub workflows and actions, GitLab, CircleCI, Travis, Buildkite.
pub fn is_ci_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.starts_with(".github/workflows/")
        || lower.starts_with(".github/actions/")
        || lower.starts_with(".circleci/")
        || lower.starts_with(".buildkite/")
        || lower == ".gitlab-ci.yml"
        || lower == ".travis.yml"
        || lower == "azure-pipelines.yml"
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
        classify(title, author, &labels, &[])
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
        assert_eq!(kind("Update README.md", "a", &[]).as_deref(), Some("chore"));
    }

    #[test]
    fn plain_titles_are_classified_by_their_leading_verb() {
        for (title, expected) in [
            ("Add type safe state extractor", "feat"),
            ("Introduces a retry budget", "feat"),
            ("Implemented streaming bodies", "feat"),
            ("Support HTTP/2 prior knowledge", "feat"),
            ("Improve error messages for bad config", "feat"),
            ("Avoid shared shutdown waiter contention", "fix"),
            ("Prevent a panic on empty input", "fix"),
            ("Don't leak the handle on drop", "fix"),
            ("Handle EINTR in accept", "fix"),
            ("Remove the deprecated builder", "refactor"),
            ("Rename Foo to Bar", "refactor"),
            ("Simplified the poll loop", "refactor"),
            ("Use a slab for timers", "refactor"),
            ("Replace the channel with a watch", "refactor"),
            ("Reduce allocations in the parser", "perf"),
            ("Speed up the scheduler", "perf"),
            ("Fix typo in README", "fix"),
            ("Clarify the shutdown docs", "docs"),
            ("Revert \"Add x\"", "revert"),
            ("CI workflow for arm64", "ci"),
            ("Format with rustfmt", "style"),
            ("Upgrade to edition 2024", "chore"),
        ] {
            assert_eq!(kind(title, "a", &[]).as_deref(), Some(expected), "{title}");
        }
    }

    #[test]
    fn an_area_prefix_is_not_the_verb() {
        for (title, expected) in [
            ("net: add TcpSocket::set_linger", "feat"),
            ("runtime/io: fix a missed wakeup", "fix"),
            ("[docs] Clarify the timeout semantics", "docs"),
            ("tokio-util: Remove the codec re-export", "refactor"),
        ] {
            assert_eq!(kind(title, "a", &[]).as_deref(), Some(expected), "{title}");
        }
    }

    /// Real titles of a repository without conventional commits: the verb after an adverb,
    /// hyphenated verbs, and releases named by crate and version.
    #[test]
    fn adverbs_hyphens_and_named_releases() {
        for (title, expected) in [
            ("Correctly handle HEAD requests", "fix"),
            ("More clearly document accepting multiple methods", "docs"),
            ("Re-export `http_body::Body`", "feat"),
            ("Panic on overlapping routes in `MethodRouter`", "fix"),
            ("Break up `extract.rs`", "refactor"),
            ("axum-extra: Version 0.3.1", RELEASE),
            ("axum-debug 0.3", RELEASE),
            ("Version 0.2.5", RELEASE),
            ("Release axum, axum-core, and axum-macros", RELEASE),
            ("Release", RELEASE),
            ("Merge dev into main", "chore"),
        ] {
            assert_eq!(kind(title, "a", &[]).as_deref(), Some(expected), "{title}");
        }
        // A title that only names things stays unclassified rather than guessed.
        assert_eq!(kind("Type safe routing", "a", &[]), None);
        assert_eq!(kind("Release lock on drop", "a", &[]), None);
        assert_eq!(kind("Release notes", "a", &[]), None);
        // Not a panic: two equal bytes that end one character are no doubled letter.
        assert_eq!(kind("丸ed the thing", "a", &[]), None);
    }

    #[test]
    fn the_files_decide_when_the_title_cannot() {
        let docs = ["README.md", "docs/guide/intro.md"];
        let tests = [
            "tests/it.rs",
            "src/net/tcp_test.go",
            "web/__tests__/a.test.ts",
        ];
        let ci = [".github/workflows/ci.yml"];
        assert_eq!(
            classify("Minor tweaks", "a", &[], &docs).as_deref(),
            Some("docs")
        );
        assert_eq!(
            classify("More cases", "a", &[], &tests).as_deref(),
            Some("test")
        );
        assert_eq!(
            classify("Pin the runner", "a", &[], &ci).as_deref(),
            Some("ci")
        );
        // "Add" is a feature, except when all it adds is tests or docs.
        assert_eq!(
            classify("Add tests for the parser", "a", &[], &tests).as_deref(),
            Some("test")
        );
        assert_eq!(
            classify("Add a guide", "a", &[], &docs).as_deref(),
            Some("docs")
        );
        // A fix stays a fix whatever it touched.
        assert_eq!(
            classify("Fix flaky test", "a", &[], &tests).as_deref(),
            Some("fix")
        );
        // Mixed files say nothing: the title has no verb either.
        assert_eq!(
            classify(
                "Lambda runtime 2.0 groundwork",
                "a",
                &[],
                &["src/a.rs", "docs/a.md"]
            ),
            None
        );
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
