//! `chronicle redrive enrich`: the enrich stream's DLQ holds Lambda's OnFailure records, which
//! name a stream batch (shard and sequence numbers), not the PRs. The CLI reads those records back
//! from the table's stream (`GetShardIterator` at the batch's first sequence number, `GetRecords`
//! to its last), enriches each PR they name with the enrich stage's own code, puts a PR that was
//! meanwhile summarized without enrichment back to be summarized (its entries are rewritten in
//! place, never appended), and deletes the message once every PR in it is done.
//!
//! A batch whose records the stream no longer holds (its retention is 24 hours) cannot be
//! named: the message stays, reported with why.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use serde::Serialize;
use stages::domain::RepoName;
use stages::enrich::{EnrichHandler, RecordOutcome};
use stages::store::{attr, string, PrStore};

use super::OpsTarget;
use crate::backfill::{EXIT_FAILED, EXIT_USAGE};
use crate::progress::Bar;

/// The stream batch an OnFailure record names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchInfo {
    pub stream_arn: String,
    pub shard_id: String,
    pub start: String,
    pub end: String,
}

/// Reads Lambda's OnFailure record for a DynamoDB stream (`DDBStreamBatchInfo`).
pub fn batch_info(body: &str) -> Result<BatchInfo, String> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let info = v
        .get("DDBStreamBatchInfo")
        .ok_or("not a DynamoDB stream OnFailure record (no DDBStreamBatchInfo)")?;
    let field = |name: &str| {
        info.get(name)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or(format!("DDBStreamBatchInfo.{name} is missing"))
    };
    Ok(BatchInfo {
        stream_arn: field("streamArn")?,
        shard_id: field("shardId")?,
        start: field("startSequenceNumber")?,
        end: field("endSequenceNumber")?,
    })
}

/// Stream sequence numbers are decimal strings of varying length: compared as numbers.
fn sequence_after(a: &str, b: &str) -> bool {
    (a.len(), a) > (b.len(), b)
}

/// The PR keys of the batch's records, in stream order, each once; with each, its MODIFY
/// records (edits), in Lambda's shape, for the edits the failed batch did not pass on.
pub async fn batch_keys(
    streams: &aws_sdk_dynamodbstreams::Client,
    info: &BatchInfo,
) -> Result<Vec<BatchPr>, String> {
    let gone = |e: String| {
        format!(
            "the stream no longer holds this batch ({e}); stream records are kept 24 hours. Its \
             PRs were stored and summarized without enrichment"
        )
    };
    let mut iterator = streams
        .get_shard_iterator()
        .stream_arn(&info.stream_arn)
        .shard_id(&info.shard_id)
        .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
        .sequence_number(&info.start)
        .send()
        .await
        .map_err(|e| gone(stages::aws::error_message(&e)))?
        .shard_iterator;
    let mut keys: Vec<BatchPr> = Vec::new();
    let mut index: std::collections::HashMap<(String, u64), usize> = Default::default();
    // The batch is read whole only once a record at or past its last sequence number is seen;
    // a stream may answer empty pages before that. Bounded: a batch is at most 10,000 records.
    let mut reached_end = false;
    for _ in 0..200 {
        let Some(it) = iterator.take() else { break };
        let out = streams
            .get_records()
            .shard_iterator(it)
            .limit(1000)
            .send()
            .await
            .map_err(|e| gone(stages::aws::error_message(&e)))?;
        for record in out.records() {
            let Some(change) = record.dynamodb() else {
                continue;
            };
            let sequence = change.sequence_number().unwrap_or_default();
            if sequence_after(sequence, &info.end) {
                reached_end = true;
                break;
            }
            let key = change.keys();
            let repo = key
                .and_then(|k| k.get(attr::REPO))
                .and_then(|v| v.as_s().ok())
                .and_then(|s| RepoName::parse(s).ok());
            let number = key
                .and_then(|k| k.get(attr::PR_NUMBER))
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse::<u64>().ok());
            if let (Some(repo), Some(number)) = (repo, number) {
                let at = *index
                    .entry((repo.as_str().to_string(), number))
                    .or_insert_with(|| {
                        keys.push(BatchPr {
                            repo,
                            number,
                            edits: Vec::new(),
                        });
                        keys.len() - 1
                    });
                if record.event_name().map(|n| n.as_str()) == Some("MODIFY") {
                    keys[at].edits.push(crate::stream_record::to_lambda_record(
                        record,
                        &info.stream_arn,
                        "",
                    ));
                }
            }
            if sequence == info.end {
                reached_end = true;
                break;
            }
        }
        if reached_end {
            break;
        }
        iterator = out.next_shard_iterator;
    }
    if !reached_end {
        return Err(if keys.is_empty() {
            gone("no records in its range".into())
        } else {
            format!(
                "the stream did not give the batch up to its last record ({}): left for a later run",
                info.end
            )
        });
    }
    Ok(keys)
}

