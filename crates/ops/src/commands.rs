//! The operator CLI's subcommands on a deployed stack (`--stack NAME`: names from its
//! CloudFormation outputs, the standard AWS profile and region) or the local stack
//! (`AWS_ENDPOINT_URL`): `status` and `failed` here, `reprocess` and `rebuild`, `redrive` and
//! `redeliver` in their modules. Tables by default, `--json` for scripts. Exit codes: 0 ok,
//! 1 something needs attention (`status`) or failed, 2 bad usage.

use aws_config::SdkConfig;
use stages::config::TableConfig;
use stages::domain::RepoName;
use stages::status::{QueueRef, StatusReport, StatusSources};
use stages::store::{CheckpointStore, FailedRow, PageStore, PrStore};

use crate::backfill::{UsageError, EXIT_FAILED, EXIT_USAGE};
use crate::stack::Stack;

/// What the operator subcommands read from.
pub struct OpsTarget {
    pub sdk: SdkConfig,
    pub table: TableConfig,
    pub pages_table: String,
    pub queues: Vec<QueueRef>,
    /// Whether a bulk change needs `--yes` (a deployed stack) and whether it was given.
    pub guard: crate::confirm::Guard,
    /// The GitHub App (API URL, id, private key), when one is configured: `status` shows each
    /// installation's token health.
    pub app: Option<(String, String, stages::secret::Secret)>,
}

impl OpsTarget {
    fn stores(&self) -> (PrStore, PageStore, CheckpointStore) {
        let client = aws_sdk_dynamodb::Client::new(&self.sdk);
        (
            PrStore::new(client.clone(), self.table.clone()),
            PageStore::new(client.clone(), self.pages_table.clone()),
            CheckpointStore::new(client, self.pages_table.clone()),
        )
    }
}

/// The deployed stack `--stack` names, or the local stack at `AWS_ENDPOINT_URL`.
pub async fn target(stack: Option<&str>) -> Result<OpsTarget, UsageError> {
    match stack {
        Some(name) => {
            let sdk = stages::aws::sdk_config().await;
            let stack = Stack::load(&sdk, name).await?;
            let (table, pages_table) = stack.tables()?;
            let mut queues = Vec::new();
            for (output, role, dead_letter) in [
                ("SummarizeQueueUrl", "summarize", false),
                ("SummarizeDlqUrl", "summarize-dlq", true),
                ("EnrichStreamDlqUrl", "enrich-stream-dlq", true),
                ("SweeperScheduleDlqUrl", "schedule-dlq", true),
            ] {
                // A stack deployed from an older template may lack one: left out.
                let Ok(url) = stack.output(output) else {
                    continue;
                };
                queues.push(QueueRef {
                    role: role.to_string(),
                    name: queue_name(url),
                    url: url.to_string(),
                    dead_letter,
                });
            }
            let mut app = app_from_env();
            if let (None, Some(id), Some(arn)) = (
                &app,
                stack
                    .parameter("GitHubAppId")
                    .filter(|v| !v.trim().is_empty()),
                stack
                    .parameter("GitHubAppPrivateKeySecretArn")
                    .filter(|v| !v.trim().is_empty()),
            ) {
                use stages::secret::Resolve;
                let key = stages::secret::SecretSource::SecretsManager(arn.to_string())
                    .resolve(&sdk)
                    .await
                    .map_err(|e| UsageError::Bad(e.to_string()))?;
                let api = stack
                    .parameter("GitHubApiUrl")
                    .filter(|v| !v.trim().is_empty())
                    .unwrap_or(stages::github::DEFAULT_API_URL)
                    .to_string();
                app = key.map(|k| (api, id.to_string(), k));
            }
            Ok(OpsTarget {
                sdk,
                table,
                pages_table,
                queues,
                guard: crate::confirm::Guard {
                    stack: Some(name.to_string()),
                    yes: false,
                },
                app,
            })
        }
        None => {
            let Some(endpoint) = std::env::var("AWS_ENDPOINT_URL")
                .ok()
                .filter(|v| !v.is_empty())
            else {
                return Err(UsageError::Bad(
                    "no stack: pass --stack NAME for a deployed stack, or set AWS_ENDPOINT_URL to the local stack's emulator (`chronicle dev` prints it)".into(),
                ));
            };
            let sdk = crate::stack::local_sdk_config(&endpoint).await;
            let (table, pages_table) = crate::stack::local_tables();
            let table_name = table.table_name.clone();
            // The local stack's queues, named after its table (those it has not created are
            // left out).
            let sqs = aws_sdk_sqs::Client::new(&sdk);
            let mut queues = Vec::new();
            for (suffix, dead_letter) in [
                ("summarize", false),
                ("summarize-dlq", true),
                ("enrich-stream-dlq", true),
            ] {
                let name = format!("{table_name}-{suffix}");
                if let Ok(out) = sqs.get_queue_url().queue_name(&name).send().await {
                    if let Some(url) = out.queue_url {
                        queues.push(QueueRef {
                            role: suffix.to_string(),
                            name,
                            url,
                            dead_letter,
                        });
                    }
                }
            }
            Ok(OpsTarget {
                sdk,
                table,
                pages_table,
                queues,
                guard: crate::confirm::Guard::default(),
                app: app_from_env(),
            })
        }
    }
}

