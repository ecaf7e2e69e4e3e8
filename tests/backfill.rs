//! `chronicle backfill` against the emulator, with GitHub's GraphQL API played by the strict
//! stand-in (`standins::github_standin`): every query validated against GitHub's published schema,
//! costed by GitHub's rule, and charged against a (compressed) hourly budget.

use std::time::Duration;

use serde_json::json;
use stages::backfill::{Backfill, BackfillError, BackfillOptions, BackfillReport, Quiet};
use stages::domain::RepoName;
use stages::github::graphql::{GraphQlClient, GraphQlError};
use stages::secret::Secret;
use stages::store::{attr, CheckpointStore, PrStore};
use support::*;
use time::OffsetDateTime;

use standins::github_standin::{history_pulls, pull_json, Fault, GitHubStandIn};
use standins::synthetic::{HistorySpec, SyntheticPr};

const TOKEN: &str = "ghp_backfill_test_token";
const REPO: &str = "Codertocat/Hello-World";

fn spec(prs: usize) -> HistorySpec {
    HistorySpec {
        prs,
        modules: 8,
        per_day: 3.0,
        seed: 7,
        end: time::macros::datetime!(2026-11-30 12:00 UTC),
    }
}

fn merged_count(pulls: &[serde_json::Value]) -> usize {
    pulls.iter().filter(|p| p["merged"] == json!(true)).count()
}

async fn standin(prs: usize) -> (GitHubStandIn, Vec<serde_json::Value>) {
    let stand_in = GitHubStandIn::start(TOKEN).await.unwrap();
    let pulls = history_pulls(REPO, &spec(prs));
    stand_in.set_repo(REPO, pulls.clone());
    (stand_in, pulls)
}

fn client(stand_in: &GitHubStandIn, timeout: Duration) -> GraphQlClient {
    GraphQlClient::new(stand_in.url(), &Secret::new(TOKEN), timeout).unwrap()
}

struct Run {
    store: PrStore,
    checkpoints: CheckpointStore,
}

impl Run {
    async fn new() -> Run {
        let tables = fresh_tables(&sdk().await).await;
        let client = aws_sdk_dynamodb::Client::new(&sdk().await);
        Run {
            checkpoints: CheckpointStore::new(client, tables.pages.table_name().to_string()),
            store: tables.prs,
        }
    }

    async fn backfill(
        &self,
        github: &GraphQlClient,
        options: &BackfillOptions,
    ) -> Result<BackfillReport, BackfillError> {
        Backfill {
            github,
            store: &self.store,
            checkpoints: &self.checkpoints,
        }
        .run(options, &Quiet)
        .await
    }
}

fn options() -> BackfillOptions {
    BackfillOptions::new(RepoName::parse(REPO).unwrap())
}

#[tokio::test]
async fn queries_are_checked_against_github_schema_and_cost_what_github_says() {
    let (stand_in, pulls) = standin(120).await;
    let github = client(&stand_in, Duration::from_secs(10));
    let repo = RepoName::parse(REPO).unwrap();
    let page = github.merged_pulls(&repo, 50, None, None).await.unwrap();
    assert_eq!(page.total as usize, merged_count(&pulls));
    assert_eq!(page.pulls.len(), 50);
    // 1 + 6 × 50 connections = 301 requests → 3 points; 1 + 6 × 40 = 241 → 2.
    assert_eq!(page.rate.unwrap().cost, 3);
    let page = github.merged_pulls(&repo, 40, None, None).await.unwrap();
    assert_eq!(page.rate.unwrap().cost, 2);
    // Reviews: the approvals, not the comment-only review, and never the author's own.
    let reviewed = page.pulls.iter().find(|p| !p.reviewers.is_empty()).unwrap();
    assert!(!reviewed.reviewers.contains(&"drive-by".to_string()));
    assert!(!reviewed.reviewers.contains(&reviewed.pr.author));
    assert!(reviewed.totals.reviews >= reviewed.reviewers.len() as u64);
    assert_eq!(
        stand_in.stats().rejected,
        0,
        "Chronicle's own queries are valid"
    );

    // The stand-in is strict: an unknown field, an oversized page and a wrong variable type
    // get GitHub's errors answer.
    let http = reqwest::Client::new();
    for (query, variables, expect) in [
        ("query { repository(owner: \"a\", name: \"b\") { pullRequests(first: 5) { nodes { colour } } } }", json!({}), "colour"),
        ("query { repository(owner: \"a\", name: \"b\") { pullRequests(first: 101) { nodes { number } } } }", json!({}), "exceeds the `first` limit"),
        ("query { repository(owner: \"a\", name: \"b\") { pullRequests { nodes { number } } } }", json!({}), "must provide a `first` or `last`"),
        ("query Q($n: Int!) { repository(owner: \"a\", name: \"b\") { pullRequest(number: $n) { title } } }", json!({ "n": "seven" }), "n"),
    ] {
        let answer: serde_json::Value = http
            .post(format!("{}/graphql", stand_in.url()))
            .bearer_auth(TOKEN)
            .header("user-agent", "test")
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let message = answer["errors"].to_string();
        assert!(answer.get("data").is_none(), "{answer}");
        assert!(message.contains(expect), "{query}: {message}");
    }
    assert_eq!(stand_in.stats().rejected, 4);
}

