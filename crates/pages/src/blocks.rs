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

/// The inline Markdown of PR text (a summary) as spans, parsed by `pulldown-cmark`: code
/// spans, strong text and `[text](https://…)` links (a link to anything but http(s) keeps only
/// its text); emphasis and strikethrough keep their text; images and HTML are dropped; escapes
/// and entities are resolved. The text is one line of inline content: anything that would open
/// a block (a list marker, a heading's `#`) is read as text.
pub fn inline_spans(text: &str) -> Vec<Span> {
    use pulldown_cmark::{Event, Parser, Tag, TagEnd};
    let text = guard_block_start(&chronicle_summary::collapse_whitespace(text));
    let mut spans: Vec<Span> = Vec::new();
    let mut strong = 0usize;
    let mut image = 0usize;
    let mut link: Vec<Option<String>> = Vec::new();
    // Delimiters written back as text: emphasis, `__`, strikethrough (stored and LLM summaries
    // are prose, where `*.rs` or `__init__` mean themselves); `**` alone means bold.
    let mut literal: Vec<Option<String>> = Vec::new();
    let push = |spans: &mut Vec<Span>, span: Span| match spans.last_mut() {
        Some(last) if last.is_plain() && span.is_plain() => last.text.push_str(&span.text),
        _ => spans.push(span),
    };
    let options = chronicle_summary::clean::options();
    for (event, range) in Parser::new_ext(&text, options).into_offset_iter() {
        let source = &text[range.clone()];
        let mark = |mut span: Span, link: &[Option<String>], strong: usize| {
            span.bold = strong > 0;
            if let Some(Some(url)) = link.last() {
                span.link = Some(Link::Url(url.clone()));
            }
            span
        };
        match event {
            Event::Start(Tag::Strong) if source.starts_with("**") => {
                strong += 1;
                literal.push(None);
            }
            Event::Start(Tag::Strong | Tag::Emphasis | Tag::Strikethrough) => {
                let c = source.chars().next().unwrap_or('*');
                let n = match source.chars().take_while(|&x| x == c).count() {
                    n if source.starts_with("~") => n,
                    n => n.min(if matches!(event, Event::Start(Tag::Strong)) {
                        2
                    } else {
                        1
                    }),
                };
                let delimiter = c.to_string().repeat(n.max(1));
                push(&mut spans, mark(Span::text(&delimiter), &link, strong));
                literal.push(Some(delimiter));
            }
            Event::End(TagEnd::Strong | TagEnd::Emphasis | TagEnd::Strikethrough) => {
                match literal.pop().flatten() {
                    Some(delimiter) => push(&mut spans, mark(Span::text(delimiter), &link, strong)),
                    None => strong = strong.saturating_sub(1),
                }
            }
            Event::Start(Tag::Image { .. }) => image += 1,
            Event::End(TagEnd::Image) => image = image.saturating_sub(1),
            Event::Start(Tag::Link { dest_url, .. }) => {
                let url = dest_url.trim();
                let web = url.starts_with("https://") || url.starts_with("http://");
                link.push(web.then(|| url.to_string()));
            }
            Event::End(TagEnd::Link) => {
                link.pop();
            }
            _ if image > 0 => {}
            Event::Text(t) => push(&mut spans, mark(Span::text(t.as_ref()), &link, strong)),
            Event::Code(c) => push(&mut spans, mark(Span::code(c.as_ref()), &link, strong)),
            // Summaries hold no HTML: `Option<String>` is text.
            Event::InlineHtml(h) | Event::Html(h) => {
                push(&mut spans, mark(Span::text(h.as_ref()), &link, strong))
            }
            Event::SoftBreak | Event::HardBreak => push(&mut spans, Span::text(" ")),
            Event::End(TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::Item) => {
                push(&mut spans, Span::text(" "))
            }
            _ => {}
        }
    }
    if let Some(first) = spans.first_mut().filter(|s| s.is_plain()) {
        first.text = first.text.trim_start().to_string();
    }
    if let Some(last) = spans.last_mut().filter(|s| s.is_plain()) {
        last.text = last.text.trim_end().to_string();
    }
    spans.retain(|s| !s.text.is_empty());
    spans
}

/// Text whose start would open a block (`- x`, `1. x`, `# x`, `> x`, a fence) with that
/// start escaped, so the parser reads one paragraph of inline content.
pub(crate) fn guard_block_start(text: &str) -> String {
    use pulldown_cmark::{Event, Parser, Tag};
    let text = text.trim_start();
    // No events at all for non-empty text: a link reference definition (`[x]: y`).
    let opens_paragraph =
        |t: &str| match Parser::new_ext(t, chronicle_summary::clean::options()).next() {
            None => t.is_empty(),
            Some(e) => matches!(e, Event::Start(Tag::Paragraph)),
        };
    if opens_paragraph(text) {
        return text.to_string();
    }
    let lead = text.find(' ').unwrap_or(text.len());
    match text[..lead]
        .char_indices()
        .find(|(_, c)| c.is_ascii_punctuation())
    {
        Some((i, _)) => format!("{}\\{}", &text[..i], &text[i..]),
        None => text.to_string(),
    }
}