/// The App from `GITHUB_APP_ID` and `GITHUB_APP_PRIVATE_KEY` (and `GITHUB_API_URL`).
fn app_from_env() -> Option<(String, String, stages::secret::Secret)> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let api = env(stages::config::GITHUB_API_URL)
        .unwrap_or_else(|| stages::github::DEFAULT_API_URL.to_string());
    Some((
        api,
        env(stages::config::GITHUB_APP_ID)?,
        stages::secret::Secret::new(env(stages::config::GITHUB_APP_PRIVATE_KEY)?),
    ))
}

/// The exit code of a target error: 2 for what the user typed (no such stack, no endpoint), 1
/// when AWS itself failed (credentials, access, throttling).
pub fn target_error_code(e: &UsageError) -> u8 {
    match e {
        UsageError::Stack(crate::stack::StackError::Aws { .. }) => EXIT_FAILED,
        _ => EXIT_USAGE,
    }
}

/// The target of a CLI subcommand, or the exit code after saying why there is none.
async fn resolve(command: &str, stack: Option<&str>) -> Result<OpsTarget, u8> {
    target(stack).await.map_err(|e| {
        eprintln!("chronicle {command}: {e}");
        target_error_code(&e)
    })
}

/// [`resolve`], with `--yes` noted for the bulk-change guard.
async fn resolve_confirmed(command: &str, stack: Option<&str>, yes: bool) -> Result<OpsTarget, u8> {
    let mut target = resolve(command, stack).await?;
    target.guard.yes = yes;
    Ok(target)
}

/// The last path segment of a queue URL: its name.
fn queue_name(url: &str) -> String {
    url.rsplit('/').next().unwrap_or(url).to_string()
}

fn repo_arg(repo: Option<&str>) -> Result<Option<RepoName>, UsageError> {
    repo.map(|r| {
        RepoName::parse(r)
            .map_err(|e| UsageError::Bad(format!("--repo {r:?} is not OWNER/REPO: {e}")))
    })
    .transpose()
}

