//! The GitHub webhook payload model: the parts of a `pull_request` delivery Chronicle reads,
//! and the decision whether a delivery is ours.

use serde::Deserialize;
use time::OffsetDateTime;

use chronicle_domain::{InvalidRepoName, MergedPullRequest, RepoName};

/// Actions of `pull_request` events that can carry a merged PR we store or update.
pub const OUR_ACTIONS: &[&str] = &["closed", "edited", "labeled", "unlabeled"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("malformed JSON: {0}")]
    MalformedJson(String),
    #[error("missing field `{0}`")]
    MissingField(String),
    #[error("invalid field `{field}`: {message}")]
    InvalidField { field: String, message: String },
}

/// What a `pull_request` delivery means to Chronicle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Classified {
    Merged(Box<MergedPullRequest>),
    /// Not ours; the reason is returned to GitHub as `{"ignored": reason}`.
    Ignored(String),
}

#[derive(Deserialize)]
struct ActionOnly {
    action: Option<String>,
}

#[derive(Deserialize)]
struct PullRequestEvent {
    pull_request: PullRequestPayload,
    repository: RepositoryPayload,
    /// Present on a GitHub App's deliveries.
    #[serde(default)]
    installation: Option<InstallationPayload>,
}

#[derive(Deserialize)]
struct InstallationPayload {
    id: u64,
}

#[derive(Deserialize)]
struct PullRequestPayload {
    number: u64,
    title: String,
    body: Option<String>,
    user: UserPayload,
    #[serde(default)]
    labels: Vec<LabelPayload>,
    html_url: String,
    base: BasePayload,
    #[serde(default)]
    draft: bool,
    #[serde(default)]
    merged: bool,
    #[serde(default, with = "time::serde::rfc3339::option")]
    merged_at: Option<OffsetDateTime>,
    merge_commit_sha: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    updated_at: OffsetDateTime,
}

#[derive(Deserialize)]
struct UserPayload {
    login: String,
}

#[derive(Deserialize)]
struct LabelPayload {
    name: String,
}

#[derive(Deserialize)]
struct BasePayload {
    #[serde(rename = "ref")]
    ref_name: String,
}

#[derive(Deserialize)]
struct RepositoryPayload {
    full_name: String,
}

/// The `action` of a delivery, read on its own (every other field is skipped).
pub fn action_of(json: &[u8]) -> Result<String, PayloadError> {
    let ActionOnly { action } = parse::<ActionOnly>(json)?;
    action.ok_or_else(|| PayloadError::MissingField("action".into()))
}

/// Reads a `pull_request` delivery's JSON and decides whether it is ours.
///
/// Only the `action` is read from deliveries that are not ours, so a malformed field in an
/// event we ignore cannot turn into an error.
pub fn classify_pull_request(json: &[u8]) -> Result<Classified, PayloadError> {
    classify_action(&action_of(json)?, json)
}

/// As [`classify_pull_request`], for a caller that has already read the `action`.
pub fn classify_action(action: &str, json: &[u8]) -> Result<Classified, PayloadError> {
    if !OUR_ACTIONS.contains(&action) {
        return Ok(Classified::Ignored(format!(
            "pull_request action `{action}` is not tracked"
        )));
    }
    let event: PullRequestEvent = parse(json)?;
    let pr = event.pull_request;
    if !pr.merged {
        let why = if action == "closed" {
            "pull request closed without merging"
        } else {
            "pull request is not merged"
        };
        return Ok(Classified::Ignored(why.into()));
    }
    if pr.draft {
        return Ok(Classified::Ignored("pull request is a draft".into()));
    }
    let merged_at = pr
        .merged_at
        .ok_or_else(|| PayloadError::MissingField("pull_request.merged_at".into()))?;
    let merge_commit_sha = pr
        .merge_commit_sha
        .filter(|s| !s.is_empty())
        .ok_or_else(|| PayloadError::MissingField("pull_request.merge_commit_sha".into()))?;
    let repo = RepoName::parse(&event.repository.full_name).map_err(|InvalidRepoName(name)| {
        PayloadError::InvalidField {
            field: "repository.full_name".into(),
            message: format!("{name:?} is not owner/name"),
        }
    })?;
    Ok(Classified::Merged(Box::new(MergedPullRequest {
        repo,
        number: pr.number,
        title: pr.title,
        body: pr.body,
        author: pr.user.login,
        labels: pr.labels.into_iter().map(|l| l.name).collect(),
        url: pr.html_url,
        base_ref: pr.base.ref_name,
        merge_commit_sha,
        merged_at,
        source_updated_at: pr.updated_at,
        installation: event.installation.map(|i| i.id),
    })))
}

