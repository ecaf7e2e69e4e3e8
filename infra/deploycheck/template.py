"""Reading the transformed template: parameters, conditions and intrinsic functions resolved."""

import json
import re

from .settings import NO_VALUE, _DROP


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


def as_list(v):
    return v if isinstance(v, list) else [v]


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


def ev_or_plain(ev, node, values):
    """Evaluates with moto's attributes if the stack exists, else parameters only."""
    if ev is not None:
        return ev.safe(node)
    if isinstance(node, dict) and set(node) == {"Ref"} and node["Ref"] in values:
        return values[node["Ref"]]
    return node
