//! `chronicle status` and `chronicle failed` against the emulator: figures equal a hand-counted
//! fixture, the JSON parses, given-up rows come from the sparse failed index (no Scan is ever
//! sent: every request goes through a recording proxy), bad input exits 2.

use stages::domain::RepoName;
use stages::status::QueueRef;
use support::audit_proxy::AuditProxy;
use support::*;
use time::{Duration, OffsetDateTime};

const REPO: &str = "Codertocat/Hello-World";

async fn merged(t: &Tables, number: u64, received_at: OffsetDateTime) {
    let mut payload = merged_payload();
    payload["pull_request"]["number"] = serde_json::json!(number);
    // Merged in number order: the pending index sorts by merge time.
    payload["pull_request"]["merged_at"] =
        serde_json::json!(format!("2024-01-{number:02}T00:00:00Z"));
    store_merged(&t.prs, &payload, received_at).await;
}

/// Gives a row up the way the summarize worker does: claim (an attempt), then give up.
async fn given_up(t: &Tables, number: u64, reason: &str, at: &str) {
    let repo = RepoName::parse(REPO).unwrap();
    let now = OffsetDateTime::now_utc();
    let owner = format!("test-{number}");
    t.prs
        .claim_summary(&repo, number, &owner, now, now + Duration::minutes(5))
        .await
        .unwrap();
    assert!(t
        .prs
        .give_up_summary(&repo, number, &owner, reason, at)
        .await
        .unwrap());
}

