//! Lambda on an hourly schedule: GitHub's failed `pull_request` deliveries of the last three
//! days that Chronicle never stored are redelivered, once each. Thin: the work is
//! `stages::redeliver`; this logs its report and the Embedded Metric Format line.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use stages::config::RedeliverConfig;
use stages::enrich::deadline_from_epoch_millis;
use stages::redeliver::{emf_line, RedeliverReport, Redeliverer};

#[tokio::main]
async fn main() -> Result<(), Error> {
    stages::telemetry::init_lambda();
    let config = RedeliverConfig::from_env()?;
    let sdk = stages::aws::sdk_config().await;
    // Without a token this fails at cold start with a message naming what to configure.
    let redeliverer = Redeliverer::from_config(&config, &sdk).await?;
    let redeliverer = &redeliverer;
    // The schedule's payload carries nothing the run needs: any JSON is accepted.
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let now = time::OffsetDateTime::now_utc();
            let report: RedeliverReport = redeliverer
                .run(
                    now,
                    deadline_from_epoch_millis(event.context.deadline),
                    false,
                )
                .await?;
            println!("{}", emf_line(&report, now));
            Ok::<RedeliverReport, Error>(report)
        },
    ))
    .await
}
