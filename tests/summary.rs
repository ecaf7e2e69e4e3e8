//! The summary paragraph: body cleaning on the real recorded PR bodies, and the LLM path
//! against a strict local stand-in for the Anthropic Messages API (`support::messages_stub`),
//! including every failure's fallback to the deterministic extractive summary.

use std::time::{Duration, Instant};

use chronicle_llm::{summarizer_for, LlmSummarizer};
use serde_json::Value;
use stages::config::{LlmConfig, LlmProvider};
use stages::secret::Secret;
use stages::secret::SecretSource;
use stages::summary::{
    clean_body, extractive, Summarizer, Summary, SummaryInput, SummarySource, SUMMARY_MAX_CHARS,
};
use support::messages_stub::{gap, MessagesStub, Reply, ANTHROPIC_VERSION, DEFAULT_TEXT};
use support::samples;

const KEY: &str = "sk-ant-api03-test-key";
const MODEL: &str = "claude-sonnet-4-5";

/// HAND-WRITTEN: a PR template as people fill it in (comments, headings, boxes).
const BODY: &str = "<!-- Describe your change. -->\n\
## Description\n\
\n\
The summarize worker now writes each PR's paragraph once and stores it on the row, so a\n\
redelivered message never asks the LLM twice.\n\
\n\
## Type of change\n\
- [x] New feature (non-breaking change which adds functionality)\n\
- [ ] Bug fix\n\
\n\
## Checklist\n\
- [x] Tests\n";

const EXTRACTED: &str = "The summarize worker now writes each PR's paragraph once and stores it \
                         on the row, so a redelivered message never asks the LLM twice.";

struct Owned {
    labels: Vec<String>,
    files: Vec<String>,
    issues: Vec<String>,
    modules: Vec<stages::domain::ModuleName>,
}

fn owned() -> Owned {
    Owned {
        labels: vec!["enhancement".into(), "summarize".into()],
        // 25 paths, most changed first: the prompt lists 20.
        files: (0..25)
            .map(|i| format!("shared/src/file{i:02}.rs"))
            .collect(),
        issues: vec!["Summaries are generated twice on redelivery (closed)".into()],
        modules: vec!["summarize".into()],
    }
}

fn input(o: &Owned) -> SummaryInput<'_> {
    SummaryInput {
        title: "feat(summarize): store the summary on the row",
        body: Some(BODY),
        labels: &o.labels,
        files: &o.files,
        issues: &o.issues,
        modules: &o.modules,
    }
}

/// A deadline no test reaches: the summarizer's own timeouts apply.
fn far() -> std::time::Instant {
    std::time::Instant::now() + Duration::from_secs(600)
}

/// Fast backoff for the tests that are about what is retried, not how long it waits.
fn llm(stub: &MessagesStub, timeout: Duration) -> LlmSummarizer {
    LlmSummarizer::new(&stub.url(), Secret::new(KEY), MODEL, timeout)
        .with_retry(2, Duration::from_millis(50))
}

fn fallback(o: &Owned) -> Summary {
    let s = extractive(&input(o));
    assert_eq!(s.text, EXTRACTED);
    assert_eq!(s.source, SummarySource::Extractive);
    s
}

// --- body cleaning on the real recorded bodies ---

/// Every body in the recorded fixtures (webhook `pull_request` examples and the REST examples)
/// is plain prose: cleaning keeps it whole and it is its own summary.
#[test]
fn every_recorded_body_is_kept_and_is_its_own_summary() {
    let mut bodies: Vec<(String, String)> = Vec::new();
    for name in samples::pull_request_examples() {
        if let Some(body) = samples::webhook(&name)["pull_request"]["body"].as_str() {
            bodies.push((name, body.to_string()));
        }
    }
    let rest = samples::fixtures_dir().join("rest");
    for file in ["pulls.get.json", "pulls.list.json"] {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(rest.join(file)).unwrap()).unwrap();
        let pulls = match v {
            Value::Array(a) => a,
            one => vec![one],
        };
        for p in pulls {
            if let Some(body) = p["body"].as_str() {
                bodies.push((file.to_string(), body.to_string()));
            }
        }
    }
    assert!(bodies.len() >= 20, "{} bodies", bodies.len());
    for (name, body) in &bodies {
        assert_eq!(clean_body(body), body.trim(), "{name}");
        let s = extractive(&SummaryInput {
            title: "Update the README with new information.",
            body: Some(body),
            ..SummaryInput::default()
        });
        assert_eq!(s.text, body.trim(), "{name}");
    }
}

