//! Repository context (CODEOWNERS, workspace manifests) fetched through the strict GitHub REST
//! stand-in: conditional requests (ETag, 304), 404s kept as "no such file", failures that keep
//! the stored context, and the stored item's conditional write against the emulator.

use std::sync::Arc;
use std::time::Duration;

use stages::context::{refresh, RepoContext};
use stages::domain::RepoName;
use stages::enrich::{EnrichHandler, GitHubApis};
use stages::github::graphql::GraphQlClient;
use stages::github::GitHubClient;
use stages::secret::Secret;
use stages::store::ContextStore;
use standins::github_standin::rest::Fault;
use standins::github_standin::GitHubStandIn;
use support::*;
use time::OffsetDateTime;

const TOKEN: &str = "ghp_context_test_token";
const REPO: &str = "acme/monorepo";

fn client(stub: &GitHubStandIn) -> GitHubClient {
    GitHubClient::new(stub.url(), &Secret::new(TOKEN), Duration::from_secs(2), 1).unwrap()
}

fn repo() -> RepoName {
    RepoName::parse(REPO).unwrap()
}

/// A Cargo workspace (a wildcard and a literal member, one excluded), an npm workspace beside
/// it, CODEOWNERS in `.github/`, no pnpm or Go workspace.
async fn monorepo() -> GitHubStandIn {
    let stub = GitHubStandIn::start(TOKEN).await.unwrap();
    let files = [
        (".github/CODEOWNERS", "# owners\n/infra/ @acme/platform\n"),
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\", \"tools/xtask\"]\nexclude = [\"crates/old\"]\n",
        ),
        (
            "crates/api/Cargo.toml",
            "[package]\nname = \"acme-api\"\ndescription = \"The public HTTP API.\"\n",
        ),
        ("crates/api/src/lib.rs", "pub fn api() {}\n"),
        (
            "crates/api/README.md",
            "# acme-api\n\n[![CI](https://img.shields.io/badge/ci-ok-green)](https://ci)\n\nThe public HTTP API: routes, auth and paging.\n\n## Usage\n\nRun it.\n",
        ),
        ("crates/web/Cargo.toml", "[package]\nname = \"acme-web\"\n"),
        ("crates/old/Cargo.toml", "[package]\nname = \"old\"\n"),
        ("crates/README.md", "not a crate\n"),
        ("tools/xtask/Cargo.toml", "[package]\nname = \"xtask\"\n"),
        (
            "package.json",
            "{\"private\":true,\"workspaces\":[\"packages/*\"]}",
        ),
        (
            "packages/ui/package.json",
            "{\"name\":\"@acme/ui\",\"description\":\"Buttons and dialogs\"}",
        ),
        ("packages/docs-site/README.md", "no manifest here\n"),
        (
            "packages/web app/package.json",
            "{\"name\":\"@acme/ui\",\"description\":\"A second package of one name\"}",
        ),
    ];
    for (path, text) in files {
        stub.add_file(REPO, path, text);
    }
    stub
}

fn names(c: &RepoContext) -> Vec<(&str, &str)> {
    c.packages
        .iter()
        .map(|p| (p.name.as_str(), p.dir.as_str()))
        .collect()
}

