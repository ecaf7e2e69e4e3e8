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
    /// Whether a bulk change needs `--yes` (a deployed stack) and whether it was given.
    pub guard: crate::confirm::Guard,
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
            Ok(OpsTarget {
                sdk,
                table,
                pages_table,
                queues,
                guard: crate::confirm::Guard {
                    stack: Some(name.to_string()),
                    yes: false,
                },
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
            let (table, pages_table) = crate::dev::local_tables();
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
            })
        }
    }
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

/// One row `reprocess` names or found.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReprocessLine {
    pub repo: String,
    pub number: u64,
    /// `pending` (done), `busy` (a worker holds it), or `wouldReprocess` (`--dry-run`).
    pub outcome: String,
}

/// `OWNER/REPO#N`.
pub fn parse_pr(arg: &str) -> Result<(RepoName, u64), UsageError> {
    let bad = || UsageError::Bad(format!("{arg:?} is not OWNER/REPO#NUMBER"));
    let (repo, number) = arg.rsplit_once('#').ok_or_else(bad)?;
    let number: u64 = number.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?;
    let repo = RepoName::parse(repo).map_err(|_| bad())?;
    Ok((repo, number))
}

/// `reprocess`: the named PRs, or the given-up ones (`failed`, of `repo`, given up at or after
/// `since`). Every named PR is checked first: a malformed or unknown one is a usage error and
/// nothing is changed.
pub async fn reprocess(
    target: &OpsTarget,
    prs_named: &[String],
    failed: bool,
    repo: Option<&str>,
    since: Option<&str>,
    new_summary: bool,
    dry_run: bool,
) -> Result<Vec<ReprocessLine>, (u8, String)> {
    let usage = |e: UsageError| (EXIT_USAGE, e.to_string());
    if failed != prs_named.is_empty() {
        return Err((
            EXIT_USAGE,
            "name the PRs (OWNER/REPO#N …) or pass --failed, not both and not neither".into(),
        ));
    }
    if !failed && (repo.is_some() || since.is_some()) {
        return Err((
            EXIT_USAGE,
            "--repo and --since select given-up rows: use them with --failed".into(),
        ));
    }
    let since = since
        .map(|s| crate::backfill_cli::parse_date(s, false))
        .transpose()
        .map_err(usage)?;
    let repo = repo_arg(repo).map_err(usage)?;
    let (prs, _, _) = target.stores();
    let mut chosen: Vec<(RepoName, u64)> = Vec::new();
    if failed {
        for row in prs
            .failed_rows(repo.as_ref().map(RepoName::as_str))
            .await
            .map_err(|e| (EXIT_FAILED, e.to_string()))?
        {
            let recent = since.is_none_or(|s| {
                shared::domain::parse_rfc3339(&row.failed_at).is_some_and(|t| t >= s)
            });
            if recent {
                let name = RepoName::parse(&row.repo).map_err(|e| (EXIT_FAILED, e.to_string()))?;
                chosen.push((name, row.number));
            }
        }
    } else {
        for arg in prs_named {
            chosen.push(parse_pr(arg).map_err(usage)?);
        }
        for (repo, number) in &chosen {
            if prs
                .get(repo, *number)
                .await
                .map_err(|e| (EXIT_FAILED, e.to_string()))?
                .is_none()
            {
                return Err((
                    EXIT_USAGE,
                    format!("{repo}#{number} is not in the table (nothing was changed)"),
                ));
            }
        }
    }
    if !dry_run {
        target
            .guard
            .check("reprocess", "PRs", chosen.len() as u64)?;
    }
    let mut lines = Vec::with_capacity(chosen.len());
    let bar = crate::progress::Bar::with_len(chosen.len() as u64, "PRs");
    for (repo, number) in chosen {
        bar.inc();
        let outcome = if dry_run {
            "wouldReprocess".to_string()
        } else {
            match prs
                .reprocess(&repo, number, new_summary, time::OffsetDateTime::now_utc())
                .await
                .map_err(|e| (EXIT_FAILED, e.to_string()))?
            {
                shared::store::Reprocessed::Pending => "pending".into(),
                shared::store::Reprocessed::Busy => "busy".into(),
                shared::store::Reprocessed::Missing => "missing".into(),
            }
        };
        lines.push(ReprocessLine {
            repo: repo.to_string(),
            number,
            outcome,
        });
    }
    bar.finish();
    Ok(lines)
}

