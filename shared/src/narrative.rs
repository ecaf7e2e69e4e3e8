//! The onboarding narrative of one module: the stored PR rows turned into entries, and the
//! entries rendered as one deterministic page (`<repo> · <module>`, newest merge first, grouped
//! by month).
//!
//! Everything here is pure: the same rows always give the same page, byte for byte, and nothing
//! depends on the time of rendering. Publishers ([`crate::publish`]) only move the rendering
//! somewhere.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use aws_sdk_dynamodb::types::AttributeValue;
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

use crate::store::{attr, Item};

/// How many of an entry's files the page lists.
const KEY_FILES: usize = 5;
/// How many authors the page header names.
const TOP_AUTHORS: usize = 3;

/// One merged PR as the narrative tells it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub repo: String,
    pub number: u64,
    pub title: String,
    pub url: String,
    pub author: String,
    /// RFC 3339, as stored (`2019-05-15T15:21:18Z`).
    pub merged_at: String,
    pub labels: Vec<String>,
    /// The title's conventional-commit type (`feat`, `fix`), shown as a tag.
    pub kind: Option<String>,
    pub summary: String,
    /// The PR body, cleaned of templates and boilerplate ([`crate::summary::clean_body`]).
    pub description: String,
    pub files: Vec<FileChange>,
    pub linked_issues: Vec<IssueLink>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileChange {
    pub path: String,
    pub additions: u64,
    pub deletions: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IssueLink {
    pub title: String,
    pub state: String,
    pub url: String,
}

#[derive(Debug, thiserror::Error)]
pub enum NarrativeError {
    #[error("the PR row has no {0:?} attribute")]
    MissingAttribute(&'static str),
    #[error("the PR row's {attribute:?} attribute is malformed: {reason}")]
    InvalidAttribute {
        attribute: &'static str,
        reason: String,
    },
}

fn invalid(attribute: &'static str, reason: impl Into<String>) -> NarrativeError {
    NarrativeError::InvalidAttribute {
        attribute,
        reason: reason.into(),
    }
}

/// An [`Entry`] from a stored PR row. Required: `repo`, `prNumber`, `title`, `url`, `author`,
/// `mergedAt` (RFC 3339). Optional: `labels`, `body`, and what enrichment adds (`files`,
/// `linkedIssues`); absent means empty. `summary` is the row's `summary` attribute if present
/// and not blank, else [`crate::summary::extractive`] of the title and body.
pub fn entry_from_item(item: &Item) -> Result<Entry, NarrativeError> {
    let repo = required_string(item, attr::REPO)?;
    let number = match item.get(attr::PR_NUMBER) {
        None => return Err(NarrativeError::MissingAttribute(attr::PR_NUMBER)),
        Some(v) => number(v, attr::PR_NUMBER)?,
    };
    let title = required_string(item, attr::TITLE)?;
    let url = required_string(item, attr::URL)?;
    let author = required_string(item, attr::AUTHOR)?;
    let merged_at = required_string(item, attr::MERGED_AT)?;
    if let Err(e) = OffsetDateTime::parse(&merged_at, &Rfc3339) {
        return Err(invalid(attr::MERGED_AT, format!("{merged_at:?}: {e}")));
    }
    let labels = match item.get(attr::LABELS) {
        None | Some(AttributeValue::Null(_)) => Vec::new(),
        Some(AttributeValue::L(values)) => values
            .iter()
            .map(|v| string(v, attr::LABELS))
            .collect::<Result<_, _>>()?,
        Some(AttributeValue::Ss(values)) => {
            let mut values = values.clone();
            values.sort();
            values
        }
        Some(_) => return Err(invalid(attr::LABELS, "not a list of strings")),
    };
    let body = optional_string(item, attr::BODY)?;
    let summary = match optional_string(item, attr::SUMMARY)? {
        Some(s) if !s.trim().is_empty() => s.trim().to_string(),
        // Rows summarized before summaries were stored: the same extractive paragraph.
        _ => {
            crate::summary::extractive(&crate::summary::SummaryInput {
                title: &title,
                body,
                ..Default::default()
            })
            .text
        }
    };
    let files = maps(item, attr::FILES)?
        .into_iter()
        .map(|m| {
            Ok(FileChange {
                path: field_string(m, "path", attr::FILES)?,
                additions: field_number(m, "additions", attr::FILES)?,
                deletions: field_number(m, "deletions", attr::FILES)?,
            })
        })
        .collect::<Result<_, NarrativeError>>()?;
    let linked_issues = maps(item, attr::LINKED_ISSUES)?
        .into_iter()
        .map(|m| {
            Ok(IssueLink {
                title: field_string(m, "title", attr::LINKED_ISSUES)?,
                state: field_string(m, "state", attr::LINKED_ISSUES)?,
                url: field_string(m, "url", attr::LINKED_ISSUES)?,
            })
        })
        .collect::<Result<_, NarrativeError>>()?;
    let kind = crate::summary::conventional_type(&title).0;
    let description = body.map(crate::summary::clean_body).unwrap_or_default();
    Ok(Entry {
        repo,
        number,
        title,
        url,
        author,
        merged_at,
        labels,
        kind,
        summary,
        description,
        files,
        linked_issues,
    })
}

fn string(v: &AttributeValue, attribute: &'static str) -> Result<String, NarrativeError> {
    v.as_s()
        .cloned()
        .map_err(|_| invalid(attribute, "not a string"))
}

fn number(v: &AttributeValue, attribute: &'static str) -> Result<u64, NarrativeError> {
    let n = v.as_n().map_err(|_| invalid(attribute, "not a number"))?;
    n.parse()
        .map_err(|_| invalid(attribute, format!("{n:?} is not a non-negative integer")))
}

fn required_string(item: &Item, attribute: &'static str) -> Result<String, NarrativeError> {
    match item.get(attribute) {
        None | Some(AttributeValue::Null(_)) => Err(NarrativeError::MissingAttribute(attribute)),
        Some(v) => string(v, attribute),
    }
}

fn optional_string<'a>(
    item: &'a Item,
    attribute: &'static str,
) -> Result<Option<&'a str>, NarrativeError> {
    match item.get(attribute) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::S(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(attribute, "not a string")),
    }
}

