//! PR bodies cleaned with `pulldown-cmark` (CommonMark with GFM tables, task lists, footnotes,
//! strikethrough and alerts): the body is parsed once, its top-level blocks are kept or dropped
//! by what they are (a template heading's section, a task list, a `<details>` block, an image,
//! a trailer line), and what is kept is written back as Markdown by `pulldown-cmark-to-cmark`.
//! The summary reads the same blocks as paragraphs of inline Markdown, so it never meets raw
//! HTML, entities, escapes or fences: the parser resolved them.

use std::sync::LazyLock;

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};
use regex::Regex;

use super::boilerplate::*;
pub(crate) use super::inline::*;
pub use super::inline::{options, plain_text};

/// A body after cleaning: the blocks worth reading, in order.
#[derive(Debug, Clone, Default)]
pub struct Cleaned {
    blocks: Vec<Kept>,
}

#[derive(Debug, Clone)]
pub(super) enum Kept {
    /// A heading that is not a template label (its events, `Start(Heading)` to `End`).
    Heading(Events),
    /// A paragraph's lines (split at line breaks outside any inline element).
    Paragraph(Vec<Events>),
    /// A list, its items' inner events (task items and bot link items gone).
    List {
        start: Option<u64>,
        items: Vec<Events>,
    },
    /// Code blocks, tables, block quotes: kept as written (images and HTML gone).
    Verbatim(Events),
    /// A line Chronicle wrote itself (a Renovate table as one sentence), already Markdown.
    Line(String),
    /// A template's label heading ("Why", "Motivation"): not shown, but what the paragraphs
    /// under it are (the why of a change, for [`crate::decision`]).
    Label(String),
}

/// One paragraph as the summary reads it: its lines as inline Markdown, each marked when it
/// is a list item.
#[derive(Debug, Clone)]
pub(crate) struct Paragraph {
    pub lines: Vec<Line>,
    pub list: bool,
    /// The plain text of the heading it stands under ("Why", "Motivation"), if any.
    pub heading: Option<String>,
    /// It comes from a block quote: someone else's words (an issue, upstream docs).
    pub quoted: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// Inline Markdown: code spans kept, links and emphasis reduced to their text, the rest
    /// escaped so it reads back as the same text.
    pub markdown: String,
    /// The same, as plain text (for comparisons and classifications).
    pub plain: String,
    pub item: bool,
}

impl Cleaned {
    /// The kept blocks as Markdown, blocks separated by a blank line.
    pub fn markdown(&self) -> String {
        let mut parts: Vec<String> = Vec::with_capacity(self.blocks.len());
        for block in &self.blocks {
            let text = match block {
                Kept::Line(line) => line.clone(),
                other => render(&other.events()),
            };
            let text = text.trim_matches('\n').to_string();
            if !text.trim().is_empty() {
                parts.push(text);
            }
        }
        parts.join("\n\n")
    }

    /// The paragraphs the summary may take, in order: prose paragraphs and lists (one line per
    /// item, nested items included), and the paragraphs inside block quotes. Headings, code and
    /// tables are not prose.
    pub(crate) fn paragraphs(&self) -> Vec<Paragraph> {
        let mut out = Vec::new();
        let mut heading: Option<String> = None;
        for block in &self.blocks {
            let start = out.len();
            match block {
                Kept::Paragraph(lines) => {
                    let lines: Vec<Line> = lines
                        .iter()
                        .map(|l| line(l, false))
                        .filter(|l| !l.plain.is_empty())
                        .collect();
                    if !lines.is_empty() {
                        out.push(Paragraph {
                            lines,
                            list: false,
                            heading: None,
                            quoted: false,
                        });
                    }
                }
                Kept::List { items, .. } => {
                    let lines: Vec<Line> = items
                        .iter()
                        .flat_map(|item| item_lines(item))
                        .filter(|l| !l.plain.is_empty())
                        .collect();
                    if !lines.is_empty() {
                        out.push(Paragraph {
                            lines,
                            list: true,
                            heading: None,
                            quoted: false,
                        });
                    }
                }
                Kept::Verbatim(events) => {
                    if matches!(events.first(), Some(Event::Start(Tag::BlockQuote(_)))) {
                        out.extend(quote_paragraphs(events));
                    }
                }
                Kept::Line(text) => out.push(Paragraph {
                    lines: vec![Line {
                        markdown: text.clone(),
                        plain: text.clone(),
                        item: false,
                    }],
                    list: false,
                    heading: None,
                    quoted: false,
                }),
                Kept::Heading(events) => {
                    heading = Some(line(events, false).plain).filter(|h| !h.is_empty());
                }
                Kept::Label(text) => heading = Some(text.clone()),
            }
            for p in &mut out[start..] {
                p.heading.clone_from(&heading);
            }
        }
        out
    }
}

