//! Lambda on the PR table's DynamoDB stream (INSERTs only, by the template's filter), and on a
//! schedule that retries the rows whose enrichment was deferred by GitHub's rate limit.
//!
//! Thin by design: the token is read once per cold start; each invocation goes to
//! `stages::enrich::EnrichHandler`, whose partial-batch response (or retry report) is returned as
//! is (`ReportBatchItemFailures`). The local stack feeds the same handler from the emulator.

use std::sync::Arc;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use stages::config::EnrichConfig;
use stages::enrich::{
    deadline_from_epoch_millis, emf_line, EnrichHandler, EnrichResponse, EnrichTrigger,
};

#[tokio::main]
async fn main() -> Result<(), Error> {
    stages::telemetry::init_lambda();
    let config = EnrichConfig::from_env()?;
    let sdk = stages::aws::sdk_config().await;
    let handler = Arc::new(EnrichHandler::from_config(&config, &sdk).await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<EnrichTrigger>| {
        let handler = Arc::clone(&handler);
        async move {
            let deadline = deadline_from_epoch_millis(event.context.deadline);
            let response = handler
                .invoke(event.payload, deadline, &event.context.request_id)
                .await?;
            match &response {
                EnrichResponse::Retry(report) => {
                    println!("{}", emf_line(report, time::OffsetDateTime::now_utc()));
                }
                // The records' outcomes and GitHub requests, as an EMF line.
                EnrichResponse::Stream(_) => {
                    println!("{}", handler.emf_line(time::OffsetDateTime::now_utc()));
                }
            }
            Ok::<EnrichResponse, Error>(response)
        }
    }))
    .await
}
