//! Enrichment as a GitHub App when the App's token is not simply there: an installation that
//! has not granted an optional permission, a secondary rate limit on the mint, and a refused
//! JWT while the App's key is rotated. Each is temporary or partial, never a reason to skip a
//! PR for good.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use stages::config::EnrichConfig;
use stages::secret::SecretSource;
use stages::store::attr;
use standins::github_standin::rest::installations::MintFault;
use standins::github_standin::{GitHubStandIn, InstalledSpec};
use support::*;

const TOKEN: &str = "ghp_app_token_test";
const APP_ID: &str = "7";

pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        devstack::emulator::repo_root()
            .join("tests/fixtures/github")
            .join(name),
    )
    .unwrap()
}

/// The stream's INSERT record of the stored row.
pub async fn insert_record(t: &Tables, repo: &str, number: u64) -> EventRecord {
    let row = stored_row(&t.prs, repo, number).await;
    let mut record = EventRecord::default();
    record.change.new_image = serde_dynamo::Item::from(
        row.into_iter()
            .map(|(k, v)| (k, serde_dynamo::AttributeValue::from(v)))
            .collect::<std::collections::HashMap<_, _>>(),
    );
    record.event_id = format!("event-{repo}-{number}");
    record.event_name = "INSERT".into();
    record.change.sequence_number = Some(format!("{number}00"));
    record.change.keys = serde_dynamo::Item::from(std::collections::HashMap::from([
        (
            attr::REPO.to_string(),
            serde_dynamo::AttributeValue::S(repo.into()),
        ),
        (
            attr::PR_NUMBER.to_string(),
            serde_dynamo::AttributeValue::N(number.to_string()),
        ),
    ]));
    record
}

/// A GitHub stand-in with the App installed (installation `installation`) on `repo`, whose PR
/// `number` closes issue 5; the PR's row stored by the webhook, as the App delivers it.
pub async fn installed(t: &Tables, repo: &str, number: u64, installation: u64) -> GitHubStandIn {
    let github = GitHubStandIn::start(TOKEN).await.unwrap();
    github.add_app_hook(APP_ID, &fixture("app-test-key.pub.pem"), 1, None);
    github.add_installation(
        installation,
        repo.split('/').next().unwrap(),
        vec![InstalledSpec {
            full_name: repo.into(),
            archived: false,
            empty: false,
        }],
    );
    let mut pull = standin_pull(repo, number, 3);
    pull["closingIssuesReferences"] = serde_json::json!([{
        "__typename": "Issue",
        "number": 5,
        "title": "The issue it closes",
        "state": "CLOSED",
        "url": format!("https://github.com/{repo}/issues/5"),
        "repository": { "__typename": "Repository", "nameWithOwner": repo },
    }]);
    github.put_pull(repo, pull);
    store_pr(t, repo, number, installation).await;
    github
}

/// PR `number` of `repo` stored by the webhook, as the App's installation delivers it.
pub async fn store_pr(t: &Tables, repo: &str, number: u64, installation: u64) {
    let mut p = merged_payload();
    let (owner, name) = repo.split_once('/').unwrap();
    p["repository"]["full_name"] = repo.into();
    p["repository"]["name"] = name.into();
    p["repository"]["owner"]["login"] = owner.into();
    p["number"] = number.into();
    p["pull_request"]["number"] = number.into();
    p["pull_request"]["html_url"] = format!("https://github.com/{repo}/pull/{number}").into();
    p["installation"] = serde_json::json!({ "id": installation });
    let response = handler(t.prs.clone())
        .handle(signed(
            "pull_request",
            &format!("guid-{number}"),
            serde_json::to_vec(&p).unwrap(),
        ))
        .await;
    assert_eq!(response.status, 200, "{response:?}");
}

