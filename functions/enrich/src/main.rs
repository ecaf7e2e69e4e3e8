//! Lambda on the PR table's DynamoDB stream (INSERTs only, by the template's filter).
//!
//! Thin by design: the token is read once per cold start; each batch goes to
//! `shared::enrich::EnrichHandler`, whose partial-batch response is returned as is
//! (`ReportBatchItemFailures`). The local stack feeds the same handler from the emulator's stream.

use std::sync::Arc;

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use shared::config::EnrichConfig;
use shared::enrich::{deadline_from_epoch_millis, EnrichHandler};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init_lambda();
    let config = EnrichConfig::from_env()?;
    let sdk = shared::aws::sdk_config().await;
    let handler = Arc::new(EnrichHandler::from_config(&config, &sdk).await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| {
        let handler = Arc::clone(&handler);
        async move {
            let deadline = deadline_from_epoch_millis(event.context.deadline);
            Ok::<DynamoDbEventResponse, Error>(
                handler
                    .handle(event.payload, deadline, &event.context.request_id)
                    .await,
            )
        }
    }))
    .await
}
