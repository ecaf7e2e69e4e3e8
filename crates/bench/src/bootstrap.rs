//! `chronicle bench bootstrap`: each Lambda function's release bootstrap, its size and its init
//! time, measured against a fake Lambda Runtime API: the time from spawning the binary to its
//! first `GET /2018-06-01/runtime/invocation/next`, which is when Lambda considers init done.
//!
//! The fake API never answers that poll, so nothing after init is timed. Every function gets a
//! configuration that needs no network at init (plain secrets, the Markdown publisher), with AWS
//! and GitHub pointed at the fake API itself: an init that calls out, exits or reports an init
//! error is reported rather than timed.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use standins::http_server::Serving;

/// The functions, as `template.yaml` and cargo-lambda name their binaries.
pub const FUNCTIONS: [&str; 6] = [
    "webhook",
    "enrich",
    "sweeper",
    "summarize",
    "page-builder",
    "redeliver",
];

/// How long one init may take before the run is called failed.
const INIT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct BootstrapOptions {
    /// Where the binaries are: `target/release` (named as the functions) or cargo-lambda's
    /// `target/lambda` (`<function>/bootstrap`).
    pub dir: PathBuf,
    /// Timed runs per function (one untimed run first warms the page cache).
    pub runs: usize,
    /// Which functions (default: all).
    pub functions: Vec<String>,
}

/// One function's figures.
#[derive(Debug)]
pub struct Figures {
    pub function: String,
    pub bytes: u64,
    /// Init times, sorted.
    pub inits: Vec<Duration>,
}

impl Figures {
    /// The middle run (the mean of the two middle ones for an even count).
    pub fn median(&self) -> Duration {
        let n = self.inits.len();
        if n % 2 == 1 {
            self.inits[n / 2]
        } else {
            (self.inits[n / 2 - 1] + self.inits[n / 2]) / 2
        }
    }
}

pub async fn run(options: BootstrapOptions) -> anyhow::Result<()> {
    let functions: Vec<String> = if options.functions.is_empty() {
        FUNCTIONS.iter().map(|f| f.to_string()).collect()
    } else {
        options.functions.clone()
    };
    println!(
        "bootstrap: {} timed runs each, spawn -> first /runtime/invocation/next (fake Runtime API)",
        options.runs
    );
    println!(
        "{:<14} {:>12} {:>10} {:>10} {:>10}",
        "function", "bytes", "median", "min", "max"
    );
    let mut failed = Vec::new();
    for function in &functions {
        let measured = match locate(&options.dir, function) {
            Ok(binary) => measure(function, &binary, options.runs.max(1)).await,
            Err(e) => Err(e),
        };
        let figures = match measured {
            Ok(figures) => figures,
            Err(e) => {
                println!("{function:<14} failed: {e:#}");
                failed.push(function.clone());
                continue;
            }
        };
        println!(
            "{:<14} {:>12} {:>10} {:>10} {:>10}",
            figures.function,
            figures.bytes,
            millis(figures.median()),
            millis(figures.inits[0]),
            millis(*figures.inits.last().expect("at least one run")),
        );
    }
    if !failed.is_empty() {
        anyhow::bail!("no figures for {}", failed.join(", "));
    }
    Ok(())
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// `dir/<function>` (a host `cargo build --release`) or `dir/<function>/bootstrap`.
pub fn locate(dir: &Path, function: &str) -> anyhow::Result<PathBuf> {
    let candidates = [dir.join(function), dir.join(function).join("bootstrap")];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "no bootstrap for {function} in {} (build it: cargo build --release -p chronicle-{function})",
                dir.display()
            )
        })
}

/// Spawns `binary` `runs + 1` times against a fresh fake Runtime API and times each init.
pub async fn measure(function: &str, binary: &Path, runs: usize) -> anyhow::Result<Figures> {
    let bytes = std::fs::metadata(binary)
        .with_context(|| format!("reading {}", binary.display()))?
        .len();
    let mut inits = Vec::with_capacity(runs);
    for run in 0..=runs {
        let init = init_once(function, binary).await?;
        if run > 0 {
            inits.push(init);
        }
    }
    inits.sort();
    Ok(Figures {
        function: function.to_string(),
        bytes,
        inits,
    })
}

/// What the fake Runtime API saw first.
enum Seen {
    Next,
    InitError(String),
    /// A request that was not for the Runtime API: the init called AWS or GitHub.
    Outbound(String),
}

