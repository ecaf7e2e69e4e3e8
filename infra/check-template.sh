#!/usr/bin/env bash
# Static checks of template.yaml, offline (PyPI is needed only for the first install):
#   1. sam validate --lint   (aws-sam-cli: SAM transform + cfn-lint on the result)
#   2. cfn-lint              (on the SAM template itself)
#   3. checkov               (security checks; skips, each with its reason, in .checkov.yaml and
#                             in Metadata.checkov.skip of single resources)
# The tools live in a project-local virtualenv, .venv-tools/ at the repo root (git-ignored),
# created and filled with the pinned versions below if missing or different.
#
# Usage: infra/check-template.sh            (from anywhere; exits non-zero if any check fails)
# Env:   PYTHON (default python3) - interpreter used to create the virtualenv
#        AWS_DEFAULT_REGION (default us-east-1) - sam/cfn-lint need a region, not credentials
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-tools"
PYTHON="${PYTHON:-python3}"
PINS=(aws-sam-cli==1.170.0 cfn-lint==1.58.0 checkov==3.2.459)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'check-template: %s\n' "$*" >&2; exit 1; }

# True when every pin is installed in the venv at exactly its version.
pins_installed() {
  [[ -x "$VENV/bin/python" ]] || return 1
  "$VENV/bin/python" - "${PINS[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
}

if ! pins_installed; then
  if [[ ! -x "$VENV/bin/python" ]]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3.9+ (or set PYTHON=...)"
    log "creating virtualenv $VENV"
    "$PYTHON" -m venv "$VENV" \
      || die "cannot create a virtualenv with $PYTHON (on Debian/Ubuntu: apt-get install python3-venv)"
  fi
  log "installing ${PINS[*]} into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}" \
    || die "pip install failed (PyPI must be reachable for the first run)"
  pins_installed || die "installed versions do not match ${PINS[*]}"
fi

export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
# Keep the run offline and quiet: no SAM telemetry, no checkov update check.
export SAM_CLI_TELEMETRY=0
export CKV_SKIP_PACKAGE_UPDATE_CHECK=true

cd "$ROOT"
[[ -f template.yaml ]] || die "template.yaml not found in $ROOT"

failed=()
run() {
  local name="$1"; shift
  log "$name: $*"
  if "$@"; then
    log "$name: ok"
  else
    log "$name: FAILED"
    failed+=("$name")
  fi
}

run "sam validate" "$VENV/bin/sam" validate --lint --template-file template.yaml
run "cfn-lint" "$VENV/bin/cfn-lint" template.yaml
run "checkov" "$VENV/bin/checkov" --config-file .checkov.yaml -f template.yaml \
  --skip-download --framework cloudformation

if ((${#failed[@]})); then
  die "failed: ${failed[*]}"
fi
log "template checks passed (sam validate --lint, cfn-lint, checkov)"