/// PR `number` of `repo` stored by the webhook with `body`, delivered by a repository's own
/// webhook: no installation named, so enrichment asks which installation can see it.
pub async fn store_unnamed_pr(t: &Tables, repo: &str, number: u64, body: &str) {
    let mut p = merged_payload();
    let (owner, name) = repo.split_once('/').unwrap();
    p["repository"]["full_name"] = repo.into();
    p["repository"]["name"] = name.into();
    p["repository"]["owner"]["login"] = owner.into();
    p["number"] = number.into();
    p["pull_request"]["number"] = number.into();
    p["pull_request"]["body"] = body.into();
    p["pull_request"]["html_url"] = format!("https://github.com/{repo}/pull/{number}").into();
    if let Some(o) = p.as_object_mut() {
        o.remove("installation");
    }
    let response = handler(t.prs.clone())
        .handle(signed(
            "pull_request",
            &format!("guid-unnamed-{number}"),
            serde_json::to_vec(&p).unwrap(),
        ))
        .await;
    assert_eq!(response.status, 200, "{response:?}");
}

/// Enrichment's configuration against `github`, with no credential: the caller adds one.
pub fn enrich_config(t: &Tables, github: &GitHubStandIn) -> EnrichConfig {
    EnrichConfig {
        table: t.prs.table().clone(),
        api_url: github.url().to_string(),
        token: SecretSource::Unset,
        timeout: Duration::from_secs(10),
        max_retries: 1,
        concurrency: 2,
        max_paths: 500,
        max_wait: Duration::from_secs(3600),
        // No repository context: its refresh would ask for the token first.
        pages_table: None,
        issue_scope: Default::default(),
        app_id: None,
        app_key: SecretSource::Unset,
        token_function: None,
    }
}

/// The enrich handler reading GitHub as the App, its key in hand.
async fn with_key(t: &Tables, github: &GitHubStandIn) -> Arc<stages::enrich::EnrichHandler> {
    let sdk = sdk().await;
    let mut config = enrich_config(t, github);
    config.app_id = Some(APP_ID.into());
    config.app_key = SecretSource::Plain(stages::secret::Secret::new(fixture("app-test-key.pem")));
    Arc::new(
        stages::enrich::EnrichHandler::from_config(&config, &sdk)
            .await
            .unwrap(),
    )
}

pub fn text(row: &stages::store::Item, name: &str) -> Option<String> {
    row.get(name).and_then(|v| v.as_s().ok()).cloned()
}

/// How many linked issues the row stores.
pub fn linked_issues(row: &stages::store::Item) -> usize {
    row.get(attr::LINKED_ISSUES)
        .and_then(|v| v.as_l().ok())
        .map_or(0, Vec::len)
}

/// The body each token mint asked with.
pub fn mints(github: &GitHubStandIn) -> Vec<serde_json::Value> {
    github
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/access_tokens"))
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

#[tokio::test]
async fn an_installation_without_issues_read_still_gets_its_prs_enriched() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "lean-org/service";
    let github = installed(&t, repo, 11, 41).await;
    // The organisation has not approved `issues` (app.yml calls it optional).
    github.set_installation_permissions(
        41,
        serde_json::json!({"contents": "read", "metadata": "read", "pull_requests": "read"}),
    );
    let enrich = with_key(&t, &github).await;
    run(&enrich, vec![insert_record(&t, repo, 11).await]).await;

    let row = stored_row(&t.prs, repo, 11).await;
    assert_eq!(text(&row, attr::ENRICH_SKIPPED_REASON), None, "{row:?}");
    assert!(row.contains_key(attr::ENRICHED_AT), "{row:?}");
    assert!(
        row.contains_key(attr::FILES),
        "its files were read: {row:?}"
    );
    assert_eq!(
        linked_issues(&row),
        0,
        "issues are not read without the permission: {row:?}"
    );
    assert_eq!(
        mints(&github),
        vec![serde_json::json!({"permissions": {
            "contents": "read", "metadata": "read", "pull_requests": "read",
        }})],
        "the token is asked for what the installation granted, no more"
    );
}

