//! The stand-in's repository webhooks and their deliveries, as GitHub's REST API serves them:
//!
//! * `GET /repos/{o}/{r}/hooks/{id}/deliveries`: newest first, cursor-paginated (`per_page`
//!   1..=100, default 30; `cursor` only as a previous `Link` gave it; any other parameter → 422),
//!   with a `Link: <…>; rel="next"` while more remain;
//! * `GET …/deliveries/{delivery_id}`: one attempt with `request.payload`;
//! * `POST …/deliveries/{delivery_id}/attempts`: 202, then the payload is delivered again to the
//!   hook's URL with the **same GUID** and a fresh signature, in the background (the 202 does
//!   not wait for it), and the answer recorded as a new attempt (`redelivery: true`); a delivery older than [`REDELIVERY_WINDOW_SECS`] is refused
//!   with 422. The method must match (GET on `/attempts`, POST elsewhere → 404, as GitHub).
//!
//! A token without access to a hook (see [`GitHubStandIn::forbid_hooks`]) gets 404, as GitHub
//! answers for a hook the token may not administer. Unknown hooks and deliveries → 404.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::{epoch_secs, not_found, validation_failed, Answer, GitHubStandIn, State, MAX_PER_PAGE};

/// GitHub redelivers deliveries of the last three days only.
pub const REDELIVERY_WINDOW_SECS: u64 = 3 * 24 * 3600;
const DEFAULT_PER_PAGE: usize = 30;

/// A delivery to register: what GitHub recorded of one attempt.
#[derive(Clone, Debug)]
pub struct DeliverySpec {
    pub guid: String,
    /// Seconds before now that it was delivered.
    pub age_secs: u64,
    /// The receiver's answer; 0 for none (timeout, connection refused).
    pub status_code: u16,
    pub event: String,
    pub action: Option<String>,
    pub payload: Value,
}

/// One attempt as the stub holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct StubAttempt {
    pub id: u64,
    pub guid: String,
    pub delivered_at: u64,
    pub status_code: u16,
    pub redelivery: bool,
}

#[derive(Clone, Debug)]
struct Attempt {
    seen: StubAttempt,
    event: String,
    action: Option<String>,
    payload: Value,
}

#[derive(Default)]
struct Hook {
    /// Where a redelivery is sent, and the secret it is signed with.
    target: Option<(String, String)>,
    forbidden: bool,
    attempts: Vec<Attempt>,
}

/// The registered GitHub App: its id, the public half of its key, its hook's id.
struct App {
    id: String,
    public_key_pem: String,
    hook_id: u64,
}

/// The `repo` under which the app's hook is kept.
const APP: &str = "(app)";

#[derive(Default)]
pub(super) struct Hooks {
    hooks: HashMap<(String, u64), Hook>,
    app: Option<App>,
    next_id: u64,
    /// Redeliveries accepted and not yet sent: (repo, hook, attempt).
    queued: Vec<(String, u64, Attempt)>,
    /// Accepted redelivery requests, by GUID.
    asked: HashMap<String, usize>,
}

impl Hooks {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        // Ids like GitHub's: large, increasing.
        12_000_000_000 + self.next_id
    }
}

impl GitHubStandIn {
    /// Registers hook `id` of `repo`; with a `target`, redeliveries are POSTed to that URL,
    /// signed with the secret.
    pub fn add_hook(&self, repo: &str, id: u64, target: Option<(&str, &str)>) {
        super::check_repo(repo);
        let mut st = self.rest();
        let hook = st.hooks.hooks.entry((repo.to_string(), id)).or_default();
        hook.target = target.map(|(url, secret)| (url.to_string(), secret.to_string()));
    }

    /// Registers a GitHub App (its id and public key, PEM) and its hook `hook_id`: its routes
    /// (`/app/hook/…`) take only a JWT the app signed (RS256, `iss` = the id, at most ten
    /// minutes long, not expired). Its deliveries are added with [`Self::add_app_delivery`].
    pub fn add_app_hook(
        &self,
        app_id: &str,
        public_key_pem: &str,
        hook_id: u64,
        target: Option<(&str, &str)>,
    ) {
        let mut st = self.rest();
        st.hooks.app = Some(App {
            id: app_id.to_string(),
            public_key_pem: public_key_pem.to_string(),
            hook_id,
        });
        let hook = st
            .hooks
            .hooks
            .entry((APP.to_string(), hook_id))
            .or_default();
        hook.target = target.map(|(url, secret)| (url.to_string(), secret.to_string()));
    }

