//! The organisation's page in Notion: one per owner under the configured parent, holding every
//! repository's index page as a child page; an index page an earlier version published under
//! the parent is moved under it; deleted by hand, it comes back with its repositories; a page a
//! person put under it is kept; an unchanged organisation costs no request.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use stages::domain::ModuleEntry;
use stages::store::INDEX_MODULE;
use support::notion_stub::NotionStub;
use support::*;
use time::OffsetDateTime;

use crate::notion::{builder, entry, page, publisher, put, settle, REPO, TOKEN};

const OTHER: &str = "acme/web";
const ORG_TITLE: &str = "acme · repositories";

fn other_entry(module: &str, number: u64, merged_at: &str) -> ModuleEntry {
    let mut e = entry(module, number, merged_at);
    e.repo = OTHER.into();
    e.url = format!("https://github.com/{OTHER}/pull/{number}");
    e
}

/// The organisation page under `parent` (exactly one) and its Markdown.
fn org_page(stub: &NotionStub, parent: &str) -> (String, String) {
    let orgs: Vec<String> = stub
        .child_pages(parent)
        .into_iter()
        .filter(|(_, title)| title == ORG_TITLE)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(orgs.len(), 1, "one organisation page: {orgs:?}");
    let markdown = stub.markdown(&orgs[0]);
    (orgs[0].clone(), markdown)
}

fn index_of(stub: &NotionStub, repo: &str) -> String {
    stub.live_page(&format!("{repo} · modules"))
        .unwrap_or_else(|| panic!("no single live index page of {repo}"))
}

async fn mark_indexes_stale(t: &Tables, repos: &[&str]) {
    for repo in repos {
        t.pages
            .mark_stale(repo, INDEX_MODULE, &[], OffsetDateTime::now_utc())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn two_repositories_of_one_owner_sit_under_one_organisation_page() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    put(
        &t,
        &other_entry("<page url=\"x\">", 3, "2025-01-01T10:00:00Z"),
    )
    .await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(90)).await;

    let (org, markdown) = org_page(&stub, &parent);
    assert_eq!(
        stub.child_pages(&parent).len(),
        1,
        "only the organisation page"
    );
    let mut under: Vec<String> = stub.child_pages(&org).into_iter().map(|(_, t)| t).collect();
    under.sort();
    assert_eq!(
        under,
        [format!("{REPO} · modules"), format!("{OTHER} · modules")]
    );
    for repo in [REPO, OTHER] {
        let index = index_of(&stub, repo);
        assert!(
            markdown.contains(&format!("\">{repo} · modules</page>"))
                && markdown.contains(&index.replace('-', "")),
            "{repo}'s index is named as a child page:\n{markdown}"
        );
    }
    // The most recently active first; each module links to its Notion page.
    assert!(
        markdown.find(&format!("### {OTHER}")) < markdown.find(&format!("### {REPO}")),
        "{markdown}"
    );
    let (ui, _) = {
        let id = stub
            .live_page(&format!("{OTHER} · ui"))
            .expect("the ui page");
        (id, ())
    };
    assert!(
        markdown.contains("- [ui](https://www.notion.so/")
            && markdown.contains(&ui.replace('-', "")),
        "{markdown}"
    );
    let (api, _) = page(&stub, "api");
    assert!(markdown.contains(&api.replace('-', "")), "{markdown}");
    assert_eq!(
        markdown
            .lines()
            .filter(|l| l.trim_start().starts_with("<page"))
            .count(),
        2,
        "a hostile module name makes no tag:\n{markdown}"
    );
    assert!(
        markdown.contains("@dev\\_one") || markdown.contains("@dev_one"),
        "{markdown}"
    );

    // Rebuilt with nothing changed, the organisation page costs no request.
    let before = stub.requests().len();
    mark_indexes_stale(&t, &[REPO, OTHER]).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    let org_requests = stub.requests()[before..]
        .iter()
        .filter(|r| r.path.contains(&org) || r.path.contains(&org.replace('-', "")))
        .count();
    assert_eq!(org_requests, 0, "{:?}", &stub.requests()[before..]);
    assert_eq!(stub.markdown(&org), markdown);
}

