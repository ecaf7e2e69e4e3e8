//! `chronicle dev --replay DIR`: sends recorded webhook deliveries to the local stack over HTTP,
//! signed with the stack's secret, and shows what each one left in the table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;
use serde_json::{json, Value};
use stages::domain::RepoName;
use stages::secret::Secret;
use stages::signature;
use stages::store::{Item, PrStore};

/// One recorded delivery: the headers GitHub sent and the exact body.
#[derive(Debug, Clone, Deserialize)]
pub struct RecordedDelivery {
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl RecordedDelivery {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a {{\"headers\", \"body\"}} delivery",
                path.display()
            )
        })
    }

    /// Headers to send: the recorded ones with the signature recomputed for `secret`
    /// (or removed when signatures are off), so a replay works whatever secret the stack uses.
    pub fn headers_for(&self, secret: Option<&Secret>) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("x-hub-signature-256"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(secret) = secret {
            headers.push((
                "X-Hub-Signature-256".into(),
                signature::sign(secret.expose().as_bytes(), self.body.as_bytes()),
            ));
        }
        headers
    }
}

/// The `*.delivery.json` files of `dir` (or of `dir/deliveries`), in name order.
pub fn delivery_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for candidate in [dir.to_path_buf(), dir.join("deliveries")] {
        let Ok(entries) = std::fs::read_dir(&candidate) else {
            continue;
        };
        for entry in entries {
            let path = entry?.path();
            if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".delivery.json"))
            {
                files.push(path);
            }
        }
    }
    files.sort();
    anyhow::ensure!(
        !files.is_empty(),
        "no *.delivery.json files in {} or {}/deliveries",
        dir.display(),
        dir.display()
    );
    Ok(files)
}

/// POSTs one delivery; returns the status and JSON answer.
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    delivery: &RecordedDelivery,
    secret: Option<&Secret>,
) -> anyhow::Result<(u16, Value)> {
    let mut request = client.post(url).body(delivery.body.clone());
    for (k, v) in delivery.headers_for(secret) {
        request = request.header(k, v);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    Ok((status, body))
}

/// One line per delivery sent, then the stored item it concerns, if any.
pub struct ReplayLine {
    pub name: String,
    pub status: u16,
    pub answer: Value,
    pub stored: Option<Value>,
}

pub async fn replay(
    dir: &Path,
    url: &str,
    secret: Option<&Secret>,
    store: &PrStore,
) -> anyhow::Result<Vec<ReplayLine>> {
    let client = reqwest::Client::new();
    let mut lines = Vec::new();
    for path in delivery_files(dir)? {
        let delivery = RecordedDelivery::load(&path)?;
        let (status, answer) = send(&client, url, &delivery, secret).await?;
        let stored = match (
            answer.get("repo").and_then(Value::as_str),
            answer.get("prNumber").and_then(Value::as_u64),
        ) {
            (Some(repo), Some(number)) => store
                .get(&RepoName::parse(repo)?, number)
                .await?
                .map(|i| item_json(&i)),
            _ => None,
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .trim_end_matches(".delivery.json")
            .to_string();
        lines.push(ReplayLine {
            name,
            status,
            answer,
            stored,
        });
    }
    Ok(lines)
}

pub fn print(lines: &[ReplayLine]) {
    for line in lines {
        println!("{:<24} -> {} {}", line.name, line.status, line.answer);
        if let Some(stored) = &line.stored {
            println!("{:<24}    stored: {}", "", stored);
        }
    }
}

/// An item as plain JSON for people to read; long strings are shortened.
pub fn item_json(item: &Item) -> Value {
    let map: serde_json::Map<String, Value> = item
        .iter()
        .map(|(k, v)| (k.clone(), value_json(v)))
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    Value::Object(map)
}

fn value_json(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::S(s) if s.chars().count() > 60 => {
            json!(format!("{}…", s.chars().take(60).collect::<String>()))
        }
        AttributeValue::S(s) => json!(s),
        AttributeValue::N(n) => n
            .parse::<i64>()
            .map(|i| json!(i))
            .or_else(|_| n.parse::<f64>().map(|f| json!(f)))
            .unwrap_or_else(|_| json!(n)),
        AttributeValue::Bool(b) => json!(b),
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::L(l) => Value::Array(l.iter().map(value_json).collect()),
        AttributeValue::M(m) => item_json(m),
        AttributeValue::Ss(ss) => json!(ss),
        other => json!(format!("{other:?}")),
    }
}

/// Waits until every PR the replay stored is summarized and its module pages are built (the
/// stack's sweeper, worker and page builder run in the background), then prints each page.
pub async fn follow_to_narratives(
    stack: &crate::dev::DevStack,
    lines: &[ReplayLine],
    limit: std::time::Duration,
) -> anyhow::Result<()> {
    use stages::store::attr;
    let mut keys: Vec<(RepoName, u64)> = Vec::new();
    for line in lines {
        if let (Some(repo), Some(number)) = (
            line.answer.get("repo").and_then(Value::as_str),
            line.answer.get("prNumber").and_then(Value::as_u64),
        ) {
            let key = (RepoName::parse(repo)?, number);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    if keys.is_empty() {
        return Ok(());
    }
    println!(
        "waiting for the pipeline (enrich, sweep, summarize, build) to publish {} PR(s)…",
        keys.len()
    );
    let give_up = std::time::Instant::now() + limit;
    let publisher = stages::publish::MarkdownPublisher::new(stack.output_dir());
    for (repo, number) in keys {
        let modules = loop {
            let item = stack
                .store()
                .get(&repo, number)
                .await?
                .ok_or_else(|| anyhow::anyhow!("{repo}#{number} disappeared"))?;
            if let Some(reason) = item.get(attr::FAILED_REASON).and_then(|v| v.as_s().ok()) {
                anyhow::bail!("{repo}#{number} failed: {reason}");
            }
            if item.contains_key(attr::SUMMARIZED_AT) {
                let modules: Vec<String> = match item.get(attr::MODULES) {
                    Some(AttributeValue::L(l)) => {
                        l.iter().filter_map(|m| m.as_s().ok().cloned()).collect()
                    }
                    _ => Vec::new(),
                };
                break modules;
            }
            anyhow::ensure!(
                std::time::Instant::now() < give_up,
                "{repo}#{number} was not summarized within {limit:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        };
        for module in modules {
            // Built: no longer stale (the builder cleared the marker after publishing).
            loop {
                let page = stack.pages().get(repo.as_str(), &module).await?;
                if let Some(page) = &page {
                    if let Some(error) = &page.last_error {
                        anyhow::bail!("the page of {repo} {module} failed to build: {error}");
                    }
                    if page.stale.is_none() && page.last_built_at.is_some() {
                        break;
                    }
                }
                anyhow::ensure!(
                    std::time::Instant::now() < give_up,
                    "the page of {repo} {module} was not built within {limit:?}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            let key = stages::pages::DocKey::Module {
                repo: repo.to_string(),
                module: module.clone(),
            };
            if stack.output_dir().starts_with("s3://") {
                println!("published {}{}", stack.output_dir(), key.path());
                continue;
            }
            let path = publisher.page_path(&key);
            println!("\n--- {} ---", path.display());
            print!(
                "{}",
                std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?
            );
        }
    }
    Ok(())
}