type Map = std::collections::HashMap<String, AttributeValue>;

/// A list-of-maps attribute (`files`, `linkedIssues`); absent means empty.
fn maps<'a>(item: &'a Item, attribute: &'static str) -> Result<Vec<&'a Map>, NarrativeError> {
    match item.get(attribute) {
        None | Some(AttributeValue::Null(_)) => Ok(Vec::new()),
        Some(AttributeValue::L(values)) => values
            .iter()
            .map(|v| {
                v.as_m()
                    .map_err(|_| invalid(attribute, "an element is not a map"))
            })
            .collect(),
        Some(_) => Err(invalid(attribute, "not a list")),
    }
}

fn field_string(m: &Map, field: &str, attribute: &'static str) -> Result<String, NarrativeError> {
    match m.get(field) {
        Some(AttributeValue::S(s)) => Ok(s.clone()),
        Some(_) => Err(invalid(attribute, format!("{field:?} is not a string"))),
        None => Err(invalid(attribute, format!("an element has no {field:?}"))),
    }
}

/// A count inside a map; absent counts as 0.
fn field_number(m: &Map, field: &str, attribute: &'static str) -> Result<u64, NarrativeError> {
    match m.get(field) {
        None => Ok(0),
        Some(v) => number(v, attribute),
    }
}

use crate::summary::{cap, collapse_whitespace};

// ---------------------------------------------------------------------------------------------
// The page.

/// One module's page: what the module covers, and its entries, de-duplicated and in page order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModulePage {
    pub repo: String,
    pub module: String,
    /// What the module covers (its globs, or the directory it stands for), for the header.
    pub paths: Vec<String>,
    pub entries: Vec<Entry>,
}

impl ModulePage {
    /// Entries de-duplicated by PR number and ordered newest merge first (ties: higher number
    /// first), so the same rows always give the same page whatever order they were read in.
    /// Of two entries with one number, the later merge (then the greater entry) is kept.
    pub fn new(repo: &str, module: &str, entries: Vec<Entry>) -> Self {
        let mut by_number: BTreeMap<u64, Entry> = BTreeMap::new();
        for entry in entries {
            match by_number.get(&entry.number) {
                Some(kept) if page_order_key(kept) >= page_order_key(&entry) => {}
                _ => {
                    by_number.insert(entry.number, entry);
                }
            }
        }
        let mut entries: Vec<Entry> = by_number.into_values().collect();
        entries.sort_by(|a, b| page_order_key(b).cmp(&page_order_key(a)));
        ModulePage {
            repo: repo.to_string(),
            module: module.to_string(),
            paths: Vec::new(),
            entries,
        }
    }

    /// The page with the module's paths in its header.
    pub fn with_paths(mut self, paths: Vec<String>) -> Self {
        self.paths = paths;
        self
    }

