//! Self-healing ingestion against the emulator, the GitHub stand-in's hook deliveries and the
//! real webhook HTTP server: the webhook records the hook that delivers; the redelivery stage
//! lists its deliveries (cursor-paginated), and asks GitHub once for each failed merged-PR
//! delivery of the last three days that Chronicle never stored. GitHub (the stand-in) then
//! delivers it again, with the same GUID, to the webhook.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use stages::config::RedeliverConfig;
use stages::github::GitHubClient;
use stages::redeliver::{RedeliverError, Redeliverer};
use stages::secret::{Secret, SecretSource};
use stages::store::{attr, HookStore, PrStore};
use standins::github_standin::{DeliverySpec, GitHubStandIn};
use support::*;

const TOKEN: &str = "ghp_redeliver_token";
const REPO: &str = "Codertocat/Hello-World";
const HOOK: u64 = 42;

/// A merged PR `number`'s `closed` delivery payload.
fn merged_pr(number: u64) -> Value {
    let mut payload = merged_payload();
    payload["number"] = json!(number);
    payload["pull_request"]["number"] = json!(number);
    payload
}

fn spec(guid: &str, age_secs: u64, status: u16, action: &str, payload: Value) -> DeliverySpec {
    DeliverySpec {
        guid: guid.into(),
        age_secs,
        status_code: status,
        event: "pull_request".into(),
        action: Some(action.into()),
        payload,
    }
}

struct World {
    prs: PrStore,
    hooks: HookStore,
    stub: GitHubStandIn,
    server: standins::http_server::ServerHandle,
}

