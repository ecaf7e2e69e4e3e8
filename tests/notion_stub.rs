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

fn paragraph(text: &str) -> Value {
    json!({"object": "block", "type": "paragraph", "paragraph": {"rich_text": [{"type": "text", "text": {"content": text}}]}})
}

fn append(children: Vec<Value>) -> Value {
    json!({ "children": children })
}

#[tokio::test]
async fn it_checks_the_token_and_the_version_first() {
    let (stub, parent) = NotionStub::start(TOKEN).await;
    let path = format!("/v1/blocks/{parent}/children");
    let (status, body) = call(
        &stub,
        Method::GET,
        &path,
        None,
        Some(NOTION_VERSION),
        "ntn_wrong",
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let (status, body) = call(&stub, Method::GET, &path, None, None, TOKEN).await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (400, Some("missing_version"))
    );
    let (status, body) = call(&stub, Method::GET, &path, None, Some("2022-06-28"), TOKEN).await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (400, Some("validation_error"))
    );
    let (status, body) = ok_call(&stub, Method::GET, &path, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "list");
}

#[tokio::test]
async fn it_refuses_what_is_over_the_limits() {
    let (stub, parent) = NotionStub::start(TOKEN).await;
    let path = format!("/v1/blocks/{parent}/children");
    let refused = |body: Value| {
        let stub = stub.clone();
        let path = path.clone();
        async move {
            let (status, answer) = ok_call(&stub, Method::PATCH, &path, Some(body)).await;
            assert_eq!(status, 400, "{answer}");
            assert_eq!(answer["code"], "validation_error");
            answer["message"].as_str().unwrap().to_string()
        }
    };
    // 101 children.
    let message = refused(append(
        (0..101).map(|i| paragraph(&i.to_string())).collect(),
    ))
    .await;
    assert!(message.contains("≤ `100`"), "{message}");
    // A rich-text item of 2,001 characters (UTF-16 units: 1,001 emoji are 2,002).
    refused(append(vec![paragraph(&"a".repeat(2_001))])).await;
    refused(append(vec![paragraph(&"😀".repeat(1_001))])).await;
    // 101 rich-text items in one block.
    let items: Vec<Value> = (0..101)
        .map(|_| json!({"type": "text", "text": {"content": "x"}}))
        .collect();
    refused(append(vec![
        json!({"type": "paragraph", "paragraph": {"rich_text": items}}),
    ]))
    .await;
    // Three levels of nesting in one request.
    let deep = json!({"type": "toggle", "toggle": {"rich_text": [], "children": [
        {"type": "toggle", "toggle": {"rich_text": [], "children": [paragraph("too deep")]}}
    ]}});
    let message = refused(append(vec![deep])).await;
    assert!(message.contains("nested"), "{message}");
    // An unknown block type, a heading with children, `after` that is not a child.
    refused(append(vec![
        json!({"type": "embed", "embed": {"rich_text": []}}),
    ]))
    .await;
    refused(append(vec![
        json!({"type": "heading_2", "heading_2": {"rich_text": [], "children": [paragraph("x")]}}),
    ]))
    .await;
    refused(json!({"children": [paragraph("x")], "after": "00000000-0000-4000-8000-000000000999"}))
        .await;
    // More than 500 KB.
    let big: Vec<Value> = (0..100).map(|_| paragraph(&"b".repeat(1_990))).collect();
    let mut body = append(big);
    body["padding"] = json!("p".repeat(320_000));
    let (status, _) = ok_call(&stub, Method::PATCH, &path, Some(body)).await;
    assert_eq!(status, 413);
    // Exactly at the limits it is accepted: 100 children, 2,000 characters, two levels.
    let two_levels =
        json!({"type": "toggle", "toggle": {"rich_text": [], "children": [paragraph("ok")]}});
    let mut at_limit: Vec<Value> = (0..99).map(|_| paragraph(&"c".repeat(2_000))).collect();
    at_limit.push(two_levels);
    let (status, answer) = ok_call(&stub, Method::PATCH, &path, Some(append(at_limit))).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"].as_array().unwrap().len(), 100);
    assert_eq!(stub.blocks(&parent).len(), 100);
    assert_eq!(stub.blocks(&parent)[99].children.len(), 1);
}

#[tokio::test]
async fn an_unshared_page_is_not_found_and_faults_play_in_order() {
    let (stub, _) = NotionStub::start(TOKEN).await;
    let private = stub.add_page(None, "Private", false);
    let (status, body) = ok_call(
        &stub,
        Method::POST,
        "/v1/pages",
        Some(json!({"parent": {"page_id": private}, "properties": {"title": {"title": [{"type": "text", "text": {"content": "t"}}]}}})),
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (404, Some("object_not_found"))
    );
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("shared with your integration"));

    let (stub, parent) = NotionStub::start(TOKEN).await;
    stub.fault(
        Some("PATCH children"),
        Fault::Overloaded {
            retry_after_secs: 2,
        },
    );
    stub.fault(
        None,
        Fault::RateLimited {
            retry_after_secs: 3,
        },
    );
    let path = format!("/v1/blocks/{parent}/children");
    // The GET passes the PATCH-only fault by and takes the next one.
    let (status, _) = ok_call(&stub, Method::GET, &path, None).await;
    assert_eq!(status, 429);
    let response = Client::new()
        .patch(format!("{}{path}", stub.url()))
        .bearer_auth(TOKEN)
        .header("Notion-Version", NOTION_VERSION)
        .json(&append(vec![paragraph("x")]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 529);
    assert_eq!(response.headers()["retry-after"], "2");
    let (status, _) = ok_call(
        &stub,
        Method::PATCH,
        &path,
        Some(append(vec![paragraph("x")])),
    )
    .await;
    assert_eq!(status, 200);
    // Deleted blocks go to the trash: readable, no longer listed.
    let id = stub.blocks(&parent)[0].id.clone();
    let (status, _) = ok_call(&stub, Method::DELETE, &format!("/v1/blocks/{id}"), None).await;
    assert_eq!(status, 200);
    let (_, block) = ok_call(&stub, Method::GET, &format!("/v1/blocks/{id}"), None).await;
    assert_eq!(block["in_trash"], true);
    assert!(stub.blocks(&parent).is_empty());
}