#[tokio::test]
async fn a_workspace_is_read_once_then_asked_again_conditionally() {
    let stub = monorepo().await;
    stub.add_file(
        REPO,
        ".github/chronicle.yml",
        "modules:\n  api:\n    paths: [\"crates/api/**\"]\n    notes: Ask @acme/api-team first.\n",
    );
    let github = client(&stub);
    let now = OffsetDateTime::now_utc();
    let first = refresh(&github, &repo(), None, now, within(10))
        .await
        .unwrap();
    assert_eq!(
        names(&first),
        [
            ("acme-api", "crates/api"),
            ("acme-web", "crates/web"),
            ("@acme/ui", "packages/ui"),
            ("packages/web app", "packages/web app"),
            ("xtask", "tools/xtask"),
        ],
        "crates/old is excluded; a member without a manifest (packages/docs-site) is not a \
         package; of two packages called @acme/ui the first by directory keeps the name; a \
         directory with a space is asked for percent-encoded"
    );
    let api = first.package_named("acme-api").unwrap();
    assert_eq!(api.description.as_deref(), Some("The public HTTP API."));
    assert_eq!(api.manifest.as_deref(), Some("crates/api/Cargo.toml"));
    assert_eq!(first.codeowners_path.as_deref(), Some(".github/CODEOWNERS"));
    // READMEs: a package's lead paragraph (title and badges skipped), a top-level directory's.
    let about = &first.about["crates/api"];
    assert_eq!(about.text, "The public HTTP API: routes, auth and paging.");
    assert_eq!(about.source, "crates/api/README.md");
    assert_eq!(first.about["crates"].text, "not a crate");
    assert_eq!(first.about.len(), 2, "{:?}", first.about);
    assert_eq!(
        first.top_level.as_deref().unwrap(),
        [".github", "crates", "packages", "tools"]
    );
    assert!(first
        .codeowners
        .as_deref()
        .unwrap()
        .contains("@acme/platform"));
    // CODEOWNERS found at the first place GitHub looks: the other two are not asked for.
    assert_eq!(
        stub.count_matching("/repos/acme/monorepo/contents/CODEOWNERS"),
        0
    );
    let first_requests = stub.request_count();
    let first_served = stub.served_count();

    // A day later nothing changed: every file and listing found before is asked for with its
    // ETag and answers 304 (nothing served); the 404s are asked again.
    let later = now + time::Duration::hours(25);
    let second = refresh(&github, &repo(), Some(&first), later, within(10))
        .await
        .unwrap();
    assert_eq!(names(&second), names(&first));
    assert_eq!(second.packages, first.packages);
    assert_eq!(second.codeowners, first.codeowners);
    // The team's file is read with the rest, and a 304 keeps its text.
    assert!(first
        .team_file
        .as_deref()
        .unwrap()
        .contains("Ask @acme/api-team first."));
    assert_eq!(second.team_file, first.team_file);
    assert_eq!(
        stub.served_count(),
        first_served,
        "every found file answered 304"
    );
    let conditional = stub.requests()[first_requests..]
        .iter()
        .filter(|r| r.headers.contains_key("if-none-match"))
        .count();
    let missing = [
        "contents/pnpm-workspace.yaml",
        "contents/go.work",
        "contents/packages/docs-site/package.json",
        "readme/crates/web",
        "readme/packages/web%20app",
        "readme/packages/ui",
        "readme/tools/xtask",
        "readme/packages",
        "readme/tools",
    ];
    assert_eq!(
        stub.request_count() - first_requests,
        conditional + missing.len(),
        "found ones conditionally, the 404s again"
    );
    assert_eq!(
        second.about, first.about,
        "a 304 keeps what the README said"
    );

    // One manifest changes, CODEOWNERS moves to the root: only those are served again.
    stub.add_file(
        REPO,
        "crates/web/Cargo.toml",
        "[package]\nname = \"acme-web\"\ndescription = \"The web UI\"\n",
    );
    stub.remove_file(REPO, ".github/CODEOWNERS");
    stub.remove_file(REPO, ".github/chronicle.yml");
    stub.add_file(REPO, "CODEOWNERS", "* @acme/core\n");
    let served = stub.served_count();
    let third = refresh(&github, &repo(), Some(&second), later, within(10))
        .await
        .unwrap();
    assert_eq!(
        third
            .package_named("acme-web")
            .unwrap()
            .description
            .as_deref(),
        Some("The web UI")
    );
    assert_eq!(third.codeowners_path.as_deref(), Some("CODEOWNERS"));
    assert_eq!(third.codeowners.as_deref(), Some("* @acme/core\n"));
    assert_eq!(
        third.team_file, None,
        "a removed file is gone from the context"
    );
    assert_eq!(
        stub.served_count() - served,
        3,
        "the changed manifest, the new CODEOWNERS and the root listing"
    );
    assert_eq!(
        third.top_level.as_deref().unwrap(),
        ["crates", "packages", "tools"],
        ".github went with its last file"
    );
}