#[tokio::test]
async fn status_and_failed_count_what_the_fixture_holds_without_a_scan() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let now = OffsetDateTime::now_utc();
    // Five pending rows, the first received two hours ago; two given up.
    merged(&t, 1, now - Duration::hours(2)).await;
    for n in 2..=7 {
        merged(&t, n, now).await;
    }
    given_up(
        &t,
        6,
        "summarize failed 5 times",
        "2026-12-01T10:00:00.000Z",
    )
    .await;
    given_up(&t, 7, "the row is unreadable", "2026-12-02T10:00:00.000Z").await;
    // Queues named as the local stack names them; two messages in the summarize DLQ.
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let table = t.prs.table_name().to_string();
    let queues = local_queues(&sqs, &table).await;
    for i in 0..2 {
        sqs.send_message()
            .queue_url(&queues[1].url)
            .message_body(format!("{{\"repo\":\"{REPO}\",\"prNumber\":{}}}", 6 + i))
            .send()
            .await
            .unwrap();
    }
    // The DLQ's oldest message is at least a second old when status looks.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    // Two stale pages, one whose last build failed.
    for module in ["api", "web"] {
        t.pages
            .mark_stale(REPO, module, &[2024], now)
            .await
            .unwrap();
    }
    let claimed = t
        .pages
        .claim_build(REPO, "web", "b", now, now + Duration::minutes(1), now)
        .await
        .unwrap();
    assert!(matches!(claimed, stages::store::BuildClaim::Claimed(_)));
    assert!(t
        .pages
        .record_build_failure(
            REPO,
            "web",
            "b",
            "Notion answered 403",
            Some("share the parent page with the integration"),
            now
        )
        .await
        .unwrap());

    // A module whose story model Bedrock refused: its advice is shown for the repository.
    t.pages
        .set_story(
            REPO,
            "api",
            &stages::domain::StoredStory {
                error: Some("Bedrock refused the model: ValidationException: …".into()),
                advice: Some("set the model to `us.anthropic.claude-sonnet-4-5`".into()),
                generated_at: "2026-12-03T10:00:00.000Z".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    // Every request of the subcommands through a recording proxy.
    let proxy = AuditProxy::start(endpoint()).await;
    let mut target = ops_target(&t, proxy.sdk().await);
    target.queues = queues;
    let (report, code) = ops::commands::status(&target, Some(REPO)).await.unwrap();
    assert_eq!(code, 1, "needs attention");
    // The JSON the CLI prints, parsed.
    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string_pretty(&report).unwrap()).unwrap();
    let mut shards = std::collections::BTreeMap::new();
    for n in 1..=5u64 {
        *shards
            .entry(stages::store::pending_shard(n, 4))
            .or_insert(0u64) += 1;
    }
    for shard in ["0", "1", "2", "3"] {
        assert_eq!(
            json["pending"][shard].as_u64().unwrap(),
            shards.get(shard).copied().unwrap_or(0),
            "shard {shard}: {json}"
        );
    }
    assert_eq!(json["pendingTotal"], 5);
    assert_eq!(json["oldestPending"]["number"], 1);
    assert!(json["oldestPending"]["ageSeconds"].as_i64().unwrap() >= 7_190);
    assert_eq!(json["deferred"], 0);
    assert_eq!(json["failed"], 2);
    let dlq = &json["queues"][1];
    assert_eq!(
        (dlq["visible"].as_u64(), dlq["deadLetter"].as_bool()),
        (Some(2), Some(true))
    );
    // The DLQ's messages were sent during this test, at least a second before it looked.
    let oldest = dlq["oldestAgeSeconds"]
        .as_i64()
        .expect("a DLQ with messages has an age");
    assert!((1..600).contains(&oldest), "{oldest}");
    assert_eq!(json["queues"][0]["visible"], 0);
    assert_eq!(
        json["queues"][0]["oldestAgeSeconds"],
        serde_json::Value::Null
    );
    assert_eq!(json["stalePages"], 2);
    assert_eq!(json["failingPages"][0]["module"], "web");
    assert_eq!(
        json["failingPages"][0]["advice"],
        "share the parent page with the integration"
    );
    assert_eq!(
        json["backfill"],
        serde_json::Value::Null,
        "no checkpoint yet"
    );
    assert_eq!(json["refusedStories"][0]["module"], "api");
    assert_eq!(
        json["refusedStories"][0]["advice"],
        "set the model to `us.anthropic.claude-sonnet-4-5`"
    );
    assert_eq!(json["attention"].as_array().unwrap().len(), 5, "{json}");
    let text = stages::status::render(&report);
    assert!(text.contains("needs attention:"));
    assert!(
        text.contains("story refused       Codertocat/Hello-World · api: Bedrock refused"),
        "{text}"
    );

    // `failed`: exactly the two given-up rows, newest first, with why and how many attempts.
    let rows = ops::commands::failed(&target, None).await.unwrap();
    let listed: Vec<(u64, &str, u64)> = rows
        .iter()
        .map(|r| {
            (
                r.number,
                r.failed_reason.as_deref().unwrap_or(""),
                r.attempts,
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (7, "the row is unreadable", 1),
            (6, "summarize failed 5 times", 1)
        ]
    );
    assert!(ops::commands::failed(&target, Some("acme/other"))
        .await
        .unwrap()
        .is_empty());
    assert!(ops::commands::render_failed(&rows).contains("Codertocat/Hello-World#7"));

    let calls = proxy.calls();
    assert!(!calls.is_empty());
    assert!(
        calls.iter().all(|c| c.action != "dynamodb:Scan"),
        "never a Scan: {calls:?}"
    );
    assert!(calls
        .iter()
        .any(|c| c.action == "dynamodb:Query" && c.resource.ends_with("/index/failed")));

    // Bad input: a malformed repository, exit 2 and nothing read.
    let before = proxy.calls().len();
    let (code, message) = ops::commands::status(&target, Some("not-a-repo"))
        .await
        .unwrap_err();
    assert_eq!(code, 2);
    assert!(message.contains("OWNER/REPO"), "{message}");
    let (code, _) = ops::commands::failed(&target, Some("a/b/c"))
        .await
        .unwrap_err();
    assert_eq!(code, 2);
    assert_eq!(proxy.calls().len(), before, "nothing read on bad input");

    // A row given up before the failed index existed (failedAt without failedShard) is
    // invisible until `failed --index-old` gives it the marker, once.
    merged(&t, 9, now).await;
    given_up(&t, 9, "old", "2026-11-01T00:00:00.000Z").await;
    aws_sdk_dynamodb::Client::new(&sdk)
        .update_item()
        .table_name(&table)
        .set_key(Some(stages::store::key(&RepoName::parse(REPO).unwrap(), 9)))
        .update_expression("REMOVE failedShard")
        .send()
        .await
        .unwrap();
    assert_eq!(ops::commands::failed(&target, None).await.unwrap().len(), 2);
    assert_eq!(ops::commands::index_old_failed(&target).await.unwrap(), 1);
    assert_eq!(
        ops::commands::index_old_failed(&target).await.unwrap(),
        0,
        "once"
    );
    assert_eq!(ops::commands::failed(&target, None).await.unwrap().len(), 3);
}

#[tokio::test]
async fn an_unknown_stack_is_a_usage_error() {
    let _ = sdk().await; // the emulator's endpoint in the environment
    let code = ops::commands::run_status(Some("no-such-chronicle-stack"), None, true).await;
    assert_eq!(code, 2);
    let code = ops::commands::run_failed(Some("no-such-chronicle-stack"), None, false, false).await;
    assert_eq!(code, 2);
    let code = ops::commands::run_redeliver(Some("no-such-chronicle-stack"), true, true).await;
    assert_eq!(code, 2);
    if std::env::var("GITHUB_TOKEN").is_err() {
        // The local stack without a token: nothing can be listed, said clearly, exit 2.
        assert_eq!(ops::commands::run_redeliver(None, true, true).await, 2);
    }
    match ops::commands::target(Some("no-such-chronicle-stack")).await {
        Err(e) => assert!(
            e.to_string()
                .contains("no CloudFormation stack named no-such-chronicle-stack"),
            "{e}"
        ),
        Ok(_) => panic!("an unknown stack resolved"),
    }
}

/// The summarize queue and its DLQ, named as the local stack names them after its table.
async fn local_queues(sqs: &aws_sdk_sqs::Client, table: &str) -> Vec<QueueRef> {
    let mut queues = Vec::new();
    for (suffix, dead_letter) in [("summarize", false), ("summarize-dlq", true)] {
        let name = format!("{table}-{suffix}");
        let url = sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        queues.push(QueueRef {
            role: suffix.to_string(),
            name,
            url,
            dead_letter,
        });
    }
    queues
}

fn ops_target(t: &Tables, sdk: aws_config::SdkConfig) -> ops::commands::OpsTarget {
    ops::commands::OpsTarget {
        app: None,
        sdk,
        table: stages::config::TableConfig {
            table_name: t.prs.table_name().to_string(),
            pending_shards: 4,
        },
        pages_table: t.pages.table_name().to_string(),
        queues: vec![],
        guard: Default::default(),
    }
}

/// On a deployed stack, a bulk change above ten items needs --yes (tests have no terminal to
/// ask on): refused, nothing changed; with --yes it goes ahead. A dry run previews either way,
/// and a few items need no confirmation.
#[tokio::test]
async fn a_bulk_change_to_a_deployed_stack_needs_yes_and_changes_nothing_without_it() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let now = OffsetDateTime::now_utc();
    for n in 1..=12 {
        merged(&t, n, now).await;
        given_up(
            &t,
            n,
            "summarize failed 5 times",
            "2026-12-01T10:00:00.000Z",
        )
        .await;
    }
    let mut target = ops_target(&t, sdk.clone());
    target.guard = ops::confirm::Guard {
        stack: Some("prod".into()),
        yes: false,
    };
    let failed_now = || async { t.prs.failed_rows(Some(REPO)).await.unwrap().len() };
    let (code, message) =
        ops::commands::reprocess(&target, &[], true, Some(REPO), None, false, false)
            .await
            .unwrap_err();
    assert_eq!(code, 2);
    assert!(
        message.contains("12 PRs") && message.contains("--yes"),
        "{message}"
    );
    assert_eq!(failed_now().await, 12, "nothing was changed");
    let preview = ops::commands::reprocess(&target, &[], true, Some(REPO), None, false, true)
        .await
        .unwrap();
    assert_eq!(preview.len(), 12);
    assert_eq!(failed_now().await, 12);
    // A few named PRs need no confirmation.
    let lines = ops::commands::reprocess(
        &target,
        &[format!("{REPO}#1"), format!("{REPO}#2")],
        false,
        None,
        None,
        false,
        false,
    )
    .await
    .unwrap();
    assert!(lines.iter().all(|l| l.outcome == "pending"), "{lines:?}");
    target.guard.yes = true;
    let lines = ops::commands::reprocess(&target, &[], true, Some(REPO), None, false, false)
        .await
        .unwrap();
    assert_eq!(lines.len(), 10);
    assert_eq!(failed_now().await, 0);
}

