//! Which base URLs may carry a credential: `https://`, and `http://` on the loopback interface
//! only (the local stand-ins). Checked where the URL is configured, so a misconfigured one fails
//! at cold start rather than sending a key in clear text.

use url::Url;

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