/// A PR a failed stream batch names, and its edits (MODIFY records) in the batch.
#[derive(Debug, Clone)]
pub struct BatchPr {
    pub repo: RepoName,
    pub number: u64,
    pub edits: Vec<aws_lambda_events::event::dynamodb::EventRecord>,
}

/// One PR named by the DLQ, and what became of it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PrLine {
    pub repo: String,
    pub number: u64,
    pub outcome: String,
}

/// A message left in the DLQ, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LeftMessage {
    pub message_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EnrichRedriveReport {
    pub queue: String,
    /// Messages read from the DLQ.
    pub messages: u64,
    /// Messages deleted: every PR they name is done.
    pub deleted: u64,
    pub prs: Vec<PrLine>,
    pub left: Vec<LeftMessage>,
    pub dry_run: bool,
}

/// Messages one run reads at most.
const MAX_MESSAGES: u64 = 10_000;
/// How long a message being worked on stays hidden (renewed before each PR it names).
const VISIBILITY_SECS: i32 = 300;

/// One message of the DLQ, hidden while it is worked on and its visibility extended before each
/// PR: never seen again mid-work.
async fn receive_one(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
) -> Result<aws_sdk_sqs::operation::receive_message::ReceiveMessageOutput, String> {
    sqs.receive_message()
        .queue_url(url)
        .max_number_of_messages(1)
        .visibility_timeout(VISIBILITY_SECS)
        .wait_time_seconds(1)
        .send()
        .await
        .map_err(|e| stages::aws::error_message(&e))
}

/// Makes the messages left visible again at once (best effort: else they reappear after
/// [`VISIBILITY_SECS`]).
async fn show_again(sqs: &aws_sdk_sqs::Client, url: &str, receipts: Vec<String>) {
    for receipt in receipts {
        let _ = sqs
            .change_message_visibility()
            .queue_url(url)
            .receipt_handle(receipt)
            .visibility_timeout(0)
            .send()
            .await;
    }
}

/// Enriches one PR a failed batch named again, and puts back the edits it did not pass on (as
/// the enrich function does), after extending the message's visibility for it: its outcome,
/// and whether it is done.
#[allow(clippy::too_many_arguments)]
async fn redo(
    sqs: &aws_sdk_sqs::Client,
    dlq_url: &str,
    receipt: &str,
    enrich: &EnrichHandler,
    prs: &PrStore,
    (repo, number): (&RepoName, u64),
    edits: &[aws_lambda_events::event::dynamodb::EventRecord],
    id: &str,
) -> Result<(String, bool), (u8, String)> {
    let failed = |e: String| (EXIT_FAILED, e);
    // Enough time for this PR, whatever came before it.
    sqs.change_message_visibility()
        .queue_url(dlq_url)
        .receipt_handle(receipt)
        .visibility_timeout(VISIBILITY_SECS)
        .send()
        .await
        .map_err(|e| failed(stages::aws::error_message(&e)))?;
    let (mut outcome, mut done) = enrich_one(enrich, prs, repo, number, id).await?;
    for edit in edits {
        match stages::edits::requeue_if_edited(prs, repo, number, edit).await {
            Ok(stages::edits::EditOutcome::Requeued) => {
                outcome.push_str("; edited: to be summarized again");
            }
            Ok(_) => {}
            Err(e) => {
                outcome.push_str(&format!("; edit failed: {e}"));
                done = false;
            }
        }
    }
    Ok((outcome, done))
}

