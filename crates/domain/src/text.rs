//! Text cut to a size, the same way everywhere a title or summary is shown.

/// At most `max` characters: cut at the last word boundary that leaves room for "…", never
/// inside a code span, trailing punctuation trimmed. A single word longer than `max` is cut hard.
pub fn cap(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let budget = max.saturating_sub(1);
    let Some((cut, next)) = text.char_indices().nth(budget) else {
        return text.to_string();
    };
    let mut head = &text[..cut];
    if !next.is_whitespace() {
        if let Some(i) = head.rfind(char::is_whitespace) {
            if i > 0 {
                head = &head[..i];
            }
        }
    }
    if head.matches('`').count() % 2 == 1 {
        if let Some(i) = head.rfind('`') {
            let before = head[..i].trim_end();
            if !before.is_empty() {
                head = before;
            }
        }
    }
    let trimmed = head.trim_end_matches(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                ',' | ';' | ':' | '.' | '-' | '–' | '—' | '(' | '[' | '/' | '\\'
            )
    });
    let head = if trimmed.is_empty() { head } else { trimmed };
    format!("{head}…")
}