    /// `<repo> · <module>`
    pub fn title(&self) -> String {
        format!("{} · {}", self.repo, self.module)
    }

    /// The entry of this PR, if the page has it.
    pub fn entry(&self, number: u64) -> Option<&Entry> {
        self.entries.iter().find(|e| e.number == number)
    }
}

/// Newest merge is greatest; an unparseable `merged_at` sorts as oldest.
fn page_order_key(e: &Entry) -> ((Option<OffsetDateTime>, u64), &Entry) {
    (order_key(&e.merged_at, e.number), e)
}

fn merged(e: &Entry) -> Option<OffsetDateTime> {
    utc(&e.merged_at)
}

fn utc(rfc3339: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(rfc3339, &Rfc3339)
        .ok()
        .map(|t| t.to_offset(UtcOffset::UTC))
}

/// The page-order key of a PR merged at `merged_at`: greater is newer (higher on the page).
pub fn order_key(merged_at: &str, number: u64) -> (Option<OffsetDateTime>, u64) {
    (utc(merged_at), number)
}

fn date(e: &Entry) -> String {
    match merged(e) {
        Some(t) => ymd(t),
        None => e.merged_at.clone(),
    }
}

/// The month group an entry belongs to: `May 2019` (or `Undated`).
pub fn month(e: &Entry) -> String {
    month_of(&e.merged_at)
}

/// The month group of a merge time.
pub fn month_of(merged_at: &str) -> String {
    match utc(merged_at) {
        Some(t) => format!("{} {:04}", t.month(), t.year()),
        None => "Undated".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// The document model both publishers render: a page is a list of blocks, so Markdown and Notion
// carry the same text in the same order.

/// A run of text with the few marks the narrative uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub text: String,
    pub link: Option<String>,
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
            link: Some(url.trim().to_string()),
            ..Span::text(text)
        }
    }

    pub fn code(text: impl Into<String>) -> Span {
        Span {
            code: true,
            ..Span::text(text)
        }
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
    /// Collapsed by default: `<details>` in Markdown, a toggle in Notion.
    Toggle {
        summary: Vec<Span>,
        children: Vec<Block>,
    },
}

impl Block {
    /// The block's own text, marks dropped (children not included).
    pub fn plain_text(&self) -> String {
        let spans = match self {
            Block::Heading { spans, .. } | Block::Paragraph(spans) | Block::Bullet(spans) => spans,
            Block::Toggle { summary, .. } => summary,
        };
        spans.iter().map(|s| s.text.as_str()).collect()
    }

    pub fn children(&self) -> &[Block] {
        match self {
            Block::Toggle { children, .. } => children,
            _ => &[],
        }
    }
}

/// The header always has this many blocks (a publisher that updates it in place relies on it).
pub const HEADER_BLOCKS: usize = 3;
/// The longest description kept in an entry, in characters.
pub const DESCRIPTION_MAX_CHARS: usize = 20_000;

/// What the module is: its paths, how many merged PRs, first and latest merge, top authors.
pub fn header_blocks(page: &ModulePage) -> Vec<Block> {
    header_of(
        &page.paths,
        page.entries
            .iter()
            .map(|e| (e.merged_at.as_str(), e.author.as_str())),
    )
}

/// [`header_blocks`] from the module's paths and its entries' `(merged_at, author)`.
pub fn header_of<'a>(
    module_paths: &[String],
    entries: impl Iterator<Item = (&'a str, &'a str)>,
) -> Vec<Block> {
    let entries: Vec<(&str, &str)> = entries.collect();
    let mut paths = vec![Span::text("Paths: ")];
    if module_paths.is_empty() {
        paths.push(Span::text("not known (the changed files were not fetched)"));
    }
    for (i, p) in module_paths.iter().enumerate() {
        if i > 0 {
            paths.push(Span::text(", "));
        }
        paths.push(Span::code(p.clone()));
    }
    paths.push(Span::text("."));

    let dates: Vec<OffsetDateTime> = entries.iter().filter_map(|(at, _)| utc(at)).collect();
    let count = entries.len();
    let counts = if count == 0 {
        "No merged pull requests yet.".to_string()
    } else {
        let noun = if count == 1 {
            "merged pull request"
        } else {
            "merged pull requests"
        };
        let span = match (dates.iter().min(), dates.iter().max()) {
            (Some(first), Some(latest)) => {
                format!(", first merged {}, latest {}", ymd(*first), ymd(*latest))
            }
            _ => String::new(),
        };
        format!("{count} {noun}{span}.")
    };

    let mut by_author: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, author) in &entries {
        *by_author.entry(author).or_default() += 1;
    }
    let mut authors: Vec<(&str, usize)> = by_author.into_iter().collect();
    authors.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let authors = if authors.is_empty() {
        "Most frequent authors: none yet.".to_string()
    } else {
        let named: Vec<String> = authors
            .iter()
            .take(TOP_AUTHORS)
            .map(|(name, n)| format!("@{name} ({n})"))
            .collect();
        format!("Most frequent authors: {}.", named.join(", "))
    };
    vec![
        Block::Paragraph(paths),
        Block::Paragraph(vec![Span::text(counts)]),
        Block::Paragraph(vec![Span::text(authors)]),
    ]
}

