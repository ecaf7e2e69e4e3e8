//! Documents as Markdown: CommonMark for files and S3, and Notion's Markdown (its "enhanced
//! Markdown", which the Markdown content API takes) for Notion. Same blocks, same order; they
//! differ in escaping, in how a child page is written (a link in a list, or Notion's `<page>`
//! tag), and in where links to other pages point (a relative file, or the page's URL).
//!
//! Byte-identical for the same document: nothing depends on when it was rendered.

use std::fmt::Write as _;

use super::blocks::guard_block_start;
use super::{Block, DocKey, Document, Link, Span};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    CommonMark,
    Notion,
}

/// Renders a document. `resolve` gives the URL of another page for the Notion flavor (`None`:
/// no page yet, the link becomes plain text); CommonMark links are relative file paths.
pub fn render(
    doc: &Document,
    flavor: Flavor,
    resolve: &dyn Fn(&DocKey) -> Option<String>,
) -> String {
    let r = Renderer {
        doc,
        flavor,
        resolve,
    };
    let mut out = String::new();
    if flavor == Flavor::CommonMark {
        // Notion takes the title as the page's property; a file carries it as its heading.
        let _ = writeln!(out, "# {}", r.escape(&doc.title));
    }
    let mut previous_bullet = false;
    for (i, block) in doc.blocks.iter().enumerate() {
        let bullet = matches!(block, Block::Bullet(_))
            || (flavor == Flavor::CommonMark && matches!(block, Block::Child { .. }));
        // A blank line between blocks, none between list items, none before the first block.
        let first = i == 0 && out.is_empty();
        let continues_list = bullet && previous_bullet;
        if !first && !continues_list {
            out.push('\n');
        }
        previous_bullet = bullet;
        r.block(&mut out, block);
    }
    out
}

/// CommonMark with relative links: what files and S3 objects hold.
pub fn commonmark(doc: &Document) -> String {
    render(doc, Flavor::CommonMark, &|_| None)
}

struct Renderer<'a> {
    doc: &'a Document,
    flavor: Flavor,
    resolve: &'a dyn Fn(&DocKey) -> Option<String>,
}

impl Renderer<'_> {
    fn block(&self, out: &mut String, block: &Block) {
        match block {
            Block::Heading { level, spans } => {
                let _ = writeln!(
                    out,
                    "{} {}",
                    "#".repeat(usize::from((*level).clamp(1, 3))),
                    self.inline(spans)
                );
            }
            // Text that would open a block ("1. First", "# x") is escaped at its start.
            Block::Paragraph(spans) => {
                let _ = writeln!(out, "{}", guard_block_start(&self.inline(spans)));
            }
            Block::Bullet(spans) => {
                let _ = writeln!(out, "- {}", guard_block_start(&self.inline(spans)));
            }
            Block::Child { key, title, note } => match self.flavor {
                Flavor::CommonMark => {
                    let link = self.doc.key.relative_link(key);
                    let mut line = format!("- [{}]({})", self.escape(title), escape_url(&link));
                    if !note.is_empty() {
                        let _ = write!(line, " — {}", self.inline(note));
                    }
                    let _ = writeln!(out, "{line}");
                }
                Flavor::Notion => {
                    match (self.resolve)(key) {
                        Some(url) => {
                            let _ = writeln!(
                                out,
                                "<page url=\"{}\">{}</page>",
                                attribute(&url),
                                self.escape(title)
                            );
                        }
                        None => {
                            let _ = writeln!(out, "{}", self.escape(title));
                        }
                    }
                    if !note.is_empty() {
                        let _ = writeln!(out, "\n{}", self.inline(note));
                    }
                }
            },
        }
    }

    /// Spans as inline Markdown; adjacent spans with the same link become one link (a title
    /// with a code span in it is one link, as on GitHub).
    fn inline(&self, spans: &[Span]) -> String {
        let mut out = String::new();
        let mut i = 0;
        while i < spans.len() {
            let same = spans[i..]
                .iter()
                .take_while(|s| s.link == spans[i].link)
                .count();
            let mut text = String::new();
            for span in &spans[i..i + same] {
                let mut t = if span.code {
                    self.code_span(&span.text)
                } else {
                    self.escape(&span.text)
                };
                if span.bold {
                    t = format!("**{t}**");
                }
                text.push_str(&t);
            }
            let target = match &spans[i].link {
                None => None,
                Some(Link::Url(url)) => Some(url.clone()),
                Some(Link::Page(key)) => match self.flavor {
                    Flavor::CommonMark => Some(self.doc.key.relative_link(key)),
                    Flavor::Notion => (self.resolve)(key),
                },
            };
            match target {
                Some(url) => {
                    let _ = write!(out, "[{text}]({})", escape_url(&url));
                }
                None => out.push_str(&text),
            }
            i += same;
        }
        out
    }

    /// Backslash-escapes what would turn text into markup. CommonMark: emphasis, code, links,
    /// HTML, entities, tables, strikethrough (`(`, `)`, `#`, `!` cannot start anything once
    /// `[`/`]` are escaped and nothing starts a line). Notion: the characters its enhanced
    /// Markdown reference says to escape. Newlines become spaces: every use is one line.
    fn escape(&self, s: &str) -> String {
        escape(self.flavor, s)
    }

    /// An inline code span that holds any text. CommonMark takes a longer fence around
    /// backticks; Notion's code spans are literal, so a backtick inside becomes a quote.
    fn code_span(&self, s: &str) -> String {
        let s = s.replace(['\n', '\r'], " ");
        if self.flavor == Flavor::Notion {
            return format!("`{}`", s.replace('`', "'"));
        }
        let mut longest = 0;
        let mut run = 0;
        for c in s.chars() {
            run = if c == '`' { run + 1 } else { 0 };
            longest = longest.max(run);
        }
        let fence = "`".repeat(longest + 1);
        if longest > 0 || s.starts_with(' ') || s.ends_with(' ') {
            format!("{fence} {s} {fence}")
        } else {
            format!("{fence}{s}{fence}")
        }
    }
}

