//! `GET /repos/{owner}/{repo}/contents/{path}`: files and directory listings, with ETags and
//! conditional requests as GitHub answers them.

use super::*;

/// `GET …/contents/{path}` as GitHub answers it: a file as JSON (base64 content) or, with
/// `Accept: application/vnd.github.raw+json`, as its bytes; a directory as a JSON array of its
/// entries; 404 for anything else. Every answer carries an ETag, and a request whose
/// `If-None-Match` names the current one gets 304 with no body.
pub(super) fn contents(st: &State, headers: &HeaderMap, repo: &str, path: &str) -> Answer {
    use base64::Engine as _;
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let raw = accept.contains("application/vnd.github.raw");
    let if_none_match = headers.get("if-none-match").and_then(|v| v.to_str().ok());
    let tagged = |answer: Answer, etag: String| {
        if if_none_match == Some(etag.as_str()) {
            let mut not_modified = Answer::json(StatusCode::NOT_MODIFIED, Value::Null);
            not_modified.headers.push(("etag", etag));
            return not_modified;
        }
        answer.header("etag", etag)
    };
    if let Some(text) = st.files.get(&(repo.to_string(), path.to_string())) {
        let sha = fake_sha(text);
        // One ETag per representation, as GitHub varies them.
        let etag = format!("W/\"{}{sha}\"", if raw { "raw-" } else { "" });
        if raw {
            let mut answer = Answer::json(StatusCode::OK, Value::Null);
            answer.raw = Some((
                text.clone(),
                "application/vnd.github.raw+json; charset=utf-8",
            ));
            return tagged(answer, etag);
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        let body = json!({
            "type": "file",
            "encoding": "base64",
            "size": text.len(),
            "name": name,
            "path": path,
            "sha": sha,
            "content": base64::engine::general_purpose::STANDARD.encode(text),
        });
        return tagged(Answer::json(StatusCode::OK, body), etag);
    }
    // A directory: the direct children of `path` among the repository's files.
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{path}/")
    };
    let mut entries: std::collections::BTreeMap<String, &'static str> = Default::default();
    for ((r, p), _) in st.files.iter() {
        if r != repo {
            continue;
        }
        if let Some(rest) = p.strip_prefix(&prefix) {
            match rest.split_once('/') {
                Some((dir, _)) => entries.insert(dir.to_string(), "dir"),
                None => entries.insert(rest.to_string(), "file"),
            };
        }
    }
    if entries.is_empty() {
        return not_found();
    }
    // GitHub lists at most 1,000 entries of a directory.
    let list: Vec<Value> = entries
        .iter()
        .take(1000)
        .map(|(name, kind)| {
            json!({
                "type": kind,
                "name": name,
                "path": format!("{prefix}{name}"),
                "sha": fake_sha(&format!("{repo}/{prefix}{name}")),
            })
        })
        .collect();
    let etag = format!(
        "W/\"{}\"",
        fake_sha(&serde_json::to_string(&list).unwrap_or_default())
    );
    tagged(Answer::json(StatusCode::OK, Value::Array(list)), etag)
}
