//! The webhook ingest function against the emulator, with the real GitHub payloads.
//! Every test has its own table, created from template.yaml.

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use serde_json::{json, Value};
use stages::config::WebhookConfig;
use stages::secret::Secret;
use stages::signature;
use stages::store::{attr, item_size, pending_index_projection, write_units, Item, PrStore};
use stages::webhook::{to_apigw, Verifier, WebhookHandler, WebhookRequest};
use support::*;

const GUID: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

async fn setup() -> (WebhookHandler, PrStore) {
    let store = fresh_table(&sdk().await).await;
    (handler(store.clone()), store)
}

async fn only_item(store: &PrStore) -> Item {
    let mut items = all_items(store).await;
    assert_eq!(items.len(), 1, "expected exactly one item, got {items:?}");
    items.pop().unwrap()
}

#[tokio::test]
async fn merged_delivery_is_stored_with_the_contract_attributes() {
    let (handler, store) = setup().await;
    let payload = merged_payload();
    let raw = body(&payload);
    let answer = handler
        .handle(signed("pull_request", GUID, raw.clone()))
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"stored": "inserted", "repo": "Codertocat/Hello-World", "prNumber": 2})
    );

    let item = only_item(&store).await;
    let pr = &payload["pull_request"];
    assert_eq!(s(&item, attr::REPO), "Codertocat/Hello-World");
    assert_eq!(item[attr::PR_NUMBER], AttributeValue::N("2".into()));
    assert_eq!(s(&item, attr::TITLE), pr["title"].as_str().unwrap());
    assert_eq!(s(&item, attr::BODY), pr["body"].as_str().unwrap());
    assert_eq!(s(&item, attr::AUTHOR), "Codertocat");
    assert_eq!(item[attr::LABELS], AttributeValue::L(vec![av_s("bug")]));
    assert_eq!(
        s(&item, attr::URL),
        "https://github.com/Codertocat/Hello-World/pull/2"
    );
    assert_eq!(s(&item, attr::BASE_REF), "master");
    assert_eq!(
        s(&item, attr::MERGE_COMMIT_SHA),
        pr["merge_commit_sha"].as_str().unwrap()
    );
    assert_eq!(s(&item, attr::MERGED_AT), "2019-05-15T15:21:18Z");
    assert_eq!(s(&item, attr::SOURCE_UPDATED_AT), "2019-05-15T15:21:18Z");
    assert_eq!(s(&item, attr::DELIVERY_ID), GUID);
    let received = time::OffsetDateTime::parse(
        s(&item, attr::RECEIVED_AT),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert!(
        (time::OffsetDateTime::now_utc() - received)
            .whole_seconds()
            .abs()
            < 60
    );
    assert_eq!(s(&item, attr::PENDING_SHARD), "2"); // 2 % 4 shards
    for pipeline in attr::PIPELINE {
        assert!(
            !item.contains_key(*pipeline),
            "{pipeline} must be absent on insert"
        );
    }
    // What the pipeline needs, not the raw payload: ≤ 2 WCU (item + index) plus the body's own size.
    let body_kb = pr["body"].as_str().unwrap().len().div_ceil(1024);
    let cost =
        write_units(item_size(&item)) + write_units(item_size(&pending_index_projection(&item)));
    assert!(
        raw.len() > 20_000 && cost <= 2 + body_kb,
        "{} bytes stored as {} bytes, {cost} WCU",
        raw.len(),
        item_size(&item)
    );
}

#[tokio::test]
async fn every_recorded_example_made_merged_fits_the_write_budget() {
    for name in samples::pull_request_examples() {
        let payload = samples::merged(samples::webhook(&name));
        let Ok(stages::payload::Classified::Merged(pr)) =
            stages::payload::classify_pull_request(&body(&payload))
        else {
            panic!("{name} made merged was not accepted");
        };
        let delivery = stages::domain::Delivery {
            id: GUID.into(),
            received_at: time::OffsetDateTime::now_utc(),
        };
        let item = stages::store::new_item(&pr, &delivery, 4);
        let body_kb = pr.body.as_deref().unwrap_or_default().len().div_ceil(1024);
        let cost = write_units(item_size(&item))
            + write_units(item_size(&pending_index_projection(&item)));
        assert!(cost <= 2 + body_kb, "{name}: {cost} WCU");
    }
}

