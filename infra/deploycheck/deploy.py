"""Step 2, in .venv-moto: the CloudFormation create in moto and the checks over what it created."""

import json
import os
from collections import Counter

from .dashboard import check_dashboard
from .not_in_moto import check_not_in_moto
from .report import Report
from .resources import check_functions, check_log_groups, check_mappings, check_outputs, check_queues, check_tables
from .roles import check_roles
from .settings import ACCOUNT, ARTIFACT_BUCKET, ARTIFACT_KEY, NOT_IN_MOTO, PARAMETER_SETS, REGION, STAND_INS
from .template import Evaluator, check_parameters, parameter_values, placeholder, references, replace_refs, resolve


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
