//! What crosses a queue between two stages, in one place that both the producer and the
//! consumer use: the sweeper sends a [`SummarizeMessage`], the summarize worker parses it.
//! Messages carry keys only; every worker re-reads the row.

use serde::{Deserialize, Serialize};

use crate::{InvalidRepoName, RepoName};

/// The summarize queue's message: a PR's keys, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SummarizeMessage {
    pub repo: String,
    pub pr_number: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error("not a summarize message: {0}")]
    Shape(#[from] serde_json::Error),
    #[error(transparent)]
    Repo(#[from] InvalidRepoName),
}

impl SummarizeMessage {
    pub fn new(repo: &RepoName, pr_number: u64) -> Self {
        SummarizeMessage {
            repo: repo.to_string(),
            pr_number,
        }
    }

    /// The message's body, as the queue carries it.
    pub fn body(&self) -> String {
        serde_json::to_string(self).expect("a message of two keys always serializes")
    }

    /// A body read off the queue: untrusted until its keys are valid.
    pub fn parse(body: &str) -> Result<(RepoName, u64), MessageError> {
        let m: SummarizeMessage = serde_json::from_str(body)?;
        let repo = RepoName::parse(&m.repo)?;
        Ok((repo, m.pr_number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_keys_only() {
        let body = SummarizeMessage::new(&RepoName::parse("o/r").unwrap(), 7).body();
        assert_eq!(body, r#"{"repo":"o/r","prNumber":7}"#);
        assert_eq!(SummarizeMessage::parse(&body).unwrap().1, 7);
        assert!(SummarizeMessage::parse("{}").is_err());
        assert!(SummarizeMessage::parse(r#"{"repo":"bad","prNumber":1}"#).is_err());
        assert!(SummarizeMessage::parse(r#"{"repo":"o/r","prNumber":1,"body":"x"}"#).is_err());
    }
}
