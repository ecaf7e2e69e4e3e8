"""The emulator side of infra/invoke-check.sh (run with .venv-moto's python, which has boto3).

  invoke_check.py provision ENV_FILE   create what the functions need, write their environment
  invoke_check.py check STEP ANSWER    assert one `cargo lambda invoke` answer (and what it did)

The tables are created from template.yaml's own Properties (as the tests and the local stack do),
so the functions run against the deployed schema. Names are fixed per run id (CHECK_ID).
"""
import json
import os
import sys
import uuid

import boto3
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEBHOOK_SECRET = "chronicle-local-dev-secret"  # what infra/make-events.py signs events/ with
REPO, NUMBER = "Codertocat/Hello-World", 2  # the PR every sample in events/ names
STATE = os.path.join(ROOT, "target", "invoke-check.json")


class CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short tags (!Ref, !GetAtt, ...) as plain values."""


CfnLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


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


def provision(env_file):
    run = uuid.uuid4().hex[:8]
    with open(os.path.join(ROOT, "template.yaml")) as f:
        resources = yaml.load(f, Loader=CfnLoader)["Resources"]
    names = {k: f"chronicle-check-{k.lower()}-{run}" for k in ("prs", "entries", "pages")}
    create_table(resources, "PrTable", names["prs"])
    create_table(resources, "EntriesTable", names["entries"])
    create_table(resources, "PagesTable", names["pages"])
    sqs = client("sqs")
    queue = sqs.create_queue(QueueName=f"chronicle-check-summarize-{run}")["QueueUrl"]
    dlq = sqs.create_queue(QueueName=f"chronicle-check-summarize-dlq-{run}")["QueueUrl"]
    bucket = f"chronicle-check-{run}"
    client("s3").create_bucket(Bucket=bucket)
    secret = client("secretsmanager").create_secret(
        Name=f"chronicle-check-webhook-{run}", SecretString=WEBHOOK_SECRET
    )["ARN"]
    # Each function's environment as template.yaml gives it, with no GitHub token (enrichment
    # off, quietly), no Notion and no LLM: the options the samples can run without stand-ins.
    env = {
        "TABLE_NAME": names["prs"],
        "PENDING_SHARDS": "4",
        "RUST_LOG": "info",
        "GITHUB_WEBHOOK_SECRET_ARN": secret,
        "MAX_BODY_BYTES": "1048576",
        "GITHUB_TOKEN_ARN": "",
        "ENRICH_ENABLED": "false",
        "SUMMARIZE_QUEUE_URL": queue,
        "SUMMARIZE_DLQ_URL": dlq,
        "ENTRIES_TABLE": names["entries"],
        "PAGES_TABLE": names["pages"],
        "MODULES_CONFIG_FILE": "",
        "MODULES_CONFIG_PARAM": "",
        "PAGE_REBUILD_SECONDS": "0",
        "OUTPUT_S3_URI": f"s3://{bucket}/narratives/",
        "NOTION_TOKEN_ARN": "",
        "NOTION_PARENT_PAGE_ID": "",
    }
    with open(env_file, "w") as f:
        for k, v in env.items():
            f.write(f"{k}={v}\n")
    os.makedirs(os.path.dirname(STATE), exist_ok=True)
    with open(STATE, "w") as f:
        json.dump(dict(names=names, queue=queue, dlq=dlq, bucket=bucket), f)


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
        item = row(state)
        assert item["mergedAt"]["S"], item
        assert "pendingShard" in item, "stored as pending"
        print(f"  stored: {REPO}#{NUMBER} mergedAt={item['mergedAt']['S']} pendingShard={item['pendingShard']['S']}")
    elif step in ("enrich", "summarize"):
        assert answer["batchItemFailures"] == [], answer
        if step == "summarize":
            item = row(state)
            assert "summarizedAt" in item, f"not summarized: {item}"
            print(f"  summarized at {item['summarizedAt']['S']}")
    elif step == "enrich-retry":
        assert isinstance(answer, dict) and "batchItemFailures" not in answer, answer
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
    else:
        raise SystemExit(f"unknown step {step}")


if __name__ == "__main__":
    if sys.argv[1] == "provision":
        provision(sys.argv[2])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