/// `rebuild`: marks a repository's module pages (or one of them) for a full rebuild; the page
/// builder does the rest. Returns the pages marked (or that would be, with `dry_run`).
pub async fn rebuild(
    target: &OpsTarget,
    repo: &str,
    module: Option<&str>,
    dry_run: bool,
) -> Result<Vec<String>, (u8, String)> {
    let repo = repo_arg(Some(repo))
        .map_err(|e| (EXIT_USAGE, e.to_string()))?
        .expect("a repository was given");
    let (_, pages, _) = target.stores();
    let items = pages
        .repo_pages(repo.as_str())
        .await
        .map_err(|e| (EXIT_FAILED, e.to_string()))?;
    let modules: Vec<String> = items
        .into_iter()
        .map(|p| p.module)
        .filter(|m| !m.starts_with('#') && module.is_none_or(|wanted| wanted == m))
        .collect();
    if modules.is_empty() {
        return Err((
            EXIT_USAGE,
            match module {
                Some(m) => format!("{repo} has no page for module {m:?} (nothing was changed)"),
                None => format!("{repo} has no pages (nothing was changed)"),
            },
        ));
    }
    if !dry_run {
        target
            .guard
            .check("rebuild", "module pages", modules.len() as u64)?;
        let now = time::OffsetDateTime::now_utc();
        for m in &modules {
            pages
                .mark_full_rebuild(repo.as_str(), m, now)
                .await
                .map_err(|e| (EXIT_FAILED, e.to_string()))?;
        }
    }
    Ok(modules)
}

/// What `chronicle reprocess` was asked.
#[derive(Debug, Clone, Default)]
pub struct ReprocessArgs {
    pub prs: Vec<String>,
    pub failed: bool,
    pub repo: Option<String>,
    pub since: Option<String>,
    pub new_summary: bool,
    pub dry_run: bool,
    /// Go ahead on a deployed stack without asking.
    pub yes: bool,
}

/// The CLI's `reprocess`: prints, and returns the exit code (1 if a row was busy).
pub async fn run_reprocess(stack: Option<&str>, args: &ReprocessArgs, json: bool) -> u8 {
    let target = match resolve_confirmed("reprocess", stack, args.yes).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    let result = reprocess(
        &target,
        &args.prs,
        args.failed,
        args.repo.as_deref(),
        args.since.as_deref(),
        args.new_summary,
        args.dry_run,
    )
    .await;
    match result {
        Ok(lines) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&lines).unwrap_or_default()
                );
            } else if lines.is_empty() {
                println!("nothing to reprocess");
            } else {
                for l in &lines {
                    println!("{}#{}  {}", l.repo, l.number, l.outcome);
                }
            }
            u8::from(lines.iter().any(|l| l.outcome == "busy"))
        }
        Err((code, message)) => {
            eprintln!("chronicle reprocess: {message}");
            code
        }
    }
}

/// The CLI's `rebuild`: prints, and returns the exit code.
pub async fn run_rebuild(
    stack: Option<&str>,
    repo: &str,
    module: Option<&str>,
    dry_run: bool,
    yes: bool,
    json: bool,
) -> u8 {
    let target = match resolve_confirmed("rebuild", stack, yes).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    match rebuild(&target, repo, module, dry_run).await {
        Ok(modules) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&modules).unwrap_or_default()
                );
            } else {
                let verb = if dry_run {
                    "would rebuild"
                } else {
                    "marked for rebuild"
                };
                for m in &modules {
                    println!("{repo} · {m}  {verb}");
                }
            }
            0
        }
        Err((code, message)) => {
            eprintln!("chronicle rebuild: {message}");
            code
        }
    }
}

