//! Lambda on the summarize queue (SQS, `ReportBatchItemFailures`). Thin: the modules config is
//! loaded once per cold start; each batch goes to `stages::summarize::SummarizeHandler`, whose
//! partial-batch response is returned as is. The local stack feeds the same handler from moto.

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use stages::config::SummarizeConfig;
use stages::enrich::deadline_from_epoch_millis;
use stages::summarize::SummarizeHandler;

#[tokio::main]
async fn main() -> Result<(), Error> {
    stages::telemetry::init_lambda();
    let config = SummarizeConfig::from_env()?;
    let sdk = stages::aws::sdk_config().await;
    let handler = Arc::new(SummarizeHandler::from_config(&config, &sdk).await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let handler = Arc::clone(&handler);
        async move {
            let deadline = deadline_from_epoch_millis(event.context.deadline);
            let response = handler
                .handle(event.payload, deadline, &event.context.request_id)
                .await;
            // The messages' outcomes as an Embedded Metric Format line (CloudWatch Logs).
            println!("{}", handler.emf_line(time::OffsetDateTime::now_utc()));
            Ok::<SqsBatchResponse, Error>(response)
        }
    }))
    .await
}