// --- the LLM path ---

#[tokio::test]
async fn llm_success_sends_what_the_api_expects_and_uses_its_paragraph() {
    let stub = MessagesStub::start(KEY).await;
    stub.set_default(Reply::Text(format!("\n  {DEFAULT_TEXT}\n\n")));
    let o = owned();
    let s = llm(&stub, Duration::from_secs(5))
        .summarize(&input(&o), far())
        .await;
    assert_eq!(
        s,
        Summary {
            text: DEFAULT_TEXT.to_string(),
            kind: Some("feat".into()),
            source: SummarySource::Llm {
                model: MODEL.into()
            },
        }
    );

    let requests = stub.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.status, Some(200));
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.headers["x-api-key"], KEY);
    assert_eq!(r.headers["anthropic-version"], ANTHROPIC_VERSION);
    assert_eq!(r.headers["content-type"], "application/json");
    let body = r.body.as_ref().expect("a JSON body");
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["max_tokens"], 400);
    let system = body["system"].as_str().unwrap();
    assert!(system.contains("one paragraph of plain prose"), "{system}");
    assert!(system.contains("600 characters") && system.contains("No Markdown headings"));
    assert!(system.contains("new to the codebase"));
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    let content = messages[0]["content"].as_str().unwrap();
    for expected in [
        "Title: store the summary on the row\n",
        "Conventional-commit type: feat\n",
        "Labels: enhancement, summarize\n",
        "Modules: summarize\n",
        "Changed files (most changed first; 20 of 25):\n- shared/src/file00.rs\n",
        "- shared/src/file19.rs\n",
        "Linked issues:\n- Summaries are generated twice on redelivery (closed)\n",
        "Description:\nThe summarize worker now writes each PR's paragraph once",
    ] {
        assert!(content.contains(expected), "{expected:?} not in {content}");
    }
    // The cleaned body, not the raw one; no more than 20 files.
    assert!(!content.contains("file20"), "{content}");
    for noise in ["<!--", "## ", "Checklist", "Type of change", "[x]"] {
        assert!(!content.contains(noise), "{noise:?} in {content}");
    }
    stub.stop().await;
}

#[tokio::test]
async fn overloaded_529_is_retried_then_succeeds() {
    let stub = MessagesStub::start(KEY).await;
    stub.script([Reply::Overloaded]);
    let o = owned();
    let s = llm(&stub, Duration::from_secs(5))
        .summarize(&input(&o), far())
        .await;
    assert_eq!(s.text, DEFAULT_TEXT);
    assert!(matches!(s.source, SummarySource::Llm { .. }));
    let statuses: Vec<_> = stub.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(529), Some(200)]);
    stub.stop().await;
}

#[tokio::test]
async fn rate_limited_429_waits_for_retry_after_then_succeeds() {
    let stub = MessagesStub::start(KEY).await;
    stub.script([Reply::RateLimited {
        retry_after_secs: 1,
    }]);
    let o = owned();
    let s = llm(&stub, Duration::from_secs(5))
        .summarize(&input(&o), far())
        .await;
    assert_eq!(s.text, DEFAULT_TEXT);
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].status, Some(429));
    // retry-after (1 s) is honoured instead of the 50 ms backoff.
    let waited = gap(&requests[0], &requests[1]);
    assert!(waited >= Duration::from_millis(950), "{waited:?}");
    stub.stop().await;
}