impl Kept {
    fn events(&self) -> Events {
        match self {
            Kept::Heading(events) | Kept::Verbatim(events) => events.clone(),
            Kept::Label(_) => Vec::new(),
            Kept::Paragraph(lines) => {
                let mut out = vec![Event::Start(Tag::Paragraph)];
                for (i, l) in lines.iter().enumerate() {
                    if i > 0 {
                        out.push(Event::SoftBreak);
                    }
                    out.extend(l.iter().cloned());
                }
                out.push(Event::End(TagEnd::Paragraph));
                out
            }
            Kept::List { start, items } => {
                let mut out = vec![Event::Start(Tag::List(*start))];
                for item in items {
                    out.push(Event::Start(Tag::Item));
                    out.extend(item.iter().cloned());
                    out.push(Event::End(TagEnd::Item));
                }
                out.push(Event::End(TagEnd::List(start.is_some())));
                out
            }
            Kept::Line(text) => vec![
                Event::Start(Tag::Paragraph),
                Event::Text(text.clone().into()),
                Event::End(TagEnd::Paragraph),
            ],
        }
    }
}

pub(super) fn render(events: &[Event<'static>]) -> String {
    let mut out = String::new();
    let style = pulldown_cmark_to_cmark::Options {
        code_block_token_count: 3,
        list_token: '-',
        ..Default::default()
    };
    match pulldown_cmark_to_cmark::cmark_with_options(events.iter(), &mut out, options(), style) {
        Ok(_) => out,
        Err(e) => {
            // A block the serializer cannot spell back exactly: its text, not nothing.
            tracing::debug!(error = %e, "a cleaned block kept as plain text");
            super::collapse_whitespace(&plain_text(events))
        }
    }
}

/// Removes what real PR bodies are full of: HTML comments and blocks, template headings
/// ("## Description") and boilerplate sections ("## Checklist", "## Type of change", "## How
/// Has This Been Tested?", "## Screenshots", "## Related issue", as ATX, setext or whole-line
/// bold headings), template instructions, task lists, images and badges, attachment links,
/// `<details>` blocks, footnotes, thematic breaks and commit trailers (`Signed-off-by:`, …).
/// Code blocks and tables are kept.
///
/// Bot bodies become one line: Dependabot's "Bumps [x](…) from 1.2 to 1.3.", Renovate's "This
/// PR contains the following updates:" table as "Updates x from 1.0.1 to 1.0.2.".
pub fn clean(body: &str) -> Cleaned {
    let events = parse(body);
    let blocks = top_level(&events);
    let bot = detect_bot(body);
    if bot == Some(Bot::Renovate) {
        if let Some(line) = renovate_line(&blocks) {
            return Cleaned {
                blocks: vec![Kept::Line(line)],
            };
        }
    }
    let cleaned = keep(&blocks, bot);
    if bot == Some(Bot::Dependabot) {
        let bumps = cleaned.blocks.iter().find_map(|b| match b {
            Kept::Paragraph(lines) => lines
                .iter()
                .find(|l| {
                    let plain = plain_text(l).to_lowercase();
                    plain.starts_with("bumps ") || plain.starts_with("updates the requirements on ")
                })
                .cloned(),
            _ => None,
        });
        if let Some(line) = bumps {
            return Cleaned {
                blocks: vec![Kept::Paragraph(vec![line])],
            };
        }
    }
    cleaned
}

/// A body's events. A setext heading of more than one line, or a long one, is read as the
/// paragraph it was meant to be: CommonMark turns `text\n---` into a heading, and an author who
/// wrote a paragraph and then a rule did not mean the paragraph as a section title.
pub(super) fn parse(body: &str) -> Events {
    let mut events: Events = Vec::new();
    let mut demoted: Vec<bool> = Vec::new();
    for (event, range) in Parser::new_ext(body, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => {
                let source = body.get(range).unwrap_or("").trim();
                let setext = !source.starts_with('#');
                let text = source.rsplit_once('\n').map_or(source, |(t, _)| t).trim();
                let demote = setext && (text.contains('\n') || text.chars().count() > 80);
                demoted.push(demote);
                events.push(if demote {
                    Event::Start(Tag::Paragraph)
                } else {
                    event.into_static()
                });
            }
            Event::End(TagEnd::Heading(_)) => {
                let demote = demoted.pop().unwrap_or(false);
                events.push(if demote {
                    Event::End(TagEnd::Paragraph)
                } else {
                    event.into_static()
                });
            }
            other => events.push(other.into_static()),
        }
    }
    events
}

