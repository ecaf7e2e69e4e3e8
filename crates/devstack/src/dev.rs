//! `chronicle dev`: the local stack. The emulator (or `AWS_ENDPOINT_URL`), the table created from
//! `template.yaml`, and the webhook handler served over HTTP on loopback: the same code as Lambda.

use stages::secret::Resolve;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use stages::builder::PageBuilder;
use stages::config::{
    BuilderConfig, EnrichConfig, SummarizeConfig, SweeperConfig, TableConfig, WebhookConfig,
    ENRICH_ENABLED, ENTRIES_TABLE, OUTPUT_DIR, PAGES_TABLE, PAGE_REBUILD_SECONDS,
    SUMMARIZE_QUEUE_URL, TABLE_NAME,
};
use stages::enrich::EnrichHandler;
use stages::secret::{Secret, SecretSource};
use stages::store::{EntryStore, PageStore, PrStore};
use stages::summarize::SummarizeHandler;
use stages::sweeper::Sweeper;
use stages::webhook::{Verifier, WebhookHandler};

use crate::emulator::Emulator;
use crate::queues::{self, QueueSettings, SqsBatchHandler, SqsEventSource};
use crate::streams::{self, BatchHandler, EventSourceSettings, StreamEventSource};
use crate::template::{Template, ENTRIES_TABLE_ID, PAGES_TABLE_ID, PR_TABLE};
use standins::http_server::{self, ServerHandle};

/// The enrich function's `Timeout` in template.yaml: each local invocation gets as long.
const ENRICH_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the emulated event source reads the stream.
pub const STREAM_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// The summarize function's `Timeout` in template.yaml.
const SUMMARIZE_TIMEOUT: Duration = Duration::from_secs(60);
/// The sweeper function's `Timeout` in template.yaml.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(60);
/// The page builder function's `Timeout` in template.yaml.
const BUILD_TIMEOUT: Duration = Duration::from_secs(300);
/// `chronicle dev`'s rebuild interval per page (deployed: PageRebuildSeconds, 60 s), unless
/// PAGE_REBUILD_SECONDS says otherwise.
pub const DEV_REBUILD_SECONDS: &str = "2";
/// How often the emulated SQS event source polls (short polls: the emulator serves one request at a time).
pub const QUEUE_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// `chronicle dev`'s sweep interval (the deployed schedule is `rate(1 minute)`).
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The secret `chronicle dev` uses when none is configured; `events/` is signed with it.
pub const DEV_SECRET: &str = "chronicle-local-dev-secret";

/// `chronicle dev`'s deferred-enrichment retry interval (the deployed schedule is
/// `rate(5 minutes)`).
pub const ENRICH_RETRY_INTERVAL: Duration = Duration::from_secs(30);

/// This process's id in invocation ids (and so in lease owners): two `chronicle dev` processes
/// on one emulator never share an owner.
static PROCESS: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| uuid::Uuid::new_v4().simple().to_string()[..8].to_string());

#[derive(Debug, Clone)]
pub struct DevOptions {
    /// Webhook port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// An emulator to use; `None` starts one.
    pub endpoint: Option<String>,
    /// Port for the emulator this starts; `None` picks a free one.
    pub emulator_port: Option<u16>,
    /// Table name; `None` means `TABLE_NAME`, else `chronicle-dev`.
    pub table_name: Option<String>,
    /// Configuration variables taking precedence over the environment (e.g. `GITHUB_API_URL`).
    pub overrides: Vec<(String, String)>,
    /// How often the sweeper and the page builder run.
    pub sweep_interval: Duration,
}

impl DevOptions {
    /// `AWS_ENDPOINT_URL` from the environment, if set.
    pub fn from_env(port: u16, emulator_port: Option<u16>) -> Self {
        let endpoint = std::env::var("AWS_ENDPOINT_URL")
            .ok()
            .filter(|v| !v.is_empty());
        DevOptions {
            port,
            endpoint,
            emulator_port,
            table_name: None,
            overrides: Vec::new(),
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
        }
    }
}