/// The heading of an entry's month group.
pub fn month_heading(e: &Entry) -> Block {
    Block::Heading {
        level: 2,
        spans: vec![Span::text(month(e))],
    }
}

/// One entry: its heading (date, linked title, number), who and what kind, the summary, linked
/// issues, the key files, and collapsed: every changed file and the cleaned description.
pub fn entry_blocks(e: &Entry) -> Vec<Block> {
    let mut blocks = vec![Block::Heading {
        level: 3,
        spans: vec![
            Span::text(format!("{} — ", date(e))),
            Span::link(one_line(&e.title), &e.url),
            Span::text(format!(" (#{})", e.number)),
        ],
    }];
    let mut meta = vec![Span::text(format!("by @{}", one_line(&e.author)))];
    if let Some(kind) = &e.kind {
        meta.push(Span::text(" · "));
        meta.push(Span::code(kind.clone()));
    }
    if !e.labels.is_empty() {
        let labels: Vec<String> = e.labels.iter().map(|l| one_line(l)).collect();
        meta.push(Span::text(format!(" · labels: {}", labels.join(", "))));
    }
    blocks.push(Block::Paragraph(meta));

    let summary = inline_spans(&collapse_whitespace(&e.summary));
    let summary_text = plain(&summary);
    if !summary.is_empty() {
        blocks.push(Block::Paragraph(summary));
    }

    if !e.linked_issues.is_empty() {
        blocks.push(Block::Paragraph(vec![Span::text("Linked issues:")]));
        for issue in &e.linked_issues {
            blocks.push(Block::Bullet(vec![
                Span::link(one_line(&issue.title), &issue.url),
                Span::text(format!(" ({})", one_line(&issue.state))),
            ]));
        }
    }

    if !e.files.is_empty() {
        let mut files: Vec<&FileChange> = e.files.iter().collect();
        files.sort_by(|a, b| {
            (b.additions + b.deletions)
                .cmp(&(a.additions + a.deletions))
                .then(a.path.cmp(&b.path))
        });
        blocks.push(Block::Paragraph(vec![Span::text("Key files:")]));
        blocks.extend(files.iter().take(KEY_FILES).map(|f| file_bullet(f)));
        if files.len() > KEY_FILES {
            let mut all = files.clone();
            all.sort_by(|a, b| a.path.cmp(&b.path));
            blocks.push(Block::Toggle {
                summary: vec![Span::text(format!("All {} changed files", all.len()))],
                children: all.into_iter().map(file_bullet).collect(),
            });
        }
    }

    let paragraphs: Vec<Vec<Span>> = description_paragraphs(&e.description)
        .iter()
        .map(|p| inline_spans(p))
        .collect();
    let only_the_summary = paragraphs.len() == 1
        && collapse_whitespace(&plain(&paragraphs[0])) == collapse_whitespace(&summary_text);
    if !paragraphs.is_empty() && !only_the_summary {
        blocks.push(Block::Toggle {
            summary: vec![Span::text("Description")],
            children: paragraphs.into_iter().map(Block::Paragraph).collect(),
        });
    }
    blocks
}

fn plain(spans: &[Span]) -> String {
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
                spans.push(Span {
                    bold: true,
                    ..Span::text(&after[..end])
                });
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
            Some(last) if is_plain(last) && is_plain(&span) => last.text.push_str(&span.text),
            _ => merged.push(span),
        }
    }
    merged
}

