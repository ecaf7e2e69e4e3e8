"""Step 1, in .venv-tools: the SAM transform of template.yaml for every parameter set."""

import copy
import json
import os
import sys

from .settings import ARTIFACT_BUCKET, ARTIFACT_KEY, BROAD_LOGS_POLICIES, PARAMETER_SETS, REGION, TEMPLATE, TEMPLATE_MAX_BYTES, TRANSFORMED_MAX_BYTES


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
