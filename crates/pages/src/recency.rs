//! How much an old change still counts: weights that halve with time, for "Start here" and
//! "Who knows it".

use chronicle_domain::parse_rfc3339;
use time::OffsetDateTime;

/// Days from `at` (RFC 3339) to `now`, never negative; `None` when `at` does not parse.
pub fn days_since(at: &str, now: OffsetDateTime) -> Option<f64> {
    parse_rfc3339(at).map(|t| ((now - t).whole_seconds().max(0) as f64) / 86_400.0)
}

/// 1 at `now`, halving every `half_life` days before it; 0 when `at` does not parse.
pub fn decay(at: &str, now: OffsetDateTime, half_life: f64) -> f64 {
    days_since(at, now).map_or(0.0, |d| 0.5_f64.powf(d / half_life))
}
