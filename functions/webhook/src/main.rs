//! Lambda behind API Gateway (HTTP API, payload v2) `POST /webhook`.
//!
//! Thin by design: configuration and the secret are loaded once per cold start, and each event
//! goes to `chronicle_ingest::webhook::WebhookHandler`, which the local stack serves over HTTP too.
//! The event is taken as `ApiGatewayV2httpRequest` rather than through `lambda_http::run`,
//! whose adapter panics on a body that is not valid base64; the handler answers 400 instead.

use chronicle_config::WebhookConfig;
use chronicle_ingest::webhook::WebhookHandler;
use lambda_http::aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use lambda_http::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    chronicle_aws::telemetry::init_lambda();
    let config = WebhookConfig::from_env()?;
    let sdk = chronicle_aws::sdk_config().await;
    let handler = WebhookHandler::from_config(&config, &sdk).await?;
    let handler = &handler;
    lambda_http::lambda_runtime::run(service_fn(
        move |event: LambdaEvent<ApiGatewayV2httpRequest>| async move {
            let response = handler.handle_apigw(event.payload).await;
            // The delivery's outcome as an Embedded Metric Format line (CloudWatch Logs).
            println!("{}", handler.emf_line(time::OffsetDateTime::now_utc()));
            Ok::<ApiGatewayV2httpResponse, Error>(response)
        },
    ))
    .await
}