async fn init_once(function: &str, binary: &Path) -> anyhow::Result<Duration> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (seen, mut first) = mpsc::unbounded_channel();
    let serving = Serving::spawn(listener, move |request: http::Request<_>| {
        let seen = seen.clone();
        async move {
            let path = request.uri().path().to_string();
            if !path.starts_with("/2018-06-01/runtime/") {
                let _ = seen.send(Seen::Outbound(format!("{} {path}", request.method())));
            } else if request.method() == Method::GET && path.ends_with("/runtime/invocation/next")
            {
                let _ = seen.send(Seen::Next);
                // Held: an invocation would start the handler, and only init is timed.
                std::future::pending::<()>().await;
            }
            let body = request
                .into_body()
                .collect()
                .await
                .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                .unwrap_or_default();
            if path.ends_with("/runtime/init/error") {
                let _ = seen.send(Seen::InitError(body));
            }
            Ok::<_, Infallible>(
                Response::builder()
                    .status(StatusCode::ACCEPTED)
                    .body(Full::new(Bytes::from_static(b"{}")))
                    .expect("static response"),
            )
        }
    });
    let mut command = tokio::process::Command::new(binary);
    command
        .env_clear()
        .envs(environment(function, &addr.to_string()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("spawning {}", binary.display()))?;
    let outcome = tokio::select! {
        seen = tokio::time::timeout(INIT_TIMEOUT, first.recv()) => match seen {
            Ok(Some(seen)) => Ok((seen, started.elapsed())),
            Ok(None) | Err(_) => Err(format!("no /runtime/invocation/next within {INIT_TIMEOUT:?}")),
        },
        exited = child.wait() => Err(format!("exited at init ({})", exited.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string()))),
    };
    let _ = child.kill().await;
    serving.stop().await;
    match outcome {
        Ok((Seen::Next, elapsed)) => Ok(elapsed),
        Ok((Seen::InitError(body), _)) => {
            anyhow::bail!(
                "init failed, the runtime was told: {body}; stderr: {}",
                stderr_tail(&mut child).await
            )
        }
        Ok((Seen::Outbound(request), _)) => {
            anyhow::bail!("init called out ({request}); an init is timed without network")
        }
        Err(why) => anyhow::bail!("{why}; stderr: {}", stderr_tail(&mut child).await),
    }
}

/// The last lines the (killed) child wrote to stderr, on one line.
async fn stderr_tail(child: &mut tokio::process::Child) -> String {
    use tokio::io::AsyncReadExt;
    let mut text = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut text).await;
    }
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// A configuration every function initialises with and that needs no network at init: plain
/// secrets, the Markdown publisher, and AWS and GitHub pointed at the fake Runtime API, which
/// reports any request that is not its own.
fn environment(function: &str, runtime_api: &str) -> Vec<(String, String)> {
    let elsewhere = format!("http://{runtime_api}");
    let mut env: Vec<(&str, String)> = vec![
        ("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string()),
        (
            "AWS_LAMBDA_FUNCTION_NAME",
            format!("chronicle-bench-{function}"),
        ),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/chronicle-bench-{function}"),
        ),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "bench".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "bench".into()),
        ("AWS_SECRET_ACCESS_KEY", "bench".into()),
        ("AWS_ENDPOINT_URL", elsewhere.clone()),
        ("RUST_LOG", "warn".into()),
        (stages::config::TABLE_NAME, "chronicle-bench-prs".into()),
        (
            stages::config::ENTRIES_TABLE,
            "chronicle-bench-entries".into(),
        ),
        (stages::config::PAGES_TABLE, "chronicle-bench-pages".into()),
        (
            stages::config::SUMMARIZE_QUEUE_URL,
            format!("{elsewhere}/000000000000/chronicle-bench"),
        ),
        (stages::config::GITHUB_WEBHOOK_SECRET, "bench".into()),
        (stages::config::GITHUB_TOKEN, "bench".into()),
        (stages::config::GITHUB_API_URL, elsewhere.clone()),
        (
            stages::config::OUTPUT_DIR,
            std::env::temp_dir()
                .join("chronicle-bench-pages")
                .display()
                .to_string(),
        ),
    ];
    env.sort_by_key(|(k, _)| *k);
    env.dedup_by_key(|(k, _)| *k);
    env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
