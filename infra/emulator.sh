#!/usr/bin/env bash
# The AWS-protocol emulator (moto in server mode) for tests and the local stack.
#
#   infra/emulator.sh install            create .venv-moto/ (git-ignored) with moto[server] if missing
#   infra/emulator.sh run   [--port P]   install, then run moto_server in the foreground
#   infra/emulator.sh start [--port P]   install, start it in the background, wait until it answers,
#                                        and print `export AWS_ENDPOINT_URL=...` lines for eval
#   infra/emulator.sh stop               stop the one `start` began
#
# With no --port a free loopback port is chosen. It listens on 127.0.0.1 only.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-moto"
PYTHON="${PYTHON:-python3}"
MOTO_PIN="moto[server]==5.2.5"
# moto's server, with requests applied one at a time (see the file for why).
LAUNCHER="$ROOT/infra/moto_server.py"
PIDFILE="$VENV/moto.pid"
LOGFILE="$VENV/moto.log"

die() { printf 'emulator: %s\n' "$*" >&2; exit 1; }

install() {
  if [[ -x "$VENV/bin/moto_server" ]]; then return; fi
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3.9+ (or set PYTHON=...)"
  printf 'emulator: installing %s into %s\n' "$MOTO_PIN" "$VENV" >&2
  "$PYTHON" -m venv "$VENV" || die "cannot create a virtualenv (on Debian/Ubuntu: apt-get install python3-venv)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$MOTO_PIN" \
    || die "pip install $MOTO_PIN failed (PyPI must be reachable the first time)"
}

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_until_answers() {
  local url=$1 pid=$2
  for _ in $(seq 1 150); do
    if ! kill -0 "$pid" 2>/dev/null; then die "moto_server exited early; see $LOGFILE"; fi
    if "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$url/moto-api/" 2>/dev/null; then
      return
    fi
    sleep 0.1
  done
  die "moto_server did not answer at $url within 15 s; see $LOGFILE"
}

port_arg() {
  if [[ "${1:-}" == "--port" && -n "${2:-}" ]]; then echo "$2"; else free_port; fi
}

cmd=${1:-}
shift || true
case "$cmd" in
  install) install ;;
  run)
    install
    port=$(port_arg "$@")
    printf 'emulator: moto on http://127.0.0.1:%s (AWS_ENDPOINT_URL)\n' "$port" >&2
    exec "$VENV/bin/python" "$LAUNCHER" -H 127.0.0.1 -p "$port"
    ;;
  start)
    install
    port=$(port_arg "$@")
    "$VENV/bin/python" "$LAUNCHER" -H 127.0.0.1 -p "$port" >"$LOGFILE" 2>&1 &
    pid=$!
    echo "$pid" >"$PIDFILE"
    wait_until_answers "http://127.0.0.1:$port" "$pid"
    printf 'export AWS_ENDPOINT_URL=http://127.0.0.1:%s\n' "$port"
    printf 'export AWS_REGION=${AWS_REGION:-us-east-1}\n'
    printf 'export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test}\n'
    printf 'export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}\n'
    printf 'emulator: moto (pid %s) answering on http://127.0.0.1:%s\n' "$pid" "$port" >&2
    ;;
  stop)
    if [[ -f "$PIDFILE" ]]; then
      kill "$(cat "$PIDFILE")" 2>/dev/null || true
      rm -f "$PIDFILE"
    fi
    ;;
  *) die "usage: infra/emulator.sh install | run [--port P] | start [--port P] | stop" ;;
esac
