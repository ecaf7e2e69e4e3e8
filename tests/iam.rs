//! Least privilege, checked against the code that runs: every AWS call each function makes is
//! granted to that function's role in `template.yaml`, and every action a role grants is called by
//! its function (or is used by Lambda itself, or sits on a path named in [`NOT_RUN_HERE`]).
//!
//! Each function is built by its own `from_config`, as its `main` does, with every optional
//! feature configured (the template's "full" parameter set: GitHub token, Notion, both LLM uses
//! on Bedrock through inference profiles, SSM modules config), over an SDK whose requests go through its own recording proxy in front
//! of the emulator. One pipeline runs through all five: two deliveries, their enrichment and the
//! scheduled retry, a sweep, one summary and one given-up row, one page build.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use serde_yaml::Value;
use stages::config::{
    BuilderConfig, EnrichConfig, LlmConfig, LlmProvider, NotionConfig, SummarizeConfig,
    SweeperConfig, TableConfig, WebhookConfig,
};
use stages::secret::SecretSource;
use support::audit_proxy::{AuditProxy, Call};

const GITHUB_TOKEN: &str = "ghp_iam_test";
const NOTION_TOKEN: &str = "ntn_iam_test";
/// The full set's models: both LLM uses on Bedrock through inference profiles, one geographic
/// and one global (their grants differ).
const SUMMARY_PROFILE: &str = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
const STORY_PROFILE: &str = "global.anthropic.claude-sonnet-4-5-20250929-v1:0";
/// The full set's parameter values the Bedrock grants are evaluated with.
const FULL_SET: &[(&str, &str)] = &[
    ("SummaryModel", SUMMARY_PROFILE),
    ("StoryModel", STORY_PROFILE),
    ("AWS::Partition", "aws"),
    ("AWS::Region", "us-east-1"),
    ("AWS::AccountId", "123456789012"),
];

/// Statements whose actions Lambda itself uses with the function's role, never the code: each
/// with exactly these actions (one more would not be exempt).
const USED_BY_LAMBDA: &[(&str, &[&str], &str)] = &[
    (
        "OwnLogs",
        &["logs:CreateLogStream", "logs:PutLogEvents"],
        "the runtime writes the function's logs",
    ),
    (
        "ReadPrStream",
        &[
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
        ],
        "the stream event source mapping polls",
    ),
    (
        "ListStreams",
        &["dynamodb:ListStreams"],
        "the stream event source mapping polls",
    ),
    (
        "SendToEnrichStreamDlq",
        &["sqs:SendMessage"],
        "the mapping's OnFailure destination",
    ),
    (
        "ConsumeSummarizeQueue",
        &[
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
        ],
        "the SQS event source mapping polls",
    ),
    (
        "SendToScheduleDlq",
        &["sqs:SendMessage"],
        "the async invoke's OnFailure destination",
    ),
];

/// Granted actions the code calls on paths this pipeline does not take, each with where.
const NOT_RUN_HERE: &[(&str, &str, &str)] = &[
    (
        "WebhookFunction",
        "dynamodb:GetItem",
        "store.rs `refused_item`: an update refused because the row vanished after the insert",
    ),
    (
        "SummarizeFunction",
        "dynamodb:DeleteItem",
        "store/entries.rs `delete`: a re-summarized PR no longer in a module",
    ),
    (
        "PageBuilderFunction",
        "s3:DeleteObject",
        "publish.rs: a page removed (its module has no entries left)",
    ),
];

const FUNCTIONS: [&str; 7] = [
    "WebhookFunction",
    "EnrichFunction",
    "TokenFunction",
    "SweeperFunction",
    "SummarizeFunction",
    "PageBuilderFunction",
    "RedeliverFunction",
];

/// The functions that parse what a repository or a PR wrote (bodies, manifests, CODEOWNERS,
/// READMEs, titles): none may hold the GitHub App's private key.
const PARSE_REPOSITORY_CONTENT: [&str; 4] = [
    "EnrichFunction",
    "SweeperFunction",
    "SummarizeFunction",
    "PageBuilderFunction",
];

/// Conditions the full parameter set makes false: redelivery has its own token there, so it
/// does not read enrichment's; the LLM is Bedrock (no key) through profile ids (not ARNs, not
/// foundation models), and only the story's profile is global; enrichment reads GitHub as
/// the App, not with the token.
const FALSE_IN_FULL_SET: &[&str] = &[
    "RedeliverWithEnrichToken",
    "EnrichWithToken",
    "SummaryKeyRead",
    "StoryKeyRead",
    "SummaryIsArn",
    "StoryIsArn",
    "SummaryOnFoundationModel",
    "StoryOnFoundationModel",
    "SummaryOnGlobalProfile",
    "SummaryIsProfileArn",
    "StoryIsProfileArn",
    "SummaryIsAppProfileArn",
    "StoryIsAppProfileArn",
    "SummaryOnAppProfile",
    "StoryOnAppProfile",
];

/// The hook the test's deliveries name (`X-GitHub-Hook-ID`).
const HOOK_ID: u64 = 77;

/// One statement of a role, its resources as logical names (`PrTable/index/pending`,
/// `NarrativeBucket/narratives/*`, `GitHubTokenSecretArn`, `*`).
#[derive(Debug)]
struct Statement {
    sid: String,
    actions: Vec<String>,
    resources: Vec<String>,
    /// `(operator, key, values)` of its `Condition`.
    conditions: Vec<(String, String, Vec<String>)>,
}

