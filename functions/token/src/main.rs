//! Lambda invoked by enrich (RequestResponse) for an installation token: it holds the GitHub
//! App's private key so that enrich, which parses repository content, never does (redeliver
//! holds it too, to list the App's hook deliveries). Its role reads that one secret and nothing
//! else; no event source triggers it.
//!
//! Thin by design: the key is read once per cold start (and again after GitHub refused the
//! JWT, as during a key rotation); each request goes to `chronicle_tokens::TokenHandler`, whose
//! answer (a token, or a typed refusal) is returned as is. The token is never logged.

use std::sync::Arc;

use chronicle_config::TokenConfig;
use chronicle_tokens::{TokenHandler, TokenResponse};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    chronicle_aws::telemetry::init_lambda();
    let config = TokenConfig::from_env()?;
    let sdk = chronicle_aws::sdk_config().await;
    let handler = Arc::new(TokenHandler::from_config(&config, &sdk).await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let handler = Arc::clone(&handler);
        async move { Ok::<TokenResponse, Error>(handler.handle(event.payload).await) }
    }))
    .await
}