pub struct DevStack {
    emulator: Option<Emulator>,
    sdk: SdkConfig,
    endpoint: String,
    handler: Arc<WebhookHandler>,
    server: ServerHandle,
    secret: Option<Secret>,
    enrich: Arc<EnrichHandler>,
    stream_dlq_url: String,
    summarize_queue_url: String,
    summarize_dlq_url: String,
    output_dir: String,
    entries: EntryStore,
    pages: PageStore,
    builder: Arc<PageBuilder>,
    sweeps_paused: Arc<std::sync::atomic::AtomicBool>,
    stop_workers: tokio::sync::watch::Sender<bool>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl DevStack {
    /// Starts everything. Configuration is the functions' own (`WebhookConfig`), with local
    /// defaults for the table name and the secret.
    pub async fn start(options: DevOptions) -> anyhow::Result<Self> {
        let lookup = |k: &str| options.lookup(k);
        let mut config = WebhookConfig::from_lookup(&lookup)?;
        if config.secret == SecretSource::Unset && !config.insecure_no_signature {
            config.secret = SecretSource::Plain(Secret::new(DEV_SECRET));
        }

        let (emulator, endpoint) =
            emulator_for(options.endpoint.clone(), options.emulator_port).await?;
        let sdk = ops::stack::local_sdk_config(&endpoint).await;
        let client = aws_sdk_dynamodb::Client::new(&sdk);
        let entries_table =
            lookup(ENTRIES_TABLE).unwrap_or_else(|| format!("{}-entries", config.table.table_name));
        let pages_table =
            lookup(PAGES_TABLE).unwrap_or_else(|| format!("{}-pages", config.table.table_name));
        create_tables(
            &client,
            &config.table.table_name,
            &entries_table,
            &pages_table,
        )
        .await?;

        let (handler, secret) = webhook(&config, &sdk, &client, &pages_table).await?;

        // The stream event source moto lacks, emulated with the template's settings.
        let template = Template::bundled()?;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let (stop_workers, stop) = tokio::sync::watch::channel(false);
        let (enrich, stream_dlq_url, stream_worker) = start_stream(
            &sdk,
            &lookup,
            &config.table,
            &pages_table,
            &template,
            &sqs,
            stop.clone(),
        )
        .await?;
        let mut workers = vec![stream_worker];

        // The summarize queue with its redrive policy, as the template declares them.
        let queue_settings = QueueSettings::from_template(
            &template,
            "SummarizeQueue",
            "SummarizeFunction",
            "SummarizeMessages",
        )?;
        let queue_name = format!("{}-summarize", config.table.table_name);
        let (summarize_queue_url, summarize_dlq_url) =
            queues::ensure_queue_with_dlq(&sqs, &queue_name, &queue_settings).await?;
        let queue_arn = queues::queue_arn(&sqs, &summarize_queue_url).await?;

        // The schedule moto lacks: the sweeper, ticked.
        let sweeps_paused = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sweeper = sweeper(
            &lookup,
            &sdk,
            &config.table,
            &sqs,
            &enrich,
            &summarize_queue_url,
        )?;
        workers.push(tokio::spawn(tick_sweeper(
            sweeper,
            options.sweep_interval,
            sweeps_paused.clone(),
            stop.clone(),
        )));

        // The enrich function's retry schedule (deferred rows), which moto lacks: ticked.
        workers.push(tokio::spawn(tick_enrich_retry(
            enrich.clone(),
            ENRICH_RETRY_INTERVAL,
            stop.clone(),
        )));

        let with_tables = |k: &str| match k {
            ENTRIES_TABLE => Some(entries_table.clone()),
            PAGES_TABLE => Some(pages_table.clone()),
            _ => lookup(k),
        };
        let summarize_config = SummarizeConfig::from_lookup(&with_tables)?;
        let builder_config = BuilderConfig::from_lookup(&|k: &str| match k {
            OUTPUT_DIR => lookup(k).or_else(|| Some("out".into())),
            PAGE_REBUILD_SECONDS => lookup(k).or_else(|| Some(DEV_REBUILD_SECONDS.into())),
            _ => with_tables(k),
        })?;
        let output_dir = output_dir(&builder_config, &sdk).await?;
        // The builder's schedule, which moto lacks: ticked.
        let builder = Arc::new(PageBuilder::from_config(&builder_config, &sdk).await?);
        workers.push(tokio::spawn(tick_builder(
            builder.clone(),
            options.sweep_interval,
            stop.clone(),
        )));
        workers.push(
            start_summarize(
                &summarize_config,
                &sdk,
                &sqs,
                (&summarize_queue_url, &summarize_dlq_url),
                queue_arn,
                queue_settings,
                stop,
            )
            .await?,
        );
        // Served last: every table, queue and event source is there before the first delivery.
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, options.port));
        let server = http_server::serve(handler.clone(), addr).await?;
        Ok(DevStack {
            emulator,
            sdk,
            endpoint,
            handler,
            server,
            secret,
            enrich,
            stream_dlq_url,
            summarize_queue_url,
            summarize_dlq_url,
            output_dir,
            entries: EntryStore::new(client.clone(), entries_table),
            pages: PageStore::new(client.clone(), pages_table),
            builder,
            sweeps_paused,
            stop_workers,
            workers,
        })
    }

    /// Where `chronicle dev --backfill` writes: this stack's tables, GitHub at GITHUB_API_URL
    /// with GITHUB_TOKEN.
    pub fn backfill_target(&self) -> ops::backfill::Target {
        ops::backfill::Target::from_env(
            self.sdk.clone(),
            self.store().table().clone(),
            self.pages.table_name().to_string(),
        )
    }

    /// Whether a GitHub token is configured (otherwise enrichment is skipped, quietly).
    pub fn enrich_enabled(&self) -> bool {
        self.enrich.enabled()
    }

    /// The local stream DLQ (the enrich event source's OnFailure destination).
    pub fn stream_dlq_url(&self) -> &str {
        &self.stream_dlq_url
    }

    pub fn summarize_queue_url(&self) -> &str {
        &self.summarize_queue_url
    }

    pub fn summarize_dlq_url(&self) -> &str {
        &self.summarize_dlq_url
    }

    /// Where the Markdown narratives are written.
    pub fn output_dir(&self) -> &str {
        &self.output_dir
    }

    pub fn webhook_url(&self) -> String {
        self.server.webhook_url()
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn started_emulator(&self) -> bool {
        self.emulator.is_some()
    }

    pub fn sdk(&self) -> &SdkConfig {
        &self.sdk
    }

    pub fn store(&self) -> &PrStore {
        self.handler.store()
    }

    /// The module entries table.
    pub fn entries(&self) -> &EntryStore {
        &self.entries
    }

    /// The pages table (stale markers, build state).
    pub fn pages(&self) -> &PageStore {
        &self.pages
    }

    /// Pauses (or resumes) the sweeper: rows stored meanwhile wait, as they would for enrichment.
    pub fn pause_sweeps(&self, paused: bool) {
        self.sweeps_paused
            .store(paused, std::sync::atomic::Ordering::Relaxed);
    }

    /// The page builder the stack ticks.
    pub fn builder(&self) -> &Arc<PageBuilder> {
        &self.builder
    }

    pub fn table(&self) -> &TableConfig {
        self.handler.store().table()
    }

    /// The secret deliveries must be signed with (`None` when signatures are off).
    pub fn secret(&self) -> Option<&Secret> {
        self.secret.as_ref()
    }

    /// Stops the HTTP server and the event sources, then the emulator if this stack started it.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
        let _ = self.stop_workers.send(true);
        for worker in self.workers {
            let _ = worker.await;
        }
        if let Some(emulator) = self.emulator {
            emulator.stop().await;
        }
    }
}