#[tokio::test]
async fn a_retry_after_beyond_five_seconds_is_not_waited_for() {
    let stub = MessagesStub::start(KEY).await;
    stub.set_default(Reply::RateLimited {
        retry_after_secs: 30,
    });
    let o = owned();
    let started = Instant::now();
    let s = llm(&stub, Duration::from_secs(5))
        .summarize(&input(&o), far())
        .await;
    assert_eq!(s, fallback(&o));
    assert_eq!(stub.request_count(), 1);
    assert!(started.elapsed() < Duration::from_secs(3));
    stub.stop().await;
}

#[tokio::test]
async fn unauthorized_401_falls_back_at_once_without_retry() {
    let stub = MessagesStub::start(KEY).await;
    stub.set_default(Reply::Unauthorized);
    let o = owned();
    let s = llm(&stub, Duration::from_secs(5))
        .summarize(&input(&o), far())
        .await;
    assert_eq!(s, fallback(&o));
    assert_eq!(s.kind.as_deref(), Some("feat"));
    let statuses: Vec<_> = stub.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(401)]);

    // A wrong key is refused by the stand-in itself, the same way, and not retried either.
    let wrong = LlmSummarizer::new(
        &stub.url(),
        Secret::new("sk-wrong"),
        MODEL,
        Duration::from_secs(5),
    );
    stub.set_default(Reply::Text(DEFAULT_TEXT.into()));
    assert_eq!(wrong.summarize(&input(&o), far()).await, fallback(&o));
    assert_eq!(stub.request_count(), 2);
    assert_eq!(stub.requests()[1].status, Some(401));
    stub.stop().await;
}

#[tokio::test]
async fn a_hanging_api_times_out_each_attempt_then_falls_back() {
    let stub = MessagesStub::start(KEY).await;
    stub.set_default(Reply::Hang);
    let o = owned();
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let s = llm(&stub, timeout).summarize(&input(&o), far()).await;
    let elapsed = started.elapsed();
    assert_eq!(s, fallback(&o));
    // Timeouts are retried: 1 + 2 attempts, each cut at 300 ms (plus 50 + 100 ms backoff).
    assert_eq!(stub.request_count(), 3);
    assert!(stub.requests().iter().all(|r| r.status.is_none()));
    assert!(elapsed >= Duration::from_millis(1_000), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    stub.stop().await;
}

/// With the production defaults (2 retries, 500 ms then 1 s backoff).
#[tokio::test]
async fn an_api_that_always_answers_500_gets_two_retries_then_the_fallback() {
    let stub = MessagesStub::start(KEY).await;
    stub.set_default(Reply::ServerError);
    let o = owned();
    let s = LlmSummarizer::new(&stub.url(), Secret::new(KEY), MODEL, Duration::from_secs(5))
        .summarize(&input(&o), far())
        .await;
    assert_eq!(s, fallback(&o));
    let requests = stub.requests();
    assert_eq!(requests.len(), 3, "one attempt and two retries");
    assert!(requests.iter().all(|r| r.status == Some(500)));
    let first = gap(&requests[0], &requests[1]);
    let second = gap(&requests[1], &requests[2]);
    assert!(first >= Duration::from_millis(450), "{first:?}");
    assert!(second >= Duration::from_millis(950), "{second:?}");
    // Every attempt sent the same request.
    assert!(requests.iter().all(|r| r.raw_body == requests[0].raw_body));
    stub.stop().await;
}

#[tokio::test]
async fn a_malformed_answer_falls_back_without_retry() {
    let stub = MessagesStub::start(KEY).await;
    stub.set_default(Reply::Malformed);
    let o = owned();
    let s = llm(&stub, Duration::from_secs(5))
        .summarize(&input(&o), far())
        .await;
    assert_eq!(s, fallback(&o));
    assert_eq!(stub.request_count(), 1);
    stub.stop().await;
}

#[tokio::test]
async fn a_cut_off_answer_falls_back_without_retry() {
    for stop in ["max_tokens", "model_context_window_exceeded"] {
        let stub = MessagesStub::start(KEY).await;
        stub.set_default(Reply::CutOff("The change moves the retry of".into(), stop));
        let o = owned();
        let s = llm(&stub, Duration::from_secs(5))
            .summarize(&input(&o), far())
            .await;
        assert_eq!(s, fallback(&o), "{stop}");
        assert_eq!(stub.request_count(), 1, "{stop}");
        stub.stop().await;
    }
}

#[tokio::test]
async fn an_unreachable_api_falls_back() {
    let stub = MessagesStub::start(KEY).await;
    let url = stub.url();
    stub.stop().await;
    let o = owned();
    let s = LlmSummarizer::new(&url, Secret::new(KEY), MODEL, Duration::from_secs(2))
        .with_retry(1, Duration::from_millis(10))
        .summarize(&input(&o), far())
        .await;
    assert_eq!(s, fallback(&o));
}

#[tokio::test]
async fn a_long_answer_is_one_paragraph_capped_cleanly() {
    let stub = MessagesStub::start(KEY).await;
    let long = "The worker claims the row, renders the page and commits.\n\n".repeat(40);
    stub.set_default(Reply::Text(long.clone()));
    let o = owned();
    let s = llm(&stub, Duration::from_secs(5))
        .summarize(&input(&o), far())
        .await;
    assert!(matches!(s.source, SummarySource::Llm { .. }));
    assert!(s.text.chars().count() <= SUMMARY_MAX_CHARS, "{}", s.text);
    assert!(!s.text.contains('\n'));
    let head = s.text.strip_suffix('…').expect("cut with an ellipsis");
    let flat = long.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.starts_with(head));
    assert!(!head.ends_with([' ', ',', '.']), "{head:?}");
    stub.stop().await;
}

