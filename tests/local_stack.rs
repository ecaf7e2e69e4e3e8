//! The local stack end to end: `DevStack` (what `chronicle dev` runs) serving the webhook over
//! real HTTP on loopback, with the table created from template.yaml in the emulator.

use serde_json::json;
use stages::domain::RepoName;
use stages::signature;
use stages::store::attr;
use support::*;

async fn start() -> devstack::dev::DevStack {
    start_with(Vec::new()).await
}

async fn start_with(overrides: Vec<(String, String)>) -> devstack::dev::DevStack {
    let table_name = Some(format!("dev-{}", uuid::Uuid::new_v4().simple()));
    let mut overrides = overrides;
    if !overrides.iter().any(|(k, _)| k == "OUTPUT_DIR") {
        let out =
            std::env::temp_dir().join(format!("chronicle-out-{}", uuid::Uuid::new_v4().simple()));
        overrides.push(("OUTPUT_DIR".into(), out.display().to_string()));
    }
    let options = devstack::dev::DevOptions {
        port: 0,
        endpoint: Some(endpoint()),
        emulator_port: None,
        table_name,
        overrides,
        sweep_interval: std::time::Duration::from_millis(300),
    };
    devstack::dev::DevStack::start(options).await.unwrap()
}

/// The local stack with a GitHub stand-in holding PR #2 (12 files under `src/`) and a token.
async fn with_github() -> (
    standins::github_standin::GitHubStandIn,
    devstack::dev::DevStack,
) {
    let github = standins::github_standin::GitHubStandIn::start("local-token")
        .await
        .unwrap();
    github.put_pull(
        "Codertocat/Hello-World",
        standin_pull("Codertocat/Hello-World", 2, 12),
    );
    let stack = start_with(vec![
        ("GITHUB_API_URL".into(), github.url().to_string()),
        ("GITHUB_TOKEN".into(), "local-token".into()),
    ])
    .await;
    (github, stack)
}