    /// Records an attempt of the app's hook; returns its delivery id.
    pub fn add_app_delivery(&self, spec: DeliverySpec) -> u64 {
        let hook_id = self
            .rest()
            .hooks
            .app
            .as_ref()
            .expect("add_app_hook first")
            .hook_id;
        self.add_delivery(APP, hook_id, spec)
    }

    /// The token loses access to the repository's hooks (no `admin:repo_hook`): 404s.
    pub fn forbid_hooks(&self, repo: &str, id: u64) {
        let mut st = self.rest();
        if let Some(hook) = st.hooks.hooks.get_mut(&(repo.to_string(), id)) {
            hook.forbidden = true;
        }
    }

    /// Records an attempt of hook `id`; returns its delivery id.
    pub fn add_delivery(&self, repo: &str, id: u64, spec: DeliverySpec) -> u64 {
        if repo != APP {
            super::check_repo(repo);
        }
        let mut st = self.rest();
        let delivery_id = st.hooks.next_id();
        let attempt = Attempt {
            seen: StubAttempt {
                id: delivery_id,
                guid: spec.guid,
                delivered_at: epoch_secs().saturating_sub(spec.age_secs),
                status_code: spec.status_code,
                redelivery: false,
            },
            event: spec.event,
            action: spec.action,
            payload: spec.payload,
        };
        st.hooks
            .hooks
            .get_mut(&(repo.to_string(), id))
            .expect("add_hook first")
            .attempts
            .push(attempt);
        delivery_id
    }

    /// Every attempt of hook `id`, oldest first.
    pub fn attempts(&self, repo: &str, id: u64) -> Vec<StubAttempt> {
        let st = self.rest();
        st.hooks
            .hooks
            .get(&(repo.to_string(), id))
            .map(|h| h.attempts.iter().map(|a| a.seen.clone()).collect())
            .unwrap_or_default()
    }

    /// How many redeliveries of `guid` GitHub accepted.
    pub fn redeliveries_asked(&self, guid: &str) -> usize {
        self.rest().hooks.asked.get(guid).copied().unwrap_or(0)
    }
}

pub(super) enum HookRoute {
    List { repo: String, hook: u64 },
    One { repo: String, hook: u64, id: u64 },
    Attempts { repo: String, hook: u64, id: u64 },
}

impl HookRoute {
    pub(super) fn parse(path: &str) -> Option<HookRoute> {
        let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        let number = |s: &str| -> Option<u64> {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
                .filter(|n| *n > 0)
        };
        let route = match segments.as_slice() {
            ["repos", o, r, "hooks", h, "deliveries"] => HookRoute::List {
                repo: format!("{o}/{r}"),
                hook: number(h)?,
            },
            ["repos", o, r, "hooks", h, "deliveries", d] => HookRoute::One {
                repo: format!("{o}/{r}"),
                hook: number(h)?,
                id: number(d)?,
            },
            ["repos", o, r, "hooks", h, "deliveries", d, "attempts"] => HookRoute::Attempts {
                repo: format!("{o}/{r}"),
                hook: number(h)?,
                id: number(d)?,
            },
            // The app's hook: its id is the registered app's (0 until resolved).
            ["app", "hook", "deliveries"] => HookRoute::List {
                repo: APP.into(),
                hook: 0,
            },
            ["app", "hook", "deliveries", d] => HookRoute::One {
                repo: APP.into(),
                hook: 0,
                id: number(d)?,
            },
            ["app", "hook", "deliveries", d, "attempts"] => HookRoute::Attempts {
                repo: APP.into(),
                hook: 0,
                id: number(d)?,
            },
            _ => return None,
        };
        Some(route)
    }
}

