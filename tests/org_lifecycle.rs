//! A repository's life on its owner's organisation page: renamed, transferred or deleted, its
//! row leaves the page (and `chronicle status`'s "does not see"), the page is rebuilt, and no
//! late, duplicate or out-of-order delivery brings it back. Its module pages stay: they are its
//! history. Removed from the App's installation, it still exists: it stays listed, and status
//! says the App does not see it.
//!
//! The deliveries are GitHub's `repository` and `installation_repositories` events, shaped as
//! @octokit/webhooks-types 7.6 describes them, around the real `pull_request.closed.1`
//! fixture's repository, sender and installation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stages::domain::{ModuleEntry, OrgRepo};
use stages::webhook::WebhookHandler;
use support::*;
use time::OffsetDateTime;

const INSTALLATION: u64 = 31;

/// The webhook with the pages table, as the stack configures it.
fn webhook(t: &Tables) -> WebhookHandler {
    handler(t.prs.clone()).with_org_rows(t.pages.clone())
}

/// The fixture's `repository` object, named `full_name`.
fn repository(full_name: &str) -> Value {
    let fixture = samples::webhook("pull_request.closed.1");
    let mut r = fixture["repository"].clone();
    let (owner, name) = full_name.split_once('/').unwrap();
    r["full_name"] = full_name.into();
    r["name"] = name.into();
    r["owner"]["login"] = owner.into();
    r["html_url"] = format!("https://github.com/{full_name}").into();
    r
}

fn sender() -> Value {
    samples::webhook("pull_request.closed.1")["sender"].clone()
}

