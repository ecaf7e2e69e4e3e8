//! A GitHub App's installations: the installation of a repository
//! (`GET /repos/{owner}/{repo}/installation`, with the App's JWT), the repositories an
//! installation can see (`GET /installation/repositories`, paginated, with its token), and its
//! short-lived tokens (`POST /app/installations/{id}/access_tokens`), each kept until shortly
//! before it expires and minted again when GitHub refuses it.
//!
//! [`Auth`] is what a REST or GraphQL client sends: a token (a personal one, for a trial or one
//! repository), or an installation's, asked for at each request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use time::OffsetDateTime;

use crate::app::{AppCredentials, AppKeyError};
use chronicle_config::secret::Secret;

#[derive(Debug, thiserror::Error)]
pub enum InstallationError {
    #[error(transparent)]
    Key(#[from] AppKeyError),
    #[error("the GitHub App is not installed on {0} (or the installation cannot see it)")]
    NotInstalled(String),
    #[error("GitHub refused the App's JWT ({status}): check GitHubAppId and its private key")]
    Refused { status: u16 },
    #[error("installation {0} of the GitHub App is gone (uninstalled)")]
    Uninstalled(u64),
    #[error(
        "installation {0} is suspended: an organisation owner can unsuspend it in its settings"
    )]
    Suspended(u64),
    #[error("GitHub will not mint installation {installation} a token with Chronicle's permissions ({message}): give the App read access to contents, issues, metadata and pull requests")]
    Permissions { installation: u64, message: String },
    #[error("GitHub answered {status} for {what}: {message}")]
    Failed {
        what: String,
        status: u16,
        message: String,
    },
    #[error("no answer from GitHub for {what}: {message}")]
    Transport { what: String, message: String },
}

impl InstallationError {
    /// The installation itself is gone (uninstalled), not just the repository.
    pub fn is_gone(&self) -> bool {
        matches!(self, InstallationError::Uninstalled(_))
    }

    /// The App or the installation is wrong: a person must act.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            InstallationError::Key(_)
                | InstallationError::NotInstalled(_)
                | InstallationError::Refused { .. }
                | InstallationError::Suspended(_)
                | InstallationError::Uninstalled(_)
                | InstallationError::Permissions { .. }
        )
    }
}

/// The permissions an installation token is minted with: what enrichment, the repository
/// context and backfill read.
pub fn token_permissions() -> serde_json::Value {
    serde_json::json!({
        "contents": "read",
        "issues": "read",
        "metadata": "read",
        "pull_requests": "read",
    })
}

/// A repository an installation can see.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct InstalledRepo {
    pub full_name: String,
    #[serde(default)]
    pub archived: bool,
    /// Kilobytes; 0 for an empty repository.
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub private: bool,
}

/// One installation's token health, as `chronicle status` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenHealth {
    pub installation: u64,
    /// When the token in hand expires (RFC 3339), if one is.
    pub expires_at: Option<String>,
    /// Tokens minted, and of those, minted because GitHub refused the one in hand.
    pub minted: u64,
    pub refreshed_on_401: u64,
}

#[derive(Clone)]
struct Cached {
    token: Secret,
    expires_at: OffsetDateTime,
    /// Used until this moment: a fifth of its life (at most five minutes) before it expires.
    renew_at: OffsetDateTime,
}

#[derive(Default)]
struct State {
    tokens: HashMap<u64, Cached>,
    installations: HashMap<String, u64>,
    /// Installations found uninstalled: a delivery naming one is not believed (ids are never
    /// reused; a reinstall has a new one).
    gone: std::collections::HashSet<u64>,
    minted: HashMap<u64, u64>,
    refreshed: HashMap<u64, u64>,
}

