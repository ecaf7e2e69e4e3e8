#!/usr/bin/env bash
# Deploy check of template.yaml, offline once the tool virtualenvs exist (PyPI is needed only
# to create them):
#   1. the SAM transform (aws-sam-translator, from aws-sam-cli in .venv-tools/) for two
#      parameter sets: all defaults, and every optional parameter set;
#   2. a CloudFormation create of each in moto (in-process, .venv-moto/), then assertions on
#      what moto created, and on the transformed template for what moto cannot create
#      (infra/deploy_check.py lists which, and why).
# The virtualenvs are the ones infra/check-template.sh (its PINS) and infra/emulator.sh
# (`install`) create; this script creates them the same way if they are missing.
#
# Usage: infra/deploy-check.sh          (from anywhere; exits non-zero if any assertion fails)
# Env:   PYTHON (default python3) - interpreter used to create the virtualenvs
#        DEPLOY_CHECK_OUT=DIR - keep the transformed templates in DIR (default: a temp dir)
#        DEPLOY_CHECK_TEMPLATE=FILE - check FILE instead of template.yaml
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.venv-tools"
PYTHON="${PYTHON:-python3}"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'deploy-check: %s\n' "$*" >&2; exit 1; }

# The pins check-template.sh installs into .venv-tools (aws-sam-cli brings aws-sam-translator),
# read from its PINS=(...) line so that the two never differ.
pins_line="$(sed -n 's/^PINS=(\(.*\))[[:space:]]*$/\1/p' "$ROOT/infra/check-template.sh")"
read -r -a PINS <<<"$pins_line"
((${#PINS[@]})) || die "no PINS=(...) line in infra/check-template.sh"

# True when every pin is installed in .venv-tools at exactly its version (as check-template.sh).
tools_installed() {
  [[ -x "$TOOLS/bin/python" ]] || return 1
  "$TOOLS/bin/python" - "${PINS[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    ok = all(version(n) == v for n, v in (p.split("==") for p in sys.argv[1:]))
except PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
PY
}

if ! tools_installed; then
  if [[ ! -x "$TOOLS/bin/python" ]]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3.9+ (or set PYTHON=...)"
    log "creating virtualenv $TOOLS"
    "$PYTHON" -m venv "$TOOLS" \
      || die "cannot create a virtualenv with $PYTHON (on Debian/Ubuntu: apt-get install python3-venv)"
  fi
  log "installing ${PINS[*]} into $TOOLS"
  "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}" \
    || die "pip install failed (PyPI must be reachable for the first run)"
  tools_installed || die "installed versions do not match ${PINS[*]}"
fi
"$ROOT/infra/emulator.sh" install   # moto[server] into .venv-moto/ if missing

if [[ -n "${DEPLOY_CHECK_OUT:-}" ]]; then
  out="$DEPLOY_CHECK_OUT"
else
  out="$(mktemp -d "${TMPDIR:-/tmp}/deploy-check.XXXXXX")"
  trap 'rm -rf "$out"' EXIT
fi

# No credentials, profile or endpoint of the caller's reach the transform or the mock.
export AWS_DEFAULT_REGION=us-east-1 SAM_CLI_TELEMETRY=0
unset AWS_PROFILE AWS_ENDPOINT_URL

log "SAM transform (aws-sam-translator, $TOOLS)"
"$TOOLS/bin/python" "$ROOT/infra/deploy_check.py" transform "$out"
log "CloudFormation create in moto and assertions ($ROOT/.venv-moto)"
"$ROOT/.venv-moto/bin/python" "$ROOT/infra/deploy_check.py" deploy "$out"
