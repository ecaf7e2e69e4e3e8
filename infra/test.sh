#!/usr/bin/env bash
# The test command: starts the emulator (moto, installed into .venv-moto/ if missing), runs the
# whole workspace's tests against it through AWS_ENDPOINT_URL, and stops it again.
#
#   infra/test.sh [extra cargo test args]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -z "${AWS_ENDPOINT_URL:-}" ]]; then
  eval "$(infra/emulator.sh start)"
  trap 'infra/emulator.sh stop' EXIT
fi
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
log=$(mktemp)
set +e
cargo test --workspace --all-targets "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# The claim check's confusion table on its labelled corpus (docs/LLM.md, "Claims checked against
# their sources"): the test already ran above; this prints what it measured.
if [[ "$status" == 0 ]]; then
  cargo test -q -p chronicle-tests --test publishing grounding:: -- --nocapture 2>&1 \
    | sed -n '/^claim check on/,/refused whole/p'
fi
# One closing line for the whole workspace (cargo prints one per test binary, the last often 0).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
rm -f "$log"
exit "$status"
