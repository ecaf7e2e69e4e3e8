"""IAM statements: what a role's policies hold, and whether they allow an action on a resource."""

import ast
import fnmatch
import json

from .settings import ACCOUNT, REGION
from .template import as_list, cfn_str, ref_target


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