/// Deserializes with the path of the offending field in the error (`pull_request.user.login`).
pub(crate) fn parse<'de, T: Deserialize<'de>>(json: &'de [u8]) -> Result<T, PayloadError> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| to_payload_error(&e))?;
    de.end()
        .map_err(|e| PayloadError::MalformedJson(e.to_string()))?;
    Ok(value)
}

fn to_payload_error(err: &serde_path_to_error::Error<serde_json::Error>) -> PayloadError {
    let inner = err.inner();
    if inner.is_syntax() || inner.is_eof() {
        return PayloadError::MalformedJson(inner.to_string());
    }
    let path = err.path().to_string();
    let message = inner.to_string();
    // serde reports a missing field as "missing field `x`" at the parent's path.
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or_default();
        let full = if path == "." || path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        };
        return PayloadError::MissingField(full);
    }
    // `null` where a value is required reads as a missing field to a webhook sender.
    if message.starts_with("invalid type: null") {
        return PayloadError::MissingField(path);
    }
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or(&message)
        .to_string();
    PayloadError::InvalidField {
        field: path,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged() -> serde_json::Value {
        json!({
            "action": "closed",
            "pull_request": {
                "number": 7, "title": "feat: x", "body": null, "user": {"login": "octo"},
                "labels": [{"name": "bug"}], "html_url": "https://github.com/o/r/pull/7",
                "base": {"ref": "main"}, "draft": false, "merged": true,
                "merged_at": "2024-01-02T03:04:05Z", "merge_commit_sha": "abc",
                "updated_at": "2024-01-02T03:04:06Z"
            },
            "repository": {"full_name": "o/r"}
        })
    }

    fn classify(v: &serde_json::Value) -> Result<Classified, PayloadError> {
        classify_pull_request(v.to_string().as_bytes())
    }

    #[test]
    fn merged_pr_is_ours() {
        let Classified::Merged(pr) = classify(&merged()).unwrap() else {
            panic!("not merged")
        };
        assert_eq!(
            (pr.repo.as_str(), pr.number, pr.body.as_deref()),
            ("o/r", 7, None)
        );
        assert_eq!(pr.labels, vec!["bug".to_string()]);
        assert_eq!(pr.installation, None, "a repository webhook names none");
    }

    #[test]
    fn an_apps_delivery_names_its_installation() {
        let mut v = merged();
        v["installation"] =
            json!({"id": 31, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMzE="});
        let Classified::Merged(pr) = classify(&v).unwrap() else {
            panic!("not merged")
        };
        assert_eq!(pr.installation, Some(31));
        v["installation"] = json!({"id": "31"});
        assert!(
            matches!(classify(&v), Err(PayloadError::InvalidField { field, .. }) if field == "installation.id")
        );
    }

    #[test]
    fn missing_and_invalid_fields_are_named() {
        let mut v = merged();
        v["pull_request"].as_object_mut().unwrap().remove("title");
        assert_eq!(
            classify(&v),
            Err(PayloadError::MissingField("pull_request.title".into()))
        );

        let mut v = merged();
        v["pull_request"]["merged_at"] = json!(null);
        assert_eq!(
            classify(&v),
            Err(PayloadError::MissingField("pull_request.merged_at".into()))
        );

        let mut v = merged();
        v["pull_request"]["user"]["login"] = json!(null);
        assert_eq!(
            classify(&v),
            Err(PayloadError::MissingField("pull_request.user.login".into()))
        );

        let mut v = merged();
        v["pull_request"]["updated_at"] = json!("yesterday");
        assert!(
            matches!(classify(&v), Err(PayloadError::InvalidField { field, .. }) if field == "pull_request.updated_at")
        );

        let mut v = merged();
        v.as_object_mut().unwrap().remove("action");
        assert_eq!(
            classify(&v),
            Err(PayloadError::MissingField("action".into()))
        );

        assert!(matches!(
            classify_pull_request(b"{\"action\": "),
            Err(PayloadError::MalformedJson(_))
        ));
        assert!(matches!(
            classify_pull_request(b"{} trailing"),
            Err(PayloadError::MalformedJson(_))
        ));
    }

    #[test]
    fn not_ours_is_ignored_without_reading_the_rest() {
        // An `opened` event with a broken pull_request is still only ignored.
        let v = json!({"action": "opened", "pull_request": 5});
        assert!(matches!(classify(&v), Ok(Classified::Ignored(r)) if r.contains("opened")));
        let mut v = merged();
        v["pull_request"]["merged"] = json!(false);
        assert!(
            matches!(classify(&v), Ok(Classified::Ignored(r)) if r.contains("without merging"))
        );
        let mut v = merged();
        v["pull_request"]["draft"] = json!(true);
        assert!(matches!(classify(&v), Ok(Classified::Ignored(r)) if r.contains("draft")));
    }
}