#[tokio::test]
async fn an_index_page_published_before_the_organisation_page_is_moved_under_it() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(90)).await;
    // As an earlier version left it: the indexes under the configured parent, no organisation
    // page, no record of one, and no organisation rows.
    let index = index_of(&stub, REPO);
    let quiet = index_of(&stub, OTHER);
    let (api, _) = page(&stub, "api");
    let (old_org, _) = org_page(&stub, &parent);
    stub.reparent(&index, &parent);
    stub.reparent(&quiet, &parent);
    stub.delete(&old_org);
    for key in [INDEX_MODULE, REPO, OTHER] {
        aws_sdk_dynamodb::Client::new(&sdk)
            .delete_item()
            .table_name(t.pages.table_name())
            .key("repo", AttributeValue::S("#org/acme".into()))
            .key("module", AttributeValue::S(key.into()))
            .send()
            .await
            .unwrap();
    }
    assert_eq!(stub.parent(&index).as_deref(), Some(parent.as_str()));
    // An index page of a repository this deployment does not track (another deployment's, made
    // with the same integration): it makes no build.
    let mut made = false;
    for _ in 0..10 {
        let answer = reqwest::Client::new()
            .post(format!("{}/v1/pages", stub.url()))
            .bearer_auth(TOKEN)
            .header("Notion-Version", "2026-03-11")
            .json(&serde_json::json!({
                "parent": {"type": "page_id", "page_id": parent},
                "properties": {"title": {"title": [{"type": "text", "text": {"content": "acme/ghost · modules"}}]}},
                "markdown": "Another deployment's index.",
            }))
            .send()
            .await
            .unwrap();
        if answer.status().is_success() {
            made = true;
            break;
        }
        // Notion's pace: 429 with Retry-After.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(made);

    put(&t, &entry("api", 2, "2024-06-02T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    let (org, markdown) = org_page(&stub, &parent);
    assert_ne!(org, old_org);
    assert_eq!(stub.parent(&index).as_deref(), Some(org.as_str()), "moved");
    assert_eq!(
        index_of(&stub, REPO),
        index,
        "the same index page, not a second"
    );
    assert_eq!(page(&stub, "api").0, api, "its module pages with it");
    assert!(markdown.contains(&index.replace('-', "")), "{markdown}");
    // The quiet repository (no merge since) is built again and moved too.
    for _ in 0..3 {
        settle(&b, &t, Duration::from_secs(60)).await;
    }
    assert_eq!(stub.parent(&quiet).as_deref(), Some(org.as_str()), "moved");
    assert_eq!(stub.count("POST", "/v1/pages/", "/move"), 2);
    assert!(
        t.pages
            .get("acme/ghost", INDEX_MODULE)
            .await
            .unwrap()
            .is_none(),
        "no page item for a repository this deployment does not track"
    );
    assert_eq!(
        stub.pages_titled("acme/ghost · modules").len(),
        1,
        "and no page made for it"
    );
    let markdown = stub.markdown(&org);
    assert!(
        markdown.contains(&quiet.replace('-', "")) && markdown.contains("### acme/web"),
        "{markdown}"
    );
}

#[tokio::test]
async fn an_index_page_a_person_moved_elsewhere_stays_there_linked() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let index = index_of(&stub, REPO);
    let elsewhere = stub.add_page(Some(&parent), "Engineering", true);
    stub.reparent(&index, &elsewhere);
    put(&t, &entry("api", 2, "2024-06-02T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    let (_, markdown) = org_page(&stub, &parent);
    assert_eq!(stub.parent(&index).as_deref(), Some(elsewhere.as_str()));
    assert_eq!(stub.count("POST", "/v1/pages/", "/move"), 0);
    assert!(
        markdown.contains("[Its modules](https://www.notion.so/")
            && markdown.contains(&index.replace('-', "")),
        "{markdown}"
    );
    assert!(!markdown.contains("<page"), "{markdown}");
}

#[tokio::test]
async fn a_deleted_organisation_page_comes_back_with_its_repositories() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(90)).await;
    let (org, _) = org_page(&stub, &parent);
    stub.trash(&org);
    put(&t, &entry("api", 3, "2024-06-03T10:00:00Z")).await;
    for _ in 0..3 {
        settle(&b, &t, Duration::from_secs(90)).await;
    }
    let (new_org, markdown) = org_page(&stub, &parent);
    assert_ne!(new_org, org);
    for repo in [REPO, OTHER] {
        let index = index_of(&stub, repo);
        assert_eq!(
            stub.parent(&index).as_deref(),
            Some(new_org.as_str()),
            "{repo}"
        );
        assert!(markdown.contains(&index.replace('-', "")), "{markdown}");
        assert_eq!(
            stub.child_pages(&index).len(),
            1,
            "{repo}'s module page is back"
        );
    }
}

#[tokio::test]
async fn a_page_a_person_put_under_the_organisation_page_is_kept() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (org, _) = org_page(&stub, &parent);
    let notes = stub.add_page(Some(&org), "Onboarding checklist", true);
    put(&t, &entry("api", 2, "2024-06-02T10:00:00Z")).await;
    settle(&b, &t, Duration::from_secs(60)).await;
    assert!(stub.child_pages(&org).iter().any(|(id, _)| *id == notes));
    let markdown = stub.markdown(&org);
    assert!(
        markdown.contains("## Other pages") && markdown.contains(&notes.replace('-', "")),
        "{markdown}"
    );
}