#[tokio::test]
async fn a_backfill_imports_every_merged_pr_enriched_and_a_second_run_writes_nothing() {
    let (stand_in, pulls) = standin(300).await;
    let run = Run::new().await;
    let github = client(&stand_in, Duration::from_secs(10));
    let report = run.backfill(&github, &options()).await.unwrap();
    let merged = merged_count(&pulls) as u64;
    assert_eq!(report.imported, merged, "{report:?}");
    assert!(report.complete && !report.resumed);
    let rows = all_items(&run.store).await;
    assert_eq!(
        rows.len() as u64,
        merged,
        "closed-unmerged PRs are left out"
    );
    for row in &rows {
        assert!(
            row.contains_key(attr::ENRICHED_AT),
            "imported already enriched"
        );
        assert!(row.contains_key(attr::PENDING_SHARD), "pending its summary");
        assert!(row.contains_key(attr::FILES));
    }
    // Closing references are GitHub's own links.
    let linked = rows
        .iter()
        .filter(|r| {
            r.get(attr::LINKED_ISSUES)
                .and_then(|l| l.as_l().ok())
                .is_some_and(|l| !l.is_empty())
        })
        .count();
    assert!(linked > 20, "{linked} rows with closing issues");
    // Reviewers and the discussion are stored with the PR, from the same query.
    let reviewed = rows
        .iter()
        .filter(|r| {
            r.get(attr::REVIEWERS)
                .and_then(|l| l.as_l().ok())
                .is_some_and(|l| !l.is_empty())
        })
        .count();
    assert!(reviewed > 50, "{reviewed} rows with reviewers");
    assert!(rows.iter().all(|r| r.contains_key(attr::DISCUSSION)));
    // Bots are named as REST and webhooks name them.
    assert!(rows.iter().any(|r| s(r, attr::AUTHOR) == "dependabot[bot]"));
    // Points: ≤ 60 per 1,000 PRs.
    assert!(
        report.points * 1000 / merged <= 60,
        "{} points for {merged} PRs",
        report.points
    );
    assert_eq!(stand_in.stats().rest_requests, 0);

    // Again from the start: every write refused by its condition, nothing changed.
    let mut again = options();
    again.restart = true;
    let second = run.backfill(&github, &again).await.unwrap();
    assert_eq!(
        (second.imported, second.updated, second.enriched),
        (0, 0, 0),
        "{second:?}"
    );
    assert_eq!(second.unchanged, merged);
    let after = all_items(&run.store).await;
    let key = |i: &stages::store::Item| format!("{:?}", i.get(attr::PR_NUMBER));
    let mut before_sorted = rows.clone();
    before_sorted.sort_by_key(key);
    let mut after_sorted = after;
    after_sorted.sort_by_key(key);
    assert_eq!(before_sorted, after_sorted, "a second run changes nothing");

    // Continuing from the finished checkpoint reads only what is new.
    let third = run.backfill(&github, &options()).await.unwrap();
    assert!(third.resumed);
    assert_eq!((third.imported, third.unchanged, third.pages), (0, 0, 1));
}

/// A merged delivery for PR `number` updated at `updated_at`, titled `title`.
fn delivery(number: u64, title: &str, updated_at: &str) -> String {
    let mut payload = merged_payload();
    payload["repository"]["full_name"] = json!(REPO);
    payload["pull_request"]["number"] = json!(number);
    payload["pull_request"]["title"] = json!(title);
    payload["pull_request"]["updated_at"] = json!(updated_at);
    payload.to_string()
}

fn synthetic(number: u64, title: &str, merged_at: OffsetDateTime) -> SyntheticPr {
    SyntheticPr {
        number,
        title: title.into(),
        body: "Fixes the thing.".into(),
        author: "octocat".into(),
        labels: vec![],
        merged_at,
        files: vec![stages::domain::FileChange {
            path: "api/src/lib.rs".into(),
            additions: 3,
            deletions: 1,
            status: None,
        }],
        reviewers: vec!["hubot".into()],
        comments: 3,
    }
}