impl World {
    async fn start(target: bool) -> World {
        let sdk = sdk().await;
        let tables = fresh_tables(&sdk).await;
        let client = aws_sdk_dynamodb::Client::new(&sdk);
        let hooks = HookStore::new(client, tables.pages.table_name());
        let webhook = Arc::new(handler(tables.prs.clone()).with_hooks(hooks.clone()));
        let server = standins::http_server::serve(webhook, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let stub = GitHubStandIn::start(TOKEN).await.unwrap();
        let url = server.webhook_url();
        stub.add_hook(REPO, HOOK, target.then_some((url.as_str(), SECRET)));
        World {
            prs: tables.prs,
            hooks,
            stub,
            server,
        }
    }

    /// Started, and hook 42 recorded by a delivery of PR `first` through the webhook.
    async fn recorded(target: bool, first: u64) -> World {
        let w = World::start(target).await;
        assert_eq!(
            w.deliver(&format!("first-{first}"), &merged_pr(first))
                .await,
            200
        );
        w
    }

    fn redeliverer(&self, max_per_run: usize) -> Redeliverer {
        let github = GitHubClient::new(
            self.stub.url(),
            &Secret::new(TOKEN),
            Duration::from_secs(10),
            1,
        )
        .unwrap();
        Redeliverer::new(
            Some(github),
            self.hooks.clone(),
            self.prs.clone(),
            max_per_run,
        )
    }

    /// A delivery through the real HTTP server, as GitHub sends it (hook headers included).
    async fn deliver(&self, guid: &str, payload: &Value) -> u16 {
        self.deliver_through(HOOK, "repository", guid, payload)
            .await
    }

    /// A delivery sent by hook `hook` of `target_type` (`repository`, `integration`, …).
    async fn deliver_through(
        &self,
        hook: u64,
        target_type: &str,
        guid: &str,
        payload: &Value,
    ) -> u16 {
        let body = serde_json::to_vec(payload).unwrap();
        reqwest::Client::new()
            .post(self.server.webhook_url())
            .header("content-type", "application/json")
            .header("x-github-event", "pull_request")
            .header("x-github-delivery", guid)
            .header("x-github-hook-id", hook.to_string())
            .header("x-github-hook-installation-target-type", target_type)
            .header(
                "x-hub-signature-256",
                stages::signature::sign(SECRET.as_bytes(), &body),
            )
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn stored_delivery(&self, number: u64) -> Option<String> {
        let repo = stages::domain::RepoName::parse(REPO).unwrap();
        let item = self.prs.get(&repo, number).await.unwrap()?;
        stages::store::string(&item, attr::DELIVERY_ID).map(str::to_string)
    }

    /// GitHub redelivers after its 202: waits (up to 10 s) until the PR holds `guid`.
    async fn eventually_stored(&self, number: u64, guid: &str) {
        for _ in 0..200 {
            if self.stored_delivery(number).await.as_deref() == Some(guid) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("#{number} was not stored from delivery {guid}");
    }

    /// Waits (up to 10 s) until the stand-in recorded a redelivery attempt of `guid`.
    async fn redelivery_attempt(&self, guid: &str) -> standins::github_standin::rest::StubAttempt {
        for _ in 0..200 {
            if let Some(a) = self
                .stub
                .attempts(REPO, HOOK)
                .into_iter()
                .find(|a| a.guid == guid && a.redelivery)
            {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no redelivery attempt of {guid}");
    }

    /// Waits (up to 10 s) until the stand-in recorded `n` failed redeliveries of `guid`.
    async fn failed_redeliveries(&self, guid: &str, n: usize) {
        for _ in 0..200 {
            let failed = self
                .stub
                .attempts(REPO, HOOK)
                .iter()
                .filter(|a| a.guid == guid && a.redelivery && a.status_code == 0)
                .count();
            if failed >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fewer than {n} failed redeliveries of {guid}");
    }

    async fn stop(self) {
        self.server.shutdown().await;
        self.stub.stop().await;
    }
}

fn guids(report: &stages::redeliver::RedeliverReport) -> Vec<&str> {
    report.redelivered.iter().map(|r| r.guid.as_str()).collect()
}

fn far() -> std::time::Instant {
    within(60)
}

#[tokio::test]
async fn failed_deliveries_are_redelivered_once_and_the_rest_left_alone() {
    let w = World::start(true).await;
    let day = 24 * 3600;
    // Delivered while Chronicle was up: stored, and the webhook records hook 42.
    assert_eq!(w.deliver("ok-10", &merged_pr(10)).await, 200);
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("ok-10", 3 * 3600, 200, "closed", merged_pr(10)),
    );
    let recorded = w.hooks.list().await.unwrap();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        recorded[0].hook.to_string(),
        format!("repos/{REPO}/hooks/{HOOK}")
    );

    // Lost during an outage: the one to redeliver.
    w.stub
        .add_delivery(REPO, HOOK, spec("lost-1", day, 502, "closed", merged_pr(1)));
    // Stored, but the answer timed out: GitHub shows it failed; Chronicle has it.
    assert_eq!(w.deliver("stored-3", &merged_pr(3)).await, 200);
    w.stub
        .add_delivery(REPO, HOOK, spec("stored-3", day, 0, "closed", merged_pr(3)));
    // Past GitHub's three days.
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("old-4", 4 * day, 500, "closed", merged_pr(4)),
    );
    // Not an action Chronicle stores.
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("opened-5", day, 500, "opened", merged_pr(5)),
    );
    // Closed without merging.
    let mut unmerged = merged_pr(6);
    unmerged["pull_request"]["merged"] = json!(false);
    w.stub
        .add_delivery(REPO, HOOK, spec("unmerged-6", day, 500, "closed", unmerged));
    // Failed, then redelivered by hand successfully.
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("healed-7", 2 * day, 500, "closed", merged_pr(7)),
    );
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("healed-7", day, 200, "closed", merged_pr(7)),
    );
    // Other events, newer than all of these: the listing must page past them.
    for i in 0..130 {
        w.stub.add_delivery(
            REPO,
            HOOK,
            DeliverySpec {
                guid: format!("push-{i}"),
                age_secs: 3600,
                status_code: 200,
                event: "push".into(),
                action: None,
                payload: json!({}),
            },
        );
    }