#[tokio::test]
async fn a_repository_without_any_of_it_has_an_empty_context_and_failures_keep_the_old_one() {
    let stub = GitHubStandIn::start(TOKEN).await.unwrap();
    stub.add_file(REPO, "src/main.rs", "fn main() {}\n");
    let github = client(&stub);
    let now = OffsetDateTime::now_utc();
    let empty = refresh(&github, &repo(), None, now, within(10))
        .await
        .unwrap();
    assert!(empty.packages.is_empty());
    assert_eq!(empty.codeowners, None);
    assert_eq!(empty.team_file, None);
    assert_eq!(
        stub.request_count(),
        3 + 1 + 1 + 4 + 1,
        "three CODEOWNERS places, .github/chronicle.yml, the root listing, four manifests, src's README"
    );
    assert_eq!(empty.top_level.as_deref().unwrap(), ["src"]);

    // A 5xx that outlasts the retries, or a rate limit, is an error: the caller keeps the
    // context it has.
    stub.fail_next(
        "/repos/acme/monorepo/contents/Cargo.toml",
        Fault::ServerError,
    );
    stub.fail_next(
        "/repos/acme/monorepo/contents/Cargo.toml",
        Fault::ServerError,
    );
    let err = refresh(&github, &repo(), Some(&empty), now, within(10))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("500"), "{err}");
    stub.fail_next(
        "/repos/acme/monorepo/contents/.github",
        Fault::RateLimitExhausted { reset_in_secs: 600 },
    );
    let err = refresh(&github, &repo(), Some(&empty), now, within(10))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("rate limit"), "{err}");
}

#[tokio::test]
async fn enrichment_stores_the_context_once_a_day_and_concurrent_refreshes_store_one() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let stub = monorepo().await;
    let contexts = t.pages.contexts();
    let token = Secret::new(TOKEN);
    let apis = GitHubApis {
        graphql: GraphQlClient::new(stub.url(), &token, Duration::from_secs(2)).unwrap(),
        rest: client(&stub),
        max_retries: 1,
        issue_scope: Default::default(),
    };
    let enrich = Arc::new(
        EnrichHandler::new(t.prs.clone(), Some(apis.clone()), 4, 500)
            .with_contexts(contexts.clone()),
    );
    let now = OffsetDateTime::now_utc();
    enrich.refresh_context(&repo(), now, within(10)).await;
    let stored = contexts.get(REPO).await.unwrap().expect("stored");
    assert_eq!(stored.packages.len(), 5);
    assert_eq!(stored.version, stages::context::CONTEXT_VERSION);
    // The pages table's index build does not take the context for a page.
    let pages = t.pages.repo_pages(REPO).await.unwrap();
    assert!(pages.is_empty(), "{pages:?}");

    // Fresh: no request at all.
    let before = stub.request_count();
    enrich
        .refresh_context(&repo(), now + time::Duration::hours(23), within(10))
        .await;
    assert_eq!(stub.request_count(), before);

    // Stale, refreshed by two workers at once: both finish, one context is stored.
    let other = Arc::new(
        EnrichHandler::new(t.prs.clone(), Some(apis), 4, 500).with_contexts(contexts.clone()),
    );
    let later = now + time::Duration::hours(25);
    let (a, b) = (enrich.clone(), other.clone());
    let r = repo();
    let r2 = repo();
    let (x, y) = tokio::join!(
        tokio::spawn(async move { a.refresh_context(&r, later, within(10)).await }),
        tokio::spawn(async move { b.refresh_context(&r2, later, within(10)).await }),
    );
    x.unwrap();
    y.unwrap();
    let after = contexts.get(REPO).await.unwrap().unwrap();
    assert_eq!(after.checked_at, stages::domain::rfc3339_seconds(later));
    assert_eq!(after.packages, stored.packages);

    // A conditional write on a stale `checkedAt` is refused.
    assert!(!contexts
        .put(REPO, &after, Some(&stored.checked_at))
        .await
        .unwrap());
    assert!(!contexts.put(REPO, &after, None).await.unwrap());
    // A context another version stored, unreadable to this one, is replaced (conditional on
    // the checkedAt it has), not left in place while every batch refetches.
    t.pages
        .contexts()
        .put(REPO, &after, Some(&after.checked_at))
        .await
        .unwrap();
    aws_sdk_dynamodb::Client::new(&sdk)
        .update_item()
        .table_name(t.pages.table_name())
        .key("repo", av_s(REPO))
        .key("module", av_s("#context"))
        .update_expression("SET #c = :c, #v = :v")
        .expression_attribute_names("#c", "context")
        .expression_attribute_names("#v", "contextVersion")
        .expression_attribute_values(":c", av_s("{\"an older shape\": true"))
        .expression_attribute_values(":v", aws_sdk_dynamodb::types::AttributeValue::N("0".into()))
        .send()
        .await
        .unwrap();
    assert!(contexts.get(REPO).await.unwrap().is_none(), "unreadable");
    enrich.refresh_context(&repo(), later, within(10)).await;
    let replaced = contexts.get(REPO).await.unwrap().expect("replaced");
    assert_eq!(replaced.packages, stored.packages);

    // A refresh that fails is not tried again by the same process for ten minutes.
    stub.fail_next("/repos/acme/monorepo/contents/.github", Fault::ServerError);
    stub.fail_next("/repos/acme/monorepo/contents/.github", Fault::ServerError);
    let much_later = later + time::Duration::days(2);
    let before = stub.request_count();
    other.refresh_context(&repo(), much_later, within(10)).await;
    let failed_at = stub.request_count();
    assert!(failed_at > before);
    other.refresh_context(&repo(), much_later, within(10)).await;
    assert_eq!(stub.request_count(), failed_at, "not retried at once");

    // No token: no context, quietly.
    let disabled = EnrichHandler::new(t.prs.clone(), None::<stages::enrich::GitHubAccess>, 4, 500)
        .with_contexts(ContextStore::new(
            aws_sdk_dynamodb::Client::new(&sdk),
            "no-such-table",
        ));
    disabled.refresh_context(&repo(), later, within(10)).await;
}