#[tokio::test]
async fn deliveries_that_are_not_ours_are_answered_and_nothing_is_stored() {
    let (handler, store) = setup().await;
    let mut draft = merged_payload();
    draft["pull_request"]["draft"] = json!(true);
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "pull_request",
            samples::webhook("pull_request.closed.1"),
            json!({"ignored": "pull request closed without merging"}),
        ),
        (
            "pull_request",
            samples::webhook("pull_request.closed.2"),
            json!({"ignored": "pull request closed without merging"}),
        ),
        (
            "pull_request",
            samples::webhook("pull_request.opened.1"),
            json!({"ignored": "pull_request action `opened` is not tracked"}),
        ),
        (
            "pull_request",
            samples::webhook("pull_request.converted_to_draft.1"),
            json!({"ignored": "pull_request action `converted_to_draft` is not tracked"}),
        ),
        (
            "pull_request",
            draft,
            json!({"ignored": "pull request is a draft"}),
        ),
        // A label added to an open PR: ours only once merged.
        (
            "pull_request",
            samples::webhook("pull_request.labeled.1"),
            json!({"ignored": "pull request is not merged"}),
        ),
        (
            "push",
            samples::webhook("push.1"),
            json!({"ignored": "event `push` is not tracked"}),
        ),
        ("ping", samples::webhook("ping.1"), json!({"pong": true})),
    ];
    for (event, payload, expected) in cases {
        let answer = handler.handle(signed(event, GUID, body(&payload))).await;
        assert_eq!(
            (answer.status, &answer.body),
            (200, &expected),
            "{event} {}",
            payload["action"]
        );
    }
    assert!(all_items(&store).await.is_empty());
    // One EMF line for what came in: 7 ignored, 1 ping; every other outcome present at 0.
    let emf: Value =
        serde_json::from_str(&handler.emf_line(time::OffsetDateTime::now_utc())).unwrap();
    assert_eq!(emf["Deliveries_ignored"], 7);
    assert_eq!(emf["Deliveries_ping"], 1);
    assert_eq!(emf["Deliveries_inserted"], 0);
    assert_eq!(
        emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .len(),
        stages::webhook::OUTCOMES.len()
    );
}