/// Backslash-escapes what would turn text into markup. CommonMark: emphasis, code, links,
/// HTML, entities, tables, strikethrough (`(`, `)`, `#`, `!` cannot start anything once
/// `[`/`]` are escaped and nothing starts a line). Notion: the characters its enhanced
/// Markdown reference says to escape. Newlines become spaces: every use is one line.
pub fn escape(flavor: Flavor, s: &str) -> String {
    let special: &[char] = match flavor {
        Flavor::CommonMark => &['\\', '`', '*', '_', '[', ']', '<', '>', '|', '~', '&'],
        Flavor::Notion => &[
            '\\', '*', '~', '`', '$', '[', ']', '<', '>', '{', '}', '|', '^',
        ],
    };
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if special.contains(&c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A link destination that cannot end the link early or break the line.
pub fn escape_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.trim().chars() {
        match c {
            ' ' => out.push_str("%20"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '"' => out.push_str("%22"),
            '\n' | '\r' | '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// A value inside a double-quoted tag attribute.
pub fn attribute(value: &str) -> String {
    escape_url(value).replace('&', "&amp;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::{archive_page, module_page, sample::entry, ModuleFacts};

    fn facts() -> ModuleFacts {
        ModuleFacts {
            repo: "acme/widgets".into(),
            module: "src".into(),
            paths: vec!["src/**".into(), "!src/**/*_test.rs".into()],
            entry_count: 3,
            first_merged_at: Some("2023-10-01T00:00:00Z".into()),
            latest_merged_at: Some("2024-02-10T08:00:00Z".into()),
            recent_authors: vec![],
            archive_years: vec![("2023".into(), 1)],
            ..Default::default()
        }
    }

    #[test]
    fn commonmark_page_with_its_archive_link() {
        let mut a = entry(12, "2024-02-10T08:00:00Z", "alice");
        a.title = "fix: *bold* [link](x) `code` <b>&amp; | _u_ \\ #3".into();
        let b = entry(10, "2024-02-01T00:00:00Z", "bob");
        let md = commonmark(&module_page(&facts(), &[a, b]));
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "# acme/widgets · src");
        assert_eq!(lines[2], "Paths: `src/**`, `!src/**/*_test.rs`.");
        // The title's code span is code, as GitHub shows it; the rest is the text as written.
        assert!(md.contains(
            "### 2024-02-10 — [fix: \\*bold\\* \\[link\\](x) `code` \\<b\\>\\&amp; \\| \\_u\\_ \\\\ #3](https://github.com/acme/widgets/pull/12) (#12)\n"
        ), "{md}");
        assert!(md.contains("\n## February 2024\n"));
        assert!(md.ends_with(
            "## Older pull requests\n\n- [acme/widgets · src · 2023](src/2023.md) — 1 merged pull request\n"
        ), "{md}");
        assert!(!md.contains("\n\n\n"));
    }

    #[test]
    fn notion_page_names_its_children_with_page_tags() {
        let a = entry(12, "2024-02-10T08:00:00Z", "a_b");
        let doc = module_page(&facts(), &[a]);
        let url = |k: &DocKey| Some(format!("https://www.notion.so/{}", k.label()));
        let md = render(&doc, Flavor::Notion, &url);
        assert!(
            !md.starts_with('#'),
            "the title is the page's property: {md}"
        );
        assert!(
            md.contains("by @a_b\n"),
            "underscores are not escaped for Notion: {md}"
        );
        assert!(md.ends_with(
            "<page url=\"https://www.notion.so/2023\">acme/widgets · src · 2023</page>\n\n1 merged pull request\n"
        ), "{md}");
        let plain = render(&doc, Flavor::Notion, &|_| None);
        assert!(plain.contains("\nacme/widgets · src · 2023\n"), "{plain}");
    }

    #[test]
    fn an_archive_links_back_to_its_module_page() {
        let key = DocKey::Archive {
            repo: "acme/widgets".into(),
            module: "src".into(),
            label: "2023".into(),
        };
        let parent = DocKey::Module {
            repo: "acme/widgets".into(),
            module: "src".into(),
        };
        let doc = archive_page(
            key,
            parent,
            &[entry(1, "2023-10-01T00:00:00Z", "dave")],
            &[],
        );
        let md = commonmark(&doc);
        assert!(md.starts_with("# acme/widgets · src · 2023\n\n1 pull request of src merged in 2023, newest first. Back to [acme/widgets · src](../src.md).\n"), "{md}");
        let notion = render(&doc, Flavor::Notion, &|_| {
            Some("https://www.notion.so/m".into())
        });
        assert!(notion.contains("Back to [acme/widgets · src](https://www.notion.so/m)."));
    }

    #[test]
    fn rendering_is_deterministic() {
        let doc = module_page(&facts(), &[entry(1, "2024-01-01T00:00:00Z", "x")]);
        assert_eq!(commonmark(&doc), commonmark(&doc.clone()));
    }
}
