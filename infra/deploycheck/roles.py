"""Every function's role held to least privilege (and Bedrock's grants through inference profiles)."""

import json
import re
from collections import Counter

from .policy import allows, bedrock_statements, canonical, live_policies, logs_actions, statements, template_policies, template_statements
from .resources import function_ids, log_group_of
from .settings import ACCOUNT, BROAD_LOGS_POLICIES, REGION
from .template import as_list, cfn_str, ref_target


def check_roles(report, tpl, values, live, ev):
    report.section("IAM roles and policies")
    res = tpl["Resources"]
    iam = live.c["iam"]
    roles = sorted(l for l, r in res.items() if r["Type"] == "AWS::IAM::Role")
    by_name = {live.physical(l): l for l in roles}
    live_stmts = {}
    for lid in roles:
        name = live.physical(lid)
        got = live_policies(live, name)
        nulls = [n for n, doc in got if n in (None, "None", "null") or not statements(doc)]
        report.check(f"{lid} has no null/empty inline policy", not nulls, f"null or empty: {nulls} in {got}")
        want = template_policies(tpl, lid, ev)
        report.equal(f"{lid} inline policy names", sorted(cfn_str(n) for n, _ in got), sorted(cfn_str(n) for n, _ in want))
        got_s = [s for _, doc in got for s in statements(doc)]
        want_s = [s for _, ss in want for s in ss]
        live_stmts[lid] = got_s
        # IAM rejects a Resource that is not an ARN (a table name from !Ref, a queue URL).
        not_arns = [r for s in got_s for r in as_list(s.get("Resource", []))
                    if r != "*" and not re.match(r"^arn:aws[a-z-]*:", str(r))]
        report.check(f"{lid} every Resource is an ARN or *", not not_arns, f"not ARNs: {not_arns}")
        extra = Counter(map(canonical, got_s)) - Counter(map(canonical, want_s))
        lacking = Counter(map(canonical, want_s)) - Counter(map(canonical, got_s))
        report.check(f"{lid} statements = the template's for this set ({len(want_s)})",
                     not extra and not lacking,
                     "".join(f"not in the template: {s}\n" for s in extra)
                     + "".join(f"missing in moto:    {s}\n" for s in lacking))
        trust = iam.get_role(RoleName=name)["Role"]["AssumeRolePolicyDocument"]
        want_trust = statements(ev(res[lid]["Properties"]["AssumeRolePolicyDocument"]))
        report.check(f"{lid} trust policy = the template's",
                     Counter(map(canonical, statements(trust))) == Counter(map(canonical, want_trust)),
                     f"moto: {trust}\ntemplate: {want_trust}")
        # moto's CloudFormation ignores ManagedPolicyArns: asserted on the transformed template.
        managed = [cfn_str(a) for a in ev(res[lid]["Properties"].get("ManagedPolicyArns", []))]
        broad = [a for a in managed if a.rsplit("/", 1)[-1] in BROAD_LOGS_POLICIES]
        report.check(f"{lid} attaches no managed policy granting logs on * (template; moto ignores ManagedPolicyArns)",
                     not broad, f"attaches {broad}")
        on_star = [s for s in got_s if logs_actions(s) and "*" in as_list(s.get("Resource", []))]
        report.check(f"{lid} grants no logs action on '*'", not on_star, on_star)

    # Each function: its own role, logging only to its own declared log group.
    lam = live.c["lambda"]
    fn_roles = {}
    groups = {live.physical(l) for l, r in res.items() if r["Type"] == "AWS::Logs::LogGroup"}
    for fn in function_ids(tpl):
        role_arn = lam.get_function(FunctionName=live.physical(fn))["Configuration"]["Role"]
        role = by_name.get(role_arn.rsplit("/", 1)[-1])
        if not report.check(f"{fn} runs with a role of the stack", role is not None, role_arn):
            continue
        fn_roles[fn] = role
        report.equal(f"{fn} role (moto) = its template Role", role, ref_target(res[fn]["Properties"]["Role"]))
        group, how = log_group_of(tpl, fn, live, ev)
        report.check(f"{fn} LoggingConfig.LogGroup names a log group the template declares "
                     "(template; moto drops LoggingConfig)",
                     how == "LoggingConfig.LogGroup" and group in groups,
                     f"logs to {how} {group!r}; declared groups: {sorted(groups)}")
        stmts = live_stmts[role]
        if group in groups:
            arn = live.attrs[next(l for l in res if res[l]["Type"] == "AWS::Logs::LogGroup"
                                  and live.physical(l) == group)]["Arn"]
            base = arn.removesuffix(":*")
            scoped = {base, base + ":*", base + ":log-stream:*"}
            wrong = [s for s in stmts if logs_actions(s) and not set(as_list(s.get("Resource", []))) <= scoped]
            report.check(f"{fn} role's logs actions are on its log group only", not wrong,
                         f"log group ARN {arn}\n" + "\n".join(json.dumps(s) for s in wrong))
            # Lambda writes to the group's log streams, so the grant must cover them. moto's
            # GetAtt lacks the ":*" real CloudFormation gives, so this reads the template: the
            # Resource must be the group's GetAtt Arn (real: "…:*") or a Sub ending ":*".
            glid = next(l for l in res if res[l]["Type"] == "AWS::Logs::LogGroup" and live.physical(l) == group)
            for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
                exprs = [r for s in template_statements(tpl, role) if action in as_list(s.get("Action", []))
                         for r in as_list(s.get("Resource", []))]
                covers = [r for r in exprs if r == {"Fn::GetAtt": [glid, "Arn"]}
                          or (isinstance(r, dict) and "Fn::Sub" in r and glid in json.dumps(r)
                              and json.dumps(r).rstrip('"]}').endswith(":*"))]
                report.check(f"{fn} role allows {action} on its log group's streams (template)",
                             bool(covers), f"Resource expressions: {exprs}")
    shared = {r: sorted(f for f in fn_roles if fn_roles[f] == r) for r in set(fn_roles.values())}
    shared = {r: fs for r, fs in shared.items() if len(fs) > 1}
    report.check("every function has its own role", not shared, f"shared: {shared}")

    # Behavioural grants, read back from moto (what the Fn::If/NoValue bug would break).
    def grants(fn, action, resource):
        return fn in fn_roles and allows(live_stmts[fn_roles[fn]], action, resource)

    a = live.attrs
    # Everything CreateEventSourceMapping and the poller need on the stream.
    for action in ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"):
        report.check(f"EnrichFunction may {action} on the PrTable stream",
                     grants("EnrichFunction", action, a["PrTable"]["StreamArn"]))
    report.check("EnrichFunction may dynamodb:ListStreams", grants("EnrichFunction", "dynamodb:ListStreams", "*"))
    report.check("EnrichFunction may send to EnrichStreamDlq (stream OnFailure)",
                 grants("EnrichFunction", "sqs:SendMessage", a["EnrichStreamDlq"]["Arn"]))
    report.check("SummarizeFunction consumes SummarizeQueue",
                 all(grants("SummarizeFunction", x, a["SummarizeQueue"]["Arn"])
                     for x in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")))
    report.check("SweeperFunction may send to SummarizeQueue", grants("SweeperFunction", "sqs:SendMessage", a["SummarizeQueue"]["Arn"]))
    report.check("WebhookFunction reads the webhook secret",
                 grants("WebhookFunction", "secretsmanager:GetSecretValue", ev({"Ref": "WebhookSecret"})))
    ssm_arn = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{values['ModulesConfigParameter']}"
    notion = bool(values["NotionTokenSecretArn"] and values["NotionParentPageId"])
    on_key = values["LlmProvider"] != "bedrock"
    optional = [
        ("EnrichFunction", "secretsmanager:GetSecretValue",
         "" if values["GitHubAppId"] and values["GitHubAppPrivateKeySecretArn"] else values["GitHubTokenSecretArn"],
         "GitHubTokenSecretArn"),
        # The App's key: the token function only among those that read GitHub for enrichment
        # (enrich parses untrusted content and asks the token function for tokens).
        ("TokenFunction", "secretsmanager:GetSecretValue",
         values["GitHubAppPrivateKeySecretArn"] if values["GitHubAppId"] else "", "GitHubAppPrivateKeySecretArn"),
        # Redelivery reads its own token when given, else enrichment's (never both).
        ("RedeliverFunction", "secretsmanager:GetSecretValue",
         values.get("RedeliverTokenSecretArn") or values["GitHubTokenSecretArn"],
         "RedeliverTokenSecretArn" if values.get("RedeliverTokenSecretArn") else "GitHubTokenSecretArn"),
        ("RedeliverFunction", "secretsmanager:GetSecretValue",
         values["GitHubAppPrivateKeySecretArn"] if values["GitHubAppId"] else "", "GitHubAppPrivateKeySecretArn"),
        ("PageBuilderFunction", "secretsmanager:GetSecretValue", values["NotionTokenSecretArn"] if notion else "", "NotionTokenSecretArn"),
        ("SummarizeFunction", "secretsmanager:GetSecretValue",
         values["LlmApiKeySecretArn"] if on_key and values["SummaryModel"] else "", "LlmApiKeySecretArn"),
        ("PageBuilderFunction", "secretsmanager:GetSecretValue",
         values["LlmApiKeySecretArn"] if on_key and values["StoryModel"] else "", "LlmApiKeySecretArn"),
        ("SummarizeFunction", "ssm:GetParameter", ssm_arn if values["ModulesConfigParameter"] else "", "ModulesConfigParameter"),
        ("PageBuilderFunction", "ssm:GetParameter", ssm_arn if values["ModulesConfigParameter"] else "", "ModulesConfigParameter"),
    ]
    check_bedrock_grants(report, values, live_stmts, fn_roles)
    for fn, action, resource, param in optional:
        if resource:
            report.check(f"{fn} allows {action} on {param}", grants(fn, action, resource))
    check_token_function(report, values, live, live_stmts, fn_roles, grants)
    if values.get("RedeliverTokenSecretArn") and values["GitHubTokenSecretArn"]:
        report.check("RedeliverFunction cannot read enrichment's token when it has its own",
                     not grants("RedeliverFunction", "secretsmanager:GetSecretValue", values["GitHubTokenSecretArn"]))
    webhook_secret = ev({"Ref": "WebhookSecret"})
    all_stmts = [s for ss in live_stmts.values() for s in ss]
    secret_res = sorted({r for s in all_stmts if "secretsmanager:GetSecretValue" in as_list(s.get("Action", []))
                         for r in as_list(s.get("Resource", []))} - {webhook_secret})
    want_secrets = sorted(r for _, action, r, _ in optional if r and action.startswith("secretsmanager"))
    report.equal("secrets readable by the roles, besides the webhook secret", secret_res, sorted(set(want_secrets)))
    ssm_res = sorted({r for s in all_stmts if any(x.lower().startswith("ssm:") for x in as_list(s.get("Action", [])))
                      for r in as_list(s.get("Resource", []))})
    report.equal("SSM parameters readable by the roles", ssm_res, [ssm_arn] if values["ModulesConfigParameter"] else [])


def check_token_function(report, values, live, live_stmts, fn_roles, grants):
    """The App's key is read by the token function (and redelivery) only; the functions that
    parse repository content cannot read it; enrich invokes the token function and no other."""
    app = bool(values["GitHubAppId"] and values["GitHubAppPrivateKeySecretArn"])
    key = values["GitHubAppPrivateKeySecretArn"]
    report.check("TokenFunction exists exactly when the App is configured", ("TokenFunction" in fn_roles) == app,
                 f"App configured: {app}; functions: {sorted(fn_roles)}")
    if key:
        for fn in ("EnrichFunction", "SummarizeFunction", "PageBuilderFunction", "SweeperFunction"):
            report.check(f"{fn} cannot read the App's private key (it parses repository content)",
                         not grants(fn, "secretsmanager:GetSecretValue", key))
    invokers = sorted(fn for fn, role in fn_roles.items()
                      if any(any(a.lower().startswith("lambda:") or a == "*" for a in as_list(s.get("Action", [])))
                             for s in live_stmts[role]))
    if not app:
        report.equal("no function may invoke another without the App", invokers, [])
        return
    token = fn_roles.get("TokenFunction")
    token_arn = live.c["lambda"].get_function(FunctionName=live.physical("TokenFunction"))["Configuration"]["FunctionArn"]
    report.check("TokenFunction reads the App's private key", grants("TokenFunction", "secretsmanager:GetSecretValue", key))
    other = [s for s in live_stmts.get(token, []) if not logs_actions(s)
             and (as_list(s.get("Action", [])) != ["secretsmanager:GetSecretValue"] or as_list(s.get("Resource", [])) != [key])]
    report.check("TokenFunction's role reads the key and nothing else (besides its logs)", not other, other)
    report.equal("functions that may invoke a function", invokers, ["EnrichFunction"])
    invokes = [s for s in live_stmts[fn_roles["EnrichFunction"]]
               if any(a.lower().startswith("lambda:") for a in as_list(s.get("Action", [])))]
    report.check("EnrichFunction may invoke exactly TokenFunction",
                 [(as_list(s.get("Action", [])), as_list(s.get("Resource", []))) for s in invokes]
                 == [(["lambda:InvokeFunction"], [token_arn])], invokes)


def check_bedrock_grants(report, values, live_stmts, fn_roles):
    """Each function's Bedrock statements, read back from moto, are exactly its model's."""
    for fn, model in (("SummarizeFunction", "SummaryModel"), ("PageBuilderFunction", "StoryModel")):
        got = [(set(as_list(s.get("Action", []))), sorted(as_list(s.get("Resource", []))), s.get("Condition"))
               for s in live_stmts.get(fn_roles.get(fn), [])
               if any(a.startswith("bedrock:") for a in as_list(s.get("Action", [])))]
        want = ([(a, sorted(r), c) for a, r, c in bedrock_statements(values[model])]
                if values[model] and values["LlmProvider"] == "bedrock" else [])
        norm = lambda xs: sorted(json.dumps([sorted(a), r, c], sort_keys=True) for a, r, c in xs)
        report.equal(f"{fn} Bedrock grants for {model}={values[model] or '(none)'}", norm(got), norm(want))