#[tokio::test]
async fn bad_missing_and_sha1_only_signatures_get_401_and_nothing_is_stored() {
    let (handler, store) = setup().await;
    let raw = body(&merged_payload());

    let mut wrong = unsigned("pull_request", GUID, raw.clone());
    wrong.headers.insert(
        "x-hub-signature-256",
        header(&signature::sign(b"not the secret", &raw)),
    );
    let missing = unsigned("pull_request", GUID, raw.clone());
    let mut sha1_only = unsigned("pull_request", GUID, raw.clone());
    sha1_only.headers.insert(
        "x-hub-signature",
        header("sha1=2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
    );
    let mut garbage = unsigned("pull_request", GUID, raw.clone());
    garbage
        .headers
        .insert("x-hub-signature-256", header("sha256=not-hex"));
    // A valid signature of another body: the check is over the exact bytes received.
    let mut altered = signed("pull_request", GUID, raw.clone());
    altered.body = bytes::Bytes::from([raw.as_slice(), b" "].concat());

    for (what, request, needle) in [
        ("wrong secret", wrong, "does not match"),
        ("missing", missing, "missing X-Hub-Signature-256"),
        ("sha1 only", sha1_only, "SHA-1"),
        ("malformed", garbage, "not of the form"),
        ("altered body", altered, "does not match"),
    ] {
        let answer = handler.handle(request).await;
        assert_eq!(answer.status, 401, "{what}: {answer:?}");
        assert!(
            answer.body["error"].as_str().unwrap().contains(needle),
            "{what}: {answer:?}"
        );
    }
    assert!(all_items(&store).await.is_empty());
}

#[tokio::test]
async fn githubs_test_vector_passes_the_handlers_check() {
    let store = fresh_table(&sdk().await).await;
    let handler = WebhookHandler::new(
        store,
        Verifier::Secret(Secret::new("It's a Secret to Everybody")),
        1024,
    );
    let mut request = unsigned("ping", GUID, "Hello, World!");
    request.headers.insert(
        "x-hub-signature-256",
        header("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
    );
    let answer = handler.handle(request).await;
    assert_eq!((answer.status, answer.body), (200, json!({"pong": true})));
}

#[tokio::test]
async fn no_secret_refuses_everything_unless_the_insecure_switch_is_set() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let env = |pairs: Vec<(&'static str, String)>| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    };
    let table = store.table_name().to_string();

    let config = WebhookConfig::from_lookup(&env(vec![("TABLE_NAME", table.clone())])).unwrap();
    let refusing = WebhookHandler::from_config(&config, &sdk).await.unwrap();
    let answer = refusing
        .handle(signed("pull_request", GUID, body(&merged_payload())))
        .await;
    assert_eq!(answer.status, 500);
    assert_eq!(
        answer.body,
        json!({"error": "webhook secret is not configured"})
    );
    assert!(all_items(&store).await.is_empty());

    let config = WebhookConfig::from_lookup(&env(vec![
        ("TABLE_NAME", table),
        ("CHRONICLE_INSECURE_NO_SIGNATURE", "1".into()),
    ]))
    .unwrap();
    let insecure = WebhookHandler::from_config(&config, &sdk).await.unwrap();
    let answer = insecure
        .handle(unsigned("pull_request", GUID, body(&merged_payload())))
        .await;
    assert_eq!(answer.body["stored"], "inserted");
}

#[tokio::test]
async fn secret_is_read_from_secrets_manager_or_ssm() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let id = format!("chronicle/webhook-{}", uuid::Uuid::new_v4().simple());
    let arn = aws_sdk_secretsmanager::Client::new(&sdk)
        .create_secret()
        .name(&id)
        .secret_string(SECRET)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let param = format!("/chronicle/{}", uuid::Uuid::new_v4().simple());
    aws_sdk_ssm::Client::new(&sdk)
        .put_parameter()
        .name(&param)
        .value(SECRET)
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .send()
        .await
        .unwrap();
    let table = store.table_name().to_string();
    for (var, value) in [
        ("GITHUB_WEBHOOK_SECRET_ARN", arn),
        ("GITHUB_WEBHOOK_SECRET_PARAM", param),
    ] {
        let pairs = [("TABLE_NAME", table.clone()), (var, value)];
        let config = WebhookConfig::from_lookup(&|k: &str| {
            pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        })
        .unwrap();
        let handler = WebhookHandler::from_config(&config, &sdk).await.unwrap();
        let answer = handler.handle(signed("ping", GUID, "{}")).await;
        assert_eq!(answer.status, 200, "{var}: {answer:?}");
        let answer = handler.handle(unsigned("ping", GUID, "{}")).await;
        assert_eq!(answer.status, 401, "{var}: {answer:?}");
    }
    // A reference that does not exist fails at start-up with a message naming it.
    let config = WebhookConfig::from_lookup(&|k: &str| match k {
        "TABLE_NAME" => Some(table.clone()),
        "GITHUB_WEBHOOK_SECRET_ARN" => Some("chronicle/does-not-exist".into()),
        _ => None,
    })
    .unwrap();
    let err = WebhookHandler::from_config(&config, &sdk)
        .await
        .err()
        .expect("a missing secret must fail");
    assert!(
        err.to_string().contains("chronicle/does-not-exist"),
        "{err}"
    );
}

/// An empty or blank secret is no key: from any source, the function refuses to start (or, for
/// a plain variable, treats it as not configured and refuses every delivery).
#[tokio::test]
async fn an_empty_or_blank_secret_fails_closed_from_every_source() {
    let sdk = sdk().await;
    let store = fresh_table(&sdk).await;
    let table = store.table_name().to_string();
    let blank_secret = aws_sdk_secretsmanager::Client::new(&sdk)
        .create_secret()
        .name(format!("chronicle/blank-{}", uuid::Uuid::new_v4().simple()))
        .secret_string(" \n\t")
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let blank_param = format!("/chronicle/blank-{}", uuid::Uuid::new_v4().simple());
    aws_sdk_ssm::Client::new(&sdk)
        .put_parameter()
        .name(&blank_param)
        .value("  ")
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .send()
        .await
        .unwrap();
    for (var, value) in [
        ("GITHUB_WEBHOOK_SECRET_ARN", blank_secret),
        ("GITHUB_WEBHOOK_SECRET_PARAM", blank_param),
    ] {
        let pairs = [("TABLE_NAME", table.clone()), (var, value)];
        let config = WebhookConfig::from_lookup(&|k: &str| {
            pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        })
        .unwrap();
        let err = WebhookHandler::from_config(&config, &sdk)
            .await
            .err()
            .unwrap_or_else(|| panic!("{var}: a blank secret must not start"));
        assert!(
            err.to_string().contains("blank") || err.to_string().contains("no value"),
            "{err}"
        );
    }
    // A blank plain variable is not configured: every delivery is refused.
    let pairs = [
        ("TABLE_NAME", table.clone()),
        ("GITHUB_WEBHOOK_SECRET", "   ".to_string()),
    ];
    let config = WebhookConfig::from_lookup(&|k: &str| {
        pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    })
    .unwrap();
    let handler = WebhookHandler::from_config(&config, &sdk).await.unwrap();
    let answer = handler
        .handle(unsigned("pull_request", GUID, body(&merged_payload())))
        .await;
    assert_eq!(answer.status, 500);
    assert!(all_items(&store).await.is_empty());
}

#[tokio::test]
async fn malformed_json_missing_fields_oversized_and_bad_base64_are_refused() {
    let store = fresh_table(&sdk().await).await;
    let handler = WebhookHandler::new(
        store.clone(),
        Verifier::Secret(Secret::new(SECRET)),
        64 * 1024,
    );

    let mut no_title = merged_payload();
    no_title["pull_request"]
        .as_object_mut()
        .unwrap()
        .remove("title");
    let mut null_merged_at = merged_payload();
    null_merged_at["pull_request"]["merged_at"] = Value::Null;
    let mut no_repo = merged_payload();
    no_repo.as_object_mut().unwrap().remove("repository");
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "truncated JSON",
            body(&merged_payload())[..500].to_vec(),
            400,
            "malformed JSON",
        ),
        ("not JSON", b"payload=hello".to_vec(), 400, "malformed JSON"),
        (
            "missing title",
            body(&no_title),
            400,
            "missing field `pull_request.title`",
        ),
        (
            "null merged_at",
            body(&null_merged_at),
            400,
            "missing field `pull_request.merged_at`",
        ),
        (
            "missing repository",
            body(&no_repo),
            400,
            "missing field `repository`",
        ),
        (
            "oversized",
            vec![b' '; 64 * 1024 + 1],
            413,
            "exceeds the limit of 65536 bytes",
        ),
    ];
    for (what, raw, status, needle) in cases {
        let answer = handler.handle(signed("pull_request", GUID, raw)).await;
        assert_eq!(answer.status, status, "{what}: {answer:?}");
        assert!(
            answer.body["error"].as_str().unwrap().contains(needle),
            "{what}: {answer:?}"
        );
    }

    let mut event = apigw_event(&signed("pull_request", GUID, body(&merged_payload())));
    event.body = Some("this is %%% not base64".into());
    event.is_base64_encoded = true;
    let response = handler.handle_apigw(event).await;
    assert_eq!(response.status_code, 400);
    assert!(
        matches!(&response.body, Some(aws_lambda_events::encodings::Body::Text(t)) if t.contains("not valid base64"))
    );

    let mut missing_event = signed("pull_request", GUID, body(&merged_payload()));
    missing_event.headers.remove("x-github-event");
    assert_eq!(
        handler.handle(missing_event).await.body,
        json!({"error": "missing header X-GitHub-Event"})
    );
    let mut missing_guid = signed("pull_request", GUID, body(&merged_payload()));
    missing_guid.headers.remove("x-github-delivery");
    assert_eq!(
        handler.handle(missing_guid).await.body,
        json!({"error": "missing header X-GitHub-Delivery"})
    );

    assert!(all_items(&store).await.is_empty());
}