/// A PR title as spans (each linked to `url` when given): code spans (`` `x` ``) become code,
/// as GitHub shows them; everything else is the title's text as written.
pub fn title_spans(title: &str, url: Option<&str>) -> Vec<Span> {
    use pulldown_cmark::{Event, Parser};
    let title = title.replace(['\n', '\r', '\t'], " ");
    let text = |t: &str| match url {
        Some(url) => Span::link(t, url),
        None => Span::text(t),
    };
    let mut spans = Vec::new();
    let mut at = 0;
    for (event, range) in
        Parser::new_ext(&title, chronicle_summary::clean::options()).into_offset_iter()
    {
        if let Event::Code(code) = event {
            if range.start > at {
                spans.push(text(&title[at..range.start]));
            }
            spans.push(Span {
                code: true,
                ..text(code.as_ref())
            });
            at = range.end;
        }
    }
    if at < title.len() {
        spans.push(text(&title[at..]));
    }
    spans
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

    /// What a body says reaches the page as the same text: escapes, entities and backslashes
    /// are resolved once by the parser and escaped once by the renderer (no literal `\_`,
    /// no doubled backslash, code spans stay code).
    #[test]
    fn a_summary_reads_back_as_the_body_wrote_it() {
        use crate::{render, DocKey, Document};
        use chronicle_summary::{extractive, SummaryInput};
        let body =
            "Handles foo\\_bar, `C:\\temp\\x` and &lt;T&gt; in **one** *pass* \\*literally\\*.";
        let summary = extractive(&SummaryInput {
            title: "t",
            body: Some(body),
            ..SummaryInput::default()
        })
        .text;
        let doc = Document {
            key: DocKey::Index {
                repo: "acme/widgets".into(),
            },
            title: "t".into(),
            parent: None,
            blocks: vec![Block::Paragraph(inline_spans(&summary))],
        };
        for flavor in [render::Flavor::CommonMark, render::Flavor::Notion] {
            let md = render::render(&doc, flavor, &|_| None);
            let paragraph = md.lines().rev().find(|l| !l.is_empty()).unwrap();
            let events: Vec<pulldown_cmark::Event> =
                pulldown_cmark::Parser::new(paragraph).collect();
            assert_eq!(
                chronicle_summary::clean::plain_text(&events).trim(),
                "Handles foo_bar, C:\\temp\\x and <T> in one pass *literally*.",
                "{flavor:?}: {md}"
            );
        }
    }

    #[test]
    fn text_that_would_open_a_block_stays_inline() {
        assert_eq!(
            inline_spans("1. First step"),
            vec![Span::text("1. First step")]
        );
        assert_eq!(inline_spans("- item"), vec![Span::text("- item")]);
        assert_eq!(
            inline_spans("# not a heading"),
            vec![Span::text("# not a heading")]
        );
        assert_eq!(inline_spans("> quoted"), vec![Span::text("> quoted")]);
        // Not a fence (its info string would hold backticks): a code span, as CommonMark reads it.
        assert_eq!(
            inline_spans("```rust fn``` done"),
            vec![Span::code("rust fn"), Span::text(" done")]
        );
    }

    #[test]
    fn a_title_keeps_its_code_spans_and_its_text_as_written() {
        let url = "https://github.com/a/b/pull/1";
        let spans = title_spans("Fix `read_all` on *nix \\ [x]", Some(url));
        assert_eq!(
            spans,
            vec![
                Span::link("Fix ", url),
                Span {
                    code: true,
                    ..Span::link("read_all", url)
                },
                Span::link(" on *nix \\ [x]", url),
            ]
        );
        assert_eq!(title_spans("", None), vec![]);
    }

    /// Stored and LLM summaries are prose: what would be HTML, emphasis or `__` stays text.
    #[test]
    fn prose_summaries_keep_their_characters() {
        let text =
            "Adds an Option<String> field to __init__ for *.rs and *.toml globs, ~x~ **bold**";
        let spans = inline_spans(text);
        assert_eq!(plain(&spans), text.replace("**bold**", "bold"), "{spans:?}");
        assert_eq!(spans.last(), Some(&Span::bold("bold")));
        assert_eq!(
            inline_spans("[WIP]: cleanup"),
            vec![Span::text("[WIP]: cleanup")]
        );
    }
}
