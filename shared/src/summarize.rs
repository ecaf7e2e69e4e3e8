//! The summarize worker: for each queued key, claim the row with a lease, tag its modules,
//! render its narrative entry, publish every touched module's page, and commit — once in effect.
//!
//! - Claim refused because the row is summarized or failed: success (a redelivery after done).
//! - Refused because another worker's lease is live: the message is reported failed and returns.
//! - The commit is conditional on still holding the lease; a worker whose lease expired (it was
//!   slow or died) cannot commit, and its message comes back.
//! - Pages are regenerated from the table's summarized rows, so publishing twice (a retry after a
//!   crash between publish and commit) leaves one copy of each entry.
//! - A failure is counted on the row; at `MAX_ATTEMPTS` the row gets `failedAt`/`failedReason`,
//!   leaves the pending index, and the message is reported done so SQS stops redelivering it.
//!   A message that cannot be read at all fails every time and ends in the DLQ by redrive.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use time::OffsetDateTime;

use crate::config::SummarizeConfig;
use crate::domain::RepoName;
use crate::narrative::{self, ModulePage, NarrativeError};
use crate::publish::{
    MarkdownPublisher, NotionPublisher, Publication, PublishError, Publisher, Publishers,
    S3MarkdownPublisher,
};
use crate::store::{attr, Item, PrStore, StoreError, SummaryClaim, SummaryFailure};
use crate::summary::{ExtractiveSummarizer, Summarizer, SummaryInput};
use crate::sweeper::SummarizeMessage;
use crate::tagging::{self, ModulesConfig, TaggingError};

