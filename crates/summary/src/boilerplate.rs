//! What real PR bodies carry that is not about the change: template headings and sections,
//! instructions, bot bodies (Dependabot, Renovate), commit trailers and attachment links. The
//! lists are data; `clean` decides with them block by block.

use std::fmt::Write as _;
use std::sync::LazyLock;

use super::inline::*;
use pulldown_cmark::{Event, Tag, TagEnd};
use regex::Regex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bot {
    Dependabot,
    Renovate,
}

/// A line that is never worth keeping: a commit trailer, bot or template boilerplate, or only
/// a link to an uploaded screenshot.
pub(crate) fn drop_line(plain: &str, bot: Option<Bot>) -> bool {
    let t = plain.trim();
    let lower = t.to_lowercase();
    !has_words(t)
        || is_trailer(t)
        || BOT_LINES.iter().any(|p| lower.contains(p))
        || TEMPLATE_INSTRUCTIONS.iter().any(|p| lower.starts_with(p))
        || is_attachment_url(t)
        || (bot.is_some() && lower.starts_with("updated-dependencies:"))
}

pub(crate) fn has_words(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric)
}

pub(crate) fn detect_bot(text: &str) -> Option<Bot> {
    let lower = text.to_lowercase();
    if lower.contains("this pr contains the following updates")
        || lower.contains("[renovate bot]")
        || lower.contains("[mend renovate]")
        || lower.contains("renovatebot.com")
        || lower.contains("mend.io/renovate")
    {
        return Some(Bot::Renovate);
    }
    let starts_like_dependabot = lower
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .is_some_and(|l| l.starts_with("bumps ") || l.starts_with("updates the requirements on"));
    if lower.contains("dependabot commands and options")
        || lower.contains("@dependabot")
        || lower.contains("dependabot-badges")
        || (starts_like_dependabot && lower.contains("dependabot"))
    {
        return Some(Bot::Dependabot);
    }
    None
}

/// A heading reduced to lowercase words: "✅ Checklist:" → "checklist".
pub(crate) fn heading_key(text: &str) -> String {
    let words: String = text
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    super::collapse_whitespace(&words)
}

/// Headings whose whole section is template boilerplate, matched as a prefix of the key.
pub(crate) const BOILERPLATE_PREFIXES: &[&str] = &[
    "type of change",
    "types of change",
    "kind of change",
    "what kind of change",
    "pr type",
    "how has this been tested",
    "how was this tested",
    "how to test",
    "how can this be tested",
    "testing",
    "tests",
    "test plan",
    "test configuration",
    "screenshot",
    "screen recording",
    "screencast",
    "recording",
    "related issue",
    "linked issue",
    "issue",
    "closes",
    "fixes",
    "ticket",
    "does this pr introduce a breaking change",
    "definition of done",
    "before submitting",
    "notes for reviewer",
    "note to reviewer",
    "reviewer",
    "other information",
];

/// Boilerplate wherever it appears in the key ("PR checklist", "Reviewer checklist").
pub(crate) const BOILERPLATE_WORDS: &[&str] = &["checklist", "check list"];

/// Sections of bot bodies that are never the point.
pub(crate) const BOT_SECTIONS: &[&str] = &[
    "release notes",
    "changelog",
    "commits",
    "configuration",
    "dependency lookup warnings",
];

/// Template headings dropped on their own (their section is the description itself).
pub(crate) const LABEL_HEADINGS: &[&str] = &[
    "description",
    "pr description",
    "pull request description",
    "summary",
    "summary of changes",
    "changes",
    "proposed changes",
    "changes made",
    "what changed",
    "what",
    "why",
    "what and why",
    "what does this pr do",
    "what does this pull request do",
    "what is this",
    "what is the purpose of this pr",
    "motivation",
    "motivation and context",
    "context",
    "background",
    "overview",
    "details",
    "purpose",
    "problem",
    "solution",
    "approach",
    "about",
    "tl dr",
    "tldr",
];

pub(crate) fn is_boilerplate_heading(key: &str, bot: Option<Bot>) -> bool {
    // A whole-word prefix, plural allowed: "screenshot" covers "screenshots if appropriate".
    let prefixed = |list: &[&str]| {
        list.iter().any(|p| {
            key.strip_prefix(p).is_some_and(|rest| {
                let rest = rest.strip_prefix('s').unwrap_or(rest);
                rest.is_empty() || rest.starts_with(' ')
            })
        })
    };
    BOILERPLATE_WORDS.iter().any(|w| key.contains(w))
        || prefixed(BOILERPLATE_PREFIXES)
        || (bot.is_some() && prefixed(BOT_SECTIONS))
}

/// Template instructions left in place as plain text (the well-known GitHub PR templates).
pub(crate) const TEMPLATE_INSTRUCTIONS: &[&str] = &[
    "please include a summary of the change",
    "please also include relevant motivation and context",
    "please describe the tests that you ran",
    "please delete options that are not relevant",
    "please also list any relevant details for your test configuration",
    "please check the type of change your pr introduces",
    "list any dependencies that are required for this change",
    "fixes # (issue)",
    "describe your changes in detail",
    "provide a general summary of your changes",
    "a clear and concise description of what",
    "put an `x` in all the boxes that apply",
    "put an x in all the boxes that apply",
    "what types of changes does your code introduce",
    "go over all the following points",
];

