//! What the stub answers: a status, headers and a body, and GitHub's error answers (not found,
//! the primary and secondary rate limits, validation failures) in its documented shapes.

use super::*;

/// What the stub answers, before the common headers are added.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) body: Value,
    /// A body sent as is instead of `body` (a raw file), with its content type.
    pub(super) raw: Option<(String, &'static str)>,
    pub(super) headers: Vec<(&'static str, String)>,
    /// `x-ratelimit-remaining: 0` and this reset instead of the counter.
    pub(super) exhausted_until: Option<u64>,
}

impl Answer {
    pub(super) fn json(status: StatusCode, body: Value) -> Answer {
        Answer {
            status,
            body,
            raw: None,
            headers: Vec::new(),
            exhausted_until: None,
        }
    }

    pub(super) fn error(status: StatusCode, message: &str) -> Answer {
        Answer::json(
            status,
            json!({
                "message": message,
                "documentation_url": DOCS,
                "status": status.as_u16().to_string(),
            }),
        )
    }

    pub(super) fn header(mut self, name: &'static str, value: impl Into<String>) -> Answer {
        self.headers.push((name, value.into()));
        self
    }
}

pub(super) fn not_found() -> Answer {
    Answer::error(StatusCode::NOT_FOUND, "Not Found")
}

pub(super) fn secondary_limit(retry_after_secs: u64) -> Answer {
    Answer::json(
        StatusCode::TOO_MANY_REQUESTS,
        json!({
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes \
                        before you try again. If you reach out to GitHub Support for help, \
                        please include the request ID.",
            "documentation_url": format!("{RATE_LIMIT_DOCS}#about-secondary-rate-limits"),
            "status": "429",
        }),
    )
    .header("retry-after", retry_after_secs.to_string())
}

pub(super) fn primary_limit(reset_epoch: u64) -> Answer {
    let mut answer = Answer::json(
        StatusCode::FORBIDDEN,
        json!({
            "message": "API rate limit exceeded for user ID 1. If you reach out to GitHub \
                        Support for help, please include the request ID.",
            "documentation_url": format!("{RATE_LIMIT_DOCS}#about-the-primary-rate-limit"),
            "status": "403",
        }),
    );
    answer.exhausted_until = Some(reset_epoch);
    answer
}

pub(super) fn validation_failed(field: &str, resource: &str) -> Answer {
    Answer::json(
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({
            "message": "Validation Failed",
            "errors": [{ "resource": resource, "field": field, "code": "invalid" }],
            "documentation_url": DOCS,
            "status": "422",
        }),
    )
}