    let redeliverer = w.redeliverer(50);
    let dry = redeliverer
        .run(time::OffsetDateTime::now_utc(), far(), true)
        .await
        .unwrap();
    assert_eq!(guids(&dry), vec!["lost-1"], "{dry:?}");
    assert_eq!(
        w.stub.redeliveries_asked("lost-1"),
        0,
        "a dry run asks nothing"
    );

    let list_path = format!("/repos/{REPO}/hooks/{HOOK}/deliveries");
    let list_requests = || {
        w.stub
            .requests()
            .iter()
            .filter(|r| r.path == list_path)
            .count()
    };
    let listed_before = list_requests();
    let report = redeliverer
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&report), vec!["lost-1"], "{report:?}");
    assert_eq!(report.redelivered[0].pr, 1);
    assert_eq!(report.hooks, 1);
    assert_eq!(report.failed, 3, "lost-1, stored-3, unmerged-6: {report:?}");
    let details = |w: &World| {
        w.stub
            .requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.starts_with(&format!("{list_path}/")))
            .count()
    };
    let details_after_first = details(&w);
    assert_eq!(report.already_stored, 1, "{report:?}");
    assert_eq!(report.not_merged, 1, "{report:?}");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.listed > 100, "paged past the first 100: {report:?}");
    let pages = list_requests() - listed_before;
    assert_eq!(pages, 2, "two cursor pages cover the window");

    // GitHub delivered it again, with the same GUID, and Chronicle stored it.
    assert_eq!(w.stub.redeliveries_asked("lost-1"), 1);
    w.eventually_stored(1, "lost-1").await;
    assert_eq!(w.redelivery_attempt("lost-1").await.status_code, 200);
    for guid in [
        "stored-3",
        "old-4",
        "opened-5",
        "unmerged-6",
        "healed-7",
        "ok-10",
    ] {
        assert_eq!(w.stub.redeliveries_asked(guid), 0, "{guid} was left alone");
    }

    // A second run finds nothing to do.
    let second = redeliverer
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(second.redelivered.is_empty(), "{second:?}");
    assert_eq!(w.stub.redeliveries_asked("lost-1"), 1);
    // What the first run learned is remembered: no payload is read again.
    assert_eq!(
        (second.already_stored, second.not_merged),
        (1, 1),
        "{second:?}"
    );
    assert_eq!(details(&w), details_after_first, "no delivery read twice");
    w.stop().await;
}

#[tokio::test]
async fn a_redelivery_that_fails_again_is_asked_again_once_per_run_up_to_a_limit() {
    // No URL to deliver to: GitHub's redelivery fails too (the webhook still down).
    let w = World::recorded(false, 20).await;
    for (guid, n) in [("lost-21", 21), ("lost-22", 22)] {
        w.stub
            .add_delivery(REPO, HOOK, spec(guid, 7200, 503, "closed", merged_pr(n)));
    }
    let (a, b) = (w.redeliverer(50), w.redeliverer(50));
    let now = time::OffsetDateTime::now_utc();
    let (ra, rb) = tokio::join!(a.run(now, far(), false), b.run(now, far(), false));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(
        ra.redelivered.len() + rb.redelivered.len(),
        2,
        "each asked by exactly one run: {ra:?} {rb:?}"
    );
    assert_eq!(w.stub.redeliveries_asked("lost-21"), 1);
    w.failed_redeliveries("lost-21", 1).await;
    w.failed_redeliveries("lost-22", 1).await;

    // Still down: each later run asks again, until the limit; then it is a problem.
    for ask in 2..=stages::redeliver::MAX_ASKS as usize {
        let again = a
            .run(time::OffsetDateTime::now_utc(), far(), false)
            .await
            .unwrap();
        assert_eq!(again.redelivered.len(), 2, "ask {ask}: {again:?}");
        w.failed_redeliveries("lost-21", ask).await;
        w.failed_redeliveries("lost-22", ask).await;
    }
    let given_up = a
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(given_up.redelivered.is_empty(), "{given_up:?}");
    assert_eq!(given_up.problems.len(), 2, "{given_up:?}");
    assert!(
        given_up.problems[0].message.contains("5 times"),
        "{given_up:?}"
    );
    assert_eq!(
        w.stub.redeliveries_asked("lost-21"),
        stages::redeliver::MAX_ASKS as usize
    );
    assert_eq!(w.stored_delivery(21).await, None);
    w.stop().await;
}

