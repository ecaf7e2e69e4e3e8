//! Logging setup. Lambda functions log one JSON object per line (CloudWatch Logs Insights can
//! query the fields); the CLI logs compact text. `RUST_LOG` filters both.

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

/// Human-readable lines on stderr, for `chronicle` commands.
pub fn init_cli() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_target(false)
        .with_writer(std::io::stderr)
        .try_init();
}
