"""What moto cannot create, asserted on the transformed template instead."""

import json

from .policy import allows, live_policies, statements
from .resources import function_ids
from .template import as_list, cfn_str, ev_or_plain, ref_target, references


def check_not_in_moto(report, tpl, values, live, ev):
    res = tpl["Resources"]
    of = lambda t: sorted(l for l, r in res.items() if r["Type"] == t)
    fn_ids = set(function_ids(tpl))
    queues = set(of("AWS::SQS::Queue"))
    report.section("not created by moto: asserted on the transformed template")

    # Transport: every queue and bucket denies requests made without TLS.
    for policy_type, prop, covered_type in [("AWS::SQS::QueuePolicy", "Queues", "AWS::SQS::Queue"),
                                            ("AWS::S3::BucketPolicy", "Bucket", "AWS::S3::Bucket")]:
        covered = set()
        for lid in of(policy_type):
            p = res[lid]["Properties"]
            denies = [st for st in statements(p["PolicyDocument"])
                      if st.get("Effect") == "Deny" and json.dumps(st.get("Principal")) in ('{"AWS": "*"}', '"*"')
                      and str(st.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")).lower() == "false"]
            report.check(f"{lid} denies every request without TLS (aws:SecureTransport false)", bool(denies),
                         json.dumps(p["PolicyDocument"]))
            for target in as_list(p[prop]):
                covered.add(ref_target(target))
        missing = sorted(set(of(covered_type)) - covered)
        report.check(f"every {covered_type} has a {policy_type} that denies requests without TLS",
                     not missing, f"not covered: {missing}")

    # Enrichment (it parses untrusted repository content): its pages-table grant is held to
    # repositories' partitions and to the context's attributes.
    enrich_role = ref_target(res["EnrichFunction"]["Properties"]["Role"])
    contexts = [st for pol in res[enrich_role]["Properties"]["Policies"]
                for st in statements(pol.get("PolicyDocument", {})) if st.get("Sid") == "RepoContexts"]
    cond = contexts[0].get("Condition", {}) if contexts else {}
    report.check("EnrichFunction RepoContexts never reaches a #-partition (dynamodb:LeadingKeys)",
                 "#*" in as_list(cond.get("ForAllValues:StringNotLike", {}).get("dynamodb:LeadingKeys", [])),
                 json.dumps(cond))
    attrs = as_list(cond.get("ForAllValues:StringEquals", {}).get("dynamodb:Attributes", []))
    report.check("EnrichFunction RepoContexts limited to the context's attributes (dynamodb:Attributes)",
                 {"repo", "module", "context"} <= set(attrs) and not {"hook", "notion", "years"} & set(attrs),
                 json.dumps(cond))
    report.check("EnrichFunction RepoContexts reads name their attributes (dynamodb:Select)",
                 "SPECIFIC_ATTRIBUTES" in as_list(cond.get("StringEqualsIfExists", {}).get("dynamodb:Select", [])),
                 json.dumps(cond))
    report.check("EnrichFunction RepoContexts grants no PutItem (it would replace a page item whole)",
                 contexts and "dynamodb:PutItem" not in as_list(contexts[0].get("Action", [])))

    # The webhook's repository lifecycle writes: the tombstone only in the #org/ partitions and
    # only the tombstone's attributes (never the row's content); the stale mark only in
    # repositories' partitions and only the marker's (never a page's Notion ids, a hook, a lease).
    webhook_role = ref_target(res["WebhookFunction"]["Properties"]["Role"])
    webhook = {st.get("Sid"): st.get("Condition", {}) for pol in res[webhook_role]["Properties"]["Policies"]
               for st in statements(pol.get("PolicyDocument", {}))}
    forget, mark = webhook.get("ForgetOrgRows", {}), webhook.get("MarkIndexStale", {})
    report.check("WebhookFunction ForgetOrgRows only in #org/ partitions (dynamodb:LeadingKeys)",
                 as_list(forget.get("ForAllValues:StringLike", {}).get("dynamodb:LeadingKeys", [])) == ["#org/*"],
                 json.dumps(forget))
    attrs = set(as_list(forget.get("ForAllValues:StringEquals", {}).get("dynamodb:Attributes", [])))
    report.check("WebhookFunction ForgetOrgRows limited to the tombstone, never the row (dynamodb:Attributes)",
                 "goneWhy" in attrs and "org" not in attrs
                 and attrs <= {"repo", "module", "goneWhy", "lifeAt", "lifeDelivery"},
                 json.dumps(forget))
    report.check("WebhookFunction ForgetOrgRows reads back at most what it wrote over (dynamodb:ReturnValues)",
                 set(as_list(forget.get("StringEqualsIfExists", {}).get("dynamodb:ReturnValues", [])))
                 <= {"NONE", "UPDATED_OLD"},
                 json.dumps(forget))
    report.check("WebhookFunction MarkIndexStale never reaches a #-partition (dynamodb:LeadingKeys)",
                 "#*" in as_list(mark.get("ForAllValues:StringNotLike", {}).get("dynamodb:LeadingKeys", [])),
                 json.dumps(mark))
    attrs = set(as_list(mark.get("ForAllValues:StringEquals", {}).get("dynamodb:Attributes", [])))
    report.check("WebhookFunction MarkIndexStale limited to the stale marker (dynamodb:Attributes)",
                 "stale" in attrs and attrs <= {"repo", "module", "stale", "staleSince", "version"},
                 json.dumps(mark))

    # Secrets: generated, never a literal in the template.
    for lid in of("AWS::SecretsManager::Secret"):
        p = res[lid]["Properties"]
        report.check(f"{lid} is generated (GenerateSecretString, no SecretString)",
                     "GenerateSecretString" in p and "SecretString" not in p)
        report.check(f"{lid} retained on stack deletion", res[lid].get("DeletionPolicy", "").startswith("Retain"))

    # Schedules: target, role, DLQ and retry policy.
    scheduled = set()
    for lid in of("AWS::Scheduler::Schedule"):
        target = res[lid]["Properties"].get("Target", {})
        fn = ref_target(target.get("Arn"))
        scheduled.add(fn)
        if not report.check(f"{lid} targets a function of the stack ({fn})", fn in fn_ids):
            continue
        dlq = ref_target(target.get("DeadLetterConfig", {}).get("Arn"))
        report.check(f"{lid} dead-letters to a queue of the stack ({dlq})", dlq in queues)
        rp = target.get("RetryPolicy", {})
        report.check(f"{lid} retry policy bounded ({rp})",
                     "MaximumRetryAttempts" in rp and "MaximumEventAgeInSeconds" in rp
                     and int(rp["MaximumEventAgeInSeconds"]) <= 86400)
        if fn == "SweeperFunction":
            report.equal(f"{lid} expression = SweepSchedule", cfn_str(ev_or_plain(ev, res[lid]["Properties"]["ScheduleExpression"], values)),
                         values["SweepSchedule"])
        role = ref_target(target.get("RoleArn"))
        if not report.check(f"{lid} role is a role of the stack ({role})", role in res and res[role]["Type"] == "AWS::IAM::Role"):
            continue
        trust = statements(res[role]["Properties"]["AssumeRolePolicyDocument"])
        report.check(f"{lid} role trusts scheduler.amazonaws.com",
                     any("scheduler.amazonaws.com" in json.dumps(s.get("Principal")) for s in trust))
        cond = [s.get("Condition", {}) for s in trust]
        report.check(f"{lid} role's trust is limited to this account (aws:SourceAccount)",
                     any("aws:SourceAccount" in json.dumps(c) and "AWS::AccountId" in json.dumps(c) for c in cond),
                     f"trust statements: {json.dumps(trust)}")
        if live is not None:
            stmts = [s for _, doc in live_policies(live, live.physical(role)) for s in statements(doc)]
            report.check(f"{lid} role (moto) may invoke {fn}",
                         allows(stmts, "lambda:InvokeFunction", live.attrs[fn]["Arn"]))
            report.check(f"{lid} role (moto) may send to {dlq}",
                         allows(stmts, "sqs:SendMessage", live.attrs[dlq]["Arn"]))
    for fn in ("SweeperFunction", "PageBuilderFunction"):
        report.check(f"{fn} has a Scheduler schedule", fn in scheduled)

    # HTTP API: POST /webhook -> webhook function; stage with access logs and throttling.
    for lid in of("AWS::ApiGatewayV2::Api"):
        paths = res[lid]["Properties"].get("Body", {}).get("paths", {})
        routes = sorted(f"{m.upper()} {p}" for p, ms in paths.items() for m in ms)
        report.equal(f"{lid} routes", routes, ["POST /webhook"])
        integ = paths.get("/webhook", {}).get("post", {}).get("x-amazon-apigateway-integration", {})
        report.check(f"{lid} POST /webhook integrates WebhookFunction (aws_proxy, payload 2.0)",
                     integ.get("type") == "aws_proxy" and references(integ.get("uri"), "WebhookFunction")
                     and cfn_str(integ.get("payloadFormatVersion")) == "2.0", integ)
        report.check(f"{lid} has no authorizer (the function checks the signature)",
                     "securitySchemes" not in json.dumps(res[lid]["Properties"].get("Body", {})))
        stages = [s for s in of("AWS::ApiGatewayV2::Stage") if ref_target(res[s]["Properties"].get("ApiId")) == lid]
        report.check(f"{lid} has one auto-deployed $default stage", len(stages) == 1 and all(
            res[s]["Properties"].get("StageName") == "$default" and res[s]["Properties"].get("AutoDeploy") is True
            for s in stages), stages)
        for s in stages:
            p = res[s]["Properties"]
            dest = ref_target(p.get("AccessLogSettings", {}).get("DestinationArn"))
            report.check(f"{s} access logs go to a log group of the stack ({dest})",
                         dest in res and res[dest]["Type"] == "AWS::Logs::LogGroup")
            drs = p.get("DefaultRouteSettings", {})
            report.check(f"{s} is throttled ({drs})", "ThrottlingBurstLimit" in drs and "ThrottlingRateLimit" in drs)
        perms = [l for l in of("AWS::Lambda::Permission") if references(res[l]["Properties"].get("SourceArn"), lid)]
        report.check(f"{lid} may invoke WebhookFunction (a Lambda::Permission naming the API)",
                     any(ref_target(res[l]["Properties"]["FunctionName"]) == "WebhookFunction" for l in perms))
    report.check("the stack has the webhook HTTP API", bool(of("AWS::ApiGatewayV2::Api")))

    # Alarms: all notify AlarmTopic; every dead-letter queue is alarmed.
    alarms = of("AWS::CloudWatch::Alarm")
    for lid in alarms:
        p = res[lid]["Properties"]
        actions = [a for k in ("AlarmActions", "OKActions", "InsufficientDataActions") for a in p.get(k, [])]
        report.check(f"{lid} notifies AlarmTopic", bool(p.get("AlarmActions"))
                     and all(ref_target(a) == "AlarmTopic" for a in actions), actions)
        dims = [ref_target(d.get("Value")) for d in p.get("Dimensions", [])]
        report.check(f"{lid} dimensions name resources of the stack ({dims})", bool(dims) and all(d in res for d in dims))
    dlqs = set()
    for r in res.values():
        p = r.get("Properties", {})
        dlqs.add(ref_target(p.get("RedrivePolicy", {}).get("deadLetterTargetArn")))
        dlqs.add(ref_target(p.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")))
        dlqs.add(ref_target(p.get("Target", {}).get("DeadLetterConfig", {}).get("Arn")))
    # Queues whose messages are work to redrive alarm while any wait; SweeperScheduleDlq's
    # carry none, so it alarms on each message sent (one left unread would hold it on).
    for q in sorted(d for d in dlqs if d in queues):
        metric = "NumberOfMessagesSent" if q == "SweeperScheduleDlq" else "ApproximateNumberOfMessagesVisible"
        report.check(f"dead-letter queue {q} has a {metric} alarm", any(
            res[a]["Properties"].get("MetricName") == metric
            and any(ref_target(d.get("Value")) == q for d in res[a]["Properties"].get("Dimensions", []))
            for a in alarms))
    age = [a for a in alarms if res[a]["Properties"].get("MetricName") == "ApproximateAgeOfOldestMessage"
           and any(ref_target(d.get("Value")) == "SummarizeQueue" for d in res[a]["Properties"].get("Dimensions", []))]
    report.check("SummarizeQueue oldest-message alarm at OldestMessageAgeAlarmSeconds", any(
        cfn_str(ev_or_plain(ev, res[a]["Properties"]["Threshold"], values)) == values["OldestMessageAgeAlarmSeconds"]
        for a in age), age)

    # Alarm email subscription: only with AlarmEmail.
    subs = of("AWS::SNS::Subscription")
    if values["AlarmEmail"]:
        report.check("AlarmTopic has the AlarmEmail subscription", any(
            ref_target(res[s]["Properties"].get("TopicArn")) == "AlarmTopic"
            and res[s]["Properties"].get("Protocol") == "email"
            and ev_or_plain(ev, res[s]["Properties"].get("Endpoint"), values) == values["AlarmEmail"] for s in subs), subs)
    else:
        report.equal("no alarm email subscription without AlarmEmail", subs, [])

    # Lambda async invoke configs: the async-invoked functions do not retry.
    async_fns = set(scheduled) | {ref_target(t.get("Arn")) for l in of("AWS::Events::Rule")
                                  for t in res[l]["Properties"].get("Targets", [])}
    configs = {}
    for lid in of("AWS::Lambda::EventInvokeConfig"):
        p = res[lid]["Properties"]
        fn = ref_target(p.get("FunctionName"))
        configs[fn] = lid
        report.check(f"{lid} is for a function of the stack ({fn}), $LATEST",
                     fn in fn_ids and p.get("Qualifier") == "$LATEST")
        report.equal(f"{lid} MaximumRetryAttempts", cfn_str(p.get("MaximumRetryAttempts")), "0")
        age_s = p.get("MaximumEventAgeInSeconds")
        report.check(f"{lid} MaximumEventAgeInSeconds={age_s} within 60..21600",
                     age_s is not None and 60 <= int(age_s) <= 21600)
        dest = p.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        if dest is None:
            report.info(f"{lid} has no OnFailure destination")
            continue
        q = ref_target(dest)
        report.check(f"{lid} OnFailure goes to a queue or topic of the stack ({q})",
                     q in res and res[q]["Type"] in ("AWS::SQS::Queue", "AWS::SNS::Topic"))
        if live is not None and q in live.attrs and fn in live.attrs:
            role_arn = live.c["lambda"].get_function(FunctionName=live.physical(fn))["Configuration"]["Role"]
            stmts = [s for _, doc in live_policies(live, role_arn.rsplit("/", 1)[-1]) for s in statements(doc)]
            action = "sqs:SendMessage" if res[q]["Type"] == "AWS::SQS::Queue" else "sns:Publish"
            report.check(f"{fn} role (moto) may {action} to its OnFailure {q}",
                         allows(stmts, action, live.attrs[q]["Arn" if action.startswith("sqs") else "Ref"]))
    for fn in sorted(f for f in async_fns if f in fn_ids):
        report.check(f"{fn} (invoked asynchronously) has an EventInvokeConfig", fn in configs)
