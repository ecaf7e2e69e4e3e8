//! GitHub webhook signatures: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`.
//!
//! The check runs over the exact bytes received, before anything parses them, and compares in
//! constant time (`Mac::verify_slice`), so a forger learns nothing from response timing.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use chronicle_aws::secret::Secret;

type HmacSha256 = Hmac<Sha256>;

const PREFIX: &str = "sha256=";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("missing X-Hub-Signature-256 header")]
    Missing,
    #[error("only a SHA-1 X-Hub-Signature was sent; X-Hub-Signature-256 is required")]
    Sha1Only,
    #[error("X-Hub-Signature-256 is not of the form sha256=<64 hex digits>")]
    Malformed,
    #[error("X-Hub-Signature-256 does not match the body (wrong secret or altered body)")]
    Mismatch,
}

/// The `sha256=<hex>` signature GitHub would send for `body` under `secret`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(body);
    format!("{PREFIX}{}", hex::encode(mac.finalize().into_bytes()))
}

/// Verifies `sha256_header` (the `X-Hub-Signature-256` value) against `body`.
/// `sha1_present` tells whether the legacy `X-Hub-Signature` header came, to explain a refusal.
pub fn verify(
    secret: &Secret,
    body: &[u8],
    sha256_header: Option<&str>,
    sha1_present: bool,
) -> Result<(), SignatureError> {
    let header = match sha256_header {
        Some(h) => h.trim(),
        None if sha1_present => return Err(SignatureError::Sha1Only),
        None => return Err(SignatureError::Missing),
    };
    let hex_part = header
        .strip_prefix(PREFIX)
        .ok_or(SignatureError::Malformed)?;
    if hex_part.len() != 64 {
        return Err(SignatureError::Malformed);
    }
    let expected = hex::decode(hex_part).map_err(|_| SignatureError::Malformed)?;
    let mut mac = HmacSha256::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC accepts keys of any length");
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    // GitHub's documented test vector (docs: "Validating webhook deliveries").
    const SECRET: &str = "It's a Secret to Everybody";
    const BODY: &str = "Hello, World!";
    const EXPECTED: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn github_test_vector() {
        assert_eq!(sign(SECRET.as_bytes(), BODY.as_bytes()), EXPECTED);
        assert_eq!(
            verify(&Secret::new(SECRET), BODY.as_bytes(), Some(EXPECTED), false),
            Ok(())
        );
    }

    #[test]
    fn every_refusal_is_named() {
        let s = Secret::new(SECRET);
        let b = BODY.as_bytes();
        assert_eq!(verify(&s, b, None, false), Err(SignatureError::Missing));
        assert_eq!(verify(&s, b, None, true), Err(SignatureError::Sha1Only));
        assert_eq!(
            verify(&s, b, Some("sha1=abc"), false),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(&s, b, Some("sha256=zz"), false),
            Err(SignatureError::Malformed)
        );
        let wrong_hex = format!("sha256={}", "g".repeat(64));
        assert_eq!(
            verify(&s, b, Some(&wrong_hex), false),
            Err(SignatureError::Malformed)
        );
        let other = sign(b"another secret", b);
        assert_eq!(
            verify(&s, b, Some(&other), false),
            Err(SignatureError::Mismatch)
        );
        // One byte more in the body breaks it: the check is over the exact raw bytes.
        assert_eq!(
            verify(&s, b"Hello, World!\n", Some(EXPECTED), false),
            Err(SignatureError::Mismatch)
        );
    }
}