fn is_plain(s: &Span) -> bool {
    s.link.is_none() && !s.code && !s.bold
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

fn file_bullet(f: &FileChange) -> Block {
    Block::Bullet(vec![
        Span::code(one_line(&f.path)),
        Span::text(format!(" (+{}/−{})", f.additions, f.deletions)),
    ])
}

/// The description split into paragraphs at blank lines, each trimmed, capped in total at
/// [`DESCRIPTION_MAX_CHARS`].
fn description_paragraphs(description: &str) -> Vec<String> {
    let text = cap(description.trim(), DESCRIPTION_MAX_CHARS);
    let mut paragraphs = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                paragraphs.push(current.join("\n"));
                current.clear();
            }
        } else {
            current.push(line.trim_end());
        }
    }
    if !current.is_empty() {
        paragraphs.push(current.join("\n"));
    }
    paragraphs
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r', '\t'], " ")
}

/// The whole page as blocks: header, then each month's heading and its entries, newest first.
pub fn page_blocks(page: &ModulePage) -> Vec<Block> {
    let mut blocks = header_blocks(page);
    let mut current_month: Option<String> = None;
    for entry in &page.entries {
        let month = month(entry);
        if current_month.as_deref() != Some(month.as_str()) {
            blocks.push(month_heading(entry));
            current_month = Some(month);
        }
        blocks.extend(entry_blocks(entry));
    }
    blocks
}

/// The page as Markdown: the title, then [`page_blocks`]. Byte-identical for the same page;
/// nothing in it depends on when it was rendered.
pub fn render_markdown(page: &ModulePage) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}", escape(&page.title()));
    render_blocks(&mut out, &page_blocks(page));
    out
}

fn render_blocks(out: &mut String, blocks: &[Block]) {
    let mut previous_bullet = false;
    for block in blocks {
        let bullet = matches!(block, Block::Bullet(_));
        if !(bullet && previous_bullet) {
            out.push('\n');
        }
        previous_bullet = bullet;
        match block {
            Block::Heading { level, spans } => {
                let _ = writeln!(
                    out,
                    "{} {}",
                    "#".repeat(usize::from((*level).clamp(1, 6))),
                    inline(spans)
                );
            }
            Block::Paragraph(spans) => {
                let _ = writeln!(out, "{}", inline(spans));
            }
            Block::Bullet(spans) => {
                let _ = writeln!(out, "- {}", inline(spans));
            }
            Block::Toggle { summary, children } => {
                let text: String = summary.iter().map(|s| s.text.as_str()).collect();
                let _ = writeln!(out, "<details>\n<summary>{}</summary>", html_escape(&text));
                render_blocks(out, children);
                out.push_str("\n</details>\n");
            }
        }
    }
}

fn inline(spans: &[Span]) -> String {
    let mut out = String::new();
    for span in spans {
        let mut text = if span.code {
            code_span(&span.text)
        } else {
            escape_text(&span.text)
        };
        if span.bold {
            text = format!("**{text}**");
        }
        match &span.link {
            Some(url) => {
                let _ = write!(out, "[{text}]({})", escape_url(url));
            }
            None => out.push_str(&text),
        }
    }
    out
}