#[tokio::test]
async fn an_installation_without_contents_read_is_skipped_until_it_grants_it() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "lean-org/closed";
    let github = installed(&t, repo, 12, 42).await;
    github.set_installation_permissions(
        42,
        serde_json::json!({"metadata": "read", "pull_requests": "read", "issues": "read"}),
    );
    let enrich = with_key(&t, &github).await;
    run(&enrich, vec![insert_record(&t, repo, 12).await]).await;
    let row = stored_row(&t.prs, repo, 12).await;
    let reason = text(&row, attr::ENRICH_SKIPPED_REASON).unwrap_or_default();
    assert!(reason.contains("contents: read"), "{row:?}");
    assert!(mints(&github).is_empty(), "no mint GitHub would refuse");

    // An owner approves `contents`: the same warm handler reads the grant again (a grant
    // lacking a required read is never kept), and the next PR is enriched.
    github.set_installation_permissions(
        42,
        serde_json::json!({"contents": "read", "metadata": "read", "pull_requests": "read", "issues": "read"}),
    );
    store_pr(&t, repo, 13, 42).await;
    github.put_pull(repo, standin_pull(repo, 13, 2));
    run(&enrich, vec![insert_record(&t, repo, 13).await]).await;
    let row = stored_row(&t.prs, repo, 13).await;
    assert_eq!(text(&row, attr::ENRICH_SKIPPED_REASON), None, "{row:?}");
    assert!(row.contains_key(attr::ENRICHED_AT), "{row:?}");
}

#[tokio::test]
async fn a_secondary_rate_limit_on_the_token_mint_defers_the_row() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "busy-org/service";
    let github = installed(&t, repo, 21, 51).await;
    github.fail_next_mint(MintFault::SecondaryRateLimit {
        retry_after_secs: 1,
    });
    let enrich = with_key(&t, &github).await;
    run(&enrich, vec![insert_record(&t, repo, 21).await]).await;

    let row = stored_row(&t.prs, repo, 21).await;
    assert_eq!(
        text(&row, attr::ENRICH_SKIPPED_REASON),
        None,
        "a rate limit is not the installation's suspension: {row:?}"
    );
    assert!(!row.contains_key(attr::ENRICHED_AT), "{row:?}");
    assert!(
        text(&row, attr::ENRICH_DEFERRED_UNTIL).is_some(),
        "parked until GitHub's retry-after: {row:?}"
    );

    // After the wait, the scheduled retry enriches it.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let report = enrich
        .retry_deferred(time::OffsetDateTime::now_utc(), within(30), "inv-retry")
        .await
        .unwrap();
    assert_eq!(report.enriched, 1, "{report:?}");
    let row = stored_row(&t.prs, repo, 21).await;
    assert!(row.contains_key(attr::ENRICHED_AT), "{row:?}");
    assert_eq!(linked_issues(&row), 1, "with the permission: {row:?}");
}

#[tokio::test]
async fn a_refused_jwt_while_the_key_rotates_defers_the_row() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "rotating-org/service";
    let github = installed(&t, repo, 31, 61).await;
    github.fail_next_mint(MintFault::BadJwt);
    let enrich = with_key(&t, &github).await;
    let before = time::OffsetDateTime::now_utc();
    run(&enrich, vec![insert_record(&t, repo, 31).await]).await;

    let row = stored_row(&t.prs, repo, 31).await;
    assert_eq!(
        text(&row, attr::ENRICH_SKIPPED_REASON),
        None,
        "a refused JWT may be a key being rotated: {row:?}"
    );
    assert!(!row.contains_key(attr::ENRICHED_AT), "{row:?}");
    let until = text(&row, attr::ENRICH_DEFERRED_UNTIL).expect("parked");
    let until = time::OffsetDateTime::parse(&until, &time::format_description::well_known::Rfc3339)
        .unwrap();
    // Not at once: minutes later (`KEY_REFUSED_WAIT`), when a rotation has settled.
    assert!(
        until >= before + time::Duration::minutes(1),
        "asked again minutes later: {until}"
    );
}

/// One stream invocation; no record may fail.
async fn run(enrich: &Arc<stages::enrich::EnrichHandler>, records: Vec<EventRecord>) {
    let mut stream = Event::default();
    stream.records = records;
    let response = enrich
        .invoke(
            stages::enrich::EnrichTrigger::Stream(stream),
            within(30),
            "inv-enrich",
        )
        .await
        .unwrap();
    assert!(
        matches!(&response, stages::enrich::EnrichResponse::Stream(r) if r.batch_item_failures.is_empty()),
        "{response:?}"
    );
}

