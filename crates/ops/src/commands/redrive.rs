//! `redrive`: a DLQ's messages back to their queue (or acknowledged), and the enrich DLQ's PRs enriched again.

use super::*;

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
        .map_err(|e| stages::aws::error_message(&e))?;
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
                "the enrich DLQ is redriven by `redrive enrich` (it re-enriches)".into(),
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
                        .map_err(|e| stages::aws::error_message(&e))?
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
                .map_err(|e| failed(stages::aws::error_message(&e)))?;
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
            .map_err(|e| failed(stages::aws::error_message(&e)))?;
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
                    .map_err(|e| failed(stages::aws::error_message(&e)))?;
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
                    stages::aws::error_message(&e),
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

/// `redrive enrich`: the token and API URL as `backfill` finds them (GITHUB_TOKEN, or the
/// stack's secret); a dry run needs none.
async fn run_redrive_enrich(
    target: &OpsTarget,
    stack: Option<&str>,
    dry_run: bool,
    json: bool,
) -> u8 {
    let github = match crate::backfill::target(stack).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chronicle redrive enrich: {e}");
            return target_error_code(&e);
        }
    };
    let handler = match &github.token {
        Some(token) => {
            let apis = match stages::enrich::GitHubApis::new(
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
                stages::enrich::EnrichHandler::new(
                    PrStore::new(dynamo.clone(), target.table.clone()),
                    Some(apis),
                    1,
                    github.max_paths,
                )
                .with_contexts(stages::store::ContextStore::new(
                    dynamo,
                    &target.pages_table,
                )),
            )
        }
        None => None,
    };
    match super::enrich::redrive_enrich(target, handler.as_ref(), dry_run).await {
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