/// Messages of one batch worked on at once.
const CONCURRENCY: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    #[error("message {id}: {message}")]
    BadMessage { id: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("another worker holds the lease until {0}")]
    LeaseHeld(String),
    #[error("the lease expired before the commit; the effect was abandoned")]
    LeaseLost,
    #[error("publishing failed: {0}")]
    Publish(#[from] PublishError),
    #[error("the stored row cannot be rendered: {0}")]
    Narrative(#[from] NarrativeError),
    #[error("the row was given up but its message could not be sent to the DLQ: {0}")]
    DeadLetter(String),
}

#[derive(Debug, thiserror::Error)]
pub enum SummarizeInitError {
    #[error(transparent)]
    Tagging(#[from] TaggingError),
    #[error("the Notion token: {0}")]
    Secret(#[from] crate::secret::SecretError),
}

/// What happened to one message (all successes for SQS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageOutcome {
    Published {
        modules: Vec<String>,
    },
    AlreadyDone,
    /// The row does not exist (deleted): nothing to publish.
    Missing,
    /// `MAX_ATTEMPTS` reached: the row is marked failed.
    GaveUp {
        attempts: u32,
    },
}

pub struct SummarizeHandler {
    store: PrStore,
    publisher: Arc<dyn Publisher>,
    modules: ModulesConfig,
    max_attempts: u32,
    dead_letter: Option<(aws_sdk_sqs::Client, String)>,
    summarizer: Arc<dyn Summarizer>,
}

impl SummarizeHandler {
    pub fn new(
        store: PrStore,
        publisher: Arc<dyn Publisher>,
        modules: ModulesConfig,
        max_attempts: u32,
    ) -> Self {
        SummarizeHandler {
            store,
            publisher,
            modules,
            max_attempts: max_attempts.max(1),
            dead_letter: None,
            summarizer: Arc::new(ExtractiveSummarizer),
        }
    }

    /// From configuration: the Markdown publisher on `OUTPUT_DIR`, the modules config loaded once.
    pub async fn from_config(
        config: &SummarizeConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, SummarizeInitError> {
        // MODULES_CONFIG_FILE, else MODULES_CONFIG_PARAM, else the config/modules.yaml the binary
        // was built with: `sam build` ships only the binary, so the bundled file is compiled in.
        let modules = match (
            config.modules_file.as_deref(),
            config.modules_param.as_deref(),
        ) {
            (None, None) => ModulesConfig::from_yaml(tagging::BUNDLED_MODULES_YAML)?,
            (file, param) => ModulesConfig::load(file, param, sdk).await?,
        };
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let store = PrStore::new(dynamo.clone(), config.table.clone());
        let markdown: Arc<dyn Publisher> = match &config.output_s3 {
            Some((bucket, prefix)) => Arc::new(S3MarkdownPublisher::new(
                crate::aws::s3_client(sdk),
                bucket,
                prefix,
            )),
            None => Arc::new(MarkdownPublisher::new(&config.output_dir)),
        };
        // Notion when configured (Markdown too if asked), else Markdown.
        let publisher: Arc<dyn Publisher> = match &config.notion {
            None => markdown,
            Some(notion) => {
                let token = notion.token.resolve(sdk).await?.ok_or_else(|| {
                    crate::secret::SecretError::EmptyParameter {
                        name: crate::config::NOTION_TOKEN.into(),
                    }
                })?;
                let publisher: Arc<dyn Publisher> = Arc::new(NotionPublisher::new(
                    crate::notion::NotionClient::new(&notion.api_url, token),
                    &notion.parent_page_id,
                    crate::store::NotionPages::new(dynamo, notion.pages_table.clone()),
                    store.clone(),
                ));
                if config.markdown_with_notion {
                    Arc::new(Publishers(vec![markdown, publisher]))
                } else {
                    publisher
                }
            }
        };
        tracing::info!(publisher = publisher.name(), "summarize publisher");
        let handler = Self::new(store, publisher, modules, config.max_attempts)
            .with_summarizer(crate::summary::from_env_resolved(sdk).await);
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

    /// Sends the message of a row given up at `MAX_ATTEMPTS` to this queue (the summarize DLQ).
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
        let failed =
            crate::batch::failed_items(messages, CONCURRENCY, move |message: SqsMessage| {
                let this = Arc::clone(&this);
                let owner = format!(
                    "{invocation}/{}",
                    message.message_id.as_deref().unwrap_or_default()
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
            Err(message) => Err(SummarizeError::BadMessage {
                id: id.clone(),
                message: message.clone(),
            }),
        };
        let (repo, pr) = parsed
            .as_ref()
            .map(|(r, n)| (r.to_string(), *n))
            .unwrap_or_else(|_| ("-".into(), 0));
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
        let now = OffsetDateTime::now_utc();
        let lease = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let item = match self
            .store
            .claim_summary(repo, number, owner, now, now + lease)
            .await?
        {
            SummaryClaim::Claimed(item) => item,
            SummaryClaim::Done => return Ok(MessageOutcome::AlreadyDone),
            SummaryClaim::Missing => return Ok(MessageOutcome::Missing),
            SummaryClaim::Held { until } => {
                return Err(SummarizeError::LeaseHeld(until.unwrap_or_default()))
            }
        };
        match self
            .publish_and_commit(repo, number, &item, owner, deadline)
            .await
        {
            Ok(modules) => Ok(MessageOutcome::Published { modules }),
            Err(SummarizeError::LeaseLost) => Err(SummarizeError::LeaseLost),
            Err(error) => {
                // A request Notion calls invalid, or access that an operator must fix, fails the
                // same way every time: the row is given up at once, with the reason.
                let permanent = matches!(&error, SummarizeError::Publish(e) if e.is_permanent());
                let max_attempts = if permanent { 1 } else { self.max_attempts };
                let attempts = item
                    .get(attr::ATTEMPTS)
                    .and_then(|v| v.as_n().ok())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let recorded = self
                    .store
                    .record_summary_failure(
                        repo,
                        number,
                        owner,
                        attempts,
                        max_attempts,
                        &error.to_string(),
                        OffsetDateTime::now_utc(),
                    )
                    .await?;
                match recorded {
                    Some(SummaryFailure::GaveUp { attempts }) => {
                        self.dead_letter(message, &error).await?;
                        Ok(MessageOutcome::GaveUp { attempts })
                    }
                    Some(SummaryFailure::Retry { .. }) => Err(error),
                    None => Err(SummarizeError::LeaseLost),
                }
            }
        }
    }

    /// Tags, renders and publishes every module page the PR belongs to, then commits.
    async fn publish_and_commit(
        &self,
        repo: &RepoName,
        number: u64,
        item: &Item,
        owner: &str,
        deadline: Instant,
    ) -> Result<Vec<String>, SummarizeError> {
        let files = changed_paths(item);
        let file_refs: Vec<&str> = files.iter().map(String::as_str).collect();
        let modules = tagging::tag_modules(repo, &file_refs, self.modules.for_repo(repo), None);
        let summary = match item.get(attr::SUMMARY).and_then(|v| v.as_s().ok()) {
            Some(existing) => existing.clone(),
            None => {
                let text = self.write_summary(item, &files, &modules).await;
                // Kept on the row at once (under the lease), so a retry never generates it again.
                if !self.store.save_summary(repo, number, owner, &text).await? {
                    return Err(SummarizeError::LeaseLost);
                }
                text
            }
        };
        let mut current = item.clone();
        current.insert(attr::SUMMARY.into(), AttributeValue::S(summary.clone()));
        let entry = narrative::entry_from_item(&current)?;
        let rows = self.store.summarized_rows(repo).await?;
        let mut published: Vec<(String, Vec<u64>)> = Vec::new();
        for module in &modules {
            let page = self.module_page(repo, module, Some(&entry), &rows);
            let publication = Publication {
                page: &page,
                number,
                lease_owner: owner,
                row: &current,
                deadline,
            };
            self.publisher.publish(&publication).await?;
            published.push((module.clone(), page_numbers(&page)));
        }
        if !self
            .store
            .commit_summary(
                repo,
                number,
                owner,
                &modules,
                &summary,
                OffsetDateTime::now_utc(),
            )
            .await?
        {
            return Err(SummarizeError::LeaseLost);
        }
        self.mend_pages(repo, number, &published, &current, deadline)
            .await;
        Ok(modules)
    }

    /// A module's page: the summarized rows tagged with it, plus `entry` (not committed yet).
    fn module_page(
        &self,
        repo: &RepoName,
        module: &str,
        entry: Option<&narrative::Entry>,
        rows: &[Item],
    ) -> ModulePage {
        let mut entries: Vec<narrative::Entry> = entry.into_iter().cloned().collect();
        for row in rows.iter().filter(|r| row_modules(r).contains(module)) {
            match narrative::entry_from_item(row) {
                Ok(e) => entries.push(e),
                Err(e) => {
                    tracing::warn!(repo = %repo, module, error = %e, "a summarized row cannot be rendered; left out")
                }
            }
        }
        let paths = tagging::module_paths(repo, module, self.modules.for_repo(repo));
        ModulePage::new(repo.as_str(), module, entries).with_paths(paths)
    }

    /// Two workers publishing one module at once each render the page without the other's
    /// (uncommitted) entry. After its commit, a worker re-reads the committed rows and, where a
    /// module's entries changed, has the publisher mend the page; the later of the two commits
    /// sees both entries. Best effort: the PR is committed either way.
    async fn mend_pages(
        &self,
        repo: &RepoName,
        number: u64,
        published: &[(String, Vec<u64>)],
        row: &Item,
        deadline: Instant,
    ) {
        if !self.publisher.rewrites_pages() {
            return;
        }
        let rows = match self.store.summarized_rows(repo).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(repo = %repo, error = %e, "could not re-read the rows to mend pages");
                return;
            }
        };
        for (module, numbers) in published {
            let page = self.module_page(repo, module, None, &rows);
            if page_numbers(&page) == *numbers {
                continue;
            }
            tracing::info!(repo = %repo, module, "entries changed while publishing; mending the page");
            let publication = Publication::of_page(&page, number, row, deadline);
            if let Err(e) = self.publisher.republish(&publication).await {
                tracing::warn!(repo = %repo, module, error = %e, "mending the page failed; the next publish of the module will");
            }
        }
    }
}

fn page_numbers(page: &ModulePage) -> Vec<u64> {
    page.entries.iter().map(|e| e.number).collect()
}

impl SummarizeHandler {
    /// The row is marked failed; its message goes to the DLQ (alarmed, redrivable) and is then
    /// reported done, so SQS stops redelivering it.
    async fn dead_letter(
        &self,
        message: &SqsMessage,
        error: &SummarizeError,
    ) -> Result<(), SummarizeError> {
        let Some((sqs, url)) = &self.dead_letter else {
            return Ok(());
        };
        let reason = aws_sdk_sqs::types::MessageAttributeValue::builder()
            .data_type("String")
            .string_value(error.to_string())
            .build()
            .map_err(|e| SummarizeError::DeadLetter(e.to_string()))?;
        sqs.send_message()
            .queue_url(url)
            .message_body(message.body.clone().unwrap_or_default())
            .message_attributes("failedReason", reason)
            .send()
            .await
            .map_err(|e| SummarizeError::DeadLetter(crate::aws::error_message(&e)))?;
        Ok(())
    }
}

impl SummarizeHandler {
    /// The summary paragraph from what the row holds (extractive, or the LLM when configured,
    /// which falls back to extractive on any error).
    async fn write_summary(&self, item: &Item, files: &[String], modules: &[String]) -> String {
        let text = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .map(String::as_str)
        };
        let labels: Vec<String> = match item.get(attr::LABELS) {
            Some(AttributeValue::L(l)) => l.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
            _ => Vec::new(),
        };
        let issues: Vec<String> = match item.get(attr::LINKED_ISSUES) {
            Some(AttributeValue::L(l)) => l
                .iter()
                .filter_map(|v| {
                    let m = v.as_m().ok()?;
                    Some(format!(
                        "{} ({})",
                        m.get("title")?.as_s().ok()?,
                        m.get("state")?.as_s().ok()?
                    ))
                })
                .collect(),
            _ => Vec::new(),
        };
        let input = SummaryInput {
            title: text(attr::TITLE).unwrap_or_default(),
            body: text(attr::BODY),
            labels: &labels,
            files,
            issues: &issues,
            modules,
        };
        self.summarizer.summarize(&input).await.text
    }
}

fn changed_paths(item: &Item) -> Vec<String> {
    let Some(AttributeValue::L(files)) = item.get(attr::FILES) else {
        return Vec::new();
    };
    files
        .iter()
        .filter_map(|f| f.as_m().ok()?.get("path")?.as_s().ok().cloned())
        .collect()
}

fn row_modules(item: &Item) -> BTreeSet<&str> {
    match item.get(attr::MODULES) {
        Some(AttributeValue::L(l)) => l
            .iter()
            .filter_map(|m| m.as_s().ok().map(String::as_str))
            .collect(),
        _ => BTreeSet::new(),
    }
}