/// `redrive enrich`. `enrich` is `None` only for a dry run (no token needed to list).
pub async fn redrive_enrich(
    target: &OpsTarget,
    enrich: Option<&EnrichHandler>,
    dry_run: bool,
) -> Result<EnrichRedriveReport, (u8, String)> {
    let Some(dlq) = target.queues.iter().find(|q| q.role == "enrich-stream-dlq") else {
        return Err((EXIT_USAGE, "this stack has no enrich stream DLQ".into()));
    };
    if enrich.is_none() && !dry_run {
        return Err((
            EXIT_USAGE,
            "no GitHub token: set GITHUB_TOKEN, or deploy the stack with GitHubTokenSecretArn \
             (re-enriching calls GitHub); --dry-run lists the PRs without one"
                .into(),
        ));
    }
    let failed = |e: String| (EXIT_FAILED, e);
    let sqs = aws_sdk_sqs::Client::new(&target.sdk);
    if !dry_run {
        let depth = super::queue_depth(&sqs, &dlq.url).await.map_err(failed)?;
        target.guard.check("redrive enrich", "messages", depth)?;
    }
    let streams = aws_sdk_dynamodbstreams::Client::new(&target.sdk);
    let prs = PrStore::new(
        aws_sdk_dynamodb::Client::new(&target.sdk),
        target.table.clone(),
    );
    let mut report = EnrichRedriveReport {
        queue: dlq.name.clone(),
        dry_run,
        ..Default::default()
    };
    let bar = Bar::new("messages");
    let mut handled: HashSet<String> = HashSet::new();
    let mut to_show_again: Vec<String> = Vec::new();
    while report.messages < MAX_MESSAGES {
        let received = receive_one(&sqs, &dlq.url).await.map_err(failed)?;
        let messages = received.messages.unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        for message in messages {
            let id = message.message_id().unwrap_or_default().to_string();
            let receipt = message.receipt_handle().unwrap_or_default().to_string();
            if !handled.insert(id.clone()) {
                continue;
            }
            report.messages += 1;
            bar.inc();
            let keys = match batch_info(message.body().unwrap_or_default()) {
                Ok(info) => batch_keys(&streams, &info).await,
                Err(e) => Err(e),
            };
            let keys = match keys {
                Ok(keys) => keys,
                Err(reason) => {
                    report.left.push(LeftMessage {
                        message_id: id,
                        reason,
                    });
                    to_show_again.push(receipt);
                    continue;
                }
            };
            let mut done = true;
            for BatchPr {
                repo,
                number,
                edits,
            } in keys
            {
                let outcome = match (dry_run, enrich) {
                    (true, _) | (_, None) => "wouldEnrich".to_string(),
                    (false, Some(enrich)) => {
                        let (outcome, finished) = redo(
                            &sqs,
                            &dlq.url,
                            &receipt,
                            enrich,
                            &prs,
                            (&repo, number),
                            &edits,
                            &id,
                        )
                        .await?;
                        done &= finished;
                        outcome
                    }
                };
                report.prs.push(PrLine {
                    repo: repo.to_string(),
                    number,
                    outcome,
                });
            }
            if dry_run {
                to_show_again.push(receipt);
            } else if done {
                sqs.delete_message()
                    .queue_url(&dlq.url)
                    .receipt_handle(receipt)
                    .send()
                    .await
                    .map_err(|e| failed(stages::aws::error_message(&e)))?;
                report.deleted += 1;
            } else {
                report.left.push(LeftMessage {
                    message_id: id,
                    reason: "a PR it names is not done yet (see its outcome); run again later"
                        .into(),
                });
                to_show_again.push(receipt);
            }
        }
    }
    bar.finish();
    // What stays is visible again at once, for the next run or another tool.
    show_again(&sqs, &dlq.url, to_show_again).await;
    Ok(report)
}

