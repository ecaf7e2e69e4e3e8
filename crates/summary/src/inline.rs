//! The Markdown a PR body is parsed as, and inline events written back as text: plain (for
//! matching and counting) or as one line of Markdown the pages read back as the same text.

use pulldown_cmark::{Event, Options, TagEnd};

/// The Markdown a PR body is parsed as: GitHub's (tables, task lists, footnotes,
/// strikethrough, `> [!NOTE]` alerts).
pub fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_GFM
}

pub(crate) type Events = Vec<Event<'static>>;

/// Text and code as plain text; breaks as spaces; markup dropped.
pub fn plain_text(events: &[Event<'_>]) -> String {
    let mut out = String::new();
    for e in events {
        match e {
            Event::Text(t) | Event::Code(t) => out.push_str(t),
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::End(TagEnd::Paragraph | TagEnd::Item | TagEnd::TableCell) => out.push(' '),
            _ => {}
        }
    }
    out
}

/// Inline events as one line of Markdown the pages read back as the same text: code spans
/// kept, links, emphasis and strong reduced to their text, everything else escaped.
pub(crate) fn inline_markdown(events: &[Event<'_>]) -> String {
    let mut out = String::new();
    // The parser splits text at escapes and entities: escape whole runs, so an underscore
    // inside a word stays unescaped.
    let mut run = String::new();
    for e in events {
        if let Event::Text(t) = e {
            run.push_str(t);
            continue;
        }
        out.push_str(&escape_text(&std::mem::take(&mut run)));
        match e {
            Event::Code(c) => {
                if out.ends_with('`') {
                    out.push(' '); // two code spans never merge into one
                }
                out.push_str(&code_span(c));
            }
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::End(TagEnd::Paragraph | TagEnd::Item) => out.push(' '),
            _ => {}
        }
    }
    out.push_str(&escape_text(&run));
    super::collapse_whitespace(&out)
}

/// A code span around any text: a fence longer than the longest run of backticks inside.
pub(crate) fn code_span(code: &str) -> String {
    let code = code.replace(['\n', '\r'], " ");
    let mut longest = 0;
    let mut run = 0;
    for c in code.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 || code.starts_with(['`', ' ']) || code.ends_with(['`', ' ']) {
        format!("{fence} {code} {fence}")
    } else {
        format!("{fence}{code}{fence}")
    }
}

/// Text escaped so that parsing it as inline Markdown gives the same text: backslashes before
/// punctuation, backticks, asterisks, brackets, angle brackets, entity-like ampersands, and
/// underscores that could open or close emphasis.
pub(crate) fn escape_text(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let escape = match c {
            '\\' => next.is_none_or(|n| n.is_ascii_punctuation()),
            '`' | '*' | '[' | ']' | '<' | '~' => true,
            '_' => {
                !(prev.is_some_and(char::is_alphanumeric)
                    && next.is_some_and(char::is_alphanumeric))
            }
            '&' => {
                let name = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '#')
                    .count();
                name > 0 && chars.get(i + 1 + name) == Some(&';')
            }
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
