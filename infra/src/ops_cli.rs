//! `chronicle status` and `chronicle failed`: the operator's view of a deployed stack
//! (`--stack NAME`: names from its CloudFormation outputs, the standard AWS profile and region)
//! or of the local stack (`AWS_ENDPOINT_URL`). Tables by default, `--json` for scripts. Exit
//! codes: 0 ok, 1 something needs attention (`status`) or failed, 2 bad usage.

use aws_config::SdkConfig;
use shared::config::TableConfig;
use shared::domain::RepoName;
use shared::status::{QueueRef, StatusReport, StatusSources};
use shared::store::{CheckpointStore, FailedRow, PageStore, PrStore};

use crate::backfill_cli::{UsageError, EXIT_FAILED, EXIT_USAGE};
use crate::stack::Stack;

/// What the operator subcommands read from.
pub struct OpsTarget {
    pub sdk: SdkConfig,
    pub table: TableConfig,
    pub pages_table: String,
    pub queues: Vec<QueueRef>,
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
            let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let stack = Stack::load(&sdk, name).await?;
            let table = TableConfig {
                table_name: stack.output("PrTableName")?.to_string(),
                pending_shards: stack
                    .parameter("PendingShards")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(4),
            };
            let mut queues = Vec::new();
            for (output, dead_letter) in [
                ("SummarizeQueueUrl", false),
                ("SummarizeDlqUrl", true),
                ("EnrichStreamDlqUrl", true),
                ("SweeperScheduleDlqUrl", true),
            ] {
                let url = stack.output(output)?.to_string();
                queues.push(QueueRef {
                    name: queue_name(&url),
                    url,
                    dead_letter,
                });
            }
            Ok(OpsTarget {
                sdk,
                table,
                pages_table: stack.output("PagesTableName")?.to_string(),
                queues,
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
            let sdk = crate::emulator::sdk_config(&endpoint).await;
            let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
            let table_name = env(shared::config::TABLE_NAME)
                .unwrap_or_else(|| crate::dev::DEFAULT_TABLE.to_string());
            let pages_table =
                env(shared::config::PAGES_TABLE).unwrap_or_else(|| format!("{table_name}-pages"));
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
                            name,
                            url,
                            dead_letter,
                        });
                    }
                }
            }
            Ok(OpsTarget {
                sdk,
                table: TableConfig {
                    table_name,
                    pending_shards: env("PENDING_SHARDS")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(4),
                },
                pages_table,
                queues,
            })
        }
    }
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
    let report = shared::status::gather(
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
    let code = if report.attention.is_empty() { 0 } else { 1 };
    Ok((report, code))
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
            (Some(reason), Some(error)) if reason != error => format!("{reason} / {error}"),
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
    let target = match target(stack).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chronicle status: {e}");
            return EXIT_USAGE;
        }
    };
    match status(&target, repo).await {
        Ok((report, code)) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
            } else {
                print!("{}", shared::status::render(&report));
            }
            code
        }
        Err((code, message)) => {
            eprintln!("chronicle status: {message}");
            code
        }
    }
}

/// The CLI's `failed`: prints, and returns the exit code.
pub async fn run_failed(stack: Option<&str>, repo: Option<&str>, json: bool) -> u8 {
    let target = match target(stack).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chronicle failed: {e}");
            return EXIT_USAGE;
        }
    };
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
