#!/usr/bin/env bash
# `make run`: starts an agent in the foreground with a development
# configuration under ./run/ (no root paths touched).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-build/outpost}")"
top="$(pwd)"
mkdir -p run
cat >run/config.json <<JSON
{
  "state_dir": "$top/run/state",
  "runtime_dir": "$top/run/rt",
  "api_socket": "$top/run/outpost.sock",
  "log_level": "debug"
}
JSON
cat <<MSG
outpost: starting an agent with run/config.json (Ctrl-C stops it).
From a second terminal:
  $bin --socket $top/run/outpost.sock status
  export OUTPOST_SOCKET=$top/run/outpost.sock; $bin status --json
MSG
exec "$bin" agent --config run/config.json