#[tokio::test]
async fn one_llm_setting_chooses_the_summarizer() {
    let stub = MessagesStub::start(KEY).await;
    stub.set_default(Reply::Text("From the stand-in.".into()));
    let url = stub.url();
    let o = owned();
    let sdk = support::sdk().await;
    let anthropic = |model: &str, key: SecretSource| LlmConfig {
        provider: LlmProvider::Anthropic {
            url: url.clone(),
            key,
        },
        model: model.to_string(),
    };
    let with_key = summarizer_for(
        Some(&anthropic(
            "claude-haiku-4-5",
            SecretSource::Plain(Secret::new(KEY)),
        )),
        &sdk,
    )
    .await;
    let s = with_key.summarize(&input(&o), far()).await;
    assert_eq!(s.text, "From the stand-in.");
    assert_eq!(
        s.source,
        SummarySource::Llm {
            model: "claude-haiku-4-5".into()
        }
    );
    assert_eq!(
        stub.requests()[0].body.as_ref().unwrap()["model"],
        "claude-haiku-4-5"
    );
    // No summary model, or Anthropic without a key: extractive, and nothing is sent.
    let none = summarizer_for(None, &sdk).await;
    assert_eq!(none.summarize(&input(&o), far()).await, fallback(&o));
    let keyless = summarizer_for(
        Some(&anthropic("claude-haiku-4-5", SecretSource::Unset)),
        &sdk,
    )
    .await;
    assert_eq!(keyless.summarize(&input(&o), far()).await, fallback(&o));
    assert_eq!(stub.request_count(), 1);
    stub.stop().await;
}