/// What backfill calls before its first page: stored once, then fresh; a concurrent store
/// first is reported as such.
#[tokio::test]
async fn backfill_stores_the_context_before_importing() {
    use stages::enrich::{refresh_repo_context, ContextRefresh};
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let stub = monorepo().await;
    let contexts = t.pages.contexts();
    let now = OffsetDateTime::now_utc();
    let first = refresh_repo_context(&contexts, &client(&stub), &repo(), now, within(10))
        .await
        .unwrap();
    assert_eq!(
        first,
        ContextRefresh::Stored {
            packages: 5,
            codeowners: Some(".github/CODEOWNERS".into())
        }
    );
    let again = refresh_repo_context(&contexts, &client(&stub), &repo(), now, within(10))
        .await
        .unwrap();
    assert_eq!(again, ContextRefresh::Fresh);
    // A stale one replaced by another writer between this one's read and its write.
    let later = now + time::Duration::hours(30);
    let stored = contexts.get(REPO).await.unwrap().unwrap();
    let mut other = stored.clone();
    other.checked_at = stages::domain::rfc3339_seconds(later);
    let (github, r) = (client(&stub), repo());
    let (a, b) = tokio::join!(
        refresh_repo_context(&contexts, &github, &r, later, within(10)),
        async {
            // Lands while the first is fetching (it read the old checkedAt already).
            tokio::time::sleep(Duration::from_millis(5)).await;
            contexts
                .put(REPO, &other, Some(&stored.checked_at))
                .await
                .unwrap()
        }
    );
    match a.unwrap() {
        ContextRefresh::StoredByAnother => assert!(b),
        ContextRefresh::Stored { .. } => assert!(!b, "exactly one of the two stored"),
        ContextRefresh::Fresh => panic!("the stored context was stale"),
    }
}

