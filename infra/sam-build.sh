#!/usr/bin/env bash
# `sam build` of template.yaml with everything it needs, installed if missing:
# aws-sam-cli (via infra/check-template.sh's virtualenv), cargo-lambda (PyPI, brings zig) and
# the aarch64 Rust target. Output in .aws-sam/build (git-ignored).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-tools"
CARGO_LAMBDA_PIN="cargo-lambda==1.9.2"
cd "$ROOT"

die() { printf 'sam-build: %s\n' "$*" >&2; exit 1; }

[[ -x "$VENV/bin/sam" ]] || infra/check-template.sh >/dev/null
if ! "$VENV/bin/python" -m pip show cargo-lambda >/dev/null 2>&1; then
  printf 'sam-build: installing %s into %s\n' "$CARGO_LAMBDA_PIN" "$VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$CARGO_LAMBDA_PIN" \
    || die "pip install $CARGO_LAMBDA_PIN failed"
fi
if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  rustup target add aarch64-unknown-linux-gnu \
    || die "cannot add the Rust target aarch64-unknown-linux-gnu (Lambda runs on arm64); run 'rustup target add aarch64-unknown-linux-gnu' with network access"
fi
export PATH="$VENV/bin:$PATH" SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
sam build --template-file template.yaml "$@"
