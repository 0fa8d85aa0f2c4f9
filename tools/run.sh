#!/usr/bin/env bash
# `make run`: starts an agent in the foreground with a development
# configuration under ./run/ (no root paths touched) and the example jobs
# (examples/*.json) in its jobs.d directory, so supervised tasks and their
# logs are there at once. On a development machine without usable cgroup v2
# the limits example runs without its limits (status says so) instead of
# being refused.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-build/outpost}")"
top="$(pwd)"
mkdir -p run/jobs.d
cat >run/config.json <<JSON
{
  "state_dir": "$top/run/state",
  "runtime_dir": "$top/run/rt",
  "api_socket": "$top/run/outpost.sock",
  "jobs_dir": "$top/run/jobs.d",
  "kubelet_plugins_dir": "$top/run/kubelet/plugins_registry",
  "device_plugins_dir": "$top/run/kubelet/device-plugins",
  "cgroup_allow_without_limits": true,
  "log_level": "info"
}
JSON
# The examples are (re)copied each time; edit or add files in run/jobs.d
# while the agent runs to see jobs.d at work.
cp examples/*.json run/jobs.d/
# exec below keeps this shell's pid: the agent's keeper, the process to
# signal (the "worker started" log line names its worker, which the keeper
# restarts if it is killed).
cat <<MSG
outpost: starting an agent with run/config.json and the example jobs in
run/jobs.d/ (Ctrl-C stops the agent; the tasks keep running for the next one).
The agent's pid is $$ (its keeper: signal this one; kill -HUP $$ reloads
the configuration, kill -TERM $$ stops the agent).
From a second terminal:
  export OUTPOST_SOCKET=$top/run/outpost.sock
  $bin ps                          # the example jobs
  $bin logs -f hello/greeter       # a task's output
  $bin events -f                   # starts, exits, restarts with backoff
  $bin inspect restart-demo        # a task that fails and is restarted
  $bin restart hello/greeter       # restart one task
  sed s/hello/hi/ examples/hello.json | $bin run -f -   # a job through the API
MSG
exec "$bin" agent --config run/config.json