/// Which DLQ `redrive` empties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RedriveQueue {
    /// The summarize DLQ, back to the summarize queue: given-up rows are summarized again.
    Summarize,
    /// The sweeper's and page builder's schedule DLQ: records of runs that were dropped or
    /// failed. There is nothing to run again (the next scheduled run does the work); they are
    /// acknowledged (deleted) so the alarm clears.
    Schedule,
    /// The enrich stream's DLQ: the PRs its records name are enriched again (GitHub token
    /// needed), and summarized again if they were summarized without it.
    Enrich,
}

/// What `redrive` did (or, with `--dry-run`, would do).
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RedriveReport {
    pub queue: String,
    /// Messages moved (or deleted, for the schedule DLQ); with `--dry-run`, in the DLQ now.
    pub messages: u64,
    /// A deployed stack's `StartMessageMoveTask` handle.
    pub task: Option<String>,
    pub dry_run: bool,
}

/// Messages the CLI moves itself at most per second (the emulator has no move task).
const MOVE_PER_SECOND: u64 = 100;
/// Messages one CLI move handles at most per run.
const MOVE_MAX: u64 = 100_000;

fn queue_with<'t>(target: &'t OpsTarget, role: &str) -> Option<&'t QueueRef> {
    target.queues.iter().find(|q| q.role == role)
}

/// A queue's approximate number of messages: visible, in flight and delayed (a move task
/// takes them all).
pub async fn queue_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<u64, String> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let kinds = [
        A::ApproximateNumberOfMessages,
        A::ApproximateNumberOfMessagesNotVisible,
        A::ApproximateNumberOfMessagesDelayed,
    ];
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .set_attribute_names(Some(kinds.to_vec()))
        .send()
        .await
        .map_err(|e| shared::aws::error_message(&e))?;
    Ok(kinds
        .iter()
        .filter_map(|k| out.attributes().and_then(|a| a.get(k)))
        .filter_map(|v| v.parse::<u64>().ok())
        .sum())
}

/// `redrive`. On a deployed stack the summarize DLQ is moved by SQS itself
/// (`StartMessageMoveTask`, which keeps bodies and attributes); on the local stack, whose
/// emulator lacks it, the CLI does the same: receive, send to the source with the same body and
/// attributes, delete what was sent, at most [`MOVE_PER_SECOND`] a second.
pub async fn redrive(
    target: &OpsTarget,
    which: RedriveQueue,
    deployed: bool,
    dry_run: bool,
) -> Result<RedriveReport, (u8, String)> {
    let sqs = aws_sdk_sqs::Client::new(&target.sdk);
    let failed = |e: String| (EXIT_FAILED, e);
    let (dlq, source) = match which {
        RedriveQueue::Summarize => (
            queue_with(target, "summarize-dlq"),
            queue_with(target, "summarize"),
        ),
        RedriveQueue::Schedule => (queue_with(target, "schedule-dlq"), None),
        RedriveQueue::Enrich => {
            return Err((
                EXIT_USAGE,
                "the enrich DLQ is redriven by crate::enrich_redrive (it re-enriches)".into(),
            ))
        }
    };
    let Some(dlq) = dlq else {
        return Err((
            EXIT_USAGE,
            format!("this stack has no {which:?} DLQ (the local stack has no schedule DLQ)"),
        ));
    };
    let depth = queue_depth(&sqs, &dlq.url).await.map_err(failed)?;
    let mut report = RedriveReport {
        queue: dlq.name.clone(),
        messages: depth,
        task: None,
        dry_run,
    };
    if dry_run || depth == 0 {
        return Ok(report);
    }
    target.guard.check("redrive", "messages", depth)?;
    match (which, source) {
        (RedriveQueue::Summarize, Some(source)) if deployed => {
            let arn = |url: String| {
                let sqs = sqs.clone();
                async move {
                    sqs.get_queue_attributes()
                        .queue_url(url)
                        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                        .send()
                        .await
                        .map_err(|e| shared::aws::error_message(&e))?
                        .attributes()
                        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
                        .cloned()
                        .ok_or_else(|| "the queue has no ARN".to_string())
                }
            };
            let task = sqs
                .start_message_move_task()
                .source_arn(arn(dlq.url.clone()).await.map_err(failed)?)
                .destination_arn(arn(source.url.clone()).await.map_err(failed)?)
                .max_number_of_messages_per_second(MOVE_PER_SECOND as i32)
                .send()
                .await
                .map_err(|e| failed(shared::aws::error_message(&e)))?;
            report.task = task.task_handle;
        }
        (RedriveQueue::Summarize, Some(source)) => {
            report.messages = move_messages(&sqs, &dlq.url, Some(&source.url)).await?;
        }
        (RedriveQueue::Summarize, None) => {
            return Err((EXIT_USAGE, "no summarize queue to redrive to".into()));
        }
        (RedriveQueue::Schedule, _) => {
            report.messages = move_messages(&sqs, &dlq.url, None).await?;
        }
        (RedriveQueue::Enrich, _) => {}
    }
    Ok(report)
}