#[tokio::test]
async fn publishes_of_one_organisation_page_take_turns() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    let b = Arc::new(builder(&t, Arc::new(publisher(&t, &stub, &parent))));
    settle(&b, &t, Duration::from_secs(90)).await;
    let (org, before) = org_page(&stub, &parent);

    // Another build holds the organisation page's lease (it is publishing it, or died doing so).
    let now = OffsetDateTime::now_utc();
    assert!(t
        .pages
        .claim_org_publish(
            "acme",
            "another-build",
            now,
            now + time::Duration::minutes(5)
        )
        .await
        .unwrap());
    put(&t, &other_entry("ui", 3, "2025-03-01T10:00:00Z")).await;
    settle_modules(&b, &t).await;
    // A build that cannot get the lease in time gives up, not fails: its index stays stale.
    let outcome = b
        .build(OTHER, INDEX_MODULE, "index-build-1", support::within(3))
        .await
        .unwrap();
    assert!(
        matches!(&outcome, stages::builder::BuildOutcome::Busy(why) if why.contains("acme")),
        "{outcome:?}"
    );
    assert_eq!(stub.markdown(&org), before, "not published meanwhile");
    assert!(t
        .pages
        .stale_pages()
        .await
        .unwrap()
        .iter()
        .any(|p| p.repo == OTHER && p.module == INDEX_MODULE));

    // A build that waits publishes once the holder is done, and from the rows as they are then.
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.build(OTHER, INDEX_MODULE, "index-build-2", support::within(60))
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiting.is_finished(), "it waits for the lease");
    assert_eq!(stub.markdown(&org), before);
    assert!(t
        .pages
        .release_org_publish("acme", "another-build")
        .await
        .unwrap());
    let outcome = waiting.await.unwrap();
    assert!(
        matches!(outcome, stages::builder::BuildOutcome::Built { .. }),
        "{outcome:?}"
    );
    let after = stub.markdown(&org);
    assert!(
        after.contains("- [ui](https://www.notion.so/") && after.contains(": 2 pull requests"),
        "{after}"
    );
    // A build that died holding the lease holds up the others until it expires, no longer.
    let now = OffsetDateTime::now_utc();
    assert!(t
        .pages
        .claim_org_publish(
            "acme",
            "a-dead-build",
            now,
            now + time::Duration::seconds(2)
        )
        .await
        .unwrap());
    put(&t, &other_entry("ui", 4, "2025-04-01T10:00:00Z")).await;
    settle_modules(&b, &t).await;
    let outcome = b
        .build(OTHER, INDEX_MODULE, "index-build-3", support::within(60))
        .await
        .unwrap();
    assert!(
        matches!(outcome, stages::builder::BuildOutcome::Built { .. }),
        "{outcome:?}"
    );
    assert!(
        stub.markdown(&org).contains(": 3 pull requests"),
        "{}",
        stub.markdown(&org)
    );
    // The lease is given back: the next build takes it at once.
    assert!(t
        .pages
        .claim_org_publish(
            "acme",
            "a-third-build",
            OffsetDateTime::now_utc(),
            OffsetDateTime::now_utc() + time::Duration::minutes(1)
        )
        .await
        .unwrap());
}