async fn summarize(handler: &std::sync::Arc<stages::summarize::SummarizeHandler>, number: u64) {
    let r = handler
        .handle(
            sqs_batch(vec![summarize_message(
                &format!("m-{number}"),
                REPO,
                number,
            )]),
            within(30),
            "inv",
        )
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
}

/// `reprocess` of a summarized PR: summarized again, its entry rewritten in place (still one),
/// its page marked stale again; a dry run and bad input change nothing; a leased row is busy;
/// `--failed` revives the given-up rows.
#[tokio::test]
async fn reprocess_summarizes_again_without_duplicating_and_bad_input_changes_nothing() {
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let handler = std::sync::Arc::new(t.summarizer(stages::tagging::ModulesConfig::empty(), 5));
    let now = OffsetDateTime::now_utc();
    for n in [3, 4, 5] {
        merged(&t, n, now).await;
    }
    summarize(&handler, 3).await;
    let repo = RepoName::parse(REPO).unwrap();
    let entries_before = t.module_entries(REPO, REPO).await;
    assert_eq!(entries_before.len(), 1);
    let version_before = t.pages.get(REPO, REPO).await.unwrap().unwrap().version;
    let target = ops_target(&t, sdk.clone());

    // Bad input first: nothing changes.
    let (code, message) = ops::commands::reprocess(
        &target,
        &[format!("{REPO}#3"), format!("{REPO}#999")],
        false,
        None,
        None,
        false,
        false,
    )
    .await
    .unwrap_err();
    assert_eq!(code, 2);
    assert!(message.contains("#999 is not in the table"), "{message}");
    for bad in ["nope#x", "a/b", "a/b#0", "#3"] {
        let (code, _) =
            ops::commands::reprocess(&target, &[bad.into()], false, None, None, false, false)
                .await
                .unwrap_err();
        assert_eq!(code, 2, "{bad}");
    }
    let (code, _) = ops::commands::reprocess(&target, &[], false, None, None, false, false)
        .await
        .unwrap_err();
    assert_eq!(code, 2, "neither PRs nor --failed");
    let (code, _) = ops::commands::reprocess(
        &target,
        &[format!("{REPO}#3")],
        false,
        Some(REPO),
        None,
        false,
        false,
    )
    .await
    .unwrap_err();
    assert_eq!(code, 2, "--repo selects given-up rows: only with --failed");
    let row = stored_row(&t.prs, REPO, 3).await;
    assert!(
        row.contains_key(stages::store::attr::SUMMARIZED_AT),
        "unchanged"
    );

    // A dry run says what it would do.
    let lines = ops::commands::reprocess(
        &target,
        &[format!("{REPO}#3")],
        false,
        None,
        None,
        false,
        true,
    )
    .await
    .unwrap();
    assert_eq!(lines[0].outcome, "wouldReprocess");
    assert!(stored_row(&t.prs, REPO, 3)
        .await
        .contains_key(stages::store::attr::SUMMARIZED_AT));

    // For real: pending again, then summarized again with one entry, its page stale again.
    let lines = ops::commands::reprocess(
        &target,
        &[format!("{REPO}#3")],
        false,
        None,
        None,
        false,
        false,
    )
    .await
    .unwrap();
    assert_eq!(lines[0].outcome, "pending");
    let row = stored_row(&t.prs, REPO, 3).await;
    assert!(!row.contains_key(stages::store::attr::SUMMARIZED_AT));
    assert!(row.contains_key(stages::store::attr::PENDING_SHARD));
    summarize(&handler, 3).await;
    let entries_after = t.module_entries(REPO, REPO).await;
    assert_eq!(entries_after.len(), 1, "rewritten, never appended");
    assert_eq!(entries_after[0].number, 3);
    let page = t.pages.get(REPO, REPO).await.unwrap().unwrap();
    assert!(
        page.version > version_before,
        "its page is marked stale again"
    );
    assert!(page.stale.is_some());

    // A row a worker holds is left alone.
    t.prs
        .claim_summary(&repo, 5, "worker", now, now + Duration::minutes(5))
        .await
        .unwrap();
    let lines = ops::commands::reprocess(
        &target,
        &[format!("{REPO}#5")],
        false,
        None,
        None,
        false,
        false,
    )
    .await
    .unwrap();
    assert_eq!(lines[0].outcome, "busy");

    // --failed: the given-up row is pending again and out of the failed index.
    given_up(
        &t,
        4,
        "summarize failed 5 times",
        "2026-12-01T10:00:00.000Z",
    )
    .await;
    let lines = ops::commands::reprocess(
        &target,
        &[],
        true,
        Some(REPO),
        Some("2026-11-30"),
        false,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        lines
            .iter()
            .map(|l| (l.number, l.outcome.as_str()))
            .collect::<Vec<_>>(),
        [(4, "pending")]
    );
    assert_eq!(t.prs.count_failed().await.unwrap(), 0);
    let row = stored_row(&t.prs, REPO, 4).await;
    assert!(!row.contains_key(stages::store::attr::FAILED_SHARD));
    assert!(!row.contains_key(stages::store::attr::FAILED_AT));
    assert!(!row.contains_key(stages::store::attr::ATTEMPTS));
    summarize(&handler, 4).await;
    assert!(stored_row(&t.prs, REPO, 4)
        .await
        .contains_key(stages::store::attr::SUMMARIZED_AT));
}

