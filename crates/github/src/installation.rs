//! A GitHub App's installations: the installation of a repository
//! (`GET /repos/{owner}/{repo}/installation`, with the App's JWT), the repositories an
//! installation can see (`GET /installation/repositories`, paginated, with its token), and its
//! short-lived tokens (`POST /app/installations/{id}/access_tokens`), each kept until shortly
//! before it expires and minted again when GitHub refuses it. A token is asked for only the
//! reads the installation granted (`GET /app/installations/{id}`, kept an hour when complete).
//!
//! [`AppClient`] is a [`TokenSource`]; [`Auth`] (`crate::auth`, re-exported here) is what a REST
//! or GraphQL client sends.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use time::OffsetDateTime;

use crate::app::AppCredentials;
pub use crate::auth::{Auth, BoxFuture, TokenSource};
pub use crate::installation_error::{InstallationError, KEY_REFUSED_WAIT};
use chronicle_config::secret::Secret;

/// How long an installation's granted permissions are believed (a warm function lives hours; an
/// organisation may approve `issues` meanwhile). A permission withdrawn sooner costs one 422,
/// after which they are read again.
const GRANTED_TTL: Duration = Duration::from_secs(3600);

/// The permissions an installation token is minted with at most: what enrichment, the
/// repository context and backfill read. `issues` is optional (app.yml): without it linked
/// issues are not read.
pub fn token_permissions() -> serde_json::Value {
    serde_json::json!({
        "contents": "read",
        "issues": "read",
        "metadata": "read",
        "pull_requests": "read",
    })
}

/// Read access Chronicle cannot work without; `issues` is the one optional read.
pub const REQUIRED_PERMISSIONS: [&str; 3] = ["contents", "metadata", "pull_requests"];

/// The reads of [`token_permissions`] that `granted` (an installation's `permissions`) holds:
/// what a token is asked for, so GitHub never refuses the mint for a permission the
/// installation lacks (422). A missing required read is a permanent error naming it.
pub fn permissions_to_ask(
    installation: u64,
    granted: &serde_json::Map<String, serde_json::Value>,
) -> Result<serde_json::Value, InstallationError> {
    let reads = |name: &str| {
        granted
            .get(name)
            .and_then(|v| v.as_str())
            .is_some_and(|level| level == "read" || level == "write" || level == "admin")
    };
    if let Some(missing) = REQUIRED_PERMISSIONS.into_iter().find(|p| !reads(p)) {
        return Err(InstallationError::MissingPermission {
            installation,
            permission: missing,
        });
    }
    let mut asked = serde_json::Map::new();
    for (name, _) in token_permissions().as_object().into_iter().flatten() {
        if reads(name) {
            asked.insert(name.clone(), "read".into());
        }
    }
    Ok(serde_json::Value::Object(asked))
}