/// [`escape`], but a newline inside a paragraph stays a line break (a hard break, `\`).
fn escape_text(s: &str) -> String {
    s.split('\n').map(escape).collect::<Vec<_>>().join("\\\n")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn ymd(t: OffsetDateTime) -> String {
    format!("{:04}-{:02}-{:02}", t.year(), u8::from(t.month()), t.day())
}

/// Backslash-escapes the characters that would make text into Markdown (emphasis, code, links
/// and images, HTML, entities, tables, strikethrough). `(`, `)`, `#` and `!` are left alone: with
/// `[`/`]` escaped and no use at the start of a line they cannot start anything. Newlines become
/// spaces: every use is one line.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' | '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A link destination that cannot end the link early or break the line.
fn escape_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.trim().chars() {
        match c {
            ' ' => out.push_str("%20"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '\n' | '\r' | '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// An inline code span that holds any text, backticks included.
fn code_span(s: &str) -> String {
    let s = s.replace(['\n', '\r'], " ");
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

/// An entry for unit tests of the narrative and the publishers.
#[cfg(test)]
pub(crate) mod sample {
    use super::Entry;

    pub fn entry(number: u64, merged_at: &str, author: &str) -> Entry {
        Entry {
            repo: "acme/widgets".into(),
            number,
            title: format!("Change {number}"),
            url: format!("https://github.com/acme/widgets/pull/{number}"),
            author: author.into(),
            merged_at: merged_at.into(),
            labels: vec![],
            kind: None,
            summary: format!("Summary of {number}."),
            description: String::new(),
            files: vec![],
            linked_issues: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_string())
    }
    fn n(v: u64) -> AttributeValue {
        AttributeValue::N(v.to_string())
    }
    fn m(fields: &[(&str, AttributeValue)]) -> AttributeValue {
        AttributeValue::M(
            fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    const FIXTURE_BODY: &str = "This is a pretty simple change that we need to pull into master.";

    /// A row as the webhook writes it (the fixtures' PR #2).
    fn webhook_row() -> Item {
        HashMap::from([
            (attr::REPO.to_string(), s("Codertocat/Hello-World")),
            (attr::PR_NUMBER.to_string(), n(2)),
            (
                attr::TITLE.to_string(),
                s("Update the README with new information."),
            ),
            (attr::BODY.to_string(), s(FIXTURE_BODY)),
            (attr::AUTHOR.to_string(), s("Codertocat")),
            (attr::LABELS.to_string(), AttributeValue::L(vec![s("bug")])),
            (
                attr::URL.to_string(),
                s("https://github.com/Codertocat/Hello-World/pull/2"),
            ),
            (attr::BASE_REF.to_string(), s("master")),
            (attr::MERGED_AT.to_string(), s("2019-05-15T15:21:18Z")),
            (attr::PENDING_SHARD.to_string(), s("2")),
        ])
    }

    use super::sample::entry;

    // --- entry_from_item ---

    #[test]
    fn entry_from_a_webhook_row() {
        let e = entry_from_item(&webhook_row()).unwrap();
        assert_eq!(
            e,
            Entry {
                repo: "Codertocat/Hello-World".into(),
                number: 2,
                title: "Update the README with new information.".into(),
                url: "https://github.com/Codertocat/Hello-World/pull/2".into(),
                author: "Codertocat".into(),
                merged_at: "2019-05-15T15:21:18Z".into(),
                labels: vec!["bug".into()],
                kind: None,
                summary: FIXTURE_BODY.into(),
                description: FIXTURE_BODY.into(),
                files: vec![],
                linked_issues: vec![],
            }
        );
    }

    #[test]
    fn entry_from_an_enriched_summarized_row() {
        let mut row = webhook_row();
        row.insert(
            attr::FILES.into(),
            AttributeValue::L(vec![m(&[
                ("path", s("README.md")),
                ("status", s("modified")),
                ("additions", n(1)),
                ("deletions", n(1)),
            ])]),
        );
        row.insert(
            attr::LINKED_ISSUES.into(),
            AttributeValue::L(vec![m(&[
                ("repo", s("Codertocat/Hello-World")),
                ("number", n(1)),
                ("title", s("Spelling error in the README file")),
                ("state", s("closed")),
                (
                    "url",
                    s("https://github.com/Codertocat/Hello-World/issues/1"),
                ),
            ])]),
        );
        row.insert(attr::ADDITIONS.into(), n(1));
        row.insert(attr::SUMMARIZED_AT.into(), s("2019-05-15T15:22:00.000Z"));
        row.insert(attr::MODULES.into(), AttributeValue::L(vec![s("(root)")]));
        row.insert(attr::SUMMARY.into(), s("  Stored summary wins.  "));
        let e = entry_from_item(&row).unwrap();
        assert_eq!(e.summary, "Stored summary wins.");
        assert_eq!(
            e.files,
            vec![FileChange {
                path: "README.md".into(),
                additions: 1,
                deletions: 1
            }]
        );
        assert_eq!(
            e.linked_issues,
            vec![IssueLink {
                title: "Spelling error in the README file".into(),
                state: "closed".into(),
                url: "https://github.com/Codertocat/Hello-World/issues/1".into(),
            }]
        );
        // A blank stored summary falls back to the extractive one.
        row.insert(attr::SUMMARY.into(), s("  "));
        assert_eq!(entry_from_item(&row).unwrap().summary, FIXTURE_BODY);
    }

    #[test]
    fn entry_from_a_bad_row_says_what_is_wrong() {
        let mut row = webhook_row();
        row.remove(attr::TITLE);
        assert!(matches!(
            entry_from_item(&row),
            Err(NarrativeError::MissingAttribute("title"))
        ));
        let mut row = webhook_row();
        row.insert(attr::MERGED_AT.into(), s("yesterday"));
        let err = entry_from_item(&row).unwrap_err();
        assert!(err.to_string().contains("mergedAt"), "{err}");
        let mut row = webhook_row();
        row.insert(attr::PR_NUMBER.into(), s("2"));
        assert!(matches!(
            entry_from_item(&row),
            Err(NarrativeError::InvalidAttribute {
                attribute: "prNumber",
                ..
            })
        ));
        let mut row = webhook_row();
        row.insert(attr::FILES.into(), AttributeValue::L(vec![s("README.md")]));
        assert!(entry_from_item(&row).is_err());
        // No body and no labels are fine.
        let mut row = webhook_row();
        row.remove(attr::BODY);
        row.remove(attr::LABELS);
        let e = entry_from_item(&row).unwrap();
        assert_eq!(e.summary, "Update the README with new information.");
        assert!(e.labels.is_empty());
    }

    // --- ModulePage ---

    #[test]
    fn page_orders_newest_first_and_deduplicates() {
        let mut dup = entry(7, "2024-03-01T10:00:00Z", "bob");
        dup.summary = "an older copy".into();
        let entries = vec![
            entry(3, "2024-01-05T09:00:00Z", "alice"),
            entry(7, "2024-03-01T10:00:00Z", "bob"),
            entry(5, "2024-03-01T10:00:00Z", "carol"), // same instant as #7: higher number first
            entry(9, "2023-12-31T23:59:59Z", "alice"),
            dup.clone(),
            entry(11, "2024-03-01T12:00:00+02:00", "dave"), // 10:00Z: ties with #7 and #5
        ];
        let page = ModulePage::new("acme/widgets", "src", entries.clone());
        let numbers: Vec<u64> = page.entries.iter().map(|e| e.number).collect();
        assert_eq!(numbers, vec![11, 7, 5, 3, 9]);
        assert_eq!(page.title(), "acme/widgets · src");
        // Whatever order the rows were read in, and whichever copy came first.
        let mut reversed = entries;
        reversed.reverse();
        assert_eq!(ModulePage::new("acme/widgets", "src", reversed), page);
    }

    // --- render_markdown ---

    fn sample_page() -> ModulePage {
        let mut a = entry(12, "2024-02-10T08:00:00Z", "alice");
        a.title = "fix: *bold* [link](x) `code` <b>&amp; | _u_ \\ #3".into();
        a.kind = Some("fix".into());
        a.description = "Why: the parser\ndropped tags.\n\n\nSecond *paragraph*.\n".into();
        a.labels = vec!["bug".into(), "good first issue".into()];
        a.summary = "Fixes the  parser\nso <details> is shown.".into();
        a.linked_issues = vec![IssueLink {
            title: "Parser [crash]".into(),
            state: "closed".into(),
            url: "https://github.com/acme/widgets/issues/4".into(),
        }];
        a.files = (1..=7)
            .map(|i| FileChange {
                path: format!("src/f{i}.rs"),
                additions: i * 10,
                deletions: if i == 2 { 55 } else { 0 },
            })
            .chain([FileChange {
                path: "src/a`tick.rs".into(),
                additions: 70,
                deletions: 0,
            }])
            .collect();
        let b = entry(10, "2024-02-01T00:00:00Z", "bob");
        let c = entry(4, "2023-11-20T17:30:00Z", "alice");
        let d = entry(2, "2023-11-02T17:30:00Z", "carol");
        let e = entry(1, "2023-10-01T00:00:00Z", "dave");
        ModulePage::new("acme/widgets", "src", vec![c, e, a, d, b])
            .with_paths(vec!["src/**".into(), "!src/**/*_test.rs".into()])
    }

    #[test]
    fn markdown_has_title_header_and_month_groups() {
        let md = render_markdown(&sample_page());
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "# acme/widgets · src");
        assert_eq!(lines[2], "Paths: `src/**`, `!src/**/*_test.rs`.");
        assert_eq!(
            lines[4],
            "5 merged pull requests, first merged 2023-10-01, latest 2024-02-10."
        );
        assert_eq!(
            lines[6],
            "Most frequent authors: @alice (2), @bob (1), @carol (1)."
        );
        let months: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with("## "))
            .collect();
        assert_eq!(
            months,
            vec!["## February 2024", "## November 2023", "## October 2023"]
        );
        let entries: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with("### "))
            .collect();
        assert_eq!(entries.len(), 5);
        assert_eq!(
            entries[1],
            "### 2024-02-01 — [Change 10](https://github.com/acme/widgets/pull/10) (#10)"
        );
        assert!(md.contains("\nby @alice · `fix` · labels: bug, good first issue\n"));
        assert!(md.contains("\nby @bob\n\nSummary of 10.\n"));
        assert!(md.contains("\nFixes the parser so \\<details\\> is shown.\n"));
        // Every file, collapsed, after the key files; then the description.
        assert!(md.contains(
            "\n<details>\n<summary>All 8 changed files</summary>\n\n- `` src/a`tick.rs `` (+70/−0)\n- `src/f1.rs` (+10/−0)\n"
        ), "{md}");
        assert!(md.contains(
            "\n<details>\n<summary>Description</summary>\n\nWhy: the parser\\\ndropped tags.\n\nSecond \\*paragraph\\*.\n\n</details>\n"
        ), "{md}");
        assert!(md.contains(
            "\nLinked issues:\n\n- [Parser \\[crash\\]](https://github.com/acme/widgets/issues/4) (closed)\n"
        ));
        assert!(md.ends_with("Summary of 1.\n"));
        assert!(!md.contains("\n\n\n"));
    }

    #[test]
    fn markdown_key_files_are_the_five_most_changed() {
        let md = render_markdown(&sample_page());
        let expected = "\nKey files:\n\n\
                        - `src/f2.rs` (+20/−55)\n\
                        - `` src/a`tick.rs `` (+70/−0)\n\
                        - `src/f7.rs` (+70/−0)\n\
                        - `src/f6.rs` (+60/−0)\n\
                        - `src/f5.rs` (+50/−0)\n";
        assert!(md.contains(expected), "{md}");
        let key_files = &md[md.find("Key files:").unwrap()..md.find("<details>").unwrap()];
        assert!(!key_files.contains("src/f4.rs"));
        assert!(!key_files.contains("src/f1.rs"));
    }

    #[test]
    fn markdown_escapes_titles() {
        let md = render_markdown(&sample_page());
        assert!(
            md.contains(
                "### 2024-02-10 — [fix: \\*bold\\* \\[link\\](x) \\`code\\` \\<b\\>\\&amp; \\| \\_u\\_ \\\\ #3](https://github.com/acme/widgets/pull/12) (#12)\n"
            ),
            "{md}"
        );
        let mut page = ModulePage::new(
            "acme/widgets",
            "docs_*",
            vec![entry(1, "2024-01-01T00:00:00Z", "a_b")],
        );
        page.entries[0].url = "https://example.com/a (b)".into();
        let md = render_markdown(&page);
        assert!(md.starts_with("# acme/widgets · docs\\_\\*\n"));
        assert!(md.contains("(https://example.com/a%20%28b%29)"));
        assert!(md.contains("by @a\\_b\n"));
    }

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
                Span {
                    bold: true,
                    ..Span::text("small")
                },
                Span::text(" files, see "),
                Span::link("the docs", "https://x.dev/a"),
                Span::text(" or local; a ` lone tick and [not a link]."),
            ]
        );
        let md = inline(&spans);
        assert_eq!(
            md,
            "Use `read_all` for **small** files, see [the docs](https://x.dev/a) or local; a \\` lone tick and \\[not a link\\]."
        );
        assert_eq!(inline_spans("``a`b``"), vec![Span::code("a`b")]);
    }

    #[test]
    fn markdown_is_deterministic() {
        let page = sample_page();
        let first = render_markdown(&page);
        assert_eq!(first, render_markdown(&page.clone()));
        let mut shuffled = page.entries.clone();
        shuffled.rotate_left(2);
        let again =
            ModulePage::new(&page.repo, &page.module, shuffled).with_paths(page.paths.clone());
        assert_eq!(first, render_markdown(&again));
    }

    #[test]
    fn markdown_of_a_single_and_an_empty_page() {
        let row = entry_from_item(&webhook_row()).unwrap();
        let md = render_markdown(
            &ModulePage::new("Codertocat/Hello-World", "(root)", vec![row])
                .with_paths(vec!["(root)".into()]),
        );
        assert_eq!(
            md,
            "# Codertocat/Hello-World · (root)\n\
             \n\
             Paths: `(root)`.\n\
             \n\
             1 merged pull request, first merged 2019-05-15, latest 2019-05-15.\n\
             \n\
             Most frequent authors: @Codertocat (1).\n\
             \n\
             ## May 2019\n\
             \n\
             ### 2019-05-15 — [Update the README with new information.](https://github.com/Codertocat/Hello-World/pull/2) (#2)\n\
             \n\
             by @Codertocat · labels: bug\n\
             \n\
             This is a pretty simple change that we need to pull into master.\n"
        );
        let empty = render_markdown(&ModulePage::new("a/b", "m", vec![]));
        assert_eq!(
            empty,
            "# a/b · m\n\nPaths: not known (the changed files were not fetched).\n\nNo merged pull requests yet.\n\n\
             Most frequent authors: none yet.\n"
        );
    }
}
