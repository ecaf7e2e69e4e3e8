//! What every function shares with AWS: the SDK configuration, error text, secrets, and
//! telemetry (tracing logs and Embedded Metric Format lines for CloudWatch).
//!
//! The standard variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials) are honoured as the
//! SDK defines them; nothing here overrides them.

use std::error::Error as StdError;

use aws_config::{BehaviorVersion, SdkConfig};

pub use chronicle_domain::error;
pub mod secret;
pub mod telemetry;

/// The SDK configuration from the environment, as every function loads it at cold start.
pub async fn sdk_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client())
        .load()
        .await
}

/// The HTTPS client every AWS SDK client of ours uses: the SDK's own (hyper 1, rustls, the
/// system's roots) on ring rather than aws-lc, so a function links one crypto library.
pub fn http_client() -> aws_sdk_dynamodb::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// A one-line description of an SDK error, including the service's own message and code,
/// which `Display` of `SdkError` alone hides ("service error").
pub fn error_message<E>(err: &aws_sdk_dynamodb::error::SdkError<E>) -> String
where
    E: StdError + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
{
    use aws_sdk_dynamodb::error::SdkError;
    match err {
        SdkError::ServiceError(ctx) => {
            let e = ctx.err();
            match (e.code(), e.message()) {
                (Some(code), Some(msg)) => format!("{code}: {msg}"),
                (Some(code), None) => code.to_string(),
                _ => e.to_string(),
            }
        }
        other => error::error_chain(other),
    }
}