/// Receives everything in `from` and sends it to `to` (body and message attributes kept), or
/// only deletes it (`to` = `None`); a message is deleted only once it was sent.
async fn move_messages(
    sqs: &aws_sdk_sqs::Client,
    from: &str,
    to: Option<&str>,
) -> Result<u64, (u8, String)> {
    use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry};
    let failed = |e: String| (EXIT_FAILED, e);
    let mut moved = 0u64;
    let started = std::time::Instant::now();
    let bar = crate::progress::Bar::new("messages");
    while moved < MOVE_MAX {
        let received = sqs
            .receive_message()
            .queue_url(from)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .visibility_timeout(60)
            // Long polling: a short poll of real SQS may answer empty while messages remain.
            .wait_time_seconds(1)
            .send()
            .await
            .map_err(|e| failed(shared::aws::error_message(&e)))?;
        let messages = received.messages.unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        let mut sent: Vec<&aws_sdk_sqs::types::Message> = Vec::new();
        match to {
            Some(to) => {
                let entries: Vec<SendMessageBatchRequestEntry> = messages
                    .iter()
                    .enumerate()
                    .filter_map(|(i, m)| {
                        SendMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .message_body(m.body().unwrap_or_default())
                            .set_message_attributes(m.message_attributes().cloned())
                            .build()
                            .ok()
                    })
                    .collect();
                let out = sqs
                    .send_message_batch()
                    .queue_url(to)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(|e| failed(shared::aws::error_message(&e)))?;
                for ok in out.successful() {
                    if let Some(m) = ok.id().parse::<usize>().ok().and_then(|i| messages.get(i)) {
                        sent.push(m);
                    }
                }
                if let Some(first) = out.failed().first() {
                    // Left in the DLQ (visible again after the timeout); reported.
                    eprintln!(
                        "redrive: {} messages not sent ({}); they stay in the DLQ",
                        out.failed().len(),
                        first.message().unwrap_or("no reason given")
                    );
                }
            }
            None => sent.extend(messages.iter()),
        }
        if sent.is_empty() {
            break;
        }
        let deletes: Vec<DeleteMessageBatchRequestEntry> = sent
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .ok()
            })
            .collect();
        let deleted = sqs
            .delete_message_batch()
            .queue_url(from)
            .set_entries(Some(deletes))
            .send()
            .await
            .map_err(|e| {
                failed(format!(
                    "{} (after {} messages handled and {} sent but not yet deleted: those may \
                     arrive twice, which the summarize worker absorbs)",
                    shared::aws::error_message(&e),
                    moved,
                    sent.len()
                ))
            })?;
        if !deleted.failed().is_empty() {
            eprintln!(
                "redrive: {} messages sent but not deleted from the DLQ; they will be seen \
                 again (a second copy is absorbed by the summarize worker)",
                deleted.failed().len()
            );
        }
        moved += deleted.successful().len() as u64;
        bar.inc_by(deleted.successful().len() as u64);
        // A bounded rate: at most MOVE_PER_SECOND on average.
        let due = std::time::Duration::from_millis(moved * 1000 / MOVE_PER_SECOND);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
    bar.finish();
    if moved >= MOVE_MAX {
        eprintln!("redrive: stopped after {MOVE_MAX} messages; run it again for the rest");
    }
    Ok(moved)
}