impl Statement {
    /// Whether `call` meets the statement's conditions, as IAM evaluates the DynamoDB keys it
    /// uses; `hash_key` is the partition key's name of the table the call names.
    fn admits(&self, call: &Call, hash_key: Option<&str>) -> Result<(), String> {
        // The partition key's value: what `dynamodb:LeadingKeys` sees.
        let leading = hash_key.and_then(|h| {
            call.keys
                .iter()
                .find(|(n, _)| n == h)
                .map(|(_, v)| v.as_str())
        });
        for (op, key, values) in &self.conditions {
            let ok = match (op.as_str(), key.as_str()) {
                ("ForAllValues:StringEquals", "dynamodb:LeadingKeys") => {
                    leading.is_some_and(|v| values.iter().any(|w| w == v))
                }
                // No key at all would pass a ForAllValues; a call without one is refused.
                ("ForAllValues:StringLike", "dynamodb:LeadingKeys") => {
                    leading.is_some_and(|v| values.iter().any(|p| like(p, v)))
                }
                ("ForAllValues:StringNotLike", "dynamodb:LeadingKeys") => {
                    leading.is_some_and(|v| !values.iter().any(|p| like(p, v)))
                }
                ("ForAllValues:StringEquals", "dynamodb:Attributes") => {
                    call.attributes.iter().all(|a| values.contains(a))
                }
                ("StringEqualsIfExists", "dynamodb:ReturnValues") => call
                    .return_values
                    .as_ref()
                    .is_none_or(|r| values.contains(r)),
                ("StringEqualsIfExists", "dynamodb:Select") => {
                    call.select.as_ref().is_none_or(|r| values.contains(r))
                }
                // What Bedrock sees when it routes a profile's call to a foundation model.
                ("StringEquals", "bedrock:InferenceProfileArn" | "aws:RequestedRegion") => call
                    .keys
                    .iter()
                    .any(|(k, v)| k == key && values.contains(v)),
                _ => return Err(format!("{op} {key}: a condition this test cannot evaluate")),
            };
            if !ok {
                return Err(format!(
                    "{op} {key} {values:?} refuses keys {:?}, attributes {:?}, ReturnValues {:?}",
                    call.keys, call.attributes, call.return_values
                ));
            }
        }
        Ok(())
    }
}

/// IAM's `StringLike`: `*` any run of characters, `?` one.
fn like(pattern: &str, value: &str) -> bool {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .is_ok_and(|g| g.compile_matcher().is_match(value))
}

/// The partition key's name of each table in the template.
fn hash_keys(template: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(resources) = template["Resources"].as_mapping() {
        for (id, r) in resources {
            if r["Type"].as_str() != Some("AWS::DynamoDB::Table") {
                continue;
            }
            for k in r["Properties"]["KeySchema"]
                .as_sequence()
                .into_iter()
                .flatten()
            {
                if k["KeyType"].as_str() == Some("HASH") {
                    out.insert(
                        id.as_str().unwrap_or_default().to_string(),
                        k["AttributeName"].as_str().unwrap_or_default().to_string(),
                    );
                }
            }
        }
    }
    out
}

/// A statement's `Condition` as `(operator, key, values)`.
fn conditions(v: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    if let Some(ops) = v.as_mapping() {
        for (op, keys) in ops {
            for (key, values) in keys.as_mapping().into_iter().flatten() {
                out.push((
                    op.as_str().unwrap_or_default().to_string(),
                    key.as_str().unwrap_or_default().to_string(),
                    strings(values),
                ));
            }
        }
    }
    out
}

fn tagged<'a>(v: &'a Value, tag: &str) -> Option<&'a Value> {
    match v {
        Value::Tagged(t) if t.tag == tag => Some(&t.value),
        _ => None,
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items.iter().flat_map(strings).collect(),
        Value::String(s) => vec![s.clone()],
        other => panic!("expected a string or a list: {other:?}"),
    }
}

/// A resource expression as a logical name: `!GetAtt PrTable.Arn` → `PrTable`, `!Sub
/// ${PrTable.Arn}/index/pending` → `PrTable/index/pending`, an SSM parameter ARN → the parameter.
/// `!Ref` only of what evaluates to an ARN (a parameter holding one, a secret): IAM rejects a
/// table name or a queue URL.
fn logical_resources(v: &Value, template: &Value) -> Vec<String> {
    // `!If [Condition, a, b]`: the full set takes `a`, unless it makes the condition false.
    if let Some(Value::Sequence(branches)) = tagged(v, "If") {
        return logical_resources(chosen(branches), template);
    }
    if let Value::Sequence(items) = v {
        return items
            .iter()
            .flat_map(|i| logical_resources(i, template))
            .collect();
    }
    if let Some(Value::String(s)) = tagged(v, "GetAtt") {
        let (id, attribute) = s.split_once('.').unwrap();
        return vec![match attribute {
            "Arn" => id.to_string(),
            "StreamArn" => format!("{id}/stream"),
            other => panic!("GetAtt {id}.{other} in a policy"),
        }];
    }
    if let Some(Value::String(s)) = tagged(v, "Ref") {
        let parameter = template["Parameters"].get(s.as_str()).is_some();
        let ref_is_arn = matches!(
            template["Resources"][s.as_str()]["Type"].as_str(),
            Some("AWS::SecretsManager::Secret" | "AWS::SNS::Topic")
        );
        assert!(
            parameter || ref_is_arn,
            "!Ref {s} in a policy is not an ARN (use !GetAtt {s}.Arn)"
        );
        return vec![s.clone()];
    }
    if let Some(Value::String(s)) = tagged(v, "Sub") {
        let s = match s.split_once(":parameter${") {
            Some((_, rest)) => rest.trim_end_matches('}').to_string(),
            None => s.clone(),
        };
        return vec![s.replace(".Arn}", "").replace("${", "")];
    }
    if let Value::String(s) = v {
        return vec![s.clone()];
    }
    panic!("unexpected resource expression {v:?}")
}

/// The branch of `!If [Condition, a, b]` the full set takes.
fn chosen(branches: &[Value]) -> &Value {
    if FALSE_IN_FULL_SET.contains(&branches[0].as_str().unwrap_or_default()) {
        &branches[2]
    } else {
        &branches[1]
    }
}

