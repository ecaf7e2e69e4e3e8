//! Lambda on an EventBridge Scheduler schedule (`rate(1 minute)`): one tick of the page builder
//! per invocation. Thin: the builds are `stages::builder`; this logs the report and the
//! Embedded Metric Format line CloudWatch turns into metrics.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use stages::builder::{emf_line, BuildReport, PageBuilder};
use stages::config::BuilderConfig;
use stages::enrich::deadline_from_epoch_millis;

#[tokio::main]
async fn main() -> Result<(), Error> {
    stages::telemetry::init_lambda();
    let config = BuilderConfig::from_env()?;
    let sdk = stages::aws::sdk_config().await;
    let builder = PageBuilder::from_config(&config, &sdk).await?;
    let builder = &builder;
    // The scheduler's payload carries nothing the builder needs: any JSON is accepted.
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let now = time::OffsetDateTime::now_utc();
            let report: BuildReport = builder
                .tick(
                    now,
                    deadline_from_epoch_millis(event.context.deadline),
                    &event.context.request_id,
                )
                .await?;
            println!("{}", emf_line(&report, now));
            Ok::<BuildReport, Error>(report)
        },
    ))
    .await
}
