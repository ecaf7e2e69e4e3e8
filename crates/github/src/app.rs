//! A GitHub App's own authentication: a JWT (RS256) signed with the app's private key, `iss`
//! the app's id, valid for at most ten minutes (GitHub refuses longer). It authorises the app's
//! endpoints, e.g. its webhook's deliveries (`/app/hook/deliveries`).

use serde::Serialize;
use time::OffsetDateTime;

use chronicle_config::secret::Secret;

#[derive(Debug, thiserror::Error)]
pub enum AppKeyError {
    #[error("the GitHub App private key is not an RSA key in PEM form: {0}")]
    Key(String),
    #[error("the GitHub App id {0:?} is not a number")]
    Id(String),
    #[error("cannot sign the GitHub App JWT: {0}")]
    Sign(String),
}

/// What signs the app's JWTs.
#[derive(Clone)]
pub struct AppCredentials {
    app_id: String,
    key: jsonwebtoken::EncodingKey,
}

impl std::fmt::Debug for AppCredentials {
    // Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppCredentials")
            .field("app_id", &self.app_id)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    iat: i64,
    exp: i64,
    iss: &'a str,
}

impl AppCredentials {
    /// `private_key`: the PEM GitHub gives for the app (PKCS#1 or PKCS#8).
    pub fn new(app_id: &str, private_key: &Secret) -> Result<Self, AppKeyError> {
        let app_id = app_id.trim();
        if app_id.is_empty() || !app_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(AppKeyError::Id(app_id.to_string()));
        }
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(private_key.expose().as_bytes())
            .map_err(|e| AppKeyError::Key(e.to_string()))?;
        Ok(AppCredentials {
            app_id: app_id.to_string(),
            key,
        })
    }

    /// A JWT for the next nine minutes, issued a minute back (GitHub's advice for clock drift).
    pub fn jwt(&self, now: OffsetDateTime) -> Result<Secret, AppKeyError> {
        let claims = Claims {
            iat: now.unix_timestamp() - 60,
            exp: now.unix_timestamp() + 9 * 60,
            iss: &self.app_id,
        };
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
            &claims,
            &self.key,
        )
        .map(Secret::new)
        .map_err(|e| AppKeyError::Sign(e.to_string()))
    }
}
