//! The real `chronicle dev` binary: starts its own emulator, serves the webhook on loopback,
//! stores a signed delivery, and on Ctrl-C (SIGINT) stops cleanly, emulator included.

use std::process::Stdio;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

#[tokio::test]
async fn chronicle_dev_serves_a_delivery_and_stops_its_emulator_on_ctrl_c() {
    let table = format!("cli-{}", std::process::id());
    let mut child = Command::new(env!("CARGO_BIN_EXE_chronicle"))
        .args(["dev", "--port", "0"])
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("GITHUB_WEBHOOK_SECRET")
        .env("TABLE_NAME", &table)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut emulator, mut webhook) = (None, None);
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let word = |prefix: &str| {
                line.trim()
                    .strip_prefix(prefix)
                    .map(|r| r.split_whitespace().next().unwrap_or("").to_string())
            };
            if let Some(url) = word("emulator") {
                assert!(line.contains("started by chronicle dev"), "{line}");
                emulator = Some(url);
            }
            if let Some(url) = line.trim().strip_prefix("webhook   POST ") {
                webhook = Some(url.to_string());
            }
            if line.contains("Ctrl-C to stop") {
                break;
            }
        }
    })
    .await
    .expect("chronicle dev printed where it listens");
    let (emulator, webhook) = (emulator.unwrap(), webhook.unwrap());

    let body =
        devstack::samples::merged(devstack::samples::webhook("pull_request.closed.1")).to_string();
    let signature = stages::signature::sign(devstack::dev::DEV_SECRET.as_bytes(), body.as_bytes());
    let http = reqwest::Client::new();
    let answer: serde_json::Value = http
        .post(&webhook)
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", "cli-1")
        .header("x-hub-signature-256", signature)
        .body(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["stored"], "inserted", "{answer}");

    let dynamo = aws_sdk_dynamodb::Client::new(&ops::stack::local_sdk_config(&emulator).await);
    let item = dynamo
        .get_item()
        .table_name(&table)
        .key("repo", AttributeValue::S("Codertocat/Hello-World".into()))
        .key("prNumber", AttributeValue::N("2".into()))
        .send()
        .await
        .unwrap()
        .item
        .expect("stored in the emulator chronicle dev started");
    assert_eq!(item["deliveryId"], AttributeValue::S("cli-1".into()));

    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("stops on Ctrl-C")
        .unwrap();
    assert!(status.success(), "{status}");
    let after = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap()
        .get(&emulator)
        .send()
        .await;
    assert!(
        after.is_err(),
        "the emulator chronicle dev started is still answering at {emulator}"
    );
}
