//! A repository's life on its owner's organisation page: renamed, transferred, deleted or
//! removed from the App's installation, its row leaves the page (and `chronicle status`'s
//! "does not see"), the page is rebuilt, and no late or duplicate delivery brings it back. Its
//! module pages stay: they are its history.
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
    let (_, old_name) = from.split_once('/').unwrap();
    json!({
        "action": "renamed",
        "changes": { "repository": { "name": { "from": old_name } } },
        "repository": repository(to),
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

    // The same delivery again: nothing written, nothing to rebuild.
    let answer = deliver(
        &webhook,
        "repository",
        "guid-rename",
        &renamed("acme/old", "acme/new"),
    )
    .await;
    assert_eq!(answer["forgotten"], json!([]), "{answer}");
    assert!(t.pages.stale_pages().await.unwrap().is_empty());
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
    use infra::github_standin::{GitHubStandIn, InstalledSpec};
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    put_row(&t, "acme/api").await;
    put_row(&t, "acme/gone").await;
    let github = GitHubStandIn::start("ghp_lifecycle").await.unwrap();
    let key = |name: &str| {
        std::fs::read_to_string(
            infra::emulator::repo_root()
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
    let target = infra::ops_cli::OpsTarget {
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
    let (report, _) = infra::ops_cli::status(&target, None).await.unwrap();
    assert_eq!(report.installations[0].removed, ["acme/gone"]);

    let webhook = webhook(&t);
    let answer = deliver(&webhook, "repository", "guid-delete", &deleted("acme/gone")).await;
    assert_eq!(answer["forgotten"], json!(["acme/gone"]), "{answer}");
    assert_eq!(org_names(&t, "acme").await, ["acme/api"]);
    let (report, code) = infra::ops_cli::status(&target, None).await.unwrap();
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

/// Removed from the App's installation: its row is deleted; added again, its next build lists
/// it. Each delivered twice changes nothing the second time.
#[tokio::test]
async fn a_repository_removed_from_the_installation_leaves_the_org_rows() {
    let t = fresh_tables(&sdk().await).await;
    for repo in ["acme/api", "acme/web", "acme/ops"] {
        put_row(&t, repo).await;
    }
    let webhook = webhook(&t);
    let removed = installation_repositories("removed", &["acme/web", "acme/ops"]);
    for _ in 0..2 {
        deliver(
            &webhook,
            "installation_repositories",
            "guid-removed",
            &removed,
        )
        .await;
        put_row(&t, "acme/web").await;
        assert_eq!(org_names(&t, "acme").await, ["acme/api"]);
    }
    let added = installation_repositories("added", &["acme/web"]);
    let answer = deliver(&webhook, "installation_repositories", "guid-added", &added).await;
    assert_eq!(answer["restored"], json!(["acme/web"]), "{answer}");
    put_row(&t, "acme/web").await;
    assert_eq!(org_names(&t, "acme").await, ["acme/api", "acme/web"]);
    // The removal delivered late, after the repository was added back: not applied again.
    let answer = deliver(
        &webhook,
        "installation_repositories",
        "guid-removed",
        &removed,
    )
    .await;
    assert_eq!(answer["forgotten"], json!([]), "{answer}");
    assert_eq!(org_names(&t, "acme").await, ["acme/api", "acme/web"]);
}
