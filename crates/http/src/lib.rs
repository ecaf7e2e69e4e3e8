//! How Chronicle's clients speak HTTP: clients that carry a credential, and retry waits
//! ([`backoff`]).
//!
//! HTTP clients that carry a credential (a GitHub token, an LLM key, a Notion token). reqwest
//! follows up to 10 redirects by default and drops only `Authorization` and cookies on a
//! cross-host hop, so `x-api-key` would follow a redirect anywhere: these clients follow none
//! (GitHub: only on its own host, where a renamed repository answers 301), and their base
//! URLs must be `https://` except on the loopback interface (the local stand-ins).

pub mod backoff;

use reqwest::redirect::Policy;

/// A client builder that follows no redirect.
pub fn credentialed() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .user_agent(concat!("chronicle/", env!("CARGO_PKG_VERSION")))
        .redirect(Policy::none())
}

/// Redirects followed only to the same scheme, host and port (at most 5): GitHub answers a
/// renamed repository's API paths with a 301 on its own host.
pub fn same_host_redirects() -> Policy {
    Policy::custom(|attempt| {
        let first = attempt.previous().first().cloned();
        let same = first.as_ref().is_some_and(|from| {
            let to = attempt.url();
            from.scheme() == to.scheme()
                && from.host_str() == to.host_str()
                && from.port_or_known_default() == to.port_or_known_default()
        });
        if same && attempt.previous().len() <= 5 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

pub use chronicle_config::url::{check_secure, InsecureUrl};