/// When a token minted now and expiring at `expires_at` is renewed: a fifth of its life (at
/// most five minutes) before it expires.
pub fn renew_at(now: OffsetDateTime, expires_at: OffsetDateTime) -> OffsetDateTime {
    let life = (expires_at - now).max(time::Duration::ZERO);
    let margin: time::Duration = (life / 5i32).min(time::Duration::minutes(5));
    expires_at - margin
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

/// An installation token, with when it expires and the permissions GitHub gave it.
#[derive(Clone, Debug)]
pub struct Grant {
    pub token: Secret,
    pub expires_at: OffsetDateTime,
    pub permissions: serde_json::Value,
}

#[derive(Clone)]
struct Cached {
    token: Secret,
    expires_at: OffsetDateTime,
    permissions: serde_json::Value,
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
    /// Each installation's granted permissions (`GET /app/installations/{id}`) and when they
    /// were read: read again after [`GRANTED_TTL`], so a permission approved later is asked for.
    permissions: HashMap<
        u64,
        (
            std::time::Instant,
            serde_json::Map<String, serde_json::Value>,
        ),
    >,
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
    #[serde(default)]
    permissions: serde_json::Value,
}

#[derive(Deserialize)]
struct Installation {
    id: u64,
}

/// `GET /app/installations/{id}`: what the installation granted, and whether it is suspended.
#[derive(Deserialize)]
struct InstallationDetail {
    #[serde(default)]
    permissions: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    suspended_at: Option<String>,
}

/// What GitHub answered one request.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: bytes::Bytes,
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
            let answer = self
                .send(
                    self.http.get(format!(
                        "{}/app/installations?per_page=100&page={page}",
                        self.base
                    )),
                    &jwt,
                    &what,
                )
                .await?;
            let (status, body) = (answer.status, &answer.body);
            match status {
                200 => {}
                _ => return Err(refusal(what, &answer).unwrap_or_else(|e| e)),
            }
            let listed: Vec<InstallationInfo> = parse(body, &what)?;
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

    /// The installation on the user account `user` (`GET /users/{username}/installation`):
    /// an account that is not an organisation has its installation there only.
    pub async fn user_installation(&self, user: &str) -> Result<u64, InstallationError> {
        self.installation_at(&format!("users/{user}"), user).await
    }

    async fn installation_at(&self, owner: &str, name: &str) -> Result<u64, InstallationError> {
        if let Some(id) = self.state().installations.get(owner) {
            return Ok(*id);
        }
        let jwt = self.credentials.jwt(OffsetDateTime::now_utc())?;
        let what = format!("the installation of {name}");
        let answer = self
            .send(
                self.http.get(format!("{}/{owner}/installation", self.base)),
                &jwt,
                &what,
            )
            .await?;
        match answer.status {
            200 => {
                let installation: Installation = parse(&answer.body, &what)?;
                self.state()
                    .installations
                    .insert(owner.to_string(), installation.id);
                Ok(installation.id)
            }
            404 => Err(InstallationError::NotInstalled(name.to_string())),
            _ => Err(refusal(what, &answer).unwrap_or_else(|e| e)),
        }
    }

    /// What installation `installation` granted the App (`GET /app/installations/{id}`, with
    /// the JWT), kept for [`GRANTED_TTL`] when it holds every required read (else read again
    /// at each mint): a token is asked for no more than that.
    pub async fn granted(
        &self,
        installation: u64,
    ) -> Result<serde_json::Map<String, serde_json::Value>, InstallationError> {
        if let Some((_, granted)) = self
            .state()
            .permissions
            .get(&installation)
            .filter(|(at, _)| at.elapsed() < GRANTED_TTL)
        {
            return Ok(granted.clone());
        }
        let jwt = self.credentials.jwt(OffsetDateTime::now_utc())?;
        let what = format!("installation {installation}");
        let answer = self
            .send(
                self.http
                    .get(format!("{}/app/installations/{installation}", self.base)),
                &jwt,
                &what,
            )
            .await?;
        match answer.status {
            200 => {}
            404 => return Err(self.uninstalled(installation)),
            _ => return Err(refusal(what, &answer).unwrap_or_else(|e| e)),
        }
        let detail: InstallationDetail = parse(&answer.body, &what)?;
        if detail.suspended_at.is_some() {
            return Err(InstallationError::Suspended(installation));
        }
        // A grant lacking a required read is never kept: the owner approving it must not wait
        // out the TTL, and a MissingPermission is only ever said from a fresh read.
        if permissions_to_ask(installation, &detail.permissions).is_ok() {
            self.state().permissions.insert(
                installation,
                (std::time::Instant::now(), detail.permissions.clone()),
            );
        } else {
            self.state().permissions.remove(&installation);
        }
        Ok(detail.permissions)
    }

    /// Installation `installation` is gone: the repositories it served are asked again which
    /// installation they have (a reinstall has a new id).
    fn uninstalled(&self, installation: u64) -> InstallationError {
        let mut st = self.state();
        st.installations.retain(|_, id| *id != installation);
        st.gone.insert(installation);
        st.permissions.remove(&installation);
        InstallationError::Uninstalled(installation)
    }

    /// Drops the token in hand for `installation` if `refused` says it is the one GitHub
    /// refused, so the next [`AppClient::token`] mints anew; `false` if it is another (a newer
    /// one, minted since: handed out as is). A caller that cannot hand the refused token back
    /// names it this way (by a fingerprint).
    pub fn renew_if(&self, installation: u64, refused: impl Fn(&Secret) -> bool) -> bool {
        let mut st = self.state();
        if !st
            .tokens
            .get(&installation)
            .is_some_and(|c| refused(&c.token))
        {
            return false;
        }
        st.tokens.remove(&installation);
        *st.refreshed.entry(installation).or_default() += 1;
        true
    }

    /// The installation's token: the one in hand until shortly before it expires, else a new one.
    pub async fn token(&self, installation: u64) -> Result<Secret, InstallationError> {
        Ok(self.grant(installation).await?.token)
    }

    /// [`AppClient::token`], with its expiry and permissions.
    pub async fn grant(&self, installation: u64) -> Result<Grant, InstallationError> {
        let current = |client: &AppClient| {
            let now = OffsetDateTime::now_utc();
            client
                .state()
                .tokens
                .get(&installation)
                .filter(|c| now < c.renew_at)
                .map(|c| Grant {
                    token: c.token.clone(),
                    expires_at: c.expires_at,
                    permissions: c.permissions.clone(),
                })
        };
        if let Some(token) = current(self) {
            return Ok(token);
        }
        let _minting = self.minting.lock().await;
        // Minted by another task while this one waited.
        if let Some(token) = current(self) {
            return Ok(token);
        }
        self.mint(installation).await
    }

    /// A new token of `installation`, asked for the reads it granted (see
    /// [`permissions_to_ask`]), with the permissions GitHub gave it. Kept for
    /// [`AppClient::token`]. A 422 (the installation's permissions changed since they were
    /// read) reads them again and asks once more.
    async fn mint(&self, installation: u64) -> Result<Grant, InstallationError> {
        let what = format!("a token of installation {installation}");
        let mut asked_again = false;
        let (now, answer) = loop {
            let asked = permissions_to_ask(installation, &self.granted(installation).await?)?;
            let now = OffsetDateTime::now_utc();
            let jwt = self.credentials.jwt(now)?;
            // Only what enrichment reads: the token of a function that parses untrusted content
            // holds none of the App's other permissions (redelivery's webhooks write).
            let answer = self
                .send(
                    self.http
                        .post(format!(
                            "{}/app/installations/{installation}/access_tokens",
                            self.base
                        ))
                        .header(reqwest::header::CONTENT_TYPE, "application/json")
                        .body(serde_json::json!({ "permissions": asked }).to_string()),
                    &jwt,
                    &what,
                )
                .await?;
            match answer.status {
                201 | 200 => break (now, answer),
                404 => return Err(self.uninstalled(installation)),
                422 if !asked_again => {
                    asked_again = true;
                    self.state().permissions.remove(&installation);
                }
                422 => {
                    return Err(InstallationError::Permissions {
                        installation,
                        message: String::from_utf8_lossy(&answer.body)
                            .chars()
                            .take(300)
                            .collect(),
                    })
                }
                // A 403 that is not a rate limit: GitHub's answer for a suspended installation.
                403 => {
                    return Err(refusal(what, &answer)
                        .err()
                        .unwrap_or(InstallationError::Suspended(installation)))
                }
                _ => return Err(refusal(what, &answer).unwrap_or_else(|e| e)),
            }
        };
        let status = answer.status;
        let minted: AccessToken = parse(&answer.body, &what)?;
        let expires_at = OffsetDateTime::parse(
            &minted.expires_at,
            &time::format_description::well_known::Rfc3339,
        )
        .map_err(|e| failed(what.clone(), status, format!("expires_at: {e}").as_bytes()))?;
        let cached = Cached {
            token: Secret::new(minted.token),
            expires_at,
            permissions: minted.permissions,
            renew_at: renew_at(now, expires_at),
        };
        let mut st = self.state();
        *st.minted.entry(installation).or_default() += 1;
        st.tokens.insert(installation, cached.clone());
        Ok(Grant {
            token: cached.token,
            expires_at,
            permissions: cached.permissions,
        })
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
                let got = self.send(self.http.get(&url), &token, &what).await?;
                if got.status == 401 {
                    self.refused(installation, &token);
                    continue;
                }
                answer = Some((got.status, got.body));
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
    ) -> Result<Answer, InstallationError> {
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
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(transport)?;
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, InstallationError> {
    serde_json::from_slice(body).map_err(|e| InstallationError::Failed {
        what: what.to_string(),
        status: 200,
        message: format!("an answer not shaped like GitHub's: {e}"),
    })
}

/// What a refusal of the App's own requests (JWT) means: `Err` a temporary answer worth asking
/// again later (a rate limit, primary or secondary: 429, or 403 with `retry-after`,
/// `x-ratelimit-remaining: 0` or GitHub's rate-limit message, as the REST client reads it; a
/// refused JWT, see [`KEY_REFUSED_WAIT`]), `Ok` the error otherwise. Never the body's token.
fn refusal(what: String, answer: &Answer) -> Result<InstallationError, InstallationError> {
    let header = |name: &str| {
        answer
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let message = String::from_utf8_lossy(&answer.body).to_ascii_lowercase();
    let rate_limited = answer.status == 429
        || answer.status == 403
            && (header("retry-after").is_some()
                || header("x-ratelimit-remaining") == Some("0")
                || message.contains("rate limit"));
    if rate_limited {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let wait = header("retry-after")
            .and_then(|v| v.parse::<u64>().ok())
            .or_else(|| {
                header("x-ratelimit-reset")
                    .and_then(|v| v.parse::<i64>().ok())
                    .map(|reset| reset.saturating_sub(now).max(0) as u64)
            })
            .unwrap_or(60)
            .clamp(1, 3600);
        return Err(InstallationError::RateLimited {
            what,
            wait: Duration::from_secs(wait),
        });
    }
    if answer.status == 401 {
        return Err(InstallationError::Refused { status: 401 });
    }
    Ok(failed(what, answer.status, &answer.body))
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

impl TokenSource for AppClient {
    fn installation_of<'a>(
        &'a self,
        repo: &'a str,
    ) -> BoxFuture<'a, Result<u64, InstallationError>> {
        Box::pin(AppClient::installation_of(self, repo))
    }

    fn token(&self, installation: u64) -> BoxFuture<'_, Result<Secret, InstallationError>> {
        Box::pin(AppClient::token(self, installation))
    }

    fn refused(&self, installation: u64, used: &Secret) {
        AppClient::refused(self, installation, used)
    }

    fn remember(&self, repo: &str, installation: u64) {
        AppClient::remember(self, repo, installation)
    }

    fn forget(&self, repo: &str) {
        AppClient::forget(self, repo)
    }
}
