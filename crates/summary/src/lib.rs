//! The summary paragraph of a narrative entry: what one merged PR changed, in a few sentences a
//! newcomer can read.
//!
//! Two ways to write it, behind one [`Summarizer`] trait:
//!
//! - [`extractive`] (the default, deterministic): the PR body's first meaningful paragraph after
//!   [`clean_body`] has removed what real bodies are full of (HTML comments, template headings and
//!   boilerplate sections, task lists, images and badges, `<details>` blocks, Dependabot and
//!   Renovate boilerplate), capped at [`SUMMARY_MAX_CHARS`] with a clean cut. An empty body gives
//!   the title and the areas the PR touches.
//! - [`LlmSummarizer`] (when `ANTHROPIC_API_KEY` is set): the Anthropic Messages API writes the
//!   paragraph from the title, cleaned body, labels, files and issues, with a per-attempt timeout,
//!   a bounded retry, and the extractive text as the fallback on any error.
//!
//! The conventional-commit type of the title (`feat:`, `fix(scope)!:`) becomes [`Summary::kind`]
//! either way. Nothing here is called on the webhook path; the summarize worker calls it once per
//! PR and stores the text on the row.

use std::sync::LazyLock;
use std::time::Instant;

use futures::future::BoxFuture;
use regex::Regex;

mod boilerplate;
pub mod clean;
pub mod decision;
mod inline;
pub mod kind;

/// The longest summary paragraph, in characters, ellipsis included.
pub const SUMMARY_MAX_CHARS: usize = 600;

// ---------------------------------------------------------------------------------------------
// Types.

/// What a summary is made from (all the worker knows about the PR).
#[derive(Debug, Clone, Copy, Default)]
pub struct SummaryInput<'a> {
    pub title: &'a str,
    pub body: Option<&'a str>,
    pub labels: &'a [String],
    /// Changed paths, most changed first.
    pub files: &'a [String],
    /// Linked issues, each `"title (state)"`.
    pub issues: &'a [String],
    /// The modules the PR was tagged with.
    pub modules: &'a [chronicle_domain::ModuleName],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// One paragraph, at most [`SUMMARY_MAX_CHARS`] characters.
    pub text: String,
    /// The title's conventional-commit type: `"feat"`, `"fix"`, …
    pub kind: Option<String>,
    pub source: SummarySource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummarySource {
    Extractive,
    /// `model` is the model that answered, as the API names it.
    Llm {
        model: String,
    },
    /// The model's own filter or guardrail withheld its answer (`reason`: the stop reason it
    /// gave, e.g. `content_filtered`): final for this input; the text is the extractive one.
    Withheld {
        model: String,
        reason: String,
    },
}

/// Writes a PR's summary paragraph. Never fails: an implementation that can fail falls back to
/// [`extractive`].
pub trait Summarizer: Send + Sync {
    /// The paragraph, in hand by `deadline`: a call that cannot answer by then falls back.
    fn summarize<'a>(
        &'a self,
        input: &'a SummaryInput<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Summary>;

    /// Calls refused for the model or the key since the last time this was asked (an operator
    /// must act: the `SummaryModelRefused` alarm), and zero again.
    fn take_refusals(&self) -> u64 {
        0
    }

    /// Answers the model's filter or guardrail withheld since the last time this was asked
    /// (`SummariesWithheld`), and zero again.
    fn take_withheld(&self) -> u64 {
        0
    }

    /// Who answers: the model (with its guardrail, were one configured), for what a withheld
    /// answer is final. `None` for a summarizer that asks no model.
    fn answerer(&self) -> Option<String> {
        None
    }
}

/// [`extractive`] behind the [`Summarizer`] trait.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractiveSummarizer;

impl Summarizer for ExtractiveSummarizer {
    fn summarize<'a>(
        &'a self,
        input: &'a SummaryInput<'a>,
        _deadline: Instant,
    ) -> BoxFuture<'a, Summary> {
        Box::pin(async move { extractive(input) })
    }
}

// ---------------------------------------------------------------------------------------------
// Conventional commits.

/// The types of the Conventional Commits / Angular convention, plus `deps` and `security`.
const CONVENTIONAL_TYPES: &[&str] = &[
    "feat", "fix", "docs", "style", "refactor", "perf", "test", "build", "ci", "chore", "revert",
    "deps", "security",
];

static CONVENTIONAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*([A-Za-z]+)(?:\([^()]*\))?!?:\s*(.*?)\s*$").expect("a valid pattern")
});

/// `feat: x`, `fix(scope)!: y` → `(Some("feat"), "x")`, `(Some("fix"), "y")`; anything else
/// (including an unknown type such as `WIP:` or `README:`) → `(None, title)`. The type is
/// lowercased; the rest is trimmed.
pub fn conventional_type(title: &str) -> (Option<String>, &str) {
    if let Some(c) = CONVENTIONAL.captures(title) {
        let kind = c[1].to_ascii_lowercase();
        let rest = c.get(2).map_or("", |m| m.as_str());
        if CONVENTIONAL_TYPES.contains(&kind.as_str()) && !rest.is_empty() {
            return (Some(kind), rest);
        }
    }
    (None, title.trim())
}