#[tokio::test]
async fn backfill_and_webhook_in_either_order_keep_one_row_with_the_newer_fields() {
    let stand_in = GitHubStandIn::start(TOKEN).await.unwrap();
    let merged = time::macros::datetime!(2026-01-10 10:00 UTC);
    // GitHub's copy was updated at merged + 5 s.
    let created = merged - time::Duration::hours(3);
    stand_in.set_repo(
        REPO,
        vec![
            pull_json(
                REPO,
                &synthetic(1, "from GitHub (newer)", merged),
                created,
                &[],
            ),
            pull_json(
                REPO,
                &synthetic(2, "from GitHub (older)", merged),
                created,
                &[],
            ),
        ],
    );
    let run = Run::new().await;
    let webhook = handler(run.store.clone());
    // PR 1: an older delivery first, then the backfill; PR 2: a newer delivery first.
    let a = webhook
        .handle(signed(
            "pull_request",
            "g1",
            delivery(1, "webhook (older)", "2026-01-10T10:00:01Z"),
        ))
        .await;
    let b = webhook
        .handle(signed(
            "pull_request",
            "g2",
            delivery(2, "webhook (newer)", "2026-01-11T10:00:00Z"),
        ))
        .await;
    assert_eq!(
        (a.body["stored"].as_str(), b.body["stored"].as_str()),
        (Some("inserted"), Some("inserted"))
    );
    let github = client(&stand_in, Duration::from_secs(10));
    let report = run.backfill(&github, &options()).await.unwrap();
    assert_eq!(
        (report.imported, report.updated, report.unchanged),
        (0, 1, 1),
        "{report:?}"
    );
    assert_eq!(
        s(&stored_row(&run.store, REPO, 1).await, attr::TITLE),
        "from GitHub (newer)"
    );
    assert_eq!(
        s(&stored_row(&run.store, REPO, 2).await, attr::TITLE),
        "webhook (newer)"
    );
    // Neither row was enriched by a worker: the import filled both in.
    assert_eq!(report.enriched, 2);

    // And the other order: backfill first, then a newer delivery wins, an older one does not.
    let run = Run::new().await;
    run.backfill(&github, &options()).await.unwrap();
    let webhook = handler(run.store.clone());
    let newer = webhook
        .handle(signed(
            "pull_request",
            "g3",
            delivery(1, "webhook (newest)", "2026-02-01T00:00:00Z"),
        ))
        .await;
    let older = webhook
        .handle(signed(
            "pull_request",
            "g4",
            delivery(2, "webhook (oldest)", "2026-01-01T00:00:00Z"),
        ))
        .await;
    assert_eq!(newer.body["stored"], "updated");
    assert!(older.body.get("unchanged").is_some(), "{older:?}");
    let row1 = stored_row(&run.store, REPO, 1).await;
    assert_eq!(s(&row1, attr::TITLE), "webhook (newest)");
    assert!(row1.contains_key(attr::ENRICHED_AT), "pipeline state kept");
    assert_eq!(
        s(&stored_row(&run.store, REPO, 2).await, attr::TITLE),
        "from GitHub (older)"
    );
    assert_eq!(all_items(&run.store).await.len(), 2);
}

