//! A webhook's deliveries (GitHub REST): list them (cursor-paginated, newest first), read one's
//! payload, and ask for a redelivery (`POST …/deliveries/{id}/attempts`, answered 202).

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde::Deserialize;

use super::rest::{decode, next_link, on_api, GitHubClient, GitHubError, DEADLINE_MARGIN};
use chronicle_domain::error::error_chain;
use chronicle_domain::hook::HookRef;

/// GitHub lists at most this many deliveries per page.
pub const DELIVERIES_PER_PAGE: usize = 100;

/// One delivery attempt as GitHub lists it. A redelivery is a new attempt with the same `guid`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HookDelivery {
    pub id: u64,
    pub guid: String,
    pub delivered_at: String,
    #[serde(default)]
    pub redelivery: bool,
    /// `0` when no HTTP answer came (timeout, connection refused).
    #[serde(default)]
    pub status_code: u16,
    #[serde(default)]
    pub status: String,
    pub event: String,
    #[serde(default)]
    pub action: Option<String>,
}

impl HookDelivery {
    /// Whether the receiver answered 2xx: nothing to redeliver.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status_code)
    }
}

/// One page of deliveries, with the next page's URL and the REST budget left.
#[derive(Debug, Clone)]
pub struct DeliveryPage {
    pub deliveries: Vec<HookDelivery>,
    pub next: Option<String>,
    pub rate_remaining: Option<u64>,
}

/// What GitHub said to a redelivery request.
#[derive(Debug)]
pub enum Redelivery {
    /// 202: GitHub will deliver it again, with the same GUID.
    Accepted,
    /// 400 or 422: GitHub will not (too old, malformed). Final.
    Refused { status: u16, message: String },
    /// 401, 403 (not a rate limit) or 404: the token may not redeliver (it needs write access
    /// to the hook), or the hook is gone. Nothing was done.
    NoAccess { status: u16, message: String },
    /// A 5xx or a rate limit: certainly not done; may be asked again later.
    NotDone(String),
    /// The request went out but no answer came: GitHub may have redelivered it.
    Unknown(String),
}

impl GitHubClient {
    /// A page of `hook`'s deliveries: the first (`next` = `None`) or the one a previous page's
    /// `Link` named. A `Link` off the configured API host is not followed.
    pub async fn hook_deliveries(
        &self,
        hook: &HookRef,
        next: Option<&str>,
        deadline: Instant,
    ) -> Result<DeliveryPage, GitHubError> {
        let path = format!("{}/deliveries", hook.api_path());
        let url = match next {
            Some(url) => url.to_string(),
            None => format!("{}{path}?per_page={DELIVERIES_PER_PAGE}", self.base),
        };
        let (_, body, headers) = self.get_with(&url, &path, deadline, None, None).await?;
        let deliveries: Vec<HookDelivery> = decode(&path, &body)?;
        let next = next_link(&headers).filter(|url| on_api(url, &self.base));
        let rate_remaining = headers
            .get("x-ratelimit-remaining")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        Ok(DeliveryPage {
            deliveries,
            next,
            rate_remaining,
        })
    }

    /// The JSON payload GitHub sent in delivery `id` (`request.payload`).
    pub async fn hook_delivery_payload(
        &self,
        hook: &HookRef,
        id: u64,
        deadline: Instant,
    ) -> Result<serde_json::Value, GitHubError> {
        #[derive(Deserialize)]
        struct Detail {
            request: Request,
        }
        #[derive(Deserialize)]
        struct Request {
            payload: serde_json::Value,
        }
        let path = format!("{}/deliveries/{id}", hook.api_path());
        let url = format!("{}{path}", self.base);
        let (_, body, _) = self.get_with(&url, &path, deadline, None, None).await?;
        let detail: Detail = decode(&path, &body)?;
        Ok(detail.request.payload)
    }

    /// Asks GitHub to deliver `id` again. One request, never retried here: a retry after an
    /// answer that did not arrive could redeliver twice.
    pub async fn redeliver(&self, hook: &HookRef, id: u64, deadline: Instant) -> Redelivery {
        let path = format!("{}/deliveries/{id}/attempts", hook.api_path());
        let left = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(DEADLINE_MARGIN);
        if left.is_zero() {
            return Redelivery::NotDone(format!("no time left for {path}"));
        }
        let token = match self.auth.bearer().await {
            Ok(token) => token,
            Err(e) => return Redelivery::NotDone(e.to_string()),
        };
        let sent = self
            .http
            .post(format!("{}{path}", self.base))
            .header(
                reqwest::header::AUTHORIZATION,
                crate::installation::sensitive_bearer(&token),
            )
            .timeout(left.min(self.timeout))
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            // Refused before anything was sent: certainly not done.
            Err(e) if e.is_connect() => return Redelivery::NotDone(error_chain(&e)),
            Err(e) => return Redelivery::Unknown(error_chain(&e)),
        };
        let status = response.status();
        if status == StatusCode::ACCEPTED || status.is_success() {
            return Redelivery::Accepted;
        }
        let limited = super::rest::rate_limit_wait(status, response.headers()).is_some();
        let message = super::rest::response_message(response).await;
        let said = format!("GitHub answered {status} for {path}: {message}");
        if limited || super::rest::names_secondary_limit(&message) {
            return Redelivery::NotDone(said);
        }
        match status {
            // A gateway's error may hide a request GitHub did queue.
            StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => Redelivery::Unknown(said),
            s if s.is_server_error() => Redelivery::NotDone(said),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND => {
                Redelivery::NoAccess {
                    status: status.as_u16(),
                    message,
                }
            }
            _ => Redelivery::Refused {
                status: status.as_u16(),
                message,
            },
        }
    }
}

/// How far back GitHub lets a delivery be redelivered.
pub const REDELIVERY_WINDOW: Duration = Duration::from_secs(3 * 24 * 3600);
