"""The emulator side of infra/invoke-check.sh (run with .venv-moto's python, which has boto3).

  invoke_check.py provision ENV_FILE GITHUB_API_URL TOKEN
                                       create what the functions need, write their environment
                                       (template.yaml's, evaluated with the emulator's names),
                                       and the token function's, with the App, beside it
                                       (token.env: the App's key is its alone)
  invoke_check.py summarize-event OUT  the summarize event from the sweeper's real message
  invoke_check.py check STEP ANSWER    assert one `cargo lambda invoke` answer (and what it did)

The tables are created from template.yaml's own Properties (as the tests and the local stack do),
so the functions run against the deployed schema. Names are fixed per run id (CHECK_ID).
"""
import json
import os
import re
import sys
import uuid

import boto3
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEBHOOK_SECRET = "chronicle-local-dev-secret"  # what infra/make-events.py signs events/ with
REPO, NUMBER = "Codertocat/Hello-World", 2  # the PR every sample in events/ names
STATE = os.path.join(ROOT, "target", "invoke-check.json")


class CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short tags as their long forms ({"Ref": x}, {"Fn::If": [...]})."""


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        return {"Fn::GetAtt": value.split(".", 1)}
    if suffix == "Condition":
        return {"Condition": value}
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _tag)

FUNCTIONS = ("WebhookFunction", "EnrichFunction", "SweeperFunction", "SummarizeFunction", "PageBuilderFunction",
             "RedeliverFunction")


class Template:
    """Each function's environment as template.yaml gives it: parameters at their defaults (or
    the overrides), resources by the emulator's names, conditions evaluated."""

    def __init__(self, doc, overrides, names):
        self.doc = doc
        self.values = {k: str(v.get("Default", "")) for k, v in doc["Parameters"].items()}
        self.values.update(overrides)
        self.names = names

    def condition(self, name):
        return self.truth(self.doc["Conditions"][name])

    def truth(self, c):
        (op, arg), = c.items()
        if op == "Fn::Equals":
            return self.eval(arg[0]) == self.eval(arg[1])
        if op == "Fn::Not":
            return not self.truth(arg[0])
        if op == "Fn::And":
            return all(self.truth(x) for x in arg)
        if op == "Fn::Or":
            return any(self.truth(x) for x in arg)
        if op == "Condition":
            return self.condition(arg)
        raise SystemExit(f"invoke-check: cannot evaluate condition {c}")

    def eval(self, v):
        if isinstance(v, dict) and len(v) == 1:
            (op, arg), = v.items()
            if op == "Ref":
                if arg in self.values:
                    return self.values[arg]
                if arg in self.names:
                    return self.names[arg]
                raise SystemExit(f"invoke-check: no local stand-in for !Ref {arg}")
            if op == "Fn::If":
                return self.eval(arg[1] if self.condition(arg[0]) else arg[2])
            if op == "Fn::Sub":
                return re.sub(r"\$\{([\w:.]+)\}", lambda m: self.eval({"Ref": m.group(1)}), arg)
            raise SystemExit(f"invoke-check: cannot evaluate {v}")
        return "" if v is None else str(v)

    def environment(self):
        """The union of the functions' variables (cargo lambda watch gives every function one
        environment), refusing two functions that need one variable to differ."""
        base = self.doc["Globals"]["Function"]["Environment"]["Variables"]
        env = {}
        for fn in FUNCTIONS:
            own = self.doc["Resources"][fn]["Properties"].get("Environment", {}).get("Variables", {})
            for k, v in {**base, **own}.items():
                value = self.eval(v)
                if env.get(k, value) != value:
                    raise SystemExit(f"invoke-check: {k} differs between functions ({env[k]!r}, {value!r})")
                env[k] = value
        return env

    def function_environment(self, fn):
        """One function's variables (the Globals' and its own), evaluated."""
        base = self.doc["Globals"]["Function"]["Environment"]["Variables"]
        own = self.doc["Resources"][fn]["Properties"].get("Environment", {}).get("Variables", {})
        return {k: self.eval(v) for k, v in {**base, **own}.items()}


