//! The summarize worker: for each queued key, claim the row (counting the attempt), tag its
//! modules, write its summary and one entry per module, mark those module pages stale, and
//! commit — once in effect. It never publishes: pages are views the page builder rebuilds from
//! the entries, so a Notion or S3 outage never fails a PR row.
//!
//! Order of writes, so that a crash anywhere leaves nothing a retry cannot mend:
//! 1. the claim (lease, `attempts`+1, `generation`+1);
//! 2. the summary and the modules about to get entries, added to `entryModules`;
//! 3. the entries, keyed by PR (a rewrite replaces, never duplicates), conditional on the
//!    generation; entries of modules the PR no longer touches are deleted;
//! 4. the pages of those modules marked stale;
//! 5. the commit (`summarizedAt`, pending marker removed), conditional on the lease.
//!
//! Failures: a claim refused because the row is done is a success; so is one refused by another
//! worker's live lease (a duplicate message: deleted, burning no receive, counting no attempt). Every claim counts an attempt, so crashes,
//! timeouts and panics count too; once `MAX_ATTEMPTS` are used up, the row is given up: its
//! message goes to the DLQ first (with the give-up time as an attribute), then the row gets
//! `failedAt`. Redriving that message revives the row ([`PrStore::revive_failed`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::future::try_join_all;
use time::OffsetDateTime;

use crate::config::SummarizeConfig;
use crate::domain::message::SummarizeMessage;
use crate::domain::{order_key, rfc3339_millis, ModuleName, RepoName};
use crate::store::{
    Commit, EntryStore, Item, PageStore, PrRow, PrStore, RowError, StoreError, SummaryClaim,
};
use crate::summary::{ExtractiveSummarizer, Summarizer, SummaryInput, SummarySource};
use crate::tagging::{self, ModulesConfig, TaggingError};

/// Messages of one batch worked on at once.
const CONCURRENCY: usize = 4;
/// A row is not claimed with less than this left of the invocation: the claim would count an
/// attempt that the end of the invocation could cut short (see [`SummarizeHandler::with_claim_margin`]).
pub const CLAIM_MARGIN: Duration = Duration::from_secs(10);
/// Entry and page writes of one PR in flight at once.
const WRITE_CONCURRENCY: usize = 8;
/// Times the entries of one claim are written: again when the row's inputs changed meanwhile.
const REWRITES: usize = 3;
/// The message attribute a given-up row's DLQ message carries: the row's `failedAt`. When the
/// message is redriven, the worker revives the row given up at that time.
pub const GIVEN_UP_AT_ATTRIBUTE: &str = "chronicleGivenUpAt";
/// The message attribute with the reason, for whoever reads the DLQ.
pub const FAILED_REASON_ATTRIBUTE: &str = "failedReason";