/// The body's top-level blocks, each its events from `Start` to the matching `End` (a leaf
/// block such as a thematic break or an HTML block's events one by one).
pub(super) fn top_level<'e>(events: &'e [Event<'static>]) -> Vec<&'e [Event<'static>]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut depth = 0usize;
    for (i, e) in events.iter().enumerate() {
        match e {
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 {
            out.push(&events[start..=i]);
            start = i + 1;
        }
    }
    if start < events.len() {
        out.push(&events[start..]);
    }
    out
}

/// The blocks worth keeping, with the state real bodies need across blocks: `<details>` depth
/// (its content is Markdown between HTML blocks) and the boilerplate section being skipped.
pub(super) fn keep(blocks: &[&[Event<'static>]], bot: Option<Bot>) -> Cleaned {
    let mut keeper = Keeper {
        kept: Vec::new(),
        details: 0,
        skipping: None,
        bot,
    };
    keeper.blocks(blocks, 0);
    Cleaned {
        blocks: keeper.kept,
    }
}

pub(super) struct Keeper {
    kept: Vec<Kept>,
    details: usize,
    /// Skipping a boilerplate section until a heading of this level or higher.
    skipping: Option<usize>,
    bot: Option<Bot>,
}

impl Keeper {
    fn blocks(&mut self, blocks: &[&[Event<'static>]], depth: usize) {
        for block in blocks {
            self.block(block, depth);
        }
    }

    fn block(&mut self, block: &[Event<'static>], depth: usize) {
        let Some(first) = block.first() else { return };
        let bot = self.bot;
        match first {
            Event::Html(_) | Event::InlineHtml(_) | Event::Start(Tag::HtmlBlock) => {
                // The text of an HTML block (a line of prose after an <img>, `<p>` text)
                // is read as Markdown; tags, comments and <details> content are not.
                let raw: String = block
                    .iter()
                    .filter_map(|e| match e {
                        Event::Html(h) | Event::InlineHtml(h) => Some(h.as_ref()),
                        _ => None,
                    })
                    .collect();
                let text = html_text(&raw, &mut self.details);
                if depth == 0 && has_words(&text) {
                    let events = parse(&text);
                    self.blocks(&top_level(&events), depth + 1);
                }
            }
            _ if self.details > 0 => {
                for e in block {
                    if let Event::Html(h) | Event::InlineHtml(h) = e {
                        self.details = details_depth(h, self.details);
                    }
                }
            }
            Event::Start(Tag::Heading { level, .. }) => {
                let inner = clean_inline(&block[1..block.len() - 1], &mut self.details);
                let level = heading_level(*level);
                let text = plain_text(&inner);
                match heading_decision(&text, level, bot, &mut self.skipping) {
                    Some(true) => {
                        let mut events = vec![block[0].clone()];
                        events.extend(inner);
                        events.push(block[block.len() - 1].clone());
                        self.kept.push(Kept::Heading(events));
                    }
                    Some(false) if self.skipping.is_none() => self.kept.push(Kept::Label(text)),
                    _ => {}
                }
            }
            Event::Start(Tag::Paragraph) => {
                let inner = clean_inline(&block[1..block.len() - 1], &mut self.details);
                if let Some(text) = bold_heading(&inner) {
                    heading_decision(&text, BOLD_HEADING_LEVEL, bot, &mut self.skipping);
                    if self.skipping.is_none() {
                        self.kept.push(Kept::Label(text));
                    }
                    return;
                }
                if self.skipping.is_some() {
                    return;
                }
                let lines: Vec<Events> = split_lines(&inner)
                    .into_iter()
                    .filter(|l| !drop_line(&plain_text(l), bot))
                    .collect();
                if !lines.is_empty() {
                    self.kept.push(Kept::Paragraph(lines));
                }
            }
            Event::Start(Tag::List(start)) if self.skipping.is_none() => {
                let without_tasks = drop_task_items(&block[1..block.len() - 1]);
                let items: Vec<Events> = list_items(&without_tasks)
                    .into_iter()
                    .map(|item| clean_inline(item, &mut self.details))
                    .filter(|item| {
                        let text = plain_text(item);
                        has_words(&text)
                            && !(bot.is_some() && is_bot_link_item(item, &text))
                            && !drop_line(&text, bot)
                    })
                    .collect();
                if !items.is_empty() {
                    self.kept.push(Kept::List {
                        start: *start,
                        items,
                    });
                }
            }
            Event::Start(Tag::CodeBlock(_)) if self.skipping.is_none() => {
                self.kept.push(Kept::Verbatim(block.to_vec()));
            }
            Event::Start(Tag::Table(_) | Tag::BlockQuote(_)) if self.skipping.is_none() => {
                let events = clean_inline(&drop_task_items(block), &mut self.details);
                if has_words(&plain_text(&events)) {
                    self.kept.push(Kept::Verbatim(events));
                }
            }
            // Thematic breaks separate; footnote definitions and anything else are not prose.
            _ => {}
        }
    }
}

/// The text of raw HTML, as Markdown source: tags and comments removed (a block-level tag
/// ends a paragraph), and nothing inside `<details>` (whose depth carries across blocks).
pub(super) fn html_text(raw: &str, details: &mut usize) -> String {
    static TAG: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?s)<!--.*?(?:-->|\z)|<(/?)([A-Za-z][A-Za-z0-9-]*)\b[^>]*>")
            .expect("a valid pattern")
    });
    const BLOCK_TAGS: &[&str] = &[
        "p",
        "div",
        "br",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "li",
        "ul",
        "ol",
        "table",
        "tr",
        "td",
        "th",
        "blockquote",
        "pre",
        "hr",
        "summary",
        "details",
        "section",
        "dl",
        "dt",
        "dd",
    ];
    let mut out = String::new();
    let mut at = 0;
    for m in TAG.captures_iter(raw) {
        let whole = m.get(0).expect("group 0");
        if *details == 0 {
            out.push_str(&raw[at..whole.start()]);
        }
        at = whole.end();
        let Some(name) = m.get(2).map(|n| n.as_str().to_ascii_lowercase()) else {
            continue; // a comment
        };
        let closing = m.get(1).is_some_and(|c| !c.as_str().is_empty());
        if name == "details" {
            *details = if closing {
                details.saturating_sub(1)
            } else {
                *details + 1
            };
        }
        if BLOCK_TAGS.contains(&name.as_str()) {
            out.push_str("\n\n");
        }
        // `<h2>` opens a heading, so a template's "Summary" is a heading there too.
        if let (false, Some(level)) = (
            closing,
            name.strip_prefix('h').and_then(|l| l.parse::<usize>().ok()),
        ) {
            if (1..=6).contains(&level) && *details == 0 {
                out.push_str(&"#".repeat(level));
                out.push(' ');
            }
        }
    }
    if *details == 0 {
        out.push_str(&raw[at..]);
    }
    out
}

/// Every list item whose first content is a task box (`- [ ]`, `- [x]`), at any depth and in
/// loose lists too (where the box sits inside the item's paragraph), removed whole.
pub(super) fn drop_task_items(events: &[Event<'static>]) -> Events {
    let mut out = Vec::with_capacity(events.len());
    let mut i = 0;
    while i < events.len() {
        if let Event::Start(Tag::Item) = &events[i] {
            let first_leaf = events[i + 1..]
                .iter()
                .find(|e| !matches!(e, Event::Start(Tag::Paragraph)));
            if matches!(first_leaf, Some(Event::TaskListMarker(_))) {
                i = matching_end(events, i) + 1;
                continue;
            }
        }
        out.push(events[i].clone());
        i += 1;
    }
    // A list left without items is removed too.
    let mut cleaned: Events = Vec::with_capacity(out.len());
    for e in out {
        if let (Event::End(TagEnd::List(_)), Some(Event::Start(Tag::List(_)))) =
            (&e, cleaned.last())
        {
            cleaned.pop();
            continue;
        }
        cleaned.push(e);
    }
    cleaned
}

/// Whether a heading is kept (`Some(true)`), dropped on its own (`Some(false)`: a template
/// label such as "Description"), or starts or continues a skipped section (`None`).
pub(super) fn heading_decision(
    text: &str,
    level: usize,
    bot: Option<Bot>,
    skipping: &mut Option<usize>,
) -> Option<bool> {
    if skipping.is_some_and(|l| level <= l) {
        *skipping = None;
    }
    if skipping.is_some() {
        return None;
    }
    let key = heading_key(text);
    if is_boilerplate_heading(&key, bot) {
        *skipping = Some(level);
        return None;
    }
    Some(!(key.is_empty() || LABEL_HEADINGS.contains(&key.as_str()) || level == BOLD_HEADING_LEVEL))
}

pub(super) fn heading_level(level: HeadingLevel) -> usize {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// A paragraph that is only bold text (`**Checklist:**`, `__Description__:`), used as a
/// heading: short, and not a sentence. Level 7: below every real heading.
pub(super) const BOLD_HEADING_LEVEL: usize = 7;

pub(super) fn bold_heading(inner: &[Event<'static>]) -> Option<String> {
    let Some(Event::Start(Tag::Strong)) = inner.first() else {
        return None;
    };
    let end = inner
        .iter()
        .position(|e| matches!(e, Event::End(TagEnd::Strong)))?;
    let after = plain_text(&inner[end + 1..]);
    if !after.trim().trim_end_matches(':').is_empty() {
        return None;
    }
    let text = plain_text(&inner[1..end]);
    let text = text.trim();
    let sentence = text.trim_end_matches(':').ends_with(['.', '!']);
    (!text.is_empty() && text.chars().count() <= 80 && !sentence).then(|| text.to_string())
}

/// `<details` opened minus `</details>` closed, from the depth before this HTML.
pub(super) fn details_depth(html: &str, depth: usize) -> usize {
    if html.trim_start().starts_with("<!--") {
        return depth; // a comment that mentions <details> opens nothing
    }
    let lower = html.to_ascii_lowercase();
    let opened = lower.matches("<details").count();
    let closed = lower.matches("</details").count();
    (depth + opened).saturating_sub(closed)
}

/// Inline content cleaned: images and their alt text gone, HTML tags gone (their text kept),
/// text inside `<details>` gone, footnote references gone, and links left with no text (badges)
/// gone. Containers are kept or dropped whole, so the events stay balanced.
pub(super) fn clean_inline(events: &[Event<'static>], details: &mut usize) -> Events {
    let mut out = Vec::with_capacity(events.len());
    let mut i = 0;
    while i < events.len() {
        match &events[i] {
            Event::Html(h) | Event::InlineHtml(h) => *details = details_depth(h, *details),
            Event::Start(Tag::HtmlBlock) => {
                let end = matching_end(events, i);
                for e in &events[i..=end.min(events.len() - 1)] {
                    if let Event::Html(h) = e {
                        *details = details_depth(h, *details);
                    }
                }
                i = end;
            }
            Event::Start(Tag::Image { .. }) => i = matching_end(events, i),
            Event::Start(tag @ Tag::Link { .. }) => {
                let end = matching_end(events, i);
                let inner = clean_inline(&events[i + 1..end.min(events.len())], details);
                if has_words(&plain_text(&inner)) {
                    out.push(Event::Start(tag.clone()));
                    out.extend(inner);
                    out.push(events.get(end).cloned().unwrap_or(Event::End(TagEnd::Link)));
                }
                i = end;
            }
            Event::FootnoteReference(_) => {}
            Event::Text(_) | Event::Code(_) | Event::SoftBreak | Event::HardBreak
                if *details > 0 => {}
            other => out.push(other.clone()),
        }
        i += 1;
    }
    drop_empty_containers(out)
}

/// Inline containers (emphasis, strong, strikethrough) left with nothing inside are removed.
pub(super) fn drop_empty_containers(events: Events) -> Events {
    let mut out: Events = Vec::with_capacity(events.len());
    for e in events {
        let empties = matches!(
            (&e, out.last()),
            (
                Event::End(TagEnd::Emphasis),
                Some(Event::Start(Tag::Emphasis))
            ) | (Event::End(TagEnd::Strong), Some(Event::Start(Tag::Strong)))
                | (
                    Event::End(TagEnd::Strikethrough),
                    Some(Event::Start(Tag::Strikethrough))
                )
                | (
                    Event::End(TagEnd::Paragraph),
                    Some(Event::Start(Tag::Paragraph))
                )
        );
        if empties {
            out.pop();
        } else {
            out.push(e);
        }
    }
    out
}

/// The index of the `End` matching the `Start` at `at` (the last index if unbalanced).
pub(super) fn matching_end(events: &[Event<'static>], at: usize) -> usize {
    let mut depth = 0usize;
    for (i, e) in events.iter().enumerate().skip(at) {
        match e {
            Event::Start(_) => depth += 1,
            Event::End(_) => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    events.len().saturating_sub(1)
}

/// A paragraph's inline events split into lines at the breaks outside any inline element.
pub(super) fn split_lines(inner: &[Event<'static>]) -> Vec<Events> {
    let mut lines = vec![Vec::new()];
    let mut depth = 0usize;
    for e in inner {
        match e {
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::SoftBreak | Event::HardBreak if depth == 0 => {
                lines.push(Vec::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = lines.last_mut() {
            last.push(e.clone());
        }
    }
    lines
        .into_iter()
        .filter(|l| has_words(&plain_text(l)))
        .collect()
}

/// A list's items, each its inner events (without `Start(Item)`/`End(Item)`).
pub(super) fn list_items<'e>(inner: &'e [Event<'static>]) -> Vec<&'e [Event<'static>]> {
    top_level(inner)
        .into_iter()
        .filter(|item| item.len() >= 2 && matches!(item[0], Event::Start(Tag::Item)))
        .map(|item| &item[1..item.len() - 1])
        .collect()
}

/// An item's lines: its own text, then each nested item's.
pub(super) fn item_lines(item: &[Event<'static>]) -> Vec<Line> {
    let mut out = Vec::new();
    let mut current: Events = Vec::new();
    let mut in_code = false;
    for e in item {
        match e {
            Event::Start(Tag::CodeBlock(_)) => in_code = true,
            Event::End(TagEnd::CodeBlock) => in_code = false,
            Event::Start(Tag::Item) | Event::Start(Tag::List(_)) => {
                if !current.is_empty() {
                    out.push(line(&current, true));
                    current.clear();
                }
            }
            Event::End(TagEnd::Paragraph) => current.push(Event::SoftBreak),
            _ if in_code => {}
            other => current.push(other.clone()),
        }
    }
    if !current.is_empty() {
        out.push(line(&current, true));
    }
    out
}

/// The paragraphs of a block quote (a `> [!NOTE]` alert's marker is not text).
pub(super) fn quote_paragraphs(events: &[Event<'static>]) -> Vec<Paragraph> {
    let mut out = Vec::new();
    let mut current: Option<Events> = None;
    for e in events {
        match e {
            Event::Start(Tag::Paragraph) => current = Some(Vec::new()),
            Event::End(TagEnd::Paragraph) => {
                if let Some(p) = current.take() {
                    let lines: Vec<Line> = split_lines(&p).iter().map(|l| line(l, false)).collect();
                    if !lines.is_empty() {
                        out.push(Paragraph {
                            lines,
                            list: false,
                            heading: None,
                            quoted: true,
                        });
                    }
                }
            }
            other => {
                if let Some(p) = current.as_mut() {
                    p.push(other.clone());
                }
            }
        }
    }
    out
}

pub(super) fn line(events: &[Event<'static>], item: bool) -> Line {
    Line {
        markdown: inline_markdown(events),
        plain: super::collapse_whitespace(&plain_text(events)),
        item,
    }
}

// What is boilerplate, and Renovate's tables, are in `boilerplate`.

#[cfg(test)]
mod tests {
    use super::*;

    fn md(body: &str) -> String {
        clean(body).markdown()
    }

    #[test]
    fn escaped_text_reads_back_as_the_same_text() {
        for text in [
            "a_b and _c_ with *stars* [brackets] <tags> &amp; \\_ `tick` ~x~ **b**",
            "C:\\Users\\me",
            "snake_case_name and __init__",
            "Vec<String> & HashMap<K, V>",
        ] {
            let escaped = escape_text(text);
            let parsed: Vec<Event> = Parser::new_ext(&escaped, options()).collect();
            assert_eq!(plain_text(&parsed).trim(), text, "{escaped}");
        }
    }

    #[test]
    fn details_spread_over_blank_lines_are_dropped_whole() {
        let body = "Intro.\n\n<details>\n<summary>Log</summary>\n\nnoise paragraph\n\n- noise item\n\n</details>\n\nAfter.";
        assert_eq!(md(body), "Intro.\n\nAfter.");
    }

    #[test]
    fn footnotes_strikethrough_and_alerts() {
        let body = "Caches the token[^1] for ~~ever~~ an hour.\n\n> [!NOTE]\n> Rotations are read again.\n\n[^1]: the installation token";
        let c = clean(body);
        let paragraphs = c.paragraphs();
        assert_eq!(
            paragraphs[0].lines[0].plain,
            "Caches the token for ever an hour."
        );
        assert_eq!(paragraphs[1].lines[0].plain, "Rotations are read again.");
        assert!(
            !c.markdown().contains("installation token"),
            "{}",
            c.markdown()
        );
    }

    #[test]
    fn entities_and_escapes_are_resolved_by_the_parser() {
        let body = "Handles `a\\b` and foo\\_bar &amp; &lt;T&gt; in `Vec<T>`.";
        let p = &clean(body).paragraphs()[0].lines[0];
        assert_eq!(p.plain, "Handles a\\b and foo_bar & <T> in Vec<T>.");
        assert_eq!(
            p.markdown,
            "Handles `a\\b` and foo_bar & \\<T> in `Vec<T>`."
        );
    }

    /// Found by review: text GitHub users write next to HTML, and what CommonMark makes of
    /// a paragraph before a rule, must not be lost.
    #[test]
    fn text_beside_html_is_kept() {
        let summary = |body: &str| {
            crate::extractive(&crate::SummaryInput {
                title: "t",
                body: Some(body),
                ..Default::default()
            })
            .text
        };
        assert_eq!(
            summary("<img width=\"600\" src=\"https://github.com/user-attachments/assets/x\">\nThe dialog now remembers its size."),
            "The dialog now remembers its size."
        );
        assert_eq!(
            summary("<details><summary>Log</summary>\nnoise\n</details>\nThe real description."),
            "The real description."
        );
        assert_eq!(summary("<!-- describe --> Adds retry"), "Adds retry");
        assert_eq!(
            summary("<h2>Summary</h2>\n<p>Adds retry.</p>"),
            "Adds retry."
        );
        assert_eq!(
            summary("<!-- Put long logs in <details> -->\n\nAdds retry."),
            "Adds retry."
        );
        assert_eq!(
            summary("Closes #412.\nAdds retry with backoff.\n---\n### Notes\nlater"),
            "Closes #412. Adds retry with backoff."
        );
        assert_eq!(summary("- [x] Tests added\n\n- [x] Docs updated"), "");
        assert_eq!(
            summary("Adds paging.\n\n- Checks:\n  - [x] Bug fix\n  - [ ] Feature"),
            "Adds paging."
        );
        let quote = md("> ![x](a.png)\n>\n> **Note:** the API changes.");
        assert!(quote.contains("the API changes"), "{quote}");
    }
}
