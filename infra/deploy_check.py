#!/usr/bin/env python3
"""Deploy check of template.yaml, offline: the SAM transform, then a CloudFormation create in
moto, then assertions on what was created, for two parameter sets (all defaults; every
optional parameter set).

Two steps, because the SAM translator lives in .venv-tools and moto in .venv-moto
(infra/deploy-check.sh runs both):

  .venv-tools/bin/python infra/deploy_check.py transform DIR   template.yaml -> DIR/<set>.json
  .venv-moto/bin/python  infra/deploy_check.py deploy DIR      DIR/<set>.json -> moto, asserts

Expectations are derived from the transformed template wherever possible (which role a function
has, which statements that role's policies hold for the parameter set, which log group it logs
to); only behavioural facts are written here (INSERT-only stream filter, redrive to the DLQ, no
managed logs policy, ...). A failed assertion is printed and the rest still run; the deploy
step exits 1 if any failed.
"""

import ast
import copy
import fnmatch
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# DEPLOY_CHECK_TEMPLATE: check another copy of the template (e.g. an older revision).
TEMPLATE = Path(os.environ.get("DEPLOY_CHECK_TEMPLATE") or ROOT / "template.yaml")
# `sam deploy` sends the template through the artifacts bucket (resolve_s3 in samconfig.toml; the
# code needs it anyway), where CloudFormation's limit is 1 MB, not the 51,200 bytes of an inline
# body. Both the template and its transform stay well under it.
TEMPLATE_MAX_BYTES = 200_000
TRANSFORMED_MAX_BYTES = 500_000
REGION = "us-east-1"
ARTIFACT_BUCKET = "deploy-check-artifacts"
ARTIFACT_KEY = "code.zip"
ACCOUNT = "123456789012"  # moto's default account; the full set's ARNs live in it

# Parameter sets: all defaults, and every optional parameter set (plus non-default numbers, so
# that a value the template ignores or hard-codes shows up as a mismatch).
PARAMETER_SETS = {
    "default": {},
    "full": {
        "DeletionProtection": "false",
        "PendingShards": "8",
        "MaxBodyBytes": "2097152",
        "WebhookReservedConcurrency": "50",
        "GitHubTokenSecretArn": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:chronicle/github-token-AbC123",
        "GitHubApiUrl": "https://github.example.com/api/v3",
        "GitHubAppId": "424242",
        "LinkedIssuesScope": "owner",
        "RedeliverTokenSecretArn": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:chronicle/redeliver-token-ReD123",
        # Both LLM uses on Bedrock through inference profiles: a geographic one, a global one.
        "SummaryModel": "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "StoryModel": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "StoryMinNewEntries": "30",
        "GitHubAppPrivateKeySecretArn": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:chronicle/github-app-key-QrS456",
        "EnrichBatchSize": "20",
        "EnrichMaximumRetryAttempts": "7",
        "EnrichMaximumRecordAgeSeconds": "7200",
        "SweepSchedule": "rate(2 minutes)",
        "EnrichGraceSeconds": "300",
        "ClaimTtlSeconds": "1200",
        "SummarizeBatchSize": "8",
        "SummarizeMaximumConcurrency": "4",
        "SummarizeMaxReceiveCount": "12",
        "MaxAttempts": "6",
        "ModulesConfigParameter": "/chronicle/modules",
        "PageRebuildSeconds": "120",
        "NotionTokenSecretArn": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:chronicle/notion-token-XyZ789",
        "NotionParentPageId": "0123456789abcdef0123456789abcdef",
        "PublishMarkdownWithNotion": "true",
        "AlarmEmail": "ops@example.com",
        "OldestMessageAgeAlarmSeconds": "1800",
        "LogLevel": "info,chronicle=debug",
        "LogRetentionDays": "90",
    },
    # Bedrock's other model forms: a system profile's ARN and an application profile's ARN.
    "bedrock-arns": {
        "SummaryModel": f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/eu.anthropic.claude-haiku-4-5-20251001-v1:0",
        "StoryModel": f"arn:aws:bedrock:{REGION}:{ACCOUNT}:application-inference-profile/k3x9q2m7a1b4",
    },
    # A foundation model's ARN, and a bare id whose vendor looks like a scope.
    "bedrock-foundation": {
        "SummaryModel": f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-3-haiku-20240307-v1:0",
        "StoryModel": "us.model",
    },
    # The LLM through a key (Anthropic's API): the key is read, and nothing on Bedrock granted.
    "llm-key": {
        "LlmProvider": "anthropic",
        "LlmApiKeySecretArn": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:chronicle/llm-key-Q1w2E3",
        "SummaryModel": "claude-haiku-4-5",
        "StoryModel": "claude-sonnet-4-5",
    },
}

