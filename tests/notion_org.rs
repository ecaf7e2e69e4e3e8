//! The organisation's page in Notion: one per owner under the configured parent, holding every
//! repository's index page as a child page; an index page an earlier version published under
//! the parent is moved under it; deleted by hand, it comes back with its repositories; a page a
//! person put under it is kept; an unchanged organisation costs no request.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use stages::domain::ModuleEntry;
use stages::notion::NotionClient;
use stages::publish::{NotionPublisher, Publisher as _};
use stages::secret::Secret;
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

/// Builds of one organisation page take turns (its item's build lease): while another holds it,
/// the repositories' pages are built and fresh, and the organisation page waits, stale, for a
/// later tick, which publishes it from the rows as they are then.
#[tokio::test]
async fn publishes_of_one_organisation_page_take_turns() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(90)).await;
    let (org, before) = org_page(&stub, &parent);
    let stale = |t: &Tables| {
        let pages = t.pages.clone();
        async move {
            let mut stale: Vec<String> = pages
                .stale_pages()
                .await
                .unwrap()
                .into_iter()
                .map(|p| p.repo)
                .collect();
            stale.sort();
            stale
        }
    };

    // Another build holds the organisation page's lease (it is publishing it, or died doing so).
    claim_org(&t, "another-build", 300).await;
    put(&t, &other_entry("ui", 3, "2025-03-01T10:00:00Z")).await;
    crate::notion::tick(&b, 60).await;
    assert_eq!(
        stale(&t).await,
        ["#org/acme"],
        "only the organisation page waits"
    );
    assert_eq!(stub.markdown(&org), before, "not published meanwhile");

    // Once the holder is done, the next tick publishes it from the rows as they are then.
    assert!(t
        .pages
        .release_build("#org/acme", INDEX_MODULE, "another-build")
        .await
        .unwrap());
    crate::notion::tick(&b, 60).await;
    assert!(stale(&t).await.is_empty());
    let after = stub.markdown(&org);
    assert!(
        after.contains("- [ui](https://www.notion.so/") && after.contains(": 2 pull requests"),
        "{after}"
    );

    // A build that died holding the lease holds it up until it expires, no longer.
    claim_org(&t, "a-dead-build", 2).await;
    put(&t, &other_entry("ui", 4, "2025-04-01T10:00:00Z")).await;
    crate::notion::tick(&b, 60).await;
    assert_eq!(stale(&t).await, ["#org/acme"]);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    crate::notion::tick(&b, 60).await;
    assert!(stale(&t).await.is_empty());
    assert!(
        stub.markdown(&org).contains(": 3 pull requests"),
        "{}",
        stub.markdown(&org)
    );
    // The lease is given back: the next build takes it at once.
    let item = org_item(&t).await;
    assert!(item.build_owner.is_none(), "{item:?}");
}

/// Takes the organisation page's build lease for `secs` with the builder's own claim
/// (`claim_build` on its item, marked stale first, as a recorded row marks it).
async fn claim_org(t: &Tables, owner: &str, secs: i64) {
    let now = OffsetDateTime::now_utc();
    t.pages.mark_org_stale("acme", false, now).await.unwrap();
    let claim = t
        .pages
        .claim_build(
            "#org/acme",
            INDEX_MODULE,
            owner,
            now,
            now + time::Duration::seconds(secs),
            now,
        )
        .await
        .unwrap();
    assert!(
        matches!(claim, stages::store::BuildClaim::Claimed(_)),
        "{owner} claims it"
    );
}

/// Takes the organisation page's build lease for a minute (see [`claim_org`]).
async fn hold_org_lease(t: &Tables, owner: &str) {
    claim_org(t, owner, 60).await;
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
    hold_org_lease(&t, "org-build").await;
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
/// with Notion's message (the builder records it on the organisation page's own item), instead
/// of being retried as busy forever.
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
    hold_org_lease(&t, "org-build").await;
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

/// The organisation page's item: its Notion record, its error, its stale marker.
async fn org_item(t: &Tables) -> stages::domain::PageItem {
    t.pages
        .get("#org/acme", INDEX_MODULE)
        .await
        .unwrap()
        .expect("the organisation page's item")
}

/// The hash the publisher records for content it sent.
fn content_hash(markdown: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(markdown.as_bytes())[..12])
}