#[tokio::test]
async fn a_run_killed_mid_way_resumes_from_its_checkpoint_and_imports_each_pr_once() {
    let (stand_in, pulls) = standin(400).await;
    let merged = merged_count(&pulls) as u64;
    let run = Run::new().await;
    let github = client(&stand_in, Duration::from_secs(10));
    let mut small = options();
    small.page_size = 20;
    {
        let killed = run.backfill(&github, &small);
        tokio::pin!(killed);
        // Let it write a few pages, then drop the future (a killed process).
        let checkpoints = run.checkpoints.clone();
        let repo = RepoName::parse(REPO).unwrap();
        let watch = async {
            loop {
                if checkpoints
                    .get(&repo)
                    .await
                    .unwrap()
                    .is_some_and(|c| c.pages >= 3)
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            _ = &mut killed => panic!("finished before it could be killed"),
            _ = watch => {}
        }
    }
    let first_pages = run
        .checkpoints
        .get(&RepoName::parse(REPO).unwrap())
        .await
        .unwrap()
        .unwrap()
        .pages;
    let resumed = run.backfill(&github, &small).await.unwrap();
    assert!(resumed.resumed, "{resumed:?}");
    let total_pages = merged.div_ceil(20);
    assert!(
        resumed.pages < total_pages,
        "continued, not restarted: {} of {total_pages} pages",
        resumed.pages
    );
    assert!(first_pages >= 3);
    let rows = all_items(&run.store).await;
    assert_eq!(rows.len() as u64, merged, "every PR exactly once");
    assert!(rows.iter().all(|r| r.contains_key(attr::ENRICHED_AT)));
}

#[tokio::test]
async fn since_and_until_bound_what_is_imported() {
    let (stand_in, pulls) = standin(300).await;
    let run = Run::new().await;
    let github = client(&stand_in, Duration::from_secs(10));
    // The history runs from late August to the end of November 2026.
    let since = time::macros::datetime!(2026-09-15 00:00 UTC);
    let until = time::macros::datetime!(2026-10-31 23:59:59 UTC);
    let rfc = time::format_description::well_known::Rfc3339;
    let expected = pulls
        .iter()
        .filter(|p| p["merged"] == json!(true))
        .filter(|p| {
            let t = OffsetDateTime::parse(p["mergedAt"].as_str().unwrap(), &rfc).unwrap();
            t >= since && t <= until
        })
        .count() as u64;
    assert!(expected > 50);
    let mut window = options();
    window.since = Some(since);
    window.until = Some(until);
    let report = run.backfill(&github, &window).await.unwrap();
    assert_eq!(report.imported, expected, "{report:?}");
    for row in all_items(&run.store).await {
        let t = OffsetDateTime::parse(s(&row, attr::MERGED_AT), &rfc).unwrap();
        assert!(t >= since && t <= until);
    }
    // Ordered by creation, the run stops at the first PR opened after --until.
    assert!(
        report.pages < (merged_count(&pulls) as u64).div_ceil(window.page_size as u64),
        "{report:?}"
    );

    // --limit caps one run.
    let run = Run::new().await;
    let mut limited = options();
    limited.limit = Some(30);
    let report = run.backfill(&github, &limited).await.unwrap();
    assert_eq!(report.imported, 30);
    assert!(!report.complete);
    // The next limited run continues after those 30.
    let next = run.backfill(&github, &limited).await.unwrap();
    assert!(next.resumed);
    assert_eq!((next.imported, next.unchanged), (30, 0), "{next:?}");
    assert_eq!(all_items(&run.store).await.len(), 60);
}

#[tokio::test]
async fn a_pr_with_250_files_has_every_file_counted() {
    let stand_in = GitHubStandIn::start(TOKEN).await.unwrap();
    let merged = time::macros::datetime!(2026-03-01 10:00 UTC);
    let mut big = synthetic(9, "feat: a big one", merged);
    big.files = (0..250)
        .map(|i| stages::domain::FileChange {
            path: format!("{}/src/f{i}.rs", if i < 200 { "core" } else { "web" }),
            additions: 1 + i,
            deletions: 0,
            status: None,
        })
        .collect();
    stand_in.set_repo(
        REPO,
        vec![pull_json(REPO, &big, merged - time::Duration::days(1), &[])],
    );
    let run = Run::new().await;
    let github = client(&stand_in, Duration::from_secs(10));
    let report = run.backfill(&github, &options()).await.unwrap();
    assert_eq!(report.imported, 1);
    // One page, then two more file pages (100 + 100 + 50).
    assert_eq!(stand_in.stats().graphql_requests, 3);
    let row = stored_row(&run.store, REPO, 9).await;
    let dirs = row[attr::DIRECTORIES].as_m().unwrap();
    assert_eq!(dirs["core"].as_n().unwrap(), "200");
    assert_eq!(dirs["web"].as_n().unwrap(), "50");
    assert_eq!(row[attr::CHANGED_FILES].as_n().unwrap(), "250");
    assert_eq!(row[attr::FILES].as_l().unwrap().len(), 250);
    assert_eq!(row[attr::FILES_TRUNCATED].as_bool().unwrap(), &false);
}

#[tokio::test]
async fn a_spent_budget_is_waited_out_until_reset_at() {
    let (stand_in, pulls) = standin(200).await;
    // A compressed hour: 5 points per 10 seconds (long enough that a slow machine's pages cannot
    // outlast it). A page of 40 costs 2.
    stand_in.set_budget(5, Duration::from_secs(10));
    let run = Run::new().await;
    let github = client(&stand_in, Duration::from_secs(10));
    let mut frugal = options();
    frugal.reserve_points = 0;
    let started = std::time::Instant::now();
    let report = run.backfill(&github, &frugal).await.unwrap();
    assert_eq!(report.imported, merged_count(&pulls) as u64);
    assert!(report.waited > Duration::ZERO, "{report:?}");
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(
        stand_in.stats().rate_limited,
        0,
        "waited before GitHub had to refuse"
    );

    // Refused anyway (another user of the token spent it): RATE_LIMITED is waited out too.
    let run = Run::new().await;
    stand_in.set_budget(5, Duration::from_secs(2));
    stand_in.spend(5);
    let report = run.backfill(&github, &frugal).await.unwrap();
    assert_eq!(report.imported, merged_count(&pulls) as u64);
    assert!(stand_in.stats().rate_limited >= 1);
}

#[tokio::test]
async fn secondary_limits_502s_timeouts_and_partial_answers_are_survived() {
    let (stand_in, pulls) = standin(200).await;
    stand_in.fault(
        None,
        Fault::SecondaryLimit {
            retry_after_secs: 1,
        },
    );
    stand_in.fault(None, Fault::BadGateway);
    stand_in.fault(None, Fault::Hang(Duration::from_secs(3)));
    stand_in.fault(None, Fault::Partial);
    let run = Run::new().await;
    let github = client(&stand_in, Duration::from_secs(1));
    let report = run.backfill(&github, &options()).await.unwrap();
    assert_eq!(report.imported, merged_count(&pulls) as u64, "{report:?}");
    assert_eq!(stand_in.stats().faults_served, 4);
    assert!(report.requests >= report.pages + 4, "{report:?}");
    assert_eq!(all_items(&run.store).await.len(), merged_count(&pulls));
}

#[tokio::test]
async fn bad_input_is_refused_clearly_before_any_write() {
    let (stand_in, _) = standin(20).await;
    let run = Run::new().await;
    let github = client(&stand_in, Duration::from_secs(10));

    let mut wrong = BackfillOptions::new(RepoName::parse("Codertocat/No-Such-Repo").unwrap());
    wrong.page_size = 10;
    let e = run.backfill(&github, &wrong).await.unwrap_err();
    assert!(
        matches!(
            e,
            BackfillError::GitHub(GraphQlError::RepositoryNotFound { .. })
        ),
        "{e}"
    );
    assert!(e.is_usage() && e.to_string().contains("Codertocat/No-Such-Repo"));

    // Another spelling of the name would store a second copy of every row.
    let e = run
        .backfill(
            &github,
            &BackfillOptions::new(RepoName::parse("codertocat/hello-world").unwrap()),
        )
        .await
        .unwrap_err();
    assert!(
        e.is_usage()
            && e.to_string()
                .contains("GitHub names the repository Codertocat/Hello-World"),
        "{e}"
    );

    let bad_token = GraphQlClient::new(
        stand_in.url(),
        &Secret::new("ghp_revoked"),
        Duration::from_secs(5),
    )
    .unwrap();
    let e = run.backfill(&bad_token, &options()).await.unwrap_err();
    assert!(
        matches!(e, BackfillError::GitHub(GraphQlError::Unauthorized { .. })),
        "{e}"
    );
    assert!(e.is_usage());

    let mut backwards = options();
    backwards.since = Some(time::macros::datetime!(2026-05-01 0:00 UTC));
    backwards.until = Some(time::macros::datetime!(2026-04-01 0:00 UTC));
    let e = run.backfill(&github, &backwards).await.unwrap_err();
    assert!(
        e.is_usage() && e.to_string().contains("after --until"),
        "{e}"
    );
    assert!(all_items(&run.store).await.is_empty(), "nothing written");

    // The command line: bad names and dates, and no stack, exit 2 before anything happens.
    use ops::backfill::{options as parse, BackfillArgs};
    let args = |repo: &str, since: Option<&str>| BackfillArgs {
        repo: repo.into(),
        since: since.map(str::to_string),
        page_size: 50,
        ..Default::default()
    };
    assert!(parse(&args("not-a-repo", None), 500).is_err());
    assert!(parse(&args(REPO, Some("last tuesday")), 500)
        .unwrap_err()
        .to_string()
        .contains("YYYY-MM-DD"));
    let missing = BackfillArgs {
        stack: Some("no-such-chronicle-stack".into()),
        ..args(REPO, None)
    };
    assert_eq!(ops::backfill::run(missing).await, ops::backfill::EXIT_USAGE);
}

#[tokio::test]
async fn backfilled_rows_are_not_enriched_again() {
    let (stand_in, pulls) = standin(40).await;
    let run = Run::new().await;
    let github = client(&stand_in, Duration::from_secs(10));
    run.backfill(&github, &options()).await.unwrap();
    // The enrich stage sees each INSERT: every row is already enriched, no REST call is made.
    let apis = stages::enrich::GitHubApis::new(
        stand_in.url(),
        &Secret::new(TOKEN),
        Duration::from_secs(2),
        0,
    )
    .unwrap();
    let queries = stand_in.stats().graphql_requests;
    let enrich = stages::enrich::EnrichHandler::new(run.store.clone(), Some(apis), 4, 500);
    for row in all_items(&run.store).await {
        let number: u64 = row[attr::PR_NUMBER].as_n().unwrap().parse().unwrap();
        let mut record = aws_lambda_events::event::dynamodb::EventRecord::default();
        record.event_name = "INSERT".into();
        record.change.keys = serde_dynamo::Item::from(std::collections::HashMap::from([
            (
                attr::REPO.to_string(),
                serde_dynamo::AttributeValue::S(REPO.into()),
            ),
            (
                attr::PR_NUMBER.to_string(),
                serde_dynamo::AttributeValue::N(number.to_string()),
            ),
        ]));
        let outcome = enrich
            .process(&record, within(10), "enrich-test")
            .await
            .unwrap();
        assert_eq!(outcome, stages::enrich::RecordOutcome::AlreadyEnriched);
    }
    assert_eq!(stand_in.stats().rest_requests, 0);
    assert_eq!(
        stand_in.stats().graphql_requests,
        queries,
        "no GitHub call at all"
    );
    assert!(merged_count(&pulls) > 30);
}

/// Every items of a table (a Scan: the table is a test's own).
async fn items_in(sdk: &aws_config::SdkConfig, table: &str) -> usize {
    aws_sdk_dynamodb::Client::new(sdk)
        .scan()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .count as usize
}

/// `chronicle backfill` as the command runs it (context refresh included): a repository that
/// does not exist, another spelling of its name, a revoked token, a missing token and a
/// backwards window are each refused with exit 2, and not one item is written to either table
/// (the context refresh used to store a `#context` for a repository that does not exist).
#[tokio::test]
async fn the_command_writes_nothing_for_any_bad_input() {
    use ops::backfill::{run_with, BackfillArgs, Target, EXIT_USAGE};
    let (stand_in, _) = standin(5).await;
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let target = |token: Option<&str>| Target {
        sdk: sdk.clone(),
        table: stages::config::TableConfig {
            table_name: t.prs.table_name().to_string(),
            pending_shards: 4,
        },
        pages_table: t.pages.table_name().to_string(),
        api_url: stand_in.url().to_string(),
        token: token.map(Secret::new),
        app: None,
        max_paths: 500,
        issue_scope: Default::default(),
    };
    let args = |repo: &str| BackfillArgs {
        repo: repo.into(),
        page_size: 50,
        ..Default::default()
    };
    let cases: Vec<(&str, BackfillArgs, Target, &str)> = vec![
        (
            "no such repository",
            args("Codertocat/No-Such-Repo"),
            target(Some(TOKEN)),
            "no repository",
        ),
        (
            "another spelling",
            args("codertocat/hello-world"),
            target(Some(TOKEN)),
            "GitHub names the repository",
        ),
        (
            "a revoked token",
            args(REPO),
            target(Some("ghp_revoked")),
            "token",
        ),
        (
            "no token",
            args(REPO),
            target(None),
            "no GitHub credentials",
        ),
        (
            "a backwards window",
            BackfillArgs {
                since: Some("2026-05-01".into()),
                until: Some("2026-04-01".into()),
                ..args(REPO)
            },
            target(Some(TOKEN)),
            "after --until",
        ),
    ];
    for (case, args, target, says) in cases {
        let (code, message) = run_with(&args, &target).await.unwrap_err();
        assert_eq!(code, EXIT_USAGE, "{case}: {message}");
        assert!(message.contains(says), "{case}: {message}");
        assert_eq!(
            items_in(&sdk, t.prs.table_name()).await,
            0,
            "{case}: PR table"
        );
        assert_eq!(
            items_in(&sdk, t.pages.table_name()).await,
            0,
            "{case}: pages table"
        );
    }
    // And the good input writes.
    let report = run_with(&args(REPO), &target(Some(TOKEN))).await.unwrap();
    assert!(report.imported > 0);
    assert!(
        items_in(&sdk, t.pages.table_name()).await > 0,
        "context and checkpoint"
    );
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        devstack::emulator::repo_root()
            .join("tests/fixtures/github")
            .join(name),
    )
    .unwrap()
}