/// `status`: the report and its exit code (0 all well, 1 needs attention).
pub async fn status(
    target: &OpsTarget,
    repo: Option<&str>,
) -> Result<(StatusReport, u8), (u8, String)> {
    let repo = repo_arg(repo).map_err(|e| (EXIT_USAGE, e.to_string()))?;
    let (prs, pages, checkpoints) = target.stores();
    let sqs = aws_sdk_sqs::Client::new(&target.sdk);
    let report = stages::status::gather(
        &StatusSources {
            prs: &prs,
            pages: &pages,
            checkpoints: &checkpoints,
            sqs: &sqs,
            queues: &target.queues,
        },
        repo.as_ref(),
        time::OffsetDateTime::now_utc(),
    )
    .await
    .map_err(|e| (EXIT_FAILED, e.to_string()))?;
    let mut report = report;
    if let Some((api, id, key)) = &target.app {
        let credentials = stages::github::app::AppCredentials::new(id, key)
            .map_err(|e| (EXIT_USAGE, e.to_string()))?;
        let app = stages::github::installation::AppClient::new(
            api,
            credentials,
            std::time::Duration::from_secs(15),
        )
        .map_err(|e| (EXIT_FAILED, e.to_string()))?;
        if let Err(e) = stages::status::app_health(&app, &pages, repo.as_ref(), &mut report).await {
            report.attention.push(format!("the GitHub App: {e}"));
        }
    }
    let code = if report.attention.is_empty() { 0 } else { 1 };
    Ok((report, code))
}

/// Rows given up before the failed index existed get its marker (a one-time Scan).
pub async fn index_old_failed(target: &OpsTarget) -> Result<u64, (u8, String)> {
    let (prs, _, _) = target.stores();
    prs.index_old_failed()
        .await
        .map_err(|e| (EXIT_FAILED, e.to_string()))
}

/// `failed`: the given-up rows, newest first.
pub async fn failed(
    target: &OpsTarget,
    repo: Option<&str>,
) -> Result<Vec<FailedRow>, (u8, String)> {
    let repo = repo_arg(repo).map_err(|e| (EXIT_USAGE, e.to_string()))?;
    let (prs, _, _) = target.stores();
    prs.failed_rows(repo.as_ref().map(RepoName::as_str))
        .await
        .map_err(|e| (EXIT_FAILED, e.to_string()))
}

/// The `failed` rows as a terminal table.
pub fn render_failed(rows: &[FailedRow]) -> String {
    use std::fmt::Write as _;
    if rows.is_empty() {
        return "no given-up rows\n".to_string();
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<40} {:<24} {:>8}  reason / last error",
        "PR", "failed at", "attempts"
    );
    for r in rows {
        let why = match (&r.failed_reason, &r.last_error) {
            (Some(reason), Some(error)) if !reason.contains(error.as_str()) => {
                format!("{reason} / {error}")
            }
            (Some(reason), _) => reason.clone(),
            (None, Some(error)) => error.clone(),
            (None, None) => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:<40} {:<24} {:>8}  {}",
            format!("{}#{}", r.repo, r.number),
            r.failed_at,
            r.attempts,
            why.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
    s
}

/// The CLI's `status`: prints, and returns the exit code.
pub async fn run_status(stack: Option<&str>, repo: Option<&str>, json: bool) -> u8 {
    let target = match resolve("status", stack).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    match status(&target, repo).await {
        Ok((report, code)) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
            } else {
                print!("{}", stages::status::render(&report));
            }
            code
        }
        Err((code, message)) => {
            eprintln!("chronicle status: {message}");
            code
        }
    }
}

/// The CLI's `failed`: prints, and returns the exit code. `index_old`: first give rows given
/// up before the failed index existed its marker.
pub async fn run_failed(
    stack: Option<&str>,
    repo: Option<&str>,
    index_old: bool,
    json: bool,
) -> u8 {
    let target = match resolve("failed", stack).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    if index_old {
        match index_old_failed(&target).await {
            Ok(n) => {
                eprintln!("{n} rows given up before the failed index existed now carry its marker")
            }
            Err((code, message)) => {
                eprintln!("chronicle failed: {message}");
                return code;
            }
        }
    }
    match failed(&target, repo).await {
        Ok(rows) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&rows).unwrap_or_default()
                );
            } else {
                print!("{}", render_failed(&rows));
            }
            0
        }
        Err((code, message)) => {
            eprintln!("chronicle failed: {message}");
            code
        }
    }
}

mod enrich;
mod redeliver;
mod redrive;
mod reprocess;

pub use enrich::redrive_enrich;
pub use redeliver::*;
pub use redrive::*;
pub use reprocess::*;