// ---------------------------------------------------------------------------------------------
// Body cleaning (see [`clean`]).

/// The body cleaned by [`clean::clean`], as Markdown: what the LLM prompt carries.
pub fn clean_body(body: &str) -> String {
    clean::clean(body).markdown()
}

pub fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

// ---------------------------------------------------------------------------------------------
// The extractive summary.

/// Deterministic: the cleaned body's first meaningful paragraph as inline Markdown (links and
/// emphasis reduced to their text, code spans kept, list items joined with "; "), or a
/// squash-merge list of commit subjects as a short list, capped at [`SUMMARY_MAX_CHARS`] with a
/// clean cut (word boundary + "…"). A body that adds nothing to the title says what changed,
/// from the files; with no files either, the summary is empty (never the title again).
///
/// Not meaningful: headings, code blocks, tables, trailers, paragraphs that only reference
/// issues ("Fixes #12"), placeholders ("N/A", "TBD") and the title again.
pub fn extractive(input: &SummaryInput) -> Summary {
    let (kind, title) = conventional_type(input.title);
    let title = if title.is_empty() { input.title } else { title };
    let from_body = input
        .body
        .map(|b| body_summary(&clean::clean(b), title))
        .unwrap_or_default();
    let text = if from_body.is_empty() {
        files_sentence(input.files)
    } else {
        from_body
    };
    Summary {
        text: cap(&text, SUMMARY_MAX_CHARS),
        kind,
        source: SummarySource::Extractive,
    }
}

/// A document's lead: its first meaningful paragraph (a README's "what this is" after its
/// title and badges), capped at `max` characters; `None` when it has none.
pub fn lead_paragraph(markdown: &str, max: usize) -> Option<String> {
    let text = body_summary(&clean::clean(markdown), "");
    (!text.is_empty()).then(|| cap(&text, max))
}

/// Most paths a files sentence names.
const FILES_NAMED: usize = 3;
/// Most commit subjects a squash-merge list keeps.
const SQUASH_ITEMS: usize = 5;

/// The summary [`extractive`] gives a PR whose body says nothing, from these files (capped as
/// a summary is): a module's entry names its own files with it, not the PR's first three.
pub fn files_summary(files: &[String]) -> String {
    cap(&files_sentence(files), SUMMARY_MAX_CHARS)
}

/// Whether a summary is [`files_summary`]'s: it names files, and says nothing of why.
pub fn is_files_summary(summary: &str) -> bool {
    summary.starts_with("Changes `")
}

/// What changed, from the files, for a body that says nothing the title does not: "Changes
/// `a.rs`, `b.rs` and 4 more files." Empty without files: never the title again.
fn files_sentence(files: &[String]) -> String {
    let files: Vec<&str> = files
        .iter()
        .map(|f| f.trim())
        .filter(|f| !f.is_empty())
        .collect();
    if files.is_empty() {
        return String::new();
    }
    let named: Vec<String> = files
        .iter()
        .take(FILES_NAMED)
        .map(|f| format!("`{}`", f.replace('`', "'")))
        .collect();
    let rest = files.len() - named.len();
    let tests = files[named.len()..].iter().any(|f| is_test_path(f));
    match rest {
        0 => format!("Changes {}.", join_and(&named)),
        _ => format!(
            "Changes {} and {rest} more {}{}.",
            named.join(", "),
            if rest == 1 { "file" } else { "files" },
            if tests { ", tests among them" } else { "" }
        ),
    }
}

fn is_test_path(path: &str) -> bool {
    path.split('/').any(|segment| {
        let s = segment.to_ascii_lowercase();
        s == "test"
            || s == "tests"
            || s == "__tests__"
            || s == "spec"
            || s.ends_with("_test.go")
            || s.ends_with("_test.rs")
            || s.contains(".test.")
            || s.contains(".spec.")
            || s.starts_with("test_")
    })
}

/// Squash-merge noise among commit subjects: merges, fixups, the web editor's defaults.
fn is_noise_subject(subject: &str) -> bool {
    static NOISE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)^(?:merge (?:branch|remote-tracking branch|pull request)\b|(?:fixup|squash|amend)!|wip\b|apply suggestions? from code review|update [\w./-]+$|address (?:review )?comments?$|fix(?:es)? (?:lint|typo|fmt|format(?:ting)?|clippy|ci)$|cargo fmt$|fmt$|lint$|review$|\.$)",
        )
        .expect("a valid pattern")
    });
    NOISE.is_match(subject.trim())
}