/// A GitHub App's access to its installations.
pub struct AppClient {
    credentials: AppCredentials,
    base: String,
    http: reqwest::Client,
    timeout: Duration,
    state: Mutex<State>,
    /// One mint at a time: tasks that find no token wait for the one being minted rather than
    /// each mint their own.
    minting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for AppClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppClient")
            .field("credentials", &self.credentials)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct AccessToken {
    token: String,
    expires_at: String,
}

#[derive(Deserialize)]
struct Installation {
    id: u64,
}

/// An installation of the App, as `GET /app/installations` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct InstallationInfo {
    pub id: u64,
    pub account: Account,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Account {
    pub login: String,
}

#[derive(Deserialize)]
struct Repositories {
    total_count: u64,
    repositories: Vec<InstalledRepo>,
}

impl AppClient {
    pub fn new(
        api_url: &str,
        credentials: AppCredentials,
        timeout: Duration,
    ) -> Result<Self, reqwest::Error> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static("application/vnd.github+json"),
        );
        headers.insert(
            "x-github-api-version",
            reqwest::header::HeaderValue::from_static(crate::API_VERSION),
        );
        let http = chronicle_http::credentialed()
            .redirect(chronicle_http::same_host_redirects())
            .default_headers(headers)
            .build()?;
        Ok(AppClient {
            credentials,
            base: api_url.trim_end_matches('/').to_string(),
            http,
            timeout,
            state: Mutex::new(State::default()),
            minting: tokio::sync::Mutex::new(()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every installation of the App (`GET /app/installations`, 100 a page, with the JWT).
    pub async fn installations(&self) -> Result<Vec<InstallationInfo>, InstallationError> {
        let mut out = Vec::new();
        for page in 1..=100 {
            let jwt = self.credentials.jwt(OffsetDateTime::now_utc())?;
            let what = "the App's installations".to_string();
            let (status, body) = self
                .send(
                    self.http.get(format!(
                        "{}/app/installations?per_page=100&page={page}",
                        self.base
                    )),
                    &jwt,
                    &what,
                )
                .await?;
            match status {
                200 => {}
                401 => return Err(InstallationError::Refused { status }),
                _ => return Err(failed(what, status, &body)),
            }
            let listed: Vec<InstallationInfo> = parse(&body, &what)?;
            let done = listed.len() < 100;
            out.extend(listed);
            if done {
                break;
            }
        }
        Ok(out)
    }

    /// The installation that can see `repo` (`owner/name`), asked once per client.
    pub async fn installation_of(&self, repo: &str) -> Result<u64, InstallationError> {
        self.installation_at(&format!("repos/{repo}"), repo).await
    }

    /// Takes `installation` as `repo`'s (a delivery named it) unless one is known already, so
    /// the first request for it is not `GET /repos/{owner}/{repo}/installation`. A stale one
    /// costs one refused mint, after which GitHub is asked ([`AppClient::token`] forgets it).
    pub fn remember(&self, repo: &str, installation: u64) {
        let mut st = self.state();
        if !st.gone.contains(&installation) {
            st.installations
                .entry(format!("repos/{repo}"))
                .or_insert(installation);
        }
    }

    /// Forgets which installation `repo` has, so the next request asks GitHub: the repository
    /// may have been removed from it, or moved to another.
    pub fn forget(&self, repo: &str) {
        self.state().installations.remove(&format!("repos/{repo}"));
    }

    /// The installation on organisation `org` (`GET /orgs/{org}/installation`).
    pub async fn org_installation(&self, org: &str) -> Result<u64, InstallationError> {
        self.installation_at(&format!("orgs/{org}"), org).await
    }

    async fn installation_at(&self, owner: &str, name: &str) -> Result<u64, InstallationError> {
        if let Some(id) = self.state().installations.get(owner) {
            return Ok(*id);
        }
        let jwt = self.credentials.jwt(OffsetDateTime::now_utc())?;
        let what = format!("the installation of {name}");
        let (status, body) = self
            .send(
                self.http.get(format!("{}/{owner}/installation", self.base)),
                &jwt,
                &what,
            )
            .await?;
        let repo = name;
        match status {
            200 => {
                let installation: Installation = parse(&body, &what)?;
                self.state()
                    .installations
                    .insert(owner.to_string(), installation.id);
                Ok(installation.id)
            }
            404 => Err(InstallationError::NotInstalled(repo.to_string())),
            401 => Err(InstallationError::Refused { status }),
            _ => Err(failed(what, status, &body)),
        }
    }

    /// The installation's token: the one in hand until shortly before it expires, else a new one.
    pub async fn token(&self, installation: u64) -> Result<Secret, InstallationError> {
        let current = |client: &AppClient| {
            let now = OffsetDateTime::now_utc();
            client
                .state()
                .tokens
                .get(&installation)
                .filter(|c| now < c.renew_at)
                .map(|c| c.token.clone())
        };
        if let Some(token) = current(self) {
            return Ok(token);
        }
        let _minting = self.minting.lock().await;
        // Minted by another task while this one waited.
        if let Some(token) = current(self) {
            return Ok(token);
        }
        let now = OffsetDateTime::now_utc();
        let jwt = self.credentials.jwt(now)?;
        let what = format!("a token of installation {installation}");
        // Only what enrichment reads: the token of a function that parses untrusted content
        // holds none of the App's other permissions (redelivery's webhooks write).
        let (status, body) = self
            .send(
                self.http
                    .post(format!(
                        "{}/app/installations/{installation}/access_tokens",
                        self.base
                    ))
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(serde_json::json!({ "permissions": token_permissions() }).to_string()),
                &jwt,
                &what,
            )
            .await?;
        match status {
            201 | 200 => {}
            401 => return Err(InstallationError::Refused { status }),
            // Uninstalled: the repositories it served are asked again which installation they
            // have (a reinstall has a new id).
            404 => {
                let mut st = self.state();
                st.installations.retain(|_, id| *id != installation);
                st.gone.insert(installation);
                return Err(InstallationError::Uninstalled(installation));
            }
            403 => return Err(InstallationError::Suspended(installation)),
            422 => {
                return Err(InstallationError::Permissions {
                    installation,
                    message: String::from_utf8_lossy(&body).chars().take(300).collect(),
                })
            }
            _ => return Err(failed(what, status, &body)),
        }
        let minted: AccessToken = parse(&body, &what)?;
        let expires_at = OffsetDateTime::parse(
            &minted.expires_at,
            &time::format_description::well_known::Rfc3339,
        )
        .map_err(|e| failed(what.clone(), status, format!("expires_at: {e}").as_bytes()))?;
        let life = (expires_at - now).max(time::Duration::ZERO);
        let margin: time::Duration = (life / 5i32).min(time::Duration::minutes(5));
        let cached = Cached {
            token: Secret::new(minted.token),
            expires_at,
            renew_at: expires_at - margin,
        };
        let mut st = self.state();
        *st.minted.entry(installation).or_default() += 1;
        st.tokens.insert(installation, cached.clone());
        Ok(cached.token)
    }

    /// GitHub refused `used` (401): it is dropped, so the next [`AppClient::token`] mints anew.
    pub fn refused(&self, installation: u64, used: &Secret) {
        let mut st = self.state();
        if st
            .tokens
            .get(&installation)
            .is_some_and(|c| c.token.expose() == used.expose())
        {
            st.tokens.remove(&installation);
            *st.refreshed.entry(installation).or_default() += 1;
        }
    }

    /// Every repository the installation can see, page by page (100 a page).
    pub async fn repositories(
        &self,
        installation: u64,
    ) -> Result<Vec<InstalledRepo>, InstallationError> {
        let mut out = Vec::new();
        let mut page = 1;
        loop {
            let what = format!("the repositories of installation {installation}");
            let url = format!(
                "{}/installation/repositories?per_page=100&page={page}",
                self.base
            );
            let mut answer = None;
            for _ in 0..2 {
                let token = self.token(installation).await?;
                let (status, body) = self.send(self.http.get(&url), &token, &what).await?;
                if status == 401 {
                    self.refused(installation, &token);
                    continue;
                }
                answer = Some((status, body));
                break;
            }
            let Some((status, body)) = answer else {
                return Err(InstallationError::Failed {
                    what,
                    status: 401,
                    message: "GitHub refused two freshly minted installation tokens".into(),
                });
            };
            if status != 200 {
                return Err(failed(what, status, &body));
            }
            let listed: Repositories = parse(&body, &what)?;
            let done = listed.repositories.is_empty()
                || out.len() as u64 + listed.repositories.len() as u64 >= listed.total_count;
            out.extend(listed.repositories);
            if done || page >= 1_000 {
                return Ok(out);
            }
            page += 1;
        }
    }

    /// The health of each installation's token this client has used.
    pub fn health(&self) -> Vec<TokenHealth> {
        let st = self.state();
        let mut ids: Vec<u64> = st.minted.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .map(|id| TokenHealth {
                installation: id,
                expires_at: st.tokens.get(&id).and_then(|c| {
                    c.expires_at
                        .format(&time::format_description::well_known::Rfc3339)
                        .ok()
                }),
                minted: st.minted.get(&id).copied().unwrap_or(0),
                refreshed_on_401: st.refreshed.get(&id).copied().unwrap_or(0),
            })
            .collect()
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        bearer: &Secret,
        what: &str,
    ) -> Result<(u16, bytes::Bytes), InstallationError> {
        let transport = |e: reqwest::Error| InstallationError::Transport {
            what: what.to_string(),
            message: chronicle_domain::error::error_chain(&e),
        };
        let response = request
            .header(reqwest::header::AUTHORIZATION, sensitive_bearer(bearer))
            .timeout(self.timeout)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(transport)?;
        Ok((status, body))
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, InstallationError> {
    serde_json::from_slice(body).map_err(|e| InstallationError::Failed {
        what: what.to_string(),
        status: 200,
        message: format!("an answer not shaped like GitHub's: {e}"),
    })
}

fn failed(what: String, status: u16, body: &[u8]) -> InstallationError {
    InstallationError::Failed {
        what,
        status,
        message: String::from_utf8_lossy(body).chars().take(300).collect(),
    }
}

/// `Bearer <token>`, marked sensitive so it is never logged.
pub(crate) fn sensitive_bearer(token: &Secret) -> reqwest::header::HeaderValue {
    let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static("Bearer invalid-token"));
    value.set_sensitive(true);
    value
}

/// What a client authenticates with.
#[derive(Clone, Debug)]
pub enum Auth {
    /// A token (a personal access token, or a fixed one in tests).
    Token(Secret),
    /// An installation of a GitHub App: its current token, minted as needed.
    Installation { app: Arc<AppClient>, id: u64 },
}

impl Auth {
    /// The token for the next request.
    pub async fn bearer(&self) -> Result<Secret, InstallationError> {
        match self {
            Auth::Token(t) => Ok(t.clone()),
            Auth::Installation { app, id } => app.token(*id).await,
        }
    }

    /// GitHub answered 401 to `used`: whether asking again with a new token may help (an
    /// installation token expired or was revoked; a fixed token will not change).
    pub fn refused(&self, used: &Secret) -> bool {
        match self {
            Auth::Token(_) => false,
            Auth::Installation { app, id } => {
                app.refused(*id, used);
                true
            }
        }
    }
}