/// Requests of `since` on the organisation page `org` (its content, its children).
fn org_requests(stub: &NotionStub, org: &str, since: usize) -> Vec<String> {
    stub.requests()[since..]
        .iter()
        .filter(|r| r.path.contains(org) || r.path.contains(&org.replace('-', "")))
        .map(|r| format!("{} {} {:?}", r.method, r.path, r.status))
        .collect()
}

/// The organisation page is best-effort beside the repositories' pages. Notion refusing it (a
/// person put a page into a toggle on it, which Chronicle cannot name) fails it alone: the
/// error is on its own item and in `chronicle status`, every repository's index is published
/// and fresh, and the refused page is not sent again at the next ticks while nothing changed.
#[tokio::test]
async fn a_refused_organisation_page_fails_alone_and_is_not_sent_again_at_each_tick() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(90)).await;
    let (org, before) = org_page(&stub, &parent);
    let notes = stub.add_page(Some(&org), "Team notes", true);
    stub.nest(&notes, true);

    put(&t, &entry("api", 3, "2024-07-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 4, "2025-03-01T10:00:00Z")).await;
    for _ in 0..2 {
        crate::notion::tick(&b, 60).await;
    }
    let stale: Vec<(String, String)> = t
        .pages
        .stale_pages()
        .await
        .unwrap()
        .into_iter()
        .filter(|p| !p.repo.starts_with("#org/"))
        .map(|p| (p.repo, p.module))
        .collect();
    assert!(
        stale.is_empty(),
        "every repository page is fresh: {stale:?}"
    );
    for repo in [REPO, OTHER] {
        let index = t.pages.get(repo, INDEX_MODULE).await.unwrap().unwrap();
        assert!(
            index.last_error.is_none() && index.stale.is_none(),
            "{repo}: {:?}",
            index.last_error
        );
        assert_eq!(index.entry_count, 2, "{repo}");
        assert!(
            stub.markdown(&index_of(&stub, repo))
                .contains("2 merged pull requests"),
            "{repo}'s index is published:\n{}",
            stub.markdown(&index_of(&stub, repo))
        );
    }
    assert_eq!(
        stub.markdown(&org),
        before,
        "Notion kept the page as it was"
    );
    let item = org_item(&t).await;
    let error = item
        .last_error
        .clone()
        .expect("the error is on its own item");
    assert!(error.contains("child page"), "{error}");
    assert!(item.advice.is_some(), "{item:?}");
    let status = stages::status::gather(
        &stages::status::StatusSources {
            prs: &t.prs,
            pages: &t.pages,
            checkpoints: &stages::store::CheckpointStore::new(
                aws_sdk_dynamodb::Client::new(&sdk),
                t.pages.table_name(),
            ),
            sqs: &aws_sdk_sqs::Client::new(&sdk),
            queues: &[],
        },
        None,
        OffsetDateTime::now_utc(),
    )
    .await
    .unwrap();
    let text = stages::status::render(&status);
    assert!(
        text.contains(ORG_TITLE) && text.contains(&error),
        "status shows it:\n{text}"
    );

    // Nothing changed: the next ticks send it no request, neither listing nor replace.
    let since = stub.requests().len();
    for _ in 0..3 {
        crate::notion::tick(&b, 60).await;
    }
    assert_eq!(org_requests(&stub, &org, since), Vec::<String>::new());
    assert_eq!(
        stub.requests().len(),
        since,
        "{:?}",
        &stub.requests()[since..]
    );
}

/// Several repositories of one owner built in one tick replace their organisation page once,
/// after their indexes, not once per repository.
#[tokio::test]
async fn repositories_rebuilt_in_one_tick_replace_their_organisation_page_once() {
    const THIRD: &str = "acme/third";
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.without_rate_limit();
    let third = |number: u64, merged_at: &str| {
        let mut e = entry("lib", number, merged_at);
        e.repo = THIRD.into();
        e.url = format!("https://github.com/{THIRD}/pull/{number}");
        e
    };
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    put(&t, &third(3, "2025-03-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(120)).await;
    let (org, _) = org_page(&stub, &parent);

    put(&t, &entry("api", 4, "2024-07-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 5, "2025-04-01T10:00:00Z")).await;
    put(&t, &third(6, "2025-05-01T10:00:00Z")).await;
    let since = stub.requests().len();
    let report = crate::notion::tick(&b, 90).await;
    assert!(
        t.pages.stale_pages().await.unwrap().is_empty(),
        "one tick: {report:?}"
    );
    let requests = org_requests(&stub, &org, since);
    let replaces = requests.iter().filter(|r| r.starts_with("PATCH")).count();
    let listings = requests.iter().filter(|r| r.contains("children")).count();
    assert_eq!((replaces, listings), (1, 1), "{requests:?}");
    assert!(
        stub.markdown(&org).matches(": 2 pull requests").count() >= 3,
        "{}",
        stub.markdown(&org)
    );
}

/// A replace that outlives its lease (Notion was slow) can land after the next holder's
/// replace: its late answer records nothing (the lease is the next holder's) and marks the page
/// to be sent again whole, and the next tick publishes the rows as they are.
#[tokio::test]
async fn a_replace_that_lands_after_its_lease_never_leaves_old_content_recorded_as_new() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    put(&t, &other_entry("ui", 2, "2025-02-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(90)).await;
    let (org, _) = org_page(&stub, &parent);
    let with_count = |count: u64| {
        let t = &t;
        async move {
            let mut rows = t.pages.org_repos("acme").await.unwrap();
            let web = rows.iter_mut().find(|r| r.repo == OTHER).unwrap();
            web.entry_count = count;
            web.modules[0].entry_count = count;
            t.pages.put_org_repo("acme", web).await.unwrap();
            t.pages.org_repos("acme").await.unwrap()
        }
    };

    // Build A holds the lease for two seconds; Notion takes four to apply its replace.
    let old_rows = with_count(41).await;
    claim_org(&t, "build-a", 2).await;
    stub.fault(
        Some("PATCH markdown"),
        support::notion_stub::Fault::Delay(Duration::from_secs(4)),
    );
    let slow = NotionPublisher::new(
        NotionClient::new(&stub.url(), Secret::new(TOKEN.to_string())).with_retry(
            0,
            Duration::from_millis(50),
            Duration::from_secs(20),
        ),
        &parent,
        t.pages.clone(),
    );
    let a = tokio::spawn(async move {
        slow.publish_org(&stages::publish::OrgSet {
            org: "acme",
            repos: &old_rows,
            owner: "build-a",
            deadline: support::within(30),
        })
        .await
    });

    // Its lease expired: build B takes it and publishes newer rows, at once.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let new_rows = with_count(42).await;
    claim_org(&t, "build-b", 60).await;
    publisher(&t, &stub, &parent)
        .publish_org(&stages::publish::OrgSet {
            org: "acme",
            repos: &new_rows,
            owner: "build-b",
            deadline: support::within(30),
        })
        .await
        .expect("B publishes");
    assert!(stub.markdown(&org).contains(": 42 pull requests"));
    t.pages
        .release_build("#org/acme", INDEX_MODULE, "build-b")
        .await
        .unwrap();

    // A's replace lands last: Notion holds the old rows, B's hash is recorded, and A's late
    // answer (its lease gone) marks the page to be sent again whole.
    let a = a.await.unwrap();
    assert!(
        matches!(a, Err(stages::publish::PublishError::LeaseLost)),
        "{a:?}"
    );
    let held = stub.markdown(&org);
    assert!(held.contains(": 41 pull requests"), "{held}");
    let item = org_item(&t).await;
    let recorded = item.notion.get("main").and_then(|p| p.hash.clone());
    assert_ne!(recorded, Some(content_hash(&held)), "A recorded nothing");
    assert!(
        item.stale.is_some() && item.full_rebuild,
        "the page is sent again whole: {item:?}"
    );
    // The next tick publishes the rows as they are, and records what Notion then holds.
    for _ in 0..2 {
        crate::notion::tick(&b, 60).await;
    }
    let held = stub.markdown(&org);
    assert!(held.contains(": 42 pull requests"), "{held}");
    let item = org_item(&t).await;
    assert_eq!(
        item.notion.get("main").and_then(|p| p.hash.clone()),
        Some(content_hash(&held)),
        "{item:?}"
    );
    assert!(item.stale.is_none(), "{item:?}");
}

/// A mass rebuild in Notion: a merge in each of 50 repositories of one owner, built in one
/// tick, lists and replaces their organisation page once (not 50 times each).
#[tokio::test]
async fn fifty_repositories_rebuilt_in_one_tick_list_and_replace_the_notion_page_once() {
    const REPOS: u64 = 50;
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.without_rate_limit();
    let merge = |i: u64, number: u64| {
        let repo = format!("acme/r{i:02}");
        let mut e = entry("core", number, &format!("2025-0{number}-01T10:{i:02}:00Z"));
        e.url = format!("https://github.com/{repo}/pull/{number}");
        e.repo = repo;
        e
    };
    for i in 0..REPOS {
        put(&t, &merge(i, 1)).await;
    }
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent))).with_concurrency(4);
    settle(&b, &t, Duration::from_secs(400)).await;
    let (org, _) = org_page(&stub, &parent);
    for i in 0..REPOS {
        put(&t, &merge(i, 2)).await;
    }
    let since = stub.requests().len();
    let report = crate::notion::tick(&b, 300).await;
    assert!(
        t.pages.stale_pages().await.unwrap().is_empty(),
        "one tick: {report:?}"
    );
    let requests = org_requests(&stub, &org, since);
    let replaces = requests.iter().filter(|r| r.starts_with("PATCH")).count();
    let listings = requests.iter().filter(|r| r.contains("children")).count();
    eprintln!(
        "50 repositories: {} Notion requests in the tick, {} of them the organisation page's",
        stub.requests().len() - since,
        requests.len()
    );
    // One listing of its children (in pages of 100 blocks: its content's lines are blocks too)
    // and one replace, where each index build used to list and replace it.
    assert_eq!(replaces, 1, "{requests:?}");
    assert!(listings <= 3, "{requests:?}");
    let markdown = stub.markdown(&org);
    for i in 0..REPOS {
        assert!(markdown.contains(&format!("acme/r{i:02}")), "{markdown}");
    }
    assert!(markdown.contains("2 merged pull requests"), "{markdown}");
}

/// Sets `repo`'s row (and its first module's) to `count` pull requests, and marks the
/// organisation page stale, as an index build recording that row does: only it changes.
async fn set_row_count(t: &Tables, repo: &str, count: u64) {
    let mut rows = t.pages.org_repos("acme").await.unwrap();
    let row = rows.iter_mut().find(|r| r.repo == repo).unwrap();
    row.entry_count = count;
    row.modules[0].entry_count = count;
    t.pages.put_org_repo("acme", row).await.unwrap();
    t.pages
        .mark_org_stale("acme", false, OffsetDateTime::now_utc())
        .await
        .unwrap();
}

/// A 5xx on the organisation page's replace is Notion's brief trouble: the replace is retried
/// within its build (bounded by the lease), not recorded as the page's failure nor held back.
#[tokio::test]
async fn a_server_error_on_the_organisation_replace_is_retried_in_its_build() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (org, _) = org_page(&stub, &parent);
    set_row_count(&t, REPO, 41).await;
    stub.fault(
        Some("PATCH markdown"),
        support::notion_stub::Fault::ServerError,
    );
    let report = crate::notion::tick(&b, 60).await;
    let item = org_item(&t).await;
    assert!(
        item.last_error.is_none() && item.failed_builds == 0,
        "no failure recorded: {item:?}"
    );
    assert!(
        item.stale.is_none(),
        "built in this tick: {report:?} {item:?}"
    );
    assert!(stub.markdown(&org).contains(": 41 pull requests"));
}

/// A 429 whose `Retry-After` does not fit in the build is not a failure: the page waits that
/// long, stale, with no error on its item (`chronicle status` stays clean), and no failed build
/// counted that would hold it back longer.
#[tokio::test]
async fn a_rate_limited_organisation_replace_waits_its_retry_after_without_an_error() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (org, before) = org_page(&stub, &parent);
    set_row_count(&t, REPO, 41).await;
    stub.fault(
        Some("PATCH markdown"),
        support::notion_stub::Fault::RateLimited {
            retry_after_secs: 45,
        },
    );
    let report = crate::notion::tick(&b, 60).await;
    assert_eq!(report.failed, 0, "{report:?}");
    let item = org_item(&t).await;
    assert!(
        item.last_error.is_none() && item.failed_builds == 0,
        "no failure recorded: {item:?}"
    );
    assert!(item.stale.is_some(), "still to publish: {item:?}");
    let not_before =
        stages::domain::rfc3339_millis(OffsetDateTime::now_utc() + time::Duration::seconds(30));
    assert!(
        item.build_until.as_deref() >= Some(not_before.as_str()),
        "waits out Retry-After: {item:?}"
    );
    assert_eq!(stub.markdown(&org), before);
}

/// A page Notion refuses (a person put a page in a toggle on it) is sent again as soon as what
/// it is made from changes, not after a back-off; and once the person moved their page out,
/// that send succeeds and clears the error.
#[tokio::test]
async fn a_refused_organisation_page_is_sent_again_as_soon_as_its_rows_change() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (org, _) = org_page(&stub, &parent);
    let notes = stub.add_page(Some(&org), "Team notes", true);
    stub.nest(&notes, true);
    put(&t, &entry("api", 2, "2024-07-01T10:00:00Z")).await;
    crate::notion::tick(&b, 60).await;
    let item = org_item(&t).await;
    assert!(item.last_error.is_some(), "refused: {item:?}");

    // The person moves their page out of the toggle; the next merge publishes the page.
    stub.nest(&notes, false);
    put(&t, &entry("api", 3, "2024-08-01T10:00:00Z")).await;
    let since = stub.requests().len();
    crate::notion::tick(&b, 60).await;
    let markdown = stub.markdown(&org);
    assert!(
        markdown.contains("3 merged pull requests"),
        "{markdown}\n{:?}",
        org_requests(&stub, &org, since)
    );
    let item = org_item(&t).await;
    assert!(
        item.last_error.is_none() && item.stale.is_none(),
        "{item:?}"
    );
}

