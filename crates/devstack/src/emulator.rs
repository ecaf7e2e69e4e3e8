//! moto in server mode, the AWS-protocol emulator, started and stopped by the project itself.
//! Installation is `infra/emulator.sh install` (a git-ignored virtualenv); this module runs the
//! server as a child process it owns, so stopping the local stack stops the emulator too.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("installing the emulator failed ({script} install exited with {status}); see its output above")]
    Install { script: String, status: String },
    #[error("could not run {what}: {source}")]
    Spawn {
        what: String,
        source: std::io::Error,
    },
    #[error("moto_server exited before answering (status {0}); is port {1} already in use?")]
    Exited(String, u16),
    #[error("moto_server did not answer at {0} within {1:?}")]
    Timeout(String, Duration),
}

/// The repository root (this crate lives in `<root>/crates/devstack`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/devstack/ has a grandparent")
        .to_path_buf()
}

/// A running moto server, killed when this value is dropped or [`Emulator::stop`]ped.
pub struct Emulator {
    child: Child,
    endpoint: String,
}

impl Emulator {
    /// Installs moto if needed and starts it on 127.0.0.1 (`port`, or a free one).
    pub async fn start(port: Option<u16>) -> Result<Self, EmulatorError> {
        let root = repo_root();
        let script = root.join("infra/emulator.sh");
        let moto = root.join(".venv-moto/bin/moto_server");
        let python = root.join(".venv-moto/bin/python");
        // moto's server with each request applied atomically, as DynamoDB applies them.
        let launcher = root.join("infra/moto_server.py");
        if !moto.exists() {
            let status = Command::new(&script)
                .arg("install")
                .status()
                .await
                .map_err(|source| EmulatorError::Spawn {
                    what: script.display().to_string(),
                    source,
                })?;
            if !status.success() {
                return Err(EmulatorError::Install {
                    script: script.display().to_string(),
                    status: status.to_string(),
                });
            }
        }
        let port = match port {
            Some(p) => p,
            None => free_port().map_err(|source| EmulatorError::Spawn {
                what: "a free port".into(),
                source,
            })?,
        };
        let mut child = Command::new(&python)
            .arg(&launcher)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| EmulatorError::Spawn {
                what: moto.display().to_string(),
                source,
            })?;
        let endpoint = format!("http://127.0.0.1:{port}");
        let limit = Duration::from_secs(20);
        let started = Instant::now();
        let probe = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .expect("a plain HTTP client builds");
        loop {
            if let Some(status) = child.try_wait().ok().flatten() {
                return Err(EmulatorError::Exited(status.to_string(), port));
            }
            if probe
                .get(format!("{endpoint}/moto-api/"))
                .send()
                .await
                .is_ok()
            {
                break;
            }
            if started.elapsed() > limit {
                return Err(EmulatorError::Timeout(endpoint, limit));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Emulator { child, endpoint })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The emulator at `AWS_ENDPOINT_URL` if set, else one started here (returned, so the caller
/// keeps it running and stops it), with its endpoint.
pub async fn from_env_or_start() -> Result<(Option<Emulator>, String), EmulatorError> {
    match std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|v| !v.is_empty())
    {
        Some(url) => Ok((None, url)),
        None => {
            let e = Emulator::start(None).await?;
            let url = e.endpoint().to_string();
            Ok((Some(e), url))
        }
    }
}
