//! HTTP clients that carry a credential (a GitHub token, an LLM key, a Notion token). reqwest
//! follows up to 10 redirects by default and drops only `Authorization` and cookies on a
//! cross-host hop, so `x-api-key` would follow a redirect anywhere: these clients follow none
//! (GitHub: only on its own host, where a renamed repository answers 301), and their base
//! URLs must be `https://` except on the loopback interface (the local stand-ins).

use reqwest::redirect::Policy;
use reqwest::Url;

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

/// Why a base URL may not carry a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{url:?} is not an https:// URL (http:// is allowed on 127.0.0.1, ::1 or localhost only): a credential is never sent in clear text")]
pub struct InsecureUrl {
    pub url: String,
}

/// `Ok` for `https://…`, and for `http://` on the loopback interface.
pub fn check_secure(url: &str) -> Result<(), InsecureUrl> {
    let insecure = || InsecureUrl {
        url: url.to_string(),
    };
    let parsed = Url::parse(url.trim()).map_err(|_| insecure())?;
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(&parsed) => Ok(()),
        _ => Err(insecure()),
    }
}

fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_carries_a_credential() {
        for ok in [
            "https://api.anthropic.com",
            "https://ghe.example/api/v3",
            "http://127.0.0.1:8080",
            "http://localhost:11434/v1",
            "http://[::1]:9000",
        ] {
            assert_eq!(check_secure(ok), Ok(()), "{ok}");
        }
        for bad in [
            "http://api.anthropic.com",
            "http://10.0.0.5:11434",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "ftp://x",
            "api.github.com",
            "",
        ] {
            assert!(check_secure(bad).is_err(), "{bad}");
        }
    }
}
