//! One install for an organisation: a GitHub App's deliveries from two repositories, signed with
//! its one secret, are stored under their own repositories, enriched each with the
//! installation's token, summarized, and published to their own repositories' pages; the
//! organisation's index (`out/<org>.md`) lists both, newest first, with where each module's page
//! lives. A repository the App was removed from is no longer enriched; its pages stay.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use stages::config::{EnrichConfig, SummarizeConfig};
use stages::secret::SecretSource;
use standins::github_standin::{GitHubStandIn, InstalledSpec};
use support::*;

const TOKEN: &str = "ghp_org_test";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        devstack::emulator::repo_root()
            .join("tests/fixtures/github")
            .join(name),
    )
    .unwrap()
}

/// The stream's INSERT record of the stored row (`NEW_AND_OLD_IMAGES`: its new image whole).
async fn insert_record(t: &Tables, repo: &str, number: u64) -> EventRecord {
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
            stages::store::attr::REPO.to_string(),
            serde_dynamo::AttributeValue::S(repo.into()),
        ),
        (
            stages::store::attr::PR_NUMBER.to_string(),
            serde_dynamo::AttributeValue::N(number.to_string()),
        ),
    ]));
    record
}

/// The recorded merged delivery, as the App's installation `installation` sends it for `repo`.
fn delivery(repo: &str, number: u64, merged_at: &str, installation: u64) -> serde_json::Value {
    let mut p = merged_payload();
    let (owner, name) = repo.split_once('/').unwrap();
    p["repository"]["full_name"] = repo.into();
    p["repository"]["name"] = name.into();
    p["repository"]["owner"]["login"] = owner.into();
    p["number"] = number.into();
    p["pull_request"]["number"] = number.into();
    p["pull_request"]["merged_at"] = merged_at.into();
    p["pull_request"]["updated_at"] = merged_at.into();
    p["pull_request"]["html_url"] = format!("https://github.com/{repo}/pull/{number}").into();
    p["pull_request"]["title"] = format!("Change {number} of {name}").into();
    p["installation"] = serde_json::json!({ "id": installation, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMzE=" });
    p
}

#[tokio::test]
async fn two_repositories_of_one_installation_land_on_their_own_pages_and_the_org_index() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (api, web) = ("acme/api", "acme/web");
    let github = GitHubStandIn::start(TOKEN).await.unwrap();
    github.add_app_hook("7", &fixture("app-test-key.pub.pem"), 1, None);
    let installed = |name: &str| InstalledSpec {
        full_name: name.into(),
        archived: false,
        empty: false,
    };
    github.add_installation(31, "acme", vec![installed(api), installed(web)]);
    let pulls = [
        (api, 11, "2024-03-01T10:00:00Z"),
        (web, 21, "2025-02-01T10:00:00Z"),
    ];
    for (repo, n, _) in pulls {
        github.put_pull(repo, standin_pull(repo, n, 3));
    }
    // acme/web says what its modules are in its own file, read with its installation's token.
    github.add_file(
        web,
        ".github/chronicle.yml",
        "modules:\n  frontend:\n    paths: [\"src/**\"]\n    description: The browser front end of acme.\n",
    );

    // The webhook: one secret for every repository of the App.
    let webhook = handler(t.prs.clone());
    for (repo, n, merged_at) in pulls {
        let body = serde_json::to_vec(&delivery(repo, n, merged_at, 31)).unwrap();
        let response = webhook
            .handle(signed("pull_request", &format!("guid-{n}"), body))
            .await;
        assert_eq!(response.status, 200, "{response:?}");
        let row = stored_row(&t.prs, repo, n).await;
        assert!(row.contains_key("title"));
        assert_eq!(
            row.get(stages::store::attr::INSTALLATION_ID)
                .and_then(|v| v.as_n().ok())
                .map(String::as_str),
            Some("31"),
            "the delivery's installation is kept on the row"
        );
    }

    // Enrichment as the App: each repository through the installation's token.
    let enrich = Arc::new(
        stages::enrich::EnrichHandler::from_config(
            &EnrichConfig {
                table: t.prs.table().clone(),
                api_url: github.url().to_string(),
                token: SecretSource::Unset,
                timeout: Duration::from_secs(10),
                max_retries: 1,
                concurrency: 2,
                max_paths: 500,
                max_wait: Duration::from_secs(3600),
                pages_table: Some(t.pages.table_name().to_string()),
                issue_scope: Default::default(),
                app_id: Some("7".into()),
                app_key: SecretSource::Plain(stages::secret::Secret::new(fixture(
                    "app-test-key.pem",
                ))),
                token_function: None,
            },
            &sdk,
        )
        .await
        .unwrap(),
    );
    let mut stream = Event::default();
    for (repo, n, _) in pulls {
        stream.records.push(insert_record(&t, repo, n).await);
    }
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
    for (repo, n, _) in pulls {
        let row = stored_row(&t.prs, repo, n).await;
        assert!(
            row.contains_key(stages::store::attr::ENRICHED_AT),
            "{repo}: {row:?}"
        );
    }
    assert_eq!(github.installation_tokens_minted(), 1, "one token for both");
    for repo in [api, web] {
        assert_eq!(
            github.count_matching(&format!("/repos/{repo}/installation")),
            0,
            "the delivery named {repo}'s installation: GitHub is not asked"
        );
    }

    // Summaries, then the pages.
    let summarize = Arc::new(
        stages::summarize::SummarizeHandler::from_config(
            &SummarizeConfig {
                table: t.prs.table().clone(),
                entries_table: t.entries.table_name().to_string(),
                pages_table: t.pages.table_name().to_string(),
                max_attempts: 3,
                modules_file: None,
                modules_param: None,
                dlq_url: None,
                summary: None,
            },
            &sdk,
        )
        .await
        .unwrap(),
    );
    let response = summarize
        .handle(
            sqs_batch(
                pulls
                    .iter()
                    .map(|(repo, n, _)| summarize_message(&format!("m{n}"), repo, *n))
                    .collect(),
            ),
            within(30),
            "inv-summarize",
        )
        .await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let dir = std::env::temp_dir().join(format!("chronicle-org-{}", uuid::Uuid::new_v4().simple()));
    let builder = t.builder(
        Arc::new(stages::publish::MarkdownPublisher::new(dir.clone())),
        stages::tagging::ModulesConfig::empty(),
        Duration::ZERO,
    );
    for _ in 0..5 {
        builder
            .tick(time::OffsetDateTime::now_utc(), within(60), "tick")
            .await
            .unwrap();
        if t.pages.stale_pages().await.unwrap().is_empty() {
            break;
        }
    }
    for repo in [api, web] {
        let index = std::fs::read_to_string(dir.join(format!("{repo}.md"))).unwrap();
        assert!(index.contains(repo), "{index}");
    }
    // Each PR on its own repository's pages only; each repository's own file applies to its
    // own pages.
    let api_pages = std::fs::read_to_string(dir.join("acme/api.md")).unwrap();
    assert!(!api_pages.contains("acme/web"), "{api_pages}");
    assert!(!api_pages.contains("frontend"), "{api_pages}");
    let frontend = std::fs::read_to_string(dir.join("acme/web/frontend.md")).unwrap();
    assert!(
        frontend.contains("**What it is:** The browser front end of acme ([`.github/chronicle.yml`](https://github.com/acme/web/blob/HEAD/.github/chronicle.yml))"),
        "{frontend}"
    );
    let org = std::fs::read_to_string(dir.join("acme.md")).unwrap();
    let (at_web, at_api) = (
        org.find("### [acme/web]").expect("web listed"),
        org.find("### [acme/api]").expect("api listed"),
    );
    assert!(at_web < at_api, "the most recently active first:\n{org}");
    assert!(
        org.contains("](<acme/api/"),
        "links to the module pages:\n{org}"
    );

    // The App is removed from acme/web while the same (warm) handler holds its installation
    // and token: its next PR is not enriched (skipped, with why, not a stream failure), and
    // its pages stay.
    github.remove_from_installation(31, web);
    github.put_pull(web, standin_pull(web, 22, 2));
    let body = serde_json::to_vec(&delivery(web, 22, "2025-03-01T10:00:00Z", 31)).unwrap();
    webhook
        .handle(signed("pull_request", "guid-22", body))
        .await;
    let mut stream = Event::default();
    stream.records = vec![insert_record(&t, web, 22).await];
    let response = enrich
        .invoke(
            stages::enrich::EnrichTrigger::Stream(stream),
            within(30),
            "inv-enrich-2",
        )
        .await
        .unwrap();
    let row = stored_row(&t.prs, web, 22).await;
    let reason = row
        .get(stages::store::attr::ENRICH_SKIPPED_REASON)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default();
    assert!(
        matches!(&response, stages::enrich::EnrichResponse::Stream(r) if r.batch_item_failures.is_empty()),
        "{response:?}"
    );
    assert!(
        reason.contains("not installed on acme/web"),
        "GitHub was asked again, and the reason says so: {row:?}"
    );
    assert!(dir.join("acme/web.md").exists(), "its pages stay");

    // The App is uninstalled and installed again (a new installation id). A delivery sent
    // before that (redelivered late) still names the old one: the warm handler's installation
    // and token are refused, it asks GitHub again, and the PR is enriched.
    github.uninstall(31);
    github.add_installation(32, "acme", vec![installed(api)]);
    github.put_pull(api, standin_pull(api, 12, 2));
    let body = serde_json::to_vec(&delivery(api, 12, "2025-03-02T10:00:00Z", 31)).unwrap();
    webhook
        .handle(signed("pull_request", "guid-12", body))
        .await;
    let mut stream = Event::default();
    stream.records = vec![insert_record(&t, api, 12).await];
    let response = enrich
        .invoke(
            stages::enrich::EnrichTrigger::Stream(stream),
            within(30),
            "inv-enrich-3",
        )
        .await
        .unwrap();
    assert!(
        matches!(&response, stages::enrich::EnrichResponse::Stream(r) if r.batch_item_failures.is_empty()),
        "{response:?}"
    );
    let row = stored_row(&t.prs, api, 12).await;
    assert!(
        !row.contains_key(stages::store::attr::ENRICH_SKIPPED_REASON),
        "enriched through the new installation: {row:?}"
    );
    assert!(
        row.contains_key(stages::store::attr::ENRICHED_AT),
        "{row:?}"
    );
    // A late delivery from acme/web naming the old installation (whose repositories were all
    // forgotten when it was found gone): not believed again, no token asked of it, and GitHub
    // says the App is not installed there.
    let asked_31 = github.count_matching("/app/installations/31/access_tokens");
    github.put_pull(web, standin_pull(web, 23, 2));
    let body = serde_json::to_vec(&delivery(web, 23, "2025-03-03T10:00:00Z", 31)).unwrap();
    webhook
        .handle(signed("pull_request", "guid-23", body))
        .await;
    let mut stream = Event::default();
    stream.records = vec![insert_record(&t, web, 23).await];
    enrich
        .invoke(
            stages::enrich::EnrichTrigger::Stream(stream),
            within(30),
            "inv-enrich-4",
        )
        .await
        .unwrap();
    let row = stored_row(&t.prs, web, 23).await;
    assert!(
        row.get(stages::store::attr::ENRICH_SKIPPED_REASON)
            .and_then(|v| v.as_s().ok())
            .is_some_and(|r| r.contains("not installed on acme/web")),
        "{row:?}"
    );
    assert_eq!(
        github.count_matching("/app/installations/31/access_tokens"),
        asked_31,
        "installation 31 is known gone"
    );

    // `chronicle status`: each installation's token health and what it sees, and why acme/web
    // is no longer enriched.
    let target = ops::commands::OpsTarget {
        sdk: sdk.clone(),
        table: t.prs.table().clone(),
        pages_table: t.pages.table_name().to_string(),
        queues: vec![],
        guard: Default::default(),
        app: Some((
            github.url().to_string(),
            "7".into(),
            stages::secret::Secret::new(fixture("app-test-key.pem")),
        )),
    };
    let (report, code) = ops::commands::status(&target, Some(web)).await.unwrap();
    assert_eq!(code, 1, "needs attention: {report:?}");
    let health = &report.installations[0];
    assert_eq!((health.id, health.account.as_str()), (32, "acme"));
    assert_eq!(health.repos, [api]);
    assert!(health.token_expires_at.is_some() && health.error.is_none());
    assert!(report
        .not_installed
        .as_deref()
        .is_some_and(|w| w.contains("not installed on acme/web")));
    let text = stages::status::render(&report);
    assert!(
        text.contains("installation        32 (acme): token valid until"),
        "{text}"
    );
    assert!(!text.contains("ghs_"), "never a token: {text}");
    // Without --repo: the repositories with pages the installation no longer sees.
    let (report, code) = ops::commands::status(&target, None).await.unwrap();
    assert_eq!(code, 1, "needs attention: {report:?}");
    assert_eq!(report.installations[0].removed, [web]);
    assert!(
        report
            .attention
            .iter()
            .any(|a| a.contains("does not see acme/web") && a.contains("pages stay")),
        "{:?}",
        report.attention
    );
    let text = stages::status::render(&report);
    assert!(
        text.contains("does not see      acme/web (pages kept, new PRs unenriched)"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