/// One command for an organisation: the App's installation lists its repositories (the
/// archived and the empty one skipped), each is imported through the installation's token with
/// a checkpoint of its own. A run stopped mid-way (its future dropped) is resumed by the next;
/// the token expires mid-run (a compressed clock: two seconds) and is refused once, and is
/// minted again without a failed PR; the installation's GraphQL points are one budget that
/// never goes below the reserve. A run after a complete one writes nothing.
#[tokio::test]
async fn an_organisation_is_backfilled_through_its_app_installation() {
    use ops::backfill::{BackfillArgs, Target};
    use standins::github_standin::InstalledSpec;
    let stand_in = GitHubStandIn::start(TOKEN).await.unwrap();
    stand_in.add_app_hook("1", &fixture("app-test-key.pub.pem"), 1, None);
    let (api, web, old, empty) = ("acme/api", "acme/web", "acme/old", "acme/empty");
    let mut merged = 0;
    let mut api_merged = 0;
    for (repo, prs) in [(api, 120), (web, 80), (old, 10)] {
        let pulls = history_pulls(repo, &spec(prs));
        merged += if repo == old { 0 } else { merged_count(&pulls) };
        if repo == api {
            api_merged = merged_count(&pulls);
        }
        stand_in.set_repo(repo, pulls);
    }
    stand_in.set_repo(empty, Vec::new());
    let installed = |name: &str, archived| InstalledSpec {
        full_name: name.into(),
        archived,
        empty: name == empty,
    };
    stand_in.add_installation(
        4242,
        "acme",
        vec![
            installed(api, false),
            installed(web, false),
            installed(old, true),
            installed(empty, false),
        ],
    );
    stand_in.set_installation_token_ttl(Duration::from_secs(2));
    // A compressed hour: 8 points per 3 seconds, 2 kept in reserve; a page of 40 costs 2.
    stand_in.set_budget(8, Duration::from_secs(3));
    let tables = fresh_tables(&sdk().await).await;
    let target = Target {
        sdk: sdk().await,
        table: tables.prs.table().clone(),
        pages_table: tables.pages.table_name().to_string(),
        api_url: stand_in.url().to_string(),
        token: None,
        app: Some(("1".into(), Secret::new(fixture("app-test-key.pem")))),
        max_paths: 500,
        issue_scope: Default::default(),
    };
    let args = BackfillArgs {
        org: Some("acme".into()),
        page_size: 40,
        reserve_points: 2,
        ..Default::default()
    };
    // A run stopped once the first repository's first page is checkpointed, before its last
    // (the process killed: its future dropped, mid-request or mid-wait).
    let checkpoints = stages::store::CheckpointStore::new(
        aws_sdk_dynamodb::Client::new(&target.sdk),
        target.pages_table.clone(),
    );
    let api_name = stages::domain::RepoName::parse(api).unwrap();
    {
        let run = ops::backfill_org::run_org(&args, &target);
        tokio::pin!(run);
        loop {
            tokio::select! {
                r = &mut run => panic!("the run ended before it was stopped: {r:?}"),
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            let checkpoint = checkpoints.get(&api_name).await.unwrap();
            if checkpoint.is_some_and(|c| c.cursor.is_some() && c.finished_at.is_none()) {
                break;
            }
        }
    }
    let stopped_with = all_items(&tables.prs).await.len();
    assert!(
        stopped_with < api_merged,
        "stopped inside acme/api: {stopped_with} of {api_merged}"
    );
    // The token in hand expires just before the next run's second GraphQL query: that query
    // is refused with 401 and asked again with a new token.
    stand_in.expire_installation_tokens_at_graphql_request(stand_in.stats().graphql_requests + 2);
    let minted_before = stand_in.installation_tokens_minted();
    let report = ops::backfill_org::run_org(&args, &target).await.unwrap();
    assert_eq!(report.installation, 4242);
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!(
        report.skipped,
        [
            (old.to_string(), "archived".to_string()),
            (
                empty.to_string(),
                "empty: no merged pull requests".to_string()
            )
        ]
    );
    let names: Vec<&str> = report.done.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, [api, web]);
    assert!(
        report.done[0].1.resumed && report.done[0].1.imported > 0,
        "api resumed at its checkpoint, and imported the rest: {report:?}"
    );
    let imported: u64 = report.done.iter().map(|(_, r)| r.imported).sum();
    assert!(
        imported as usize + stopped_with >= merged && imported as usize <= merged,
        "{imported} + {stopped_with} of {merged}: {report:?}"
    );
    assert!(report.done.iter().all(|(_, r)| r.complete));
    let rows = all_items(&tables.prs).await;
    assert_eq!(rows.len(), merged);
    assert!(rows.iter().all(|r| r
        .get(attr::REPO)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        != Some(old)));
    // The token was minted again: before it expired, and once after GitHub refused it.
    assert!(report.tokens_minted >= 2, "{report:?}");
    assert!(report.tokens_refreshed >= 1, "{report:?}");
    assert_eq!(
        stand_in.installation_tokens_minted() - minted_before,
        report.tokens_minted
    );
    // One budget: waited for, never refused, never below the reserve.
    let stats = stand_in.stats();
    assert_eq!(stats.rate_limited, 0, "{stats:?}");
    assert!(stats.min_remaining.unwrap() >= 2, "{stats:?}");
    assert!(report.done.iter().any(|(_, r)| r.waited > Duration::ZERO));
    println!("{}", ops::backfill_org::summary(&report));

    // A second run: every repository resumes at its checkpoint, and nothing is written.
    let again = ops::backfill_org::run_org(&args, &target).await.unwrap();
    assert!(again.failed.is_empty(), "{again:?}");
    let names: Vec<&str> = again.done.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, [api, web], "{again:?}");
    for (repo, r) in &again.done {
        assert_eq!((r.imported, r.updated), (0, 0), "{repo}: {r:?}");
    }
    assert_eq!(all_items(&tables.prs).await.len(), merged);

    // `--repos` keeps only the matching ones.
    let only_web = BackfillArgs {
        repos: vec!["web".into()],
        ..args.clone()
    };
    let filtered = ops::backfill_org::run_org(&only_web, &target)
        .await
        .unwrap();
    let names: Vec<&str> = filtered.done.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, [web]);
    assert!(filtered
        .skipped
        .contains(&(api.to_string(), "not matched by --repos".to_string())));

    // One repository on a stack with the App and no token: its installation is found with the
    // App's JWT (`GET /repos/{o}/{r}/installation`), and the run resumes at its checkpoint.
    let one = BackfillArgs {
        repo: web.into(),
        org: None,
        ..args.clone()
    };
    let r = ops::backfill::run_with(&one, &target).await.unwrap();
    assert!(r.complete && r.resumed, "{r:?}");
    assert_eq!((r.imported, r.updated), (0, 0), "{r:?}");
}