# Resource types moto 5.2.5's CloudFormation has no model for. It does not reject them: it logs
# a warning, skips the resource and resolves every Ref/GetAtt to it to None, which silently drops
# the property that used it (an env var, a policy Resource). So they are removed before the
# create, references to them replaced (see STAND_INS, placeholder()), and each is asserted on
# the transformed template instead (check_not_in_moto).
NOT_IN_MOTO = {
    "AWS::SecretsManager::Secret": "no CloudFormation model (stood in by a secret made through the API)",
    "AWS::Scheduler::Schedule": "no EventBridge Scheduler model at all",
    "AWS::ApiGatewayV2::Api": "only REST APIs (AWS::ApiGateway::*) have CloudFormation models",
    "AWS::ApiGatewayV2::Stage": "only REST APIs (AWS::ApiGateway::*) have CloudFormation models",
    "AWS::CloudWatch::Alarm": "only AWS::CloudWatch::Dashboard has a CloudFormation model",
    "AWS::Lambda::EventInvokeConfig": "no CloudFormation model (only the Lambda API has it)",
    "AWS::SNS::Subscription": "only AWS::SNS::Topic has a CloudFormation model",
    "AWS::SQS::QueuePolicy": "no CloudFormation model (only the SQS API sets a queue's Policy)",
    "AWS::S3::BucketPolicy": "no CloudFormation model (only the S3 API sets a bucket's policy)",
}
# Of those, the ones made through the service API before the create, so that references to them
# resolve to a real resource (the webhook function's env var and policy name the secret).
STAND_INS = {"AWS::SecretsManager::Secret"}

# Managed policies that grant CloudWatch Logs actions on "*": no function role may attach one.
BROAD_LOGS_POLICIES = (
    "AWSLambdaBasicExecutionRole",
    "AWSLambdaDynamoDBExecutionRole",
    "AWSLambdaSQSQueueExecutionRole",
    "AWSLambdaKinesisExecutionRole",
    "AWSLambdaVPCAccessExecutionRole",
)

NO_VALUE = {"Ref": "AWS::NoValue"}
_DROP = object()  # marks a value AWS::NoValue removed


# ------------------------------------------------------------------------------------------------
# Step 1: SAM transform (.venv-tools)
# ------------------------------------------------------------------------------------------------
class _PolicyMap:
    """A fixed managed-policy map instead of ManagedPolicyLoader (which calls IAM)."""

    def load(self):
        base = "arn:aws:iam::aws:policy/service-role/"
        return {name: base + name for name in BROAD_LOGS_POLICIES} | {
            "AWSXRayDaemonWriteAccess": "arn:aws:iam::aws:policy/AWSXRayDaemonWriteAccess",
        }


def point_code_at_artifact(sam):
    """As `sam package` would: local CodeUri -> the S3 artifact (moto's Lambda reads it)."""
    uri = f"s3://{ARTIFACT_BUCKET}/{ARTIFACT_KEY}"
    holders = [sam.get("Globals", {}).get("Function", {})]
    holders += [r.get("Properties", {}) for r in sam.get("Resources", {}).values()
                if r.get("Type") == "AWS::Serverless::Function"]
    for props in holders:
        code = props.get("CodeUri")
        if isinstance(code, str) and not code.startswith("s3://"):
            props["CodeUri"] = uri


def cmd_transform(outdir):
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    import logging

    # The translator records metrics nobody publishes, and warns about it at exit.
    logging.getLogger("samtranslator.metrics.metrics").setLevel(logging.ERROR)
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse  # understands !Ref, !If, ... short tags

    text = TEMPLATE.read_text()
    # CloudFormation reads templates of up to 1 MB from S3; keep well clear of it.
    size = len(text.encode())
    if size > TEMPLATE_MAX_BYTES:
        print(f"transform: {TEMPLATE.name} is {size} bytes, over {TEMPLATE_MAX_BYTES} "
              "(CloudFormation's limit from S3 is 1 MB): move descriptions to docs/TEMPLATE.md",
              file=sys.stderr)
        return 1
    print(f"transform: {TEMPLATE.name} is {size} bytes (at most {TEMPLATE_MAX_BYTES})")
    sam = yaml_parse(text)
    outdir.mkdir(parents=True, exist_ok=True)
    for name, params in PARAMETER_SETS.items():
        doc = copy.deepcopy(sam)
        point_code_at_artifact(doc)
        try:
            # CloudFormation runs the transform with the stack's parameter values: so do we.
            cfn = transform(doc, dict(params), _PolicyMap())
        except InvalidDocumentException as e:
            print(f"transform ({name}): template invalid:", file=sys.stderr)
            for cause in e.causes:
                print(f"  {cause.message}", file=sys.stderr)
            return 1
        compact = len(json.dumps(cfn, separators=(",", ":")).encode())
        if compact > TRANSFORMED_MAX_BYTES:
            print(f"transform ({name}): {compact} bytes after the transform, over "
                  f"{TRANSFORMED_MAX_BYTES}", file=sys.stderr)
            return 1
        path = outdir / f"{name}.json"
        path.write_text(json.dumps(cfn, indent=1))
        print(f"transform ({name}): {len(cfn['Resources'])} resources -> {path}")
    return 0


