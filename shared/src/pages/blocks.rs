//! The document model every publisher renders: a page is a list of blocks, each a run of spans
//! with the few marks the pages use. Markdown files and Notion get the same blocks in the same
//! order; only the syntax (and where links point) differs.

use super::DocKey;

/// Where a link points: a web address, or another Chronicle page (a relative file link in
/// Markdown, the page's URL in Notion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Url(String),
    Page(DocKey),
}

/// A run of text with the few marks the pages use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub text: String,
    pub link: Option<Link>,
    pub code: bool,
    pub bold: bool,
}

impl Span {
    pub fn text(text: impl Into<String>) -> Span {
        Span {
            text: text.into(),
            link: None,
            code: false,
            bold: false,
        }
    }

    pub fn link(text: impl Into<String>, url: &str) -> Span {
        Span {
            link: Some(Link::Url(url.trim().to_string())),
            ..Span::text(text)
        }
    }

    pub fn page(text: impl Into<String>, key: DocKey) -> Span {
        Span {
            link: Some(Link::Page(key)),
            ..Span::text(text)
        }
    }

    pub fn code(text: impl Into<String>) -> Span {
        Span {
            code: true,
            ..Span::text(text)
        }
    }

    pub fn bold(text: impl Into<String>) -> Span {
        Span {
            bold: true,
            ..Span::text(text)
        }
    }

    fn is_plain(&self) -> bool {
        self.link.is_none() && !self.code && !self.bold
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// Level 1–3.
    Heading {
        level: u8,
        spans: Vec<Span>,
    },
    Paragraph(Vec<Span>),
    Bullet(Vec<Span>),
    /// A child page (an archive page of a module, a module page of the index), with a short
    /// note after it. In Notion, a page's children must be named in its content, or replacing
    /// the content would delete them.
    Child {
        key: DocKey,
        title: String,
        note: Vec<Span>,
    },
}

impl Block {
    /// The block's text, marks dropped.
    pub fn plain_text(&self) -> String {
        match self {
            Block::Heading { spans, .. } | Block::Paragraph(spans) | Block::Bullet(spans) => {
                plain(spans)
            }
            Block::Child { title, note, .. } => format!("{title}{}", plain(note)),
        }
    }

    /// How many Notion blocks it becomes (a child page and its note are two).
    pub fn notion_blocks(&self) -> usize {
        match self {
            Block::Child { note, .. } if !note.is_empty() => 2,
            _ => 1,
        }
    }
}

pub fn plain(spans: &[Span]) -> String {
    spans.iter().map(|s| s.text.as_str()).collect()
}

/// The inline Markdown of PR text as spans: `` `code` ``, `**bold**`, and `[text](https://…)`
/// links (a link to anything but http(s) keeps only its text). Everything else is text, so
/// nothing in a PR body can become markup it did not mean.
pub fn inline_spans(text: &str) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut plain_text = String::new();
    let mut rest = text;
    let flush = |plain_text: &mut String, spans: &mut Vec<Span>| {
        if !plain_text.is_empty() {
            spans.push(Span::text(std::mem::take(plain_text)));
        }
    };
    while let Some(c) = rest.chars().next() {
        if c == '`' {
            let ticks = rest.chars().take_while(|&c| c == '`').count();
            let fence = &rest[..ticks];
            if let Some(end) = rest[ticks..].find(fence) {
                let code = rest[ticks..ticks + end].trim();
                if !code.is_empty() {
                    flush(&mut plain_text, &mut spans);
                    spans.push(Span::code(code));
                    rest = &rest[ticks + end + ticks..];
                    continue;
                }
            }
            plain_text.push_str(fence);
            rest = &rest[ticks..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("**") {
            if let Some(end) = after.find("**").filter(|&e| e > 0) {
                flush(&mut plain_text, &mut spans);
                spans.push(Span::bold(&after[..end]));
                rest = &after[end + 2..];
                continue;
            }
        }
        if c == '[' {
            if let Some((label, url, used)) = link_at(rest) {
                flush(&mut plain_text, &mut spans);
                if url.starts_with("https://") || url.starts_with("http://") {
                    spans.push(Span::link(label, url));
                } else {
                    spans.push(Span::text(label));
                }
                rest = &rest[used..];
                continue;
            }
        }
        plain_text.push(c);
        rest = &rest[c.len_utf8()..];
    }
    flush(&mut plain_text, &mut spans);
    // Adjacent plain runs (a link that fell back to text) become one.
    let mut merged: Vec<Span> = Vec::new();
    for span in spans {
        match merged.last_mut() {
            Some(last) if last.is_plain() && span.is_plain() => last.text.push_str(&span.text),
            _ => merged.push(span),
        }
    }
    merged
}

/// `[label](url)` at the start of `s`: the label, the url and the bytes used.
fn link_at(s: &str) -> Option<(&str, &str, usize)> {
    let close = s.find("](")?;
    let label = &s[1..close];
    if label.is_empty() || label.contains(['[', ']', '\n']) {
        return None;
    }
    let after = &s[close + 2..];
    let end = after.find(')')?;
    let url = after[..end].trim();
    if url.is_empty() || url.contains(char::is_whitespace) {
        return None;
    }
    Some((label, url, close + 2 + end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_markdown_in_pr_text_becomes_spans() {
        let spans = inline_spans(
            "Use `read_all` for **small** files, see [the docs](https://x.dev/a) or [local](docs/a.md); a ` lone tick and [not a link].",
        );
        assert_eq!(
            spans,
            vec![
                Span::text("Use "),
                Span::code("read_all"),
                Span::text(" for "),
                Span::bold("small"),
                Span::text(" files, see "),
                Span::link("the docs", "https://x.dev/a"),
                Span::text(" or local; a ` lone tick and [not a link]."),
            ]
        );
        assert_eq!(inline_spans("``a`b``"), vec![Span::code("a`b")]);
    }
}