fn attempt_json(a: &Attempt, repo_id: u64, with_payload: bool) -> Value {
    let at = time::OffsetDateTime::from_unix_timestamp(a.seen.delivered_at as i64)
        .expect("a valid epoch second");
    let mut v = json!({
        "id": a.seen.id,
        "guid": a.seen.guid,
        "delivered_at": stages::domain::rfc3339_seconds(at),
        "redelivery": a.seen.redelivery,
        "duration": 0.27,
        "status": match a.seen.status_code {
            0 => "timed out".to_string(),
            s if (200..300).contains(&s) => "OK".to_string(),
            s => format!("Invalid HTTP Response: {s}"),
        },
        "status_code": a.seen.status_code,
        "event": a.event,
        "action": a.action,
        "installation_id": null,
        "repository_id": repo_id,
        "throttled_at": null,
    });
    if with_payload {
        v["request"] = json!({
            "headers": {"X-GitHub-Event": a.event, "X-GitHub-Delivery": a.seen.guid},
            "payload": a.payload,
        });
        v["response"] = json!({"headers": {}, "payload": null});
    }
    v
}

/// Answers one hook route (the common checks already passed).
pub(super) fn answer(
    st: &mut State,
    method: &Method,
    route: &HookRoute,
    query: Option<&str>,
) -> Answer {
    let (repo, hook_id) = match route {
        HookRoute::List { repo, hook }
        | HookRoute::One { repo, hook, .. }
        | HookRoute::Attempts { repo, hook, .. } => (repo.clone(), *hook),
    };
    let hook_id = match (&st.hooks.app, repo.as_str()) {
        (Some(app), APP) => app.hook_id,
        (None, APP) => return not_found(),
        _ => hook_id,
    };
    let post = matches!(route, HookRoute::Attempts { .. });
    if (*method == Method::POST) != post {
        return not_found();
    }
    let base = st.base_url.clone();
    let hooks = &mut st.hooks;
    let Some(hook) = hooks.hooks.get(&(repo.clone(), hook_id)) else {
        return not_found();
    };
    if hook.forbidden {
        return not_found();
    }
    let repo_id = 1_296_269;
    match route {
        HookRoute::List { .. } => {
            let mut per_page = None;
            let mut cursor = None;
            for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                let slot = match key {
                    "per_page" => &mut per_page,
                    "cursor" => &mut cursor,
                    _ => return validation_failed(key, "HookDelivery"),
                };
                if slot.is_some() {
                    return validation_failed(key, "HookDelivery");
                }
                *slot = Some(value.to_string());
            }
            let per_page = match per_page.as_deref().map(str::parse::<u64>) {
                None => DEFAULT_PER_PAGE,
                Some(Ok(n)) if (1..=MAX_PER_PAGE).contains(&n) => n as usize,
                Some(_) => return validation_failed("per_page", "HookDelivery"),
            };
            // The cursor is opaque to clients; this one names the last id served.
            let after = match cursor.as_deref() {
                None => None,
                Some(c) => match c.strip_prefix("v1_").and_then(|n| n.parse::<u64>().ok()) {
                    Some(id) => Some(id),
                    None => return validation_failed("cursor", "HookDelivery"),
                },
            };
            let mut newest_first: Vec<&Attempt> = hook.attempts.iter().collect();
            newest_first.sort_by_key(|a| std::cmp::Reverse(a.seen.id));
            let rest: Vec<&Attempt> = newest_first
                .into_iter()
                .filter(|a| after.is_none_or(|id| a.seen.id < id))
                .collect();
            let page: Vec<Value> = rest
                .iter()
                .take(per_page)
                .map(|a| attempt_json(a, repo_id, false))
                .collect();
            let mut answer = Answer::json(StatusCode::OK, Value::Array(page));
            if rest.len() > per_page {
                let last = rest[per_page - 1].seen.id;
                let path = if repo == APP {
                    "/app/hook/deliveries".to_string()
                } else {
                    format!("/repos/{repo}/hooks/{hook_id}/deliveries")
                };
                answer = answer.header(
                    "link",
                    format!("<{base}{path}?per_page={per_page}&cursor=v1_{last}>; rel=\"next\""),
                );
            }
            answer
        }
        HookRoute::One { id, .. } => match hook.attempts.iter().find(|a| a.seen.id == *id) {
            Some(a) => Answer::json(StatusCode::OK, attempt_json(a, repo_id, true)),
            None => not_found(),
        },
        HookRoute::Attempts { id, .. } => {
            let Some(a) = hook.attempts.iter().find(|a| a.seen.id == *id).cloned() else {
                return not_found();
            };
            if epoch_secs().saturating_sub(a.seen.delivered_at) > REDELIVERY_WINDOW_SECS {
                // The stand-in's wording: deliveries older than three days cannot be redelivered.
                return Answer::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "This delivery is older than 3 days and cannot be redelivered",
                );
            }
            *hooks.asked.entry(a.seen.guid.clone()).or_default() += 1;
            hooks.queued.push((repo, hook_id, a));
            Answer::json(StatusCode::ACCEPTED, json!({}))
        }
    }
}