#[tokio::test]
async fn a_webhook_back_up_gets_the_delivery_on_the_next_ask() {
    let w = World::recorded(false, 25).await;
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-26", 7200, 502, "closed", merged_pr(26)),
    );
    let r = w.redeliverer(10);
    let first = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&first), vec!["lost-26"]);
    w.failed_redeliveries("lost-26", 1).await;
    // The webhook answers again.
    let url = w.server.webhook_url();
    w.stub.add_hook(REPO, HOOK, Some((url.as_str(), SECRET)));
    let second = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&second), vec!["lost-26"], "{second:?}");
    w.eventually_stored(26, "lost-26").await;
    // Healed: nothing more to ask.
    let third = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(
        third.redelivered.is_empty() && third.problems.is_empty(),
        "{third:?}"
    );
    assert_eq!(w.stub.redeliveries_asked("lost-26"), 2);
    w.stop().await;
}

#[tokio::test]
async fn the_per_run_cap_leaves_the_rest_for_the_next_run() {
    let w = World::recorded(true, 30).await;
    for n in 31..34 {
        w.stub.add_delivery(
            REPO,
            HOOK,
            spec(&format!("lost-{n}"), 7200 + n, 500, "closed", merged_pr(n)),
        );
    }
    let capped = w.redeliverer(2);
    let first = capped
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    // Oldest first: the closest to leaving GitHub's window.
    assert_eq!(guids(&first), vec!["lost-33", "lost-32"], "{first:?}");
    assert!(first
        .stopped
        .as_deref()
        .unwrap_or("")
        .contains("per-run cap"));
    let second = capped
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&second), vec!["lost-31"], "{second:?}");
    for n in 31..34 {
        w.eventually_stored(n, &format!("lost-{n}")).await;
    }
    w.stop().await;
}

#[tokio::test]
async fn a_missing_token_or_scope_gets_a_clear_message() {
    let sdk = sdk().await;
    let config = RedeliverConfig {
        table: stages::config::TableConfig {
            table_name: "unused".into(),
            pending_shards: 4,
        },
        pages_table: "unused".into(),
        api_url: "http://127.0.0.1:9".into(),
        token: SecretSource::Unset,
        app_id: None,
        app_key: SecretSource::Unset,
        timeout: Duration::from_secs(1),
        max_retries: 0,
        max_per_run: 10,
    };
    let Err(err) = Redeliverer::from_config(&config, &sdk).await else {
        panic!("no token must be refused");
    };
    assert!(matches!(err, RedeliverError::NoToken));
    let message = err.to_string();
    assert!(
        message.contains("GITHUB_TOKEN") && message.contains("admin:repo_hook"),
        "{message}"
    );

    let w = World::recorded(true, 40).await;
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-41", 7200, 500, "closed", merged_pr(41)),
    );
    w.stub.forbid_hooks(REPO, HOOK);
    let report = w
        .redeliverer(10)
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(report.redelivered.is_empty());
    assert_eq!(report.problems.len(), 1, "{report:?}");
    let problem = &report.problems[0].message;
    assert!(
        problem.contains("404") && problem.contains("admin:repo_hook"),
        "{problem}"
    );
    assert_eq!(w.stub.redeliveries_asked("lost-41"), 0);
    // Not asked again within the day (the problem is not repeated every hour).
    let later = w
        .redeliverer(10)
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!((later.dormant, later.problems.len()), (1, 0), "{later:?}");
    // A day later it is listed (and reported) again.
    let next_day = w
        .redeliverer(10)
        .run(
            time::OffsetDateTime::now_utc() + time::Duration::days(1),
            far(),
            true,
        )
        .await
        .unwrap();
    assert_eq!(
        (next_day.dormant, next_day.problems.len()),
        (0, 1),
        "{next_day:?}"
    );
    w.stop().await;
}