/// `--org` names a user account: GitHub answers 404 at `/orgs/{org}/installation`, and the
/// user's installation (`/users/{username}/installation`) is found and backfilled. `--org`
/// with an `--installation` of another account is refused as a usage error before anything
/// is written; with the account's own, it runs.
#[tokio::test]
async fn a_user_accounts_installation_is_backfilled_and_a_disagreeing_installation_refused() {
    use ops::backfill::{BackfillArgs, Target, EXIT_USAGE};
    use standins::github_standin::InstalledSpec;
    let stand_in = GitHubStandIn::start(TOKEN).await.unwrap();
    stand_in.add_app_hook("1", &fixture("app-test-key.pub.pem"), 1, None);
    let (tools, api) = ("octocat/tools", "acme/api");
    let pulls = history_pulls(tools, &spec(12));
    let merged = merged_count(&pulls);
    stand_in.set_repo(tools, pulls);
    stand_in.set_repo(api, history_pulls(api, &spec(4)));
    let installed = |name: &str| InstalledSpec {
        full_name: name.into(),
        archived: false,
        empty: false,
    };
    stand_in.add_user_installation(77, "octocat", vec![installed(tools)]);
    stand_in.add_installation(4242, "acme", vec![installed(api)]);
    let sdk = sdk().await;
    let tables = fresh_tables(&sdk).await;
    let target = Target {
        sdk: sdk.clone(),
        table: tables.prs.table().clone(),
        pages_table: tables.pages.table_name().to_string(),
        api_url: stand_in.url().to_string(),
        token: None,
        app: Some(("1".into(), Secret::new(fixture("app-test-key.pem")))),
        max_paths: 500,
        issue_scope: Default::default(),
    };

    // Another account's installation with --org octocat: refused, nothing written.
    let disagreeing = BackfillArgs {
        org: Some("octocat".into()),
        installation: Some(4242),
        page_size: 40,
        reserve_points: 2,
        ..Default::default()
    };
    let (code, message) = ops::backfill_org::run_org(&disagreeing, &target)
        .await
        .unwrap_err();
    assert_eq!(code, EXIT_USAGE, "{message}");
    assert!(
        message.contains("4242") && message.contains("acme") && message.contains("octocat"),
        "{message}"
    );
    assert_eq!(items_in(&sdk, tables.prs.table_name()).await, 0);
    assert_eq!(items_in(&sdk, tables.pages.table_name()).await, 0);
    assert_eq!(stand_in.installation_tokens_minted(), 0);
    // An installation the App does not have: the same.
    let unknown = BackfillArgs {
        installation: Some(5),
        ..disagreeing.clone()
    };
    let (code, message) = ops::backfill_org::run_org(&unknown, &target)
        .await
        .unwrap_err();
    assert_eq!(code, EXIT_USAGE, "{message}");
    assert_eq!(items_in(&sdk, tables.prs.table_name()).await, 0);

    // The user's installation, found through the users' route.
    let args = BackfillArgs {
        installation: None,
        ..disagreeing.clone()
    };
    let report = ops::backfill_org::run_org(&args, &target).await.unwrap();
    assert_eq!(report.installation, 77, "{report:?}");
    let names: Vec<&str> = report.done.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, [tools], "{report:?}");
    assert_eq!(all_items(&tables.prs).await.len(), merged);
    assert_eq!(stand_in.count_matching("/users/octocat/installation"), 1);

    // --org with the account's own installation (any case): the same run, nothing new.
    let agreeing = BackfillArgs {
        org: Some("OctoCat".into()),
        installation: Some(77),
        ..disagreeing.clone()
    };
    let again = ops::backfill_org::run_org(&agreeing, &target)
        .await
        .unwrap();
    assert_eq!(again.installation, 77);
    assert!(again.done.iter().all(|(_, r)| r.imported == 0), "{again:?}");
}
