//! Retry waits with full jitter (a uniformly random wait up to the exponential bound), so that
//! workers that failed together do not retry together.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// A random wait in `[0, base × 2^attempt]` (the exponent capped at 2^8).
pub fn full_jitter(base: Duration, attempt: u32) -> Duration {
    let bound = base.saturating_mul(1 << attempt.min(8));
    bound.mul_f64(unit_random())
}

/// A random index below `n` (0 when `n` is 0), e.g. where a sweep starts.
pub fn random_below(n: usize) -> usize {
    ((unit_random() * n as f64) as usize).min(n.saturating_sub(1))
}

/// A number in `[0, 1)`: the standard library's per-process random hash keys, mixed with the
/// time, are random enough to spread retries (not for anything secret).
fn unit_random() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_stay_within_the_bound_and_vary() {
        let waits: Vec<Duration> = (0..50)
            .map(|_| full_jitter(Duration::from_millis(100), 3))
            .collect();
        assert!(waits.iter().all(|w| *w <= Duration::from_millis(800)));
        let distinct: std::collections::BTreeSet<Duration> = waits.into_iter().collect();
        assert!(distinct.len() > 10, "jittered waits differ");
    }
}