#[tokio::test]
async fn the_webhook_records_each_hook_once_per_instance_and_only_when_signed() {
    let w = World::start(true).await;
    for n in 50..53 {
        assert_eq!(w.deliver(&format!("d-{n}"), &merged_pr(n)).await, 200);
    }
    let hooks = w.hooks.list().await.unwrap();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    let first_seen = hooks[0].last_seen_at.clone();
    // The instance wrote once: later deliveries did not move lastSeenAt.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(w.deliver("d-53", &merged_pr(53)).await, 200);
    assert_eq!(w.hooks.list().await.unwrap()[0].last_seen_at, first_seen);

    // A forged delivery (bad signature) names a hook that is not recorded.
    let status = reqwest::Client::new()
        .post(w.server.webhook_url())
        .header("content-type", "application/json")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", "forged")
        .header("x-github-hook-id", "999")
        .header("x-hub-signature-256", format!("sha256={}", "0".repeat(64)))
        .body(serde_json::to_vec(&merged_pr(54)).unwrap())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401);
    assert_eq!(w.hooks.list().await.unwrap().len(), 1);
    w.stop().await;
}

#[tokio::test]
async fn a_pr_stored_in_a_newer_state_is_not_redelivered() {
    let w = World::recorded(true, 60).await;
    // A later edit of #61 was stored (e.g. by the backfill or a later event); the failed
    // delivery carries an older state.
    let mut newer = merged_pr(61);
    newer["pull_request"]["updated_at"] = json!("2030-01-01T00:00:00Z");
    store_merged(&w.prs, &newer, time::OffsetDateTime::now_utc()).await;
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("old-state-61", 7200, 500, "closed", merged_pr(61)),
    );
    let report = w
        .redeliverer(10)
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(report.redelivered.is_empty(), "{report:?}");
    assert_eq!(report.already_stored, 1, "{report:?}");
    assert_eq!(w.stub.redeliveries_asked("old-state-61"), 0);
    w.stop().await;
}

#[tokio::test]
async fn github_failures_on_the_request_release_or_keep_the_claim_as_they_must() {
    use standins::github_standin::rest::Fault;
    let w = World::recorded(true, 70).await;
    let five_hundred = w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-71", 7300, 500, "closed", merged_pr(71)),
    );
    let gateway = w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-72", 7200, 500, "closed", merged_pr(72)),
    );
    let attempts = |id: u64| format!("/repos/{REPO}/hooks/{HOOK}/deliveries/{id}/attempts");
    // A 500: certainly not done, asked again next run. A 502: maybe done, never asked again.
    w.stub
        .fail_next(&attempts(five_hundred), Fault::ServerError);
    w.stub.fail_next(&attempts(gateway), Fault::BadGateway);
    let r = w.redeliverer(10);
    let first = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(first.redelivered.is_empty(), "{first:?}");
    assert_eq!(first.problems.len(), 2, "{first:?}");
    assert!(first.problems[0].message.contains("not done"), "{first:?}");
    assert!(
        first.problems[1].message.contains("may have done it"),
        "{first:?}"
    );
    let second = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&second), vec!["lost-71"], "{second:?}");
    assert_eq!(second.already_asked, 1, "the 502 one: {second:?}");
    w.eventually_stored(71, "lost-71").await;
    assert_eq!(w.stored_delivery(72).await, None);

    // A token that can list but not redeliver (404 on the request): nothing is used up, the run
    // stops, and once the token is fixed the delivery is asked.
    let read_only = w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-73", 3600, 500, "closed", merged_pr(73)),
    );
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-74", 3500, 500, "closed", merged_pr(74)),
    );
    w.stub.fail_next(&attempts(read_only), Fault::NotFound);
    let refused = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(refused.redelivered.is_empty(), "{refused:?}");
    assert!(refused.stopped.is_some(), "{refused:?}");
    assert!(
        refused.problems[0].message.contains("admin:repo_hook"),
        "{refused:?}"
    );
    assert_eq!(w.stub.redeliveries_asked("lost-74"), 0, "the run stopped");
    let fixed = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&fixed), vec!["lost-73", "lost-74"], "{fixed:?}");
    w.stop().await;
}