/// Alphanumerics only, lowercased: "Add X." and "add x" compare equal.
pub fn comparable(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The summary a cleaned body gives: its first meaningful paragraph that is not the title
/// again (a paragraph ending in ":" with the list after it), or, for a squash-merge list of
/// commit subjects, the subjects as one short list. Empty when the body adds nothing.
fn body_summary(cleaned: &clean::Cleaned, title: &str) -> String {
    let title = comparable(title);
    // With or without a conventional-commit prefix on either side.
    let same_as_title = |text: &str| {
        let c = comparable(conventional_type(text).1);
        c.is_empty() || c == title || comparable(text) == title
    };
    let paragraphs = cleaned.paragraphs();
    let mut i = 0;
    while i < paragraphs.len() {
        let p = &paragraphs[i];
        let plain = join_plain(&p.lines);
        if !is_meaningful(&plain) || same_as_title(&plain) {
            i += 1;
            continue;
        }
        if p.list {
            return squash_list(&paragraphs[i..], &title);
        }
        if plain.ends_with(':') {
            if let Some(next) = paragraphs.get(i + 1).filter(|n| n.list) {
                let mut lines = p.lines.clone();
                lines.extend(next.lines.iter().cloned());
                return paragraph_text(&lines);
            }
        }
        return paragraph_text(&p.lines);
    }
    String::new()
}

fn join_plain(lines: &[clean::Line]) -> String {
    let plain: Vec<&str> = lines.iter().map(|l| l.plain.as_str()).collect();
    collapse_whitespace(&plain.join(" "))
}

/// The list items from here on (up to the first prose paragraph) as "A; b; c and 2 more.",
/// without noise subjects, repeats, or the title.
fn squash_list(paragraphs: &[clean::Paragraph], title: &str) -> String {
    let mut subjects: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<String> = [title.to_string()].into();
    for p in paragraphs.iter().take_while(|p| p.list) {
        for line in &p.lines {
            let key = comparable(&line.plain);
            if key.is_empty() || is_noise_subject(&line.plain) || seen.contains(&key) {
                continue;
            }
            seen.insert(key);
            subjects.push(line.markdown.trim_end_matches(['.', ';']).to_string());
        }
    }
    if subjects.is_empty() {
        return String::new();
    }
    let more = subjects.len().saturating_sub(SQUASH_ITEMS);
    subjects.truncate(SQUASH_ITEMS);
    let mut text = subjects.join("; ");
    if let Some(first) = text.chars().next() {
        if first.is_lowercase() {
            text = first.to_uppercase().chain(text.chars().skip(1)).collect();
        }
    }
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text.push('.');
    text
}

/// A paragraph's lines as one line of prose: list items joined with "; ".
fn paragraph_text(lines: &[clean::Line]) -> String {
    let mut out = String::new();
    let mut previous_item = false;
    for line in lines {
        if line.markdown.is_empty() {
            continue;
        }
        if !out.is_empty() {
            let sentence_end = out.ends_with(['.', ';', ':', '!', '?']);
            if line.item && (previous_item || !sentence_end) && !out.ends_with(':') {
                out.push(';');
            }
            out.push(' ');
        }
        out.push_str(&line.markdown);
        previous_item = line.item;
    }
    collapse_whitespace(&out)
}

/// Has words, and is not only issue references or a placeholder.
fn is_meaningful(text: &str) -> bool {
    static ISSUE_REFS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)^(?:(?:(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?|related(?: to)?|refs?|see(?: also)?|part of|towards|addresses|connects? to|issues?|tickets?)\s*:?\s*)?(?:#\d+|[\w.-]+/[\w.-]+#\d+|https?://\S+/(?:issues|pull)/\d+\S*|[A-Z][A-Z0-9]+-\d+)[\s,;.]*(?:and\s+)?)+$",
        )
        .expect("a valid pattern")
    });
    const PLACEHOLDERS: &[&str] = &[
        "n/a",
        "na",
        "none",
        "nothing",
        "tbd",
        "todo",
        "wip",
        "no description",
        "no description provided",
        "see title",
        "title says it all",
    ];
    if !text.chars().any(char::is_alphabetic) {
        return false;
    }
    let bare = text.trim().trim_end_matches(['.', '!']).to_lowercase();
    !ISSUE_REFS.is_match(text.trim()) && !PLACEHOLDERS.contains(&bare.as_str())
}

pub use chronicle_domain::cap;

pub fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

