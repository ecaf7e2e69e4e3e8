//! Test support: the emulator endpoint, fresh tables created from `template.yaml`, signed
//! requests built from the real payloads in `tests/fixtures`.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use stages::config::TableConfig;
use stages::secret::Secret;
use stages::signature;
use stages::store::{Item, PrStore};
use stages::webhook::{Verifier, WebhookHandler, WebhookRequest};

pub mod audit_proxy;
/// The Converse stand-in lives in `standins` (`chronicle bench story` uses it too).
pub use standins::converse_standin as converse_stub;
pub mod dynamo_proxy;
pub mod lambda_standin;
pub mod messages_stub;
/// The Notion stand-in lives in `standins` (the benches use it too).
pub use standins::notion_standin as notion_stub;
pub mod openai_stub;
pub mod relay;
pub use devstack::samples;

pub const SECRET: &str = "test-webhook-secret";

/// The emulator's endpoint: `AWS_ENDPOINT_URL` (what `infra/test.sh` sets), or else a moto server
/// started once for this test process through `infra/emulator.sh run`, and stopped with it.
pub fn endpoint() -> String {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT
        .get_or_init(|| match std::env::var("AWS_ENDPOINT_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => start_private_emulator(),
        })
        .clone()
}

fn start_private_emulator() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = devstack::emulator::repo_root().join("infra/emulator.sh");
    // A watchdog: python holds moto and ends it when our end of its stdin closes (process exit).
    let watchdog = r#"
import subprocess, sys, threading
p = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE, text=True)
for line in p.stderr:
    if "Running on" in line:
        print("ready", flush=True)
        break
# Keep draining moto's request log, or it blocks once the pipe is full.
threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
sys.stdin.read()
p.terminate()
"#;
    let mut child = Command::new("python3")
        .args(["-c", watchdog])
        .arg(&script)
        .args(["run", "--port", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs infra/emulator.sh");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "ready",
        "moto did not start (see infra/emulator.sh output above)"
    );
    std::mem::forget(child); // keeps stdin open until this process exits
    format!("http://127.0.0.1:{port}")
}

/// SDK configuration for the emulator, made in the calling test's runtime.
pub async fn sdk() -> SdkConfig {
    ops::stack::local_sdk_config(&endpoint()).await
}

/// A table of its own for one test, created from `template.yaml`'s definition.
pub async fn fresh_table(sdk: &SdkConfig) -> PrStore {
    let name = format!("prs-{}", uuid::Uuid::new_v4().simple());
    let client = aws_sdk_dynamodb::Client::new(sdk);
    devstack::template::Template::bundled()
        .unwrap()
        .table(devstack::template::PR_TABLE)
        .unwrap()
        .create(&client, &name)
        .await
        .unwrap();
    PrStore::new(
        client,
        TableConfig {
            table_name: name,
            pending_shards: 4,
        },
    )
}

/// Stores a merged delivery the way the webhook does (`payload` is a `pull_request` event whose
/// PR is merged), as delivery `d-<number>` received at `received_at`.
pub async fn store_merged(
    store: &PrStore,
    payload: &serde_json::Value,
    received_at: time::OffsetDateTime,
) {
    let stages::payload::Classified::Merged(pr) =
        stages::payload::classify_pull_request(payload.to_string().as_bytes())
            .expect("a valid pull_request payload")
    else {
        panic!("the payload's PR is not merged")
    };
    store
        .upsert(
            &pr,
            &stages::domain::Delivery {
                id: format!("d-{}", pr.number),
                received_at,
            },
        )
        .await
        .unwrap();
}

/// A message received from SQS as Lambda's SQS event source hands it to a function: its id,
/// body and string attributes.
pub fn lambda_message(
    m: &aws_sdk_sqs::types::Message,
) -> aws_lambda_events::event::sqs::SqsMessage {
    let mut out = aws_lambda_events::event::sqs::SqsMessage::default();
    out.message_id = m.message_id.clone();
    out.body = m.body.clone();
    for (k, v) in m.message_attributes().cloned().unwrap_or_default() {
        let mut a = aws_lambda_events::event::sqs::SqsMessageAttribute::default();
        a.data_type = Some(v.data_type().to_string());
        a.string_value = v.string_value().map(str::to_string);
        out.message_attributes.insert(k, a);
    }
    out
}

