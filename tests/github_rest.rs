//! Self-tests of the GitHub stand-in's REST half (`standins::github_standin::rest`), with a plain
//! reqwest client:
//! that it refuses what GitHub refuses (and more), paginates like GitHub and plays its faults.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde_json::Value;
use standins::github_standin::rest::*;
use standins::github_standin::GitHubStandIn;

const TOKEN: &str = "ghp_stubtoken";
const REPO: &str = "octo/chronicle";

fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// A request as a well-behaved client sends it.
fn get(stub: &GitHubStandIn, path_and_query: &str) -> RequestBuilder {
    get_url(&format!("{}{path_and_query}", stub.url()))
}

fn get_url(url: &str) -> RequestBuilder {
    client()
        .get(url)
        .header("user-agent", "chronicle-tests")
        .header("accept", "application/vnd.github+json")
        .header("x-github-api-version", "2022-11-28")
        .bearer_auth(TOKEN)
}

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

/// `rel` → URL, from a `Link` header.
fn links(r: &Response) -> HashMap<String, String> {
    let Some(link) = header(r, "link") else {
        return HashMap::new();
    };
    link.split(", ")
        .map(|part| {
            let (url, rel) = part.split_once("; ").unwrap();
            let url = url.strip_prefix('<').unwrap().strip_suffix('>').unwrap();
            let rel = rel
                .strip_prefix("rel=\"")
                .unwrap()
                .strip_suffix('"')
                .unwrap();
            (rel.to_string(), url.to_string())
        })
        .collect()
}

async fn status_and_json(r: Response) -> (StatusCode, Value) {
    let status = r.status();
    (status, r.json().await.unwrap())
}