/// The enrich handler in the event source's shape, each call a fresh "invocation" with the
/// function's timeout as its deadline.
pub fn enrich_batch_handler(enrich: Arc<EnrichHandler>) -> BatchHandler {
    let invocations = Arc::new(AtomicU64::new(0));
    Arc::new(move |event| {
        let enrich = enrich.clone();
        let id = format!(
            "local-enrich-{}-{}",
            *PROCESS,
            invocations.fetch_add(1, Ordering::Relaxed)
        );
        Box::pin(async move {
            Ok(enrich
                .handle(event, Instant::now() + ENRICH_TIMEOUT, &id)
                .await)
        })
    })
}

/// The summarize handler in the SQS event source's shape.
pub fn summarize_batch_handler(summarize: Arc<SummarizeHandler>) -> SqsBatchHandler {
    let invocations = Arc::new(AtomicU64::new(0));
    Arc::new(move |event| {
        let summarize = summarize.clone();
        let id = format!(
            "local-summarize-{}-{}",
            *PROCESS,
            invocations.fetch_add(1, Ordering::Relaxed)
        );
        Box::pin(async move {
            Ok(summarize
                .handle(event, Instant::now() + SUMMARIZE_TIMEOUT, &id)
                .await)
        })
    })
}

fn store_for(sdk: &SdkConfig, table: &TableConfig) -> PrStore {
    PrStore::new(aws_sdk_dynamodb::Client::new(sdk), table.clone())
}