/// An SQS message as the sweeper sends it (`{repo, prNumber}`), with this message id.
pub fn summarize_message(
    id: &str,
    repo: &str,
    number: u64,
) -> aws_lambda_events::event::sqs::SqsMessage {
    let mut m = aws_lambda_events::event::sqs::SqsMessage::default();
    m.message_id = Some(id.into());
    m.body = Some(format!(r#"{{"repo":"{repo}","prNumber":{number}}}"#));
    m
}

/// These messages as one SQS event (one Lambda invocation's batch).
pub fn sqs_batch(
    messages: Vec<aws_lambda_events::event::sqs::SqsMessage>,
) -> aws_lambda_events::event::sqs::SqsEvent {
    let mut e = aws_lambda_events::event::sqs::SqsEvent::default();
    e.records = messages;
    e
}

/// A deadline `secs` from now.
pub fn within(secs: u64) -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_secs(secs)
}

/// The stored row of `repo`#`number` (it must exist), read consistently.
pub async fn stored_row(store: &PrStore, repo: &str, number: u64) -> Item {
    store
        .get(&stages::domain::RepoName::parse(repo).unwrap(), number)
        .await
        .unwrap()
        .expect("the row exists")
}

/// The three tables of one test (PR rows, module entries, pages), each of its own, created
/// from `template.yaml`'s definitions.
#[derive(Clone)]
pub struct Tables {
    pub prs: PrStore,
    pub entries: stages::store::EntryStore,
    pub pages: stages::store::PageStore,
}

pub async fn fresh_tables(sdk: &SdkConfig) -> Tables {
    let prs = fresh_table(sdk).await;
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let id = uuid::Uuid::new_v4().simple().to_string();
    let template = devstack::template::Template::bundled().unwrap();
    for (logical, name) in [
        (
            devstack::template::ENTRIES_TABLE_ID,
            format!("entries-{id}"),
        ),
        (devstack::template::PAGES_TABLE_ID, format!("pages-{id}")),
    ] {
        template
            .table(logical)
            .unwrap()
            .create(&client, &name)
            .await
            .unwrap();
    }
    Tables {
        prs,
        entries: stages::store::EntryStore::new(client.clone(), format!("entries-{id}")),
        pages: stages::store::PageStore::new(client, format!("pages-{id}")),
    }
}

impl Tables {
    /// The summarize worker over these tables (no modules config: top-level directories).
    pub fn summarizer(
        &self,
        modules: stages::tagging::ModulesConfig,
        max_attempts: u32,
    ) -> stages::summarize::SummarizeHandler {
        stages::summarize::SummarizeHandler::new(
            self.prs.clone(),
            self.entries.clone(),
            self.pages.clone(),
            modules,
            max_attempts,
        )
    }

    /// The page builder over these tables, publishing with `publisher`, rebuilding a page at
    /// most once per `interval`.
    pub fn builder(
        &self,
        publisher: std::sync::Arc<dyn stages::publish::Publisher>,
        modules: stages::tagging::ModulesConfig,
        interval: std::time::Duration,
    ) -> stages::builder::PageBuilder {
        stages::builder::PageBuilder::new(
            self.entries.clone(),
            self.pages.clone(),
            publisher,
            modules,
            interval,
        )
        // Tests use invocations of a few seconds.
        .with_deadline_margin(std::time::Duration::from_millis(200))
    }

    /// What the summarize stage does for one entry: write it, mark its page stale (with the
    /// entry's key).
    pub async fn put_entry(&self, e: &stages::domain::ModuleEntry) {
        assert!(self.entries.put(e, 1).await.unwrap());
        self.pages
            .mark_entries_stale(
                &e.repo,
                &e.module,
                &[e.order_key()],
                time::OffsetDateTime::now_utc(),
            )
            .await
            .unwrap();
    }

    /// Every entry of one module, oldest first (a Query per year would do; a test reads all).
    pub async fn module_entries(
        &self,
        repo: &str,
        module: &str,
    ) -> Vec<stages::domain::ModuleEntry> {
        self.entries.newest(repo, module, usize::MAX).await.unwrap()
    }
}

pub fn handler(store: PrStore) -> WebhookHandler {
    WebhookHandler::new(store, Verifier::Secret(Secret::new(SECRET)), 1024 * 1024)
}

/// A request as GitHub sends it: JSON, with event, delivery GUID and a valid signature.
pub fn signed(event: &str, delivery: &str, body: impl Into<Bytes>) -> WebhookRequest {
    let body = body.into();
    let mut request = unsigned(event, delivery, body.clone());
    request.headers.insert(
        "x-hub-signature-256",
        header(&signature::sign(SECRET.as_bytes(), &body)),
    );
    request
}

pub fn unsigned(event: &str, delivery: &str, body: impl Into<Bytes>) -> WebhookRequest {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, header("application/json"));
    headers.insert(HeaderName::from_static("x-github-event"), header(event));
    headers.insert(
        HeaderName::from_static("x-github-delivery"),
        header(delivery),
    );
    WebhookRequest {
        headers,
        body: body.into(),
    }
}

pub fn header(v: &str) -> HeaderValue {
    HeaderValue::from_str(v).unwrap()
}

/// The merged-PR delivery, derived from the real `pull_request.closed.1` example (which is
/// closed without merging) by `samples::merged`.
/// Posts `payload` to a webhook URL as GitHub would (`pull_request`, signed with `secret`);
/// the answer's status.
pub async fn post_signed(
    url: &str,
    secret: &stages::secret::Secret,
    guid: &str,
    payload: &serde_json::Value,
) -> u16 {
    let body = serde_json::to_vec(payload).unwrap();
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", guid)
        .header(
            "x-hub-signature-256",
            stages::signature::sign(secret.expose().as_bytes(), &body),
        )
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

pub fn merged_payload() -> serde_json::Value {
    samples::merged(samples::webhook("pull_request.closed.1"))
}

pub async fn all_items(store: &PrStore) -> Vec<Item> {
    // A Scan is fine in a test: it proves nothing else was written anywhere in the table.
    let out = store
        .client()
        .scan()
        .table_name(store.table_name())
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    out.items.unwrap_or_default()
}

pub fn s<'a>(item: &'a Item, name: &str) -> &'a str {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .unwrap_or_else(|| panic!("no string attribute {name} in {item:?}"))
}

pub fn av_s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

/// A merged pull request as GitHub's GraphQL API shapes it (for `standins::github_standin`), with
/// `files` files under `src/mod0` … `src/mod6`, merged at the recorded fixture's time.
pub fn standin_pull(repo: &str, number: u64, files: usize) -> serde_json::Value {
    standins::github_standin::standin_pull(repo, number, files)
}
