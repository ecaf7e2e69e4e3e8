"""The CloudWatch dashboard: every metric it draws is one a function emits."""

import json
import re

from .report import short
from .resources import function_ids
from .settings import REGION, ROOT
from .template import cfn_str


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
