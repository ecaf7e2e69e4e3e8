//! Enrich's end of the token function: a [`TokenSource`] that asks it by Lambda `Invoke`
//! (RequestResponse) and keeps what it answered, as [`AppClient`] does with the key in hand:
//! each token until shortly before it expires, which installation a repository has, which
//! installations are gone. A 401 from GitHub drops the token and the next request asks the
//! function for a new one (`renew`).
//!
//! [`AppClient`]: chronicle_github::installation::AppClient

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use time::OffsetDateTime;

use super::{TokenRequest, TokenResponse};
use chronicle_aws::secret::Secret;
use chronicle_github::installation::{renew_at, BoxFuture, InstallationError, TokenSource};

/// The Lambda client of a function's SDK configuration (its HTTPS client, its endpoint: in
/// Lambda the Region's, or `AWS_ENDPOINT_URL_LAMBDA`).
/// Its timeout per ask: the token function's own (`Timeout: 30` in template.yaml) and a
/// margin, so a function that hangs is a transport error, not enrich's whole invocation. The
/// GitHub clients bound each ask by the record's deadline too.
pub fn lambda_client(sdk: &aws_config::SdkConfig) -> aws_sdk_lambda::Client {
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .operation_timeout(ASK_TIMEOUT)
        .operation_attempt_timeout(ASK_TIMEOUT)
        .build();
    let config = aws_sdk_lambda::config::Builder::from(sdk)
        .timeout_config(timeouts)
        .build();
    aws_sdk_lambda::Client::from_conf(config)
}

/// The longest one ask of the token function may take.
pub const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(35);

struct Held {
    token: Secret,
    renew_at: OffsetDateTime,
}

#[derive(Default)]
struct State {
    tokens: HashMap<u64, Held>,
    installations: HashMap<String, u64>,
    gone: HashSet<u64>,
    /// Installations whose token GitHub refused, with its fingerprint: the next request asks
    /// for a new one, and no other answer replaces it meanwhile.
    renew: HashMap<u64, String>,
    /// Repositories whose installation was forgotten: the function is told to ask GitHub
    /// again, not answer from its own memory.
    fresh: HashSet<String>,
}

/// Installation tokens from the token function.
pub struct LambdaTokens {
    lambda: aws_sdk_lambda::Client,
    function: String,
    state: Mutex<State>,
    /// One request at a time: tasks that find no token wait for the one being asked for.
    asking: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for LambdaTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LambdaTokens")
            .field("function", &self.function)
            .finish_non_exhaustive()
    }
}

impl LambdaTokens {
    pub fn new(lambda: aws_sdk_lambda::Client, function: &str) -> LambdaTokens {
        LambdaTokens {
            lambda,
            function: function.to_string(),
            state: Mutex::new(State::default()),
            asking: tokio::sync::Mutex::new(()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn held(&self, installation: u64) -> Option<Secret> {
        let now = OffsetDateTime::now_utc();
        self.state()
            .tokens
            .get(&installation)
            .filter(|h| now < h.renew_at)
            .map(|h| h.token.clone())
    }

    /// Asks the function; a token is kept, a refusal becomes the error it stands for.
    async fn ask(&self, request: TokenRequest) -> Result<(u64, Secret), InstallationError> {
        let what = format!("the token function {}", self.function);
        let payload = serde_json::to_vec(&request).unwrap_or_default();
        let answer = self
            .lambda
            .invoke()
            .function_name(&self.function)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| InstallationError::Transport {
                what: what.clone(),
                message: chronicle_aws::error_message(&e),
            })?;
        let body = answer.payload().map(|b| b.as_ref()).unwrap_or_default();
        if let Some(kind) = answer.function_error() {
            // Its own failure (a panic, a timeout): temporary, its text is not a token.
            return Err(InstallationError::Transport {
                what,
                message: format!(
                    "{kind}: {}",
                    String::from_utf8_lossy(body)
                        .chars()
                        .take(300)
                        .collect::<String>()
                ),
            });
        }
        let response: TokenResponse =
            serde_json::from_slice(body).map_err(|e| InstallationError::Unavailable {
                message: format!("{what} answered something else than a token response: {e}"),
                permanent: false,
            })?;
        match response {
            TokenResponse::Token {
                token,
                expires_at,
                installation,
                ..
            } => {
                let now = OffsetDateTime::now_utc();
                let expires_at = OffsetDateTime::parse(
                    &expires_at,
                    &time::format_description::well_known::Rfc3339,
                )
                .unwrap_or(now);
                let mut st = self.state();
                // A repository's answer for an installation whose token was refused may be that
                // very token (asked before the 401): only the renew's answer replaces it.
                if !request.renew && st.renew.contains_key(&installation) {
                    return Ok((installation, token));
                }
                st.renew.remove(&installation);
                st.tokens.insert(
                    installation,
                    Held {
                        token: token.clone(),
                        renew_at: renew_at(now, expires_at),
                    },
                );
                Ok((installation, token))
            }
            TokenResponse::Refused(refusal) => {
                let error = refusal.into_error();
                if let InstallationError::Uninstalled(id) = &error {
                    let mut st = self.state();
                    st.installations.retain(|_, i| i != id);
                    st.tokens.remove(id);
                    st.gone.insert(*id);
                }
                Err(error)
            }
        }
    }
}

impl TokenSource for LambdaTokens {
    fn installation_of<'a>(
        &'a self,
        repo: &'a str,
    ) -> BoxFuture<'a, Result<u64, InstallationError>> {
        Box::pin(async move {
            if let Some(id) = self.state().installations.get(repo) {
                return Ok(*id);
            }
            let _asking = self.asking.lock().await;
            if let Some(id) = self.state().installations.get(repo) {
                return Ok(*id);
            }
            // The answer is the installation's token too: the next request needs it anyway.
            let fresh = self.state().fresh.contains(repo);
            let answer = self
                .ask(TokenRequest {
                    repo: Some(repo.to_string()),
                    fresh,
                    ..TokenRequest::default()
                })
                .await;
            let mut st = self.state();
            // Asked afresh once GitHub answered; a failure to reach it asks afresh again.
            if answer.as_ref().map_or_else(|e| e.is_permanent(), |_| true) {
                st.fresh.remove(repo);
            }
            let (id, _) = answer?;
            st.installations.insert(repo.to_string(), id);
            Ok(id)
        })
    }

    fn token(&self, installation: u64) -> BoxFuture<'_, Result<Secret, InstallationError>> {
        Box::pin(async move {
            if let Some(token) = self.held(installation) {
                return Ok(token);
            }
            let _asking = self.asking.lock().await;
            if let Some(token) = self.held(installation) {
                return Ok(token);
            }
            let refused = self.state().renew.get(&installation).cloned();
            let (_, token) = self
                .ask(TokenRequest {
                    installation: Some(installation),
                    renew: refused.is_some(),
                    refused,
                    ..TokenRequest::default()
                })
                .await?;
            Ok(token)
        })
    }

    fn refused(&self, installation: u64, used: &Secret) {
        let mut st = self.state();
        if st
            .tokens
            .get(&installation)
            .is_some_and(|h| h.token.expose() == used.expose())
        {
            st.tokens.remove(&installation);
            st.renew.insert(installation, super::fingerprint(used));
        }
    }

    fn remember(&self, repo: &str, installation: u64) {
        let mut st = self.state();
        if !st.gone.contains(&installation) {
            st.installations
                .entry(repo.to_string())
                .or_insert(installation);
        }
    }

    fn forget(&self, repo: &str) {
        let mut st = self.state();
        st.installations.remove(repo);
        st.fresh.insert(repo.to_string());
    }
}
