//! The why of a PR in its own words: one sentence of its body, quoted verbatim, for a module's
//! "Key decisions". Deterministic, no LLM.
//!
//! A sentence that gives a reason or a choice ("because", "so that", "instead of", "to avoid",
//! "trade-off", "we decided", or any sentence under a "Why" or "Motivation" heading) is preferred.
//! Real bodies seldom hold one (on tokio-rs/axum, a few percent do), so otherwise the most
//! informative prose sentence is taken: a full sentence of some length, never a list item (a
//! squash list's commit subjects, a checklist), a template's text, a trailer or a bare issue
//! reference, all of which [`crate::clean`] and the checks here leave out.

use std::sync::LazyLock;

use chronicle_domain::Quote;
use regex::Regex;
use unicode_segmentation::UnicodeSegmentation;

use crate::clean;

/// The longest quote, in characters: a sentence, not a paragraph.
pub const QUOTE_MAX_CHARS: usize = 280;
/// A quote has at least this many words: shorter sentences say too little out of context.
const QUOTE_MIN_WORDS: usize = 7;
/// Sentences read from one body, so a huge body costs no more than a long one.
const MAX_SENTENCES: usize = 60;

/// Words and phrases that give a reason or a choice.
fn reason_pattern() -> &'static Regex {
    static REASON: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)\b(?:because|so that|instead of|rather than|to avoid|in order to|the motivation|motivated by|trade-?offs?|we decided|decided to|we chose|chose to|the reason|otherwise|which means|this means|this allows|this lets|this makes it|needed (?:to|for|because)|was (?:causing|wrong|broken)|caused|led to|the problem|the issue (?:is|was)|previously|used to)\b|,\s+so\s+(?:it|that|we|the|this|they|callers|users)\b",
        )
        .expect("a valid pattern")
    });
    &REASON
}

/// Headings whose section is the why.
fn is_why_heading(heading: &str) -> bool {
    let h = heading.to_lowercase();
    [
        "why",
        "motivation",
        "rationale",
        "background",
        "context",
        "problem",
    ]
    .iter()
    .any(|w| h.split(|c: char| !c.is_alphabetic()).any(|word| word == *w))
}

/// Text that is not the PR's own prose: a trailer, an issue line, a URL, a template's prompt.
fn is_boilerplate(sentence: &str) -> bool {
    static NOT_PROSE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)^(?:signed-off-by|co-authored-by|reviewed-by|acked-by|change-id|fixes|closes|resolves|refs?|see|cc|/cc|depends on)\b|https?://|\bthis pr\b.*\b(?:template|checklist)\b|\b(?:please|make sure|describe|delete this|remove this|if applicable|n/a)\b",
        )
        .expect("a valid pattern")
    });
    NOT_PROSE.is_match(sentence.trim())
}

/// The sentence of `body` that best says why, verbatim as inline Markdown (code spans kept,
/// links reduced to their text, the rest escaped, whitespace collapsed), if any.
pub fn key_sentence(body: &str, title: &str) -> Option<Quote> {
    let cleaned = clean::clean(body);
    let title_words = crate::comparable(title);
    let mut best: Option<(u64, Quote)> = None;
    let mut read = 0;
    // Never a list item, nor a block quote (someone else's words, not the PR's).
    'paragraphs: for p in cleaned.paragraphs().iter().filter(|p| !p.list && !p.quoted) {
        let under_why = p.heading.as_deref().is_some_and(is_why_heading);
        let text = crate::collapse_whitespace(
            &p.lines
                .iter()
                .map(|l| l.markdown.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        );
        let (masked, spans) = mask_code_spans(&text);
        for sentence in masked.unicode_sentences() {
            read += 1;
            if read > MAX_SENTENCES {
                break 'paragraphs;
            }
            let sentence = unmask(sentence.trim(), &spans);
            let sentence = sentence.as_str();
            let words = sentence.split_whitespace().count();
            if words < QUOTE_MIN_WORDS
                || is_boilerplate(sentence)
                || !sentence.ends_with(['.', '!', ')', '"', '”'])
                || crate::comparable(sentence) == title_words
                || sentence.chars().count() > QUOTE_MAX_CHARS
            {
                continue;
            }
            let reason = under_why || reason_pattern().is_match(sentence);
            // A reason first; then longer sentences (to a point), earlier ones on a tie.
            let score = u64::from(reason) * 1_000 + words.min(30) as u64;
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((
                    score,
                    Quote {
                        text: sentence.to_string(),
                        reason,
                    },
                ));
            }
        }
    }
    best.map(|(_, q)| q)
}

