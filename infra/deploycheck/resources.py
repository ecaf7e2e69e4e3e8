"""Tables, queues, functions, event source mappings, log groups and outputs."""

import json

from .report import short
from .template import cfn_str, ref_target


def check_tables(report, tpl, values, live, ev):
    report.section("DynamoDB tables")
    res = tpl["Resources"]
    for lid in sorted(l for l, r in res.items() if r["Type"] == "AWS::DynamoDB::Table"):
        props = ev(res[lid]["Properties"])
        t = live.c["dynamodb"].describe_table(TableName=live.physical(lid))["Table"]
        report.equal(f"{lid} key schema", t["KeySchema"], props["KeySchema"])
        report.equal(f"{lid} attribute definitions",
                     sorted(t["AttributeDefinitions"], key=json.dumps),
                     sorted(props["AttributeDefinitions"], key=json.dumps))
        want_gsi = {g["IndexName"]: g for g in props.get("GlobalSecondaryIndexes", [])}
        got_gsi = {g["IndexName"]: g for g in t.get("GlobalSecondaryIndexes", [])}
        report.equal(f"{lid} GSI names", sorted(got_gsi), sorted(want_gsi))
        for name in sorted(set(want_gsi) & set(got_gsi)):
            w, g = want_gsi[name], got_gsi[name]
            report.equal(f"{lid} GSI {name} keys", g["KeySchema"], w["KeySchema"])
            proj = lambda p: (p.get("ProjectionType"), sorted(p.get("NonKeyAttributes", [])))
            report.equal(f"{lid} GSI {name} projection", proj(g["Projection"]), proj(w["Projection"]))
        billing = t.get("BillingModeSummary", {}).get("BillingMode")
        report.equal(f"{lid} billing mode", billing, "PAY_PER_REQUEST")
        dp = t.get("DeletionProtectionEnabled")
        report.equal(f"{lid} deletion protection (moto: {dp!r})", cfn_str(dp).lower(),
                     values["DeletionProtection"])
        if "SSEDescription" in t:
            report.equal(f"{lid} server-side encryption", t["SSEDescription"].get("Status"), "ENABLED")
        else:
            # moto reads the API's SSESpecification.Enabled, not CloudFormation's SSEEnabled.
            report.equal(f"{lid} server-side encryption (template; moto does not report it)",
                         cfn_str(props.get("SSESpecification", {}).get("SSEEnabled")), "true")
        # moto's CloudFormation ignores PITR and TTL: asserted on the transformed template.
        report.check(f"{lid} point-in-time recovery on (template; moto ignores it)",
                     cfn_str(props.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled")) == "true")
    pr = live.c["dynamodb"].describe_table(TableName=live.physical("PrTable"))["Table"]
    report.equal("PrTable stream", pr.get("StreamSpecification"),
                 {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    report.check("PrTable stream ARN exists", bool(pr.get("LatestStreamArn")))
    report.check("PrTable has the sparse 'pending' GSI", any(g["IndexName"] == "pending" for g in pr.get("GlobalSecondaryIndexes", [])))
    pages = live.c["dynamodb"].describe_table(TableName=live.physical("PagesTable"))["Table"]
    report.check("PagesTable has the sparse 'stale' GSI", any(g["IndexName"] == "stale" for g in pages.get("GlobalSecondaryIndexes", [])))
    ttl = res["PrTable"]["Properties"].get("TimeToLiveSpecification", {})
    report.check("PrTable TTL enabled on expiresAt (template; moto ignores it)",
                 cfn_str(ttl.get("Enabled")) == "true" and ttl.get("AttributeName") == "expiresAt", ttl)


def check_queues(report, tpl, values, live, ev):
    report.section("SQS queues")
    res = tpl["Resources"]
    sqs = live.c["sqs"]
    attrs = {}
    for lid in sorted(l for l, r in res.items() if r["Type"] == "AWS::SQS::Queue"):
        props = ev(res[lid].get("Properties", {}))
        a = sqs.get_queue_attributes(QueueUrl=live.physical(lid), AttributeNames=["All"])["Attributes"]
        attrs[lid] = a
        report.equal(f"{lid} visibility timeout", a.get("VisibilityTimeout"), cfn_str(props.get("VisibilityTimeout", 30)))
        report.equal(f"{lid} retention", a.get("MessageRetentionPeriod"), cfn_str(props.get("MessageRetentionPeriod", 345600)))
        if "KmsMasterKeyId" in props:
            report.equal(f"{lid} KMS key", a.get("KmsMasterKeyId"), props["KmsMasterKeyId"])
    redrive = json.loads(attrs["SummarizeQueue"].get("RedrivePolicy", "{}"))
    report.equal("SummarizeQueue redrive target = SummarizeDlq", redrive.get("deadLetterTargetArn"),
                 live.attrs["SummarizeDlq"]["Arn"])
    report.equal("SummarizeQueue maxReceiveCount = SummarizeMaxReceiveCount",
                 cfn_str(redrive.get("maxReceiveCount")), values["SummarizeMaxReceiveCount"])
    report.check("SummarizeMaxReceiveCount > MaxAttempts (the worker gives up first)",
                 int(values["SummarizeMaxReceiveCount"]) > int(values["MaxAttempts"]))
    timeout = live.c["lambda"].get_function(FunctionName=live.physical("SummarizeFunction"))["Configuration"]["Timeout"]
    vis = int(attrs["SummarizeQueue"]["VisibilityTimeout"])
    report.check(f"SummarizeQueue visibility {vis} >= 6 x summarize timeout {timeout}", vis >= 6 * timeout)
    report.check(f"ClaimTtlSeconds {values['ClaimTtlSeconds']} > SummarizeQueue visibility {vis}",
                 int(values["ClaimTtlSeconds"]) > vis)
    report.check("SummarizeDlq retention > SummarizeQueue retention (moved messages keep their age)",
                 int(attrs["SummarizeDlq"]["MessageRetentionPeriod"]) > int(attrs["SummarizeQueue"]["MessageRetentionPeriod"]))


def function_ids(tpl):
    return sorted(l for l, r in tpl["Resources"].items() if r["Type"] == "AWS::Lambda::Function")


def check_functions(report, tpl, values, live, ev):
    report.section("Lambda functions")
    res = tpl["Resources"]
    lam = live.c["lambda"]
    for lid in function_ids(tpl):
        props = res[lid]["Properties"]
        full = lam.get_function(FunctionName=live.physical(lid))
        f = full["Configuration"]
        report.equal(f"{lid} runtime", f.get("Runtime"), "provided.al2023")
        report.equal(f"{lid} handler", f.get("Handler"), props.get("Handler"))
        report.equal(f"{lid} timeout", f.get("Timeout"), props.get("Timeout", 3))
        report.equal(f"{lid} memory", f.get("MemorySize"), props.get("MemorySize", 128))
        # moto's CloudFormation drops Architectures and LoggingConfig (moto reports x86_64).
        report.equal(f"{lid} architectures (template; moto drops them)", props.get("Architectures"), ["arm64"])
        report.equal(f"{lid} log format (template; moto drops LoggingConfig)",
                     props.get("LoggingConfig", {}).get("LogFormat"), "JSON")
        got_env = {k: cfn_str(v) for k, v in (f.get("Environment", {}).get("Variables") or {}).items()}
        want_env = {k: cfn_str(v) for k, v in ev(props.get("Environment", {}).get("Variables", {})).items()}
        diff = sorted(k for k in set(got_env) | set(want_env) if got_env.get(k) != want_env.get(k))
        report.check(f"{lid} environment = the template's, evaluated ({len(want_env)} variables)", not diff,
                     "\n".join(f"{k}: expected {want_env.get(k)!r}, got {got_env.get(k)!r}" for k in diff))
        # Variables naming another resource resolve to that resource as moto created it.
        for var, expr in sorted(props.get("Environment", {}).get("Variables", {}).items()):
            target = ref_target(expr)
            if target in live.resources:
                kind = live.resources[target]["ResourceType"].split("::")[-1]
                report.equal(f"{lid} {var} -> {kind} {target}", got_env.get(var), cfn_str(ev(expr)))
        reserved = full.get("Concurrency", {}).get("ReservedConcurrentExecutions")
        want = props.get("ReservedConcurrentExecutions")
        report.equal(f"{lid} reserved concurrency", cfn_str(reserved) if reserved is not None else None,
                     cfn_str(ev(want)) if want is not None else None)
    env = lambda lid: lam.get_function(FunctionName=live.physical(lid))["Configuration"]["Environment"]["Variables"]
    for lid in function_ids(tpl):
        report.equal(f"{lid} TABLE_NAME = the PrTable's name", env(lid).get("TABLE_NAME"), live.physical("PrTable"))
    # Enrichment reads GitHub as the App when there is one (installation tokens), else the token.
    app = bool(values["GitHubAppId"] and values["GitHubAppPrivateKeySecretArn"])
    report.equal("EnrichFunction GITHUB_TOKEN_ARN", env("EnrichFunction").get("GITHUB_TOKEN_ARN"),
                 "" if app else values["GitHubTokenSecretArn"])
    # The key never: the token function (TokenFunction) mints the App's tokens.
    report.equal("EnrichFunction has no GITHUB_APP_PRIVATE_KEY_ARN", env("EnrichFunction").get("GITHUB_APP_PRIVATE_KEY_ARN"),
                 None)
    report.equal("EnrichFunction TOKEN_FUNCTION_NAME", env("EnrichFunction").get("TOKEN_FUNCTION_NAME"),
                 live.physical("TokenFunction") if app else "")
    if app:
        report.equal("TokenFunction GITHUB_APP_PRIVATE_KEY_ARN", env("TokenFunction").get("GITHUB_APP_PRIVATE_KEY_ARN"),
                     values["GitHubAppPrivateKeySecretArn"])
    report.equal("SweeperFunction ENRICH_ENABLED", env("SweeperFunction").get("ENRICH_ENABLED"),
                 "true" if values["GitHubTokenSecretArn"] or app else "false")
    on_key = values["LlmProvider"] != "bedrock"
    for fn, model in (("SummarizeFunction", "SummaryModel"), ("PageBuilderFunction", "StoryModel")):
        var = "SUMMARY_MODEL" if model == "SummaryModel" else "STORY_MODEL"
        report.equal(f"{fn} LLM_PROVIDER", env(fn).get("LLM_PROVIDER"), values["LlmProvider"])
        report.equal(f"{fn} {var}", env(fn).get(var), values[model])
        report.equal(f"{fn} LLM_API_KEY_ARN", env(fn).get("LLM_API_KEY_ARN"),
                     values["LlmApiKeySecretArn"] if on_key and values[model] else "")
    notion = bool(values["NotionTokenSecretArn"] and values["NotionParentPageId"])
    report.equal("PageBuilderFunction NOTION_TOKEN_ARN", env("PageBuilderFunction").get("NOTION_TOKEN_ARN"),
                 values["NotionTokenSecretArn"] if notion else "")
    report.equal("WebhookFunction GITHUB_WEBHOOK_SECRET_ARN = the webhook secret",
                 env("WebhookFunction").get("GITHUB_WEBHOOK_SECRET_ARN"), ev({"Ref": "WebhookSecret"}))
    webhook = lam.get_function(FunctionName=live.physical("WebhookFunction"))
    reserved = webhook.get("Concurrency", {}).get("ReservedConcurrentExecutions")
    if values["WebhookReservedConcurrency"] == "0":
        report.equal("WebhookFunction has no reserved concurrency", reserved, None)
    else:
        report.equal("WebhookFunction reserved concurrency = WebhookReservedConcurrency",
                     cfn_str(reserved), values["WebhookReservedConcurrency"])
    # Permissions (AWS::Lambda::Permission is created by moto: read the function policies back).
    for lid, r in sorted(res.items()):
        if r["Type"] != "AWS::Lambda::Permission":
            continue
        p = r["Properties"]
        fn = ref_target(p["FunctionName"])
        try:
            policy = json.loads(lam.get_policy(FunctionName=live.physical(fn))["Policy"])
        except Exception as e:
            report.fail(f"{lid}: {fn} has a resource policy", repr(e))
            continue
        principals = json.dumps(policy)
        report.check(f"{lid}: {fn} may be invoked by {p['Principal']}",
                     p["Principal"] in principals and "lambda:InvokeFunction" in principals, policy)


def check_mappings(report, tpl, values, live, ev):
    report.section("event source mappings")
    res = tpl["Resources"]
    lam = live.c["lambda"]

    def mapping(fn, source_arn):
        ms = lam.list_event_source_mappings(FunctionName=live.physical(fn))["EventSourceMappings"]
        return next((m for m in ms if m.get("EventSourceArn") == source_arn), None)

    def template_mapping(fn, source):
        return next(ev(r["Properties"]) for r in res.values()
                    if r["Type"] == "AWS::Lambda::EventSourceMapping"
                    and ref_target(r["Properties"]["FunctionName"]) == fn
                    and ref_target(r["Properties"]["EventSourceArn"]) == source)

    kept, dropped = [], []

    def field(label, m, tm, key, expected, norm=lambda v: v):
        # Asserts what moto keeps; a field moto does not return is asserted on the template.
        if key in m and m[key] is not None:
            kept.append(key)
            report.equal(f"{label} {key}", norm(m[key]), expected)
        else:
            dropped.append(key)
            report.equal(f"{label} {key} (template; moto does not keep it)", norm(tm.get(key)), expected)

    stream = live.attrs["PrTable"]["StreamArn"]
    m = mapping("EnrichFunction", stream)
    if report.check("EnrichFunction has a mapping on the PrTable stream", m is not None):
        tm = template_mapping("EnrichFunction", "PrTable")
        label = "enrich stream mapping"
        pattern = lambda fc: [json.loads(f["Pattern"]) for f in (fc or {}).get("Filters", [])]
        edits = {"eventName": ["MODIFY"], "dynamodb": {
            "OldImage": {"summarizedAt": {"S": [{"exists": True}]}},
            "NewImage": {"summarizedAt": {"S": [{"exists": True}]}}}}
        field(label, m, tm, "FilterCriteria", [{"eventName": ["INSERT"]}, edits], pattern)
        field(label, m, tm, "BisectBatchOnFunctionError", True)
        field(label, m, tm, "MaximumRetryAttempts", values["EnrichMaximumRetryAttempts"], cfn_str)
        field(label, m, tm, "MaximumRecordAgeInSeconds", values["EnrichMaximumRecordAgeSeconds"], cfn_str)
        field(label, m, tm, "BatchSize", values["EnrichBatchSize"], cfn_str)
        field(label, m, tm, "StartingPosition", "TRIM_HORIZON")
        field(label, m, tm, "FunctionResponseTypes", ["ReportBatchItemFailures"])
        field(label, m, tm, "DestinationConfig", live.attrs["EnrichStreamDlq"]["Arn"],
              lambda d: (d or {}).get("OnFailure", {}).get("Destination"))
    queue = live.attrs["SummarizeQueue"]["Arn"]
    m = mapping("SummarizeFunction", queue)
    if report.check("SummarizeFunction has a mapping on SummarizeQueue", m is not None):
        tm = template_mapping("SummarizeFunction", "SummarizeQueue")
        label = "summarize SQS mapping"
        field(label, m, tm, "BatchSize", values["SummarizeBatchSize"], cfn_str)
        field(label, m, tm, "FunctionResponseTypes", ["ReportBatchItemFailures"])
        field(label, m, tm, "ScalingConfig", values["SummarizeMaximumConcurrency"],
              lambda s: cfn_str((s or {}).get("MaximumConcurrency")))
    n = sum(1 for r in res.values() if r["Type"] == "AWS::Lambda::EventSourceMapping")
    all_live = lam.list_event_source_mappings()["EventSourceMappings"]
    report.equal("number of event source mappings", len(all_live), n)
    if dropped:
        report.info("mapping fields moto does not keep (asserted on the template): " + ", ".join(sorted(set(dropped))))


def log_group_of(tpl, fn_lid, live, ev):
    """(log group name, how it was found) of a function: LoggingConfig.LogGroup, else Lambda's
    default /aws/lambda/<name>."""
    lc = tpl["Resources"][fn_lid]["Properties"].get("LoggingConfig", {})
    if "LogGroup" in lc:
        return cfn_str(ev(lc["LogGroup"])), "LoggingConfig.LogGroup"
    return f"/aws/lambda/{live.physical(fn_lid)}", "Lambda's default group"


def check_log_groups(report, tpl, values, live, ev):
    report.section("log groups")
    for lid, r in sorted(tpl["Resources"].items()):
        if r["Type"] != "AWS::Logs::LogGroup":
            continue
        name = live.physical(lid)
        g = next(g for g in live.c["logs"].describe_log_groups(logGroupNamePrefix=name)["logGroups"]
                 if g["logGroupName"] == name)
        report.equal(f"{lid} retention = LogRetentionDays", cfn_str(g.get("retentionInDays")), values["LogRetentionDays"])
        if "LogGroupName" in r["Properties"]:
            report.equal(f"{lid} name", name, cfn_str(ev(r["Properties"]["LogGroupName"])))


def check_outputs(report, tpl, values, live, ev):
    report.section("stack outputs")
    got = {o["OutputKey"]: o.get("OutputValue") for o in
           live.c["cloudformation"].describe_stacks(StackName=live.stack_name)["Stacks"][0].get("Outputs", [])}
    for key, o in tpl["Outputs"].items():
        want = cfn_str(ev.safe(o["Value"]))
        note = " (placeholder: names a resource moto does not create)" if "placeholder-" in want else ""
        value = got.get(key)
        report.check(f"output {key} non-empty = {short(want)}{note}", bool(value) and cfn_str(value) == want,
                     f"expected {want!r}\ngot      {value!r}")
    extra = sorted(set(got) - set(tpl["Outputs"]))
    report.check("no outputs beyond the template's", not extra, extra)