/// An organisation page over Notion's request size (checked before sending) is refused for
/// good: its children are listed once, not again for a second refused send; and while its rows
/// are unchanged, a later build sends no request at all.
#[tokio::test]
async fn an_organisation_page_over_notions_size_is_not_sent_again_while_unchanged() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (org, _) = org_page(&stub, &parent);
    let rows: Vec<stages::domain::OrgRepo> = (0..6000)
        .map(|i| stages::domain::OrgRepo {
            repo: format!("acme/a-repository-with-a-rather-long-name-made-longer-still-{i:05}"),
            latest_merged_at: Some("2025-01-01T10:00:00Z".into()),
            modules: (0..3)
                .map(|m| stages::domain::OrgModule {
                    module: format!("a-module-with-a-long-name-{m}"),
                    entry_count: 7,
                    latest_merged_at: Some("2025-01-01T10:00:00Z".into()),
                    authors: vec!["octocat".into()],
                    notion_url: None,
                })
                .collect(),
            module_count: 3,
            entry_count: 21,
            people: Vec::new(),
            notion_index: None,
        })
        .collect();
    for attempt in 0..2 {
        hold_org_lease(&t, &format!("org-build-{attempt}")).await;
        let since = stub.requests().len();
        let result = publisher(&t, &stub, &parent)
            .publish_org(&stages::publish::OrgSet {
                org: "acme",
                repos: &rows,
                owner: &format!("org-build-{attempt}"),
                deadline: support::within(60),
            })
            .await;
        assert!(
            matches!(&result, Err(e) if e.to_string().contains("500000")),
            "{result:?}"
        );
        let requests = org_requests(&stub, &org, since);
        let listings = requests.iter().filter(|r| r.contains("children")).count();
        let expected = if attempt == 0 { 1 } else { 0 };
        assert_eq!(listings, expected, "attempt {attempt}: {requests:?}");
        assert!(
            !requests.iter().any(|r| r.starts_with("PATCH")),
            "never sent: {requests:?}"
        );
        t.pages
            .release_build("#org/acme", INDEX_MODULE, &format!("org-build-{attempt}"))
            .await
            .unwrap();
    }
}