/// Code spans stand in as one private-use character each while sentences are found, so a
/// path (`./README.md`) or a call (`a.b()`) inside one never ends a sentence.
const MASK_FIRST: u32 = 0xE000;
const MASK_LAST: u32 = 0xF8FF;

fn is_mask(c: char) -> bool {
    (MASK_FIRST..=MASK_LAST).contains(&u32::from(c))
}

fn mask_code_spans(text: &str) -> (String, Vec<String>) {
    // The body's own private-use characters would read as masks: they go first.
    let text: String = text.chars().filter(|c| !is_mask(*c)).collect();
    let mut masked = String::with_capacity(text.len());
    let mut spans: Vec<String> = Vec::new();
    let mut rest = text.as_str();
    while let Some(open) = rest.find('`') {
        let Some(len) = rest[open + 1..].find('`') else {
            break;
        };
        let Some(mask) = char::from_u32(MASK_FIRST + spans.len() as u32).filter(|c| is_mask(*c))
        else {
            break;
        };
        masked.push_str(&rest[..open]);
        masked.push(mask);
        spans.push(rest[open..open + len + 2].to_string());
        rest = &rest[open + len + 2..];
    }
    masked.push_str(rest);
    (masked, spans)
}

fn unmask(sentence: &str, spans: &[String]) -> String {
    let mut out = String::with_capacity(sentence.len());
    for c in sentence.chars() {
        match spans.get((u32::from(c).wrapping_sub(MASK_FIRST)) as usize) {
            Some(span) if is_mask(c) => out.push_str(span),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_preferred_and_quoted_verbatim() {
        let body = "## Summary\n\nThis changes the shutdown path of the server in two places.\n\n\
                    The waiter was shared between all connections, so it became a point of \
                    contention under load. We now give each connection its own waiter.";
        let q = key_sentence(body, "Avoid shared shutdown waiter contention").unwrap();
        assert_eq!(
            q.text,
            "The waiter was shared between all connections, so it became a point of contention under load."
        );
        assert!(q.reason);
    }

    #[test]
    fn a_why_heading_makes_its_sentences_reasons() {
        let body = "## What\n\nAdds a typed state extractor to the router crate.\n\n## Why\n\n\
                    Handlers had to downcast the state by hand and got it wrong at runtime.";
        let q = key_sentence(body, "Add type safe state extractor").unwrap();
        assert!(q.reason);
        assert!(q.text.starts_with("Handlers had to downcast"), "{q:?}");
    }

    #[test]
    fn without_a_reason_the_most_informative_prose_sentence() {
        let body = "Short one.\n\nThe router now matches trailing slashes the same way for \
                    nested routers and for the top level.";
        let q = key_sentence(body, "Fix trailing slashes").unwrap();
        assert!(!q.reason);
        assert!(q.text.starts_with("The router now matches"), "{q:?}");
    }

    /// Squash lists, checklists, templates, trailers and issue lines are never quoted.
    #[test]
    fn never_a_list_a_template_or_a_trailer() {
        for body in [
            "* Add the thing because we needed it for the new parser\n* fix tests\n* address review comments",
            "- [x] I have added tests because the template asks for them all the time",
            "<!-- Please describe your change because reviewers need to know why -->",
            "Signed-off-by: Jane Doe <jane@example.com> because of the policy here okay",
            "Fixes #12 because the old behaviour hid the real error from all callers.",
            "Please make sure that you describe the change so that reviewers understand it.",
            "See https://example.com/a/b because the docs there explain it in detail.",
            "> The server hangs because the waiter is shared between all of the connections.",
        ] {
            assert_eq!(key_sentence(body, "t"), None, "{body}");
        }
    }

    /// A path or a call in a code span does not end the sentence, and the quote keeps it as
    /// code.
    #[test]
    fn code_spans_stay_whole() {
        let body = "The README situation is a bit annoying because we want `./README.md` for \
                    viewing the repo on GitHub but `axum/README.md` for crates.io. Next.";
        let q = key_sentence(body, "Move the crate").unwrap();
        assert_eq!(
            q.text,
            "The README situation is a bit annoying because we want `./README.md` for viewing \
             the repo on GitHub but `axum/README.md` for crates.io."
        );
    }

    #[test]
    fn hostile_bodies_stay_bounded() {
        let body = "A sentence that goes on and on without end. ".repeat(10_000);
        let q = key_sentence(&body, "t").unwrap();
        assert!(q.text.chars().count() <= QUOTE_MAX_CHARS);
        let unclosed = "word ".repeat(2_000);
        assert_eq!(key_sentence(&unclosed, "t"), None);
    }
}