def client(name):
    return boto3.client(name, endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")


def create_table(resources, logical, name):
    p = resources[logical]["Properties"]
    args = dict(
        TableName=name,
        AttributeDefinitions=p["AttributeDefinitions"],
        KeySchema=p["KeySchema"],
        BillingMode=p["BillingMode"],
    )
    if p.get("GlobalSecondaryIndexes"):
        args["GlobalSecondaryIndexes"] = p["GlobalSecondaryIndexes"]
    if p.get("StreamSpecification"):
        args["StreamSpecification"] = dict(StreamEnabled=True, **p["StreamSpecification"])
    client("dynamodb").create_table(**args)


def provision(env_file, github_api_url, github_token):
    run = uuid.uuid4().hex[:8]
    with open(os.path.join(ROOT, "template.yaml")) as f:
        doc = yaml.load(f, Loader=CfnLoader)
    resources = doc["Resources"]
    names = {k: f"chronicle-check-{k.lower()}-{run}" for k in ("prs", "entries", "pages")}
    create_table(resources, "PrTable", names["prs"])
    create_table(resources, "EntriesTable", names["entries"])
    create_table(resources, "PagesTable", names["pages"])
    sqs = client("sqs")
    queue = sqs.create_queue(QueueName=f"chronicle-check-summarize-{run}")["QueueUrl"]
    dlq = sqs.create_queue(QueueName=f"chronicle-check-summarize-dlq-{run}")["QueueUrl"]
    bucket = f"chronicle-check-{run}"
    client("s3").create_bucket(Bucket=bucket)
    secrets = client("secretsmanager")
    webhook_secret = secrets.create_secret(
        Name=f"chronicle-check-webhook-{run}", SecretString=WEBHOOK_SECRET
    )["ARN"]
    token_secret = secrets.create_secret(
        Name=f"chronicle-check-github-{run}", SecretString=github_token
    )["ARN"]
    template = Template(
        doc,
        # Enrichment on, against the GitHub stand-in; no Notion, no LLM (their defaults).
        {"GitHubTokenSecretArn": token_secret, "GitHubApiUrl": github_api_url},
        {
            "PrTable": names["prs"],
            "EntriesTable": names["entries"],
            "PagesTable": names["pages"],
            "SummarizeQueue": queue,
            "SummarizeDlq": dlq,
            "NarrativeBucket": bucket,
            "WebhookSecret": webhook_secret,
            "AWS::Region": "us-east-1",
        },
    )
    env = template.environment()
    with open(env_file, "w") as f:
        for k, v in sorted(env.items()):
            f.write(f"{k}={v}\n")
    print(f"  environment from template.yaml: {len(env)} variables")
    # The token function exists with the App only, and runs alone with it: the pipeline above
    # reads GitHub with the token (enrich with the App would invoke it through Lambda).
    with open(os.path.join(ROOT, "tests", "fixtures", "github", "app-test-key.pem")) as f:
        key = secrets.create_secret(Name=f"chronicle-check-github-app-key-{run}", SecretString=f.read())["ARN"]
    with_app = Template(
        doc,
        {"GitHubApiUrl": github_api_url, "GitHubAppId": "1", "GitHubAppPrivateKeySecretArn": key},
        template.names,
    )
    assert with_app.condition("HasGitHubApp"), "the App's parameters make the token function"
    token_env = with_app.function_environment("TokenFunction")
    assert token_env["GITHUB_APP_PRIVATE_KEY_ARN"] == key, token_env
    with open(os.path.join(os.path.dirname(env_file), "token.env"), "w") as f:
        for k, v in sorted(token_env.items()):
            f.write(f"{k}={v}\n")
    os.makedirs(os.path.dirname(STATE), exist_ok=True)
    with open(STATE, "w") as f:
        json.dump(dict(names=names, queue=queue, dlq=dlq, bucket=bucket), f)


def summarize_event(out_file):
    """The summarize function's event built from the message the sweeper really sent."""
    with open(STATE) as f:
        state = json.load(f)
    got = client("sqs").receive_message(
        QueueUrl=state["queue"], MaxNumberOfMessages=10, AttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", [])
    assert len(got) == 1, f"expected the sweeper's one message, got {got}"
    m = got[0]
    with open(os.path.join(ROOT, "events", "summarize.sqs.json")) as f:
        sample = json.load(f)
    record = sample["Records"][0]
    record.update(
        messageId=m["MessageId"],
        receiptHandle=m["ReceiptHandle"],
        body=m["Body"],
        md5OfBody=m["MD5OfBody"],
        attributes={k: v for k, v in m.get("Attributes", {}).items()},
        messageAttributes={},
    )
    assert json.loads(m["Body"]) == {"repo": REPO, "prNumber": NUMBER}, m["Body"]
    with open(out_file, "w") as f:
        json.dump({"Records": [record]}, f)
    print(f"  the sweeper's message: {m['Body']}")


def row(state):
    item = client("dynamodb").get_item(
        TableName=state["names"]["prs"],
        Key={"repo": {"S": REPO}, "prNumber": {"N": str(NUMBER)}},
        ConsistentRead=True,
    ).get("Item")
    assert item, f"no row for {REPO}#{NUMBER}"
    return item


def check(step, answer_file):
    with open(STATE) as f:
        state = json.load(f)
    with open(answer_file) as f:
        answer = json.load(f)
    print(f"  {step}: {json.dumps(answer)[:300]}")
    if step == "webhook":
        assert answer["statusCode"] == 200, answer
        assert json.loads(answer["body"]).get("stored") == "inserted", answer
        item = row(state)
        assert item["mergedAt"]["S"], item
        assert "pendingShard" in item, "stored as pending"
        print(f"  stored: {REPO}#{NUMBER} mergedAt={item['mergedAt']['S']} pendingShard={item['pendingShard']['S']}")
    elif step in ("enrich", "summarize"):
        assert answer["batchItemFailures"] == [], answer
        if step == "enrich":
            item = row(state)
            assert "enrichedAt" in item, f"not enriched: {item}"
            files = item.get("files", {}).get("L", [])
            assert len(files) == 5, f"expected the stand-in's 5 files: {item.get('files')}"
            print(f"  enriched at {item['enrichedAt']['S']} with {len(files)} files from the GitHub stand-in")
        if step == "summarize":
            item = row(state)
            assert "summarizedAt" in item, f"not summarized: {item}"
            print(f"  summarized at {item['summarizedAt']['S']}")
    elif step == "enrich-retry":
        # No row is parked for a rate limit: the retry reads the deferred partition, finds none.
        assert answer.get("seen") == 0 and answer.get("enriched") == 0 and answer.get("failed") == 0, answer
        assert answer.get("stoppedEarly") is False, answer
    elif step == "sweeper":
        assert answer["enqueued"] == 1, answer
        attrs = client("sqs").get_queue_attributes(
            QueueUrl=state["queue"], AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        assert attrs["ApproximateNumberOfMessages"] == "1", attrs
        print("  1 message on the summarize queue")
    elif step == "page-builder":
        assert answer["built"] >= 1, answer
        keys = [
            o["Key"]
            for o in client("s3").list_objects_v2(Bucket=state["bucket"], Prefix="narratives/").get("Contents", [])
        ]
        assert any(k.startswith(f"narratives/{REPO}/") for k in keys), keys
        print(f"  pages: {keys}")
    elif step == "token":
        # The App's key read from Secrets Manager, its JWT signed, GitHub asked which
        # installation sees the repository: the stand-in has no App registered, so the answer
        # is the typed, permanent refusal enrich stores as the skip reason. No token on this
        # path, and none logged on any.
        assert answer.get("outcome") == "refused", answer
        assert answer.get("kind") == "notInstalled" and answer.get("permanent") is True, answer
        assert answer.get("repo") == REPO, answer
        assert "token" not in answer, answer
    elif step == "redeliver":
        # The webhook recorded the delivery's hook; the stand-in has no deliveries recorded for
        # it (the tests add some), so the run reports GitHub's 404 with what the token needs.
        assert answer["hooks"] == 1, answer
        assert answer["redelivered"] == [], answer
        problem = answer["problems"][0]
        assert problem["hook"] == f"repos/{REPO}/hooks/109948940", problem
        assert "404" in problem["message"] and "admin:repo_hook" in problem["message"], problem
    else:
        raise SystemExit(f"unknown step {step}")


if __name__ == "__main__":
    if sys.argv[1] == "provision":
        provision(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "summarize-event":
        summarize_event(sys.argv[2])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