/// An expression's value under [`FULL_SET`]: what CloudFormation makes of the Bedrock grants'
/// `!Sub`, `!Join`, `!Select`, `!Split`, `!Ref` and `!If`.
fn evaluate(v: &Value) -> Vec<String> {
    let param = |name: &str| {
        FULL_SET
            .iter()
            .find(|(k, _)| *k == name)
            .unwrap_or_else(|| panic!("no full-set value for {name}"))
            .1
            .to_string()
    };
    let substitute = |text: &str, vars: &BTreeMap<String, String>| {
        regex::Regex::new(r"\$\{([^}]+)\}")
            .unwrap()
            .replace_all(text, |c: &regex::Captures| {
                vars.get(&c[1]).cloned().unwrap_or_else(|| param(&c[1]))
            })
            .into_owned()
    };
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Sequence(items) => items.iter().flat_map(evaluate).collect(),
        Value::Tagged(t) => match (t.tag.to_string().as_str(), &t.value) {
            ("!If", Value::Sequence(b)) => evaluate(chosen(b)),
            ("!Ref", Value::String(name)) => vec![param(name)],
            ("!Sub", Value::String(text)) => vec![substitute(text, &BTreeMap::new())],
            ("!Sub", Value::Sequence(parts)) => {
                let vars = parts[1]
                    .as_mapping()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.as_str().unwrap().to_string(), evaluate(v).remove(0)))
                    .collect();
                vec![substitute(parts[0].as_str().unwrap(), &vars)]
            }
            ("!Join", Value::Sequence(parts)) => {
                vec![evaluate(&parts[1]).join(parts[0].as_str().unwrap())]
            }
            ("!Select", Value::Sequence(parts)) => {
                let i = parts[0].as_u64().unwrap() as usize;
                vec![evaluate(&parts[1]).swap_remove(i)]
            }
            ("!Split", Value::Sequence(parts)) => evaluate(&parts[1])
                .remove(0)
                .split(parts[0].as_str().unwrap())
                .map(str::to_string)
                .collect(),
            other => panic!("cannot evaluate {other:?}"),
        },
        other => panic!("cannot evaluate {other:?}"),
    }
}

/// What Bedrock authorises besides the profile when it routes a profile's call: the foundation
/// model in a destination Region (the call's context names the profile), and for a global
/// profile the Region-less model ARN with `aws:RequestedRegion` `unspecified`, as AWS documents.
fn routed(call: &Call) -> Vec<Call> {
    let Some(id) = call
        .resource
        .split_once(":inference-profile/")
        .map(|(_, id)| id)
    else {
        return Vec::new();
    };
    let (scope, foundation) = id.split_once('.').unwrap();
    let to = |region: &str, arn_region: &str| Call {
        resource: format!("arn:aws:bedrock:{arn_region}::foundation-model/{foundation}"),
        keys: vec![
            ("bedrock:InferenceProfileArn".into(), call.resource.clone()),
            ("aws:RequestedRegion".into(), region.into()),
        ],
        ..call.clone()
    };
    match scope {
        "global" => vec![to("us-east-1", "us-east-1"), to("unspecified", "")],
        _ => vec![to("us-west-2", "us-west-2")],
    }
}

/// Each function's role statements under the full parameter set (every condition true).
fn granted() -> BTreeMap<String, Vec<Statement>> {
    let text =
        std::fs::read_to_string(devstack::emulator::repo_root().join("template.yaml")).unwrap();
    let template: Value = serde_yaml::from_str(&text).unwrap();
    let resources = &template["Resources"];
    let mut out = BTreeMap::new();
    for function in FUNCTIONS {
        let role = tagged(&resources[function]["Properties"]["Role"], "GetAtt")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{function} has no Role of its own"));
        let role = role.trim_end_matches(".Arn");
        let props = &resources[role]["Properties"];
        assert!(
            props.get("ManagedPolicyArns").is_none(),
            "{role}: managed policies are broader than its statements"
        );
        let mut statements = Vec::new();
        for policy in props["Policies"].as_sequence().unwrap() {
            // `!If [Condition, policy, !Ref AWS::NoValue]`: the full set takes the policy,
            // unless its condition is one the full set makes false.
            let policy = match tagged(policy, "If") {
                Some(Value::Sequence(branches))
                    if FALSE_IN_FULL_SET.contains(&branches[0].as_str().unwrap_or_default()) =>
                {
                    continue;
                }
                Some(Value::Sequence(branches)) => &branches[1],
                Some(_) => panic!("malformed !If in {role}"),
                None => policy,
            };
            for s in policy["PolicyDocument"]["Statement"].as_sequence().unwrap() {
                // `!If [Condition, statement, !Ref AWS::NoValue]`.
                let s = match tagged(s, "If") {
                    Some(Value::Sequence(branches)) => chosen(branches),
                    _ => s,
                };
                if tagged(s, "Ref").is_some() {
                    continue;
                }
                assert_eq!(s["Effect"].as_str(), Some("Allow"));
                let actions = strings(&s["Action"]);
                // Bedrock's grants are ARNs computed from the model parameters: evaluated.
                let bedrock = actions.iter().any(|a| a.starts_with("bedrock:"));
                let conditions = if bedrock {
                    let mut out = Vec::new();
                    for (op, keys) in s["Condition"].as_mapping().into_iter().flatten() {
                        for (key, value) in keys.as_mapping().into_iter().flatten() {
                            out.push((
                                op.as_str().unwrap().to_string(),
                                key.as_str().unwrap().to_string(),
                                evaluate(value),
                            ));
                        }
                    }
                    out
                } else {
                    conditions(&s["Condition"])
                };
                statements.push(Statement {
                    sid: s["Sid"].as_str().expect("every statement has a Sid").into(),
                    resources: if bedrock {
                        evaluate(&s["Resource"])
                    } else {
                        logical_resources(&s["Resource"], &template)
                    },
                    actions,
                    conditions,
                });
            }
        }
        out.insert(function.to_string(), statements);
    }
    out
}

fn matches(granted: &str, logical: &str) -> bool {
    match granted.strip_suffix('*') {
        Some(prefix) => logical.starts_with(prefix),
        None => granted == logical,
    }
}

/// What the emulator's resources are called in the template.
struct Names(Vec<(String, String)>);

impl Names {
    /// A recorded resource (`prs-…/index/pending`, `bucket/narratives/…`) in logical names.
    fn logical(&self, physical: &str) -> String {
        self.0
            .iter()
            .filter(|(p, _)| physical.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())
            .map(|(p, l)| format!("{l}{}", &physical[p.len()..]))
            .unwrap_or_else(|| format!("unknown:{physical}"))
    }
}

async fn secret(sdk: &aws_config::SdkConfig, name: &str, value: &str) -> String {
    aws_sdk_secretsmanager::Client::new(sdk)
        .create_secret()
        .name(format!("{name}-{}", uuid::Uuid::new_v4().simple()))
        .secret_string(value)
        .send()
        .await
        .unwrap()
        .arn()
        .unwrap()
        .to_string()
}

