//! The enrich handler from its configuration: a token, the App with its key in hand (the local
//! stack, the CLI), or the App through the token function (AWS: enrich holds no key).

use super::*;

#[derive(Debug, thiserror::Error)]
pub enum EnrichInitError {
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error("building the GitHub HTTP client failed: {0}")]
    Http(String),
    #[error(transparent)]
    AppKey(#[from] crate::github::app::AppKeyError),
    #[error("{} is set, and so is the GitHub App's private key (GITHUB_APP_PRIVATE_KEY, …_ARN or …_PARAM): enrich parses untrusted content and must not hold the key; remove the key from its configuration (only the token function reads it)", crate::config::TOKEN_FUNCTION_NAME)]
    KeyBesideTokenFunction,
}

impl EnrichHandler {
    /// From configuration; the token is read once (cold start). No token = disabled. With a
    /// token function, each installation's token is asked of it, and no key may be configured.
    pub async fn from_config(
        config: &EnrichConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, EnrichInitError> {
        Self::from_configs(config, sdk, sdk).await
    }

    /// [`EnrichHandler::from_config`], the token function invoked with `lambda`'s SDK
    /// configuration (an endpoint of its own: the emulator does not run our functions).
    pub async fn from_configs(
        config: &EnrichConfig,
        sdk: &aws_config::SdkConfig,
        lambda: &aws_config::SdkConfig,
    ) -> Result<Self, EnrichInitError> {
        if let Some(function) = &config.token_function {
            if config.app_key != crate::secret::SecretSource::Unset {
                return Err(EnrichInitError::KeyBesideTokenFunction);
            }
            tracing::info!(function = %function, "GitHub is read as the App, each installation's token asked of the token function");
            let tokens =
                crate::token::LambdaTokens::new(crate::token::lambda_client(lambda), function);
            let github = GitHubAccess::app(
                Arc::new(tokens),
                &config.api_url,
                config.timeout,
                config.max_retries,
                config.issue_scope,
            );
            return Ok(Self::with_store(config, sdk, Some(github)));
        }
        let app = match &config.app_id {
            Some(id) => config.app_key.resolve(sdk).await?.map(|key| (id, key)),
            None => None,
        };
        let token = match app {
            Some(_) => None,
            None => config.token.resolve(sdk).await?,
        };
        let github = match (app, token) {
            (Some((id, key)), _) => {
                let credentials = crate::github::app::AppCredentials::new(id, &key)?;
                let client = crate::github::installation::AppClient::new(
                    &config.api_url,
                    credentials,
                    config.timeout,
                )
                .map_err(|e| EnrichInitError::Http(e.to_string()))?;
                tracing::info!(app_id = %id, "GitHub is read as the App, each repository with its installation's token");
                Some(GitHubAccess::app(
                    Arc::new(client),
                    &config.api_url,
                    config.timeout,
                    config.max_retries,
                    config.issue_scope,
                ))
            }
            (None, Some(token)) => Some(GitHubAccess::Token(Arc::new(
                GitHubApis::new(&config.api_url, &token, config.timeout, config.max_retries)
                    .map_err(|e| EnrichInitError::Http(e.to_string()))?
                    .with_issue_scope(config.issue_scope),
            ))),
            (None, None) => {
                tracing::info!(
                    "no GitHub token configured ({} / {} / {}): enrichment is skipped",
                    crate::config::GITHUB_TOKEN,
                    crate::config::GITHUB_TOKEN_ARN,
                    crate::config::GITHUB_TOKEN_PARAM
                );
                None
            }
        };
        Ok(Self::with_store(config, sdk, github))
    }

    /// The handler over the configured tables, reading GitHub through `github`.
    fn with_store(
        config: &EnrichConfig,
        sdk: &aws_config::SdkConfig,
        github: Option<GitHubAccess>,
    ) -> Self {
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let store = PrStore::new(dynamo.clone(), config.table.clone());
        let handler = Self::new(store, github, config.concurrency, config.max_paths)
            .with_max_wait(config.max_wait);
        match &config.pages_table {
            Some(table) => handler.with_contexts(crate::store::ContextStore::new(dynamo, table)),
            None => handler,
        }
    }
}
