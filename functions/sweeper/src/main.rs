//! Lambda on an EventBridge Scheduler schedule (`rate(1 minute)`): one sweep of the pending
//! index per invocation. Thin: the sweep is `stages::sweeper`; this logs its report and the
//! Embedded Metric Format line CloudWatch turns into metrics.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use stages::config::SweeperConfig;
use stages::enrich::deadline_from_epoch_millis;
use stages::sweeper::{emf_line, SweepReport, Sweeper};

#[tokio::main]
async fn main() -> Result<(), Error> {
    stages::telemetry::init_lambda();
    let config = SweeperConfig::from_env()?;
    let sdk = stages::aws::sdk_config().await;
    let sweeper = Sweeper::from_config(&config, &sdk);
    let sweeper = &sweeper;
    // The scheduler's payload carries nothing the sweep needs: any JSON is accepted.
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let now = time::OffsetDateTime::now_utc();
            let report: SweepReport = sweeper
                .sweep(now, deadline_from_epoch_millis(event.context.deadline))
                .await?;
            println!("{}", emf_line(&report, now));
            Ok::<SweepReport, Error>(report)
        },
    ))
    .await
}