# ------------------------------------------------------------------------------------------------
# Conditions, Fn::If and AWS::NoValue, resolved for one parameter set (see resolve())
# ------------------------------------------------------------------------------------------------
def cfn_str(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def parameter_values(tpl, given):
    """Every parameter's value as CloudFormation sees it (a string), defaults filled in."""
    values = {}
    for name, spec in tpl.get("Parameters", {}).items():
        if name in given:
            values[name] = cfn_str(given[name])
        elif "Default" in spec:
            values[name] = cfn_str(spec["Default"])
    return values


def resolve(tpl, values):
    """The template with its Conditions applied for `values`.

    Works around a moto bug: moto's CloudFormation turns `Fn::If -> AWS::NoValue` inside a list
    (e.g. an AWS::IAM::Role's Policies) into a null instead of dropping it, and then fails on (or
    stores) that null. So every Fn::If is replaced here by its chosen branch, AWS::NoValue is
    dropped from lists and maps, and resources and outputs whose Condition is false are removed.
    Returns (resolved template, {condition: bool}).
    """
    conditions_src = tpl.get("Conditions", {})
    memo = {}

    def scalar(node):
        if isinstance(node, dict) and set(node) == {"Ref"}:
            if node["Ref"] in values:
                return values[node["Ref"]]
            raise ValueError(f"condition refers to {node['Ref']}, not a parameter")
        # The string functions a model id's conditions use (prefix, ARN, profile scope).
        if isinstance(node, dict) and set(node) == {"Fn::Select"}:
            index, items = node["Fn::Select"]
            return listed(items)[int(index)]
        if isinstance(node, dict) and set(node) == {"Fn::Join"}:
            sep, items = node["Fn::Join"]
            return sep.join(scalar(i) for i in items)
        if isinstance(node, (dict, list)):
            raise ValueError(f"unsupported value in a condition: {node}")
        return cfn_str(node)

    def listed(node):
        if isinstance(node, dict) and set(node) == {"Fn::Split"}:
            sep, text = node["Fn::Split"]
            return scalar(text).split(sep)
        if isinstance(node, list):
            return [scalar(i) for i in node]
        raise ValueError(f"unsupported list in a condition: {node}")

    def evaluate(node):
        (op, arg), = node.items()
        if op == "Fn::Equals":
            return scalar(arg[0]) == scalar(arg[1])
        if op == "Fn::Not":
            return not evaluate(arg[0])
        if op == "Fn::And":
            return all(evaluate(a) for a in arg)
        if op == "Fn::Or":
            return any(evaluate(a) for a in arg)
        if op == "Condition":
            return condition(arg)
        raise ValueError(f"unsupported condition function {op}")

    def condition(name):
        if name not in memo:
            memo[name] = evaluate(conditions_src[name])
        return memo[name]

    def strip(node):
        if node == NO_VALUE:
            return _DROP
        if isinstance(node, dict):
            if set(node) == {"Fn::If"}:
                name, yes, no = node["Fn::If"]
                return strip(yes if condition(name) else no)
            out = {}
            for k, v in node.items():
                v = strip(v)
                if v is not _DROP:
                    out[k] = v
            return out
        if isinstance(node, list):
            return [v for v in (strip(x) for x in node) if v is not _DROP]
        return node

    out = {k: v for k, v in tpl.items() if k not in ("Resources", "Outputs", "Conditions")}
    out["Resources"] = {}
    for lid, res in tpl["Resources"].items():
        if "Condition" in res and not condition(res["Condition"]):
            continue
        res = {k: v for k, v in res.items() if k != "Condition"}
        out["Resources"][lid] = strip(res)
    kept = set(out["Resources"])
    for res in out["Resources"].values():
        if "DependsOn" in res:
            deps = res["DependsOn"] if isinstance(res["DependsOn"], list) else [res["DependsOn"]]
            res["DependsOn"] = [d for d in deps if d in kept]
            if not res["DependsOn"]:
                del res["DependsOn"]
    out["Outputs"] = {}
    for key, o in tpl.get("Outputs", {}).items():
        if "Condition" in o and not condition(o["Condition"]):
            continue
        out["Outputs"][key] = strip({k: v for k, v in o.items() if k != "Condition"})
    return out, {name: condition(name) for name in conditions_src}


def check_parameters(tpl, given, report):
    """CloudFormation's own parameter validation (moto skips it): the sets must be deployable."""
    for name, spec in tpl.get("Parameters", {}).items():
        if name not in given and "Default" not in spec:
            report.fail(f"parameter {name}", "no value and no default")
            continue
        value = cfn_str(given.get(name, spec.get("Default")))
        problems = []
        if "AllowedValues" in spec and value not in [cfn_str(v) for v in spec["AllowedValues"]]:
            problems.append(f"not in AllowedValues {spec['AllowedValues']}")
        if "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], value):
            problems.append(f"does not match AllowedPattern {spec['AllowedPattern']}")
        if spec.get("Type") == "Number":
            try:
                number = float(value)
                if "MinValue" in spec and number < float(spec["MinValue"]):
                    problems.append(f"below MinValue {spec['MinValue']}")
                if "MaxValue" in spec and number > float(spec["MaxValue"]):
                    problems.append(f"above MaxValue {spec['MaxValue']}")
            except ValueError:
                problems.append("not a number")
        if problems:
            report.fail(f"parameter {name}={value!r} is valid", "; ".join(problems))
    unknown = sorted(set(given) - set(tpl.get("Parameters", {})))
    report.check("every parameter of the set exists in the template", not unknown, f"unknown: {unknown}")


# ------------------------------------------------------------------------------------------------
# Expressions evaluated against what moto created (for expectations)
# ------------------------------------------------------------------------------------------------
class Evaluator:
    """Evaluates Ref/GetAtt/Sub/Join/... with parameter values, pseudo parameters and, for
    resources, the names/ARNs/URLs read back from moto (`attrs[logical id]["Ref" or attr]`)."""

    def __init__(self, values, pseudo, attrs):
        self.values, self.pseudo, self.attrs = values, pseudo, attrs

    def ref(self, name):
        if name in self.values:
            return self.values[name]
        if name in self.pseudo:
            return self.pseudo[name]
        return self.attrs[name]["Ref"]

    def getatt(self, lid, attr):
        return self.attrs[lid][attr]

    def sub(self, text, variables):
        def one(m):
            name = m.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return cfn_str(variables[name])
            if "." in name:
                lid, attr = name.split(".", 1)
                return cfn_str(self.getatt(lid, attr))
            return cfn_str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def __call__(self, node):
        if isinstance(node, dict):
            if len(node) == 1:
                (op, arg), = node.items()
                if op == "Ref":
                    return self.ref(arg)
                if op == "Fn::GetAtt":
                    lid, attr = arg.split(".", 1) if isinstance(arg, str) else arg
                    return self.getatt(lid, attr)
                if op == "Fn::Sub":
                    if isinstance(arg, str):
                        return self.sub(arg, {})
                    return self.sub(arg[0], {k: self(v) for k, v in arg[1].items()})
                if op == "Fn::Join":
                    return arg[0].join(cfn_str(self(x)) for x in self(arg[1]))
                if op == "Fn::Select":
                    return self(arg[1])[int(self(arg[0]))]
                if op == "Fn::Split":
                    return self(arg[1]).split(arg[0])
                if op == "Fn::ToJsonString":
                    return json.dumps(self(arg))
                if op.startswith("Fn::"):
                    raise ValueError(f"{op} not supported by the deploy check's evaluator")
            return {k: self(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self(x) for x in node]
        return node

    def safe(self, node):
        try:
            return self(node)
        except (KeyError, ValueError) as e:
            return f"<cannot evaluate: {e}>"


def ref_target(node):
    """The logical id a plain {"Ref": X} or {"Fn::GetAtt": [X, A]} points at, else None."""
    if isinstance(node, dict) and len(node) == 1:
        (op, arg), = node.items()
        if op == "Ref" and isinstance(arg, str):
            return arg
        if op == "Fn::GetAtt":
            return (arg.split(".", 1) if isinstance(arg, str) else arg)[0]
    return None


def references(node, lid):
    """True if `node` refers to resource `lid` anywhere (Ref, GetAtt or inside a Sub)."""
    if isinstance(node, dict):
        if ref_target(node) == lid:
            return True
        if set(node) == {"Fn::Sub"}:
            text = node["Fn::Sub"] if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"][0]
            if re.search(r"\$\{" + re.escape(lid) + r"(\.[^}]*)?\}", text):
                return True
        return any(references(v, lid) for v in node.values())
    if isinstance(node, list):
        return any(references(v, lid) for v in node)
    return False


# ------------------------------------------------------------------------------------------------
# IAM policy helpers
# ------------------------------------------------------------------------------------------------
def as_list(v):
    return v if isinstance(v, list) else [v]


def statements(doc):
    if not isinstance(doc, dict):
        return []
    return [s for s in as_list(doc.get("Statement", [])) if isinstance(s, dict)]


def canonical(stmt):
    """A statement as a comparable string: single values as lists, lists sorted, scalars str."""

    def norm(v, listy):
        if isinstance(v, dict):
            return {k: norm(x, True) for k, x in v.items()}
        if isinstance(v, list) or listy:
            return sorted((norm(x, False) for x in as_list(v)), key=json.dumps)
        return cfn_str(v)

    out = {}
    for k, v in stmt.items():
        if k in ("Principal", "NotPrincipal") and isinstance(v, dict):
            out[k] = {p: norm(x, True) for p, x in v.items()}
        elif k == "Condition" and isinstance(v, dict):
            out[k] = {op: {ck: norm(cv, True) for ck, cv in kv.items()} for op, kv in v.items()}
        else:
            out[k] = norm(v, k in ("Action", "NotAction", "Resource", "NotResource"))
    return json.dumps(out, sort_keys=True)


def allows(stmts, action, resource):
    """Some Allow statement grants `action` on `resource` (wildcards in the statement)."""
    for s in stmts:
        if s.get("Effect") != "Allow":
            continue
        acts = [a.lower() for a in as_list(s.get("Action", []))]
        if not any(fnmatch.fnmatchcase(action.lower(), a) for a in acts):
            continue
        if any(fnmatch.fnmatchcase(resource, r) for r in as_list(s.get("Resource", []))):
            return True
    return False


def logs_actions(stmt):
    return [a for a in as_list(stmt.get("Action", [])) if a == "*" or a.lower().startswith("logs:")]


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------
class Report:
    def __init__(self, name):
        self.name, self.ok_count, self.failures = name, 0, []

    def section(self, title):
        print(f"\n  -- {title}")

    def ok(self, what):
        self.ok_count += 1
        print(f"    ok    {what}")

    def fail(self, what, detail=""):
        self.failures.append(what)
        print(f"    FAIL  {what}")
        for line in str(detail).splitlines():
            print(f"            {line}")

    def info(self, what):
        print(f"    info  {what}")

    def check(self, what, cond, detail=""):
        if cond:
            self.ok(what)
        else:
            self.fail(what, detail)
        return cond

    def equal(self, what, actual, expected):
        return self.check(f"{what} = {short(expected)}", actual == expected,
                          f"expected {expected!r}\ngot      {actual!r}")


def short(v, n=90):
    if v is None or v == "":
        return "none" if v is None else '""'
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= n else s[: n - 3] + "..."


# ------------------------------------------------------------------------------------------------
# Step 2: create the stack in moto and assert (.venv-moto)
# ------------------------------------------------------------------------------------------------
def placeholder(lid, attr=None):
    return f"placeholder-{lid}" + (f"-{attr}" if attr else "")


def replace_refs(node, repl):
    """Replaces Ref/GetAtt (also inside Fn::Sub strings) to ids in `repl` (lid -> fn(attr))."""
    if isinstance(node, dict):
        target = ref_target(node)
        if target in repl:
            (op, arg), = node.items()
            attr = None if op == "Ref" else (arg.split(".", 1) if isinstance(arg, str) else arg)[1]
            return repl[target](attr)
        if set(node) == {"Fn::Sub"}:
            arg = node["Fn::Sub"]
            text, variables = (arg, None) if isinstance(arg, str) else (arg[0], arg[1])

            def one(m):
                lid, _, attr = m.group(1).partition(".")
                return str(repl[lid](attr or None)) if lid in repl else m.group(0)

            text = re.sub(r"\$\{([^}!][^}]*)\}", one, text)
            return {"Fn::Sub": text if variables is None else [text, replace_refs(variables, repl)]}
        return {k: replace_refs(v, repl) for k, v in node.items()}
    if isinstance(node, list):
        return [replace_refs(v, repl) for v in node]
    return node


def zip_bytes():
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\necho deploy-check\n")
    return buf.getvalue()


class Live:
    """What moto created, read through boto3: physical ids and the attributes templates use."""

    def __init__(self, boto3, stack_name):
        self.c = {s: boto3.client(s, region_name=REGION) for s in
                  ("cloudformation", "dynamodb", "sqs", "iam", "lambda", "logs", "kms", "events",
                   "cloudwatch")}
        self.stack_name = stack_name
        self.resources = {r["LogicalResourceId"]: r for r in
                          self.c["cloudformation"].describe_stack_resources(StackName=stack_name)["StackResources"]}
        self.attrs = {}
        for lid, r in self.resources.items():
            # moto reports no physical id for some types (AWS::Lambda::Permission).
            pid = r.get("PhysicalResourceId")
            self.attrs[lid] = self._attributes(r["ResourceType"], pid) if pid else {}

    def _attributes(self, rtype, pid):
        c = self.c
        if rtype == "AWS::DynamoDB::Table":
            t = c["dynamodb"].describe_table(TableName=pid)["Table"]
            return {"Ref": pid, "Arn": t["TableArn"], "StreamArn": t.get("LatestStreamArn")}
        if rtype == "AWS::SQS::Queue":
            a = c["sqs"].get_queue_attributes(QueueUrl=pid, AttributeNames=["QueueArn"])["Attributes"]
            return {"Ref": pid, "Arn": a["QueueArn"], "QueueName": pid.rsplit("/", 1)[1], "QueueUrl": pid}
        if rtype == "AWS::S3::Bucket":
            return {"Ref": pid, "Arn": f"arn:aws:s3:::{pid}", "DomainName": f"{pid}.s3.amazonaws.com"}
        if rtype == "AWS::IAM::Role":
            r = c["iam"].get_role(RoleName=pid)["Role"]
            return {"Ref": pid, "Arn": r["Arn"], "RoleId": r["RoleId"]}
        if rtype == "AWS::Lambda::Function":
            f = c["lambda"].get_function(FunctionName=pid)["Configuration"]
            return {"Ref": pid, "Arn": f["FunctionArn"]}
        if rtype == "AWS::Logs::LogGroup":
            groups = c["logs"].describe_log_groups(logGroupNamePrefix=pid)["logGroups"]
            g = next(g for g in groups if g["logGroupName"] == pid)
            # moto's GetAtt Arn is the bare group ARN; real CloudFormation appends ":*". The
            # logs-scope check below reads the template's expression for that reason.
            return {"Ref": pid, "Arn": g.get("logGroupArn") or g["arn"].removesuffix(":*")}
        if rtype == "AWS::KMS::Key":
            # Not DescribeKey: moto's CloudFormation stores the KeyPolicy as a dict, on which
            # moto's own key-policy check then fails. ListKeys has the ARN too.
            k = next(k for k in c["kms"].list_keys()["Keys"] if k["KeyId"] == pid)
            return {"Ref": pid, "Arn": k["KeyArn"], "KeyId": pid}
        if rtype == "AWS::SNS::Topic":
            return {"Ref": pid, "TopicArn": pid, "TopicName": pid.rsplit(":", 1)[1]}
        if rtype == "AWS::Events::Rule":
            r = c["events"].describe_rule(Name=pid)
            return {"Ref": pid, "Arn": r["Arn"]}
        return {"Ref": pid}

    def physical(self, lid):
        return self.resources[lid].get("PhysicalResourceId")


def run_set(name, cfn, boto3, model_types):
    given = PARAMETER_SETS[name]
    report = Report(name)
    title = "all defaults" if not given else "every optional parameter set"
    print(f"\n=== parameter set '{name}' ({title}) ===")
    stack = f"chronicle-{name}"

    report.section("parameters")
    check_parameters(cfn, given, report)
    values = parameter_values(cfn, given)
    resolved, conds = resolve(cfn, values)
    report.info("conditions: " + ", ".join(f"{k}={'true' if v else 'false'}" for k, v in conds.items()))
    res = resolved["Resources"]
    by_type = Counter(r["Type"] for r in res.values())

    # --- what moto can create ------------------------------------------------------------------
    report.section("resource types moto cannot create")
    unknown = sorted(t for t in by_type if t not in model_types and t not in NOT_IN_MOTO)
    report.check("every resource type is created by moto or listed in NOT_IN_MOTO", not unknown,
                 f"moto would silently skip: {unknown}; add them to NOT_IN_MOTO and assert them "
                 "on the transformed template")
    for t in sorted(t for t in NOT_IN_MOTO if t in model_types):
        report.info(f"moto now has a model for {t}: consider creating it instead of removing it")
    skipped = {lid for lid, r in res.items() if r["Type"] in NOT_IN_MOTO or r["Type"] not in model_types}
    for t in sorted({res[l]["Type"] for l in skipped}):
        ids = sorted(l for l in skipped if res[l]["Type"] == t)
        report.info(f"removed {t} ({NOT_IN_MOTO.get(t, 'no moto model')}): {', '.join(ids)}")

    pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::StackName": stack,
              "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    s3.put_object(Bucket=ARTIFACT_BUCKET, Key=ARTIFACT_KEY, Body=zip_bytes())

    # Stand-ins (made through the service API) and placeholders for the removed resources, in
    # the resources and the outputs that refer to them (reported below).
    stand_in_attrs = {}
    sm = boto3.client("secretsmanager", region_name=REGION)
    for lid in sorted(skipped):
        if res[lid]["Type"] in STAND_INS:
            arn = sm.create_secret(Name=f"{stack}-{lid}", SecretString="deploy-check")["ARN"]
            stand_in_attrs[lid] = {"Ref": arn, "Id": arn}
    placeholder_attrs = {lid: {"Ref": placeholder(lid)} for lid in skipped if lid not in stand_in_attrs}
    repl = {lid: (lambda attr, a=a: a["Ref"] if attr is None else a.get(attr, a["Ref"]))
            for lid, a in stand_in_attrs.items()}
    repl.update({lid: (lambda attr, lid=lid: placeholder(lid, attr)) for lid in placeholder_attrs})
    for_moto = dict(resolved)
    for_moto["Resources"] = {lid: replace_refs(r, repl) for lid, r in res.items() if lid not in skipped}
    for_moto["Outputs"] = replace_refs(resolved["Outputs"], repl)
    placeholder_outputs = sorted(k for k, o in resolved["Outputs"].items()
                                 if any(references(o, l) for l in placeholder_attrs))
    for lid in sorted(placeholder_attrs):
        users = sorted(l for l, r in for_moto["Resources"].items() if references(res[l], lid))
        if users:
            report.info(f"references to {lid} in {', '.join(users)} replaced by '{placeholder(lid)}'")
    if placeholder_outputs:
        report.info(f"outputs naming a removed resource (placeholder value): {', '.join(placeholder_outputs)}")

    # --- the stack ---------------------------------------------------------------------------
    report.section("stack")
    cf = boto3.client("cloudformation", region_name=REGION)
    try:
        cf.create_stack(StackName=stack, TemplateBody=json.dumps(for_moto),
                        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in given.items()],
                        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"])
        status = cf.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except Exception as e:  # moto raises the model's own exception in-process
        status = f"{type(e).__name__}: {e}"
    if not report.check(f"stack {stack} created (CREATE_COMPLETE)", status == "CREATE_COMPLETE", status):
        check_not_in_moto(report, resolved, values, None, None)
        return report
    live = Live(boto3, stack)
    created = Counter(r["ResourceType"] for r in live.resources.values())
    missing = sorted(set(for_moto["Resources"]) - set(live.resources))
    report.check(f"every submitted resource was created ({len(for_moto['Resources'])})", not missing,
                 f"not created: {missing}")
    attrs = dict(live.attrs) | stand_in_attrs | placeholder_attrs
    ev = Evaluator(values, pseudo, attrs)

    checks = [check_tables, check_queues, check_functions, check_mappings, check_roles,
              check_log_groups, check_dashboard, check_outputs]
    for fn in checks:
        try:
            fn(report, resolved, values, live, ev)
        except Exception as e:  # keep checking the rest; the failure names the group
            report.fail(f"{fn.__name__} raised {type(e).__name__}", repr(e))
    check_not_in_moto(report, resolved, values, live, ev)

    report.section("resources")
    report.info("created by moto: " + ", ".join(f"{t} {n}" for t, n in sorted(created.items())))
    not_created = Counter(res[l]["Type"] for l in skipped)
    report.info("not created by moto, asserted on the transformed template: "
                + ", ".join(f"{t} {n}" for t, n in sorted(not_created.items())))
    return report


# --- tables ---------------------------------------------------------------------------------------
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


# --- queues ---------------------------------------------------------------------------------------
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


# --- functions ------------------------------------------------------------------------------------
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
    report.equal("EnrichFunction GITHUB_APP_PRIVATE_KEY_ARN", env("EnrichFunction").get("GITHUB_APP_PRIVATE_KEY_ARN"),
                 values["GitHubAppPrivateKeySecretArn"] if app else "")
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


# --- event source mappings ------------------------------------------------------------------------
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


# --- roles ----------------------------------------------------------------------------------------
def template_policies(tpl, role_lid, ev):
    """[(policy name, [statements])] the template gives role `role_lid`: its inline Policies and
    AWS::IAM::Policy resources naming it."""
    res = tpl["Resources"]
    out = [(p.get("PolicyName"), statements(ev(p.get("PolicyDocument"))))
           for p in res[role_lid]["Properties"].get("Policies", [])]
    for r in res.values():
        if r["Type"] == "AWS::IAM::Policy" and any(ref_target(x) == role_lid for x in r["Properties"].get("Roles", [])):
            out.append((ev(r["Properties"]["PolicyName"]), statements(ev(r["Properties"]["PolicyDocument"]))))
    return out


def template_statements(tpl, role_lid):
    """The role's statements as written (intrinsics unevaluated), every condition branch."""
    def walk(x):
        if isinstance(x, dict):
            if "Statement" in x:
                yield from as_list(x["Statement"])
            for v in x.values():
                yield from walk(v)
        elif isinstance(x, list):
            for v in x:
                yield from walk(v)
    return list(walk(tpl["Resources"][role_lid]["Properties"].get("Policies", [])))


def live_policies(live, role_name):
    iam = live.c["iam"]
    names = iam.list_role_policies(RoleName=role_name)["PolicyNames"]
    out = []
    for n in names:
        doc = iam.get_role_policy(RoleName=role_name, PolicyName=n)["PolicyDocument"]
        if isinstance(doc, str):
            # moto's CloudFormation stores a PolicyDocument given as a mapping as-is, and
            # GetRolePolicy then returns its Python repr (single quotes), not JSON.
            try:
                doc = json.loads(doc)
            except ValueError:
                doc = ast.literal_eval(doc)
        out.append((n, doc))
    return out


def log_group_of(tpl, fn_lid, live, ev):
    """(log group name, how it was found) of a function: LoggingConfig.LogGroup, else Lambda's
    default /aws/lambda/<name>."""
    lc = tpl["Resources"][fn_lid]["Properties"].get("LoggingConfig", {})
    if "LogGroup" in lc:
        return cfn_str(ev(lc["LogGroup"])), "LoggingConfig.LogGroup"
    return f"/aws/lambda/{live.physical(fn_lid)}", "Lambda's default group"


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
        ("EnrichFunction", "secretsmanager:GetSecretValue",
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


def bedrock_statements(model):
    """The statements a Bedrock model's grant must hold, as AWS documents them: a foundation
    model in this Region; or a profile (its ARN), its foundation model in any Region only
    through that profile, and for a global profile the Region-less model ARN too."""
    if ":foundation-model/" in model:
        return [({"bedrock:InvokeModel"}, [model], None)]
    if ":application-inference-profile/" in model:
        # Its ARN does not name the model: any, only through the profile.
        return [
            ({"bedrock:InvokeModel"}, [model], None),
            ({"bedrock:InvokeModel"}, ["arn:aws:bedrock:*::foundation-model/*"],
             {"StringEquals": {"bedrock:InferenceProfileArn": model}}),
        ]
    if model.startswith("arn:"):
        profile_arn = model
        profile_id = model.split("/", 1)[1]
    else:
        profile_id = model
        profile_arn = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{model}"
    scope, _, foundation = profile_id.partition(".")
    # `us.model`: a scope but no model id after it, so a foundation model (as ModelRef reads it).
    if scope not in ("us", "eu", "apac", "jp", "au", "ca", "us-gov", "global") or "." not in foundation:
        return [({"bedrock:InvokeModel"}, [f"arn:aws:bedrock:{REGION}::foundation-model/{model}"], None)]
    through = {"StringEquals": {"bedrock:InferenceProfileArn": profile_arn}}
    want = [
        ({"bedrock:InvokeModel"}, [profile_arn], None),
        ({"bedrock:InvokeModel"}, [f"arn:aws:bedrock:?*::foundation-model/{foundation}"], through),
    ]
    if scope == "global":
        want.append(({"bedrock:InvokeModel"}, [f"arn:aws:bedrock:::foundation-model/{foundation}"],
                     {"StringEquals": {"aws:RequestedRegion": "unspecified",
                                       "bedrock:InferenceProfileArn": profile_arn}}))
    return want


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


# --- log groups -----------------------------------------------------------------------------------
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


# --- dashboard ------------------------------------------------------------------------------------
def emitted(metric):
    """Whether some EMF line in the library crates (crates/*/src) emits `metric`: its
    name as a literal, or a prefix literal (`outcomes_emf_line(now, "Records", &[... "Failed"
    ...])`) with the outcome in the same file."""
    sources = [*(ROOT / "crates").glob("*/src/**/*.rs")]
    for path in sources:
        text = path.read_text()
        if f'"{metric}"' in text:
            return True
        for i in range(1, len(metric)):
            prefix, outcome = metric[:i], metric[i:]
            if re.search(r'outcomes_emf_line\(\s*now,\s*"' + re.escape(prefix) + '"', text):
                if f'"{outcome}"' in text:
                    return True
    return False


def check_dashboard(report, tpl, values, live, ev):
    report.section("dashboard")
    for lid, r in sorted(tpl["Resources"].items()):
        if r["Type"] != "AWS::CloudWatch::Dashboard":
            continue
        name = live.physical(lid)
        body = live.c["cloudwatch"].get_dashboard(DashboardName=name)["DashboardBody"]
        try:
            doc = json.loads(body)
        except ValueError as e:
            report.fail(f"{lid} body is JSON", repr(e))
            continue
        report.check(f"{lid} body is JSON with widgets", bool(doc.get("widgets")), short(body))
        report.equal(f"{lid} name", name, cfn_str(ev(r["Properties"]["DashboardName"])))
        functions = {live.physical(f) for f in function_ids(tpl)}
        queues = {live.physical(q).rsplit("/", 1)[-1] for q, qr in tpl["Resources"].items()
                  if qr["Type"] == "AWS::SQS::Queue"}
        for w in doc["widgets"]:
            props = w.get("properties", {})
            title = props.get("title", "?")
            report.equal(f"{lid} '{title}' region", props.get("region"), REGION)
            for metric in props.get("metrics", []):
                names = [m for m in metric if isinstance(m, str)]
                ns, metric_name, dims = names[0], names[1], dict(zip(names[2::2], names[3::2]))
                if ns == "Chronicle":
                    report.check(f"{lid} '{title}': {metric_name} is emitted", emitted(metric_name),
                                 f"no EMF line in crates/*/src emits {metric_name}")
                elif "FunctionName" in dims:
                    report.check(f"{lid} '{title}': {metric_name} of a function of the stack",
                                 dims["FunctionName"] in functions, dims)
                elif "QueueName" in dims:
                    report.check(f"{lid} '{title}': {metric_name} of a queue of the stack",
                                 dims["QueueName"] in queues, dims)
                else:
                    report.fail(f"{lid} '{title}': {ns}/{metric_name}", "unexpected dimensions")


# --- outputs --------------------------------------------------------------------------------------
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


# --- resources moto does not create: asserted on the transformed template -------------------------
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


def ev_or_plain(ev, node, values):
    """Evaluates with moto's attributes if the stack exists, else parameters only."""
    if ev is not None:
        return ev.safe(node)
    if isinstance(node, dict) and set(node) == {"Ref"} and node["Ref"] in values:
        return values[node["Ref"]]
    return node


def cmd_deploy(indir):
    import logging
    import time
    import warnings

    os.environ.update(AWS_DEFAULT_REGION=REGION, AWS_ACCESS_KEY_ID="testing",
                      AWS_SECRET_ACCESS_KEY="testing", MOTO_ALLOW_NONEXISTENT_REGION="false")
    os.environ.pop("AWS_ENDPOINT_URL", None)  # in-process mock, never a server
    os.environ.pop("AWS_PROFILE", None)
    # Unsupported types are removed before the create; the guard in run_set reports new ones.
    warnings.filterwarnings("ignore")
    logging.getLogger("moto").setLevel(logging.ERROR)
    import boto3
    from moto import mock_aws
    from moto.cloudformation.parsing import get_model_map

    model_types = set(get_model_map())
    started = time.monotonic()
    reports = []
    for name in PARAMETER_SETS:
        cfn = json.loads((indir / f"{name}.json").read_text())
        with mock_aws():  # a fresh account per parameter set
            reports.append(run_set(name, cfn, boto3, model_types))
    print("\n=== summary ===")
    for r in reports:
        print(f"  {r.name}: {r.ok_count} ok, {len(r.failures)} FAIL")
        for f in r.failures:
            print(f"    FAIL  {f}")
    failed = sum(len(r.failures) for r in reports)
    took = time.monotonic() - started
    if failed:
        print(f"deploy check: FAILED ({failed} failed assertions; {took:.1f} s)")
        return 1
    print(f"deploy check: ok ({sum(r.ok_count for r in reports)} assertions; {took:.1f} s)")
    return 0


def main(argv):
    if len(argv) != 3 or argv[1] not in ("transform", "deploy"):
        print(__doc__, file=sys.stderr)
        return 2
    step, d = argv[1], Path(argv[2])
    return cmd_transform(d) if step == "transform" else cmd_deploy(d)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
