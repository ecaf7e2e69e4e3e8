//! Logging setup and metric lines. Lambda functions log one JSON object per line (CloudWatch
//! Logs Insights can query the fields); the CLI logs compact text. `RUST_LOG` filters both.
//! Metrics are Embedded Metric Format lines ([`emf_line`]).

use tracing_subscriber::EnvFilter;

fn filter() -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))
}

/// JSON lines on stdout, no ANSI colours, no timestamps (Lambda adds its own).
pub fn init_lambda() {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter())
        .with_current_span(false)
        .with_span_list(false)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .try_init();
}

/// Human-readable lines on stderr, for `chronicle` commands; colour only when stderr is a
/// terminal (a log piped to a file or a CI log carries no escape codes).
pub fn init_cli() {
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// One CloudWatch Embedded Metric Format line in the `Chronicle` namespace: CloudWatch Logs turns
/// each `(name, unit, value)` into a metric, with no API call.
pub fn emf_line(now: time::OffsetDateTime, metrics: &[(&str, &str, serde_json::Value)]) -> String {
    let timestamp = (now.unix_timestamp_nanos() / 1_000_000) as i64;
    let declared: Vec<serde_json::Value> = metrics
        .iter()
        .map(|(name, unit, _)| serde_json::json!({ "Name": name, "Unit": unit }))
        .collect();
    let mut line = serde_json::json!({
        "_aws": {
            "Timestamp": timestamp,
            "CloudWatchMetrics": [{
                "Namespace": "Chronicle",
                "Dimensions": [[]],
                "Metrics": declared,
            }]
        }
    });
    for (name, _, value) in metrics {
        line[*name] = value.clone();
    }
    line.to_string()
}