/// Review defect 3: a context refresh that changes the repository's layout (here, CODEOWNERS)
/// marks the index stale with the change; the index build marks every module page stale, so
/// pages show the new owners without waiting for a new PR.
#[tokio::test]
async fn a_changed_layout_marks_the_repository_module_pages_for_a_rebuild() {
    use stages::enrich::refresh_repo_context;
    let t = fresh_tables(&sdk().await).await;
    let stub = monorepo().await;
    let contexts = t.pages.contexts();
    let now = OffsetDateTime::now_utc();
    refresh_repo_context(&contexts, &client(&stub), &repo(), now, within(10))
        .await
        .unwrap();
    // Two module pages, built.
    for (module, dir, number) in [("acme-api", "crates/api", 1), ("acme-web", "crates/web", 2)] {
        t.put_entry(&stages::domain::ModuleEntry {
            repo: REPO.into(),
            module: module.into(),
            number,
            title: format!("Change {number}"),
            url: format!("https://github.com/{REPO}/pull/{number}"),
            author: "dev".into(),
            merged_at: "2024-06-01T10:00:00Z".into(),
            kind: Some("feat".into()),
            breaking: false,
            labels: vec![],
            summary: "Why.".into(),
            linked_issues: vec![],
            additions: 10,
            deletions: 1,
            files: vec![stages::domain::FileChange {
                path: format!("{dir}/src/lib.rs"),
                additions: 10,
                deletions: 1,
                status: None,
            }],
            files_here: 1,
            lines_here: 0,
            elsewhere: vec![],
            files_elsewhere: 0,
            why: None,
            reviewers: vec![],
            discussion: 0,
        })
        .await;
    }
    let dir = std::env::temp_dir().join(format!("chronicle-layout-{}", uuid::Uuid::new_v4()));
    let b = t.builder(
        Arc::new(stages::publish::MarkdownPublisher::new(&dir)),
        stages::tagging::ModulesConfig::empty(),
        Duration::ZERO,
    );
    for _ in 0..2 {
        b.tick(OffsetDateTime::now_utc(), within(30), "tick")
            .await
            .unwrap();
    }
    assert!(t.pages.stale_pages().await.unwrap().is_empty());
    // The same context a day later: nothing marked.
    let later = now + time::Duration::hours(25);
    refresh_repo_context(&contexts, &client(&stub), &repo(), later, within(10))
        .await
        .unwrap();
    assert!(t.pages.stale_pages().await.unwrap().is_empty());
    // CODEOWNERS changes: the index is marked, and its build marks the module pages.
    stub.add_file(REPO, ".github/CODEOWNERS", "/crates/api/ @acme/api-team\n");
    let much_later = later + time::Duration::hours(25);
    refresh_repo_context(&contexts, &client(&stub), &repo(), much_later, within(10))
        .await
        .unwrap();
    let index = t
        .pages
        .get(REPO, stages::store::INDEX_MODULE)
        .await
        .unwrap()
        .unwrap();
    assert!(
        index.layout_changed_at.is_some() && index.stale.is_some(),
        "{index:?}"
    );
    b.tick(OffsetDateTime::now_utc(), within(30), "tick")
        .await
        .unwrap();
    let stale: Vec<String> = t
        .pages
        .stale_pages()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.module)
        .collect();
    assert_eq!(
        stale,
        ["acme-api", "acme-web"],
        "every module page is rebuilt"
    );
    let index = t
        .pages
        .get(REPO, stages::store::INDEX_MODULE)
        .await
        .unwrap()
        .unwrap();
    assert!(index.layout_changed_at.is_none(), "passed on once");
    b.tick(OffsetDateTime::now_utc(), within(30), "tick")
        .await
        .unwrap();
    let api = std::fs::read_to_string(dir.join("acme/monorepo/acme-api.md")).unwrap();
    assert!(api.contains("@acme/api-team"), "{api}");

    // The team adds `.github/chronicle.yml`: the next refresh marks the pages, and the module
    // page shows its notes, as text, and its description, linked to the file.
    stub.add_file(
        REPO,
        ".github/chronicle.yml",
        "modules:\n  acme-api:\n    paths: [\"crates/api/**\"]\n    description: The HTTP API of record.\n    notes: Ask the API team before changing *routes*.\n  acme-web: [\"crates/web/**\"]\n",
    );
    let next_day = much_later + time::Duration::hours(25);
    refresh_repo_context(&contexts, &client(&stub), &repo(), next_day, within(10))
        .await
        .unwrap();
    for _ in 0..2 {
        b.tick(OffsetDateTime::now_utc(), within(30), "tick")
            .await
            .unwrap();
    }
    let api = std::fs::read_to_string(dir.join("acme/monorepo/acme-api.md")).unwrap();
    assert!(
        api.contains("**From the team:** Ask the API team before changing \\*routes\\*."),
        "{api}"
    );
    assert!(
        api.contains("**What it is:** The HTTP API of record ([`.github/chronicle.yml`]"),
        "{api}"
    );

    // An invalid file: the central config is kept (logged), the pages build as before.
    stub.add_file(
        REPO,
        ".github/chronicle.yml",
        "modules:\n  acme-api: [\"\"]\n",
    );
    refresh_repo_context(
        &contexts,
        &client(&stub),
        &repo(),
        next_day + time::Duration::hours(25),
        within(10),
    )
    .await
    .unwrap();
    for _ in 0..2 {
        b.tick(OffsetDateTime::now_utc(), within(30), "tick")
            .await
            .unwrap();
    }
    let api = std::fs::read_to_string(dir.join("acme/monorepo/acme-api.md")).unwrap();
    assert!(!api.contains("From the team"), "{api}");
    assert!(api.contains("The public HTTP API"), "{api}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A hostile root manifest: about 18,000 literal members just under the 256 KB read cap, a
/// member that leaves its directory (`crates/../x`) and one whose manifest GitHub refuses. The
/// refresh stays linear (the globs are compiled once, the patterns capped), reads the real
/// packages, skips what it cannot read, and finishes well inside its deadline.
#[tokio::test]
async fn a_huge_or_hostile_manifest_neither_stalls_nor_aborts_the_refresh() {
    let stub = GitHubStandIn::start(TOKEN).await.unwrap();
    let mut members: Vec<String> = (0..18_000).map(|i| format!("c/mod{i}")).collect();
    members.insert(0, "crates/*".into());
    members.insert(1, "crates/../x".into());
    members.insert(2, "./crates/./api/".into());
    let manifest = format!(
        "[workspace]\nmembers = [{}]\n",
        members
            .iter()
            .map(|m| format!("\"{m}\""))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert!(
        manifest.len() > 200 * 1024 && manifest.len() < 256 * 1024,
        "{} bytes",
        manifest.len()
    );
    stub.add_file(REPO, "Cargo.toml", &manifest);
    stub.add_file(
        REPO,
        "crates/api/Cargo.toml",
        "[package]\nname = \"acme-api\"\n",
    );
    stub.add_file(
        REPO,
        "crates/web/Cargo.toml",
        "[package]\nname = \"acme-web\"\n",
    );
    stub.add_file(REPO, "c/mod1/Cargo.toml", "[package]\nname = \"x-one\"\n");
    // One member's manifest is not JSON/TOML GitHub would serve: that member is skipped.
    stub.add_file(REPO, "c/mod2/Cargo.toml", "[package]\nname = \"x-two\"\n");
    stub.fail_next(
        "/repos/acme/monorepo/contents/c/mod2/Cargo.toml",
        Fault::Forbidden,
    );
    let github = client(&stub);
    // A 403 may be the token's: the refresh stops, and the caller keeps its previous context,
    // rather than store one with packages missing.
    let err = refresh(
        &github,
        &repo(),
        None,
        OffsetDateTime::now_utc(),
        within(60),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
    let before = stub.request_count();
    let started = std::time::Instant::now();
    let context = refresh(
        &github,
        &repo(),
        None,
        OffsetDateTime::now_utc(),
        within(60),
    )
    .await
    .expect("the refresh finishes");
    let took = started.elapsed();
    let found = names(&context);
    assert!(found.contains(&("acme-api", "crates/api")), "{found:?}");
    assert!(found.contains(&("acme-web", "crates/web")), "{found:?}");
    assert!(found.contains(&("x-one", "c/mod1")), "{found:?}");
    assert!(
        found.iter().any(|(n, _)| *n == "x-two"),
        "asked again, it is read: {found:?}"
    );
    assert!(
        stub.requests()
            .iter()
            .all(|r| !r.path.contains("..") && !r.path.contains("/./")),
        "no request for a path that leaves its directory"
    );
    // Capped: the root, three CODEOWNERS, four manifests, one listing, at most 300 member
    // manifests and their READMEs.
    let asked = stub.request_count() - before;
    assert!(asked <= 3 + 1 + 4 + 1 + 2 * 300, "{asked}");
    eprintln!("hostile manifest: refresh took {took:?}, {asked} requests");
}