// The Messages API is in `anthropic`.

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(title: &'a str, body: Option<&'a str>) -> SummaryInput<'a> {
        SummaryInput {
            title,
            body,
            ..SummaryInput::default()
        }
    }

    /// The body of the real recorded webhook `pull_request.closed.1` (tests/fixtures).
    fn fixture_body() -> String {
        let payload: serde_json::Value = serde_json::from_str(include_str!(
            "../../../tests/fixtures/github/webhooks/pull_request.closed.1.json"
        ))
        .unwrap();
        payload["pull_request"]["body"]
            .as_str()
            .expect("the fixture has a body")
            .to_string()
    }

    // --- real bodies (fixtures) ---

    #[test]
    fn the_fixture_body_is_kept_whole_and_is_its_own_summary() {
        let body = fixture_body();
        assert_eq!(
            body,
            "This is a pretty simple change that we need to pull into master."
        );
        assert_eq!(clean_body(&body), body);
        let summary = extractive(&input(
            "Update the README with new information.",
            Some(&body),
        ));
        assert_eq!(summary.text, body);
        assert_eq!(summary.kind, None);
        assert_eq!(summary.source, SummarySource::Extractive);
    }

    // --- hand-written examples (not recorded: written here to look like the real thing) ---

    /// HAND-WRITTEN: a typical GitHub PR template (the widely copied "Description / Type of
    /// change / How Has This Been Tested? / Checklist" one), filled in the way people do.
    const TEMPLATE_BODY: &str = "<!-- Thanks for sending a pull request! Please fill in the sections below. -->\r\n\
\r\n\
# Description\r\n\
\r\n\
<!-- Please include a summary of the change and which issue is fixed. -->\r\n\
Retries to the Notion API now honour `Retry-After` instead of a fixed\r\n\
one-second sleep, so a throttled worker backs off for as long as Notion asks.\r\n\
\r\n\
Fixes #412\r\n\
\r\n\
## Type of change\r\n\
\r\n\
Please delete options that are not relevant.\r\n\
\r\n\
- [x] Bug fix (non-breaking change which fixes an issue)\r\n\
- [ ] New feature (non-breaking change which adds functionality)\r\n\
- [ ] Breaking change (fix or feature that would cause existing functionality to not work as expected)\r\n\
- [ ] This change requires a documentation update\r\n\
\r\n\
# How Has This Been Tested?\r\n\
\r\n\
Please describe the tests that you ran to verify your changes.\r\n\
\r\n\
- [x] Unit tests\r\n\
- [x] Against the Notion stand-in\r\n\
\r\n\
**Test Configuration**:\r\n\
* Toolchain: 1.85\r\n\
\r\n\
## Screenshots (if appropriate):\r\n\
\r\n\
<img width=\"612\" alt=\"before\" src=\"https://user-images.githubusercontent.com/583231/before.png\">\r\n\
https://github.com/user-attachments/assets/0f1e6a52-9a4b-4c1e-8d3f-2b1c9e7d5a10\r\n\
\r\n\
# Checklist:\r\n\
\r\n\
- [x] My code follows the style guidelines of this project\r\n\
- [x] I have performed a self-review of my code\r\n\
- [ ] I have made corresponding changes to the documentation\r\n\
- [ ] My changes generate no new warnings\r\n";

    #[test]
    fn a_pr_template_is_reduced_to_what_the_author_wrote() {
        assert_eq!(
            clean_body(TEMPLATE_BODY),
            "Retries to the Notion API now honour `Retry-After` instead of a fixed\n\
             one-second sleep, so a throttled worker backs off for as long as Notion asks.\n\
             \n\
             Fixes #412"
        );
        let summary = extractive(&input(
            "fix(notion): honour Retry-After",
            Some(TEMPLATE_BODY),
        ));
        assert_eq!(
            summary.text,
            "Retries to the Notion API now honour `Retry-After` instead of a fixed one-second \
             sleep, so a throttled worker backs off for as long as Notion asks."
        );
        assert_eq!(summary.kind.as_deref(), Some("fix"));
    }

    /// HAND-WRITTEN: a template whose author wrote nothing but ticked boxes, with setext and
    /// bold headings and the issue reference first.
    #[test]
    fn a_template_with_nothing_written_falls_back_to_the_files() {
        let body = "Fixes #12, closes acme/widgets#13\n\n\
                    Description\n-----------\n\n\
                    N/A\n\n\
                    **Checklist**\n\n\
                    - [x] tests\n\
                    - [ ] docs\n\n\
                    Screenshots\n===========\n\n\
                    ![shot](https://user-images.githubusercontent.com/1/shot.png)\n";
        assert_eq!(clean_body(body), "Fixes #12, closes acme/widgets#13\n\nN/A");
        let files = vec![
            "shared/src/publish.rs".to_string(),
            "tests/notion.rs".to_string(),
            "shared/src/lib.rs".to_string(),
            "README.md".to_string(),
        ];
        let summary = extractive(&SummaryInput {
            files: &files,
            ..input("feat: publish to notion", Some(body))
        });
        assert_eq!(
            summary.text,
            "Changes `shared/src/publish.rs`, `tests/notion.rs`, `shared/src/lib.rs` and 1 more file."
        );
        assert_eq!(summary.kind.as_deref(), Some("feat"));
    }

    /// HAND-WRITTEN: a Dependabot body as Dependabot writes them for a Cargo update (release
    /// notes and commits in `<details>`, the compatibility badge, the conflicts notice, the
    /// automerge markers and the "Dependabot commands and options" block).
    const DEPENDABOT_BODY: &str = "Bumps [serde](https://github.com/serde-rs/serde) from 1.0.195 to 1.0.196.\n\
<details>\n\
<summary>Release notes</summary>\n\
<p><em>Sourced from <a href=\"https://github.com/serde-rs/serde/releases\">serde's releases</a>.</em></p>\n\
<blockquote>\n\
<h2>v1.0.196</h2>\n\
<ul>\n\
<li>Improve formatting of &quot;invalid type&quot; error messages involving floats (<a href=\"https://redirect.github.com/serde-rs/serde/issues/2682\">#2682</a>)</li>\n\
</ul>\n\
</blockquote>\n\
</details>\n\
<details>\n\
<summary>Commits</summary>\n\
<ul>\n\
<li><a href=\"https://github.com/serde-rs/serde/commit/ede9762a583c3cc3b87c10a53551828fad339525\"><code>ede9762</code></a> Release 1.0.196</li>\n\
<li>Additional commits viewable in <a href=\"https://github.com/serde-rs/serde/compare/v1.0.195...v1.0.196\">compare view</a></li>\n\
</ul>\n\
</details>\n\
<br />\n\
\n\
\n\
[![Dependabot compatibility score](https://dependabot-badges.githubapp.com/badges/compatibility_score?dependency-name=serde&package-manager=cargo&previous-version=1.0.195&new-version=1.0.196)](https://docs.github.com/en/github/managing-security-vulnerabilities/about-dependabot-security-updates#about-compatibility-scores)\n\
\n\
Dependabot will resolve any conflicts with this PR as long as you don't alter it yourself. You can also trigger a rebase manually by commenting `@dependabot rebase`.\n\
\n\
[//]: # (dependabot-automerge-start)\n\
[//]: # (dependabot-automerge-end)\n\
\n\
---\n\
\n\
<details>\n\
<summary>Dependabot commands and options</summary>\n\
<br />\n\
\n\
You can trigger Dependabot actions by commenting on this PR:\n\
- `@dependabot rebase` will rebase this PR\n\
- `@dependabot recreate` will recreate this PR, overwriting any edits that have been made to it\n\
- `@dependabot merge` will merge this PR after your CI passes on it\n\
- `@dependabot squash and merge` will squash and merge this PR after your CI passes on it\n\
- `@dependabot cancel merge` will cancel a previously requested merge and block automerging\n\
- `@dependabot reopen` will reopen this PR if it is closed\n\
- `@dependabot close` will close this PR and stop Dependabot recreating it. You can achieve the same result by closing it manually\n\
- `@dependabot show <dependency name> ignore conditions` will show all of the ignore conditions of the specified dependency\n\
- `@dependabot ignore this major version` will close this PR and stop Dependabot creating any more for this major version (unless you reopen the PR or upgrade to it yourself)\n\
- `@dependabot ignore this minor version` will close this PR and stop Dependabot creating any more for this minor version (unless you reopen the PR or upgrade to it yourself)\n\
- `@dependabot ignore this dependency` will close this PR and stop Dependabot creating any more for this dependency (unless you reopen the PR or upgrade to it yourself)\n\
\n\
\n\
</details>";

    #[test]
    fn a_dependabot_body_is_one_line() {
        assert_eq!(
            clean_body(DEPENDABOT_BODY),
            "Bumps [serde](https://github.com/serde-rs/serde) from 1.0.195 to 1.0.196."
        );
        let summary = extractive(&input(
            "build(deps): bump serde from 1.0.195 to 1.0.196",
            Some(DEPENDABOT_BODY),
        ));
        assert_eq!(summary.text, "Bumps serde from 1.0.195 to 1.0.196.");
        assert_eq!(summary.kind.as_deref(), Some("build"));
    }

    /// HAND-WRITTEN: Dependabot's older style (a link list instead of `<details>`).
    #[test]
    fn an_older_dependabot_body_is_one_line_too() {
        let body = "Bumps [tokio](https://github.com/tokio-rs/tokio) from 1.35.1 to 1.36.0.\n\
                    - [Release notes](https://github.com/tokio-rs/tokio/releases)\n\
                    - [Commits](https://github.com/tokio-rs/tokio/compare/tokio-1.35.1...tokio-1.36.0)\n\n\
                    ---\nupdated-dependencies:\n- dependency-name: tokio\n\n\
                    Signed-off-by: dependabot[bot] <support@github.com>\n\n\
                    You can trigger Dependabot actions by commenting on this PR.";
        assert_eq!(
            clean_body(body),
            "Bumps [tokio](https://github.com/tokio-rs/tokio) from 1.35.1 to 1.36.0."
        );
    }

    /// HAND-WRITTEN: a Renovate body as Renovate writes them (banner badge, the updates table
    /// with its age/confidence badges and diff link, release notes in `<details>`, the
    /// Configuration section, the rebase checkbox, the footer and the debug comment).
    const RENOVATE_BODY: &str = "[![Mend Renovate](https://app.renovatebot.com/images/banner.svg)](https://renovatebot.com)\n\
\n\
This PR contains the following updates:\n\
\n\
| Package | Type | Update | Change | Age | Confidence |\n\
|---|---|---|---|---|---|\n\
| [serde](https://serde.rs) ([source](https://github.com/serde-rs/serde)) | dependencies | patch | `1.0.195` -> `1.0.196` | [![age](https://developer.mend.io/api/mc/badges/age/crate/serde/1.0.196?slim=true)](https://docs.renovatebot.com/merge-confidence/) | [![confidence](https://developer.mend.io/api/mc/badges/confidence/crate/serde/1.0.195/1.0.196?slim=true)](https://docs.renovatebot.com/merge-confidence/) |\n\
\n\
---\n\
\n\
### Release Notes\n\
\n\
<details>\n\
<summary>serde-rs/serde (serde)</summary>\n\
\n\
### [`v1.0.196`](https://github.com/serde-rs/serde/releases/tag/v1.0.196)\n\
\n\
[Compare Source](https://github.com/serde-rs/serde/compare/v1.0.195...v1.0.196)\n\
\n\
-   Improve formatting of \"invalid type\" error messages involving floats ([#&#8203;2682](https://github.com/serde-rs/serde/issues/2682))\n\
\n\
</details>\n\
\n\
---\n\
\n\
### Configuration\n\
\n\
📅 **Schedule**: Branch creation - At any time (no schedule defined), Automerge - At any time (no schedule defined).\n\
\n\
🚦 **Automerge**: Disabled by config. Please merge this manually once you are satisfied.\n\
\n\
♻ **Rebasing**: Whenever PR becomes conflicted, or you tick the rebase/retry checkbox.\n\
\n\
🔕 **Ignore**: Close this PR and you won't be reminded about this update again.\n\
\n\
---\n\
\n\
 - [ ] <!-- rebase-check -->If you want to rebase/retry this PR, check this box\n\
\n\
---\n\
\n\
This PR has been generated by [Renovate Bot](https://github.com/renovatebot/renovate).\n\
<!--renovate-debug:eyJjcmVhdGVkSW5WZXIiOiIzNy4xNTMuMiIsInVwZGF0ZWRJblZlciI6IjM3LjE1My4yIn0=-->\n";

    #[test]
    fn a_renovate_body_is_one_line() {
        assert_eq!(
            clean_body(RENOVATE_BODY),
            "Updates serde from 1.0.195 to 1.0.196."
        );
        let summary = extractive(&input(
            "fix(deps): update rust crate serde to 1.0.196",
            Some(RENOVATE_BODY),
        ));
        assert_eq!(summary.text, "Updates serde from 1.0.195 to 1.0.196.");
        assert_eq!(summary.kind.as_deref(), Some("fix"));
    }

    /// HAND-WRITTEN: a grouped Renovate update (npm style: change linked to the diff, newer
    /// "Mend Renovate" footer).
    #[test]
    fn a_grouped_renovate_body_names_every_update_on_one_line() {
        let body = "This PR contains the following updates:\n\n\
                    | Package | Change | Age |\n| --- | --- | --- |\n\
                    | [tokio](https://tokio.rs) ([source](https://github.com/tokio-rs/tokio)) | `1.35.1` -> `1.36.0` | x |\n\
                    | [`@types/node`](https://github.com/DefinitelyTyped/DefinitelyTyped) | [`20.11.5` -> `20.11.6`](https://renovatebot.com/diffs/npm/@types%2fnode/20.11.5/20.11.6) | x |\n\
                    | actions/checkout | `v3` -> `v4` | x |\n\
                    | [regex](https://github.com/rust-lang/regex) | `1.10.2` → `1.10.3` | x |\n\n\
                    ---\n\n### Configuration\n\n📅 **Schedule**: At any time.\n\n---\n\n\
                    This PR was generated by [Mend Renovate](https://mend.io/renovate/). View the [repository job log](https://developer.mend.io/github/acme/widgets).\n";
        assert_eq!(
            clean_body(body),
            "Updates tokio from 1.35.1 to 1.36.0, @types/node from 20.11.5 to 20.11.6, \
             actions/checkout from v3 to v4 and 1 more."
        );
        let two = "This PR contains the following updates:\n\n| Package | Change |\n|---|---|\n\
                   | serde | `1.0.1` -> `1.0.2` |\n| serde_json | `1.0.10` -> `1.0.11` |\n";
        assert_eq!(
            clean_body(two),
            "Updates serde from 1.0.1 to 1.0.2 and serde_json from 1.0.10 to 1.0.11."
        );
    }

    /// HAND-WRITTEN: a body of nothing but badges (shields.io, a CI badge in HTML).
    #[test]
    fn a_badges_only_body_is_empty() {
        let body = "[![CI](https://github.com/acme/widgets/actions/workflows/ci.yml/badge.svg)](https://github.com/acme/widgets/actions)\n\
                    [![crates.io](https://img.shields.io/crates/v/widgets.svg)](https://crates.io/crates/widgets) [![docs.rs](https://img.shields.io/docsrs/widgets)](https://docs.rs/widgets)\n\
                    <a href=\"https://codecov.io/gh/acme/widgets\"><img src=\"https://img.shields.io/codecov/c/github/acme/widgets\" alt=\"coverage\"/></a>\n\
                    ![license](https://img.shields.io/badge/license-MIT-blue.svg)\n";
        assert_eq!(clean_body(body), "");
        let modules = vec![chronicle_domain::ModuleName::new("ci")];
        let summary = extractive(&SummaryInput {
            modules: &modules,
            ..input("ci: add badges to the README", Some(body))
        });
        assert_eq!(
            summary.text, "",
            "no files, no body: nothing, never the title again"
        );
    }

    /// HAND-WRITTEN: images inside prose go, the prose stays; `<details>` text goes, the line
    /// before it stays; inline HTML keeps its text; code stays code.
    #[test]
    fn inline_images_details_and_html_in_prose() {
        let body = "Before/after: ![before](a.png) the logo is now <b>centred</b>.<details><summary>log</summary>noise</details>\n\n\
                    ```rust\n# not a heading\n```\n";
        assert_eq!(
            clean_body(body),
            "Before/after:  the logo is now centred.\n\n```rust\n# not a heading\n```"
        );
        assert_eq!(
            extractive(&input("t", Some(body))).text,
            "Before/after: the logo is now centred."
        );
    }

    /// HAND-WRITTEN: a description as a list, with links and bold.
    #[test]
    fn a_list_paragraph_reads_as_one_sentence() {
        let body = "## Summary\n\nThis PR:\n- adds the [Notion](https://developers.notion.com) publisher\n- **chunks** appends at 100 blocks\n\n## Testing\nran it";
        assert_eq!(
            extractive(&input("t", Some(body))).text,
            "This PR: adds the Notion publisher; chunks appends at 100 blocks"
        );
    }

    /// HAND-WRITTEN: 9,000 characters of prose in one paragraph.
    #[test]
    fn a_9000_char_body_is_capped_cleanly() {
        let sentence =
            "The sweeper now claims pending rows in batches of ten and sends them to the \
                        summarize queue with SendMessageBatch, so a backlog drains in seconds. ";
        let mut body = String::new();
        while body.chars().count() < 9_000 {
            body.push_str(sentence);
        }
        let body: String = body.chars().take(9_000).collect();
        assert_eq!(body.chars().count(), 9_000);
        let text = extractive(&input("t", Some(&body))).text;
        let n = text.chars().count();
        assert!(
            n <= SUMMARY_MAX_CHARS && n > SUMMARY_MAX_CHARS - 40,
            "{n}: {text}"
        );
        let head = text.strip_suffix('…').expect("ends with an ellipsis");
        assert!(body.starts_with(head), "{head}");
        assert!(!head.ends_with([' ', ',', '.']), "{head:?}");
        let next = body[head.len()..].chars().next().unwrap();
        assert!(
            next.is_whitespace() || next == ',' || next == '.',
            "{next:?}"
        );

        // Never inside a code span.
        let code = format!("{} `{}` tail", "word ".repeat(115), "x ".repeat(40));
        let text = extractive(&input("t", Some(&code))).text;
        assert_eq!(text.matches('`').count() % 2, 0, "{text}");
        assert!(text.chars().count() <= SUMMARY_MAX_CHARS);
        // A single word longer than the cap is cut hard, still capped.
        let word = "x".repeat(2_000);
        let text = extractive(&input("t", Some(&word))).text;
        assert_eq!(text.chars().count(), SUMMARY_MAX_CHARS);
        assert!(text.ends_with('…'));
    }

    #[test]
    fn an_empty_body_says_what_changed_from_the_files_never_the_title() {
        let modules: Vec<chronicle_domain::ModuleName> = ["webhook", "store"]
            .map(chronicle_domain::ModuleName::new)
            .to_vec();
        let files: Vec<String> = [
            "shared/src/webhook.rs",
            "shared/src/store.rs",
            "shared/src/signature.rs",
            "tests/webhook.rs",
        ]
        .map(String::from)
        .to_vec();
        for body in [None, Some(""), Some(" \n\t\n"), Some("<!-- unterminated")] {
            let s = extractive(&SummaryInput {
                title: "fix(webhook)!: reject unsigned deliveries",
                body,
                labels: &[],
                files: &files,
                issues: &[],
                modules: &modules,
            });
            assert_eq!(
                s.text,
                "Changes `shared/src/webhook.rs`, `shared/src/store.rs`, `shared/src/signature.rs` \
                 and 1 more file, tests among them."
            );
            assert_eq!(s.kind.as_deref(), Some("fix"));
        }
        let two = &files[..2];
        let s = extractive(&SummaryInput {
            files: two,
            ..input("Operator CLI: redrive", None)
        });
        assert_eq!(
            s.text,
            "Changes `shared/src/webhook.rs` and `shared/src/store.rs`."
        );
        // Nothing at all: nothing (the page shows the title already).
        assert_eq!(extractive(&input("Add login", None)).text, "");
        assert_eq!(extractive(&input("Why?", Some(""))).text, "");
    }

    /// HAND-WRITTEN: bodies that only repeat the title, or only carry trailers, never become
    /// the summary.
    #[test]
    fn title_only_and_trailer_only_bodies_are_not_a_summary() {
        let files = vec!["lambda-runtime/src/lib.rs".to_string()];
        for body in [
            "Add the lambda runtime",
            "Add the lambda runtime.\n\nSigned-off-by: Jane Doe <jane@example.com>",
            "Signed-off-by: Jane Doe <jane@example.com>",
            "Signed-off-by: A <a@x>\nCo-authored-by: B <b@x>\nReviewed-by: C <c@x>\nChange-Id: I8f3e2a",
            "feat: add the lambda runtime\n\n---------\n\nCo-authored-by: B <b@x>",
        ] {
            let s = extractive(&SummaryInput {
                files: &files,
                ..input("feat: Add the lambda runtime", Some(body))
            });
            assert_eq!(s.text, "Changes `lambda-runtime/src/lib.rs`.", "{body:?}");
        }
        // A trailer after the prose is dropped, the prose kept.
        let body = "Retries on 529 with the server's Retry-After.\nSigned-off-by: Jane <j@x>";
        assert_eq!(
            extractive(&input("Retry", Some(body))).text,
            "Retries on 529 with the server's Retry-After."
        );
    }

    /// A GitHub squash-merge body: the commit subjects as one short clean list, without merges,
    /// fixups, the web editor's "Update x" or the title again.
    #[test]
    fn a_squash_merge_list_becomes_a_short_clean_list() {
        let body = "* Add the Converse client\n\n\
                    * fixup! Add the Converse client\n\n\
                    * Merge branch 'main' into bedrock\n\n\
                    * Update README.md\n\n\
                    * retry ThrottlingException with jitter\n\n\
                    * Apply suggestions from code review\n\n\
                    * Cut timeouts to the deadline\n\n\
                    * Add the Converse client\n\n\
                    ---------\n\n\
                    Co-authored-by: Jane <jane@example.com>";
        assert_eq!(
            extractive(&input("Bedrock summaries (#42)", Some(body))).text,
            "Add the Converse client; retry ThrottlingException with jitter; Cut timeouts to the deadline."
        );
        let many: String = (1..=8).map(|i| format!("- step {i}\n")).collect();
        assert_eq!(
            extractive(&input("t", Some(&many))).text,
            "Step 1; step 2; step 3; step 4; step 5 and 3 more."
        );
        // A lead-in ending in ":" takes the list after it.
        let body = "This PR:\n\n- adds the flag\n- documents it";
        assert_eq!(
            extractive(&input("t", Some(body))).text,
            "This PR: adds the flag; documents it"
        );
    }

    #[test]
    fn conventional_types() {
        let cases: &[(&str, Option<&str>, &str)] = &[
            (
                "feat: add the Notion publisher",
                Some("feat"),
                "add the Notion publisher",
            ),
            ("fix(scope): y", Some("fix"), "y"),
            ("fix(api)!: drop v1", Some("fix"), "drop v1"),
            ("feat!: breaking", Some("feat"), "breaking"),
            ("Feat:   spaced   ", Some("feat"), "spaced"),
            ("chore(deps): bump serde", Some("chore"), "bump serde"),
            ("build(deps-dev): bump x", Some("build"), "bump x"),
            ("revert: \"feat: x\"", Some("revert"), "\"feat: x\""),
            ("docs:typo", Some("docs"), "typo"),
            ("WIP: not a type", None, "WIP: not a type"),
            ("README: not a type", None, "README: not a type"),
            ("feat:", None, "feat:"),
            ("feat x: no", None, "feat x: no"),
            (
                "Update the README with new information.",
                None,
                "Update the README with new information.",
            ),
            ("  plain  ", None, "plain"),
            ("", None, ""),
        ];
        for (title, kind, rest) in cases {
            assert_eq!(
                conventional_type(title),
                (kind.map(String::from), *rest),
                "{title:?}"
            );
        }
    }

    #[test]
    fn issue_references_and_placeholders_are_not_a_summary() {
        for body in [
            "Fixes #1",
            "Closes #1 and #2.",
            "Resolves https://github.com/acme/widgets/issues/7",
            "Related to PROJ-123",
            "N/A",
            "none.",
            "#1",
        ] {
            assert_eq!(extractive(&input("Title", Some(body))).text, "", "{body}");
        }
        // Prose that mentions an issue is a summary.
        let body = "Fixes #1 by retrying on 529.";
        assert_eq!(extractive(&input("t", Some(body))).text, body);
    }

    #[test]
    fn headings_that_are_not_template_headings_are_kept_in_the_cleaned_body() {
        let body = "## Why the cache was wrong\nIt never expired.\n\n### Testing\n- [x] ok\nmanual";
        assert_eq!(
            clean_body(body),
            "## Why the cache was wrong\n\nIt never expired."
        );
        assert_eq!(
            extractive(&input("t", Some(body))).text,
            "It never expired."
        );
    }
}