/// Bot boilerplate lines, matched anywhere in the lowercased line.
pub(crate) const BOT_LINES: &[&str] = &[
    "dependabot will resolve any conflicts with this pr",
    "you can trigger a rebase manually by commenting",
    "you can trigger dependabot actions by commenting",
    "this pr has been generated by renovate bot",
    "this pr was generated by mend renovate",
    "this pr has been generated by mend renovate",
    "this pr has been generated by whitesource renovate",
    "if you want to rebase/retry this pr",
];

/// A git trailer line (`Signed-off-by: …`, `Change-Id: …`): never part of a summary.
pub(crate) fn is_trailer(line: &str) -> bool {
    static TRAILER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)^(?:signed-off-by|co-authored-by|co-developed-by|reviewed-by|acked-by|tested-by|reported-by|suggested-by|requested-by|helped-by|approved-by|reviewed-on|change-id|cc|git-svn-id|pr-url|differential revision|depends-on)\s*:",
        )
        .expect("a valid pattern")
    });
    TRAILER.is_match(line.trim())
}

/// Dependabot's older link list under the "Bumps" line: `- [Release notes](…)`, `- [Commits](…)`.
pub(crate) fn is_bot_link_item(item: &[Event<'static>], text: &str) -> bool {
    let only_link = matches!(item.first(), Some(Event::Start(Tag::Link { .. })))
        || matches!(
            (item.first(), item.get(1)),
            (
                Some(Event::Start(Tag::Paragraph)),
                Some(Event::Start(Tag::Link { .. }))
            )
        );
    let key = heading_key(text);
    only_link && ["release notes", "changelog", "commits", "upgrade guide"].contains(&key.as_str())
}

/// A line that is nothing but a link to an uploaded screenshot or recording.
pub(crate) fn is_attachment_url(line: &str) -> bool {
    static URL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)^<?https?://(?:(?:github\.com/user-attachments/|(?:private-)?user-images\.githubusercontent\.com/)\S*|\S+\.(?:png|jpe?g|gif|svg|webp|mp4|mov|webm)(?:\?\S*)?)>?$",
        )
        .expect("a valid pattern")
    });
    URL.is_match(line)
}

/// Renovate: the "This PR contains the following updates:" table as one line.
pub(crate) fn renovate_line(blocks: &[&[Event<'static>]]) -> Option<String> {
    let intro = blocks.iter().position(|b| {
        matches!(b.first(), Some(Event::Start(Tag::Paragraph)))
            && plain_text(b)
                .to_lowercase()
                .contains("this pr contains the following updates")
    })?;
    let table = blocks[intro + 1..]
        .iter()
        .find(|b| matches!(b.first(), Some(Event::Start(Tag::Table(_)))))?;
    let rows = table_rows(table);
    let (header, rows) = rows.split_first()?;
    let column = |name: &str| header.iter().position(|h| heading_key(h) == name);
    let package = column("package").or(column("update")).unwrap_or(0);
    let change = column("change");
    let updates: Vec<String> = rows
        .iter()
        .filter_map(|cells| {
            let name = package_name(cells.get(package)?);
            if name.is_empty() {
                return None;
            }
            let change = change
                .and_then(|c| cells.get(c))
                .map(|c| super::collapse_whitespace(c))
                .unwrap_or_default();
            let arrow = change.split_once("->").or_else(|| change.split_once('→'));
            Some(match arrow {
                Some((from, to)) if !from.trim().is_empty() && !to.trim().is_empty() => {
                    format!("{name} from {} to {}", from.trim(), to.trim())
                }
                _ if change.is_empty() => name,
                _ => format!("{name} ({change})"),
            })
        })
        .collect();
    if updates.is_empty() {
        return None;
    }
    const NAMED: usize = 3;
    let mut line = String::from("Updates ");
    if updates.len() <= NAMED {
        line.push_str(&super::join_and(&updates));
    } else {
        let _ = write!(
            line,
            "{} and {} more",
            updates[..NAMED].join(", "),
            updates.len() - NAMED
        );
    }
    line.push('.');
    Some(escape_text(&line))
}

/// A table's rows (the header first), each cell's plain text (images and their alt text out).
pub(crate) fn table_rows(table: &[Event<'static>]) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut cell: Option<Events> = None;
    let mut image = 0usize;
    for e in table {
        match e {
            Event::Start(Tag::TableHead | Tag::TableRow) => rows.push(Vec::new()),
            Event::Start(Tag::TableCell) => cell = Some(Vec::new()),
            Event::End(TagEnd::TableCell) => {
                if let (Some(c), Some(row)) = (cell.take(), rows.last_mut()) {
                    row.push(super::collapse_whitespace(&plain_text(&c)));
                }
            }
            Event::Start(Tag::Image { .. }) => image += 1,
            Event::End(TagEnd::Image) => image = image.saturating_sub(1),
            other if image == 0 => {
                if let Some(c) = cell.as_mut() {
                    c.push(other.clone());
                }
            }
            _ => {}
        }
    }
    rows
}

/// `serde (source)` → `serde`.
pub(crate) fn package_name(cell: &str) -> String {
    match cell.find(" (") {
        Some(i) if i > 0 => cell[..i].trim().to_string(),
        _ => cell.trim().to_string(),
    }
}