/// A claim never confirmed (its run stopped between the claim and the request) is reported, and
/// settled by the hook's delivery log: no attempt since it means GitHub did not act, so it is
/// asked again.
#[tokio::test]
async fn a_claim_never_confirmed_is_reported_and_asked_again_once_the_log_settles_it() {
    let w = World::recorded(true, 80).await;
    w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-81", 7200, 500, "closed", merged_pr(81)),
    );
    // A run claimed it an hour ago and stopped (crash, timeout) before asking GitHub.
    let hook = stages::domain::hook::HookRef::parse(&format!("repos/{REPO}/hooks/{HOOK}")).unwrap();
    w.hooks
        .set_state(
            &hook,
            "lost-81",
            stages::store::DeliveryState::Claimed,
            time::OffsetDateTime::now_utc() - time::Duration::hours(1),
        )
        .await
        .unwrap();
    let report = w
        .redeliverer(10)
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(report.unconfirmed, 1, "{report:?}");
    assert!(
        report.problems[0].message.contains("delivery log"),
        "{report:?}"
    );
    assert_eq!(guids(&report), vec!["lost-81"], "{report:?}");
    w.eventually_stored(81, "lost-81").await;
    assert_eq!(w.stub.redeliveries_asked("lost-81"), 1);
    w.stop().await;
}

/// Review defect 4: a redelivery request with no clear answer (a 502) leaves the delivery
/// `unknown`. Later runs settle it by the hook's delivery log instead of never asking again
/// (and losing the PR once GitHub's 3-day window closes): no attempt after a while means GitHub
/// did not act; a newer failed attempt means it acted and failed. Both are asked again.
#[tokio::test]
async fn an_unknown_redelivery_is_settled_by_the_delivery_log_and_asked_again() {
    use standins::github_standin::rest::Fault;
    let attempts = |id: u64| format!("/repos/{REPO}/hooks/{HOOK}/deliveries/{id}/attempts");
    // GitHub did not act on the 502.
    let w = World::recorded(true, 90).await;
    let lost = w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-91", 7200, 500, "closed", merged_pr(91)),
    );
    w.stub.fail_next(&attempts(lost), Fault::BadGateway);
    let r = w.redeliverer(10);
    let now = time::OffsetDateTime::now_utc();
    let first = r.run(now, far(), false).await.unwrap();
    assert!(first.redelivered.is_empty(), "{first:?}");
    assert!(
        first.problems[0].message.contains("may have done it"),
        "{first:?}"
    );
    // At once, GitHub may still be acting: not asked again yet.
    let soon = r.run(now, far(), false).await.unwrap();
    assert!(soon.redelivered.is_empty(), "{soon:?}");
    assert_eq!(soon.already_asked, 1, "{soon:?}");
    // An hour later the log shows no attempt since: asked again, and stored.
    let later = r
        .run(now + time::Duration::hours(1), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&later), vec!["lost-91"], "{later:?}");
    w.eventually_stored(91, "lost-91").await;
    w.stop().await;

    // GitHub acted on the 502, and its redelivery failed too (no webhook behind the hook).
    let w = World::recorded(false, 95).await;
    let lost = w.stub.add_delivery(
        REPO,
        HOOK,
        spec("lost-96", 7200, 500, "closed", merged_pr(96)),
    );
    w.stub
        .fail_next(&attempts(lost), Fault::AppliedThenBadGateway);
    let r = w.redeliverer(10);
    let first = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(first.redelivered.is_empty(), "{first:?}");
    w.failed_redeliveries("lost-96", 1).await;
    let next = r
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&next), vec!["lost-96"], "{next:?}");
    assert_eq!(w.stub.redeliveries_asked("lost-96"), 2);
    w.stop().await;
}

