//! AWS SDK configuration. The standard variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
//! credentials) are honoured as the SDK defines them; nothing here overrides them.

use std::error::Error as StdError;

use aws_config::{BehaviorVersion, SdkConfig};

/// The SDK configuration from the environment, as every function loads it at cold start.
pub async fn sdk_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest()).load().await
}

/// An S3 client; path-style addressing when the endpoint is overridden (an emulator such as moto
/// at `http://127.0.0.1:PORT` cannot serve `bucket.127.0.0.1` virtual hosts).
pub fn s3_client(sdk: &SdkConfig) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(sdk)
        .force_path_style(sdk.endpoint_url().is_some())
        .build();
    aws_sdk_s3::Client::from_conf(config)
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
        other => crate::error::error_chain(other),
    }
}