fn assert_common_headers(r: &Response) {
    assert_eq!(
        header(r, "content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(
        header(r, "x-github-api-version-selected"),
        Some("2022-11-28")
    );
    assert_eq!(header(r, "x-ratelimit-limit"), Some("5000"));
    assert!(header(r, "x-ratelimit-remaining")
        .unwrap()
        .parse::<u64>()
        .is_ok());
    assert!(header(r, "x-ratelimit-reset")
        .unwrap()
        .parse::<u64>()
        .is_ok());
}

async fn stub_with_pull(files: usize) -> GitHubStandIn {
    let stub = GitHubStandIn::start(TOKEN).await.unwrap();
    stub.add_pull(REPO, 7, PullSpec::with_files(files));
    stub
}

#[tokio::test]
async fn pull_is_the_fixture_with_the_spec_values() {
    let stub = GitHubStandIn::start(TOKEN).await.unwrap();
    let spec = PullSpec {
        title: "Add the enrich stage".into(),
        body: Some("Fixes #12".into()),
        files: vec![
            FileSpec {
                filename: "shared/src/github.rs".into(),
                status: "added".into(),
                additions: 200,
                deletions: 0,
            },
            FileSpec {
                filename: "README.md".into(),
                status: "modified".into(),
                additions: 3,
                deletions: 1,
            },
        ],
        commits: 4,
    };
    stub.add_pull(REPO, 42, spec);
    let r = get(&stub, "/repos/octo/chronicle/pulls/42")
        .send()
        .await
        .unwrap();
    assert_common_headers(&r);
    let (status, pr) = status_and_json(r).await;
    assert_eq!(status, 200);
    assert_eq!(pr["number"], 42);
    assert_eq!(pr["title"], "Add the enrich stage");
    assert_eq!(pr["body"], "Fixes #12");
    assert_eq!(pr["commits"], 4);
    assert_eq!(pr["additions"], 203);
    assert_eq!(pr["deletions"], 1);
    assert_eq!(pr["changed_files"], 2);
    assert_eq!(pr["html_url"], "https://github.com/octo/chronicle/pull/42");
    assert_eq!(pr["base"]["repo"]["full_name"], REPO);
    // The rest is the recorded response.
    assert_eq!(pr["user"]["login"], "octocat");
    assert_eq!(pr["labels"][0]["name"], "bug");

    let (status, files) = status_and_json(
        get(&stub, "/repos/octo/chronicle/pulls/42/files")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    let files = files.as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["filename"], "shared/src/github.rs");
    assert_eq!(files[0]["status"], "added");
    assert_eq!(files[0]["changes"], 200);
    assert_eq!(files[1]["changes"], 4);
    for key in ["sha", "blob_url", "raw_url", "contents_url", "patch"] {
        assert!(files[0][key].is_string(), "{key} in {:?}", files[0]);
    }
    assert_eq!(files[0]["sha"].as_str().unwrap().len(), 40);

    let (status, commits) = status_and_json(
        get(&stub, "/repos/octo/chronicle/pulls/42/commits")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(commits.as_array().unwrap().len(), 4);
    stub.stop().await;
}

#[tokio::test]
async fn refuses_missing_or_wrong_credentials_user_agent_and_version() {
    let stub = stub_with_pull(1).await;
    let url = format!("{}/repos/octo/chronicle/pulls/7", stub.url());
    let base = || {
        client()
            .get(&url)
            .header("user-agent", "chronicle-tests")
            .header("x-github-api-version", "2022-11-28")
    };

    for (what, request) in [
        ("no token", base()),
        ("wrong token", base().bearer_auth("ghp_other")),
        (
            "wrong scheme",
            base().header("authorization", format!("Basic {TOKEN}")),
        ),
        (
            "token with a suffix",
            base().bearer_auth(format!("{TOKEN}x")),
        ),
    ] {
        let r = request.send().await.unwrap();
        assert_common_headers(&r);
        let (status, body) = status_and_json(r).await;
        assert_eq!(status, 401, "{what}");
        assert!(body["message"].is_string(), "{what}: {body}");
    }
    let (status, body) = status_and_json(base().bearer_auth("nope").send().await.unwrap()).await;
    assert_eq!(status, 401);
    assert_eq!(body["message"], "Bad credentials");
    assert_eq!(body["status"], "401");

    // Both schemes GitHub accepts.
    for auth in [format!("Bearer {TOKEN}"), format!("token {TOKEN}")] {
        let r = base().header("authorization", auth).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }

    let no_ua = client()
        .get(&url)
        .bearer_auth(TOKEN)
        .header("x-github-api-version", "2022-11-28")
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(no_ua).await;
    assert_eq!(status, 403);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("User-Agent header"));

    for version in [None, Some("2021-01-01"), Some("v3")] {
        let mut request = client()
            .get(&url)
            .bearer_auth(TOKEN)
            .header("user-agent", "chronicle-tests");
        if let Some(v) = version {
            request = request.header("x-github-api-version", v);
        }
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), 400, "version {version:?}");
    }

    // Every refusal was recorded, with its headers.
    let requests = stub.requests();
    assert_eq!(requests.len(), 5 + 2 + 1 + 3);
    assert!(requests[0].headers.get("authorization").is_none());
    assert_eq!(
        requests[1].headers.get("authorization").unwrap(),
        "Bearer ghp_other"
    );
    assert!(requests
        .iter()
        .all(|r| r.method == "GET" && r.path == "/repos/octo/chronicle/pulls/7"));
    stub.stop().await;
}