/// The CLI's `redrive`: prints, and returns the exit code.
pub async fn run_redrive(
    stack: Option<&str>,
    which: RedriveQueue,
    dry_run: bool,
    yes: bool,
    json: bool,
) -> u8 {
    let target = match resolve_confirmed("redrive", stack, yes).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    if which == RedriveQueue::Enrich {
        return run_redrive_enrich(&target, stack, dry_run, json).await;
    }
    match redrive(&target, which, stack.is_some(), dry_run).await {
        Ok(report) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
            } else if dry_run {
                println!(
                    "{}: {} messages would be moved",
                    report.queue, report.messages
                );
            } else if let Some(task) = &report.task {
                println!(
                    "{}: move task started for about {} messages ({task})",
                    report.queue, report.messages
                );
            } else {
                println!("{}: {} messages handled", report.queue, report.messages);
            }
            0
        }
        Err((code, message)) => {
            eprintln!("chronicle redrive: {message}");
            code
        }
    }
}

/// `redeliver`: one run of the redelivery stage from the CLI, against a deployed stack (its
/// tables, its GitHub URL and token secret unless `GITHUB_TOKEN` is set) or the local stack.
/// Exit 0 when nothing needed attention, 1 when a hook could not be read or GitHub refused a
/// redelivery, 2 for bad usage (no stack, no token).
pub async fn run_redeliver(stack: Option<&str>, dry_run: bool, json: bool) -> u8 {
    let target = match crate::backfill_cli::redelivery_target(stack).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chronicle redeliver: {e}");
            return target_error_code(&e);
        }
    };
    let timeout = std::time::Duration::from_secs(10);
    let github = match &target.token {
        Some(token) => {
            match shared::github::GitHubClient::new(&target.api_url, token, timeout, 3) {
                Ok(g) => Some(g),
                Err(e) => {
                    eprintln!("chronicle redeliver: {e}");
                    return EXIT_FAILED;
                }
            }
        }
        None => None,
    };
    // A GitHub App's hook: GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY (or …_ARN, …_PARAM).
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let app_key = shared::secret::SecretSource::from_vars(
        env(shared::config::GITHUB_APP_PRIVATE_KEY),
        env(shared::config::GITHUB_APP_PRIVATE_KEY_ARN),
        env(shared::config::GITHUB_APP_PRIVATE_KEY_PARAM),
    );
    let app = match (
        env(shared::config::GITHUB_APP_ID),
        app_key.resolve(&target.sdk).await,
    ) {
        (Some(id), Ok(Some(key))) => match shared::github::app::AppCredentials::new(&id, &key) {
            Ok(credentials) => Some(shared::redeliver::AppAccess {
                credentials,
                api_url: target.api_url.clone(),
                timeout,
                max_retries: 3,
            }),
            Err(e) => {
                eprintln!("chronicle redeliver: {e}");
                return EXIT_USAGE;
            }
        },
        (_, Err(e)) => {
            eprintln!("chronicle redeliver: {e}");
            return EXIT_FAILED;
        }
        _ => None,
    };
    if github.is_none() && app.is_none() {
        eprintln!(
            "chronicle redeliver: {}",
            shared::redeliver::RedeliverError::NoToken
        );
        return EXIT_USAGE;
    }
    let dynamo = aws_sdk_dynamodb::Client::new(&target.sdk);
    let mut redeliverer = shared::redeliver::Redeliverer::new(
        github,
        shared::store::HookStore::new(dynamo.clone(), &target.pages_table),
        PrStore::new(dynamo, target.table.clone()),
        REDELIVER_MAX,
    );
    if let Some(app) = app {
        redeliverer = redeliverer.with_app(app);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let report = match redeliverer
        .run(time::OffsetDateTime::now_utc(), deadline, dry_run)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("chronicle redeliver: {e}");
            return EXIT_FAILED;
        }
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", render_redeliver(&report));
    }
    if report.problems.is_empty() {
        0
    } else {
        EXIT_FAILED
    }
}