/// Sends the accepted redeliveries to their hooks' URLs (same GUID, fresh signature) and
/// records each answer as a new attempt, in the background as GitHub does: the 202 does not
/// wait for it. Called after a request, outside the state lock.
pub(super) fn run_redeliveries(state: &Arc<Mutex<State>>) {
    let queued = {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut st.hooks.queued)
    };
    if !queued.is_empty() {
        tokio::spawn(deliver(state.clone(), queued));
    }
}

async fn deliver(state: Arc<Mutex<State>>, queued: Vec<(String, u64, Attempt)>) {
    // After the 202 has gone out.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    for (repo, hook_id, attempt) in queued {
        let target = {
            let st = state.lock().unwrap_or_else(|e| e.into_inner());
            st.hooks
                .hooks
                .get(&(repo.clone(), hook_id))
                .and_then(|h| h.target.clone())
        };
        let status_code = match target {
            None => 0,
            Some((url, secret)) => {
                let body = serde_json::to_vec(&attempt.payload).unwrap_or_default();
                let sent = reqwest::Client::new()
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("user-agent", "GitHub-Hookshot/stand-in")
                    .header("x-github-event", &attempt.event)
                    .header("x-github-delivery", &attempt.seen.guid)
                    .header("x-github-hook-id", hook_id.to_string())
                    .header(
                        "x-github-hook-installation-target-type",
                        if repo == APP {
                            "integration"
                        } else {
                            "repository"
                        },
                    )
                    .header("x-github-hook-installation-target-id", "1296269")
                    .header(
                        "x-hub-signature-256",
                        stages::signature::sign(secret.as_bytes(), &body),
                    )
                    .body(body)
                    .timeout(std::time::Duration::from_secs(10))
                    .send()
                    .await;
                sent.map(|r| r.status().as_u16()).unwrap_or(0)
            }
        };
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        let id = st.hooks.next_id();
        if let Some(hook) = st.hooks.hooks.get_mut(&(repo, hook_id)) {
            let mut again = attempt;
            again.seen = StubAttempt {
                id,
                guid: again.seen.guid,
                delivered_at: epoch_secs(),
                status_code,
                redelivery: true,
            };
            hook.attempts.push(again);
        }
    }
}

/// Whether a request to the app's routes carries a JWT the registered app signed, as GitHub
/// checks it: RS256 with the app's key, `iss` the app's id, `exp` in the future and at most ten
/// minutes after `iat`. `Err`: GitHub's answer.
pub(super) fn check_app_jwt(st: &State, authorization: Option<&str>) -> Result<(), Answer> {
    let refused = || {
        Answer::error(
            StatusCode::UNAUTHORIZED,
            "A JSON web token could not be decoded",
        )
    };
    let Some(app) = &st.hooks.app else {
        return Err(not_found());
    };
    let jwt = authorization
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(refused)?;
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(app.public_key_pem.as_bytes())
        .expect("the registered public key is PEM");
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_issuer(&[&app.id]);
    validation.set_required_spec_claims(&["exp", "iat", "iss"]);
    validation.leeway = 0;
    let claims = jsonwebtoken::decode::<Value>(jwt, &key, &validation)
        .map_err(|_| refused())?
        .claims;
    let (iat, exp) = (claims["iat"].as_i64(), claims["exp"].as_i64());
    let (Some(iat), Some(exp)) = (iat, exp) else {
        return Err(refused());
    };
    // GitHub: issued no later than now, expiring at most ten minutes from now.
    let now = epoch_secs() as i64;
    if exp > now + 10 * 60 || exp - iat > 11 * 60 {
        return Err(Answer::error(
            StatusCode::UNAUTHORIZED,
            "'Expiration time' claim ('exp') is too far in the future",
        ));
    }
    if iat > now {
        return Err(Answer::error(
            StatusCode::UNAUTHORIZED,
            "'Issued at' claim ('iat') must be an Integer representing a time in the past",
        ));
    }
    Ok(())
}
