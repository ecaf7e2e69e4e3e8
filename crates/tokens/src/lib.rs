//! The token function: it uses the GitHub App's private key so enrich never does (redeliver
//! holds the key too, to list the App's hook deliveries, and parses only their JSON). Enrich parses
//! every contributor's PR body, manifests and CODEOWNERS; a compromise of it must not hold a key
//! that mints any token the App can have (its webhooks' write included). So enrich asks this
//! function, by Lambda `Invoke`, for an installation token scoped to at most the four reads
//! (`contents`, `metadata`, `pull_requests`, and `issues` when granted), and holds only that.
//!
//! The request is small and typed ([`TokenRequest`]: a repository or an installation, validated
//! strictly: it comes from the function that parses untrusted content); the answer is a token
//! with its expiry, installation and permissions, or a typed refusal that says whether it is
//! permanent ([`TokenResponse`]). The token is never logged. [`client::LambdaTokens`] is enrich's
//! end, a [`chronicle_github::installation::TokenSource`] like the [`AppClient`] the operator CLI, backfill and the local stack
//! still use with the key in hand.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use chronicle_aws::secret::{Resolve, Secret, SecretError, SecretSource};
use chronicle_config::TokenConfig;
use chronicle_domain::RepoName;
use chronicle_github::app::{AppCredentials, AppKeyError};
use chronicle_github::installation::{AppClient, InstallationError, REQUIRED_PERMISSIONS};

pub mod client;
pub use client::{lambda_client, LambdaTokens};

/// What enrich asks for: the token of the installation that can see `repo`, or of
/// `installation` (a delivery named it, or an earlier answer). Exactly one of the two.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installation: Option<u64>,
    /// GitHub refused the token in hand (401): mint a new one rather than hand it back, if it
    /// is still the one held ([`fingerprint`] in `refused`; a newer one is handed back as is).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub renew: bool,
    /// The [`fingerprint`] of the token GitHub refused; with `renew` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The repository's installation may have changed (its token could not see it): ask
    /// GitHub again rather than answer from memory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh: bool,
}

/// A request that passed [`TokenRequest::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    Repo {
        repo: RepoName,
        fresh: bool,
    },
    Installation {
        id: u64,
        /// The refused token's [`fingerprint`]: renew it if it is still the one held.
        renew: Option<String>,
    },
}

/// The longest login GitHub allows, and the longest repository name.
const MAX_OWNER: usize = 39;
const MAX_NAME: usize = 100;

impl TokenRequest {
    /// Strictly: a repository is `owner/name` in GitHub's characters (an owner of letters,
    /// digits and inner hyphens; a name of letters, digits, `.`, `-`, `_`, neither `.` nor
    /// `..`); an installation is a positive id GitHub could have issued; not both, not neither.
    pub fn validate(&self) -> Result<Asked, String> {
        match (&self.repo, self.installation) {
            (Some(repo), None) if !self.renew => valid_repo(repo).map(|repo| Asked::Repo {
                repo,
                fresh: self.fresh,
            }),
            (Some(_), None) => Err("renew goes with an installation, not a repository".into()),
            (None, Some(_)) if self.fresh => {
                Err("fresh goes with a repository, not an installation".into())
            }
            (None, Some(id)) if id > 0 && id <= i64::MAX as u64 => {
                let renew = match (self.renew, &self.refused) {
                    (false, None) => None,
                    (true, Some(f)) if is_fingerprint(f) => Some(f.clone()),
                    _ => {
                        return Err(
                            "renew names the refused token's fingerprint (16 hex digits)".into(),
                        )
                    }
                };
                Ok(Asked::Installation { id, renew })
            }
            (None, Some(id)) => Err(format!("{id} is not an installation id")),
            (Some(_), Some(_)) => Err("either a repository or an installation, not both".into()),
            (None, None) => Err("a repository or an installation is required".into()),
        }
    }
}

/// A short fingerprint of a token: the first 16 hex digits of its SHA-256. It tells which
/// token GitHub refused without sending the token back; it cannot be turned into one.
pub fn fingerprint(token: &Secret) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(token.expose().as_bytes());
    hex::encode(&digest[..8])
}