fn insert_record(repo: &str, number: u64) -> EventRecord {
    let mut record = EventRecord::default();
    record.event_id = format!("event-{number}");
    record.event_name = "INSERT".into();
    record.change.sequence_number = Some(format!("{number}00"));
    record.change.keys = serde_dynamo::Item::from(std::collections::HashMap::from([
        (
            stages::store::attr::REPO.to_string(),
            serde_dynamo::AttributeValue::S(repo.into()),
        ),
        (
            stages::store::attr::PR_NUMBER.to_string(),
            serde_dynamo::AttributeValue::N(number.to_string()),
        ),
    ]));
    record
}

fn delivery(payload: &serde_json::Value, number: u64, updated_at: &str) -> serde_json::Value {
    let mut p = payload.clone();
    p["number"] = number.into();
    p["pull_request"]["number"] = number.into();
    p["pull_request"]["updated_at"] = updated_at.into();
    p["pull_request"]["title"] = format!("Change {number} at {updated_at}").into();
    p
}

#[tokio::test]
async fn every_function_calls_exactly_what_its_role_grants() {
    let grants = granted();
    let admin = support::sdk().await;
    let tables = support::fresh_tables(&admin).await;
    let table: TableConfig = tables.prs.table().clone();
    let (entries_table, pages_table) = (
        tables.entries.table_name().to_string(),
        tables.pages.table_name().to_string(),
    );
    let id = uuid::Uuid::new_v4().simple().to_string();
    let sqs = aws_sdk_sqs::Client::new(&admin);
    let queue = |name: String| {
        let sqs = sqs.clone();
        async move {
            sqs.create_queue()
                .queue_name(name)
                .send()
                .await
                .unwrap()
                .queue_url()
                .unwrap()
                .to_string()
        }
    };
    let summarize_queue = queue(format!("summarize-{id}")).await;
    let summarize_dlq = queue(format!("summarize-dlq-{id}")).await;
    let bucket = format!("narratives-{id}");
    stages::publish::s3_client(&admin)
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let webhook_secret = secret(&admin, "webhook", support::SECRET).await;
    let github_secret = secret(&admin, "github", GITHUB_TOKEN).await;
    // Redelivery's own token (RedeliverTokenSecretArn): the same value here, another secret.
    let redeliver_secret = secret(&admin, "redeliver", GITHUB_TOKEN).await;
    let notion_secret = secret(&admin, "notion", NOTION_TOKEN).await;
    let app_key = std::fs::read_to_string(
        devstack::emulator::repo_root().join("tests/fixtures/github/app-test-key.pem"),
    )
    .unwrap();
    let app_key_secret = secret(&admin, "github-app-key", &app_key).await;
    let modules_param = format!("/chronicle-iam/{id}/modules");
    aws_sdk_ssm::Client::new(&admin)
        .put_parameter()
        .name(&modules_param)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .value("\"*\":\n  source: [\"src/**\"]\n")
        .send()
        .await
        .unwrap();
    let token_function_name = format!("token-{id}");
    let names = Names(vec![
        (token_function_name, "TokenFunction".into()),
        (table.table_name.clone(), "PrTable".into()),
        (entries_table.clone(), "EntriesTable".into()),
        ("no-such-entries".into(), "EntriesTable".into()),
        (pages_table.clone(), "PagesTable".into()),
        (summarize_queue.clone(), "SummarizeQueue".into()),
        (summarize_dlq.clone(), "SummarizeDlq".into()),
        (bucket.clone(), "NarrativeBucket".into()),
        (webhook_secret.clone(), "WebhookSecret".into()),
        (github_secret.clone(), "GitHubTokenSecretArn".into()),
        (redeliver_secret.clone(), "RedeliverTokenSecretArn".into()),
        (notion_secret.clone(), "NotionTokenSecretArn".into()),
        (
            app_key_secret.clone(),
            "GitHubAppPrivateKeySecretArn".into(),
        ),
        (modules_param.clone(), "ModulesConfigParameter".into()),
    ]);

    let payload = support::merged_payload();
    let repo = payload["repository"]["full_name"]
        .as_str()
        .unwrap()
        .to_string();
    let (a, b) = (901_u64, 902_u64);
    let github = standins::github_standin::GitHubStandIn::start(GITHUB_TOKEN)
        .await
        .unwrap();
    for n in [a, b] {
        github.put_pull(&repo, support::standin_pull(&repo, n, 3));
    }
    // The full set's GitHub App, installed on the repository: enrichment reads it with the
    // installation's token, which it asks of the token function (whose role reads the
    // App's key, as redeliver's does; enrich's neither the key nor the token).
    let app_public = std::fs::read_to_string(
        devstack::emulator::repo_root().join("tests/fixtures/github/app-test-key.pub.pem"),
    )
    .unwrap();
    github.add_app_hook("424242", &app_public, 1, None);
    github.add_installation(
        31,
        repo.split('/').next().unwrap(),
        vec![standins::github_standin::InstalledSpec {
            full_name: repo.clone(),
            archived: false,
            empty: false,
        }],
    );
    let (notion, parent) = support::notion_stub::NotionStub::start(NOTION_TOKEN).await;
    let summary_model = support::converse_stub::ConverseStub::start(SUMMARY_PROFILE).await;
    summary_model.script([support::converse_stub::ConverseReply::Text(
        "The paragraph Bedrock wrote.".into(),
    )]);
    let story_model = support::converse_stub::ConverseStub::start(STORY_PROFILE).await;
    story_model.script([support::converse_stub::ConverseReply::Text(
        "Bedrock's story of #901.".into(),
    )]);

    // Lambda's Invoke, which the emulator lacks: the token function runs in-process.
    let lambda = support::lambda_standin::LambdaStandIn::start().await;
    let mut proxies: BTreeMap<&str, AuditProxy> = BTreeMap::new();
    for function in FUNCTIONS {
        let bedrock = match function {
            "SummarizeFunction" => Some(summary_model.url()),
            "PageBuilderFunction" => Some(story_model.url()),
            _ => None,
        };
        let invoke = (function == "EnrichFunction").then(|| lambda.url().to_string());
        proxies.insert(
            function,
            AuditProxy::start_routed(support::endpoint(), bedrock, invoke).await,
        );
    }
    let token_function = format!("token-{id}");
    let tokens = Arc::new(
        stages::token::TokenHandler::from_config(
            &stages::config::TokenConfig {
                api_url: github.url().to_string(),
                timeout: Duration::from_secs(10),
                app_id: "424242".into(),
                app_key: SecretSource::SecretsManager(app_key_secret.clone()),
            },
            &proxies["TokenFunction"].sdk().await,
        )
        .await
        .unwrap(),
    );
    lambda.register(&token_function, move |payload| {
        let tokens = tokens.clone();
        async move { serde_json::to_value(tokens.handle(payload).await).map_err(|e| e.to_string()) }
    });

    // Webhook: two merged PRs, then a newer delivery of the first.
    let sdk = proxies["WebhookFunction"].sdk().await;
    let webhook = stages::webhook::WebhookHandler::from_config(
        &WebhookConfig {
            table: table.clone(),
            max_body_bytes: 1 << 20,
            secret: SecretSource::SecretsManager(webhook_secret.clone()),
            insecure_no_signature: false,
            pages_table: Some(pages_table.clone()),
        },
        &sdk,
    )
    .await
    .unwrap();
    for (i, (n, at)) in [
        (a, "2024-06-01T10:00:00Z"),
        (b, "2024-06-01T10:00:00Z"),
        (a, "2024-06-01T11:00:00Z"),
    ]
    .into_iter()
    .enumerate()
    {
        let body = delivery(&payload, n, at).to_string();
        let mut request = support::signed("pull_request", &format!("d-{i}"), body);
        request
            .headers
            .insert("x-github-hook-id", support::header(&HOOK_ID.to_string()));
        let response = webhook.handle(request).await;
        assert_eq!(response.status, 200, "{response:?}");
    }
    // A repository renamed: its old name's organisation row is forgotten and its index marked
    // stale (it has none here: that write is refused by its condition, after IAM admitted it).
    let renamed = serde_json::json!({
        "action": "renamed",
        "changes": {"repository": {"name": {"from": "retired"}}},
        "repository": {"full_name": "acme/renamed", "name": "renamed", "owner": {"login": "acme"}},
        "sender": {"login": "octocat"},
    });
    let response = webhook
        .handle(support::signed(
            "repository",
            "d-renamed",
            renamed.to_string(),
        ))
        .await;
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(
        response.body["forgotten"],
        serde_json::json!(["acme/retired"])
    );

    // Enrich: both INSERT records and one whose row is gone (its refused lease reads the row
    // again), then the scheduled retry of deferred rows.
    let sdk = proxies["EnrichFunction"].sdk().await;
    let enrich = Arc::new(
        stages::enrich::EnrichHandler::from_config(
            &EnrichConfig {
                table: table.clone(),
                api_url: github.url().to_string(),
                token: SecretSource::SecretsManager(github_secret.clone()),
                timeout: Duration::from_secs(10),
                max_retries: 1,
                concurrency: 2,
                max_paths: 500,
                max_wait: Duration::from_secs(3600),
                pages_table: Some(pages_table.clone()),
                issue_scope: Default::default(),
                app_id: None,
                app_key: SecretSource::Unset,
                token_function: Some(token_function.clone()),
            },
            &sdk,
        )
        .await
        .unwrap(),
    );
    let mut stream = Event::default();
    stream.records = vec![
        insert_record(&repo, a),
        insert_record(&repo, b),
        insert_record(&repo, 999),
    ];
    let response = enrich
        .invoke(
            stages::enrich::EnrichTrigger::Stream(stream),
            support::within(30),
            "inv-enrich",
        )
        .await
        .unwrap();
    match &response {
        stages::enrich::EnrichResponse::Stream(r) => {
            assert!(r.batch_item_failures.is_empty(), "{r:?}")
        }
        other => panic!("{other:?}"),
    }
    let scheduled = std::fs::read_to_string(
        devstack::emulator::repo_root().join("events/enrich.scheduled.json"),
    )
    .unwrap();
    enrich
        .invoke(
            serde_json::from_str(&scheduled).unwrap(),
            support::within(30),
            "inv-retry",
        )
        .await
        .unwrap();

    // A context refresh a day later finds the repository's layout changed (it has CODEOWNERS
    // now): the enrich function marks its index page for a rebuild.
    let files = standins::github_standin::GitHubStandIn::start(GITHUB_TOKEN)
        .await
        .unwrap();
    files.add_file(&repo, ".github/CODEOWNERS", "* @octo-org/everyone\n");
    let rest = stages::github::GitHubClient::new(
        files.url(),
        &stages::secret::Secret::new(GITHUB_TOKEN),
        Duration::from_secs(10),
        1,
    )
    .unwrap();
    let refreshed = stages::enrich::refresh_repo_context(
        &stages::store::ContextStore::new(aws_sdk_dynamodb::Client::new(&sdk), &pages_table),
        &rest,
        &stages::domain::RepoName::parse(&repo).unwrap(),
        time::OffsetDateTime::now_utc() + time::Duration::hours(25),
        support::within(30),
    )
    .await
    .unwrap();
    assert!(
        matches!(refreshed, stages::enrich::ContextRefresh::Stored { .. }),
        "{refreshed:?}"
    );
    files.stop().await;

    // Sweeper: both rows are enriched, so both are claimed and enqueued.
    let sdk = proxies["SweeperFunction"].sdk().await;
    let sweeper = stages::sweeper::Sweeper::from_config(
        &SweeperConfig {
            table: table.clone(),
            queue_url: summarize_queue.clone(),
            enrich_grace: Duration::from_secs(120),
            claim_ttl: Duration::from_secs(900),
            enrich_enabled: true,
            max_queued: 500,
        },
        &sdk,
    );
    let report = sweeper
        .sweep(time::OffsetDateTime::now_utc(), support::within(30))
        .await
        .unwrap();
    assert_eq!(report.enqueued, 2, "{report:?}");

    // Summarize: the first PR is summarized (LLM paragraph, SSM modules config), with a message
    // whose row is gone (its refused claim reads the row again); the second fails with its
    // entries table unavailable and, at MaxAttempts 1, is given up to the DLQ.
    let sdk = proxies["SummarizeFunction"].sdk().await;
    // One test in this binary: nothing else reads the environment meanwhile.
    let summarize_config = |entries: &str| SummarizeConfig {
        table: table.clone(),
        entries_table: entries.to_string(),
        pages_table: pages_table.clone(),
        max_attempts: 1,
        modules_file: None,
        modules_param: Some(modules_param.clone()),
        dlq_url: Some(summarize_dlq.clone()),
        summary: Some(LlmConfig {
            provider: LlmProvider::Bedrock,
            model: SUMMARY_PROFILE.into(),
        }),
    };
    for (entries, n, given_up) in [
        (&entries_table, a, false),
        (&"no-such-entries".to_string(), b, true),
    ] {
        let handler = Arc::new(
            stages::summarize::SummarizeHandler::from_config(&summarize_config(entries), &sdk)
                .await
                .unwrap(),
        );
        let response = handler
            .handle(
                support::sqs_batch(vec![
                    support::summarize_message("m", &repo, n),
                    support::summarize_message("ghost", &repo, 999),
                ]),
                support::within(30),
                "inv-summarize",
            )
            .await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        let row = support::stored_row(&tables.prs, &repo, n).await;
        assert_eq!(
            row.contains_key(stages::store::attr::FAILED_AT),
            given_up,
            "{row:?}"
        );
    }
    assert!(
        summary_model.requests().iter().any(|r| r.status == 200),
        "the paragraph came from Bedrock"
    );

    // Page builder: the stale page is built to S3 and Notion.
    let sdk = proxies["PageBuilderFunction"].sdk().await;
    let builder = stages::builder::PageBuilder::from_config(
        &BuilderConfig {
            entries_table: entries_table.clone(),
            pages_table: pages_table.clone(),
            rebuild_interval: Duration::ZERO,
            concurrency: 2,
            output_dir: String::new(),
            output_s3: Some((bucket.clone(), "narratives/".into())),
            notion: Some(NotionConfig {
                token: SecretSource::SecretsManager(notion_secret.clone()),
                parent_page_id: parent.clone(),
                api_url: notion.url(),
            }),
            markdown_with_notion: true,
            modules_file: None,
            modules_param: Some(modules_param.clone()),
            story: Some(stages::config::StoryConfig {
                llm: LlmConfig {
                    provider: LlmProvider::Bedrock,
                    model: STORY_PROFILE.into(),
                },
                min_new_entries: 20,
            }),
        },
        &sdk,
    )
    .await
    .unwrap();
    let report = builder
        .tick(
            time::OffsetDateTime::now_utc(),
            support::within(60),
            "inv-build",
        )
        .await
        .unwrap();
    assert!(report.built >= 1, "{report:?}");

    // Redeliver: the recorded hook's failed delivery of a PR never stored is asked again.
    let hooks_github = standins::github_standin::GitHubStandIn::start(GITHUB_TOKEN)
        .await
        .unwrap();
    hooks_github.add_hook(&repo, HOOK_ID, None);
    let lost = delivery(&payload, 903, "2024-06-01T12:00:00Z");
    hooks_github.add_delivery(
        &repo,
        HOOK_ID,
        standins::github_standin::rest::DeliverySpec {
            guid: "lost-903".into(),
            age_secs: 3600,
            status_code: 502,
            event: "pull_request".into(),
            action: Some("closed".into()),
            payload: lost,
        },
    );
    // A memory from before GitHub's window: the run deletes it.
    stages::store::HookStore::new(aws_sdk_dynamodb::Client::new(&admin), &pages_table)
        .set_state(
            &stages::domain::hook::HookRef::parse(&format!("repos/{repo}/hooks/{HOOK_ID}"))
                .unwrap(),
            "expired-guid",
            stages::store::DeliveryState::Asked,
            time::OffsetDateTime::now_utc() - time::Duration::days(5),
        )
        .await
        .unwrap();
    let sdk = proxies["RedeliverFunction"].sdk().await;
    let redeliverer = stages::redeliver::Redeliverer::from_config(
        &stages::config::RedeliverConfig {
            table: table.clone(),
            pages_table: pages_table.clone(),
            api_url: hooks_github.url().to_string(),
            token: SecretSource::SecretsManager(redeliver_secret.clone()),
            app_id: Some("424242".into()),
            app_key: SecretSource::SecretsManager(app_key_secret.clone()),
            timeout: Duration::from_secs(10),
            max_retries: 1,
            max_per_run: 10,
        },
        &sdk,
    )
    .await
    .unwrap();
    let report = redeliverer
        .run(time::OffsetDateTime::now_utc(), support::within(30), false)
        .await
        .unwrap();
    assert_eq!(report.redelivered.len(), 1, "{report:?}");
    hooks_github.stop().await;

    // Every call granted (conditions included); every grant called (or used by Lambda, or on a
    // listed path).
    let tables_hash = hash_keys(
        &serde_yaml::from_str::<Value>(
            &std::fs::read_to_string(devstack::emulator::repo_root().join("template.yaml"))
                .unwrap(),
        )
        .unwrap(),
    );
    let mut problems = Vec::new();
    for function in FUNCTIONS {
        let statements = &grants[function];
        let mut calls: BTreeSet<Call> = proxies[function].calls().into_iter().collect();
        let routing: Vec<Call> = calls.iter().flat_map(routed).collect();
        calls.extend(routing);
        // (Sid, action, granted resource) that some call needed.
        let mut used: BTreeSet<(String, String, String)> = BTreeSet::new();
        for call in &calls {
            let logical = names.logical(&call.resource);
            let table = logical.split('/').next().unwrap_or_default();
            let hash_key = tables_hash.get(table).map(String::as_str);
            let mut refusals = Vec::new();
            let bedrock = call.action.starts_with("bedrock:");
            let grant = statements.iter().find_map(|s| {
                let resource = s.resources.iter().find(|r| {
                    if bedrock {
                        like(r, &call.resource)
                    } else {
                        matches(r, &logical)
                    }
                })?;
                if !s.actions.contains(&call.action) {
                    return None;
                }
                match s.admits(call, hash_key) {
                    Ok(()) => Some((s, resource.clone())),
                    Err(why) => {
                        refusals.push(format!("{}: {why}", s.sid));
                        None
                    }
                }
            });
            if grant.is_none() && !refusals.is_empty() {
                problems.push(format!(
                    "{function} calls {} on {logical}: refused by {}",
                    call.action,
                    refusals.join("; ")
                ));
                continue;
            }
            match grant {
                Some((s, resource)) => {
                    used.insert((s.sid.clone(), call.action.clone(), resource));
                }
                None => problems.push(format!(
                    "{function} calls {} on {logical}: not granted",
                    call.action
                )),
            }
        }
        for s in statements {
            if let Some((_, actions, why)) = USED_BY_LAMBDA.iter().find(|(sid, _, _)| *sid == s.sid)
            {
                let mut granted: Vec<&str> = s.actions.iter().map(String::as_str).collect();
                let mut exempt: Vec<&str> = actions.to_vec();
                granted.sort();
                exempt.sort();
                if granted != exempt {
                    problems.push(format!(
                        "{function} {}: grants {granted:?}; only {exempt:?} are Lambda's own",
                        s.sid
                    ));
                }
                eprintln!("{function} {}: {:?} ({why})", s.sid, s.actions);
                continue;
            }
            for action in &s.actions {
                let listed = NOT_RUN_HERE
                    .iter()
                    .any(|(f, a, _)| *f == function && a == action);
                for resource in &s.resources {
                    let called = used.contains(&(s.sid.clone(), action.clone(), resource.clone()));
                    match (called, listed) {
                        (true, false) | (false, true) => {}
                        (false, false) => problems.push(format!(
                            "{function} {}: {action} on {resource} granted but never called",
                            s.sid
                        )),
                        (true, true) => problems.push(format!(
                            "{function}: {action} is called here; take it off NOT_RUN_HERE"
                        )),
                    }
                }
            }
        }
        eprintln!(
            "{function}: {} distinct calls: {:?}",
            calls.len(),
            calls
                .iter()
                .map(|c| match c.action.starts_with("bedrock:") {
                    true => format!("{} {}", c.action, c.resource),
                    false => format!("{} {}", c.action, names.logical(&c.resource)),
                })
                .collect::<BTreeSet<_>>()
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    github.stop().await;
}

/// Enrichment parses what a repository wrote; its write to the pages table is held by IAM to
/// repositories' partitions (never `#hooks`) and to the context's and stale marker's attributes.
#[test]
fn the_context_write_is_held_to_repository_partitions_and_its_attributes() {
    let granted = granted();
    let statement = granted["EnrichFunction"]
        .iter()
        .find(|s| s.sid == "RepoContexts")
        .expect("the context statement");
    assert!(
        !statement.actions.iter().any(|a| a == "dynamodb:PutItem"),
        "a put would replace a page item whole"
    );
    let call = |repo: &str, attributes: &[&str]| Call {
        action: "dynamodb:UpdateItem".into(),
        resource: "PagesTable".into(),
        keys: vec![
            ("repo".into(), repo.into()),
            ("module".into(), "#context".into()),
        ],
        attributes: attributes.iter().map(|a| a.to_string()).collect(),
        return_values: None,
        select: None,
    };
    let context = ["repo", "module", "checkedAt", "contextVersion", "context"];
    assert_eq!(
        statement.admits(&call("acme/app", &context), Some("repo")),
        Ok(())
    );
    for refused in [
        call("#hooks", &context),
        call("acme/app#x", &context),
        call("acme/app", &["repo", "module", "hook", "guid"]),
        call("acme/app", &["repo", "module", "lastError"]),
        // The Notion page ids and year parts a build trusts.
        call("acme/app", &["repo", "module", "notion"]),
        call("acme/app", &["repo", "module", "years"]),
    ] {
        assert!(
            statement.admits(&refused, Some("repo")).is_err(),
            "{refused:?}"
        );
    }
}

/// The webhook's writes for a repository's lifecycle: the tombstone only in the `#org/`
/// partitions and only the tombstone's attributes (never the row's content); the stale mark only in repositories' partitions
/// and only the marker's. Neither may touch a page's Notion ids, hooks or PR rows.
#[test]
fn the_webhook_lifecycle_writes_are_held_to_their_partitions_and_attributes() {
    let granted = granted();
    let statement = |sid: &str| {
        granted["WebhookFunction"]
            .iter()
            .find(|s| s.sid == sid)
            .unwrap_or_else(|| panic!("no {sid}"))
    };
    let call = |repo: &str, module: &str, attributes: &[&str]| Call {
        action: "dynamodb:UpdateItem".into(),
        resource: "PagesTable".into(),
        keys: vec![
            ("repo".into(), repo.into()),
            ("module".into(), module.into()),
        ],
        attributes: attributes.iter().map(|a| a.to_string()).collect(),
        return_values: None,
        select: None,
    };
    let forget = statement("ForgetOrgRows");
    let tombstone = ["repo", "module", "goneWhy", "lifeAt", "lifeDelivery"];
    assert_eq!(
        forget.admits(&call("#org/acme", "acme/old", &tombstone), Some("repo")),
        Ok(())
    );
    // Reading back what it wrote over (its own attributes) tells a repeat from a first time.
    let mut updated_old = call("#org/acme", "acme/old", &tombstone);
    updated_old.return_values = Some("UPDATED_OLD".into());
    assert_eq!(forget.admits(&updated_old, Some("repo")), Ok(()));
    for refused in [
        // A row's content: the webhook may tombstone a row, never write one.
        call("#org/acme", "acme/old", &["repo", "module", "org"]),
        call(
            "#org/acme",
            "acme/old",
            &["repo", "module", "org", "goneWhy"],
        ),
        call("acme/old", "#index", &tombstone),
        call("#hooks", "acme/old", &tombstone),
        call("#org/acme", "#index", &["repo", "module", "notion"]),
        call(
            "#org/acme",
            "#index",
            &["repo", "module", "buildOwner", "buildUntil"],
        ),
    ] {
        assert!(
            forget.admits(&refused, Some("repo")).is_err(),
            "{refused:?}"
        );
    }
    let mark = statement("MarkIndexStale");
    let marker = ["repo", "module", "stale", "staleSince", "version"];
    assert_eq!(
        mark.admits(&call("acme/old", "#index", &marker), Some("repo")),
        Ok(())
    );
    for refused in [
        call("#org/acme", "#index", &marker),
        call("#hooks", "x", &marker),
        call("acme/old", "#index", &["repo", "module", "notion"]),
        call("acme/old", "#index", &["repo", "module", "fullRebuild"]),
    ] {
        assert!(mark.admits(&refused, Some("repo")).is_err(), "{refused:?}");
    }
}

/// The GitHub App's private key mints any token the App may have (its webhooks' write
/// included): no role of a function that parses repository content can read it. Of the
/// functions, only the token function's role and redelivery's can (redelivery lists the App's
/// hook deliveries with the JWT and parses only their JSON, PR payloads included); enrich
/// invokes the token function, and no other function.
#[test]
fn no_role_that_parses_repository_content_can_read_the_app_key() {
    let grants = granted();
    let reads_key = |function: &str| {
        grants[function].iter().any(|s| {
            s.actions.iter().any(|a| {
                a == "secretsmanager:GetSecretValue" || a == "secretsmanager:*" || a == "*"
            }) && s
                .resources
                .iter()
                .any(|r| matches(r, "GitHubAppPrivateKeySecretArn"))
        })
    };
    for function in PARSE_REPOSITORY_CONTENT {
        assert!(!reads_key(function), "{function} can read the App's key");
    }
    let readers: Vec<&str> = FUNCTIONS.into_iter().filter(|f| reads_key(f)).collect();
    assert_eq!(readers, ["TokenFunction", "RedeliverFunction"]);
    let token = &grants["TokenFunction"];
    assert!(
        token
            .iter()
            .filter(|s| s.sid != "OwnLogs")
            .all(|s| s.actions == ["secretsmanager:GetSecretValue"]
                && s.resources == ["GitHubAppPrivateKeySecretArn"]),
        "the token function's role reads the key and nothing else: {token:?}"
    );
    // Whatever the parameters: no other role of the template names the key, under any
    // condition (the full set above takes one branch of each).
    let text =
        std::fs::read_to_string(devstack::emulator::repo_root().join("template.yaml")).unwrap();
    let template: Value = serde_yaml::from_str(&text).unwrap();
    let mut naming = Vec::new();
    for (id, resource) in template["Resources"].as_mapping().unwrap() {
        let yaml = serde_yaml::to_string(&resource["Properties"]).unwrap();
        if resource["Type"].as_str() == Some("AWS::IAM::Role")
            && yaml.contains("GitHubAppPrivateKeySecretArn")
        {
            naming.push(id.as_str().unwrap().to_string());
        }
        if resource["Type"].as_str() == Some("AWS::Serverless::Function")
            && PARSE_REPOSITORY_CONTENT.contains(&id.as_str().unwrap())
        {
            assert!(
                !yaml.contains("GitHubAppPrivateKeySecretArn") && !yaml.contains("PRIVATE_KEY"),
                "{id:?} is configured with the App's key"
            );
        }
    }
    naming.sort();
    assert_eq!(naming, ["RedeliverFunctionRole", "TokenFunctionRole"]);
    // Enrich invokes the token function, and nothing else; no other function invokes any.
    for function in FUNCTIONS {
        for s in &grants[function] {
            let invokes: Vec<&String> = s
                .actions
                .iter()
                .filter(|a| a.starts_with("lambda:") || *a == "*")
                .collect();
            if invokes.is_empty() {
                continue;
            }
            assert_eq!(
                function, "EnrichFunction",
                "{function} {}: {invokes:?}",
                s.sid
            );
            assert_eq!(s.actions, ["lambda:InvokeFunction"], "{}", s.sid);
            assert_eq!(s.resources, ["TokenFunction"], "{}", s.sid);
        }
    }
    assert!(
        grants["EnrichFunction"]
            .iter()
            .any(|s| s.actions == ["lambda:InvokeFunction"]),
        "enrich gets its tokens from the token function"
    );
}

/// Every bucket and queue has a resource policy that denies any request made without TLS.
#[test]
fn every_bucket_and_queue_refuses_requests_without_tls() {
    let text =
        std::fs::read_to_string(devstack::emulator::repo_root().join("template.yaml")).unwrap();
    let template: Value = serde_yaml::from_str(&text).unwrap();
    let resources = template["Resources"].as_mapping().unwrap();
    let of_type = |t: &str| -> Vec<String> {
        resources
            .iter()
            .filter(|(_, r)| r["Type"].as_str() == Some(t))
            .map(|(id, _)| id.as_str().unwrap().to_string())
            .collect()
    };
    // (policy type, the property that lists what it covers, the resource type it covers)
    for (policy_type, targets, covered_type) in [
        ("AWS::S3::BucketPolicy", "Bucket", "AWS::S3::Bucket"),
        ("AWS::SQS::QueuePolicy", "Queues", "AWS::SQS::Queue"),
    ] {
        let mut covered = BTreeSet::new();
        for id in of_type(policy_type) {
            let props = &resources[id.as_str()]["Properties"];
            let denies_plain = props["PolicyDocument"]["Statement"]
                .as_sequence()
                .unwrap()
                .iter()
                .any(|s| {
                    s["Effect"].as_str() == Some("Deny")
                        && s["Principal"]["AWS"].as_str() == Some("*")
                        && s["Condition"]["Bool"]["aws:SecureTransport"].as_str() == Some("false")
                });
            assert!(denies_plain, "{id}: no Deny on aws:SecureTransport false");
            let listed = match &props[targets] {
                Value::Sequence(items) => items.clone(),
                other => vec![other.clone()],
            };
            for target in listed {
                let name = tagged(&target, "Ref")
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("{id}: {target:?} is not a !Ref"));
                covered.insert(name.to_string());
            }
        }
        let all: BTreeSet<String> = of_type(covered_type).into_iter().collect();
        assert_eq!(
            covered, all,
            "{policy_type} must cover every {covered_type}"
        );
    }
}