/// With Markdown published beside Notion, Notion refusing the organisation page never holds
/// up the Markdown one: each tick's rows are in the file.
#[tokio::test]
async fn a_refused_notion_organisation_page_never_holds_up_its_markdown() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    let dir = std::env::temp_dir().join(format!("chronicle-org-{}", uuid::Uuid::new_v4()));
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let both = stages::publish::Publishers(vec![
        Arc::new(stages::publish::MarkdownPublisher::new(&dir)),
        Arc::new(publisher(&t, &stub, &parent)),
    ]);
    let b = builder(&t, Arc::new(both));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (org, _) = org_page(&stub, &parent);
    let notes = stub.add_page(Some(&org), "Team notes", true);
    stub.nest(&notes, true);
    for number in 2..4 {
        put(&t, &entry("api", number, "2024-07-01T10:00:00Z")).await;
        crate::notion::tick(&b, 60).await;
        let markdown = std::fs::read_to_string(dir.join("acme.md")).unwrap();
        assert!(
            markdown.contains(&format!("{number} merged pull requests")),
            "after merge {number}: {markdown}"
        );
    }
    assert!(org_item(&t).await.last_error.is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A replace that gets no answer before its deadline (its lease's end less a margin, as the
/// builder sets it) may still have landed: it records nothing and marks the page to be sent
/// again whole, and once its lease has ended the next build sends the rows as they are and
/// records what Notion then holds.
#[tokio::test]
async fn a_replace_never_answered_records_nothing_and_is_sent_again_whole() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let (stub, parent) = NotionStub::start(TOKEN).await;
    put(&t, &entry("api", 1, "2024-06-01T10:00:00Z")).await;
    let b = builder(&t, Arc::new(publisher(&t, &stub, &parent)));
    settle(&b, &t, Duration::from_secs(60)).await;
    let (org, _) = org_page(&stub, &parent);
    set_row_count(&t, REPO, 41).await;
    let rows = t.pages.org_repos("acme").await.unwrap();

    // An 8-second lease: requests until 3 s, the builder's 5-second margin kept back.
    claim_org(&t, "build-a", 8).await;
    stub.fault(
        Some("PATCH markdown"),
        support::notion_stub::Fault::HangAfterApply,
    );
    let a = NotionPublisher::new(
        NotionClient::new(&stub.url(), Secret::new(TOKEN.to_string())).with_retry(
            3,
            Duration::from_millis(50),
            Duration::from_secs(20),
        ),
        &parent,
        t.pages.clone(),
    );
    let result = a
        .publish_org(&stages::publish::OrgSet {
            org: "acme",
            repos: &rows,
            owner: "build-a",
            deadline: support::within(3),
        })
        .await;
    assert!(
        matches!(&result, Err(stages::publish::PublishError::Notion(e)) if e.maybe_applied()),
        "{result:?}"
    );
    let held = stub.markdown(&org);
    assert!(held.contains(": 41 pull requests"), "applied: {held}");
    let item = org_item(&t).await;
    assert_ne!(
        item.notion.get("main").and_then(|p| p.hash.clone()),
        Some(content_hash(&held)),
        "nothing recorded for an unanswered replace"
    );
    assert!(item.stale.is_some() && item.full_rebuild, "{item:?}");

    // Its lease over, the next build sends the rows as they are then.
    set_row_count(&t, REPO, 42).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    crate::notion::tick(&b, 60).await;
    let held = stub.markdown(&org);
    assert!(held.contains(": 42 pull requests"), "{held}");
    let item = org_item(&t).await;
    assert_eq!(
        item.notion.get("main").and_then(|p| p.hash.clone()),
        Some(content_hash(&held)),
        "{item:?}"
    );
    assert!(item.stale.is_none() && !item.full_rebuild, "{item:?}");
}