/// Runs a builder tick every `interval` until stopped, as the schedule would invoke the function.
async fn tick_builder(
    builder: Arc<PageBuilder>,
    interval: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = 0u64;
    loop {
        tick += 1;
        let now = time::OffsetDateTime::now_utc();
        let invocation = format!("local-build-{}-{tick}", *PROCESS);
        match builder
            .tick(now, Instant::now() + BUILD_TIMEOUT, &invocation)
            .await
        {
            Ok(report) if report.built + report.failed > 0 => tracing::info!(
                built = report.built,
                failed = report.failed,
                documents = report.documents,
                stale = report.stale,
                "page build"
            ),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "page build tick failed; the next tick tries again")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Runs the deferred-enrichment retry every `interval` until stopped, as the enrich function's
/// schedule would invoke it.
async fn tick_enrich_retry(
    enrich: Arc<EnrichHandler>,
    interval: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = 0u64;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
        tick += 1;
        let now = time::OffsetDateTime::now_utc();
        let invocation = format!("local-enrich-retry-{}-{tick}", *PROCESS);
        if let Err(e) = enrich
            .retry_deferred(now, Instant::now() + ENRICH_TIMEOUT, &invocation)
            .await
        {
            tracing::warn!(error = %e, "deferred enrichment retry failed; the next tick tries again");
        }
    }
}

/// Runs a sweep every `interval` until stopped, as the schedule would invoke the function.
async fn tick_sweeper(
    sweeper: Arc<Sweeper>,
    interval: Duration,
    paused: Arc<std::sync::atomic::AtomicBool>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if paused.load(std::sync::atomic::Ordering::Relaxed) {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
                _ = stop.changed() => return,
            }
        }
        let now = time::OffsetDateTime::now_utc();
        match sweeper.sweep(now, Instant::now() + SWEEP_TIMEOUT).await {
            // Only a sweep that did something is worth a line: one a second would drown the rest.
            Ok(report) if report.enqueued + report.send_failed > 0 => tracing::info!(
                seen = report.seen,
                enqueued = report.enqueued,
                skipped_grace = report.skipped_grace,
                skipped_claimed = report.skipped_claimed,
                skipped_full = report.skipped_full,
                "sweep"
            ),
            Ok(report) => tracing::debug!(
                seen = report.seen,
                skipped_grace = report.skipped_grace,
                skipped_claimed = report.skipped_claimed,
                "sweep (nothing to send)"
            ),
            Err(e) => tracing::warn!(error = %e, "sweep failed; the next tick tries again"),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The PR, entries and pages tables, as the template declares them: every table (and queue)
/// exists before anything is served or polled, so the first batch's context refresh finds the
/// pages table.
async fn create_tables(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    entries_table: &str,
    pages_table: &str,
) -> anyhow::Result<()> {
    for (id, name) in [
        (PR_TABLE, table),
        (ENTRIES_TABLE_ID, entries_table),
        (PAGES_TABLE_ID, pages_table),
    ] {
        let created = Template::bundled()?
            .table(id)?
            .create_if_missing(client, name)
            .await?;
        tracing::info!(table = %name, created, "table ready (definition from template.yaml)");
    }
    Ok(())
}

/// Where the page builder writes: its directory, or its S3 bucket (which the template creates;
/// locally the stack does).
async fn output_dir(config: &BuilderConfig, sdk: &aws_config::SdkConfig) -> anyhow::Result<String> {
    Ok(match &config.output_s3 {
        Some((bucket, prefix)) => {
            let s3 = stages::publish::s3_client(sdk);
            if s3.head_bucket().bucket(bucket).send().await.is_err() {
                s3.create_bucket().bucket(bucket).send().await?;
            }
            format!("s3://{bucket}/{prefix}")
        }
        None => config.output_dir.clone(),
    })
}

impl DevOptions {
    /// A variable as the stack reads it: an override, else the table name given, else the
    /// environment (the table name defaulting to the local one).
    fn lookup(&self, k: &str) -> Option<String> {
        if let Some((_, v)) = self.overrides.iter().find(|(name, _)| name == k) {
            return Some(v.clone());
        }
        match (k, &self.table_name) {
            (TABLE_NAME, Some(name)) => Some(name.clone()),
            (TABLE_NAME, None) => {
                Some(std::env::var(k).unwrap_or_else(|_| ops::stack::DEFAULT_TABLE.to_string()))
            }
            _ => std::env::var(k).ok(),
        }
    }
}

/// The emulator at `endpoint`, or one started on `port`: the one started (to stop with the
/// stack) and its endpoint.
async fn emulator_for(
    endpoint: Option<String>,
    port: Option<u16>,
) -> anyhow::Result<(Option<Emulator>, String)> {
    Ok(match endpoint {
        Some(endpoint) => (None, endpoint),
        None => {
            let emulator = Emulator::start(port).await?;
            let endpoint = emulator.endpoint().to_string();
            (Some(emulator), endpoint)
        }
    })
}

/// The webhook handler as the function builds it (its secret resolved), its hooks recorded in
/// the pages table as in AWS (`chronicle redeliver` reads them); and the secret.
async fn webhook(
    config: &WebhookConfig,
    sdk: &aws_config::SdkConfig,
    client: &aws_sdk_dynamodb::Client,
    pages_table: &str,
) -> anyhow::Result<(Arc<WebhookHandler>, Option<Secret>)> {
    let secret = config.secret.resolve(sdk).await?;
    let verifier = match &secret {
        Some(s) => Verifier::Secret(s.clone()),
        None => Verifier::InsecureNoSignature,
    };
    let store = PrStore::new(client.clone(), config.table.clone());
    let handler = WebhookHandler::new(store, verifier, config.max_body_bytes).with_hooks(
        stages::store::HookStore::new(client.clone(), pages_table.to_string()),
    );
    Ok((Arc::new(handler), secret))
}

/// The sweeper as the template configures it, sending to this stack's summarize queue.
fn sweeper(
    lookup: &dyn Fn(&str) -> Option<String>,
    sdk: &aws_config::SdkConfig,
    table: &stages::config::TableConfig,
    sqs: &aws_sdk_sqs::Client,
    enrich: &EnrichHandler,
    summarize_queue_url: &str,
) -> anyhow::Result<Arc<Sweeper>> {
    let enabled = enrich.enabled().to_string();
    let config = SweeperConfig::from_lookup(&|k: &str| match k {
        SUMMARIZE_QUEUE_URL => Some(summarize_queue_url.to_string()),
        ENRICH_ENABLED => Some(enabled.clone()),
        _ => lookup(k),
    })?;
    Ok(Arc::new(Sweeper::new(
        store_for(sdk, table),
        sqs.clone(),
        &config,
    )))
}

/// The enrich handler on the table's stream (the event source moto lacks, emulated with the
/// template's settings): the handler, the stream's DLQ URL and the polling worker.
async fn start_stream(
    sdk: &aws_config::SdkConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
    table: &stages::config::TableConfig,
    pages_table: &str,
    template: &Template,
    sqs: &aws_sdk_sqs::Client,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(Arc<EnrichHandler>, String, tokio::task::JoinHandle<()>)> {
    let mut enrich_config = EnrichConfig::from_lookup(&lookup)?;
    enrich_config.table = table.clone();
    // Repository contexts live in the pages table.
    enrich_config.pages_table = Some(pages_table.to_string());
    let enrich = Arc::new(EnrichHandler::from_config(&enrich_config, sdk).await?);
    let settings = EventSourceSettings::from_template(template, "EnrichFunction", "PrStream")?;
    let dlq_name = format!("{}-enrich-stream-dlq", table.table_name);
    let stream_dlq_url = streams::ensure_queue(sqs, &dlq_name).await?;
    let source =
        StreamEventSource::new(sdk, &table.table_name, stream_dlq_url.clone(), settings).await?;
    let worker = tokio::spawn(source.run(
        enrich_batch_handler(enrich.clone()),
        STREAM_POLL_INTERVAL,
        stop,
    ));
    Ok((enrich, stream_dlq_url, worker))
}

/// The summarize handler on its queue (the event source moto lacks), failures to its DLQ.
async fn start_summarize(
    config: &SummarizeConfig,
    sdk: &aws_config::SdkConfig,
    sqs: &aws_sdk_sqs::Client,
    (queue_url, dlq_url): (&str, &str),
    queue_arn: String,
    settings: QueueSettings,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let summarize = SummarizeHandler::from_config(config, sdk).await?;
    let summarize = Arc::new(summarize.with_dead_letter_queue(sqs.clone(), dlq_url.to_string()));
    let source = SqsEventSource::new(sqs.clone(), queue_url.to_string(), queue_arn, settings);
    Ok(tokio::spawn(source.run(
        summarize_batch_handler(summarize),
        QUEUE_POLL_INTERVAL,
        stop,
    )))
}
