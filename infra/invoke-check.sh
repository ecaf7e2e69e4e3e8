#!/usr/bin/env bash
# The Docker-free `sam local invoke`: every function, built and served by `cargo lambda watch`
# against the emulator, invoked with its sample event from events/ by `cargo lambda invoke`, and
# each answer asserted (infra/invoke_check.py): the webhook's 200 and the row it stored, enrich's
# empty batchItemFailures and the files it stored from the GitHub stand-in (`chronicle
# standin`), the scheduled retry's empty report, the sweeper's report and its message, the
# summarize answer for that very message and the summary it committed, the page builder's report
# and the page it wrote; then the token function alone, with the App's key (its own
# environment: no other function has the key), and its typed answer. The functions' environment
# is template.yaml's, evaluated.
#
#   infra/invoke-check.sh        (starts moto unless AWS_ENDPOINT_URL is set; cargo-lambda is
#                                 installed into .venv-tools/ by infra/sam-build.sh's pin)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv-tools"
CARGO_LAMBDA_PIN="$(sed -n 's/^CARGO_LAMBDA_PIN="\(.*\)"$/\1/p' infra/sam-build.sh)"
WORK="$ROOT/target/invoke-check"
mkdir -p "$WORK"

die() { printf 'invoke-check: %s\n' "$*" >&2; exit 1; }
log() { printf '==> %s\n' "$*" >&2; }

[[ -x "$VENV/bin/python" ]] || infra/check-template.sh >/dev/null
if [[ "$("$VENV/bin/python" -m pip show cargo-lambda 2>/dev/null | sed -n 's/^Version: //p')" != "${CARGO_LAMBDA_PIN#*==}" ]]; then
  log "installing $CARGO_LAMBDA_PIN into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$CARGO_LAMBDA_PIN" \
    || die "pip install $CARGO_LAMBDA_PIN failed"
fi
export PATH="$VENV/bin:$PATH"

infra/emulator.sh install
started_emulator=""
watch_pid=""
standin_pid=""
cleanup() {
  if [[ -n "$standin_pid" ]]; then kill "$standin_pid" 2>/dev/null || true; fi
  if [[ -n "$watch_pid" ]]; then kill -- "-$watch_pid" 2>/dev/null || kill "$watch_pid" 2>/dev/null || true; fi
  if [[ -n "$started_emulator" ]]; then infra/emulator.sh stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
if [[ -z "${AWS_ENDPOINT_URL:-}" ]]; then
  emulator_env="$(infra/emulator.sh start)" || die "the emulator did not start"
  eval "$emulator_env"
  started_emulator=1
fi
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" \
  AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
PY="$ROOT/.venv-moto/bin/python"

# Built first, as `cargo lambda watch` builds them (`cargo run --bin X` at the workspace root:
# the same feature resolution), so no invocation waits for a compile.
log "cargo build of the seven functions and the chronicle CLI"
cargo build --quiet --bin webhook --bin enrich --bin sweeper --bin summarize --bin page-builder \
  --bin redeliver --bin token
cargo build --quiet -p chronicle-cli --bin chronicle

# The GitHub stand-in (GraphQL validated against the vendored schema) serving the samples' PR.
TOKEN="ghp_invoke_check"
"${CARGO_TARGET_DIR:-target}/debug/chronicle" standin --token "$TOKEN" --pull Codertocat/Hello-World#2 \
  >"$WORK/standin.out" 2>"$WORK/standin.err" &
standin_pid=$!
for _ in $(seq 1 100); do
  grep -q '^GITHUB_API_URL=' "$WORK/standin.out" 2>/dev/null && break
  kill -0 "$standin_pid" 2>/dev/null || { cat "$WORK/standin.err" >&2; die "the GitHub stand-in exited"; }
  sleep 0.1
done
github_url="$(sed -n 's/^GITHUB_API_URL=//p' "$WORK/standin.out")"
[[ -n "$github_url" ]] || die "the GitHub stand-in did not start"

log "provisioning the emulator ($AWS_ENDPOINT_URL); the functions' environment from template.yaml"
"$PY" infra/invoke_check.py provision "$WORK/functions.env" "$github_url" "$TOKEN"

port=""
# `cargo lambda watch` serving every function with the environment in $1.
watch() {
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  log "cargo lambda watch on 127.0.0.1:$port with $(basename "$1") (functions are built on their first invoke)"
  # --timeout: how long `invoke` waits for an answer. (The deadline the functions see is
  # cargo-lambda's own, a fixed 600000 that they read as time left.)
  # In its own process group (setsid, where there is one), so the functions it runs stop with it.
  local SETSID=(); command -v setsid >/dev/null 2>&1 && SETSID=(setsid)
  "${SETSID[@]}" cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$port" --timeout 60 \
    --env-file "$1" --env-var "AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL" \
    >"$WORK/watch.log" 2>&1 &
  watch_pid=$!
  local listening=""
  for _ in $(seq 1 120); do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then listening=1; break; fi
    kill -0 "$watch_pid" 2>/dev/null || { cat "$WORK/watch.log" >&2; die "cargo lambda watch exited"; }
    sleep 1
  done
  [[ -n "$listening" ]] || { cat "$WORK/watch.log" >&2; die "cargo lambda watch did not listen within 120 s"; }
}
watch "$WORK/functions.env"

invoke() {
  local step=$1 function=$2 event=$3
  log "cargo lambda invoke $function --data-file $event"
  if ! cargo lambda invoke "$function" --invoke-address 127.0.0.1 --invoke-port "$port" \
      --data-file "$event" --output-format json >"$WORK/$step.json" 2>"$WORK/$step.err"; then
    cat "$WORK/$step.err" >&2
    tail -40 "$WORK/watch.log" >&2
    die "$function failed on $event"
  fi
  "$PY" infra/invoke_check.py check "$step" "$WORK/$step.json" || {
    tail -40 "$WORK/watch.log" >&2
    die "$step: unexpected answer"
  }
}

# The pipeline's order: stored, enriched (from the stand-in), swept, summarized (the sweeper's
# own message), published.
invoke webhook webhook events/webhook.apigw.json
invoke enrich enrich events/enrich.dynamodb-stream.json
invoke enrich-retry enrich events/enrich.scheduled.json
invoke sweeper sweeper events/sweeper.scheduled.json
"$PY" infra/invoke_check.py summarize-event "$WORK/summarize.event.json"
invoke summarize summarize "$WORK/summarize.event.json"
invoke page-builder page-builder events/page-builder.scheduled.json
invoke redeliver redeliver events/redeliver.scheduled.json
# The token function alone with the App's key: the others' environment never holds it.
kill -- "-$watch_pid" 2>/dev/null || kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch "$WORK/token.env"
invoke token token events/token.invoke.json
log "invoke check passed: 8 invocations of 7 functions, each answer asserted"
