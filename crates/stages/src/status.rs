//! The pipeline at a glance, for `chronicle status`: the pending backlog per shard and its
//! oldest row, rows deferred for enrichment, given-up rows, queue and DLQ depths, stale pages
//! and the ones whose last build failed (with its advice), and a repository's backfill
//! checkpoint. Every figure comes from an index (`Select=COUNT` on the sparse GSIs) or a queue
//! attribute: never a Scan, so it costs the backlog, not the history.

use std::collections::BTreeMap;

use serde::Serialize;
use time::OffsetDateTime;

use crate::domain::{parse_rfc3339, RepoName};
use crate::store::{CheckpointStore, PageStore, PrStore, StoreError, DEFERRED_SHARD};

/// A pending row received longer ago than this needs attention (the sweeper runs every minute).
pub const PENDING_ATTENTION_SECONDS: i64 = 3600;
/// Pending rows read per shard to find the one received first (beyond, the backlog is the
/// problem, and the count says so).
const OLDEST_ROWS_READ: usize = 2_000;
/// The most shards `PENDING_SHARDS` allows.
const MAX_SHARDS: u32 = 32;
/// Stale pages whose items are read for a failed build, at most.
pub const PAGES_INSPECTED: usize = 200;

/// A queue the report names, by its role.
#[derive(Debug, Clone)]
pub struct QueueRef {
    /// What the queue is for, from the stack output that named it: `summarize`,
    /// `summarize-dlq`, `enrich-stream-dlq`, `schedule-dlq`.
    pub role: String,
    pub name: String,
    pub url: String,
    pub dead_letter: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OldestPending {
    pub repo: String,
    pub number: u64,
    pub merged_at: String,
    pub received_at: Option<String>,
    /// Since it was received.
    pub age_seconds: Option<i64>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct QueueDepth {
    pub name: String,
    pub dead_letter: bool,
    /// `ApproximateNumberOfMessages`.
    pub visible: u64,
    /// `ApproximateNumberOfMessagesNotVisible`.
    pub in_flight: u64,
    /// `ApproximateNumberOfMessagesDelayed`.
    pub delayed: u64,
    /// A DLQ's oldest message's age (from `SentTimestamp`), among up to 10 messages looked at
    /// without taking them (visibility 0). CloudWatch's `ApproximateAgeOfOldestMessage` is the
    /// exact figure; the alarms watch it.
    pub oldest_age_seconds: Option<i64>,
}

/// Messages a DLQ is sampled for its oldest age.
const DLQ_SAMPLE: i32 = 10;

/// The oldest `SentTimestamp` among up to [`DLQ_SAMPLE`] messages of a DLQ, as an age. The
/// messages stay where they are (visibility 0); a DLQ has no redrive policy, so the receive
/// counts this adds change nothing.
async fn dlq_oldest_age(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    now: OffsetDateTime,
) -> Result<Option<i64>, String> {
    use aws_sdk_sqs::types::MessageSystemAttributeName;
    let out = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(DLQ_SAMPLE)
        .visibility_timeout(0)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
        .send()
        .await
        .map_err(|e| crate::aws::error_message(&e))?;
    let now_ms = (now.unix_timestamp_nanos() / 1_000_000) as i64;
    Ok(out
        .messages()
        .iter()
        .filter_map(|m| {
            m.attributes()?
                .get(&MessageSystemAttributeName::SentTimestamp)?
                .parse::<i64>()
                .ok()
        })
        .min()
        .map(|sent| ((now_ms - sent) / 1000).max(0)))
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FailingPage {
    pub repo: String,
    pub module: String,
    pub last_error: String,
    pub advice: Option<String>,
    pub at: Option<String>,
}

/// One installation of the GitHub App, as `chronicle status` sees it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InstallationHealth {
    pub id: u64,
    pub account: String,
    /// When the token just minted expires; `None` when none could be minted.
    pub token_expires_at: Option<String>,
    pub error: Option<String>,
    pub repositories: usize,
    /// The first of them, by name.
    pub repos: Vec<String>,
    /// Repositories of its account that have pages but that it no longer sees (the App was
    /// removed from them): their new PRs are summarized unenriched, their pages stay.
    pub removed: Vec<String>,
}

/// Repositories named per installation.
const REPOS_SHOWN: usize = 20;

/// The App's installations: a token minted for each (its health), what each can see, and which
/// repositories of its account with pages it no longer sees; with `repo`, whether the App is
/// installed on it.
pub async fn app_health(
    app: &crate::github::installation::AppClient,
    pages: &PageStore,
    repo: Option<&RepoName>,
    report: &mut StatusReport,
) -> Result<(), StatusError> {
    for installation in app.installations().await.map_err(StatusError::App)? {
        let mut health = InstallationHealth {
            id: installation.id,
            account: installation.account.login.clone(),
            token_expires_at: None,
            error: None,
            repositories: 0,
            repos: Vec::new(),
            removed: Vec::new(),
        };
        match app.repositories(installation.id).await {
            Ok(mut repos) => {
                repos.sort_by(|a, b| a.full_name.cmp(&b.full_name));
                let seen: std::collections::BTreeSet<String> = repos
                    .iter()
                    .map(|r| r.full_name.to_ascii_lowercase())
                    .collect();
                // The organisation index's rows: one per repository with pages.
                health.removed = pages
                    .org_repos(&health.account)
                    .await?
                    .into_iter()
                    .map(|r| r.repo)
                    .filter(|r| !seen.contains(&r.to_ascii_lowercase()))
                    .collect();
                health.repositories = repos.len();
                health.repos = repos
                    .into_iter()
                    .take(REPOS_SHOWN)
                    .map(|r| r.full_name)
                    .collect();
                health.token_expires_at = app
                    .health()
                    .into_iter()
                    .find(|h| h.installation == installation.id)
                    .and_then(|h| h.expires_at);
            }
            Err(e) => health.error = Some(e.to_string()),
        }
        report.installations.push(health);
    }
    if let Some(repo) = repo {
        match app.installation_of(repo.as_str()).await {
            Ok(_) => {}
            Err(e) if e.is_permanent() => {
                report.not_installed = Some(format!(
                    "{e}: its new PRs are summarized unenriched; its pages stay"
                ));
            }
            Err(e) => return Err(StatusError::App(e)),
        }
    }
    report.attention = attention(report);
    Ok(())
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackfillProgress {
    pub repo: String,
    pub imported: u64,
    pub updated: u64,
    pub unchanged: u64,
    pub pages: u64,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// Rows awaiting their summary, per shard (`"0"`…).
    pub pending: BTreeMap<String, u64>,
    pub pending_total: u64,
    pub oldest_pending: Option<OldestPending>,
    /// Rows parked until GitHub's rate limit resets.
    pub deferred: u64,
    /// Rows given up (`chronicle failed` lists them).
    pub failed: u64,
    pub queues: Vec<QueueDepth>,
    pub stale_pages: u64,
    /// Stale pages whose last build failed (of the first [`PAGES_INSPECTED`]).
    pub failing_pages: Vec<FailingPage>,
    /// With a repository: its module stories whose model was refused, with the advice.
    pub refused_stories: Vec<FailingPage>,
    /// With a GitHub App: each installation's token health and the repositories it can see.
    pub installations: Vec<InstallationHealth>,
    /// With a GitHub App and a repository the App is not installed on: why it is not enriched.
    pub not_installed: Option<String>,
    pub backfill: Option<BackfillProgress>,
    /// Why it needs attention (empty: all is well); the CLI exits 1 when not empty.
    pub attention: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("SQS GetQueueAttributes on {queue} failed: {message}")]
    Queue { queue: String, message: String },
    #[error(transparent)]
    App(crate::github::installation::InstallationError),
}

/// What `status` reads from.
pub struct StatusSources<'a> {
    pub prs: &'a PrStore,
    pub pages: &'a PageStore,
    pub checkpoints: &'a CheckpointStore,
    pub sqs: &'a aws_sdk_sqs::Client,
    pub queues: &'a [QueueRef],
}

/// Gathers the report. `repo`: also that repository's backfill checkpoint.
pub async fn gather(
    sources: &StatusSources<'_>,
    repo: Option<&RepoName>,
    now: OffsetDateTime,
) -> Result<StatusReport, StatusError> {
    let mut report = StatusReport::default();
    // Every shard the parameter allows: rows left in shards above a lowered PENDING_SHARDS
    // are still pending (the sweeper drains them), and are shown when there are any.
    for shard in 0..MAX_SHARDS {
        let in_use = shard < sources.prs.pending_shards();
        let shard = shard.to_string();
        let count = sources.prs.count_pending(&shard).await?;
        if !in_use && count == 0 {
            continue;
        }
        report.pending_total += count;
        if count > 0 {
            oldest_in(sources.prs, &shard, now, &mut report.oldest_pending).await?;
        }
        report.pending.insert(shard, count);
    }
    report.deferred = sources.prs.count_pending(DEFERRED_SHARD).await?;
    report.failed = sources.prs.count_failed().await?;

    for q in sources.queues {
        report.queues.push(depth_of(sources.sqs, q, now).await?);
    }

    let stale = sources.pages.stale_pages().await?;
    report.stale_pages = stale.len() as u64;
    for page in stale.iter().take(PAGES_INSPECTED) {
        if let Some(item) = sources.pages.get(&page.repo, &page.module).await? {
            if let Some(error) = item.last_error {
                // An owner's organisation page, by the title it has in Notion.
                let (repo, module) = match crate::store::org_owner(&page.repo) {
                    Some(org) => (format!("{org} · repositories"), "organisation page".into()),
                    None => (page.repo.clone(), page.module.clone()),
                };
                report.failing_pages.push(FailingPage {
                    repo,
                    module,
                    last_error: error,
                    advice: item.advice,
                    at: item.last_error_at,
                });
            }
        }
    }

    if let Some(repo) = repo {
        for item in sources.pages.repo_stories(repo.as_str()).await? {
            if let Some(story) = item.story.filter(|s| s.error.is_some()) {
                report.refused_stories.push(FailingPage {
                    repo: item.repo,
                    module: item.module,
                    last_error: story.error.unwrap_or_default(),
                    advice: story.advice,
                    at: Some(story.generated_at),
                });
            }
        }
        report.backfill = sources
            .checkpoints
            .get(repo)
            .await?
            .map(|c| BackfillProgress {
                repo: c.repository,
                imported: c.imported,
                updated: c.updated,
                unchanged: c.unchanged,
                pages: c.pages,
                updated_at: c.updated_at,
                finished_at: c.finished_at,
            });
    }

    report.attention = attention(&report);
    Ok(report)
}

/// The row of `shard` received first, if older than `oldest`. The index is sorted by merge
/// time, so its rows are read (projected, at most [`OLDEST_ROWS_READ`] per shard).
async fn oldest_in(
    prs: &PrStore,
    shard: &str,
    now: OffsetDateTime,
    oldest: &mut Option<OldestPending>,
) -> Result<(), StatusError> {
    let mut start = None;
    let mut read = 0usize;
    loop {
        let page = prs.pending_page(shard, start, 500).await?;
        read += page.rows.len();
        for row in page.rows {
            let older = match (&*oldest, &row.received_at) {
                (None, _) => true,
                (Some(o), Some(r)) => o.received_at.as_ref().is_none_or(|or| r < or),
                (Some(_), None) => false,
            };
            if older {
                let age = row
                    .received_at
                    .as_deref()
                    .and_then(parse_rfc3339)
                    .map(|t| (now - t).whole_seconds());
                *oldest = Some(OldestPending {
                    repo: row.repo.to_string(),
                    number: row.number,
                    merged_at: row.merged_at,
                    received_at: row.received_at,
                    age_seconds: age,
                });
            }
        }
        match page.next {
            Some(next) if read < OLDEST_ROWS_READ => start = Some(next),
            _ => return Ok(()),
        }
    }
}

/// A queue's depth from `GetQueueAttributes`; for a DLQ with messages, its oldest one's age.
async fn depth_of(
    sqs: &aws_sdk_sqs::Client,
    q: &QueueRef,
    now: OffsetDateTime,
) -> Result<QueueDepth, StatusError> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(&q.url)
        .attribute_names(A::All)
        .send()
        .await
        .map_err(|e| StatusError::Queue {
            queue: q.name.clone(),
            message: crate::aws::error_message(&e),
        })?;
    let attribute = |name: A| {
        out.attributes()
            .and_then(|a| a.get(&name))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let visible = attribute(A::ApproximateNumberOfMessages);
    let oldest_age_seconds = if q.dead_letter && visible > 0 {
        // Without sqs:ReceiveMessage (a read-only operator) the age is left out.
        dlq_oldest_age(sqs, &q.url, now)
            .await
            .unwrap_or_else(|message| {
                tracing::warn!(queue = %q.name, %message, "could not look at the DLQ's messages");
                None
            })
    } else {
        None
    };
    Ok(QueueDepth {
        name: q.name.clone(),
        dead_letter: q.dead_letter,
        visible,
        in_flight: attribute(A::ApproximateNumberOfMessagesNotVisible),
        delayed: attribute(A::ApproximateNumberOfMessagesDelayed),
        oldest_age_seconds,
    })
}

/// What needs a person: given-up rows, messages in a DLQ, pages whose build fails, a pending
/// row waiting for more than an hour.
fn attention(r: &StatusReport) -> Vec<String> {
    let mut out = Vec::new();
    if r.failed > 0 {
        out.push(format!(
            "{} rows given up: `chronicle failed` lists them, `chronicle reprocess --failed` retries them",
            r.failed
        ));
    }
    for q in r.queues.iter().filter(|q| q.dead_letter && q.visible > 0) {
        let age = q
            .oldest_age_seconds
            .map(|a| format!(", the oldest {} minutes old", a / 60))
            .unwrap_or_default();
        out.push(format!("{} messages in {}{age}", q.visible, q.name));
    }
    if !r.failing_pages.is_empty() {
        out.push(format!(
            "{} pages whose last build failed (see their advice)",
            r.failing_pages.len()
        ));
    }
    for i in r.installations.iter().filter(|i| i.error.is_some()) {
        out.push(format!(
            "GitHub App installation {} ({}): no token: {}",
            i.id,
            i.account,
            i.error.as_deref().unwrap_or_default()
        ));
    }
    for i in r.installations.iter().filter(|i| !i.removed.is_empty()) {
        out.push(format!(
            "GitHub App installation {} ({}) does not see {}, which have pages (the App was removed from them, or they came through a repository webhook): their new PRs are summarized unenriched, their pages stay",
            i.id,
            i.account,
            i.removed.join(", ")
        ));
    }
    if let Some(why) = &r.not_installed {
        out.push(why.clone());
    }
    if !r.refused_stories.is_empty() {
        out.push(format!(
            "{} module stories whose model was refused (see their advice)",
            r.refused_stories.len()
        ));
    }
    if let Some(o) = &r.oldest_pending {
        if o.age_seconds.is_some_and(|a| a > PENDING_ATTENTION_SECONDS) {
            out.push(format!(
                "the oldest pending row ({}#{}) was received {} minutes ago",
                o.repo,
                o.number,
                o.age_seconds.unwrap_or(0) / 60
            ));
        }
    }
    out
}

/// The report as a terminal table.
pub fn render(r: &StatusReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let shards: Vec<String> = r.pending.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    let _ = writeln!(
        s,
        "pending summaries   {:>8}   (per shard {})",
        r.pending_total,
        shards.join(" ")
    );
    match &r.oldest_pending {
        Some(o) => {
            let _ = writeln!(
                s,
                "oldest pending      {}#{}   merged {}, received {}",
                o.repo,
                o.number,
                o.merged_at,
                o.received_at.as_deref().unwrap_or("?")
            );
        }
        None => {
            let _ = writeln!(s, "oldest pending      -");
        }
    }
    let _ = writeln!(s, "deferred (GitHub)   {:>8}", r.deferred);
    let _ = writeln!(s, "given up            {:>8}", r.failed);
    for q in &r.queues {
        let oldest = q
            .oldest_age_seconds
            .map(|a| format!(", oldest {a} s"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "queue {:<30} {:>6} visible {:>6} in flight {:>6} delayed{}",
            q.name,
            q.visible,
            q.in_flight,
            q.delayed,
            if q.dead_letter {
                format!("   (DLQ{oldest})")
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(s, "stale pages         {:>8}", r.stale_pages);
    for p in &r.failing_pages {
        let _ = writeln!(
            s,
            "page failing        {} · {}: {}{}",
            p.repo,
            p.module,
            p.last_error,
            p.advice
                .as_deref()
                .map(|a| format!(" — {a}"))
                .unwrap_or_default()
        );
    }
    for i in &r.installations {
        let _ = writeln!(
            s,
            "installation        {} ({}): {}, {} repositories{}",
            i.id,
            i.account,
            match (&i.token_expires_at, &i.error) {
                (_, Some(e)) => format!("no token ({e})"),
                (Some(at), None) => format!("token valid until {at}"),
                (None, None) => "token minted".to_string(),
            },
            i.repositories,
            if i.repos.is_empty() {
                String::new()
            } else {
                format!(": {}", i.repos.join(", "))
            }
        );
        if !i.removed.is_empty() {
            let _ = writeln!(
                s,
                "  does not see      {} (pages kept, new PRs unenriched)",
                i.removed.join(", ")
            );
        }
    }
    for p in &r.refused_stories {
        let _ = writeln!(
            s,
            "story refused       {} · {}: {}{}",
            p.repo,
            p.module,
            p.last_error,
            p.advice
                .as_deref()
                .map(|a| format!(" — {a}"))
                .unwrap_or_default()
        );
    }
    if let Some(b) = &r.backfill {
        let _ = writeln!(
            s,
            "backfill            {}: {} imported, {} updated, {} unchanged, {} pages; {}",
            b.repo,
            b.imported,
            b.updated,
            b.unchanged,
            b.pages,
            match &b.finished_at {
                Some(at) => format!("finished {at}"),
                None => format!("last page {} (not finished)", b.updated_at),
            }
        );
    }
    if r.attention.is_empty() {
        let _ = writeln!(s, "\nall well");
    } else {
        let _ = writeln!(s, "\nneeds attention:");
        for a in &r.attention {
            let _ = writeln!(s, "  - {a}");
        }
    }
    s
}
