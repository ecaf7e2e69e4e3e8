//! How figures and dates read on a page: `3 merged pull requests`, `2019-05-15`, `May 2019`.

use chronicle_domain::parse_rfc3339;
use time::OffsetDateTime;

/// `1 merged pull request`, `3 merged pull requests`.
pub fn count_of(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn utc(rfc3339: &str) -> Option<OffsetDateTime> {
    parse_rfc3339(rfc3339).map(|t| t.to_offset(time::UtcOffset::UTC))
}

/// `2019-05-15` (as stored, if it does not parse).
pub fn date(rfc3339: &str) -> String {
    match utc(rfc3339) {
        Some(t) => format!("{:04}-{:02}-{:02}", t.year(), u8::from(t.month()), t.day()),
        None => rfc3339.to_string(),
    }
}

/// `May 2019` (or `Undated`).
pub fn month_of(merged_at: &str) -> String {
    match utc(merged_at) {
        Some(t) => format!("{} {:04}", t.month(), t.year()),
        None => "Undated".to_string(),
    }
}
