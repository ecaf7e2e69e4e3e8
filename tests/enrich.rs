//! The enrich stage against the emulator. GitHub is played by the strict stand-in
//! (`standins::github_standin`): its GraphQL half (every query validated against GitHub's published
//! schema) that enrichment uses, and its REST half (recorded responses) it falls back to where
//! GraphQL cannot serve. A test may start two, one per half, to count each side's requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use stages::domain::FileChange;
use stages::enrich::{EnrichHandler, GitHubApis, RecordOutcome};
use stages::github::graphql::GraphQlClient;
use stages::github::GitHubClient;
use stages::secret::Secret;
use stages::store::{attr, Item, PrStore, DEFERRED_SHARD};
use standins::github_standin::PullSpec;
use standins::github_standin::{pull_json, Fault, GitHubStandIn};
use standins::synthetic::SyntheticPr;
use support::*;

const TOKEN: &str = "ghp_test_token_for_the_stand_in";
const REPO: &str = "Codertocat/Hello-World";

/// A row inserted the way production inserts it: a signed merged delivery through the webhook.
async fn stored_pr(store: &PrStore, number: u64, body: Option<&str>) {
    let mut payload = merged_payload();
    payload["pull_request"]["number"] = json!(number);
    payload["pull_request"]["body"] = json!(body);
    let answer = handler(store.clone())
        .handle(signed(
            "pull_request",
            &format!("guid-{number}"),
            payload.to_string(),
        ))
        .await;
    assert_eq!(answer.body["stored"], "inserted", "{answer:?}");
}

/// GitHub: GraphQL (the stand-in) and REST (the stub), as one token sees them.
struct GitHub {
    graphql: GitHubStandIn,
    rest: GitHubStandIn,
}

impl GitHub {
    async fn start() -> Self {
        GitHub {
            graphql: GitHubStandIn::start(TOKEN).await.unwrap(),
            rest: GitHubStandIn::start(TOKEN).await.unwrap(),
        }
    }

    fn apis(&self, retries: u32, token: &str) -> GitHubApis {
        let token = Secret::new(token);
        GitHubApis {
            graphql: GraphQlClient::new(self.graphql.url(), &token, Duration::from_secs(2))
                .unwrap(),
            rest: GitHubClient::new(self.rest.url(), &token, Duration::from_secs(2), retries)
                .unwrap(),
            max_retries: retries,
            issue_scope: Default::default(),
        }
    }

    /// A merged PR on GitHub with `files` files under `src/` and these closing issues.
    fn add_pull(&self, number: u64, files: usize, closing: &[(u64, &str)]) {
        let pr = SyntheticPr {
            number,
            title: format!("PR {number}"),
            body: String::new(),
            author: "octocat".into(),
            labels: vec![],
            merged_at: time::macros::datetime!(2019-05-15 15:20:33 UTC),
            files: (0..files)
                .map(|i| FileChange {
                    path: format!("src/file{i:04}.rs"),
                    additions: 1 + (i as u64 % 7),
                    deletions: i as u64 % 3,
                    status: None,
                })
                .collect(),
            reviewers: vec!["hubot".into()],
            comments: 3,
        };
        self.graphql.put_pull(
            REPO,
            pull_json(
                REPO,
                &pr,
                time::macros::datetime!(2019-05-15 14:00:00 UTC),
                closing,
            ),
        );
    }

    /// GitHub requests of any kind made so far.
    fn requests(&self) -> u64 {
        self.graphql.stats().graphql_requests + self.rest.request_count() as u64
    }
}

fn enricher(store: &PrStore, github: &GitHub, retries: u32) -> Arc<EnrichHandler> {
    Arc::new(EnrichHandler::new(
        store.clone(),
        Some(github.apis(retries, TOKEN)),
        4,
        500,
    ))
}

/// A stream INSERT record for the row, as Lambda delivers it (only the parts the handler reads).
fn insert_record(number: u64, sequence: &str) -> EventRecord {
    let mut record = EventRecord::default();
    record.event_id = format!("event-{sequence}");
    record.event_name = "INSERT".into();
    record.change.sequence_number = Some(sequence.into());
    record.change.keys = serde_dynamo::Item::from(HashMap::from([
        (
            attr::REPO.to_string(),
            serde_dynamo::AttributeValue::S(REPO.into()),
        ),
        (
            attr::PR_NUMBER.to_string(),
            serde_dynamo::AttributeValue::N(number.to_string()),
        ),
    ]));
    record
}

fn event(records: Vec<EventRecord>) -> Event {
    let mut e = Event::default();
    e.records = records;
    e
}

async fn row(store: &PrStore, number: u64) -> Item {
    stored_row(store, REPO, number).await
}

fn n(item: &Item, name: &str) -> u64 {
    item[name].as_n().unwrap().parse().unwrap()
}

fn failed(response: &aws_lambda_events::event::streams::DynamoDbEventResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap_or_default())
        .collect()
}

async fn setup() -> (PrStore, GitHub) {
    (fresh_table(&sdk().await).await, GitHub::start().await)
}