/// The token function's name in the tests.
const TOKEN_FUNCTION: &str = "chronicle-token";

/// Lambda's Invoke, served by a stand-in that runs the real token handler (the App's key in
/// hand) against `github`.
async fn token_function(github: &GitHubStandIn) -> support::lambda_standin::LambdaStandIn {
    let lambda = support::lambda_standin::LambdaStandIn::start().await;
    let tokens = Arc::new(
        stages::token::TokenHandler::from_config(
            &stages::config::TokenConfig {
                api_url: github.url().to_string(),
                timeout: Duration::from_secs(10),
                app_id: APP_ID.into(),
                app_key: SecretSource::Plain(stages::secret::Secret::new(fixture(
                    "app-test-key.pem",
                ))),
            },
            &sdk().await,
        )
        .await
        .unwrap(),
    );
    lambda.register(TOKEN_FUNCTION, move |payload| {
        let tokens = tokens.clone();
        async move { serde_json::to_value(tokens.handle(payload).await).map_err(|e| e.to_string()) }
    });
    lambda
}

#[tokio::test]
async fn enrich_gets_its_tokens_from_the_token_function_and_holds_no_key() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "split-org/service";
    let github = installed(&t, repo, 41, 71).await;
    let lambda = token_function(&github).await;
    let mut config = enrich_config(&t, &github);
    config.token_function = Some(TOKEN_FUNCTION.into());
    // Enrich's SDK reaches the emulator; its Lambda client the Invoke stand-in.
    let enrich = Arc::new(
        stages::enrich::EnrichHandler::from_configs(
            &config,
            &sdk().await,
            &ops::stack::local_sdk_config(lambda.url()).await,
        )
        .await
        .unwrap(),
    );
    run(&enrich, vec![insert_record(&t, repo, 41).await]).await;

    let row = stored_row(&t.prs, repo, 41).await;
    assert_eq!(text(&row, attr::ENRICH_SKIPPED_REASON), None, "{row:?}");
    assert!(row.contains_key(attr::ENRICHED_AT), "{row:?}");
    assert_eq!(linked_issues(&row), 1, "{row:?}");
    // One invocation, for the installation the delivery named; one mint, by the token
    // handler (enrich has no key to sign one), asking for the four reads only.
    let invocations = lambda.invocations();
    assert_eq!(invocations.len(), 1, "{invocations:?}");
    assert_eq!(invocations[0].function, TOKEN_FUNCTION);
    assert_eq!(invocations[0].invocation_type, "RequestResponse");
    assert_eq!(
        invocations[0].payload,
        serde_json::json!({"installation": 71})
    );
    assert_eq!(
        invocations[0].answer.as_ref().map(|a| a["outcome"].clone()),
        Some(serde_json::json!("token"))
    );
    assert_eq!(
        mints(&github),
        vec![serde_json::json!({"permissions": {
            "contents": "read", "issues": "read", "metadata": "read", "pull_requests": "read",
        }})]
    );

    // The token is kept: the next PR asks nothing of the function. Then GitHub revokes it
    // (401): enrich drops it, asks for a new one once (`renew`), and the PR is enriched.
    store_pr(&t, repo, 42, 71).await;
    github.put_pull(repo, standin_pull(repo, 42, 2));
    run(&enrich, vec![insert_record(&t, repo, 42).await]).await;
    assert_eq!(lambda.invocations().len(), 1, "the token in hand was used");
    assert!(stored_row(&t.prs, repo, 42)
        .await
        .contains_key(attr::ENRICHED_AT));
    github.expire_installation_tokens();
    store_pr(&t, repo, 43, 71).await;
    github.put_pull(repo, standin_pull(repo, 43, 2));
    run(&enrich, vec![insert_record(&t, repo, 43).await]).await;
    let row = stored_row(&t.prs, repo, 43).await;
    assert!(row.contains_key(attr::ENRICHED_AT), "{row:?}");
    let invocations = lambda.invocations();
    assert_eq!(invocations.len(), 2, "{invocations:?}");
    let first = stages::secret::Secret::new(
        invocations[0].answer.as_ref().unwrap()["token"]
            .as_str()
            .unwrap(),
    );
    assert_eq!(
        invocations[1].payload,
        serde_json::json!({"installation": 71, "renew": true,
            "refused": stages::token::fingerprint(&first)})
    );
    assert_eq!(github.installation_tokens_minted(), 2);
}