/// The summary through Bedrock, the same setting as the story's: an inference profile is asked
/// with the summary prompt; a profile-only model named by its bare id is refused, the summary
/// falls back, and the refusal is counted for the alarm.
#[tokio::test]
async fn bedrock_writes_the_summary_through_an_inference_profile() {
    use support::converse_stub::{ConverseReply, ConverseStub};
    const PROFILE: &str = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
    let stub = ConverseStub::start(PROFILE).await;
    stub.script([ConverseReply::Text(
        "The summarize worker now\nstores each paragraph once.".into(),
    )]);
    let sdk = support::sdk().await;
    let o = owned();
    let summarizer = chronicle_llm::WriterSummarizer::new(chronicle_llm::Writer::bedrock_with(
        stub.client(&sdk),
        PROFILE,
    ));
    let s = summarizer.summarize(&input(&o), far()).await;
    assert_eq!(
        s.text,
        "The summarize worker now stores each paragraph once."
    );
    assert_eq!(
        s.source,
        SummarySource::Llm {
            model: format!("bedrock/{PROFILE}")
        }
    );
    let sent = &stub.requests()[0].body;
    assert!(sent["system"][0]["text"]
        .as_str()
        .unwrap()
        .contains("summary paragraph"));
    assert_eq!(sent["inferenceConfig"]["maxTokens"], 400);
    assert_eq!(summarizer.take_refusals(), 0);

    let bare = chronicle_llm::WriterSummarizer::new(chronicle_llm::Writer::bedrock_with(
        stub.client(&sdk),
        "anthropic.claude-haiku-4-5-20251001-v1:0",
    ));
    assert_eq!(bare.summarize(&input(&o), far()).await, fallback(&o));
    assert_eq!(bare.take_refusals(), 1);
    assert_eq!(bare.take_refusals(), 0, "taken once");
    assert_eq!(stub.requests().last().unwrap().status, 400);
}