#[tokio::test]
async fn unknown_routes_unregistered_resources_and_other_methods() {
    let stub = stub_with_pull(1).await;
    stub.add_issue(REPO, 12, "Enrichment is slow", "closed");
    for path in [
        "/repos/octo/chronicle/pulls/8",
        "/repos/octo/chronicle/pulls/8/files",
        "/repos/octo/other/pulls/7",
        "/repos/Octo/Chronicle/pulls/7",
        "/repos/octo/chronicle/pulls/7/",
        "/repos/octo/chronicle/pulls/x7",
        "/repos/octo/chronicle/pulls/+7",
        "/repos/octo/chronicle/issues/13",
        "/repos/octo/chronicle/issues/12/comments",
        "/repos/octo/chronicle",
        "/",
    ] {
        let r = get(&stub, path).send().await.unwrap();
        assert_common_headers(&r);
        let (status, body) = status_and_json(r).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(body["message"], "Not Found", "{path}");
    }
    let (status, issue) = status_and_json(
        get(&stub, "/repos/octo/chronicle/issues/12")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(issue["number"], 12);
    assert_eq!(issue["title"], "Enrichment is slow");
    assert_eq!(issue["state"], "closed");
    assert_eq!(
        issue["html_url"],
        "https://github.com/octo/chronicle/issues/12"
    );

    let post = client()
        .post(format!("{}/repos/octo/chronicle/pulls/7", stub.url()))
        .header("user-agent", "chronicle-tests")
        .header("x-github-api-version", "2022-11-28")
        .bearer_auth(TOKEN)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    assert_eq!(stub.requests().last().unwrap().method, "POST");
    stub.stop().await;
}

#[tokio::test]
async fn two_hundred_fifty_files_come_in_three_pages_of_one_hundred() {
    let stub = stub_with_pull(250).await;
    let mut url = format!(
        "{}/repos/octo/chronicle/pulls/7/files?per_page=100",
        stub.url()
    );
    let mut pages = Vec::new();
    let mut names = Vec::new();
    loop {
        let r = get_url(&url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let links = links(&r);
        let files: Vec<Value> = r.json().await.unwrap();
        names.extend(
            files
                .iter()
                .map(|f| f["filename"].as_str().unwrap().to_string()),
        );
        pages.push((files.len(), links.clone()));
        match links.get("next") {
            Some(next) => url = next.clone(),
            None => break,
        }
    }
    let base = format!("{}/repos/octo/chronicle/pulls/7/files", stub.url());
    assert_eq!(pages.len(), 3);
    assert_eq!(
        pages.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        vec![100, 100, 50]
    );
    let first = &pages[0].1;
    assert_eq!(first["next"], format!("{base}?per_page=100&page=2"));
    assert_eq!(first["last"], format!("{base}?per_page=100&page=3"));
    assert!(!first.contains_key("prev") && !first.contains_key("first"));
    let middle = &pages[1].1;
    assert_eq!(middle["prev"], format!("{base}?per_page=100&page=1"));
    assert_eq!(middle["next"], format!("{base}?per_page=100&page=3"));
    assert_eq!(middle["first"], format!("{base}?per_page=100&page=1"));
    let last = &pages[2].1;
    assert!(!last.contains_key("next"), "{last:?}");
    assert!(!last.contains_key("last"), "{last:?}");
    assert_eq!(last["prev"], format!("{base}?per_page=100&page=2"));
    assert_eq!(last["first"], format!("{base}?per_page=100&page=1"));

    let expected: Vec<String> = PullSpec::with_files(250)
        .files
        .into_iter()
        .map(|f| f.filename)
        .collect();
    assert_eq!(names, expected, "every file once, in order");
    assert_eq!(names[0], "src/mod0/file0.rs");
    assert_eq!(names[249], "src/mod4/file249.rs");

    // Without per_page: GitHub's 30 a page, and links that carry only the page.
    let r = get(&stub, "/repos/octo/chronicle/pulls/7/files")
        .send()
        .await
        .unwrap();
    let default_links = links(&r);
    assert_eq!(default_links["next"], format!("{base}?page=2"));
    assert_eq!(default_links["last"], format!("{base}?page=9"));
    assert_eq!(r.json::<Vec<Value>>().await.unwrap().len(), 30);

    // Past the end: an empty page.
    let r = get(
        &stub,
        "/repos/octo/chronicle/pulls/7/files?per_page=100&page=4",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert!(!links(&r).contains_key("next"));
    assert!(r.json::<Vec<Value>>().await.unwrap().is_empty());

    assert_eq!(
        stub.count_matching("/repos/octo/chronicle/pulls/7/files"),
        5
    );
    stub.stop().await;
}

#[tokio::test]
async fn at_most_three_thousand_files_are_listed() {
    let stub = stub_with_pull(3500).await;
    let (_, pr) = status_and_json(
        get(&stub, "/repos/octo/chronicle/pulls/7")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        pr["changed_files"], 3500,
        "the PR itself tells the true count"
    );

    let mut url = format!(
        "{}/repos/octo/chronicle/pulls/7/files?per_page=100",
        stub.url()
    );
    let (mut pages, mut files) = (0, 0);
    loop {
        let r = get_url(&url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let links = links(&r);
        if pages == 0 {
            assert!(links["last"].ends_with("&page=30"), "{links:?}");
        }
        files += r.json::<Vec<Value>>().await.unwrap().len();
        pages += 1;
        match links.get("next") {
            Some(next) => url = next.clone(),
            None => break,
        }
        assert!(pages <= 40, "runaway pagination");
    }
    assert_eq!((pages, files), (30, 3000));
    let r = get(
        &stub,
        "/repos/octo/chronicle/pulls/7/files?per_page=100&page=31",
    )
    .send()
    .await
    .unwrap();
    assert!(r.json::<Vec<Value>>().await.unwrap().is_empty());
    stub.stop().await;
}

#[tokio::test]
async fn invalid_pagination_parameters_are_422() {
    let stub = stub_with_pull(5).await;
    for query in [
        "per_page=101",
        "per_page=0",
        "per_page=-1",
        "per_page=abc",
        "per_page=",
        "per_page=+5",
        "per_page=1.5",
        "page=0",
        "page=x",
        "per_page=10&per_page=20",
        "per_page=100&sort=desc",
    ] {
        let r = get(
            &stub,
            &format!("/repos/octo/chronicle/pulls/7/files?{query}"),
        )
        .send()
        .await
        .unwrap();
        assert_common_headers(&r);
        let (status, body) = status_and_json(r).await;
        assert_eq!(status, 422, "{query}");
        assert_eq!(body["message"], "Validation Failed", "{query}");
    }
    // A single resource takes no parameters.
    let r = get(&stub, "/repos/octo/chronicle/pulls/7?per_page=100")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let r = get(
        &stub,
        "/repos/octo/chronicle/pulls/7/files?per_page=100&page=1",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let recorded = stub.requests();
    assert_eq!(recorded[0].query.as_deref(), Some("per_page=101"));
    assert_eq!(
        recorded.last().unwrap().query.as_deref(),
        Some("per_page=100&page=1")
    );
    stub.stop().await;
}

#[tokio::test]
async fn too_many_requests_then_the_retry_after_window_is_enforced() {
    let stub = stub_with_pull(1).await;
    stub.fail_next(
        "/repos/octo/chronicle/pulls/7/files",
        Fault::TooManyRequests {
            retry_after_secs: 1,
        },
    );
    // Another path does not consume it.
    assert_eq!(
        get(&stub, "/repos/octo/chronicle/pulls/7")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(stub.pending_faults(), 1);
    let r = get(&stub, "/repos/octo/chronicle/pulls/7/files")
        .send()
        .await
        .unwrap();
    let at = Instant::now();
    assert_common_headers(&r);
    assert_eq!(header(&r, "retry-after"), Some("1"));
    assert_ne!(header(&r, "x-ratelimit-remaining"), Some("0"));
    let (status, body) = status_and_json(r).await;
    assert_eq!(status, 429);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("secondary rate limit"));
    assert_eq!(stub.pending_faults(), 0);

    // Too early: refused again, on any path.
    let r = get(&stub, "/repos/octo/chronicle/pulls/7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "retry-after"), Some("1"));

    tokio::time::sleep(Duration::from_secs(1).saturating_sub(at.elapsed())).await;
    let r = get(&stub, "/repos/octo/chronicle/pulls/7/files")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(stub.request_count(), 4);
    stub.stop().await;
}

#[tokio::test]
async fn rate_limit_exhausted_until_the_reset_epoch() {
    let stub = stub_with_pull(1).await;
    stub.fail_next("/", Fault::RateLimitExhausted { reset_in_secs: 1 });
    let r = get(&stub, "/repos/octo/chronicle/pulls/7")
        .send()
        .await
        .unwrap();
    assert_common_headers(&r);
    assert_eq!(header(&r, "x-ratelimit-remaining"), Some("0"));
    let reset: u64 = header(&r, "x-ratelimit-reset").unwrap().parse().unwrap();
    let (status, body) = status_and_json(r).await;
    assert_eq!(status, 403);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .starts_with("API rate limit exceeded"));

    // Waiting until the reset second, as the header says, is enough (and is needed).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let wait = Duration::from_secs(reset).saturating_sub(now);
    assert!(wait <= Duration::from_secs(1), "{wait:?}");
    if wait > Duration::from_millis(50) {
        let r = get(&stub, "/repos/octo/chronicle/pulls/7")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "retried before the reset");
    }
    tokio::time::sleep(wait).await;
    let r = get(&stub, "/repos/octo/chronicle/pulls/7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_ne!(header(&r, "x-ratelimit-remaining"), Some("0"));

    // lift_rate_limit ends a window at once.
    stub.fail_next(
        "/",
        Fault::RateLimitExhausted {
            reset_in_secs: 3600,
        },
    );
    assert_eq!(
        get(&stub, "/repos/octo/chronicle/pulls/7")
            .send()
            .await
            .unwrap()
            .status(),
        403
    );
    stub.lift_rate_limit();
    assert_eq!(
        get(&stub, "/repos/octo/chronicle/pulls/7")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    stub.stop().await;
}

#[tokio::test]
async fn server_errors_not_found_and_gone_are_consumed_in_order() {
    let stub = stub_with_pull(1).await;
    let path = "/repos/octo/chronicle/pulls/7";
    stub.fail_next(path, Fault::ServerError);
    stub.fail_next(path, Fault::BadGateway);
    stub.fail_next(path, Fault::NotFound);
    stub.fail_next(path, Fault::Gone);
    let mut seen = Vec::new();
    for _ in 0..5 {
        let r = get(&stub, path).send().await.unwrap();
        assert_common_headers(&r);
        let (status, body) = status_and_json(r).await;
        seen.push((
            status.as_u16(),
            body["message"].as_str().unwrap_or("").to_string(),
        ));
    }
    assert_eq!(seen[0], (500, "Server Error".to_string()));
    assert_eq!(seen[1].0, 502);
    assert_eq!(seen[2], (404, "Not Found".to_string()));
    assert_eq!(seen[3].0, 410);
    assert_eq!(seen[4], (200, String::new()));
    assert_eq!(stub.count_matching(path), 5);
    assert_eq!(stub.served_count(), 1);
    stub.stop().await;
}

#[tokio::test]
async fn hang_outlasts_the_client_timeout_then_answers_504() {
    let stub = stub_with_pull(1).await;
    let path = "/repos/octo/chronicle/pulls/7/files";
    stub.fail_next(path, Fault::Hang(Duration::from_millis(1500)));
    stub.fail_next(path, Fault::Hang(Duration::from_millis(200)));

    let started = Instant::now();
    let err = get(&stub, path)
        .timeout(Duration::from_millis(300))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(1400));

    // A patient client gets GitHub's timeout answer.
    let r = get(&stub, path).send().await.unwrap();
    assert_eq!(r.status(), 504);
    assert_common_headers(&r);

    let r = get(&stub, path).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(stub.count_matching(path), 3);
    stub.stop().await;
}

#[tokio::test]
async fn requests_are_counted_and_the_rate_limit_counts_down() {
    let stub = stub_with_pull(1).await;
    stub.add_issue("octo/other", 3, "Elsewhere", "open");
    let mut remaining = Vec::new();
    for path in [
        "/repos/octo/chronicle/pulls/7",
        "/repos/octo/chronicle/pulls/7/files",
        "/repos/octo/other/issues/3",
        "/repos/octo/other/issues/4",
    ] {
        let r = get(&stub, path).send().await.unwrap();
        remaining.push(
            header(&r, "x-ratelimit-remaining")
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        );
    }
    assert_eq!(remaining, vec![4999, 4998, 4997, 4996]);
    assert_eq!(stub.request_count(), 4);
    assert_eq!(stub.count_matching("/repos/octo/chronicle/"), 2);
    assert_eq!(stub.count_matching("/repos/octo/chronicle/pulls/7"), 2);
    assert_eq!(
        stub.count_matching("/repos/octo/chronicle/pulls/7/files"),
        1
    );
    assert_eq!(stub.count_matching("/repos/octo/other/issues/"), 2);
    assert_eq!(stub.count_matching("/"), 4);
    assert_eq!(stub.served_count(), 3);
    let recorded = stub.requests();
    assert_eq!(recorded[2].path, "/repos/octo/other/issues/3");
    assert_eq!(recorded[2].query, None);
    assert_eq!(
        recorded[2].headers.get("user-agent").unwrap(),
        "chronicle-tests"
    );

    // Clones share the state; stop ends the server.
    let clone = stub.clone();
    let url = stub.url();
    assert!(url.starts_with("http://127.0.0.1:") && !url.ends_with('/'));
    stub.stop().await;
    assert_eq!(clone.request_count(), 4);
    assert!(get_url(&format!("{url}/repos/octo/chronicle/pulls/7"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .is_err());
}

#[tokio::test]
async fn prefixes_match_whole_path_segments() {
    let stub = GitHubStandIn::start(TOKEN).await.unwrap();
    stub.add_pull(REPO, 2, PullSpec::with_files(1));
    stub.add_pull(REPO, 20, PullSpec::with_files(1));
    stub.fail_next("/repos/octo/chronicle/pulls/2", Fault::ServerError);
    // pulls/20 is not under pulls/2: it is served and leaves the fault pending.
    let r = get(&stub, "/repos/octo/chronicle/pulls/20")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(stub.pending_faults(), 1);
    // pulls/2/files is.
    let r = get(&stub, "/repos/octo/chronicle/pulls/2/files")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    assert_eq!(stub.pending_faults(), 0);
    assert_eq!(stub.count_matching("/repos/octo/chronicle/pulls/2"), 1);
    assert_eq!(stub.count_matching("/repos/octo/chronicle/pulls/20"), 1);
    assert_eq!(stub.count_matching("/repos/octo/chronicle/pulls/"), 2);
    assert_eq!(stub.count_matching("/repos/octo/chronicle/pulls"), 2);
    assert_eq!(stub.count_matching("/repos/octo/chronicle/pull"), 0);
    stub.stop().await;
}

/// Tasks that find no installation token wait for the one being minted: eight at once mint one.
/// A token reads only its installation's repositories; once expired it is refused with 401 and
/// the client mints another and asks again.
#[tokio::test]
async fn an_installation_token_is_minted_once_scoped_and_renewed_on_401() {
    use std::sync::Arc;
    let key = |name: &str| {
        std::fs::read_to_string(
            devstack::emulator::repo_root()
                .join("tests/fixtures/github")
                .join(name),
        )
        .unwrap()
    };
    let stub = standins::github_standin::GitHubStandIn::start("ghp_owner")
        .await
        .unwrap();
    stub.add_app_hook("9", &key("app-test-key.pub.pem"), 1, None);
    stub.add_installation(
        5,
        "acme",
        vec![standins::github_standin::InstalledSpec {
            full_name: "acme/api".into(),
            archived: false,
            empty: false,
        }],
    );
    stub.add_file("acme/api", "README.md", "# api\n");
    stub.add_file("acme/other", "README.md", "# other\n");
    let app = Arc::new(
        stages::github::installation::AppClient::new(
            stub.url(),
            stages::github::app::AppCredentials::new(
                "9",
                &stages::secret::Secret::new(key("app-test-key.pem")),
            )
            .unwrap(),
            std::time::Duration::from_secs(10),
        )
        .unwrap(),
    );
    let tokens = futures::future::join_all((0..8).map(|_| app.token(5))).await;
    let first = tokens[0].as_ref().unwrap().expose().to_string();
    assert!(tokens.iter().all(|t| t.as_ref().unwrap().expose() == first));
    assert_eq!(stub.installation_tokens_minted(), 1);
    assert!(!format!("{app:?}").contains(&first), "never in Debug");

    let rest = stages::github::GitHubClient::with_auth(
        stub.url(),
        stages::github::installation::Auth::Installation {
            app: app.clone(),
            id: 5,
        },
        std::time::Duration::from_secs(10),
        1,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let readme = |repo: &str| {
        let repo = stages::domain::RepoName::parse(repo).unwrap();
        let rest = &rest;
        async move { rest.file(&repo, "README.md", None, 1 << 16, deadline).await }
    };
    assert!(matches!(
        readme("acme/api").await.unwrap(),
        stages::github::Conditional::Found { .. }
    ));
    // Another installation's repository: not found for this token.
    assert!(matches!(
        readme("acme/other").await,
        Ok(stages::github::Conditional::Missing)
    ));
    // Expired: refused with 401, minted again, asked again.
    stub.expire_installation_tokens();
    assert!(matches!(
        readme("acme/api").await.unwrap(),
        stages::github::Conditional::Found { .. }
    ));
    assert_eq!(stub.installation_tokens_minted(), 2);
    assert_eq!(app.health()[0].refreshed_on_401, 1);
}

/// The App's own routes as GitHub serves them: `GET /installation/repositories` a page of 100
/// at a time (the client reads until `total_count`), and every route that takes the App's JWT
/// refusing another App's (401): `/repos/{o}/{r}/installation`, `/orgs/{org}/installation`,
/// `/users/{username}/installation` and the token mint. An organisation's installation is
/// found at `/orgs/` only, a user's at `/users/` only.
#[tokio::test]
async fn an_installations_repositories_are_paged_and_another_apps_jwt_is_refused() {
    let key = |name: &str| {
        std::fs::read_to_string(
            devstack::emulator::repo_root()
                .join("tests/fixtures/github")
                .join(name),
        )
        .unwrap()
    };
    let stub = standins::github_standin::GitHubStandIn::start("ghp_owner")
        .await
        .unwrap();
    stub.add_app_hook("9", &key("app-test-key.pub.pem"), 1, None);
    let repos: Vec<_> = (0..150)
        .map(|i| standins::github_standin::InstalledSpec {
            full_name: format!("acme/repo-{i:03}"),
            archived: i % 50 == 7,
            empty: false,
        })
        .collect();
    stub.add_installation(5, "acme", repos);
    stub.add_user_installation(6, "octocat", vec![]);
    let client = |app_id: &str| {
        stages::github::installation::AppClient::new(
            stub.url(),
            stages::github::app::AppCredentials::new(
                app_id,
                &stages::secret::Secret::new(key("app-test-key.pem")),
            )
            .unwrap(),
            std::time::Duration::from_secs(10),
        )
        .unwrap()
    };
    let app = client("9");
    let listed = app.repositories(5).await.unwrap();
    assert_eq!(listed.len(), 150);
    assert_eq!(listed[149].full_name, "acme/repo-149");
    assert_eq!(listed.iter().filter(|r| r.archived).count(), 3);
    assert_eq!(
        stub.count_matching("/installation/repositories"),
        2,
        "two pages"
    );
    let first = stub
        .requests()
        .into_iter()
        .find(|r| r.path == "/installation/repositories")
        .unwrap();
    assert!(
        first
            .query
            .as_deref()
            .is_some_and(|q| q.contains("per_page=100")),
        "{first:?}"
    );
    assert_eq!(app.installation_of("acme/repo-001").await.unwrap(), 5);
    assert_eq!(app.org_installation("acme").await.unwrap(), 5);
    assert_eq!(app.user_installation("octocat").await.unwrap(), 6);
    for wrong_route in [
        app.org_installation("octocat").await,
        app.user_installation("acme").await,
    ] {
        assert!(
            matches!(
                wrong_route,
                Err(stages::github::installation::InstallationError::NotInstalled(_))
            ),
            "{wrong_route:?}"
        );
    }
    assert!(matches!(
        app.installation_of("acme/elsewhere").await,
        Err(stages::github::installation::InstallationError::NotInstalled(_))
    ));

    // Another App's JWT (signed with a key GitHub does not hold for it).
    let other = client("1");
    let refused = stages::github::installation::InstallationError::Refused { status: 401 };
    for result in [
        other.installation_of("acme/repo-001").await.map(drop),
        other.org_installation("acme").await.map(drop),
        other.user_installation("octocat").await.map(drop),
        other.token(5).await.map(drop),
    ] {
        assert_eq!(result.map_err(|e| e.to_string()), Err(refused.to_string()));
    }
}