/// The API Gateway HTTP API (v2) event Lambda would receive for `request`.
fn apigw_event(request: &WebhookRequest) -> aws_lambda_events::apigw::ApiGatewayV2httpRequest {
    let mut event = aws_lambda_events::apigw::ApiGatewayV2httpRequest::default();
    event.headers = request.headers.clone();
    event.body = Some(base64::engine::general_purpose::STANDARD.encode(&request.body));
    event.is_base64_encoded = true;
    event
}

#[tokio::test]
async fn base64_encoded_api_gateway_event_is_stored() {
    let (handler, store) = setup().await;
    let response = handler
        .handle_apigw(apigw_event(&signed(
            "pull_request",
            GUID,
            body(&merged_payload()),
        )))
        .await;
    assert_eq!(response.status_code, 200, "{response:?}");
    assert_eq!(s(&only_item(&store).await, attr::DELIVERY_ID), GUID);
}

#[tokio::test]
async fn form_encoded_delivery_is_stored() {
    let (handler, store) = setup().await;
    let json = serde_json::to_string(&merged_payload()).unwrap();
    let form: String = form_urlencoded_body(&json);
    let mut request = signed("pull_request", GUID, form);
    request.headers.insert(
        http::header::CONTENT_TYPE,
        header("application/x-www-form-urlencoded"),
    );
    let answer = handler.handle(request).await;
    assert_eq!(answer.body["stored"], "inserted", "{answer:?}");
    assert_eq!(
        s(&only_item(&store).await, attr::TITLE),
        "Update the README with new information."
    );
}

