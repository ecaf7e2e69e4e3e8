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
    emf_line_with(now, &[], metrics)
}

/// [`emf_line`] with dimensions (`("Outcome", "inserted")`): each metric is recorded per
/// dimension value, as the EMF specification says (the dimension is a top-level string field
/// named in `Dimensions`).
pub fn emf_line_with(
    now: time::OffsetDateTime,
    dimensions: &[(&str, &str)],
    metrics: &[(&str, &str, serde_json::Value)],
) -> String {
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
                "Dimensions": [dimensions.iter().map(|(k, _)| *k).collect::<Vec<_>>()],
                "Metrics": declared,
            }]
        }
    });
    for (name, value) in dimensions {
        line[*name] = serde_json::json!(value);
    }
    for (name, _, value) in metrics {
        line[*name] = value.clone();
    }
    line.to_string()
}

/// One EMF line of a metric an alarm watches, per function: its dimension `FunctionName` is
/// the Lambda function's name (`AWS_LAMBDA_FUNCTION_NAME`; `local` elsewhere), so two stacks in
/// one account do not share it.
pub fn function_metric_line(now: time::OffsetDateTime, name: &str, value: u64) -> String {
    let function =
        std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".to_string());
    emf_line_with(
        now,
        &[("FunctionName", function.as_str())],
        &[(name, "Count", serde_json::json!(value))],
    )
}

/// `line` (an EMF line) with one more metric, a gauge (`Count`) of `value`.
pub fn with_gauge(line: &str, name: &str, value: u64) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(line) else {
        return line.to_string();
    };
    if let Some(metrics) = v
        .pointer_mut("/_aws/CloudWatchMetrics/0/Metrics")
        .and_then(|m| m.as_array_mut())
    {
        metrics.push(serde_json::json!({ "Name": name, "Unit": "Count" }));
        v[name] = serde_json::json!(value);
    }
    v.to_string()
}

/// Counts of outcomes over one invocation: a handler counts, the function's `main` prints them
/// as one EMF line after the invocation and starts again (Lambda runs one invocation at a time
/// per instance).
#[derive(Debug, Default)]
pub struct OutcomeCounts(std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>);

impl OutcomeCounts {
    pub fn add(&self, outcome: &'static str) {
        self.add_n(outcome, 1);
    }

    pub fn add_n(&self, outcome: &'static str, n: u64) {
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(outcome)
            .or_default() += n;
    }

    /// The counts so far, and zero again.
    pub fn take(&self) -> std::collections::BTreeMap<&'static str, u64> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The EMF line of outcome counts: one metric per outcome (`<prefix><Outcome>`), every known
/// outcome present (zero when it did not happen), so dashboards and alarms see a value.
pub fn outcomes_emf_line(
    now: time::OffsetDateTime,
    prefix: &str,
    known: &[&'static str],
    counts: &std::collections::BTreeMap<&'static str, u64>,
) -> String {
    let names: Vec<String> = known.iter().map(|k| format!("{prefix}{k}")).collect();
    let metrics: Vec<(&str, &str, serde_json::Value)> = known
        .iter()
        .zip(&names)
        .map(|(k, name)| {
            (
                name.as_str(),
                "Count",
                serde_json::json!(counts.get(k).copied().unwrap_or(0)),
            )
        })
        .collect();
    emf_line(now, &metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape CloudWatch parses: `_aws.CloudWatchMetrics[0]` with the namespace, the
    /// dimension sets naming top-level string fields, and each metric a top-level number.
    #[test]
    fn emf_lines_have_the_shape_cloudwatch_parses() {
        let now = time::macros::datetime!(2026-12-03 12:00 UTC);
        let line: serde_json::Value = serde_json::from_str(&emf_line_with(
            now,
            &[("Outcome", "inserted")],
            &[("Deliveries", "Count", serde_json::json!(1))],
        ))
        .unwrap();
        let aws = &line["_aws"];
        assert_eq!(aws["Timestamp"], 1_796_299_200_000i64);
        let m = &aws["CloudWatchMetrics"][0];
        assert_eq!(m["Namespace"], "Chronicle");
        assert_eq!(m["Dimensions"], serde_json::json!([["Outcome"]]));
        assert_eq!(
            m["Metrics"][0],
            serde_json::json!({"Name": "Deliveries", "Unit": "Count"})
        );
        assert_eq!(line["Outcome"], "inserted");
        assert_eq!(line["Deliveries"], 1);

        let counts = OutcomeCounts::default();
        counts.add("Summarized");
        counts.add("Summarized");
        counts.add("GaveUp");
        let taken = counts.take();
        assert!(counts.take().is_empty(), "taken resets");
        let line: serde_json::Value = serde_json::from_str(&outcomes_emf_line(
            now,
            "Messages",
            &["Summarized", "GaveUp", "Failed"],
            &taken,
        ))
        .unwrap();
        assert_eq!(line["MessagesSummarized"], 2);
        assert_eq!(line["MessagesGaveUp"], 1);
        assert_eq!(line["MessagesFailed"], 0);
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            serde_json::json!([[]])
        );
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
    }
}