/// The stand-in refuses what the real API refuses, so a client that passes it is not passing
/// by leniency.
#[tokio::test]
async fn the_stand_in_is_strict() {
    let stub = MessagesStub::start(KEY).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/messages", stub.url());
    let good = serde_json::json!({
        "model": MODEL,
        "max_tokens": 10,
        "messages": [{ "role": "user", "content": "hi" }],
    });
    let send = |key: Option<&str>, version: Option<&str>, ctype: &str, body: String| {
        let mut r = client
            .post(&url)
            .header("content-type", ctype.to_string())
            .body(body);
        if let Some(k) = key {
            r = r.header("x-api-key", k.to_string());
        }
        if let Some(v) = version {
            r = r.header("anthropic-version", v.to_string());
        }
        r.send()
    };
    let json = "application/json";
    let error = |v: Value| v["error"]["type"].as_str().unwrap_or_default().to_string();

    let cases: Vec<(u16, &str, reqwest::Response)> = vec![
        (401, "authentication_error", send(None, Some(ANTHROPIC_VERSION), json, good.to_string()).await.unwrap()),
        (401, "authentication_error", send(Some("nope"), Some(ANTHROPIC_VERSION), json, good.to_string()).await.unwrap()),
        (400, "invalid_request_error", send(Some(KEY), None, json, good.to_string()).await.unwrap()),
        (400, "invalid_request_error", send(Some(KEY), Some("2024-01-01"), json, good.to_string()).await.unwrap()),
        (400, "invalid_request_error", send(Some(KEY), Some(ANTHROPIC_VERSION), "text/plain", good.to_string()).await.unwrap()),
        (400, "invalid_request_error", send(Some(KEY), Some(ANTHROPIC_VERSION), json, "{not json".into()).await.unwrap()),
        (400, "invalid_request_error", send(Some(KEY), Some(ANTHROPIC_VERSION), json, r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#.into()).await.unwrap()),
        (400, "invalid_request_error", send(Some(KEY), Some(ANTHROPIC_VERSION), json, r#"{"model":"m","max_tokens":5,"messages":[]}"#.into()).await.unwrap()),
        (400, "invalid_request_error", send(Some(KEY), Some(ANTHROPIC_VERSION), json, r#"{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}"#.into()).await.unwrap()),
        (400, "invalid_request_error", send(Some(KEY), Some(ANTHROPIC_VERSION), json, r#"{"model":"m","max_tokens":5,"prompt":"x","messages":[{"role":"user","content":"hi"}]}"#.into()).await.unwrap()),
        (200, "", send(Some(KEY), Some(ANTHROPIC_VERSION), "application/json; charset=utf-8", good.to_string()).await.unwrap()),
    ];
    for (i, (status, kind, response)) in cases.into_iter().enumerate() {
        assert_eq!(response.status().as_u16(), status, "case {i}");
        assert!(response.headers().contains_key("request-id"), "case {i}");
        let v: Value = response.json().await.unwrap();
        if status == 200 {
            assert_eq!(v["type"], "message");
            assert_eq!(v["role"], "assistant");
            assert_eq!(v["model"], MODEL);
            assert_eq!(v["content"][0]["type"], "text");
            assert_eq!(v["stop_reason"], "end_turn");
            assert!(v["id"].as_str().unwrap().starts_with("msg_"));
            assert!(v["usage"]["output_tokens"].as_u64().unwrap() > 0);
        } else {
            assert_eq!(v["type"], "error", "case {i}");
            assert_eq!(error(v), kind, "case {i}");
        }
    }
    // Refusals do not consume scripted replies.
    stub.script([Reply::Overloaded]);
    let refused = send(
        Some("nope"),
        Some(ANTHROPIC_VERSION),
        json,
        good.to_string(),
    )
    .await
    .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(stub.pending(), 1);
    let overloaded = send(Some(KEY), Some(ANTHROPIC_VERSION), json, good.to_string())
        .await
        .unwrap();
    assert_eq!(overloaded.status().as_u16(), 529);
    assert_eq!(error(overloaded.json().await.unwrap()), "overloaded_error");
    stub.stop().await;
}

/// Issue 38, defect 5: an answer the model's filter or guardrail withheld (Bedrock's
/// `content_filtered` and `guardrail_intervened`, Anthropic's `refusal`, an OpenAI-compatible
/// `content_filter`) is final: exactly one paid call, the extractive summary (never the
/// guardrail's canned text), the source saying it was withheld and why, and counted once.
#[tokio::test]
async fn a_withheld_summary_costs_one_call_and_falls_back() {
    use support::converse_stub::{ConverseReply, ConverseStub};
    const PROFILE: &str = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
    let sdk = support::sdk().await;
    let o = owned();
    let expect = |s: &Summary, stop: &str| {
        assert_eq!(s.text, EXTRACTED, "{stop}");
        assert!(
            matches!(&s.source, SummarySource::Withheld { reason, .. } if reason == stop),
            "{stop}: {:?}",
            s.source
        );
    };
    for stop in ["content_filtered", "guardrail_intervened"] {
        let stub = ConverseStub::start(PROFILE).await;
        stub.script([ConverseReply::Filtered(stop), ConverseReply::Filtered(stop)]);
        let summarizer = chronicle_llm::WriterSummarizer::new(chronicle_llm::Writer::bedrock_with(
            stub.client(&sdk),
            PROFILE,
        ));
        expect(&summarizer.summarize(&input(&o), far()).await, stop);
        assert_eq!(stub.requests().len(), 1, "{stop}: one paid call");
        assert_eq!(summarizer.take_withheld(), 1, "{stop}");
        assert_eq!(summarizer.take_refusals(), 0, "{stop}: not a wrong model");
    }

    let messages = MessagesStub::start(KEY).await;
    messages.set_default(Reply::CutOff(String::new(), "refusal"));
    let anthropic = llm(&messages, Duration::from_secs(5));
    expect(&anthropic.summarize(&input(&o), far()).await, "refusal");
    assert_eq!(messages.request_count(), 1);
    assert_eq!(anthropic.take_withheld(), 1);
    messages.stop().await;

    let openai = support::openai_stub::OpenAiStub::start("llama3.1").await;
    openai.finish("", "content_filter");
    openai.finish("", "content_filter");
    let writer = chronicle_llm::WriterSummarizer::new(chronicle_llm::Writer::openai(
        &openai.url(),
        None,
        "llama3.1",
    ));
    expect(&writer.summarize(&input(&o), far()).await, "content_filter");
    assert_eq!(openai.requests().len(), 1);
    assert_eq!(writer.take_withheld(), 1);
}