#[tokio::test]
async fn a_repository_the_app_is_not_on_is_refused_by_the_token_function_and_skipped() {
    let t = fresh_tables(&sdk().await).await;
    let github = installed(&t, "split-org/service", 51, 81).await;
    let lambda = token_function(&github).await;
    // A row with no installation named: the function is asked by repository.
    let elsewhere = "other-org/service";
    store_pr(&t, elsewhere, 52, 81).await;
    let mut config = enrich_config(&t, &github);
    config.token_function = Some(TOKEN_FUNCTION.into());
    let enrich = Arc::new(
        stages::enrich::EnrichHandler::from_configs(
            &config,
            &sdk().await,
            &ops::stack::local_sdk_config(lambda.url()).await,
        )
        .await
        .unwrap(),
    );
    run(&enrich, vec![insert_record(&t, elsewhere, 52).await]).await;
    let row = stored_row(&t.prs, elsewhere, 52).await;
    let reason = text(&row, attr::ENRICH_SKIPPED_REASON).unwrap_or_default();
    assert!(
        reason.contains("not installed on other-org/service"),
        "{row:?}"
    );
    let asked: Vec<serde_json::Value> = lambda
        .invocations()
        .into_iter()
        .map(|i| i.payload)
        .collect();
    // Its installation's token could not see it: the function was told to ask GitHub afresh.
    assert!(
        asked.contains(&serde_json::json!({"repo": "other-org/service", "fresh": true})),
        "{asked:?}"
    );
}

#[tokio::test]
async fn enrich_refuses_to_start_with_the_app_key_beside_a_token_function() {
    let t = fresh_tables(&sdk().await).await;
    let github = GitHubStandIn::start(TOKEN).await.unwrap();
    let mut config = enrich_config(&t, &github);
    config.token_function = Some(TOKEN_FUNCTION.into());
    config.app_id = Some(APP_ID.into());
    config.app_key = SecretSource::SecretsManager(
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:key-AbCdEf".into(),
    );
    let refused = stages::enrich::EnrichHandler::from_config(&config, &sdk().await).await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("TOKEN_FUNCTION_NAME") && message.contains("must not hold the key"),
        "{message}"
    );
}

/// The enrich handler reading GitHub as the App through the token function `lambda` serves.
async fn through_function(
    t: &Tables,
    github: &GitHubStandIn,
    lambda: &support::lambda_standin::LambdaStandIn,
) -> Arc<stages::enrich::EnrichHandler> {
    let mut config = enrich_config(t, github);
    config.token_function = Some(TOKEN_FUNCTION.into());
    Arc::new(
        stages::enrich::EnrichHandler::from_configs(
            &config,
            &sdk().await,
            &ops::stack::local_sdk_config(lambda.url()).await,
        )
        .await
        .unwrap(),
    )
}

/// What enrich asked the token function, in order.
fn asked(lambda: &support::lambda_standin::LambdaStandIn) -> Vec<serde_json::Value> {
    lambda
        .invocations()
        .into_iter()
        .map(|i| i.payload)
        .collect()
}