/// `rebuild --module` marks that module's page only; an unknown module changes nothing.
#[tokio::test]
async fn rebuild_of_one_module_marks_only_that_module() {
    use stages::publish::MarkdownPublisher;
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let now = OffsetDateTime::now_utc();
    for module in ["api", "web"] {
        let number = if module == "api" { 1 } else { 2 };
        let e = stages::domain::ModuleEntry {
            repo: REPO.into(),
            module: module.into(),
            number,
            title: format!("Change to {module}"),
            url: format!("https://github.com/{REPO}/pull/{number}"),
            author: "octocat".into(),
            merged_at: "2024-06-01T10:00:00Z".into(),
            kind: Some("feat".into()),
            breaking: false,
            labels: vec![],
            summary: "Why it changed.".into(),
            linked_issues: vec![],
            additions: 3,
            deletions: 1,
            files: vec![stages::domain::FileChange {
                path: format!("{module}/src/lib.rs"),
                additions: 3,
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
        };
        t.put_entry(&e).await;
    }
    let dir = std::env::temp_dir().join(format!("chronicle-ops-{}", uuid::Uuid::new_v4().simple()));
    let builder = t.builder(
        std::sync::Arc::new(MarkdownPublisher::new(&dir)),
        stages::tagging::ModulesConfig::empty(),
        std::time::Duration::ZERO,
    );
    for _ in 0..20 {
        builder
            .tick(
                now,
                within(60),
                &format!("tick-{}", uuid::Uuid::new_v4().simple()),
            )
            .await
            .unwrap();
        if t.pages.stale_pages().await.unwrap().is_empty() {
            break;
        }
    }
    assert!(t.pages.stale_pages().await.unwrap().is_empty(), "built");
    let target = ops_target(&t, sdk.clone());

    let (code, message) = ops::commands::rebuild(&target, REPO, Some("nope"), false)
        .await
        .unwrap_err();
    assert_eq!(code, 2);
    assert!(message.contains("no page for module"), "{message}");
    let (code, _) = ops::commands::rebuild(&target, "not a repo", None, false)
        .await
        .unwrap_err();
    assert_eq!(code, 2);
    assert_eq!(
        ops::commands::rebuild(&target, REPO, Some("api"), true)
            .await
            .unwrap(),
        ["api"],
        "dry run"
    );
    assert!(
        t.pages.stale_pages().await.unwrap().is_empty(),
        "a dry run marks nothing"
    );

    let marked = ops::commands::rebuild(&target, REPO, Some("api"), false)
        .await
        .unwrap();
    assert_eq!(marked, ["api"]);
    let stale: Vec<String> = t
        .pages
        .stale_pages()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.module)
        .collect();
    assert_eq!(stale, ["api"], "only that module");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `redrive summarize` on the local stack (whose emulator lacks StartMessageMoveTask): every
/// DLQ message moves to the summarize queue once, body and attributes kept, and a given-up
/// row whose message is redriven is summarized again; a dry run moves nothing.
#[tokio::test]
async fn redrive_moves_every_dlq_message_once_and_a_redriven_given_up_row_is_summarized() {
    use aws_sdk_sqs::types::MessageAttributeValue;
    use ops::commands::{redrive, RedriveQueue};
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let table = t.prs.table_name().to_string();
    let queues = local_queues(&sqs, &table).await;
    let (queue, dlq) = (queues[0].url.clone(), queues[1].url.clone());
    // A given-up row, its message in the DLQ as the summarize worker sends it.
    let now = OffsetDateTime::now_utc();
    merged(&t, 8, now).await;
    let failed_at = "2026-12-02T09:00:00.000Z";
    given_up(&t, 8, "summarize failed 5 times", failed_at).await;
    let attribute = |v: &str| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .unwrap()
    };
    sqs.send_message()
        .queue_url(&dlq)
        .message_body(format!("{{\"repo\":\"{REPO}\",\"prNumber\":8}}"))
        .message_attributes(
            stages::summarize::GIVEN_UP_AT_ATTRIBUTE,
            attribute(failed_at),
        )
        .send()
        .await
        .unwrap();
    // And 24 more (rows that do not exist: they are finished when summarized).
    for n in 100..124 {
        sqs.send_message()
            .queue_url(&dlq)
            .message_body(format!("{{\"repo\":\"{REPO}\",\"prNumber\":{n}}}"))
            .send()
            .await
            .unwrap();
    }
    let mut target = ops_target(&t, sdk.clone());
    target.queues = queues;

    let dry = redrive(&target, RedriveQueue::Summarize, false, true)
        .await
        .unwrap();
    assert_eq!((dry.messages, dry.dry_run), (25, true));
    let (code, _) = redrive(&target, RedriveQueue::Schedule, false, false)
        .await
        .unwrap_err();
    assert_eq!(code, 2, "the local stack has no schedule DLQ");

    let report = redrive(&target, RedriveQueue::Summarize, false, false)
        .await
        .unwrap();
    assert_eq!(report.messages, 25);
    // The DLQ is empty; the queue holds each message once, the attributes kept.
    let mut bodies = std::collections::BTreeMap::new();
    let mut given_up_message = None;
    loop {
        let out = sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        let messages = out.messages.unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        for m in messages {
            *bodies.entry(m.body().unwrap().to_string()).or_insert(0) += 1;
            if m.body().unwrap().contains("\"prNumber\":8}") {
                given_up_message = Some(m.clone());
            }
            sqs.delete_message()
                .queue_url(&queue)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
    assert_eq!(bodies.len(), 25);
    assert!(bodies.values().all(|n| *n == 1), "each once: {bodies:?}");
    let dlq_left = sqs
        .receive_message()
        .queue_url(&dlq)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert!(dlq_left.is_empty());
    let m = given_up_message.expect("the given-up row's message was moved");
    assert_eq!(
        m.message_attributes().unwrap()[stages::summarize::GIVEN_UP_AT_ATTRIBUTE].string_value(),
        Some(failed_at)
    );

    // The summarize worker receives it from the queue: the row comes back and is summarized.
    let event = lambda_message(&m);
    let handler = std::sync::Arc::new(t.summarizer(stages::tagging::ModulesConfig::empty(), 5));
    let r = handler
        .handle(sqs_batch(vec![event]), within(30), "inv")
        .await;
    assert!(r.batch_item_failures.is_empty(), "{r:?}");
    let row = stored_row(&t.prs, REPO, 8).await;
    assert!(
        row.contains_key(stages::store::attr::SUMMARIZED_AT),
        "{row:?}"
    );
    assert!(!row.contains_key(stages::store::attr::FAILED_SHARD));
    assert_eq!(t.prs.count_failed().await.unwrap(), 0);
}

/// The stream records of the PR table, as the emulator's stream serves them: (sequence, PR).
async fn stream_records(
    sdk: &aws_config::SdkConfig,
    table: &str,
) -> (String, String, Vec<(String, u64)>) {
    let dynamo = aws_sdk_dynamodb::Client::new(sdk);
    let streams = aws_sdk_dynamodbstreams::Client::new(sdk);
    let arn = dynamo
        .describe_table()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap()
        .latest_stream_arn
        .unwrap();
    let shard = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap()
        .stream_description
        .unwrap()
        .shards
        .unwrap()[0]
        .shard_id
        .clone()
        .unwrap();
    let it = streams
        .get_shard_iterator()
        .stream_arn(&arn)
        .shard_id(&shard)
        .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
        .send()
        .await
        .unwrap()
        .shard_iterator
        .unwrap();
    let records = streams
        .get_records()
        .shard_iterator(it)
        .send()
        .await
        .unwrap()
        .records
        .unwrap_or_default();
    let out = records
        .iter()
        .filter(|r| r.event_name().map(|e| e.as_str()) == Some("INSERT"))
        .map(|r| {
            let d = r.dynamodb().unwrap();
            let n = d.keys().unwrap()[stages::store::attr::PR_NUMBER]
                .as_n()
                .unwrap()
                .parse()
                .unwrap();
            (d.sequence_number().unwrap().to_string(), n)
        })
        .collect();
    (arn, shard, out)
}

/// `redrive enrich`: the DLQ's OnFailure records name stream batches; the PRs in them are read
/// back from the emulator's stream, enriched from the GitHub stand-in, and one summarized
/// meanwhile without enrichment is put back to be summarized; the message is then deleted. A
/// record that names no batch stays, with why. A dry run changes nothing.
#[tokio::test]
async fn redrive_enrich_re_enriches_the_prs_the_stream_dlq_names() {
    use ops::commands::redrive_enrich;
    let sdk = sdk().await;
    let t = fresh_tables(&sdk).await;
    let now = OffsetDateTime::now_utc();
    for n in [4, 5, 6] {
        merged(&t, n, now).await;
    }
    // #5 was summarized without enrichment (the stream gave up on it).
    let summarizer = std::sync::Arc::new(t.summarizer(stages::tagging::ModulesConfig::empty(), 5));
    summarize(&summarizer, 5).await;
    let (arn, shard, records) = stream_records(&sdk, t.prs.table_name()).await;
    assert_eq!(records.len(), 3, "{records:?}");
    // Lambda's OnFailure record for the batch [#4, #5] (not #6).
    let onfailure = serde_json::json!({
        "requestContext": {"requestId": "r-1", "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:enrich",
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 4},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": "2026-12-03T10:00:00.000Z",
        "DDBStreamBatchInfo": {"shardId": shard, "startSequenceNumber": records[0].0,
            "endSequenceNumber": records[1].0, "approximateArrivalOfFirstRecord": "2026-12-03T09:59:00Z",
            "approximateArrivalOfLastRecord": "2026-12-03T09:59:00Z", "batchSize": 2, "streamArn": arn}
    });
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let dlq_name = format!("{}-enrich-stream-dlq", t.prs.table_name());
    let dlq = sqs
        .create_queue()
        .queue_name(&dlq_name)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    for body in [onfailure.to_string(), "{\"not\": \"a record\"}".to_string()] {
        sqs.send_message()
            .queue_url(&dlq)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let mut target = ops_target(&t, sdk.clone());
    target.queues = vec![QueueRef {
        role: "enrich-stream-dlq".into(),
        name: dlq_name.clone(),
        url: dlq.clone(),
        dead_letter: true,
    }];
    let enriched = |item: &stages::store::Item| item.contains_key(stages::store::attr::ENRICHED_AT);

    // Without a token only a dry run is possible; it names the PRs and changes nothing.
    let err = redrive_enrich(&target, None, false).await.unwrap_err();
    assert_eq!(err.0, 2, "{err:?}");
    assert!(err.1.contains("GITHUB_TOKEN"), "{}", err.1);
    let dry = redrive_enrich(&target, None, true).await.unwrap();
    let named: Vec<(u64, &str)> = dry
        .prs
        .iter()
        .map(|l| (l.number, l.outcome.as_str()))
        .collect();
    assert_eq!(
        named,
        vec![(4, "wouldEnrich"), (5, "wouldEnrich")],
        "{dry:?}"
    );
    assert_eq!(
        (dry.messages, dry.deleted, dry.left.len()),
        (2, 0, 1),
        "{dry:?}"
    );
    for n in [4, 5] {
        assert!(!enriched(&stored_row(&t.prs, REPO, n).await));
    }

    const TOKEN: &str = "ghp_redrive_enrich";
    let github = standins::github_standin::GitHubStandIn::start(TOKEN)
        .await
        .unwrap();
    for n in [4, 5, 6] {
        github.put_pull(REPO, standin_pull(REPO, n, 3));
    }
    let apis = stages::enrich::GitHubApis::new(
        github.url(),
        &stages::secret::Secret::new(TOKEN),
        std::time::Duration::from_secs(10),
        1,
    )
    .unwrap();
    let handler = stages::enrich::EnrichHandler::new(t.prs.clone(), Some(apis), 1, 500);
    // A dry run with a token changes nothing either.
    let dry = redrive_enrich(&target, Some(&handler), true).await.unwrap();
    assert!(
        dry.prs.iter().all(|l| l.outcome == "wouldEnrich"),
        "{dry:?}"
    );
    assert_eq!(dry.deleted, 0);
    for n in [4, 5] {
        assert!(!enriched(&stored_row(&t.prs, REPO, n).await));
    }
    let report = redrive_enrich(&target, Some(&handler), false)
        .await
        .unwrap();
    let outcomes: Vec<(u64, &str)> = report
        .prs
        .iter()
        .map(|l| (l.number, l.outcome.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        vec![(4, "enriched"), (5, "enriched; to be summarized again")],
        "{report:?}"
    );
    assert_eq!((report.messages, report.deleted), (2, 1), "{report:?}");
    assert_eq!(report.left.len(), 1, "{report:?}");
    assert!(
        report.left[0].reason.contains("DDBStreamBatchInfo"),
        "{report:?}"
    );
    for n in [4, 5] {
        let row = stored_row(&t.prs, REPO, n).await;
        assert!(enriched(&row), "#{n} enriched: {row:?}");
        assert!(
            row.contains_key(stages::store::attr::FILES),
            "#{n} has its files"
        );
        // Pending again (#5) or still (#4): the sweeper sends them to be summarized.
        assert!(
            row.contains_key(stages::store::attr::PENDING_SHARD),
            "#{n}: {row:?}"
        );
    }
    assert!(
        !enriched(&stored_row(&t.prs, REPO, 6).await),
        "#6 was not named"
    );

    // Run again: the batch's message is gone; only the unreadable one is there (left again).
    let again = redrive_enrich(&target, Some(&handler), false)
        .await
        .unwrap();
    assert!(again.prs.is_empty(), "{again:?}");
    assert_eq!((again.messages, again.left.len()), (1, 1), "{again:?}");
    github.stop().await;
}