#[tokio::test]
async fn two_hundred_fifty_files_and_closing_issues_in_three_graphql_queries_no_rest() {
    let (store, github) = setup().await;
    stored_pr(&store, 2, Some("Fixes #1347")).await;
    github.add_pull(2, 250, &[(1347, "Found a bug"), (9, "Crash on start")]);

    let handler = enricher(&store, &github, 2);
    let response = handler
        .handle(event(vec![insert_record(2, "100")]), within(30), "inv-1")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    // The invocation's EMF line: one record enriched, three GraphQL requests.
    let emf: serde_json::Value =
        serde_json::from_str(&handler.emf_line(time::OffsetDateTime::now_utc())).unwrap();
    assert_eq!(emf["RecordsEnriched"], 1);
    assert_eq!(emf["RecordsFailed"], 0);
    assert_eq!(emf["RecordsGitHubRequests"], 3);
    // The hour's GraphQL points left, as GitHub's last answer said: a declared metric.
    assert!(emf["GitHubPointsRemaining"].as_u64().is_some(), "{emf}");
    assert!(emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["Name"] == "GitHubPointsRemaining"));
    assert_eq!(
        emf["_aws"]["CloudWatchMetrics"][0]["Namespace"],
        "Chronicle"
    );
    let again: serde_json::Value =
        serde_json::from_str(&handler.emf_line(time::OffsetDateTime::now_utc())).unwrap();
    assert_eq!(
        (
            again["RecordsEnriched"].as_u64(),
            again["RecordsGitHubRequests"].as_u64()
        ),
        (Some(0), Some(0))
    );

    let item = row(&store, 2).await;
    assert!(item.contains_key(attr::ENRICHED_AT));
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 250);
    assert_eq!(item[attr::FILES_TRUNCATED], AttributeValue::Bool(false));
    assert_eq!(n(&item, attr::CHANGED_FILES), 250);
    assert_eq!(n(&item, attr::COMMITS), 3, "2 % 4 + 1 commits");
    // The approving reviewer (not the comment-only one), and 3 comments + 1 approval.
    assert_eq!(
        item[attr::REVIEWERS],
        AttributeValue::L(vec![AttributeValue::S("hubot".into())])
    );
    assert_eq!(n(&item, attr::DISCUSSION), 4);
    let dirs = item[attr::DIRECTORIES].as_m().unwrap();
    assert_eq!(dirs["src"], AttributeValue::N("250".into()));
    let issues: Vec<(String, u64, String)> = item[attr::LINKED_ISSUES]
        .as_l()
        .unwrap()
        .iter()
        .map(|i| {
            let m = i.as_m().unwrap();
            (
                m["repo"].as_s().unwrap().clone(),
                m["number"].as_n().unwrap().parse().unwrap(),
                m["state"].as_s().unwrap().clone(),
            )
        })
        .collect();
    assert_eq!(
        issues,
        [
            (REPO.to_string(), 1347, "closed".to_string()),
            (REPO.to_string(), 9, "closed".to_string())
        ],
        "GitHub's own closing references"
    );
    // One query for the PR with its first 100 files, one per further 100; no REST at all.
    let stats = github.graphql.stats();
    assert_eq!(
        (stats.graphql_requests, stats.rejected),
        (3, 0),
        "{stats:?}"
    );
    assert_eq!(stats.points, 3, "one point each");
    assert_eq!(github.rest.request_count(), 0);
    for pipeline in [
        attr::ENRICH_LEASE_OWNER,
        attr::ENRICH_LEASE_UNTIL,
        attr::SUMMARIZED_AT,
    ] {
        assert!(!item.contains_key(pipeline), "{pipeline}");
    }
    assert!(
        item.contains_key(attr::PENDING_SHARD),
        "the pending marker is the summarizer's to remove"
    );
}

#[tokio::test]
async fn three_thousand_file_cap_and_truncated_paths() {
    let (store, github) = setup().await;
    stored_pr(&store, 3, None).await;
    github.add_pull(3, 3500, &[]);
    let response = enricher(&store, &github, 1)
        .handle(event(vec![insert_record(3, "1")]), within(60), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let item = row(&store, 3).await;
    assert_eq!(
        github.graphql.stats().graphql_requests,
        30,
        "3000 files at 100 a query"
    );
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 500);
    assert_eq!(item[attr::FILES_TRUNCATED], AttributeValue::Bool(true));
    assert_eq!(n(&item, attr::CHANGED_FILES), 3500);
    let counted: u64 = item[attr::DIRECTORIES]
        .as_m()
        .unwrap()
        .values()
        .map(|v| v.as_n().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        counted, 3000,
        "directory counts cover every file GitHub returned"
    );
    // Well under DynamoDB's 400 KB item limit.
    let size = stages::store::item_size(&item);
    assert!(size < 100 * 1024, "{size} bytes");
}

#[tokio::test]
async fn no_token_means_no_http_call_and_success() {
    let (store, github) = setup().await;
    stored_pr(&store, 4, None).await;
    let disabled = Arc::new(EnrichHandler::new(
        store.clone(),
        None::<stages::enrich::GitHubAccess>,
        4,
        500,
    ));
    let response = disabled
        .handle(
            event(vec![insert_record(4, "1"), insert_record(5, "2")]),
            within(30),
            "inv",
        )
        .await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(github.requests(), 0);
    assert!(!row(&store, 4).await.contains_key(attr::ENRICHED_AT));
}