#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    #[error("message {id}: {message}")]
    BadMessage { id: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Row(#[from] RowError),
    #[error("the lease expired before the commit; the effect was abandoned")]
    LeaseLost,
    #[error("the row's inputs changed while its entries were written, {0} times in a row")]
    InputsChanging(usize),
    #[error("the row was given up but its message could not be sent to the DLQ: {0}")]
    DeadLetter(String),
}

impl SummarizeError {
    /// Retrying cannot help: the row is given up at once.
    fn is_permanent(&self) -> bool {
        matches!(self, SummarizeError::Row(_))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SummarizeInitError {
    #[error(transparent)]
    Tagging(#[from] TaggingError),
}

/// What happened to one message (all successes for SQS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageOutcome {
    /// Entries written for these modules, their pages marked stale.
    Summarized {
        modules: Vec<ModuleName>,
    },
    AlreadyDone,
    /// Another worker's lease on the row is live until then: this duplicate is dropped.
    Busy {
        until: String,
    },
    /// The row does not exist (deleted): nothing to do.
    Missing,
    /// Too little of the invocation was left to claim the row: nothing was written but the
    /// sweep's claim given back, so the next sweep enqueues the row again.
    Deferred,
    /// Attempts used up (or a permanent error): the row is marked failed, its message is in
    /// the DLQ.
    GaveUp {
        attempts: u32,
    },
}

pub struct SummarizeHandler {
    store: PrStore,
    entries: EntryStore,
    pages: PageStore,
    modules: ModulesConfig,
    max_attempts: u32,
    dead_letter: Option<(aws_sdk_sqs::Client, String)>,
    summarizer: Arc<dyn Summarizer>,
    /// This invocation's outcomes, for its EMF line.
    outcomes: crate::telemetry::OutcomeCounts,
    /// Repository contexts (workspace packages, CODEOWNERS) for tagging.
    contexts: crate::store::ContextCache,
    claim_margin: Duration,
}

impl SummarizeHandler {
    pub fn new(
        store: PrStore,
        entries: EntryStore,
        pages: PageStore,
        modules: ModulesConfig,
        max_attempts: u32,
    ) -> Self {
        SummarizeHandler {
            store,
            entries,
            contexts: crate::store::ContextCache::new(pages.contexts()),
            pages,
            modules,
            max_attempts: max_attempts.max(1),
            dead_letter: None,
            summarizer: Arc::new(ExtractiveSummarizer),
            outcomes: Default::default(),
            claim_margin: CLAIM_MARGIN,
        }
    }

    /// No row is claimed with less than `margin` of the invocation left (default
    /// [`CLAIM_MARGIN`]); the summary call keeps half of it for the writes that follow.
    pub fn with_claim_margin(mut self, margin: Duration) -> Self {
        self.claim_margin = margin;
        self
    }

    /// From configuration: the three tables, the modules config loaded once, the summarizer
    /// (LLM when configured), the DLQ for given-up rows.
    pub async fn from_config(
        config: &SummarizeConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, SummarizeInitError> {
        let modules = ModulesConfig::load_or_bundled(
            config.modules_file.as_deref(),
            config.modules_param.as_deref(),
            sdk,
        )
        .await?;
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let handler = Self::new(
            PrStore::new(dynamo.clone(), config.table.clone()),
            EntryStore::new(dynamo.clone(), config.entries_table.clone()),
            PageStore::new(dynamo, config.pages_table.clone()),
            modules,
            config.max_attempts,
        )
        .with_summarizer(chronicle_llm::summarizer_for(config.summary.as_ref(), sdk).await);
        Ok(match &config.dlq_url {
            Some(url) => handler.with_dead_letter_queue(aws_sdk_sqs::Client::new(sdk), url.clone()),
            None => handler,
        })
    }

    /// Writes summaries with this summarizer (default: extractive).
    pub fn with_summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = summarizer;
        self
    }

    /// Sends the message of a given-up row to this queue (the summarize DLQ).
    pub fn with_dead_letter_queue(mut self, sqs: aws_sdk_sqs::Client, url: String) -> Self {
        self.dead_letter = Some((sqs, url));
        self
    }

    /// One Lambda invocation: messages independently (bounded concurrency, a task each so a
    /// panic fails only its message); the failed ones are returned as `batchItemFailures`.
    pub async fn handle(
        self: &Arc<Self>,
        event: SqsEvent,
        deadline: Instant,
        invocation: &str,
    ) -> SqsBatchResponse {
        let messages = event
            .records
            .into_iter()
            .map(|message| (message.message_id.clone().unwrap_or_default(), message))
            .collect();
        let this = Arc::clone(self);
        let invocation = invocation.to_string();
        // Each copy gets its own owner: a claim finding its owner's lease takes it as its own
        // (an applied claim whose answer was lost), so two copies must never share one.
        let copy = std::sync::atomic::AtomicU64::new(0);
        let failed =
            crate::batch::failed_items(messages, CONCURRENCY, move |message: SqsMessage| {
                let this = Arc::clone(&this);
                let owner = format!(
                    "{invocation}/{}/{}",
                    message.message_id.as_deref().unwrap_or_default(),
                    copy.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                );
                async move { this.process(&message, deadline, &owner).await }
            })
            .await;
        let mut response = SqsBatchResponse::default();
        for (id, error) in failed {
            tracing::warn!(message_id = %id, error = %error, "message failed; SQS will redeliver it");
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id;
            response.batch_item_failures.push(failure);
        }
        response
    }

    /// The outcomes since the last call as one EMF line (`MessagesSummarized`, …,
    /// `MessagesFailed`, and `SummariesWithheld`), every outcome present; the counts start
    /// again. Then, on a line of its own (per function, for its alarm), `SummaryModelRefused`.
    pub fn emf_line(&self, now: OffsetDateTime) -> String {
        let line = crate::telemetry::outcomes_emf_line(
            now,
            "Messages",
            &[
                "Summarized",
                "AlreadyDone",
                "Busy",
                "Missing",
                "Deferred",
                "GaveUp",
                "Failed",
            ],
            &self.outcomes.take(),
        );
        // Answers the model's filter withheld: each cost a call and left the extractive text.
        let line = crate::telemetry::with_gauge(
            &line,
            "SummariesWithheld",
            self.summarizer.take_withheld(),
        );
        let refused = crate::telemetry::function_metric_line(
            now,
            "SummaryModelRefused",
            self.summarizer.take_refusals(),
        );
        format!("{line}\n{refused}")
    }

    /// One message, logged in one line.
    pub async fn process(
        &self,
        message: &SqsMessage,
        deadline: Instant,
        owner: &str,
    ) -> Result<MessageOutcome, SummarizeError> {
        let started = Instant::now();
        let id = message.message_id.clone().unwrap_or_default();
        let parsed = SummarizeMessage::parse(message.body.as_deref().unwrap_or_default());
        let result = match &parsed {
            Ok((repo, number)) => {
                self.summarize(repo, *number, message, deadline, owner)
                    .await
            }
            Err(e) => Err(SummarizeError::BadMessage {
                id: id.clone(),
                message: e.to_string(),
            }),
        };
        let (repo, pr) = parsed
            .as_ref()
            .map(|(r, n)| (r.to_string(), *n))
            .unwrap_or_else(|_| ("-".into(), 0));
        self.outcomes.add(match &result {
            Ok(MessageOutcome::Summarized { .. }) => "Summarized",
            Ok(MessageOutcome::AlreadyDone) => "AlreadyDone",
            Ok(MessageOutcome::Busy { .. }) => "Busy",
            Ok(MessageOutcome::Missing) => "Missing",
            Ok(MessageOutcome::Deferred) => "Deferred",
            Ok(MessageOutcome::GaveUp { .. }) => "GaveUp",
            Err(_) => "Failed",
        });
        let outcome = match &result {
            Ok(o) => format!("{o:?}"),
            Err(e) => format!("failed: {e}"),
        };
        tracing::info!(message_id = %id, repo, pr, outcome, duration_ms = started.elapsed().as_secs_f64() * 1000.0, "summarize message");
        result
    }

    async fn summarize(
        &self,
        repo: &RepoName,
        number: u64,
        message: &SqsMessage,
        deadline: Instant,
        owner: &str,
    ) -> Result<MessageOutcome, SummarizeError> {
        if let Some(at) = given_up_at(message) {
            // A given-up row's message, redriven by an operator: process the row again.
            if self.store.revive_failed(repo, number, &at).await? {
                tracing::info!(repo = %repo, pr = number, failed_at = %at, "redriven: the given-up row is pending again");
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left < self.claim_margin {
            // The claim would count an attempt the invocation's end could cut short: left for
            // the next sweep, which may enqueue it at once.
            self.store.release_any_queue_claim(repo, number).await?;
            return Ok(MessageOutcome::Deferred);
        }
        let now = OffsetDateTime::now_utc();
        let lease = left.max(Duration::from_secs(1));
        let item = match self
            .store
            .claim_summary(repo, number, owner, now, now + lease)
            .await?
        {
            SummaryClaim::Claimed(item) => item,
            SummaryClaim::Done => return Ok(MessageOutcome::AlreadyDone),
            SummaryClaim::Missing => return Ok(MessageOutcome::Missing),
            // Another worker has the row (a duplicate message, enqueued again after its claim
            // expired): this message is redundant. Answering success deletes it without burning
            // a receive toward the DLQ; if that worker dies, the row stays pending and the
            // sweeper enqueues it again once its lease and claim have expired.
            SummaryClaim::Held { until } => {
                return Ok(MessageOutcome::Busy {
                    until: until.unwrap_or_default(),
                })
            }
        };
        let row = match PrRow::from_item(&item) {
            Ok(row) => row,
            Err(e) => {
                let attempts = attempts_of(&item);
                let error = SummarizeError::from(e);
                let reason = give_up_reason(attempts, &error.to_string());
                return self
                    .give_up(repo, number, owner, message, None, attempts, &reason)
                    .await;
            }
        };
        // The claim counted this attempt: more than the maximum means the earlier ones all
        // ended without reporting (crashes, timeouts, panics) or failed; stop here.
        if row.attempts > self.max_attempts {
            let used = row.attempts - 1;
            let last = row.last_error.clone().unwrap_or_else(|| {
                "the worker stopped (crash, timeout or panic) before reporting an error".into()
            });
            let reason = give_up_reason(used, &last);
            return self
                .give_up(repo, number, owner, message, Some(&row), used, &reason)
                .await;
        }
        // The summary is in hand with time left for the writes after it.
        let summary_deadline = deadline - self.claim_margin / 2;
        match self
            .write_entries(repo, number, &row, owner, summary_deadline)
            .await
        {
            Ok(modules) => Ok(MessageOutcome::Summarized { modules }),
            Err(SummarizeError::LeaseLost) => Err(SummarizeError::LeaseLost),
            Err(error) if error.is_permanent() || row.attempts >= self.max_attempts => {
                let reason = give_up_reason(row.attempts, &error.to_string());
                self.give_up(
                    repo,
                    number,
                    owner,
                    message,
                    Some(&row),
                    row.attempts,
                    &reason,
                )
                .await
            }
            Err(error) => {
                if !self
                    .store
                    .record_summary_failure(repo, number, owner, &error.to_string())
                    .await?
                {
                    return Err(SummarizeError::LeaseLost);
                }
                Err(error)
            }
        }
    }

    /// Steps 2–5 of the module docs: summary and intent, entries, stale pages, commit. When
    /// the row's inputs changed while its entries were written (its enrichment landed, or its
    /// PR was edited), the commit is refused and the entries are written again from the row as
    /// it is now (its summary kept), at most [`REWRITES`] times.
    async fn write_entries(
        &self,
        repo: &RepoName,
        number: u64,
        row: &PrRow,
        owner: &str,
        summary_deadline: Instant,
    ) -> Result<Vec<ModuleName>, SummarizeError> {
        let mut row = row.clone();
        for _ in 0..REWRITES {
            let modules = self
                .write_entries_once(repo, number, &row, owner, summary_deadline)
                .await?;
            match self
                .store
                .commit_summary(&row, owner, &modules, OffsetDateTime::now_utc())
                .await?
            {
                Commit::Done => return Ok(modules),
                Commit::LeaseLost => return Err(SummarizeError::LeaseLost),
                Commit::InputsChanged(item) => {
                    tracing::info!(repo = %repo, pr = number, "the row changed while its entries were written (enrichment or an edit); they are written again");
                    row = PrRow::from_item(&item)?;
                }
            }
        }
        Err(SummarizeError::InputsChanging(REWRITES))
    }

    async fn write_entries_once(
        &self,
        repo: &RepoName,
        number: u64,
        row: &PrRow,
        owner: &str,
        summary_deadline: Instant,
    ) -> Result<Vec<ModuleName>, SummarizeError> {
        let paths: Vec<&str> = row.files.iter().map(|f| f.path.as_str()).collect();
        // The repository's own layout and `.github/chronicle.yml`, once its files are known (a
        // PR without files is tagged with the repository itself whatever the context says).
        let context = match paths.is_empty() {
            true => None,
            false => self.contexts.get(repo.as_str()).await?,
        };
        let effective = tagging::team::effective(&self.modules, repo, context.as_deref());
        let config = effective.config();
        let layout = context
            .as_deref()
            .map(|c| tagging::RepoLayout::from_context(c, !effective.own, config));
        let modules = tagging::tag_modules(repo, &paths, config, layout.as_ref());
        let stored = row
            .summary
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let (summary, withheld) = match stored {
            Some(s) => (s.to_string(), None),
            None => self.write_summary(row, &modules, summary_deadline).await,
        };
        let new_summary = stored.is_none().then_some(summary.as_str());
        if !self
            .store
            .prepare_entries(
                repo,
                number,
                owner,
                new_summary,
                withheld.as_deref(),
                &modules,
            )
            .await?
        {
            return Err(SummarizeError::LeaseLost);
        }

        let entries =
            crate::entries::module_entries(repo, row, &modules, &summary, config, layout.as_ref());
        for chunk in entries.chunks(WRITE_CONCURRENCY) {
            let written =
                try_join_all(chunk.iter().map(|e| self.entries.put(e, row.generation))).await?;
            if written.contains(&false) {
                // A later claim wrote these entries: this worker lost its lease.
                return Err(SummarizeError::LeaseLost);
            }
        }
        let current: BTreeSet<&str> = modules.iter().map(ModuleName::as_str).collect();
        let left_behind: Vec<&str> = row
            .entry_modules
            .iter()
            .map(String::as_str)
            .filter(|m| !current.contains(m))
            .collect();
        for chunk in left_behind.chunks(WRITE_CONCURRENCY) {
            try_join_all(chunk.iter().map(|module| {
                self.entries.delete(
                    repo.as_str(),
                    module,
                    &row.merged_at,
                    number,
                    row.generation,
                )
            }))
            .await?;
        }
        // The entry's key: a build reads again only what it changes.
        let keys = [order_key(&row.merged_at, number)];
        let now = OffsetDateTime::now_utc();
        let touched: Vec<&str> = current.iter().chain(left_behind.iter()).copied().collect();
        for chunk in touched.chunks(WRITE_CONCURRENCY) {
            try_join_all(chunk.iter().map(|module| {
                self.pages
                    .mark_entries_stale(repo.as_str(), module, &keys, now)
            }))
            .await?;
        }
        Ok(modules)
    }

    /// Gives the row up: its message to the DLQ first (so the alarm can never miss it), then
    /// `failedAt` on the row. A crash in between sends it again on the next delivery: a
    /// duplicate in the DLQ, never a missing one.
    #[allow(clippy::too_many_arguments)]
    async fn give_up(
        &self,
        repo: &RepoName,
        number: u64,
        owner: &str,
        message: &SqsMessage,
        row: Option<&PrRow>,
        attempts: u32,
        reason: &str,
    ) -> Result<MessageOutcome, SummarizeError> {
        let at = rfc3339_millis(OffsetDateTime::now_utc());
        self.dead_letter(message, reason, &at).await?;
        // Entries an earlier attempt wrote stay (the PR did merge); their pages are built so
        // they show, whatever that attempt got to.
        if let Some(row) = row {
            let keys = [order_key(&row.merged_at, number)];
            let now = OffsetDateTime::now_utc();
            for module in &row.entry_modules {
                self.pages
                    .mark_entries_stale(repo.as_str(), module, &keys, now)
                    .await?;
            }
        }
        if !self
            .store
            .give_up_summary(repo, number, owner, reason, &at)
            .await?
        {
            return Err(SummarizeError::LeaseLost);
        }
        tracing::warn!(repo = %repo, pr = number, attempts, reason, "given up; its message is in the DLQ");
        Ok(MessageOutcome::GaveUp { attempts })
    }

    async fn dead_letter(
        &self,
        message: &SqsMessage,
        reason: &str,
        at: &str,
    ) -> Result<(), SummarizeError> {
        let Some((sqs, url)) = &self.dead_letter else {
            return Ok(());
        };
        let attribute = |value: &str| {
            aws_sdk_sqs::types::MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .map_err(|e| SummarizeError::DeadLetter(e.to_string()))
        };
        // SQS message attributes hold at most 256 KB with the body; a reason is short, but an
        // error can quote a long message.
        let reason: String = reason.chars().take(4_000).collect();
        sqs.send_message()
            .queue_url(url)
            .message_body(message.body.clone().unwrap_or_default())
            .message_attributes(FAILED_REASON_ATTRIBUTE, attribute(&reason)?)
            .message_attributes(GIVEN_UP_AT_ATTRIBUTE, attribute(at)?)
            .send()
            .await
            .map_err(|e| SummarizeError::DeadLetter(crate::aws::error_message(&e)))?;
        Ok(())
    }

    /// The summary paragraph from what the row holds (extractive, or the LLM when configured,
    /// which falls back to extractive on any error), and the hash of its input when the model
    /// withheld it now. An input the model withheld before is not asked again: its extractive
    /// summary is written at once.
    async fn write_summary(
        &self,
        row: &PrRow,
        modules: &[ModuleName],
        deadline: Instant,
    ) -> (String, Option<String>) {
        let files: Vec<String> = row.files.iter().map(|f| f.path.clone()).collect();
        let issues: Vec<String> = row
            .own_issues()
            .map(|i| format!("{} ({})", i.title, i.state))
            .collect();
        let input = SummaryInput {
            title: &row.title,
            body: row.body.as_deref(),
            labels: &row.labels,
            files: &files,
            issues: &issues,
            modules,
        };
        let hash = withheld_key(&input, self.summarizer.answerer().as_deref());
        if row.summary_withheld.as_deref() == Some(hash.as_str()) {
            tracing::info!(repo = %row.repo, pr = row.pr_number, "the model withheld this summary's input before; the extractive summary is used");
            return (crate::summary::extractive(&input).text, None);
        }
        let summary = self.summarizer.summarize(&input, deadline).await;
        let withheld = matches!(summary.source, SummarySource::Withheld { .. }).then_some(hash);
        (summary.text, withheld)
    }
}

/// The key of a summary input the model withheld: a hash of who answers (the model, and its
/// guardrail were one configured: another may answer) and what it is asked (its prompt).
fn withheld_key(input: &SummaryInput<'_>, answerer: Option<&str>) -> String {
    use sha2::Digest;
    let (system, user) = chronicle_llm::summary_prompt(input);
    let mut digest = sha2::Sha256::new();
    digest.update(answerer.unwrap_or_default().as_bytes());
    digest.update([0]);
    digest.update(system.as_bytes());
    digest.update([0]);
    digest.update(user.as_bytes());
    hex::encode(digest.finalize())
}

/// The give-up time a redriven DLQ message carries, if it is one.
fn given_up_at(message: &SqsMessage) -> Option<String> {
    message
        .message_attributes
        .get(GIVEN_UP_AT_ATTRIBUTE)
        .and_then(|a| a.string_value.clone())
        .filter(|v| !v.is_empty())
}

fn attempts_of(item: &Item) -> u32 {
    item.get(crate::store::attr::ATTEMPTS)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn give_up_reason(attempts: u32, last_error: &str) -> String {
    format!(
        "gave up after {attempts} attempt{}; last error: {last_error}",
        if attempts == 1 { "" } else { "s" }
    )
}
