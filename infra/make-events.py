#!/usr/bin/env python3
"""Regenerates events/ from the real GitHub payloads in tests/fixtures (stdlib only).

  python3 infra/make-events.py

events/deliveries/*.delivery.json  raw signed webhook deliveries ({"headers", "body"}), in the
                                   order `chronicle dev --replay events/` sends them
events/webhook.apigw.json          an API Gateway HTTP API (payload v2) event carrying the signed
                                   merged delivery, for `sam local invoke -e` / `cargo lambda invoke`

None of the recorded pull_request examples is merged (both `closed` ones have "merged": false),
so the merged delivery is derived from pull_request.closed.1.json by setting merged, merged_at,
merged_by and merge_commit_sha; the later "edited" one also changes the title and updated_at.
Everything is signed with the local development secret below (chronicle dev's default).
"""
import copy
import hashlib
import hmac
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "github" / "webhooks"
OUT = ROOT / "events"
DEV_SECRET = "chronicle-local-dev-secret"


def load(name):
    return json.loads((FIXTURES / name).read_text())


def merged(payload):
    p = copy.deepcopy(payload)
    pr = p["pull_request"]
    pr["merged"] = True
    pr["merged_at"] = pr["closed_at"]
    pr["merged_by"] = copy.deepcopy(pr["user"])
    pr["merge_commit_sha"] = "c4295bd74fb0f4fda03689c3df3f2803b658fd85"
    return p


def delivery(event, guid, payload):
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    sig = "sha256=" + hmac.new(DEV_SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": guid,
        "X-GitHub-Hook-ID": "109948940",
        "X-Hub-Signature-256": sig,
    }
    return {"headers": headers, "body": body}


def main():
    closed = load("pull_request.closed.1.json")
    merged_pr = merged(closed)
    edited = copy.deepcopy(merged_pr)
    edited["action"] = "edited"
    edited["changes"] = {"title": {"from": merged_pr["pull_request"]["title"]}}
    edited["pull_request"]["title"] = "Update the README with new information (edited after merge)"
    edited["pull_request"]["updated_at"] = "2019-05-15T15:30:00Z"
    samples = [
        ("01-ping", delivery("ping", "d5a2a0f0-7743-11e9-8a3a-000000000001", load("ping.1.json"))),
        ("02-merged", delivery("pull_request", "d5a2a0f0-7743-11e9-8a3a-000000000002", merged_pr)),
        ("03-merged-redelivery", delivery("pull_request", "d5a2a0f0-7743-11e9-8a3a-000000000002", merged_pr)),
        ("04-edited-after-merge", delivery("pull_request", "d5a2a0f0-7743-11e9-8a3a-000000000004", edited)),
        ("05-closed-unmerged", delivery("pull_request", "d5a2a0f0-7743-11e9-8a3a-000000000005", closed)),
        ("06-opened", delivery("pull_request", "d5a2a0f0-7743-11e9-8a3a-000000000006", load("pull_request.opened.1.json"))),
        ("07-push", delivery("push", "d5a2a0f0-7743-11e9-8a3a-000000000007", load("push.1.json"))),
    ]
    (OUT / "deliveries").mkdir(parents=True, exist_ok=True)
    for name, d in samples:
        (OUT / "deliveries" / f"{name}.delivery.json").write_text(json.dumps(d, indent=2, ensure_ascii=False) + "\n")

    d = samples[1][1]
    apigw = {
        "version": "2.0",
        "routeKey": "POST /webhook",
        "rawPath": "/webhook",
        "rawQueryString": "",
        "headers": {k.lower(): v for k, v in d["headers"].items()} | {"content-length": str(len(d["body"].encode()))},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abcdef1234",
            "domainName": "abcdef1234.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abcdef1234",
            "http": {"method": "POST", "path": "/webhook", "protocol": "HTTP/1.1",
                     "sourceIp": "140.82.115.1", "userAgent": d["headers"]["User-Agent"]},
            "requestId": "JKJaXmPLvHcESHA=",
            "routeKey": "POST /webhook",
            "stage": "$default",
            "time": "15/May/2019:15:21:19 +0000",
            "timeEpoch": 1557933679000,
        },
        "body": d["body"],
        "isBase64Encoded": False,
    }
    (OUT / "webhook.apigw.json").write_text(json.dumps(apigw, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