/// A sweeper over the table, with enrichment on and no grace: what it would enqueue now.
async fn sweep(store: &PrStore) -> stages::sweeper::SweepReport {
    let sdk = sdk().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let queue = devstack::streams::ensure_queue(&sqs, &format!("{}-q", store.table_name()))
        .await
        .unwrap();
    let config = stages::config::SweeperConfig::from_lookup(&|k: &str| match k {
        "SUMMARIZE_QUEUE_URL" => Some(queue.clone()),
        "ENRICH_GRACE_SECONDS" => Some("0".into()),
        "TABLE_NAME" => Some(store.table_name().to_string()),
        _ => None,
    })
    .unwrap();
    stages::sweeper::Sweeper::new(store.clone(), sqs, &config)
        .sweep(time::OffsetDateTime::now_utc(), within(30))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_rate_limit_past_the_deadline_defers_and_the_scheduled_retry_enriches_after_the_reset() {
    let sdk = sdk().await;
    let tables = fresh_tables(&sdk).await;
    let store = tables.prs.clone();
    let github = GitHub::start().await;
    for number in [10, 11] {
        stored_pr(&store, number, None).await;
        github.add_pull(number, 3, &[]);
    }
    // Another user of the token spent the budget; it comes back in 25 s, after the deadlines.
    github.graphql.set_budget(50, Duration::from_secs(25));
    let reset = Instant::now() + Duration::from_secs(25);
    github.graphql.spend(50);
    let handler = enricher(&store, &github, 2);
    let response = handler
        .handle(
            event(vec![insert_record(10, "1"), insert_record(11, "2")]),
            within(3),
            "inv",
        )
        .await;
    assert!(
        response.batch_item_failures.is_empty(),
        "a spent budget never fails the record back to the stream: {response:?}"
    );
    for number in [10, 11] {
        let item = row(&store, number).await;
        assert!(!item.contains_key(attr::ENRICHED_AT));
        assert!(!item.contains_key(attr::ENRICH_LEASE_OWNER));
        assert!(item.contains_key(attr::ENRICH_DEFERRED_UNTIL));
        assert_eq!(s(&item, attr::PENDING_SHARD), DEFERRED_SHARD);
    }
    // Parked rows are not the sweeper's: nothing is summarized unenriched meanwhile.
    assert_eq!(sweep(&store).await.seen, 0);

    // Before the reset: the rows are parked until a time still ahead, so GitHub is not asked.
    let calls = github.requests();
    let report = handler
        .retry_deferred(time::OffsetDateTime::now_utc(), within(12), "retry-1")
        .await
        .unwrap();
    assert_eq!(
        (
            report.seen,
            report.deferred + report.waiting,
            report.enriched
        ),
        (2, 2, 0),
        "{report:?}"
    );
    assert_eq!(github.requests(), calls, "no call before the reset");

    // GitHub's x-ratelimit-reset is whole seconds: the parked time may be a second later.
    tokio::time::sleep_until((reset + Duration::from_secs(2)).into()).await;
    let report = handler
        .retry_deferred(time::OffsetDateTime::now_utc(), within(30), "retry-2")
        .await
        .unwrap();
    assert_eq!((report.seen, report.enriched), (2, 2), "{report:?}");
    for number in [10, 11] {
        let item = row(&store, number).await;
        assert!(item.contains_key(attr::ENRICHED_AT));
        assert!(!item.contains_key(attr::ENRICH_DEFERRED_UNTIL));
        assert_eq!(
            s(&item, attr::PENDING_SHARD),
            stages::store::pending_shard(number, 4),
            "back in its own shard"
        );
    }
    assert_eq!(github.rest.request_count(), 0);
    // Now the sweeper enqueues them, and the summary is the enriched one (files under src/).
    assert_eq!(sweep(&store).await.enqueued, 2);
    let outcome = Arc::new(tables.summarizer(Default::default(), 5))
        .process(&summarize_message("m-10", REPO, 10), within(30), "sum")
        .await
        .unwrap();
    assert_eq!(
        outcome,
        stages::summarize::MessageOutcome::Summarized {
            modules: vec!["src".into()]
        }
    );
}

#[tokio::test]
async fn a_deferred_row_that_waited_too_long_goes_ahead_unenriched() {
    let (store, github) = setup().await;
    stored_pr(&store, 12, None).await;
    github.add_pull(12, 3, &[]);
    github.graphql.set_budget(50, Duration::from_secs(3600));
    github.graphql.spend(50);
    let handler = Arc::new(
        EnrichHandler::new(store.clone(), Some(github.apis(0, TOKEN)), 4, 500)
            .with_max_wait(Duration::from_secs(60)),
    );
    let outcome = handler
        .process(&insert_record(12, "1"), within(10), "inv")
        .await
        .unwrap();
    assert!(matches!(outcome, RecordOutcome::Deferred(_)), "{outcome:?}");
    let calls = github.requests();
    // An hour later by the clock the retry is given: past ENRICH_MAX_WAIT_SECONDS.
    let later = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let report = handler
        .retry_deferred(later, within(30), "retry")
        .await
        .unwrap();
    assert_eq!(report.released_unenriched, 1, "{report:?}");
    assert_eq!(github.requests(), calls, "GitHub is not asked again");
    let item = row(&store, 12).await;
    assert!(!item.contains_key(attr::ENRICHED_AT));
    assert!(!item.contains_key(attr::ENRICH_DEFERRED_UNTIL));
    assert_eq!(s(&item, attr::PENDING_SHARD), "0");
    assert_eq!(sweep(&store).await.enqueued, 1, "summarized without it");
}

#[tokio::test]
async fn server_errors_fail_the_record_then_the_retry_succeeds() {
    let (store, github) = setup().await;
    stored_pr(&store, 13, None).await;
    github.add_pull(13, 3, &[]);
    github.graphql.fault(None, Fault::BadGateway);
    let handler = enricher(&store, &github, 0);
    let response = handler
        .handle(event(vec![insert_record(13, "7")]), within(10), "first")
        .await;
    assert_eq!(failed(&response), ["7"]);
    let item = row(&store, 13).await;
    assert!(!item.contains_key(attr::ENRICHED_AT));
    assert!(
        !item.contains_key(attr::ENRICH_LEASE_OWNER),
        "the lease is released on failure"
    );
    let response = handler
        .handle(event(vec![insert_record(13, "7")]), within(10), "retry")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(row(&store, 13).await.contains_key(attr::ENRICHED_AT));
}

#[tokio::test]
async fn a_short_secondary_limit_is_waited_and_transient_errors_retry_inside_one_invocation() {
    let (store, github) = setup().await;
    stored_pr(&store, 20, None).await;
    github.add_pull(20, 150, &[]);
    github.graphql.fault(
        Some("PullRequestByNumber"),
        Fault::SecondaryLimit {
            retry_after_secs: 1,
        },
    );
    github
        .graphql
        .fault(Some("PullRequestByNumber"), Fault::BadGateway);
    github
        .graphql
        .fault(Some("PullRequestFiles"), Fault::BadGateway);
    let started = Instant::now();
    let response = enricher(&store, &github, 2)
        .handle(event(vec![insert_record(20, "1")]), within(30), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry-after was honoured"
    );
    let item = row(&store, 20).await;
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 150);
    assert_eq!(github.graphql.stats().faults_served, 3);
}

