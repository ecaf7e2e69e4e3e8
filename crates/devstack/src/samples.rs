//! The real GitHub payloads shipped in `tests/fixtures` and the merged variants derived from them
//! (none of the recorded `pull_request` examples is merged), for tests and benchmarks.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::emulator::repo_root;

pub fn fixtures_dir() -> PathBuf {
    repo_root().join("tests/fixtures/github")
}

/// A recorded webhook payload, e.g. `webhook("pull_request.closed.1")`.
pub fn webhook(name: &str) -> Value {
    let path = fixtures_dir().join("webhooks").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The names of every recorded `pull_request` example, sorted.
pub fn pull_request_examples() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir().join("webhooks"))
        .expect("fixtures directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("pull_request.") && n.ends_with(".json"))
        .map(|n| n.trim_end_matches(".json").to_string())
        .collect();
    names.sort();
    names
}

/// Turns a real `pull_request` payload into the delivery GitHub sends when the PR is merged:
/// `action: closed`, `merged: true`, `merged_at` (the example's `closed_at`, else `updated_at`),
/// `merged_by`, `merge_commit_sha`, not a draft. Everything else stays as recorded.
pub fn merged(mut payload: Value) -> Value {
    let pr = &mut payload["pull_request"];
    let merged_at = pr
        .get("closed_at")
        .filter(|v| !v.is_null())
        .or_else(|| pr.get("updated_at"))
        .cloned()
        .unwrap_or(Value::Null);
    pr["merged"] = json!(true);
    pr["merged_at"] = merged_at;
    pr["merged_by"] = pr["user"].clone();
    pr["merge_commit_sha"] = json!("c4295bd74fb0f4fda03689c3df3f2803b658fd85");
    pr["draft"] = json!(false);
    pr["state"] = json!("closed");
    payload["action"] = json!("closed");
    payload
}
