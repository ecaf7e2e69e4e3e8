//! Self-tests of the Notion stand-in (`support::notion_stub`), with a plain reqwest client: that
//! it refuses what Notion refuses (and more), so a publisher that passes against it is within
//! the real API's limits.

use reqwest::{Client, Method, StatusCode};
use serde_json::{json, Value};
use support::notion_stub::*;

const TOKEN: &str = "ntn_stub_self_test";

async fn call(
    stub: &NotionStub,
    method: Method,
    path: &str,
    body: Option<Value>,
    version: Option<&str>,
    token: &str,
) -> (StatusCode, Value) {
    let mut request = Client::new()
        .request(method, format!("{}{path}", stub.url()))
        .bearer_auth(token);
    if let Some(v) = version {
        request = request.header("Notion-Version", v);
    }
    if let Some(b) = body {
        request = request.json(&b);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn ok_call(
    stub: &NotionStub,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    call(stub, method, path, body, Some(NOTION_VERSION), TOKEN).await
}

fn create(parent: &str, title: &str, markdown: &str) -> Value {
    json!({
        "parent": {"type": "page_id", "page_id": parent},
        "properties": {"title": {"title": [{"type": "text", "text": {"content": title}}]}},
        "markdown": markdown,
    })
}

fn replace(markdown: &str) -> Value {
    json!({"type": "replace_content", "replace_content": {"new_str": markdown}})
}

fn code(answer: &(StatusCode, Value)) -> (u16, String) {
    (
        answer.0.as_u16(),
        answer.1["code"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn it_checks_the_token_and_the_version_first() {
    let (stub, parent) = NotionStub::start(TOKEN).await;
    let path = format!("/v1/pages/{parent}");
    let wrong = call(
        &stub,
        Method::GET,
        &path,
        None,
        Some(NOTION_VERSION),
        "ntn_wrong",
    )
    .await;
    assert_eq!(code(&wrong), (401, "unauthorized".into()));
    let missing = call(&stub, Method::GET, &path, None, None, TOKEN).await;
    assert_eq!(code(&missing), (400, "missing_version".into()));
    let old = call(&stub, Method::GET, &path, None, Some("2025-09-03"), TOKEN).await;
    assert_eq!(code(&old), (400, "validation_error".into()));
    let (status, body) = ok_call(&stub, Method::GET, &path, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "page");
    assert_eq!(body["in_trash"], false);
}

#[tokio::test]
async fn pages_are_created_replaced_and_listed_as_markdown() {
    let (stub, parent) = NotionStub::start(TOKEN).await;
    let (status, page) = ok_call(
        &stub,
        Method::POST,
        "/v1/pages",
        Some(create(&parent, "A", "Hello **world**")),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    let id = page["id"].as_str().unwrap().to_string();
    assert!(page["url"]
        .as_str()
        .unwrap()
        .starts_with("https://www.notion.so/A-"));
    let (status, _) = ok_call(
        &stub,
        Method::PATCH,
        &format!("/v1/pages/{id}/markdown"),
        Some(replace("Second")),
    )
    .await;
    assert_eq!(status, 200);
    let (_, md) = ok_call(
        &stub,
        Method::GET,
        &format!("/v1/pages/{id}/markdown"),
        None,
    )
    .await;
    assert_eq!(md["markdown"], "Second");
    // The parent lists it as a child page, paginated within page_size ≤ 100.
    let (_, list) = ok_call(
        &stub,
        Method::GET,
        &format!("/v1/blocks/{parent}/children?page_size=100"),
        None,
    )
    .await;
    assert_eq!(list["results"][0]["type"], "child_page");
    assert_eq!(list["results"][0]["child_page"]["title"], "A");
    let too_big = ok_call(
        &stub,
        Method::GET,
        &format!("/v1/blocks/{parent}/children?page_size=101"),
        None,
    )
    .await;
    assert_eq!(code(&too_big).0, 400);
    // `archived` is gone in 2026-03-11; `in_trash` moves a page to the trash.
    let old = ok_call(
        &stub,
        Method::PATCH,
        &format!("/v1/pages/{id}"),
        Some(json!({"archived": true})),
    )
    .await;
    assert_eq!(code(&old).0, 400);
    let (_, trashed) = ok_call(
        &stub,
        Method::PATCH,
        &format!("/v1/pages/{id}"),
        Some(json!({"in_trash": true})),
    )
    .await;
    assert_eq!(trashed["in_trash"], true);
    let edit = ok_call(
        &stub,
        Method::PATCH,
        &format!("/v1/pages/{id}/markdown"),
        Some(replace("x")),
    )
    .await;
    assert_eq!(code(&edit).0, 400);
    assert!(edit.1["message"].as_str().unwrap().contains("archived"));
    // Deleted for good: 404.
    stub.delete(&id);
    let gone = ok_call(&stub, Method::GET, &format!("/v1/pages/{id}"), None).await;
    assert_eq!(code(&gone), (404, "object_not_found".into()));
}

#[tokio::test]
async fn it_enforces_the_documented_limits_and_is_exact_at_them() {
    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.without_rate_limit();
    // 1,000 blocks pass, 1,001 do not.
    let thousand: String = (0..1_000).map(|i| format!("- item {i}\n")).collect();
    let at = ok_call(
        &stub,
        Method::POST,
        "/v1/pages",
        Some(create(&parent, "1000", &thousand)),
    )
    .await;
    assert_eq!(at.0, 200, "{}", at.1);
    let over: String = (0..1_001).map(|i| format!("- item {i}\n")).collect();
    let refused = ok_call(
        &stub,
        Method::POST,
        "/v1/pages",
        Some(create(&parent, "1001", &over)),
    )
    .await;
    assert_eq!(code(&refused), (400, "validation_error".into()));
    // 2,000 characters (UTF-16 units) of text pass, 2,001 do not; astral characters count 2.
    let exact = "é".repeat(1_998) + "𝄞";
    assert_eq!(exact.encode_utf16().count(), 2_000);
    assert_eq!(
        ok_call(
            &stub,
            Method::POST,
            "/v1/pages",
            Some(create(&parent, "t", &exact))
        )
        .await
        .0,
        200
    );
    let long = "a".repeat(2_001);
    assert_eq!(
        code(
            &ok_call(
                &stub,
                Method::POST,
                "/v1/pages",
                Some(create(&parent, "t", &long))
            )
            .await
        )
        .0,
        400
    );
    // More than 500 KB: 413.
    let huge = "word ".repeat(110_000);
    assert_eq!(
        ok_call(
            &stub,
            Method::POST,
            "/v1/pages",
            Some(create(&parent, "h", &huge))
        )
        .await
        .0,
        413
    );
    // Not JSON: 400.
    let (status, body) = {
        let response = Client::new()
            .post(format!("{}/v1/pages", stub.url()))
            .bearer_auth(TOKEN)
            .header("Notion-Version", NOTION_VERSION)
            .body("{not json")
            .send()
            .await
            .unwrap();
        (response.status(), response.json::<Value>().await.unwrap())
    };
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (400, Some("invalid_json"))
    );
    // A page that is not shared with the integration: 404.
    let private = stub.add_page(None, "Private", false);
    let hidden = ok_call(
        &stub,
        Method::POST,
        "/v1/pages",
        Some(create(&private, "x", "y")),
    )
    .await;
    assert_eq!(code(&hidden), (404, "object_not_found".into()));
}

#[tokio::test]
async fn child_pages_must_be_named_in_replaced_content() {
    let (stub, parent) = NotionStub::start(TOKEN).await;
    let (_, page) = ok_call(
        &stub,
        Method::POST,
        "/v1/pages",
        Some(create(&parent, "Module", "body")),
    )
    .await;
    let id = page["id"].as_str().unwrap().to_string();
    let (_, child) = ok_call(
        &stub,
        Method::POST,
        "/v1/pages",
        Some(create(&id, "2019", "old")),
    )
    .await;
    let child_url = child["url"].as_str().unwrap().to_string();
    // Leaving the child out would delete it: refused.
    let dropped = ok_call(
        &stub,
        Method::PATCH,
        &format!("/v1/pages/{id}/markdown"),
        Some(replace("new body")),
    )
    .await;
    assert_eq!(code(&dropped).0, 400);
    assert!(dropped.1["message"]
        .as_str()
        .unwrap()
        .contains("child page"));
    // Named, it stays.
    let named = format!("new body\n\n<page url=\"{child_url}\">2019</page>\n");
    assert_eq!(
        ok_call(
            &stub,
            Method::PATCH,
            &format!("/v1/pages/{id}/markdown"),
            Some(replace(&named))
        )
        .await
        .0,
        200
    );
    assert_eq!(stub.child_pages(&id).len(), 1);
    // A page that is not its child cannot be named (it would be moved).
    let (_, other) = ok_call(
        &stub,
        Method::POST,
        "/v1/pages",
        Some(create(&parent, "Other", "x")),
    )
    .await;
    let stranger = format!(
        "{named}\n<page url=\"{}\">Other</page>\n",
        other["url"].as_str().unwrap()
    );
    assert_eq!(
        code(
            &ok_call(
                &stub,
                Method::PATCH,
                &format!("/v1/pages/{id}/markdown"),
                Some(replace(&stranger))
            )
            .await
        )
        .0,
        400
    );
    // Trashing the parent trashes the child with it.
    stub.trash(&id);
    let (_, seen) = ok_call(
        &stub,
        Method::GET,
        &format!("/v1/pages/{}", child["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(seen["in_trash"], true);
}

#[tokio::test]
async fn faults_and_the_rate_limit_answer_as_notion_does() {
    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.fault(
        None,
        Fault::RateLimited {
            retry_after_secs: 2,
        },
    );
    stub.fault(
        None,
        Fault::Overloaded {
            retry_after_secs: 1,
        },
    );
    stub.fault(None, Fault::ServerError);
    let path = format!("/v1/pages/{parent}");
    for expected in [429, 529, 500, 200] {
        let response = Client::new()
            .get(format!("{}{path}", stub.url()))
            .bearer_auth(TOKEN)
            .header("Notion-Version", NOTION_VERSION)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected);
        if expected == 429 {
            assert_eq!(response.headers()["retry-after"], "2");
        }
    }
    // More than the rate limit within its window: 429 with Retry-After.
    let mut limited = 0;
    for _ in 0..RATE_LIMIT + 2 {
        if ok_call(&stub, Method::GET, &path, None).await.0 == 429 {
            limited += 1;
        }
    }
    assert!(limited >= 2, "{limited}");
    // Applied, then never answered: the page exists although no answer came.
    stub.without_rate_limit();
    stub.fault(Some("POST pages"), Fault::HangAfterApply);
    let request = Client::new()
        .post(format!("{}/v1/pages", stub.url()))
        .bearer_auth(TOKEN)
        .header("Notion-Version", NOTION_VERSION)
        .json(&create(&parent, "Hung", "x"))
        .timeout(std::time::Duration::from_millis(500))
        .send()
        .await;
    assert!(request.is_err(), "no answer");
    assert_eq!(stub.child_pages(&parent).len(), 1, "but applied");
}