#[tokio::test]
async fn a_hanging_github_times_out_and_fails_the_record() {
    let (store, github) = setup().await;
    stored_pr(&store, 21, None).await;
    github.add_pull(21, 3, &[]);
    github
        .graphql
        .fault(None, Fault::Hang(Duration::from_secs(5)));
    let started = Instant::now();
    let response = enricher(&store, &github, 0)
        .handle(event(vec![insert_record(21, "9")]), within(30), "inv")
        .await;
    assert_eq!(failed(&response), ["9"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the 2 s client timeout cut the hang short"
    );
    assert!(!row(&store, 21).await.contains_key(attr::ENRICH_LEASE_OWNER));
}

#[tokio::test]
async fn pr_gone_is_skipped_for_good() {
    let (store, github) = setup().await;
    stored_pr(&store, 30, None).await;
    // The repository is there, 30 is not: NOT_FOUND.
    github.add_pull(29, 1, &[]);
    let response = enricher(&store, &github, 3)
        .handle(event(vec![insert_record(30, "1")]), within(30), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let item = row(&store, 30).await;
    let reason = s(&item, attr::ENRICH_SKIPPED_REASON);
    assert!(
        reason.contains("no pull request") && reason.contains("#30"),
        "{reason}"
    );
    assert!(
        item.contains_key(attr::ENRICHED_AT),
        "the stage is finished, never retried forever"
    );
    assert_eq!(
        github.graphql.stats().graphql_requests,
        1,
        "NOT_FOUND is not retried"
    );
}

#[tokio::test]
async fn a_token_github_refuses_finishes_the_row_with_advice_and_releases_the_lease() {
    let (store, github) = setup().await;
    stored_pr(&store, 31, None).await;
    github.add_pull(31, 3, &[]);
    let handler = Arc::new(EnrichHandler::new(
        store.clone(),
        Some(github.apis(2, "ghp_revoked")),
        4,
        500,
    ));
    let response = handler
        .handle(event(vec![insert_record(31, "1")]), within(30), "inv")
        .await;
    assert!(
        response.batch_item_failures.is_empty(),
        "a 401 burns no stream retries: {response:?}"
    );
    let item = row(&store, 31).await;
    let reason = s(&item, attr::ENRICH_SKIPPED_REASON);
    assert!(
        reason.contains("refused the token") && reason.contains("later PRs are enriched"),
        "{reason}"
    );
    assert!(!item.contains_key(attr::ENRICH_LEASE_OWNER));
    assert_eq!(github.graphql.stats().graphql_requests, 1);
}

#[tokio::test]
async fn an_enterprise_server_without_closing_references_is_served_by_rest() {
    let (store, github) = setup().await;
    stored_pr(&store, 32, Some("Fixes #1347")).await;
    github.add_pull(32, 3, &[]);
    github
        .graphql
        .without_field("PullRequest", "closingIssuesReferences");
    github.rest.add_pull(REPO, 32, PullSpec::with_files(120));
    github.rest.add_issue(REPO, 1347, "Found a bug", "open");
    let response = enricher(&store, &github, 1)
        .handle(event(vec![insert_record(32, "1")]), within(30), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let item = row(&store, 32).await;
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 120);
    assert_eq!(item[attr::LINKED_ISSUES].as_l().unwrap().len(), 1);
    assert_eq!(github.graphql.stats().rejected, 1);
    // PR, 2 pages of files, 1 issue.
    assert_eq!(github.rest.request_count(), 4);
}

#[tokio::test]
async fn duplicate_records_and_concurrent_invocations_enrich_once() {
    let (store, github) = setup().await;
    stored_pr(&store, 40, Some("Fixes #1347")).await;
    github.add_pull(40, 120, &[(1347, "Found a bug")]);
    let handler = enricher(&store, &github, 2);

    // The same record twice in one batch, and two invocations at once with it.
    let batch = || event(vec![insert_record(40, "5"), insert_record(40, "5")]);
    let (a, b) = tokio::join!(
        handler.handle(batch(), within(30), "inv-a"),
        handler.handle(batch(), within(30), "inv-b")
    );
    let failures = failed(&a).len() + failed(&b).len();
    assert!(row(&store, 40).await.contains_key(attr::ENRICHED_AT));
    // Losers of the lease report failure and are retried: then they find the row enriched.
    let retry = handler.handle(batch(), within(30), "inv-c").await;
    assert!(retry.batch_item_failures.is_empty());
    assert!(failures <= 3, "one of four copies did the work");
    // One enrichment's worth of requests: the PR with 100 files, then the other 20.
    assert_eq!(github.graphql.stats().graphql_requests, 2);
}

/// The webhook's fields are never touched by enrichment. A row summarized before its files
/// arrived (review defect 2: it was tagged with the repository itself) is put back to be
/// summarized with them: `summarizedAt` goes, everything else stays.
#[tokio::test]
async fn webhook_fields_are_untouched_and_a_row_summarized_without_files_goes_back() {
    let (store, github) = setup().await;
    stored_pr(&store, 50, None).await;
    store
        .client()
        .update_item()
        .table_name(store.table_name())
        .key(attr::REPO, av_s(REPO))
        .key(attr::PR_NUMBER, AttributeValue::N("50".into()))
        .update_expression("SET summarizedAt = :s")
        .expression_attribute_values(":s", av_s("2019-05-15T16:00:00Z"))
        .send()
        .await
        .unwrap();
    let before = row(&store, 50).await;
    github.add_pull(50, 2, &[]);
    let response = enricher(&store, &github, 1)
        .handle(event(vec![insert_record(50, "1")]), within(30), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty());
    let after = row(&store, 50).await;
    for (k, v) in before.iter().filter(|(k, _)| *k != attr::SUMMARIZED_AT) {
        assert_eq!(after.get(k), Some(v), "{k} changed");
    }
    assert!(after.contains_key(attr::ENRICHED_AT));
    assert!(
        !after.contains_key(attr::SUMMARIZED_AT),
        "to be summarized with its files"
    );
    assert!(after.contains_key(attr::PENDING_SHARD));
}

#[tokio::test]
async fn a_deleted_row_and_a_broken_record_do_not_lose_the_others() {
    let (store, github) = setup().await;
    stored_pr(&store, 60, None).await;
    github.add_pull(60, 1, &[]);
    let mut broken = insert_record(61, "2");
    broken.change.keys =
        serde_dynamo::Item::from(HashMap::<String, serde_dynamo::AttributeValue>::new());
    // 62 was never stored (deleted meanwhile): skipped, success.
    let response = enricher(&store, &github, 1)
        .handle(
            event(vec![insert_record(60, "1"), broken, insert_record(62, "3")]),
            within(30),
            "inv",
        )
        .await;
    assert_eq!(
        failed(&response),
        ["2"],
        "only the record without a key fails"
    );
    assert!(row(&store, 60).await.contains_key(attr::ENRICHED_AT));
}

#[tokio::test]
async fn the_schedule_event_runs_the_retry_and_a_stream_event_the_records() {
    let (store, github) = setup().await;
    let handler = enricher(&store, &github, 0);
    let scheduled = std::fs::read_to_string(
        devstack::emulator::repo_root().join("events/enrich.scheduled.json"),
    )
    .unwrap();
    let trigger: stages::enrich::EnrichTrigger = serde_json::from_str(&scheduled).unwrap();
    let answer = handler.invoke(trigger, within(10), "sched").await.unwrap();
    let answer = serde_json::to_value(answer).unwrap();
    assert_eq!(answer["seen"], 0, "{answer}");
    let stream = std::fs::read_to_string(
        devstack::emulator::repo_root().join("events/enrich.dynamodb-stream.json"),
    )
    .unwrap();
    let trigger: stages::enrich::EnrichTrigger = serde_json::from_str(&stream).unwrap();
    assert!(matches!(trigger, stages::enrich::EnrichTrigger::Stream(_)));
}

// ---- Through the real stream: moto's DynamoDB Streams, read by the local event source ----

use devstack::streams::{ensure_queue, EventSourceSettings, StreamEventSource};

async fn event_source(store: &PrStore, max_retry_attempts: u32) -> (StreamEventSource, String) {
    let sdk = sdk().await;
    let mut settings = EventSourceSettings::from_template(
        &devstack::template::Template::bundled().unwrap(),
        "EnrichFunction",
        "PrStream",
    )
    .unwrap();
    assert_eq!(
        settings.filters[0],
        devstack::streams::FilterPattern::event_names(&["INSERT"]),
        "the template's filter"
    );
    settings.max_retry_attempts = max_retry_attempts;
    settings.retry_backoff = Duration::from_millis(10);
    let dlq = ensure_queue(
        &aws_sdk_sqs::Client::new(&sdk),
        &format!("{}-dlq", store.table_name()),
    )
    .await
    .unwrap();
    (
        StreamEventSource::new(&sdk, store.table_name(), dlq.clone(), settings)
            .await
            .unwrap(),
        dlq,
    )
}

#[tokio::test]
async fn a_webhook_insert_is_enriched_from_the_real_stream_and_its_own_modify_does_not_retrigger() {
    let (store, github) = setup().await;
    let (mut source, _) = event_source(&store, 5).await;
    stored_pr(&store, 2, Some("Fixes #1347")).await;
    github.add_pull(2, 5, &[(1347, "Found a bug")]);
    let handler = devstack::dev::enrich_batch_handler(enricher(&store, &github, 2));

    let report = source.poll_once(&handler).await.unwrap();
    assert_eq!(
        (report.invocations, report.succeeded, report.dead_lettered),
        (1, 1, 0),
        "{report:?}"
    );
    let item = row(&store, 2).await;
    assert!(item.contains_key(attr::ENRICHED_AT));
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 5);
    assert_eq!(github.requests(), 1, "one GraphQL query");

    // The enrichment's own write is a MODIFY on the stream: filtered out, never delivered.
    let report = source.poll_once(&handler).await.unwrap();
    assert_eq!(report.invocations, 0, "{report:?}");
    assert!(report.filtered_out >= 1, "{report:?}");
    assert_eq!(github.requests(), 1);
}

#[tokio::test]
async fn a_poison_record_ends_in_the_stream_dlq_and_the_others_are_enriched() {
    let (store, github) = setup().await;
    let (mut source, dlq) = event_source(&store, 2).await;
    stored_pr(&store, 70, None).await;
    stored_pr(&store, 71, None).await;
    github.add_pull(71, 1, &[]);
    // 70's answer never decodes (a poison record, retried then dead-lettered).
    let pr = SyntheticPr {
        number: 70,
        title: "PR 70".into(),
        body: String::new(),
        author: "octocat".into(),
        labels: vec![],
        merged_at: time::macros::datetime!(2019-05-15 15:20:33 UTC),
        files: vec![],
        reviewers: vec!["hubot".into()],
        comments: 3,
    };
    let mut broken = pull_json(
        REPO,
        &pr,
        time::macros::datetime!(2019-05-15 14:00:00 UTC),
        &[],
    );
    broken["mergedAt"] = json!("not a time");
    github.graphql.put_pull(REPO, broken);
    let handler = devstack::dev::enrich_batch_handler(enricher(&store, &github, 0));
    let report = source.poll_once(&handler).await.unwrap();
    assert_eq!(report.dead_lettered, 1, "{report:?}");
    assert!(row(&store, 71).await.contains_key(attr::ENRICHED_AT));
    let item = row(&store, 70).await;
    assert!(!item.contains_key(attr::ENRICHED_AT));
    assert!(!item.contains_key(attr::ENRICH_LEASE_OWNER));

    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let messages = sqs
        .receive_message()
        .queue_url(&dlq)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(messages.len(), 1);
    let body: serde_json::Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    assert_eq!(
        body["record"]["dynamodb"]["Keys"]["prNumber"]["N"], "70",
        "{body}"
    );
    assert_eq!(
        body["requestContext"]["condition"],
        "RetryAttemptsExhausted"
    );
}

#[tokio::test]
async fn the_sample_stream_event_is_enriched_and_its_modify_ignored() {
    let (store, github) = setup().await;
    stored_pr(&store, 2, None).await;
    github.add_pull(2, 5, &[]);
    let text = std::fs::read_to_string(
        devstack::emulator::repo_root().join("events/enrich.dynamodb-stream.json"),
    )
    .unwrap();
    let sample: Event = serde_json::from_str(&text).unwrap();
    assert_eq!(
        sample
            .records
            .iter()
            .map(|r| r.event_name.as_str())
            .collect::<Vec<_>>(),
        ["INSERT", "MODIFY"]
    );
    let response = enricher(&store, &github, 1)
        .handle(sample, within(30), "sample")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let item = row(&store, 2).await;
    assert!(item.contains_key(attr::ENRICHED_AT));
    // One query: the MODIFY record called nothing.
    assert_eq!(github.requests(), 1);
    println!(
        "enriched item for the sample PR (5 files): {} bytes",
        stages::store::item_size(&item)
    );
}

/// An enrich handler keeping contexts, whose first context refresh GitHub fails (the client
/// retries once).
fn with_failing_context(t: &Tables, github: &GitHub) -> Arc<EnrichHandler> {
    for _ in 0..2 {
        github.rest.fail_next(
            &format!("/repos/{REPO}/contents/.github"),
            standins::github_standin::rest::Fault::ServerError,
        );
    }
    Arc::new(
        EnrichHandler::new(t.prs.clone(), Some(github.apis(1, TOKEN)), 4, 500)
            .with_contexts(t.pages.contexts()),
    )
}

/// Review defect 3: the first context refresh of a repository fails (a GitHub 5xx, or, in
/// `chronicle dev` before the fix, a pages table not created yet). Its rows are not enriched
/// and tagged without the context (by top-level directory, for good): they wait, parked, and
/// the refresh is tried again seconds later, not ten minutes.
#[tokio::test]
async fn a_failed_first_context_refresh_makes_rows_wait_and_is_retried_within_seconds() {
    let t = fresh_tables(&sdk().await).await;
    let github = GitHub::start().await;
    for (path, text) in [
        (".github/CODEOWNERS", "/crates/api/ @octo-org/api-team\n"),
        ("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
        (
            "crates/api/Cargo.toml",
            "[package]\nname = \"hello-api\"\ndescription = \"The HTTP API.\"\n",
        ),
    ] {
        github.rest.add_file(REPO, path, text);
    }
    let pr = SyntheticPr {
        number: 31,
        title: "Add paging to the API".into(),
        body: String::new(),
        author: "octocat".into(),
        labels: vec![],
        merged_at: time::macros::datetime!(2019-05-15 15:20:33 UTC),
        files: vec![FileChange {
            path: "crates/api/src/paging.rs".into(),
            additions: 40,
            deletions: 2,
            status: None,
        }],
        reviewers: vec!["hubot".into()],
        comments: 3,
    };
    github.graphql.put_pull(
        REPO,
        pull_json(
            REPO,
            &pr,
            time::macros::datetime!(2019-05-15 14:00:00 UTC),
            &[],
        ),
    );
    stored_pr(&t.prs, 31, None).await;
    // GitHub fails the context's first requests.
    let enrich = with_failing_context(&t, &github);
    let r = enrich
        .handle(event(vec![insert_record(31, "1")]), within(30), "inv")
        .await;
    assert!(failed(&r).is_empty(), "{r:?}");
    let parked = row(&t.prs, 31).await;
    assert!(
        !parked.contains_key(attr::ENRICHED_AT),
        "not enriched without its repository's context: {parked:?}"
    );
    assert_eq!(s(&parked, attr::PENDING_SHARD), DEFERRED_SHARD, "it waits");
    assert!(t.pages.contexts().get(REPO).await.unwrap().is_none());

    // Seconds later (not ten minutes) the retry refreshes the context, then enriches the row.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let report = enrich
        .retry_deferred(time::OffsetDateTime::now_utc(), within(30), "retry")
        .await
        .unwrap();
    assert_eq!(report.enriched, 1, "{report:?}");
    let context = t.pages.contexts().get(REPO).await.unwrap().expect("stored");
    assert!(context.package_named("hello-api").is_some());
    let done = row(&t.prs, 31).await;
    assert!(done.contains_key(attr::ENRICHED_AT));
    assert_ne!(s(&done, attr::PENDING_SHARD), DEFERRED_SHARD);
    // Summarized with its context: on the package's page, not the top-level directory's.
    let summarize = Arc::new(t.summarizer(stages::tagging::ModulesConfig::empty(), 5));
    let r = summarize
        .handle(
            sqs_batch(vec![summarize_message("m", REPO, 31)]),
            within(30),
            "sum",
        )
        .await;
    assert!(r.batch_item_failures.is_empty());
    let modules: Vec<String> = t
        .pages
        .repo_pages(REPO)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.module)
        .collect();
    assert!(modules.contains(&"hello-api".to_string()), "{modules:?}");
    assert!(!modules.contains(&"crates".to_string()), "{modules:?}");
}

/// A MODIFY record of a summarized row, from its images before and after (as the stream gives
/// them with NEW_AND_OLD_IMAGES).
fn modify_record(old: &Item, new: &Item, sequence: &str) -> EventRecord {
    let image = |item: &Item| -> serde_dynamo::Item {
        serde_dynamo::Item::from(
            item.iter()
                .map(|(k, v)| (k.clone(), serde_dynamo::AttributeValue::from(v.clone())))
                .collect::<HashMap<_, _>>(),
        )
    };
    let mut record = insert_record(
        new[attr::PR_NUMBER].as_n().unwrap().parse().unwrap(),
        sequence,
    );
    record.event_name = "MODIFY".into();
    record.change.old_image = image(old);
    record.change.new_image = image(new);
    record
}

/// A stored row marked summarized, as the summarize stage leaves it.
async fn summarized(store: &PrStore, number: u64) -> Item {
    stored_pr(store, number, Some("The body.")).await;
    store
        .client()
        .update_item()
        .table_name(store.table_name())
        .key(attr::REPO, av_s(REPO))
        .key(attr::PR_NUMBER, AttributeValue::N(number.to_string()))
        .update_expression("SET summarizedAt = :s REMOVE pendingShard")
        .expression_attribute_values(":s", av_s("2019-05-15T16:00:00.000Z"))
        .send()
        .await
        .unwrap();
    row(store, number).await
}

/// Review of defect 9: an edit of a summarized PR is passed on by the stream's consumer even
/// with no GitHub token (enrichment off is a supported setup); a body-only edit (its summary is
/// kept, its entries show nothing of the body) puts nothing back.
#[tokio::test]
async fn edits_are_passed_on_without_a_token_and_body_only_edits_change_nothing() {
    let store = fresh_table(&sdk().await).await;
    let before = summarized(&store, 70).await;
    // The title fixed after merge: the webhook's update.
    let mut edited = merged_payload();
    edited["pull_request"]["number"] = json!(70);
    edited["pull_request"]["body"] = json!("The body.");
    edited["pull_request"]["title"] = json!("A title fixed after merge");
    edited["pull_request"]["updated_at"] = json!("2019-05-16T09:00:00Z");
    store_merged(&store, &edited, time::OffsetDateTime::now_utc()).await;
    let after = row(&store, 70).await;
    let no_token = Arc::new(EnrichHandler::new(
        store.clone(),
        None::<stages::enrich::GitHubAccess>,
        4,
        500,
    ));
    let r = no_token
        .handle(
            event(vec![modify_record(&before, &after, "9")]),
            within(30),
            "inv",
        )
        .await;
    assert!(failed(&r).is_empty(), "{r:?}");
    let requeued = row(&store, 70).await;
    assert!(!requeued.contains_key(attr::SUMMARIZED_AT), "{requeued:?}");
    assert!(requeued.contains_key(attr::PENDING_SHARD));

    // A body-only edit of another summarized PR.
    let before = summarized(&store, 71).await;
    let mut body_only = merged_payload();
    body_only["pull_request"]["number"] = json!(71);
    body_only["pull_request"]["body"] = json!("The body, reworded by a bot.");
    body_only["pull_request"]["updated_at"] = json!("2019-05-16T09:00:00Z");
    store_merged(&store, &body_only, time::OffsetDateTime::now_utc()).await;
    let after = row(&store, 71).await;
    assert_ne!(s(&before, attr::FIELDS_HASH), s(&after, attr::FIELDS_HASH));
    let r = no_token
        .handle(
            event(vec![modify_record(&before, &after, "10")]),
            within(30),
            "inv-2",
        )
        .await;
    assert!(failed(&r).is_empty(), "{r:?}");
    assert!(
        row(&store, 71).await.contains_key(attr::SUMMARIZED_AT),
        "left as it is"
    );
}

/// Review of defect 3: a row does not wait for its repository's context forever (a token that
/// can read PRs but not contents, or a refresh that keeps failing): after 15 minutes it is
/// enriched without it.
#[tokio::test]
async fn a_row_waits_for_its_context_fifteen_minutes_at_most() {
    let t = fresh_tables(&sdk().await).await;
    let github = GitHub::start().await;
    github.add_pull(32, 3, &[]);
    let mut payload = merged_payload();
    payload["pull_request"]["number"] = json!(32);
    store_merged(
        &t.prs,
        &payload,
        time::OffsetDateTime::now_utc() - time::Duration::minutes(20),
    )
    .await;
    let enrich = with_failing_context(&t, &github);
    let r = enrich
        .handle(event(vec![insert_record(32, "1")]), within(30), "inv")
        .await;
    assert!(failed(&r).is_empty(), "{r:?}");
    let item = row(&t.prs, 32).await;
    assert!(item.contains_key(attr::ENRICHED_AT), "{item:?}");
    assert_ne!(s(&item, attr::PENDING_SHARD), DEFERRED_SHARD);
}

/// `Fixes other-org/private#42` in a body (anyone who opens a PR writes it) never makes the
/// service fetch another owner's issue, and a reference to a PR is not a linked issue: on the
/// REST path nothing outside the repository is requested, and GraphQL's own closing references
/// to another repository are dropped before they are stored.
#[tokio::test]
async fn linked_issues_stay_inside_the_repository_and_prs_are_not_issues() {
    let (store, github) = setup().await;
    let body =
        "Fixes #1347, fixes other-org/private#42, FIXES Other-Org/Private#43, closes #33, fixes #7";
    stored_pr(&store, 32, Some(body)).await;
    github.add_pull(32, 3, &[]);
    github
        .graphql
        .without_field("PullRequest", "closingIssuesReferences");
    github.rest.add_pull(REPO, 32, PullSpec::with_files(3));
    github.rest.add_pull(REPO, 33, PullSpec::with_files(1));
    github.rest.add_issue(REPO, 1347, "Found a bug", "open");
    github
        .rest
        .add_issue("other-org/private", 42, "Secret roadmap", "open");
    // An issue since moved to a private repository of the same owner: GitHub answers 301.
    github
        .rest
        .transfer_issue(REPO, 7, "Codertocat/security", 3);
    github.rest.add_issue(
        "Codertocat/security",
        3,
        "Private vulnerability report",
        "open",
    );
    let response = enricher(&store, &github, 1)
        .handle(event(vec![insert_record(32, "1")]), within(30), "inv")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let item = row(&store, 32).await;
    let linked: Vec<String> = item[attr::LINKED_ISSUES]
        .as_l()
        .unwrap()
        .iter()
        .map(|i| i.as_m().unwrap()["title"].as_s().unwrap().clone())
        .collect();
    assert_eq!(
        linked,
        ["Found a bug"],
        "PR #33 and other-org's issue are not linked"
    );
    let paths: Vec<String> = github
        .rest
        .requests()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert!(
        paths
            .iter()
            .all(|p| !p.to_ascii_lowercase().contains("other-org")),
        "{paths:?}"
    );

    // GraphQL names the closing issues itself: another repository's is dropped.
    stored_pr(&store, 34, Some("Fixes #9")).await;
    let pr = SyntheticPr {
        number: 34,
        title: "PR 34".into(),
        body: String::new(),
        author: "octocat".into(),
        labels: vec![],
        merged_at: time::macros::datetime!(2019-05-15 15:20:33 UTC),
        files: vec![],
        reviewers: vec!["hubot".into()],
        comments: 3,
    };
    let mut pull = pull_json(
        REPO,
        &pr,
        time::macros::datetime!(2019-05-15 14:00:00 UTC),
        &[(9, "Crash on start"), (42, "Secret roadmap")],
    );
    pull["closingIssuesReferences"][1]["repository"]["nameWithOwner"] = json!("other-org/private");
    let github = GitHub::start().await;
    github.graphql.put_pull(REPO, pull);
    let response = enricher(&store, &github, 1)
        .handle(event(vec![insert_record(34, "2")]), within(30), "inv-2")
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let item = row(&store, 34).await;
    let linked: Vec<String> = item[attr::LINKED_ISSUES]
        .as_l()
        .unwrap()
        .iter()
        .map(|i| i.as_m().unwrap()["repo"].as_s().unwrap().clone())
        .collect();
    assert_eq!(linked, [REPO]);
}