fn app_key(name: &str) -> String {
    std::fs::read_to_string(
        devstack::emulator::repo_root()
            .join("tests/fixtures/github")
            .join(name),
    )
    .unwrap()
}

/// A GitHub App's hook: recorded from its `integration` deliveries, listed and redelivered with
/// the app's JWT (RS256, checked by the stand-in against the app's public key). The token's
/// client is refused there, and a run without the app's key says what to configure.
#[tokio::test]
async fn a_github_app_hook_is_healed_with_the_apps_jwt() {
    const APP_HOOK: u64 = 555;
    let w = World::start(true).await;
    let url = w.server.webhook_url();
    w.stub.add_app_hook(
        "424242",
        &app_key("app-test-key.pub.pem"),
        APP_HOOK,
        Some((url.as_str(), SECRET)),
    );
    // A delivery through the app's hook records it.
    let status = w
        .deliver_through(APP_HOOK, "integration", "app-first-90", &merged_pr(90))
        .await;
    assert_eq!(status, 200);
    let hooks: Vec<String> = w
        .hooks
        .list()
        .await
        .unwrap()
        .iter()
        .map(|h| h.hook.to_string())
        .collect();
    assert_eq!(hooks, vec![format!("app/hook/{APP_HOOK}")]);
    w.stub
        .add_app_delivery(spec("app-lost-91", 7200, 500, "closed", merged_pr(91)));

    // Only a token: the app's hook cannot be read, and the run says what to configure.
    let token_only = w
        .redeliverer(10)
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert!(token_only.redelivered.is_empty());
    assert!(
        token_only.problems[0].message.contains("GITHUB_APP_ID"),
        "{token_only:?}"
    );

    let app = stages::redeliver::AppAccess {
        credentials: stages::github::app::AppCredentials::new(
            "424242",
            &Secret::new(app_key("app-test-key.pem")),
        )
        .unwrap(),
        api_url: w.stub.url().to_string(),
        timeout: Duration::from_secs(10),
        max_retries: 1,
    };
    // A JWT of another app is refused (401), reported, nothing asked.
    let mut wrong = app.clone();
    wrong.credentials =
        stages::github::app::AppCredentials::new("1", &Secret::new(app_key("app-test-key.pem")))
            .unwrap();
    let refused = Redeliverer::new(None, w.hooks.clone(), w.prs.clone(), 10)
        .with_app(wrong)
        .run(time::OffsetDateTime::now_utc(), far(), true)
        .await
        .unwrap();
    assert!(refused.redelivered.is_empty(), "{refused:?}");
    assert!(refused.problems[0].message.contains("401"), "{refused:?}");

    let report = Redeliverer::new(None, w.hooks.clone(), w.prs.clone(), 10)
        .with_app(app)
        .run(time::OffsetDateTime::now_utc(), far(), false)
        .await
        .unwrap();
    assert_eq!(guids(&report), vec!["app-lost-91"], "{report:?}");
    assert_eq!(report.redelivered[0].hook, format!("app/hook/{APP_HOOK}"));
    assert_eq!(w.stub.redeliveries_asked("app-lost-91"), 1);
    w.eventually_stored(91, "app-lost-91").await;
    w.stop().await;
}