/// Enriches one PR; `true` when nothing is left to do for it.
async fn enrich_one(
    enrich: &EnrichHandler,
    prs: &PrStore,
    repo: &RepoName,
    number: u64,
    message: &str,
) -> Result<(String, bool), (u8, String)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let owner = format!("redrive/{message}/{repo}#{number}");
    let outcome = match enrich
        .enrich(
            repo,
            number,
            deadline,
            &owner,
            stages::enrich::Context::Ready,
        )
        .await
    {
        Ok(outcome) => outcome,
        Err(e) => return Ok((format!("failed: {e}"), false)),
    };
    Ok(match outcome {
        RecordOutcome::Enriched => summarize_again(prs, repo, number, "enriched").await?,
        // Enriched by an earlier run (or the retry): its summary may still predate it.
        RecordOutcome::AlreadyEnriched => {
            summarize_again(prs, repo, number, "alreadyEnriched").await?
        }
        RecordOutcome::Skipped(why) => (format!("skipped: {why}"), true),
        RecordOutcome::Deleted => ("missing".into(), true),
        // Parked: the scheduled retry enriches it after GitHub's reset.
        RecordOutcome::StillParked(until) => (
            format!("parked until {until} (GitHub's rate limit): the scheduled retry enriches it"),
            true,
        ),
        // GitHub's budget is spent: the message stays for a run after the reset.
        RecordOutcome::Deferred(until) => (
            format!("GitHub's rate limit is spent until {until}: run again after it"),
            false,
        ),
        RecordOutcome::Disabled => ("no token".into(), false),
        RecordOutcome::NotAnInsert | RecordOutcome::Edited => ("notAnInsert".into(), true),
    })
}

/// An enriched PR whose summary (or give-up) is older than its enrichment is put back to be
/// summarized (entries rewritten in place). `true` when nothing is left to do.
async fn summarize_again(
    prs: &PrStore,
    repo: &RepoName,
    number: u64,
    enriched: &str,
) -> Result<(String, bool), (u8, String)> {
    let failed = |e: String| (EXIT_FAILED, e);
    let Some(row) = prs
        .get(repo, number)
        .await
        .map_err(|e| failed(e.to_string()))?
    else {
        return Ok(("missing".into(), true));
    };
    let enriched_at = string(&row, attr::ENRICHED_AT).unwrap_or_default();
    let done_at = string(&row, attr::SUMMARIZED_AT).or(string(&row, attr::FAILED_AT));
    // Summarized before (it has modules), pending again: the enrichment's own write put it back.
    if done_at.is_none() && row.contains_key(attr::MODULES) && row.contains_key(attr::PENDING_SHARD)
    {
        return Ok((format!("{enriched}; to be summarized again"), true));
    }
    // RFC 3339 in UTC with milliseconds: ordered as text.
    if done_at.is_none_or(|at| at >= enriched_at) {
        return Ok((enriched.to_string(), true));
    }
    Ok(
        match prs
            .reprocess(repo, number, false, time::OffsetDateTime::now_utc())
            .await
            .map_err(|e| failed(e.to_string()))?
        {
            stages::store::Reprocessed::Pending => {
                (format!("{enriched}; to be summarized again"), true)
            }
            // A worker holds it, maybe summarizing the unenriched row: asked again next run.
            stages::store::Reprocessed::Busy => (
                format!("{enriched}; a worker holds it: run again later"),
                false,
            ),
            stages::store::Reprocessed::Missing => ("missing".into(), true),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onfailure_records_are_read_and_bad_ones_explained() {
        let body = r#"{"requestContext":{"condition":"RetryAttemptsExhausted"},"version":"1.0",
          "DDBStreamBatchInfo":{"shardId":"shardId-1","startSequenceNumber":"900",
          "endSequenceNumber":"1100","streamArn":"arn:aws:dynamodb:us-east-1:1:table/t/stream/x"}}"#;
        let info = batch_info(body).unwrap();
        assert_eq!((info.start.as_str(), info.end.as_str()), ("900", "1100"));
        assert!(batch_info("{}").unwrap_err().contains("DDBStreamBatchInfo"));
        assert!(batch_info("nope").unwrap_err().contains("not JSON"));
        assert!(sequence_after("1100", "900"));
        assert!(!sequence_after("900", "1100"));
        assert!(!sequence_after("1100", "1100"));
    }
}