fn form_urlencoded_body(json: &str) -> String {
    // GitHub's form content type: the JSON document in a `payload` field.
    let mut out = String::from("payload=");
    for b in json.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[tokio::test]
async fn redelivery_with_the_same_guid_changes_nothing() {
    let (handler, store) = setup().await;
    let raw = body(&merged_payload());
    assert_eq!(
        handler
            .handle(signed("pull_request", GUID, raw.clone()))
            .await
            .body["stored"],
        "inserted"
    );
    let before = only_item(&store).await;
    let answer = handler.handle(signed("pull_request", GUID, raw)).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["storedUpdatedAt"], "2019-05-15T15:21:18Z");
    assert!(answer.body["unchanged"].is_string(), "{answer:?}");
    assert_eq!(only_item(&store).await, before);
}

/// Marks the stored row as the later stages would have: enriched, summarized, pending marker gone.
async fn mark_pipeline_done(store: &PrStore) {
    store
        .client()
        .update_item()
        .table_name(store.table_name())
        .key(attr::REPO, av_s("Codertocat/Hello-World"))
        .key(attr::PR_NUMBER, AttributeValue::N("2".into()))
        .update_expression(
            "SET enrichedAt = :e, summarizedAt = :s, attempts = :a REMOVE pendingShard",
        )
        .expression_attribute_values(":e", av_s("2019-05-15T15:22:00Z"))
        .expression_attribute_values(":s", av_s("2019-05-15T15:23:00Z"))
        .expression_attribute_values(":a", AttributeValue::N("1".into()))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn later_edit_updates_the_title_and_never_touches_pipeline_state() {
    let (handler, store) = setup().await;
    handler
        .handle(signed("pull_request", GUID, body(&merged_payload())))
        .await;
    mark_pipeline_done(&store).await;
    let before = only_item(&store).await;

    let mut edited = merged_payload();
    edited["action"] = json!("edited");
    edited["pull_request"]["title"] = json!("A better title, after the merge ✨");
    edited["pull_request"]["updated_at"] = json!("2019-05-16T09:00:00Z");
    let answer = handler
        .handle(signed("pull_request", "edited-guid", body(&edited)))
        .await;
    assert_eq!(answer.body["stored"], "updated", "{answer:?}");

    let after = only_item(&store).await;
    assert_eq!(s(&after, attr::TITLE), "A better title, after the merge ✨");
    assert_eq!(s(&after, attr::SOURCE_UPDATED_AT), "2019-05-16T09:00:00Z");
    assert_eq!(s(&after, attr::DELIVERY_ID), "edited-guid");
    for kept in [
        attr::ENRICHED_AT,
        attr::SUMMARIZED_AT,
        attr::ATTEMPTS,
        attr::RECEIVED_AT,
    ] {
        assert_eq!(
            after.get(kept),
            before.get(kept),
            "{kept} must be untouched"
        );
    }
    // The pending marker was removed by the summary; an edit must not bring it back.
    assert!(!after.contains_key(attr::PENDING_SHARD));

    // A label change of the merged PR updates the labels the same way.
    let mut labeled = edited.clone();
    labeled["action"] = json!("labeled");
    labeled["pull_request"]["labels"] = json!([{"name": "bug"}, {"name": "docs"}]);
    labeled["pull_request"]["updated_at"] = json!("2019-05-16T10:00:00Z");
    assert_eq!(
        handler
            .handle(signed("pull_request", "labeled-guid", body(&labeled)))
            .await
            .body["stored"],
        "updated"
    );
    let after = only_item(&store).await;
    assert_eq!(
        after[attr::LABELS],
        AttributeValue::L(vec![av_s("bug"), av_s("docs")])
    );
    assert_eq!(
        after.get(attr::SUMMARIZED_AT),
        before.get(attr::SUMMARIZED_AT)
    );
}

#[tokio::test]
async fn stale_event_changes_nothing() {
    let (handler, store) = setup().await;
    let mut newer = merged_payload();
    newer["pull_request"]["updated_at"] = json!("2019-05-20T00:00:00Z");
    newer["pull_request"]["title"] = json!("newest title");
    handler
        .handle(signed("pull_request", "newer", body(&newer)))
        .await;
    let before = only_item(&store).await;

    let mut older = merged_payload();
    older["action"] = json!("edited");
    older["pull_request"]["title"] = json!("an older title");
    let answer = handler
        .handle(signed("pull_request", "older", body(&older)))
        .await;
    assert_eq!(
        answer.body["storedUpdatedAt"], "2019-05-20T00:00:00Z",
        "{answer:?}"
    );
    assert_eq!(only_item(&store).await, before);
}

/// Two events of the same `updated_at` second (a merge and a bot's label at 12:00:05), in either
/// order: the later arrival's fields win; a redelivery of either writes nothing.
#[tokio::test]
async fn same_second_events_last_writer_wins_and_a_redelivery_writes_nothing() {
    let second = "2019-05-15T15:20:33Z";
    let mut merge = merged_payload();
    merge["pull_request"]["updated_at"] = json!(second);
    let mut labeled = merge.clone();
    labeled["action"] = json!("labeled");
    labeled["pull_request"]["labels"] = json!([{"name": "bug"}, {"name": "release"}]);
    for (first, then, expected_labels) in [
        (&merge, &labeled, vec![av_s("bug"), av_s("release")]),
        (&labeled, &merge, vec![av_s("bug")]),
    ] {
        let (handler, store) = setup().await;
        let a = handler
            .handle(signed("pull_request", "first", body(first)))
            .await;
        assert_eq!(a.body["stored"], "inserted", "{a:?}");
        let b = handler
            .handle(signed("pull_request", "then", body(then)))
            .await;
        assert_eq!(
            b.body["stored"], "updated",
            "same second, other fields: {b:?}"
        );
        let item = only_item(&store).await;
        assert_eq!(item[attr::LABELS], AttributeValue::L(expected_labels));
        assert_eq!(s(&item, attr::DELIVERY_ID), "then");
        // Redeliveries keep their GUID and their fields: nothing is written.
        for (guid, payload) in [("then", then), ("first", first)] {
            let before = only_item(&store).await;
            let again = handler
                .handle(signed("pull_request", guid, body(payload)))
                .await;
            if guid == "then" {
                assert_eq!(again.body["stored"], json!(null), "a duplicate: {again:?}");
                assert_eq!(only_item(&store).await, before);
            } else {
                // The first event redelivered now is, within its second, the last writer.
                assert_eq!(again.body["stored"], "updated", "{again:?}");
                let third = handler
                    .handle(signed("pull_request", guid, body(payload)))
                    .await;
                assert_eq!(third.body["stored"], json!(null), "{third:?}");
            }
        }
    }
}

#[tokio::test]
async fn twenty_concurrent_deliveries_of_one_pr_end_in_one_item_with_the_newest_fields() {
    let (handler, store) = setup().await;
    let handler = std::sync::Arc::new(handler);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20u32 {
        let mut payload = merged_payload();
        // Distinct, increasing updated_at: minute i of a day, the newest is i = 19.
        payload["pull_request"]["updated_at"] = json!(format!("2019-05-16T10:{i:02}:00Z"));
        payload["pull_request"]["title"] = json!(format!("title {i}"));
        payload["pull_request"]["labels"] = json!([{"name": format!("label-{i}")}]);
        let handler = handler.clone();
        tasks.spawn(async move {
            handler
                .handle(signed("pull_request", &format!("guid-{i}"), body(&payload)))
                .await
        });
    }
    let mut inserted = 0;
    while let Some(answer) = tasks.join_next().await {
        let answer = answer.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        inserted += usize::from(answer.body["stored"] == "inserted");
    }
    assert_eq!(inserted, 1, "exactly one delivery creates the item");
    let item = only_item(&store).await;
    assert_eq!(s(&item, attr::TITLE), "title 19");
    assert_eq!(s(&item, attr::SOURCE_UPDATED_AT), "2019-05-16T10:19:00Z");
    assert_eq!(s(&item, attr::DELIVERY_ID), "guid-19");
    assert_eq!(
        item[attr::LABELS],
        AttributeValue::L(vec![av_s("label-19")])
    );
}

#[tokio::test]
async fn sample_events_are_validly_signed_and_accepted_by_the_lambda_path() {
    let (handler, store) = setup().await;
    let root = devstack::emulator::repo_root();
    let text = std::fs::read_to_string(root.join("events/webhook.apigw.json")).unwrap();
    let event: aws_lambda_events::apigw::ApiGatewayV2httpRequest =
        serde_json::from_str(&text).unwrap();
    // The samples are signed with chronicle dev's local secret.
    let dev = WebhookHandler::new(
        store.clone(),
        Verifier::Secret(Secret::new(devstack::dev::DEV_SECRET)),
        1024 * 1024,
    );
    let response = dev.handle_apigw(event).await;
    assert_eq!(response.status_code, 200, "{response:?}");
    assert_eq!(
        to_apigw(&dev.handle(signed("ping", GUID, "{}")).await).status_code,
        401
    );
    assert_eq!(
        s(&only_item(&store).await, attr::MERGE_COMMIT_SHA),
        "c4295bd74fb0f4fda03689c3df3f2803b658fd85"
    );

    for path in devstack::replay::delivery_files(&root.join("events")).unwrap() {
        let d = devstack::replay::RecordedDelivery::load(&path).unwrap();
        let sig = d.headers.get("X-Hub-Signature-256").unwrap();
        assert_eq!(
            *sig,
            signature::sign(devstack::dev::DEV_SECRET.as_bytes(), d.body.as_bytes()),
            "{}",
            path.display()
        );
    }
    drop(handler);
}