/// The App removed from a repository while both enrich and the (warm) token function remember
/// its installation: enrich forgets it, and so must the token function, so GitHub is asked
/// again and says the App is not installed there; added to another installation, the next PR
/// is enriched with that installation's token.
#[tokio::test]
async fn a_repository_moved_off_its_installation_is_asked_for_again_through_the_token_function() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "moving-org/service";
    let github = installed(&t, repo, 61, 91).await;
    let lambda = token_function(&github).await;
    let enrich = through_function(&t, &github, &lambda).await;
    // No installation named: the token function finds (and keeps) the repository's.
    store_unnamed_pr(&t, repo, 62, "").await;
    github.put_pull(repo, standin_pull(repo, 62, 2));
    run(&enrich, vec![insert_record(&t, repo, 62).await]).await;
    assert!(stored_row(&t.prs, repo, 62)
        .await
        .contains_key(attr::ENRICHED_AT));
    assert_eq!(asked(&lambda), vec![serde_json::json!({"repo": repo})]);

    github.remove_from_installation(91, repo);
    store_unnamed_pr(&t, repo, 63, "").await;
    github.put_pull(repo, standin_pull(repo, 63, 2));
    run(&enrich, vec![insert_record(&t, repo, 63).await]).await;
    let row = stored_row(&t.prs, repo, 63).await;
    let reason = text(&row, attr::ENRICH_SKIPPED_REASON).unwrap_or_default();
    assert!(
        reason.contains("not installed on moving-org/service"),
        "GitHub was asked again, and the reason says so: {row:?}"
    );
    assert_eq!(
        asked(&lambda)[1..],
        [serde_json::json!({"repo": repo, "fresh": true})],
        "enrich told the token function to forget what it knew"
    );

    // Installed again on the repository, as another installation: found, and enriched.
    github.uninstall(91);
    github.add_installation(
        92,
        "moving-org",
        vec![InstalledSpec {
            full_name: repo.into(),
            archived: false,
            empty: false,
        }],
    );
    store_unnamed_pr(&t, repo, 64, "").await;
    github.put_pull(repo, standin_pull(repo, 64, 2));
    run(&enrich, vec![insert_record(&t, repo, 64).await]).await;
    let row = stored_row(&t.prs, repo, 64).await;
    assert!(row.contains_key(attr::ENRICHED_AT), "{row:?}");
    assert_eq!(text(&row, attr::ENRICH_SKIPPED_REASON), None, "{row:?}");
}

/// An Enterprise Server without GraphQL's closing references: REST reads the PR and its linked
/// issue, with a token of an installation that has not granted `issues`. GitHub's 403 on the
/// issue means "not readable": the PR is enriched without it, never skipped.
#[tokio::test]
async fn the_rest_path_enriches_a_pr_without_its_issues_when_issues_are_not_granted() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "lean-org/legacy";
    let github = installed(&t, repo, 13, 43).await;
    github.set_installation_permissions(
        43,
        serde_json::json!({"contents": "read", "metadata": "read", "pull_requests": "read"}),
    );
    github.without_field("PullRequest", "closingIssuesReferences");
    github.add_pull(
        repo,
        14,
        standins::github_standin::rest::PullSpec::with_files(3),
    );
    github.add_issue(repo, 5, "The issue it closes", "closed");
    store_unnamed_pr(&t, repo, 14, "Fixes #5").await;
    let enrich = with_key(&t, &github).await;
    run(&enrich, vec![insert_record(&t, repo, 14).await]).await;

    let row = stored_row(&t.prs, repo, 14).await;
    assert_eq!(text(&row, attr::ENRICH_SKIPPED_REASON), None, "{row:?}");
    assert!(row.contains_key(attr::ENRICHED_AT), "{row:?}");
    assert!(row.contains_key(attr::FILES), "{row:?}");
    assert_eq!(linked_issues(&row), 0, "{row:?}");
    assert!(
        github
            .requests()
            .iter()
            .any(|r| r.path == format!("/repos/{repo}/issues/5")),
        "the REST path asked for the issue"
    );
}

