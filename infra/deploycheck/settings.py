"""What the deploy check deploys: the template, the parameter sets, and the resource types moto cannot create."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


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
