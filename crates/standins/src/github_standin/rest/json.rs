//! The JSON the stub answers with, in the shapes of GitHub's OpenAPI description.

use super::*;

/// A 40-hex-digit, stable stand-in for a git object id.
pub(super) fn fake_sha(seed: &str) -> String {
    let mut out = String::with_capacity(40);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0u8..3 {
        for b in seed.bytes().chain([round]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out.truncate(40);
    out
}

pub(super) fn pull_json(
    fixtures: &Fixtures,
    base: &str,
    repo: &str,
    number: u64,
    spec: &PullSpec,
) -> Value {
    let (owner, name) = repo.split_once('/').unwrap();
    let mut v = fixtures.pull.clone();
    let api = format!("{base}/repos/{repo}");
    v["url"] = json!(format!("{api}/pulls/{number}"));
    v["html_url"] = json!(format!("https://github.com/{repo}/pull/{number}"));
    v["diff_url"] = json!(format!("https://github.com/{repo}/pull/{number}.diff"));
    v["patch_url"] = json!(format!("https://github.com/{repo}/pull/{number}.patch"));
    v["issue_url"] = json!(format!("{api}/issues/{number}"));
    v["commits_url"] = json!(format!("{api}/pulls/{number}/commits"));
    v["number"] = json!(number);
    v["title"] = json!(spec.title);
    v["body"] = json!(spec.body);
    // Chronicle only looks up merged PRs; the OpenAPI example says open/unmerged.
    v["state"] = json!("closed");
    v["merged"] = json!(true);
    v["commits"] = json!(spec.commits);
    v["additions"] = json!(spec.files.iter().map(|f| f.additions).sum::<u64>());
    v["deletions"] = json!(spec.files.iter().map(|f| f.deletions).sum::<u64>());
    v["changed_files"] = json!(spec.files.len());
    for side in ["base", "head"] {
        let r = &mut v[side]["repo"];
        r["full_name"] = json!(repo);
        r["name"] = json!(name);
        r["owner"]["login"] = json!(owner);
        r["html_url"] = json!(format!("https://github.com/{repo}"));
        r["url"] = json!(api);
    }
    v
}

pub(super) fn file_json(fixtures: &Fixtures, repo: &str, f: &FileSpec) -> Value {
    let head = fixtures.pull["head"]["sha"]
        .as_str()
        .unwrap_or("6dcb09b5b57875f334f61aebed695e2e4193db5e");
    let mut v = fixtures.file.clone();
    v["sha"] = json!(fake_sha(&f.filename));
    v["filename"] = json!(f.filename);
    v["status"] = json!(f.status);
    v["additions"] = json!(f.additions);
    v["deletions"] = json!(f.deletions);
    v["changes"] = json!(f.additions + f.deletions);
    v["blob_url"] = json!(format!(
        "https://github.com/{repo}/blob/{head}/{}",
        f.filename
    ));
    v["raw_url"] = json!(format!(
        "https://github.com/{repo}/raw/{head}/{}",
        f.filename
    ));
    v["contents_url"] = json!(format!(
        "https://api.github.com/repos/{repo}/contents/{}?ref={head}",
        f.filename
    ));
    if f.status == "renamed" {
        v["previous_filename"] = json!(format!("{}.old", f.filename));
    }
    if f.additions + f.deletions == 0 {
        // GitHub omits the patch when there is no textual change.
        if let Some(o) = v.as_object_mut() {
            o.remove("patch");
        }
    }
    v
}

pub(super) fn commit_json(fixtures: &Fixtures, repo: &str, number: u64, i: usize) -> Value {
    let sha = fake_sha(&format!("{repo}#{number}/commit{i}"));
    let mut v = fixtures.commit.clone();
    v["sha"] = json!(sha);
    v["url"] = json!(format!("https://api.github.com/repos/{repo}/commits/{sha}"));
    v["html_url"] = json!(format!("https://github.com/{repo}/commit/{sha}"));
    v["commit"]["message"] = json!(format!("Commit {} of #{number}", i + 1));
    v
}

pub(super) fn issue_json(
    fixtures: &Fixtures,
    base: &str,
    repo: &str,
    number: u64,
    title: &str,
    state: &str,
) -> Value {
    let mut v = fixtures.issue.clone();
    // The recorded example is of an issue that is a PR; a plain issue has no such key.
    if let Some(object) = v.as_object_mut() {
        object.remove("pull_request");
    }
    v["url"] = json!(format!("{base}/repos/{repo}/issues/{number}"));
    v["repository_url"] = json!(format!("{base}/repos/{repo}"));
    v["html_url"] = json!(format!("https://github.com/{repo}/issues/{number}"));
    v["number"] = json!(number);
    v["title"] = json!(title);
    v["state"] = json!(state);
    if state == "open" {
        v["closed_at"] = Value::Null;
        v["state_reason"] = Value::Null;
    } else {
        v["state_reason"] = json!("completed");
    }
    v
}