fn installation() -> Value {
    json!({ "id": INSTALLATION, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMzE=" })
}

/// `repository.renamed`: `repository` is already the new name; the old one is in `changes`.
fn renamed(from: &str, to: &str) -> Value {
    renamed_at(from, to, "2024-07-01T10:00:00Z")
}

/// As [`renamed`], the repository's `updated_at` (the rename's time) `at`.
fn renamed_at(from: &str, to: &str, at: &str) -> Value {
    let (_, old_name) = from.split_once('/').unwrap();
    let mut repository = repository(to);
    repository["updated_at"] = at.into();
    json!({
        "action": "renamed",
        "changes": { "repository": { "name": { "from": old_name } } },
        "repository": repository,
        "sender": sender(),
        "installation": installation(),
    })
}

/// `repository.transferred`: the previous owner in `changes.owner.from` (a user or an
/// organization).
fn transferred(from: &str, to: &str) -> Value {
    let (old_owner, _) = from.split_once('/').unwrap();
    json!({
        "action": "transferred",
        "changes": { "owner": { "from": { "organization": {
            "login": old_owner, "id": 9919, "node_id": "MDEyOk9yZ2FuaXphdGlvbjk5MTk=",
            "url": format!("https://api.github.com/orgs/{old_owner}"),
        } } } },
        "repository": repository(to),
        "sender": sender(),
        "installation": installation(),
    })
}

fn deleted(repo: &str) -> Value {
    json!({
        "action": "deleted",
        "repository": repository(repo),
        "sender": sender(),
        "installation": installation(),
    })
}

/// `installation_repositories.removed` / `.added`: the repositories by `full_name`.
fn installation_repositories(action: &str, repos: &[&str]) -> Value {
    let listed: Vec<Value> = repos
        .iter()
        .enumerate()
        .map(|(i, r)| {
            json!({
                "id": 1_296_269 + i as u64,
                "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5",
                "name": r.split_once('/').unwrap().1,
                "full_name": r,
                "private": true,
            })
        })
        .collect();
    let (added, removed) = if action == "added" {
        (listed, vec![])
    } else {
        (vec![], listed)
    };
    let mut installation = installation();
    installation["account"] = json!({ "login": "acme", "id": 9919, "type": "Organization" });
    json!({
        "action": action,
        "installation": installation,
        "repository_selection": "selected",
        "repositories_added": added,
        "repositories_removed": removed,
        "requester": null,
        "sender": sender(),
    })
}

async fn deliver(webhook: &WebhookHandler, event: &str, guid: &str, payload: &Value) -> Value {
    let response = webhook
        .handle(signed(event, guid, serde_json::to_vec(payload).unwrap()))
        .await;
    assert_eq!(response.status, 200, "{event} {guid}: {response:?}");
    response.body
}

async fn org_names(t: &Tables, owner: &str) -> Vec<String> {
    let mut names: Vec<String> = t
        .pages
        .org_repos(owner)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.repo)
        .collect();
    names.sort();
    names
}

/// What a repository's index build records on its owner's page.
async fn put_row(t: &Tables, repo: &str) {
    let (owner, _) = repo.split_once('/').unwrap();
    let row = OrgRepo {
        repo: repo.into(),
        module_count: 1,
        entry_count: 1,
        ..Default::default()
    };
    t.pages.put_org_repo(owner, &row).await.unwrap();
}

fn entry(repo: &str, module: &str, number: u64, merged_at: &str) -> ModuleEntry {
    ModuleEntry {
        repo: repo.into(),
        module: module.into(),
        number,
        title: format!("Change {number} of {module}"),
        url: format!("https://github.com/{repo}/pull/{number}"),
        author: "dev_one".into(),
        merged_at: merged_at.into(),
        kind: Some("feat".into()),
        breaking: false,
        labels: vec![],
        summary: format!("Why PR {number} was made."),
        linked_issues: vec![],
        additions: 3,
        deletions: 1,
        files: vec![],
        files_here: 0,
        lines_here: 0,
        elsewhere: vec![],
        files_elsewhere: 0,
        why: None,
        reviewers: vec![],
        discussion: 0,
    }
}

/// Ticks until no page is stale.
async fn settle(b: &stages::builder::PageBuilder, t: &Tables) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        b.tick(OffsetDateTime::now_utc(), within(60), "tick")
            .await
            .unwrap();
        let stale = t.pages.stale_pages().await.unwrap();
        if stale.is_empty() {
            return;
        }
        assert!(Instant::now() < until, "still stale: {stale:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Renamed: the organisation page no longer lists the old name once the delivery is in (the
/// page is rebuilt without another repository's build); the old name's pages stay. A late PR
/// of the old name, and the rename delivered again, change nothing further.
#[tokio::test]
async fn a_renamed_repository_leaves_the_organisation_page_and_stays_off_it() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let dir = std::env::temp_dir().join(format!(
        "chronicle-lifecycle-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let builder = t.builder(
        Arc::new(stages::publish::MarkdownPublisher::new(dir.clone())),
        stages::tagging::ModulesConfig::empty(),
        Duration::ZERO,
    );
    t.put_entry(&entry("acme/api", "core", 1, "2024-03-01T10:00:00Z"))
        .await;
    t.put_entry(&entry("acme/old", "core", 2, "2024-04-01T10:00:00Z"))
        .await;
    settle(&builder, &t).await;
    let org = std::fs::read_to_string(dir.join("acme.md")).unwrap();
    assert!(
        org.contains("acme/old") && org.contains("acme/api"),
        "{org}"
    );

    let webhook = webhook(&t);
    let answer = deliver(
        &webhook,
        "repository",
        "guid-rename",
        &renamed("acme/old", "acme/new"),
    )
    .await;
    assert_eq!(answer["forgotten"], json!(["acme/old"]), "{answer}");
    assert_eq!(org_names(&t, "acme").await, ["acme/api"]);
    // The page is marked to be rebuilt: the next tick publishes it without the old name.
    assert!(!t.pages.stale_pages().await.unwrap().is_empty());
    settle(&builder, &t).await;
    let org = std::fs::read_to_string(dir.join("acme.md")).unwrap();
    assert!(!org.contains("acme/old"), "{org}");
    assert!(org.contains("acme/api"), "{org}");
    assert!(dir.join("acme/old.md").exists(), "its pages stay: history");

    // A PR of the old name delivered late: its pages are built, its row stays off.
    t.put_entry(&entry("acme/old", "core", 3, "2024-05-01T10:00:00Z"))
        .await;
    settle(&builder, &t).await;
    assert_eq!(org_names(&t, "acme").await, ["acme/api"]);
    let org = std::fs::read_to_string(dir.join("acme.md")).unwrap();
    assert!(!org.contains("acme/old"), "{org}");

    // The same delivery again: no row changes (its index is marked again, in case the first
    // attempt's mark failed: one more build of the same content).
    let answer = deliver(
        &webhook,
        "repository",
        "guid-rename",
        &renamed("acme/old", "acme/new"),
    )
    .await;
    assert_eq!(answer["forgotten"], json!([]), "{answer}");
    settle(&builder, &t).await;
    assert_eq!(org_names(&t, "acme").await, ["acme/api"]);

    // The new name's own row comes with its first index build, as any repository's.
    t.put_entry(&entry("acme/new", "core", 4, "2024-06-01T10:00:00Z"))
        .await;
    settle(&builder, &t).await;
    assert_eq!(org_names(&t, "acme").await, ["acme/api", "acme/new"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Transferred: listed under its new owner only, even when a build of the old name runs
/// after the transfer.
#[tokio::test]
async fn a_transferred_repository_is_listed_under_one_owner_only() {
    let t = fresh_tables(&sdk().await).await;
    put_row(&t, "acme/tool").await;
    put_row(&t, "acme/api").await;
    let webhook = webhook(&t);
    let answer = deliver(
        &webhook,
        "repository",
        "guid-transfer",
        &transferred("acme/tool", "tools-inc/tool"),
    )
    .await;
    assert_eq!(answer["forgotten"], json!(["acme/tool"]), "{answer}");
    // The old name's index built late, and the new name's first build.
    put_row(&t, "acme/tool").await;
    put_row(&t, "tools-inc/tool").await;
    assert_eq!(org_names(&t, "acme").await, ["acme/api"]);
    assert_eq!(org_names(&t, "tools-inc").await, ["tools-inc/tool"]);
}

/// Deleted: gone from the rows and from `chronicle status`'s "does not see"; delivered again,
/// nothing changes. A new repository of the same name, created later, is listed again.
#[tokio::test]
async fn a_deleted_repository_is_gone_from_the_org_rows_and_from_status() {
    use standins::github_standin::{GitHubStandIn, InstalledSpec};
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    put_row(&t, "acme/api").await;
    put_row(&t, "acme/gone").await;
    let github = GitHubStandIn::start("ghp_lifecycle").await.unwrap();
    let key = |name: &str| {
        std::fs::read_to_string(
            devstack::emulator::repo_root()
                .join("tests/fixtures/github")
                .join(name),
        )
        .unwrap()
    };
    github.add_app_hook("7", &key("app-test-key.pub.pem"), 1, None);
    github.add_installation(
        INSTALLATION,
        "acme",
        vec![InstalledSpec {
            full_name: "acme/api".into(),
            archived: false,
            empty: false,
        }],
    );
    let target = ops::commands::OpsTarget {
        sdk: sdk.clone(),
        table: t.prs.table().clone(),
        pages_table: t.pages.table_name().to_string(),
        queues: vec![],
        guard: Default::default(),
        app: Some((
            github.url().to_string(),
            "7".into(),
            stages::secret::Secret::new(key("app-test-key.pem")),
        )),
    };
    let (report, _) = ops::commands::status(&target, None).await.unwrap();
    assert_eq!(report.installations[0].removed, ["acme/gone"]);

    let webhook = webhook(&t);
    let answer = deliver(&webhook, "repository", "guid-delete", &deleted("acme/gone")).await;
    assert_eq!(answer["forgotten"], json!(["acme/gone"]), "{answer}");
    assert_eq!(org_names(&t, "acme").await, ["acme/api"]);
    let (report, code) = ops::commands::status(&target, None).await.unwrap();
    assert!(report.installations[0].removed.is_empty(), "{report:?}");
    assert_eq!(code, 0, "{:?}", report.attention);
    assert!(!stages::status::render(&report).contains("acme/gone"));

    // Delivered again, and a late build of the deleted name: nothing comes back.
    let answer = deliver(&webhook, "repository", "guid-delete", &deleted("acme/gone")).await;
    assert_eq!(answer["forgotten"], json!([]), "{answer}");
    put_row(&t, "acme/gone").await;
    assert_eq!(org_names(&t, "acme").await, ["acme/api"]);

    // A new repository of that name: its builds list it again.
    let mut created = deleted("acme/gone");
    created["action"] = "created".into();
    let answer = deliver(&webhook, "repository", "guid-create", &created).await;
    assert_eq!(answer["restored"], json!(["acme/gone"]), "{answer}");
    put_row(&t, "acme/gone").await;
    assert_eq!(org_names(&t, "acme").await, ["acme/api", "acme/gone"]);
}

/// Removed from the App's installation: the repository still exists, so its row stays (a PR
/// of it delivered by its own repository webhook still updates it), and `chronicle status`
/// names it among those the App does not see. Added back, nothing was forgotten to restore.
#[tokio::test]
async fn a_repository_removed_from_the_installation_stays_listed() {
    let t = fresh_tables(&sdk().await).await;
    for repo in ["acme/api", "acme/web", "acme/ops"] {
        put_row(&t, repo).await;
    }
    let webhook = webhook(&t);
    let removed = installation_repositories("removed", &["acme/web", "acme/ops"]);
    let answer = deliver(
        &webhook,
        "installation_repositories",
        "guid-removed",
        &removed,
    )
    .await;
    assert!(answer.get("ignored").is_some(), "{answer}");
    put_row(&t, "acme/web").await;
    assert_eq!(
        org_names(&t, "acme").await,
        ["acme/api", "acme/ops", "acme/web"]
    );
    // What the installation no longer sees is what status reports.
    let (target, _github) = status_target(&t, &["acme/api"]).await;
    let (report, _) = ops::commands::status(&target, None).await.unwrap();
    assert_eq!(report.installations[0].removed, ["acme/ops", "acme/web"]);
    let added = installation_repositories("added", &["acme/web"]);
    let answer = deliver(&webhook, "installation_repositories", "guid-added", &added).await;
    assert_eq!(answer["restored"], json!([]), "{answer}");
    assert_eq!(
        org_names(&t, "acme").await,
        ["acme/api", "acme/ops", "acme/web"]
    );
}

/// `chronicle status`'s target over `t`, with a GitHub stand-in whose App installation on
/// acme sees `seen` (the stand-in is kept alive with the target).
async fn status_target(
    t: &Tables,
    seen: &[&str],
) -> (
    ops::commands::OpsTarget,
    standins::github_standin::GitHubStandIn,
) {
    use standins::github_standin::{GitHubStandIn, InstalledSpec};
    let github = GitHubStandIn::start("ghp_lifecycle").await.unwrap();
    let key = |name: &str| {
        std::fs::read_to_string(
            devstack::emulator::repo_root()
                .join("tests/fixtures/github")
                .join(name),
        )
        .unwrap()
    };
    github.add_app_hook("7", &key("app-test-key.pub.pem"), 1, None);
    let repos = seen
        .iter()
        .map(|r| InstalledSpec {
            full_name: r.to_string(),
            archived: false,
            empty: false,
        })
        .collect();
    github.add_installation(INSTALLATION, "acme", repos);
    let target = ops::commands::OpsTarget {
        sdk: sdk().await,
        table: t.prs.table().clone(),
        pages_table: t.pages.table_name().to_string(),
        queues: vec![],
        guard: Default::default(),
        app: Some((
            github.url().to_string(),
            "7".into(),
            stages::secret::Secret::new(key("app-test-key.pem")),
        )),
    };
    (target, github)
}

/// A delivery whose forget was applied but whose index mark was not (here: the index did not
/// exist yet; in AWS, a failed write answered 500) marks the index when GitHub delivers it
/// again, though its forget is not applied twice.
#[tokio::test]
async fn a_lifecycle_delivery_delivered_again_marks_the_index() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let dir = std::env::temp_dir().join(format!(
        "chronicle-lifecycle-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let builder = t.builder(
        Arc::new(stages::publish::MarkdownPublisher::new(dir.clone())),
        stages::tagging::ModulesConfig::empty(),
        Duration::ZERO,
    );
    put_row(&t, "acme/old").await;
    let webhook = webhook(&t);
    let rename = renamed("acme/old", "acme/new");
    deliver(&webhook, "repository", "guid-once", &rename).await;
    // The old name's index exists now (built, its row kept off); nothing is stale.
    t.put_entry(&entry("acme/old", "core", 1, "2024-03-01T10:00:00Z"))
        .await;
    settle(&builder, &t).await;
    let answer = deliver(&webhook, "repository", "guid-once", &rename).await;
    assert_eq!(answer["forgotten"], json!([]), "{answer}");
    let stale: Vec<String> = t
        .pages
        .stale_pages()
        .await
        .unwrap()
        .into_iter()
        .map(|p| format!("{}/{}", p.repo, p.module))
        .collect();
    assert!(
        stale.iter().any(|p| p.starts_with("acme/old/")),
        "{stale:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An empty X-GitHub-Delivery is refused (400), and a name's item keeps one delivery id however
/// many deliveries reach it (never a list that grows toward DynamoDB's item limit).
#[tokio::test]
async fn delivery_ids_are_required_and_kept_bounded() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    put_row(&t, "acme/x").await;
    let webhook = webhook(&t);
    let response = webhook
        .handle(signed(
            "repository",
            "",
            serde_json::to_vec(&deleted("acme/x")).unwrap(),
        ))
        .await;
    assert_eq!(response.status, 400, "{response:?}");
    for i in 0..12 {
        deliver(
            &webhook,
            "repository",
            &format!("guid-{i}"),
            &deleted("acme/x"),
        )
        .await;
    }
    let item = aws_sdk_dynamodb::Client::new(&sdk)
        .get_item()
        .table_name(t.pages.table_name())
        .key(
            "repo",
            aws_sdk_dynamodb::types::AttributeValue::S("#org/acme".into()),
        )
        .key(
            "module",
            aws_sdk_dynamodb::types::AttributeValue::S("acme/x".into()),
        )
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    let ids: usize = item
        .values()
        .map(|v| v.as_ss().map_or(0, |s| s.len()))
        .sum();
    assert!(ids <= 1, "{item:?}");
}

/// Renamed a -> b (its delivery fails), then b -> a (applied), then the first delivered again
/// (another GUID's order): a is the name that exists, and stays listed; b stays forgotten.
#[tokio::test]
async fn lifecycle_events_apply_in_the_order_they_happened() {
    let t = fresh_tables(&sdk().await).await;
    put_row(&t, "acme/a").await;
    let webhook = webhook(&t);
    let first = renamed_at("acme/a", "acme/b", "2024-07-01T10:00:00Z");
    let second = renamed_at("acme/b", "acme/a", "2024-07-01T11:00:00Z");
    deliver(&webhook, "repository", "guid-second", &second).await;
    deliver(&webhook, "repository", "guid-first", &first).await;
    put_row(&t, "acme/a").await;
    put_row(&t, "acme/b").await;
    assert_eq!(org_names(&t, "acme").await, ["acme/a"]);
}

/// An `installation_repositories.added` of a few hundred names, each forgotten before (a
/// deleted name's new repository), is applied well inside the webhook's 10 seconds.
#[tokio::test]
async fn a_delivery_of_hundreds_of_names_finishes_in_time() {
    let t = fresh_tables(&sdk().await).await;
    let names: Vec<String> = (0..300).map(|i| format!("acme/r{i:03}")).collect();
    let webhook = webhook(&t);
    for name in &names {
        let mut gone = deleted(name);
        gone["repository"]["updated_at"] = "2024-07-01T10:00:00Z".into();
        deliver(&webhook, "repository", &format!("guid-del-{name}"), &gone).await;
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let added = installation_repositories("added", &refs);
    let started = Instant::now();
    let answer = deliver(&webhook, "installation_repositories", "guid-many", &added).await;
    let took = started.elapsed();
    assert_eq!(
        answer["restored"].as_array().unwrap().len(),
        300,
        "{answer}"
    );
    // Half the webhook's time, against an emulator that answers one write at a time.
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// In Notion, a forgotten repository's index page stays under the organisation page (its
/// history), named under "Earlier repositories", not among the pages people put there.
#[tokio::test]
async fn in_notion_a_forgotten_repositorys_index_is_an_earlier_repository() {
    use stages::notion::NotionClient;
    use stages::publish::NotionPublisher;
    use support::notion_stub::NotionStub;
    let t = fresh_tables(&sdk().await).await;
    let (stub, parent) = NotionStub::start("ntn_lifecycle").await;
    let client = NotionClient::new(&stub.url(), stages::secret::Secret::new("ntn_lifecycle"))
        .with_retry(3, Duration::from_millis(50), Duration::from_secs(2));
    let publisher = NotionPublisher::new(client, &parent, t.pages.clone())
        .with_create_claim(Duration::from_secs(8));
    let builder = t.builder(
        Arc::new(publisher),
        stages::tagging::ModulesConfig::empty(),
        Duration::ZERO,
    );
    t.put_entry(&entry("acme/api", "core", 1, "2024-03-01T10:00:00Z"))
        .await;
    t.put_entry(&entry("acme/web", "ui", 2, "2024-04-01T10:00:00Z"))
        .await;
    settle(&builder, &t).await;
    let org = stub
        .child_pages(&parent)
        .into_iter()
        .find(|(_, title)| title == "acme · repositories")
        .map(|(id, _)| id)
        .expect("the organisation page");
    assert!(stub.markdown(&org).contains("### acme/web"));

    deliver(&webhook(&t), "repository", "guid-web", &deleted("acme/web")).await;
    settle(&builder, &t).await;
    let markdown = stub.markdown(&org);
    assert!(!markdown.contains("### acme/web"), "{markdown}");
    assert!(!markdown.contains("## Other pages"), "{markdown}");
    let earlier = markdown
        .split_once("## Earlier repositories")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no earlier repositories:\n{markdown}"));
    assert!(earlier.contains("acme/web · modules</page>"), "{markdown}");
    let under: Vec<String> = stub.child_pages(&org).into_iter().map(|(_, t)| t).collect();
    assert!(
        under.contains(&"acme/web · modules".to_string()),
        "{under:?}"
    );
}