#[tokio::test]
async fn a_delivery_posted_to_the_local_stack_is_enriched_from_the_stream() {
    let (github, stack) = with_github().await;
    assert!(stack.enrich_enabled());
    let dir = devstack::emulator::repo_root().join("events");
    devstack::replay::replay(&dir, &stack.webhook_url(), stack.secret(), stack.store())
        .await
        .unwrap();
    let repo = RepoName::parse("Codertocat/Hello-World").unwrap();
    let mut enriched = None;
    for _ in 0..100 {
        let item = stack.store().get(&repo, 2).await.unwrap().unwrap();
        if item.contains_key(attr::ENRICHED_AT) {
            enriched = Some(item);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let item = enriched.expect("the stream event source enriched the row within 10 s");
    assert_eq!(item[attr::FILES].as_l().unwrap().len(), 12);
    // The webhook's later update (the edit) is a MODIFY: it did not trigger a second enrichment.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let stats = github.stats();
    assert_eq!(
        (stats.graphql_requests, stats.rest_requests),
        (1, 9),
        "one GraphQL query, once; the repository's context once (three CODEOWNERS places, \
         .github/chronicle.yml, the root listing and four workspace manifests over REST, each a \
         404 on this stand-in)"
    );
    stack.shutdown().await;
}

#[tokio::test]
async fn a_signed_delivery_posted_over_http_is_stored() {
    let stack = start().await;
    let secret = stack
        .secret()
        .expect("chronicle dev checks signatures by default")
        .clone();
    let body = serde_json::to_string(&merged_payload()).unwrap();
    let response = reqwest::Client::new()
        .post(stack.webhook_url())
        .header("content-type", "application/json")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", "local-stack-1")
        .header(
            "x-hub-signature-256",
            signature::sign(secret.expose().as_bytes(), body.as_bytes()),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: serde_json::Value = response.json().await.unwrap();
    assert_eq!(answer["stored"], "inserted", "{answer}");

    // Read it back with the SDK, through the emulator, not through the stack.
    let client = aws_sdk_dynamodb::Client::new(&sdk().await);
    let item = client
        .get_item()
        .table_name(&stack.table().table_name)
        .key(attr::REPO, av_s("Codertocat/Hello-World"))
        .key(
            attr::PR_NUMBER,
            aws_sdk_dynamodb::types::AttributeValue::N("2".into()),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("the delivery was stored");
    assert_eq!(s(&item, attr::DELIVERY_ID), "local-stack-1");
    assert!(item.contains_key(attr::PENDING_SHARD));
    stack.shutdown().await;
}

#[tokio::test]
async fn http_front_answers_wrong_routes_and_oversized_bodies() {
    let stack = start().await;
    let client = reqwest::Client::new();
    let base = stack.webhook_url();
    let r = client.get(&base).send().await.unwrap();
    assert_eq!(r.status(), 405);
    let r = client
        .post(base.replace("/webhook", "/other"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // Over the 1 MB default: refused while reading, before any signature check.
    let r = client
        .post(&base)
        .header("x-github-event", "pull_request")
        .body(vec![b'x'; 1024 * 1024 + 10])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let answer: serde_json::Value = r.json().await.unwrap();
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("exceeds the limit"),
        "{answer}"
    );
    stack.shutdown().await;
}

#[tokio::test]
async fn replaying_the_sample_events_stores_the_merged_pr_once() {
    let stack = start().await;
    let dir = devstack::emulator::repo_root().join("events");
    let lines = devstack::replay::replay(&dir, &stack.webhook_url(), stack.secret(), stack.store())
        .await
        .unwrap();
    let outcomes: Vec<(&str, u16, serde_json::Value)> = lines
        .iter()
        .map(|l| (l.name.as_str(), l.status, l.answer.clone()))
        .collect();
    let first_key = |k: &str, l: &serde_json::Value| l.get(k).cloned().unwrap_or(json!(null));
    let summary: Vec<(&str, u16, serde_json::Value, serde_json::Value)> = outcomes
        .iter()
        .map(|(n, st, a)| (*n, *st, first_key("stored", a), first_key("ignored", a)))
        .collect();
    assert_eq!(summary[0], ("01-ping", 200, json!(null), json!(null)));
    assert_eq!(
        summary[1],
        ("02-merged", 200, json!("inserted"), json!(null))
    );
    assert_eq!(
        summary[2].2,
        json!(null),
        "a redelivery stores nothing: {:?}",
        lines[2].answer
    );
    assert!(lines[2].answer["unchanged"].is_string());
    assert_eq!(
        summary[3],
        ("04-edited-after-merge", 200, json!("updated"), json!(null))
    );
    assert!(
        summary[4..]
            .iter()
            .all(|(_, st, stored, ignored)| *st == 200 && stored.is_null() && ignored.is_string()),
        "{summary:?}"
    );
    let item = stack
        .store()
        .get(&RepoName::parse("Codertocat/Hello-World").unwrap(), 2)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s(&item, attr::TITLE),
        "Update the README with new information (edited after merge)"
    );
    assert_eq!(all_items(stack.store()).await.len(), 1);
    stack.shutdown().await;
}

#[tokio::test]
async fn a_signed_delivery_ends_as_an_entry_in_the_modules_markdown_narrative() {
    // Files under src/ belong to the `core` module of config/modules.yaml.
    let (_github, stack) = with_github().await;
    let dir = devstack::emulator::repo_root().join("events");
    devstack::replay::replay(&dir, &stack.webhook_url(), stack.secret(), stack.store())
        .await
        .unwrap();
    let page = std::path::Path::new(stack.output_dir()).join("Codertocat/Hello-World/core.md");
    let mut text = None;
    for _ in 0..150 {
        if let Ok(t) = std::fs::read_to_string(&page) {
            text = Some(t);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let repo = RepoName::parse("Codertocat/Hello-World").unwrap();
    let Some(text) = text else {
        let item = stack.store().get(&repo, 2).await.unwrap();
        let written: Vec<_> = walk(std::path::Path::new(stack.output_dir()));
        panic!(
            "no narrative at {} within 15 s; row {item:?}; files {written:?}",
            page.display()
        );
    };
    assert!(
        text.starts_with("# Codertocat/Hello-World · core"),
        "{text}"
    );
    assert!(
        text.contains("Update the README with new information"),
        "{text}"
    );
    assert!(text.contains("(#2)"), "{text}");
    assert_eq!(text.matches("(#2)").count(), 1, "one entry: {text}");
    // The row was committed before its page was built.
    let mut item = stack.store().get(&repo, 2).await.unwrap().unwrap();
    for _ in 0..50 {
        if item.contains_key(attr::SUMMARIZED_AT) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        item = stack.store().get(&repo, 2).await.unwrap().unwrap();
    }
    assert!(item.contains_key(attr::SUMMARIZED_AT));
    assert!(!item.contains_key(attr::PENDING_SHARD));
    println!("{text}");
    stack.shutdown().await;
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            if e.path().is_dir() {
                walk(&e.path())
            } else {
                vec![e.path()]
            }
        })
        .collect()
}

#[tokio::test]
async fn with_a_notion_token_and_parent_the_local_stack_publishes_to_notion_and_markdown() {
    let (notion, parent) = support::notion_stub::NotionStub::start("ntn_local").await;
    let stack = start_with(vec![
        ("NOTION_TOKEN".into(), "ntn_local".into()),
        ("NOTION_PARENT_PAGE_ID".into(), parent.clone()),
        ("NOTION_API_URL".into(), notion.url()),
        ("PUBLISH_MARKDOWN".into(), "1".into()),
    ])
    .await;
    let dir = devstack::emulator::repo_root().join("events");
    devstack::replay::replay(&dir, &stack.webhook_url(), stack.secret(), stack.store())
        .await
        .unwrap();
    // Enrichment is off (no GitHub token): the module is the repository itself. The events/
    // replay ends with an edit after the merge, so the newer title is the one shown. The pages
    // nest: the parent holds the organisation's page, which holds the repository's index page,
    // which holds the module page.
    let title = "Codertocat/Hello-World · Codertocat/Hello-World";
    let mut page = None;
    for _ in 0..300 {
        if let Some(id) = notion.live_page(title) {
            if notion.markdown(&id).contains("(#2)") {
                page = Some(id);
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let page =
        page.unwrap_or_else(|| panic!("no Notion page within 30 s: {:?}", notion.requests()));
    let org = notion.child_pages(&parent);
    assert_eq!(org.len(), 1, "{org:?}");
    assert_eq!(org[0].1, "Codertocat · repositories");
    let index = notion.child_pages(&org[0].0);
    assert_eq!(index.len(), 1, "{index:?}");
    assert_eq!(index[0].1, "Codertocat/Hello-World · modules");
    assert_eq!(
        notion.child_pages(&index[0].0),
        [(page.clone(), title.to_string())]
    );
    let markdown_in_notion = notion.markdown(&page);
    assert!(
        markdown_in_notion.contains("### 2019-05-15 — [Update the README with new information (edited after merge)](https://github.com/Codertocat/Hello-World/pull/2) (#2)"),
        "{markdown_in_notion}"
    );
    let markdown = std::path::Path::new(stack.output_dir())
        .join("Codertocat/Hello-World/Codertocat__Hello-World.md");
    assert!(std::fs::read_to_string(markdown).unwrap().contains("(#2)"));
    stack.shutdown().await;
    notion.stop().await;
}

/// Review defect 9: a title fixed after merge (an `edited` delivery, newer `updated_at`) and a
/// `breaking` label added later reach the page: the stream's MODIFY of the summarized row puts
/// it back, and its entry is rewritten in place (no second entry, the summary kept).
#[tokio::test]
async fn an_edit_after_merge_reaches_the_entries_and_the_page() {
    let (_github, stack) = with_github().await;
    let repo = RepoName::parse("Codertocat/Hello-World").unwrap();
    let secret = stack.secret().expect("the local stack signs").clone();
    let url = stack.webhook_url();
    let post = |guid: &'static str, payload: serde_json::Value| {
        let (url, secret) = (url.clone(), secret.clone());
        async move { post_signed(&url, &secret, guid, &payload).await }
    };
    assert_eq!(post("merged", merged_payload()).await, 200);
    let page = std::path::Path::new(stack.output_dir()).join("Codertocat/Hello-World/core.md");
    let read_until = |want: &'static str| {
        let page = page.clone();
        async move {
            for _ in 0..200 {
                if let Ok(t) = std::fs::read_to_string(&page) {
                    if t.contains(want) {
                        return t;
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("{} never showed {want:?}", page.display());
        }
    };
    read_until("Update the README with new information").await;
    let summarized = stack.store().get(&repo, 2).await.unwrap().unwrap();
    let summary = summarized[attr::SUMMARY].as_s().unwrap().clone();

    let mut edited = merged_payload();
    edited["action"] = json!("edited");
    edited["pull_request"]["title"] = json!("Rewrite the README for newcomers");
    edited["pull_request"]["labels"] = json!([{"id": 1, "node_id": "L", "url": "https://api.github.com/repos/Codertocat/Hello-World/labels/breaking", "name": "breaking", "color": "d73a4a", "default": false, "description": null}]);
    edited["pull_request"]["updated_at"] = json!("2019-05-16T09:00:00Z");
    assert_eq!(post("edited", edited).await, 200);
    let text = read_until("Rewrite the README for newcomers").await;
    assert_eq!(text.matches("(#2)").count(), 1, "one entry: {text}");
    assert!(
        !text.contains("Update the README with new information"),
        "{text}"
    );
    assert!(text.to_lowercase().contains("breaking"), "{text}");
    let item = stack.store().get(&repo, 2).await.unwrap().unwrap();
    assert_eq!(
        item[attr::SUMMARY].as_s().unwrap(),
        &summary,
        "the summary kept"
    );
    stack.shutdown().await;
}

/// The README's first command without a token: the built-in stand-in serves the recorded PR
/// with its recorded files, so the replay ends on a real module page (its paths, key files, who
/// knows it), not one named after the repository with "Paths: not known".
#[tokio::test]
async fn a_replay_without_a_token_shows_a_real_module_page() {
    let dir = devstack::emulator::repo_root().join("events");
    let standin = devstack::demo::standin_for(&dir)
        .await
        .unwrap()
        .expect("events/ records the PR's files");
    let stack = start_with(vec![
        ("GITHUB_API_URL".into(), standin.url().to_string()),
        ("GITHUB_TOKEN".into(), devstack::demo::TOKEN.into()),
    ])
    .await;
    devstack::replay::replay(&dir, &stack.webhook_url(), stack.secret(), stack.store())
        .await
        .unwrap();
    let page = std::path::Path::new(stack.output_dir()).join("Codertocat/Hello-World/(root).md");
    let mut text = String::new();
    for _ in 0..200 {
        text = std::fs::read_to_string(&page).unwrap_or_default();
        if text.contains("(#2)") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        text.contains("(#2)"),
        "no module page at {}",
        page.display()
    );
    assert!(text.contains("Paths: `*`"), "{text}");
    assert!(text.contains("`file1.txt`"), "{text}");
    assert!(text.contains("**Who knows it:**"), "{text}");
    assert!(
        !std::path::Path::new(stack.output_dir())
            .join("Codertocat/Hello-World/Codertocat__Hello-World.md")
            .exists(),
        "no page named after the repository"
    );
    stack.shutdown().await;
}