fn is_fingerprint(f: &str) -> bool {
    f.len() == 16
        && f.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn valid_repo(repo: &str) -> Result<RepoName, String> {
    let refuse = || {
        format!(
            "{:?} is not a GitHub repository (owner/name)",
            truncated(repo)
        )
    };
    let (owner, name) = repo.split_once('/').ok_or_else(refuse)?;
    let owner_ok = (1..=MAX_OWNER).contains(&owner.len())
        && owner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !owner.starts_with('-')
        && !owner.ends_with('-');
    let name_ok = (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        && name != "."
        && name != "..";
    if !owner_ok || !name_ok {
        return Err(refuse());
    }
    RepoName::parse(repo).map_err(|_| refuse())
}

fn truncated(s: &str) -> String {
    s.chars().take(160).collect()
}

/// The token function's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum TokenResponse {
    #[serde(rename_all = "camelCase")]
    Token {
        #[serde(with = "secret_text")]
        token: Secret,
        /// RFC 3339.
        expires_at: String,
        installation: u64,
        /// What GitHub gave the token (at most the four reads).
        permissions: serde_json::Value,
    },
    #[serde(rename_all = "camelCase")]
    Refused(Refusal),
}

/// Why no token: enough for the caller to rebuild the [`InstallationError`] it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub kind: RefusalKind,
    /// A person must act (or the request is wrong); otherwise ask again later.
    pub permanent: bool,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RefusalKind {
    BadRequest,
    NotInstalled,
    Uninstalled,
    Suspended,
    Permissions,
    MissingPermission,
    KeyRefused,
    RateLimited,
    Failed,
    Transport,
    Unavailable,
}

/// The token as plain text on the wire only; `Secret` everywhere else (never in `Debug`).
mod secret_text {
    use super::Secret;

    pub fn serialize<S: serde::Serializer>(token: &Secret, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(token.expose())
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Secret, D::Error> {
        <String as serde::Deserialize>::deserialize(d).map(Secret::new)
    }
}

impl Refusal {
    fn new(kind: RefusalKind, permanent: bool, message: String) -> Refusal {
        Refusal {
            kind,
            permanent,
            message,
            repo: None,
            installation: None,
            permission: None,
            retry_after_seconds: None,
            status: None,
        }
    }

    /// A request that does not pass [`TokenRequest::validate`].
    pub fn bad_request(message: String) -> Refusal {
        Refusal::new(RefusalKind::BadRequest, true, message)
    }

    /// The refusal that stands for `error`.
    pub fn from_error(error: &InstallationError) -> Refusal {
        use InstallationError as E;
        let permanent = error.is_permanent();
        let mut r = Refusal::new(RefusalKind::Unavailable, permanent, error.to_string());
        match error {
            E::Key(_) => {}
            E::NotInstalled(repo) => {
                r.kind = RefusalKind::NotInstalled;
                r.repo = Some(repo.clone());
            }
            E::Refused { status } => {
                r.kind = RefusalKind::KeyRefused;
                r.status = Some(*status);
            }
            E::Uninstalled(id) => {
                r.kind = RefusalKind::Uninstalled;
                r.installation = Some(*id);
            }
            E::Suspended(id) => {
                r.kind = RefusalKind::Suspended;
                r.installation = Some(*id);
            }
            E::Permissions {
                installation,
                message,
            } => {
                r.kind = RefusalKind::Permissions;
                r.installation = Some(*installation);
                r.message = message.clone();
            }
            E::MissingPermission {
                installation,
                permission,
            } => {
                r.kind = RefusalKind::MissingPermission;
                r.installation = Some(*installation);
                r.permission = Some(permission.to_string());
            }
            E::RateLimited { wait, .. } => {
                r.kind = RefusalKind::RateLimited;
                r.retry_after_seconds = Some(wait.as_secs());
            }
            E::Failed { status, .. } => {
                r.kind = RefusalKind::Failed;
                r.status = Some(*status);
            }
            E::Transport { .. } => r.kind = RefusalKind::Transport,
            E::Unavailable { .. } => {}
        }
        r
    }

    /// The [`InstallationError`] this refusal stands for, as the caller acts on it.
    pub fn into_error(self) -> InstallationError {
        use InstallationError as E;
        let what = || "an installation token from the token function".to_string();
        let unavailable = |r: &Refusal| E::Unavailable {
            message: r.message.clone(),
            permanent: r.permanent,
        };
        match (self.kind, self.installation) {
            (RefusalKind::NotInstalled, _) => {
                E::NotInstalled(self.repo.clone().unwrap_or_default())
            }
            (RefusalKind::KeyRefused, _) => E::Refused {
                status: self.status.unwrap_or(401),
            },
            (RefusalKind::Uninstalled, Some(id)) => E::Uninstalled(id),
            (RefusalKind::Suspended, Some(id)) => E::Suspended(id),
            (RefusalKind::Permissions, Some(installation)) => E::Permissions {
                installation,
                message: self.message,
            },
            (RefusalKind::MissingPermission, Some(installation)) => {
                match REQUIRED_PERMISSIONS
                    .into_iter()
                    .find(|p| self.permission.as_deref() == Some(*p))
                {
                    Some(permission) => E::MissingPermission {
                        installation,
                        permission,
                    },
                    None => unavailable(&self),
                }
            }
            (RefusalKind::RateLimited, _) => E::RateLimited {
                what: what(),
                wait: Duration::from_secs(self.retry_after_seconds.unwrap_or(60).clamp(1, 3600)),
            },
            (RefusalKind::Failed, _) => E::Failed {
                what: what(),
                status: self.status.unwrap_or(0),
                message: self.message,
            },
            (RefusalKind::Transport, _) => E::Transport {
                what: what(),
                message: self.message,
            },
            _ => unavailable(&self),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenInitError {
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error("the GitHub App's private key is not configured for the token function (GITHUB_APP_PRIVATE_KEY_ARN)")]
    NoKey,
    #[error(transparent)]
    Key(#[from] AppKeyError),
    #[error("building the GitHub HTTP client failed: {0}")]
    Http(String),
}

/// The key is read again after GitHub refused the JWT, at most this often: a rotation puts a
/// new key in the secret while a warm function still signs with the old one.
const RELOAD_AFTER: Duration = Duration::from_secs(60);

/// The token function's state: the App's client (the key in hand), and where the key is read.
pub struct TokenHandler {
    app: std::sync::RwLock<Arc<AppClient>>,
    reload: Option<Reload>,
}

struct Reload {
    config: TokenConfig,
    sdk: aws_config::SdkConfig,
    loaded: std::sync::Mutex<Instant>,
}

impl TokenHandler {
    /// A handler with this client and no way to read the key again (tests, the local stack).
    pub fn new(app: AppClient) -> TokenHandler {
        TokenHandler {
            app: std::sync::RwLock::new(Arc::new(app)),
            reload: None,
        }
    }

    /// From configuration: the key is read once at cold start, and again after a refused JWT.
    pub async fn from_config(
        config: &TokenConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<TokenHandler, TokenInitError> {
        let app = app_client(config, sdk).await?;
        Ok(TokenHandler {
            app: std::sync::RwLock::new(Arc::new(app)),
            reload: Some(Reload {
                config: config.clone(),
                sdk: sdk.clone(),
                loaded: std::sync::Mutex::new(Instant::now()),
            }),
        })
    }

    fn app(&self) -> Arc<AppClient> {
        self.app.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One invocation: the request as Lambda delivered it, validated, then answered. Logged
    /// without the token.
    pub async fn handle(&self, request: serde_json::Value) -> TokenResponse {
        let asked = match serde_json::from_value::<TokenRequest>(request)
            .map_err(|e| format!("not a token request: {e}"))
            .and_then(|r| r.validate())
        {
            Ok(asked) => asked,
            Err(message) => {
                tracing::warn!(error = %message, "token request refused");
                return TokenResponse::Refused(Refusal::bad_request(message));
            }
        };
        let mut result = self.answer(&asked).await;
        if matches!(result, Err(InstallationError::Refused { .. })) && self.reload_key().await {
            result = self.answer(&asked).await;
        }
        match result {
            Ok(response) => response,
            Err(e) => {
                tracing::warn!(request = ?asked, error = %e, permanent = e.is_permanent(), "no installation token");
                TokenResponse::Refused(Refusal::from_error(&e))
            }
        }
    }

    async fn answer(&self, asked: &Asked) -> Result<TokenResponse, InstallationError> {
        let app = self.app();
        let installation = match asked {
            Asked::Repo { repo, fresh } => {
                if *fresh {
                    app.forget(repo.as_str());
                }
                app.installation_of(repo.as_str()).await?
            }
            Asked::Installation { id, renew } => {
                // Only the token GitHub refused: another task's renew may have replaced it.
                if let Some(refused) = renew {
                    app.renew_if(*id, |held| fingerprint(held) == *refused);
                }
                *id
            }
        };
        let grant = app.grant(installation).await?;
        tracing::info!(installation, expires_at = %rfc3339(grant.expires_at), "installation token handed out");
        Ok(TokenResponse::Token {
            token: grant.token,
            expires_at: rfc3339(grant.expires_at),
            installation,
            permissions: grant.permissions,
        })
    }

    /// Reads the key again (at most once a [`RELOAD_AFTER`]); `true` when a new client is in
    /// place.
    async fn reload_key(&self) -> bool {
        let Some(reload) = &self.reload else {
            return false;
        };
        {
            let mut loaded = reload.loaded.lock().unwrap_or_else(|e| e.into_inner());
            if loaded.elapsed() < RELOAD_AFTER {
                return false;
            }
            *loaded = Instant::now();
        }
        match app_client(&reload.config, &reload.sdk).await {
            Ok(app) => {
                tracing::info!("GitHub refused the App's JWT: the private key was read again");
                *self.app.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(app);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "the App's private key could not be read again");
                false
            }
        }
    }
}

async fn app_client(
    config: &TokenConfig,
    sdk: &aws_config::SdkConfig,
) -> Result<AppClient, TokenInitError> {
    let key = match &config.app_key {
        SecretSource::Unset => return Err(TokenInitError::NoKey),
        source => source.resolve(sdk).await?.ok_or(TokenInitError::NoKey)?,
    };
    let credentials = AppCredentials::new(&config.app_id, &key)?;
    AppClient::new(&config.api_url, credentials, config.timeout)
        .map_err(|e| TokenInitError::Http(e.to_string()))
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(v: serde_json::Value) -> Result<Asked, String> {
        serde_json::from_value::<TokenRequest>(v)
            .map_err(|e| e.to_string())
            .and_then(|r| r.validate())
    }

    #[test]
    fn a_request_names_one_valid_repository_or_installation() {
        assert_eq!(
            request(serde_json::json!({"repo": "octo-org/hello_world.rs"})),
            Ok(Asked::Repo {
                repo: RepoName::parse("octo-org/hello_world.rs").unwrap(),
                fresh: false
            })
        );
        assert_eq!(
            request(serde_json::json!({"repo": "octo-org/hello", "fresh": true})),
            Ok(Asked::Repo {
                repo: RepoName::parse("octo-org/hello").unwrap(),
                fresh: true
            })
        );
        assert_eq!(
            request(
                serde_json::json!({"installation": 42, "renew": true, "refused": "0123456789abcdef"})
            ),
            Ok(Asked::Installation {
                id: 42,
                renew: Some("0123456789abcdef".into())
            })
        );
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"repo": "a/b", "installation": 1}),
            serde_json::json!({"repo": "a/b", "renew": true}),
            serde_json::json!({"installation": 3, "fresh": true}),
            serde_json::json!({"installation": 3, "renew": true}),
            serde_json::json!({"installation": 3, "refused": "0123456789abcdef"}),
            serde_json::json!({"installation": 3, "renew": true, "refused": "ghs_token"}),
            serde_json::json!({"installation": 0}),
            serde_json::json!({"installation": -1}),
            serde_json::json!({"installation": u64::MAX}),
            serde_json::json!({"repo": "no-slash"}),
            serde_json::json!({"repo": "a/b/c"}),
            serde_json::json!({"repo": "../etc"}),
            serde_json::json!({"repo": "a/.."}),
            serde_json::json!({"repo": "-a/b"}),
            serde_json::json!({"repo": "a/b c"}),
            serde_json::json!({"repo": "a/b?x=1"}),
            serde_json::json!({"repo": "a/b%2F"}),
            serde_json::json!({"repo": "ä/b"}),
            serde_json::json!({"repo": format!("{}/b", "o".repeat(40))}),
            serde_json::json!({"repo": format!("o/{}", "n".repeat(101))}),
            serde_json::json!({"repo": "a/b", "permissions": {"administration": "write"}}),
            serde_json::json!({"repo": 7}),
            serde_json::json!("octo-org/hello"),
        ] {
            assert!(request(bad.clone()).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn a_refusal_carries_whether_it_is_permanent_and_comes_back_as_the_same_error() {
        use InstallationError as E;
        let errors = [
            E::NotInstalled("o/r".into()),
            E::Uninstalled(5),
            E::Suspended(5),
            E::MissingPermission {
                installation: 5,
                permission: "contents",
            },
            E::Refused { status: 401 },
            E::RateLimited {
                what: "x".into(),
                wait: Duration::from_secs(30),
            },
            E::Transport {
                what: "x".into(),
                message: "reset".into(),
            },
        ];
        for e in errors {
            let refusal = Refusal::from_error(&e);
            assert_eq!(refusal.permanent, e.is_permanent(), "{e}");
            let wire = serde_json::to_value(TokenResponse::Refused(refusal)).unwrap();
            let TokenResponse::Refused(back) = serde_json::from_value(wire).unwrap() else {
                panic!()
            };
            let back = back.into_error();
            assert_eq!(back.is_permanent(), e.is_permanent(), "{e} → {back}");
            assert_eq!(back.deferral(), e.deferral(), "{e} → {back}");
            assert_eq!(back.is_gone(), e.is_gone(), "{e} → {back}");
        }
    }

    #[test]
    fn the_token_is_on_the_wire_only() {
        let response = TokenResponse::Token {
            token: Secret::new("ghs_secret"),
            expires_at: "2030-01-01T00:00:00Z".into(),
            installation: 5,
            permissions: serde_json::json!({"contents": "read"}),
        };
        assert!(!format!("{response:?}").contains("ghs_secret"));
        let wire = serde_json::to_value(&response).unwrap();
        assert_eq!(wire["outcome"], "token");
        assert_eq!(wire["token"], "ghs_secret");
        assert_eq!(
            serde_json::from_value::<TokenResponse>(wire).unwrap(),
            response
        );
    }
}