/// Builds the stale module pages (not the indexes) of both repositories.
async fn settle_modules(b: &stages::builder::PageBuilder, t: &Tables) {
    for page in t.pages.stale_pages().await.unwrap() {
        if page.module != INDEX_MODULE {
            b.build(
                &page.repo,
                &page.module,
                "module-build",
                support::within(60),
            )
            .await
            .unwrap();
        }
    }
}

/// Notion refuses the organisation page's content when a page appeared under it after the
/// listing (another build's new index page): it is listed again and sent again, not failed.
#[tokio::test]
async fn a_refused_organisation_page_is_listed_and_sent_again() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(90)).await;
    let (org, _) = org_page(&stub, &parent);
    // Only the organisation page changes: acme/web's row says more than before.
    let mut rows = t.pages.org_repos("acme").await.unwrap();
    let web = rows.iter_mut().find(|r| r.repo == OTHER).unwrap();
    web.entry_count = 41;
    web.modules[0].entry_count = 41;
    t.pages.put_org_repo("acme", web).await.unwrap();
    let rows = t.pages.org_repos("acme").await.unwrap();
    let before = stub.count("PATCH", "/v1/pages/", "/markdown");
    stub.fault(
        Some("PATCH markdown"),
        support::notion_stub::Fault::Invalid(
            "Content would delete child pages that were not named".into(),
        ),
    );
    use stages::publish::Publisher as _;
    let published = publisher(&t, &stub, &parent)
        .publish_org(&stages::publish::OrgSet {
            org: "acme",
            repos: &rows,
            owner: "org-build",
            deadline: support::within(60),
        })
        .await
        .expect("published, not failed");
    assert_eq!(published.documents, 1);
    let markdown = stub.markdown(&org);
    assert!(markdown.contains(": 41 pull requests"), "{markdown}");
    let org_patches: Vec<Option<u16>> = stub
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.contains(&org))
        .map(|r| r.status)
        .collect();
    assert_eq!(
        stub.count("PATCH", "/v1/pages/", "/markdown") - before,
        2,
        "only the organisation page: {org_patches:?}"
    );
    assert_eq!(
        &org_patches[org_patches.len() - 2..],
        [Some(400), Some(200)],
        "refused once, listed and sent again"
    );
}

/// Refused twice (the content itself is wrong, or the page keeps changing): the build fails
/// with Notion's message (the builder records it on the index's page item, as every failure),
/// instead of being retried as busy forever.
#[tokio::test]
async fn an_organisation_page_refused_twice_fails_its_build_with_notions_message() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let rows = t.pages.org_repos("acme").await.unwrap();
    let mut changed = rows.clone();
    changed[0].entry_count = 7;
    for _ in 0..2 {
        stub.fault(
            Some("PATCH markdown"),
            support::notion_stub::Fault::Invalid("Content is not valid markdown.".into()),
        );
    }
    use stages::publish::Publisher as _;
    let result = publisher(&t, &stub, &parent)
        .publish_org(&stages::publish::OrgSet {
            org: "acme",
            repos: &changed,
            owner: "org-build",
            deadline: support::within(60),
        })
        .await;
    assert!(
        matches!(&result, Err(stages::publish::PublishError::Notion(e)) if e.to_string().contains("not valid markdown")),
        "{result:?}"
    );
}
