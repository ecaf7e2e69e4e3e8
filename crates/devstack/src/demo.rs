//! The built-in GitHub stand-in of `chronicle dev --replay DIR` when no `GITHUB_TOKEN` is set:
//! it serves the replayed PRs with the files recorded beside the deliveries
//! (`DIR/github-files.json`), so the first page a newcomer sees is a real module page (its
//! paths, who knows it, the story), not one named after the repository with "Paths: not known".

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;
use stages::domain::FileChange;

use crate::replay::{delivery_files, RecordedDelivery};
use standins::github_standin::{pull_json, GitHubStandIn};
use standins::synthetic::SyntheticPr;

/// The recorded files, by `owner/repo#N` (keys starting with `_` are notes).
pub const FILES: &str = "github-files.json";
/// The stand-in's token (it accepts no other).
pub const TOKEN: &str = "ghp_chronicle_demo_standin";

/// The stand-in serving every merged PR of `dir`'s deliveries that [`FILES`] lists; `None`
/// when `dir` has no such file.
pub async fn standin_for(dir: &Path) -> anyhow::Result<Option<GitHubStandIn>> {
    let Some(path) = [dir.join(FILES), dir.join("..").join(FILES)]
        .into_iter()
        .find(|p| p.is_file())
    else {
        return Ok(None);
    };
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let listed: BTreeMap<String, Value> = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a map of OWNER/REPO#N to files", path.display()))?;
    let mut files: BTreeMap<String, Vec<FileChange>> = BTreeMap::new();
    for (key, value) in listed.into_iter().filter(|(k, _)| !k.starts_with('_')) {
        let changes: Vec<FileChange> = serde_json::from_value(value)
            .with_context(|| format!("{}: {key}: not a list of files", path.display()))?;
        files.insert(key, changes);
    }
    let standin = GitHubStandIn::start(TOKEN).await?;
    for file in delivery_files(dir)? {
        let delivery = RecordedDelivery::load(&file)?;
        let Ok(event) = serde_json::from_str::<Value>(&delivery.body) else {
            continue;
        };
        let pr = &event["pull_request"];
        let (Some(repo), Some(number)) = (
            event["repository"]["full_name"].as_str(),
            pr["number"].as_u64(),
        ) else {
            continue;
        };
        let (Some(changes), Some(merged_at)) = (
            files.get(&format!("{repo}#{number}")),
            pr["merged_at"].as_str().and_then(rfc3339),
        ) else {
            continue;
        };
        let synthetic = SyntheticPr {
            number,
            title: pr["title"].as_str().unwrap_or_default().to_string(),
            body: pr["body"].as_str().unwrap_or_default().to_string(),
            author: pr["user"]["login"].as_str().unwrap_or("ghost").to_string(),
            labels: pr["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l["name"].as_str().map(str::to_string))
                .collect(),
            merged_at,
            files: changes.clone(),
            reviewers: Vec::new(),
            comments: 0,
        };
        let created_at = pr["created_at"]
            .as_str()
            .and_then(rfc3339)
            .unwrap_or(merged_at);
        // Later deliveries of one PR (an edit) replace what the earlier ones put.
        standin.put_pull(repo, pull_json(repo, &synthetic, created_at, &[]));
    }
    Ok(Some(standin))
}

fn rfc3339(text: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}