/// Two tasks see the same token refused (401) and each asks for a new one: the first renew
/// mints, the second (naming the same refused token) gets that new token, not a third; a renew
/// naming a token the function no longer holds never drops the newer one.
#[tokio::test]
async fn a_renew_mints_only_while_the_refused_token_is_the_one_held() {
    let t = fresh_tables(&sdk().await).await;
    let github = installed(&t, "renew-org/service", 71, 95).await;
    let handler = stages::token::TokenHandler::new(
        stages::github::installation::AppClient::new(
            github.url(),
            stages::github::app::AppCredentials::new(
                APP_ID,
                &stages::secret::Secret::new(fixture("app-test-key.pem")),
            )
            .unwrap(),
            Duration::from_secs(10),
        )
        .unwrap(),
    );
    let token = |answer: stages::token::TokenResponse| match answer {
        stages::token::TokenResponse::Token { token, .. } => token,
        other => panic!("{other:?}"),
    };
    let first = token(
        handler
            .handle(serde_json::json!({"installation": 95}))
            .await,
    );
    let renew = serde_json::json!({"installation": 95, "renew": true,
        "refused": stages::token::fingerprint(&first)});
    let second = token(handler.handle(renew.clone()).await);
    assert_ne!(second.expose(), first.expose(), "renewed");
    assert_eq!(github.installation_tokens_minted(), 2);
    // The other task's renew, for the same refused token: the new one, no third mint.
    let again = token(handler.handle(renew).await);
    assert_eq!(again.expose(), second.expose());
    assert_eq!(github.installation_tokens_minted(), 2);
    // A renew without the refused token's fingerprint is refused.
    assert!(matches!(
        handler
            .handle(serde_json::json!({"installation": 95, "renew": true}))
            .await,
        stages::token::TokenResponse::Refused(_)
    ));
}

/// A suspended installation (an owner's act; `suspended_at` on the installation): through the
/// token function, the row ends with the reason, for good.
#[tokio::test]
async fn a_suspended_installation_skips_the_row_through_the_token_function() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "paused-org/service";
    let github = installed(&t, repo, 81, 96).await;
    github.suspend_installation(96);
    let lambda = token_function(&github).await;
    let enrich = through_function(&t, &github, &lambda).await;
    run(&enrich, vec![insert_record(&t, repo, 81).await]).await;
    let row = stored_row(&t.prs, repo, 81).await;
    let reason = text(&row, attr::ENRICH_SKIPPED_REASON).unwrap_or_default();
    assert!(reason.contains("installation 96 is suspended"), "{row:?}");
    assert_eq!(text(&row, attr::ENRICH_DEFERRED_UNTIL), None, "{row:?}");
    assert!(
        mints(&github).is_empty(),
        "no mint of a suspended installation"
    );
}

/// A plain 403 on the mint, without any rate-limit sign (suspended after its grant was read):
/// a suspension, permanent; a secondary rate limit on the mint, through the token function:
/// deferred, as with the key in hand.
#[tokio::test]
async fn the_token_function_tells_a_suspended_mint_from_a_rate_limited_one() {
    let t = fresh_tables(&sdk().await).await;
    let repo = "fickle-org/service";
    let github = installed(&t, repo, 82, 97).await;
    let lambda = token_function(&github).await;
    let enrich = through_function(&t, &github, &lambda).await;
    github.fail_next_mint(MintFault::Suspended);
    run(&enrich, vec![insert_record(&t, repo, 82).await]).await;
    let row = stored_row(&t.prs, repo, 82).await;
    let reason = text(&row, attr::ENRICH_SKIPPED_REASON).unwrap_or_default();
    assert!(reason.contains("installation 97 is suspended"), "{row:?}");

    store_pr(&t, repo, 83, 97).await;
    github.put_pull(repo, standin_pull(repo, 83, 2));
    github.fail_next_mint(MintFault::SecondaryRateLimit {
        retry_after_secs: 1,
    });
    run(&enrich, vec![insert_record(&t, repo, 83).await]).await;
    let row = stored_row(&t.prs, repo, 83).await;
    assert_eq!(text(&row, attr::ENRICH_SKIPPED_REASON), None, "{row:?}");
    assert!(!row.contains_key(attr::ENRICHED_AT), "{row:?}");
    assert!(
        text(&row, attr::ENRICH_DEFERRED_UNTIL).is_some(),
        "parked until GitHub's retry-after: {row:?}"
    );
    let refused: Vec<serde_json::Value> = lambda
        .invocations()
        .into_iter()
        .filter_map(|i| i.answer)
        .filter(|a| a["outcome"] == "refused")
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[0]["kind"], "suspended");
    assert_eq!(refused[0]["permanent"], true);
    assert_eq!(refused[1]["kind"], "rateLimited");
    assert_eq!(refused[1]["permanent"], false);

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let report = enrich
        .retry_deferred(time::OffsetDateTime::now_utc(), within(30), "inv-retry")
        .await
        .unwrap();
    assert_eq!(report.enriched, 1, "{report:?}");
}