/// Redeliveries one CLI run asks for at most.
const REDELIVER_MAX: usize = 500;

pub fn render_redeliver(report: &shared::redeliver::RedeliverReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let verb = if report.dry_run {
        "would redeliver"
    } else {
        "redelivered"
    };
    let _ = writeln!(
        out,
        "{} hooks, {} delivery attempts listed, {} failed pull_request deliveries in GitHub's 3-day window",
        report.hooks, report.listed, report.failed
    );
    let _ = writeln!(
        out,
        "  {} already stored, {} asked before, {} not merged; {verb} {}",
        report.already_stored,
        report.already_asked,
        report.not_merged,
        report.redelivered.len()
    );
    for r in &report.redelivered {
        let _ = writeln!(
            out,
            "  {verb} {}#{} (delivery {}, {}, {})",
            r.repo, r.pr, r.guid, r.delivered_at, r.hook
        );
    }
    for p in &report.problems {
        let _ = writeln!(out, "  problem: {}: {}", p.hook, p.message);
    }
    if let Some(why) = &report.stopped {
        let _ = writeln!(out, "  stopped early: {why}");
    }
    out
}

/// `redrive enrich`: the token and API URL as `backfill` finds them (GITHUB_TOKEN, or the
/// stack's secret); a dry run needs none.
async fn run_redrive_enrich(
    target: &OpsTarget,
    stack: Option<&str>,
    dry_run: bool,
    json: bool,
) -> u8 {
    let github = match crate::backfill_cli::target(stack).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chronicle redrive enrich: {e}");
            return target_error_code(&e);
        }
    };
    let handler = match &github.token {
        Some(token) => {
            let apis = match shared::enrich::GitHubApis::new(
                &github.api_url,
                token,
                std::time::Duration::from_secs(10),
                3,
            ) {
                Ok(apis) => apis.with_issue_scope(github.issue_scope),
                Err(e) => {
                    eprintln!("chronicle redrive enrich: {e}");
                    return EXIT_FAILED;
                }
            };
            let dynamo = aws_sdk_dynamodb::Client::new(&target.sdk);
            Some(
                shared::enrich::EnrichHandler::new(
                    PrStore::new(dynamo.clone(), target.table.clone()),
                    Some(apis),
                    1,
                    github.max_paths,
                )
                .with_contexts(shared::store::ContextStore::new(
                    dynamo,
                    &target.pages_table,
                )),
            )
        }
        None => None,
    };
    match crate::enrich_redrive::redrive_enrich(target, handler.as_ref(), dry_run).await {
        Ok(report) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
            } else {
                println!(
                    "{}: {} messages read, {} deleted",
                    report.queue, report.messages, report.deleted
                );
                for line in &report.prs {
                    println!("  {}#{}: {}", line.repo, line.number, line.outcome);
                }
                for left in &report.left {
                    println!("  left {}: {}", left.message_id, left.reason);
                }
            }
            if report.left.is_empty() {
                0
            } else {
                EXIT_FAILED
            }
        }
        Err((code, message)) => {
            eprintln!("chronicle redrive enrich: {message}");
            code
        }
    }
}
