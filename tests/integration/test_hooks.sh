# OCI lifecycle hooks (docs/hooks.md): every stage at its moment with exact
# argv, env and state; the failure rules per stage; timeouts; hooks.d files
# and per-stage directories, watched; `outpost hooks`; an agent killed
# during a hook. The hook program is `test_helper hook FILE`, which appends
# one JSON line per run to FILE (tests/helpers/hook_record.cc).
# Helpers are prefixed ht_ (every test file is sourced into one shell).

# ht_hook STAGE_LABEL [HOOK OPTIONS...]: a hook object that records into
# $T/rec with argv[0] = STAGE_LABEL.
ht_hook() {
  local label="$1"; shift
  local extra="" a
  for a in "$@"; do extra="$extra, \"$a\""; done
  printf '{"path": "%s", "args": ["%s", "hook", "%s"%s], "env": ["A=1", "B=two words"]}' \
    "$HELPER" "$label" "$T/rec" "$extra"
}
# ht_rec_field N FIELD: FIELD of the Nth (1-based) line of $T/rec.
ht_rec_field() {
  sed -n "${1}p" "$T/rec" | python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if isinstance(v, (list, dict)) else v)' "$2"
}
ht_state_field() {  # N FIELD: a field of the state the Nth hook read on stdin
  ht_rec_field "$1" stdin | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v.get(sys.argv[1], ""))' "$2"
}
ht_labels() { [ -f "$T/rec" ] && python3 -c 'import json,sys
print(" ".join(json.loads(l)["argv"][0] for l in open(sys.argv[1])))' "$T/rec"; }
ht_labels_are() { [ "$(ht_labels)" = "$1" ]; }
ht_rec_lines() { [ -f "$T/rec" ] && wc -l <"$T/rec" || echo 0; }
ht_reason() { jt_tfield "$1" reason; }

test_hooks_every_stage_runs_at_its_moment_with_exact_argv_env_and_state() {
  jt_start
  local hooks
  hooks="\"prestart\": [$(ht_hook prestart)], \"createRuntime\": [$(ht_hook createRuntime)],"
  hooks+=" \"createContainer\": [$(ht_hook createContainer)], \"startContainer\": [$(ht_hook startContainer)],"
  hooks+=" \"poststart\": [$(ht_hook poststart)], \"poststop\": [$(ht_hook poststop)]"
  local task
  task="$(JT_EXTRA="\"hooks\": {$hooks}, \"annotations\": {\"own\": \"t\", \"shared\": \"task\"}" jt_sleeper t)"
  printf '{"id": "hj", "annotations": {"shared": "job", "j": "1"}, "tasks": [%s]}\n' "$task" >"$T/hj.json"
  expect_exit 0 op run -f "$T/hj.json"
  local pid
  pid="$(wait_for 10 jt_running_pid hj/t)" || fail "task not running"
  wait_for 10 ht_labels_are "prestart createRuntime createContainer startContainer poststart" \
    || fail "hooks ran as: $(ht_labels)"
  # Every hook's record and the state it read, in one python3 run (a run
  # per field took minutes on a loaded machine).
  python3 - "$T/rec" "$pid" <<'PY' || fail "the hooks' records are not as expected (above)"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
pid = sys.argv[2]
bad = []
def eq(got, want, what):
    if got != want:
        bad.append("%s: expected %r, got %r" % (what, want, got))
states = [json.loads(r["stdin"]) for r in recs]
for i in range(5):
    r, st, n = recs[i], states[i], i + 1
    eq(r["argv"], [r["argv"][0], "hook", sys.argv[1]], "argv of hook %d" % n)
    eq(r["env"], ["A=1", "B=two words"], "environment of hook %d (exactly env, nothing inherited)" % n)
    eq(r["bundle_config"], "ok", "hook %d read config.json from the bundle" % n)
    eq(r["bundle_hooks"], 6, "config.json of hook %d lists the task's hooks" % n)
    eq(st.get("id"), "hj.t", "state id of hook %d" % n)
    eq(st.get("ociVersion"), "1.3.0", "state ociVersion of hook %d" % n)
    eq(st.get("annotations"), {"j": "1", "own": "t", "shared": "task"}, "annotations of hook %d" % n)
for i in range(3):
    eq(states[i].get("status"), "creating", "status of %s" % recs[i]["argv"][0])
    eq(states[i].get("pid", ""), "", "no pid before the task exists (%s)" % recs[i]["argv"][0])
eq(states[3].get("status"), "created", "startContainer status")
eq(states[4].get("status"), "running", "poststart status")
# startContainer runs inside the task's process, before its exec: its
# parent is the task (same pid as the state says); poststart sees it too.
eq(str(recs[3]["ppid"]), pid, "startContainer's parent is the task process")
eq(str(states[3].get("pid")), pid, "startContainer state pid")
eq(str(states[4].get("pid")), pid, "poststart state pid")
if str(recs[0]["ppid"]) == pid:
    bad.append("prestart ran in the task's process")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
  local bundle
  bundle="$(ht_state_field 1 bundle)"
  expect_eq "$bundle" "$T/run/bundles/hj.t" "bundle dir"
  python3 - "$bundle/config.json" "$pid" <<'PY' || fail "config.json is not a runtime-spec document for the task"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["ociVersion"] == "1.3.0", c["ociVersion"]
assert c["process"]["args"][1:] == ["sleep", "600"], c["process"]["args"]
assert c["process"]["cwd"].startswith("/"), c["process"]["cwd"]
assert isinstance(c["process"]["user"]["uid"], int)
assert c["root"] == {"path": "/", "readonly": False}, c["root"]
assert sorted(c["hooks"]) == sorted(["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"])
assert c["annotations"]["shared"] == "task"
PY
  local ins
  ins="$(op inspect hj/t)"
  expect_contains "$ins" "hooks:" "inspect shows hook runs"
  expect_contains "$ins" "ok: hook createRuntime $HELPER: exit 0 in" "inspect shows createRuntime's run"
  expect_contains "$ins" "ok: hook startContainer $HELPER: exit 0 in the task's process" "inspect shows startContainer's run"
  wait_for 5 jt_events_contain hj/t "hook poststart $HELPER: exit 0" >/dev/null || fail "no hook event"
  expect_exit 0 op rm hj
  # rm returns once the poststop hooks have run.
  ht_labels_are "prestart createRuntime createContainer startContainer poststart poststop" \
    || fail "poststop had not run when rm returned: $(ht_labels)"
  expect_eq "$(ht_state_field 6 status)" stopped "poststop status"
  expect_eq "$(ht_state_field 6 pid)" "" "no pid in poststop's state"
  [ ! -e "$bundle" ] || fail "the bundle stays after the task was removed"
}

test_hooks_failed_createRuntime_fails_the_start_and_poststop_still_runs() {
  jt_start
  local hooks="\"createRuntime\": [$(ht_hook createRuntime --exit 3 --stderr 'no such device eth1')],"
  hooks+=" \"startContainer\": [$(ht_hook startContainer)], \"poststop\": [$(ht_hook poststop)]"
  jt_job hf "$(JT_EXTRA="\"hooks\": {$hooks}, \"restart\": {\"policy\": \"never\"}" jt_task t "$HELPER" timestamp "$T/main")" >"$T/hf.json"
  op run --detach -f "$T/hf.json" >/dev/null || fail "run --detach failed"
  wait_for 15 jt_tstate_is hf/t dead || fail "task not dead: $(op inspect hf/t)"
  local reason
  reason="$(ht_reason hf/t)"
  expect_contains "$reason" "hook createRuntime $HELPER: exit code 3" "the error names the hook and its exit code"
  expect_contains "$reason" "no such device eth1" "the error has the hook's stderr"
  wait_for 10 ht_labels_are "createRuntime poststop" || fail "hooks ran as: $(ht_labels)"
  [ ! -e "$T/main" ] || fail "the task ran although createRuntime failed"
}

test_hooks_failed_startContainer_gives_the_hooks_own_error() {
  jt_start
  local hooks="\"startContainer\": [$(ht_hook startContainer --exit 5 --stderr denied-by-policy)],"
  hooks+=" \"poststart\": [$(ht_hook poststart)], \"poststop\": [$(ht_hook poststop)]"
  jt_job hs "$(JT_EXTRA="\"hooks\": {$hooks}, \"restart\": {\"policy\": \"never\"}" jt_task t "$HELPER" timestamp "$T/main")" >"$T/hs.json"
  op run --detach -f "$T/hs.json" >/dev/null || fail "run --detach failed"
  wait_for 15 jt_tstate_is hs/t dead || fail "task not dead: $(op inspect hs/t)"
  local reason
  reason="$(ht_reason hs/t)"
  expect_contains "$reason" "hook startContainer $HELPER: exit code 5" "startContainer's own error"
  expect_contains "$reason" "denied-by-policy" "startContainer's stderr"
  expect_not_contains "$reason" "exec '" "not a generic exec failure"
  wait_for 10 ht_labels_are "startContainer poststop" || fail "hooks ran as: $(ht_labels)"
  [ ! -e "$T/main" ] || fail "the task's command ran although startContainer failed"
}

test_hooks_timeout_kills_the_hooks_whole_process_group() {
  jt_start
  local hook
  hook="$(ht_hook createRuntime --orphan "$T/orphan.pid" --hang)"
  hook="${hook%\}}, \"timeout\": 1}"
  jt_job ht "$(JT_EXTRA="\"hooks\": {\"createRuntime\": [$hook]}, \"restart\": {\"policy\": \"never\"}" jt_sleeper t)" >"$T/ht.json"
  op run --detach -f "$T/ht.json" >/dev/null || fail "run --detach failed"
  wait_for 20 jt_tstate_is ht/t dead || fail "task not dead: $(op inspect ht/t)"
  expect_contains "$(ht_reason ht/t)" "hook createRuntime $HELPER ran past its timeout of 1s" "timeout error"
  [ -s "$T/orphan.pid" ] || fail "the hook's child never started"
  wait_gone "$(cat "$T/orphan.pid")" 10 || fail "the hook's child outlived the timeout"
}

test_hooks_poststart_failure_stops_the_task_or_only_warns() {
  jt_start
  jt_job hp "$(JT_EXTRA="\"hooks\": {\"poststart\": [$(ht_hook poststart --exit 1 --stderr nope)]}, \"restart\": {\"policy\": \"never\"}" jt_sleeper t)" >"$T/hp.json"
  op run --detach -f "$T/hp.json" >/dev/null || fail "run --detach failed"
  wait_for 15 jt_tstate_is hp/t dead || fail "task not stopped after a failed poststart: $(op inspect hp/t)"
  expect_contains "$(ht_reason hp/t)" "hook poststart $HELPER: exit code 1" "poststart error"
  local pid
  pid="$(ht_state_field 1 pid)"
  [ -n "$pid" ] || fail "poststart had no pid"
  wait_gone "$pid" 10 || fail "the task process survived its failed poststart hook"

  # runtime-spec before 1.3: warn and keep running.
  kill "$AGENT_PID"; wait_gone "$AGENT_PID" 10
  rm -f "$T/rec"
  jt_config '"poststart_failure": "warn"'
  start_agent
  expect_exit 0 op rm hp
  jt_job hw "$(JT_EXTRA="\"hooks\": {\"poststart\": [$(ht_hook poststart --exit 1)]}, \"restart\": {\"policy\": \"never\"}" jt_sleeper t)" >"$T/hw.json"
  expect_exit 0 op run -f "$T/hw.json"
  wait_for 10 jt_events_contain hw/t "hook poststart $HELPER: exit code 1" >/dev/null || fail "no event for the failure"
  jt_tstate_is hw/t running || fail "task stopped although poststart_failure is warn"
}

test_hooks_hooksd_files_and_stage_dirs_apply_to_the_next_start() {
  mkdir -p "$T/hooks.d" "$T/hooks2.d"
  jt_start "\"hooks_dirs\": [\"$T/hooks.d\", \"$T/hooks2.d\"]"
  jt_job hd "$(JT_EXTRA='"annotations": {"team": "blue"}' jt_sleeper blue)" "$(jt_sleeper red)" >"$T/hd.json"
  expect_exit 0 op run -f "$T/hd.json"
  [ ! -e "$T/rec" ] || fail "hooks ran with no hooks configured"
  # A hooks.d file (1.0.0) for tasks annotated team=blue, written while the
  # agent runs (renamed in, as a package manager does).
  cat >"$T/hooks.d/.tmp" <<EOF
{"version": "1.0.0", "hook": {"path": "$HELPER", "args": ["hooksd", "hook", "$T/rec"]},
 "when": {"annotations": {"^team\$": "^blue\$"}}, "stages": ["prestart"]}
EOF
  mv "$T/hooks.d/.tmp" "$T/hooks.d/10-blue.json"
  # And an invalid one (a regex that does not compile), and one masked by
  # a same-named file in the later directory.
  printf '{"version": "1.0.0", "hook": {"path": "/bin/true"}, "when": {"commands": ["(["]}, "stages": ["prestart"]}\n' \
    >"$T/hooks.d/bad.json"
  printf '{"version": "1.0.0", "hook": {"path": "/bin/false"}, "when": {"always": true}, "stages": ["poststop"]}\n' \
    >"$T/hooks.d/20-masked.json"
  printf '{"version": "1.0.0", "hook": {"path": "/bin/true"}, "when": {"always": true}, "stages": ["poststop"]}\n' \
    >"$T/hooks2.d/20-masked.json"
  # Each file settles on its own: wait until the last ones written are seen.
  wait_for 10 sh -c "'$OUTPOST' --socket '$SOCK' hooks >'$T/hooks.out' && grep -q 'invalid: $T/hooks.d/bad.json' '$T/hooks.out' &&
    grep -q 'masked: $T/hooks.d/20-masked.json' '$T/hooks.out'" || fail "files not all seen: $(op hooks)"
  local out
  out="$(op hooks)"
  expect_contains "$out" "from hooks.d $T/hooks.d/10-blue.json" "hooks lists the hooks.d file"
  expect_contains "$out" "masked: $T/hooks.d/20-masked.json" "hooks lists the masked file"
  expect_contains "$(op status)" "bad.json" "status lists the invalid file"
  out="$(op hooks --task hd/red)"
  expect_contains "$out" "not matching: 10-blue.json" "--task says why a file does not match"
  out="$(op hooks --task hd/blue)"
  expect_contains "$out" "$HELPER" "--task lists the matching hook"
  # A per-stage directory hook, copied in: runs for every task.
  mkdir -p "$T/hooks/poststart"
  printf '#!/bin/sh\nexec "%s" hook "%s" "$@"\n' "$HELPER" "$T/rec2" >"$T/hooks/poststart/.x"
  chmod +x "$T/hooks/poststart/.x"
  mv "$T/hooks/poststart/.x" "$T/hooks/poststart/50-notify"
  wait_for 15 sh -c "'$OUTPOST' --socket '$SOCK' hooks | grep -q '50-notify'" || fail "stage dir hook not listed: $(op hooks)"
  # The running tasks were not touched; their next start gets the hooks.
  [ ! -e "$T/rec" ] || fail "a hooks.d hook ran for a running task"
  expect_exit 0 op restart hd
  wait_for 15 test -s "$T/rec" || fail "the hooks.d hook did not run at the next start"
  wait_for 15 sh -c "[ \$(wc -l <'$T/rec2') = 2 ]" || fail "the stage dir hook did not run for both tasks"
  expect_eq "$(ht_rec_lines)" 1 "the hooks.d hook ran for the blue task only"
  expect_eq "$(ht_state_field 1 id)" hd.blue "the hooks.d hook's task"
    # args = [FILE, STAGE]; a script's interpreter gets its path for argv[0].
  expect_contains "$(op hooks)" "[argv: 50-notify poststart]" "the stage dir hook's argv"
python3 - "$T/rec2" <<'PY' || fail "stage dir hook argv"
import json, sys
for l in open(sys.argv[1]):
    argv = json.loads(l)["argv"]
    assert argv[3:] == ["poststart"], argv
PY
  # Removed: applies no more.
  rm "$T/hooks.d/10-blue.json"
  wait_for 10 sh -c "! '$OUTPOST' --socket '$SOCK' hooks | grep -q 10-blue.json" || fail "removed file still listed"
  expect_exit 0 op restart hd/blue
  wait_for 15 sh -c "[ \$(wc -l <'$T/rec2') = 3 ]" || fail "blue did not restart"
  expect_eq "$(ht_rec_lines)" 1 "a removed hooks.d file still applied"
}

test_hooks_are_validated_at_submission() {
  jt_start
  jt_job hv "$(JT_EXTRA='"hooks": {"prestart": [{"path": "relative"}], "preStop": []}' jt_sleeper t)" >"$T/hv.json"
  expect_exit 2 op run -f "$T/hv.json"
  expect_contains "$OUT" 'tasks[0].hooks.prestart[0].path: must be an absolute path, got "relative"' "relative path"
  expect_contains "$OUT" "tasks[0].hooks.preStop: unknown hook stage" "unknown stage"
  expect_exit 1 op inspect hv  # nothing was stored
}

test_hooks_agent_killed_during_a_hook_leaves_no_half_started_task() {
  jt_start
  # The createRuntime hook hangs the first time (until the agent is killed),
  # and goes through at once afterwards.
  cat >"$T/slow-hook" <<EOF
#!/bin/sh
cat >/dev/null
if [ ! -e "$T/hung-once" ]; then echo \$\$ >"$T/hook.pid"; : >"$T/hung-once"; exec "$HELPER" sleep 600; fi
exit 0
EOF
  chmod +x "$T/slow-hook"
  jt_job hk "$(JT_EXTRA="\"hooks\": {\"createRuntime\": [{\"path\": \"$T/slow-hook\"}]}" jt_task t "$HELPER" service count "$T/starts" sleep 600)" >"$T/hk.json"
  op run --detach -f "$T/hk.json" >/dev/null || fail "run --detach failed"
  wait_for 10 test -e "$T/hung-once" || fail "the hook never ran"
  [ ! -e "$T/starts" ] || fail "the task started while its createRuntime hook ran"
  # kill -9 the whole agent (keeper and worker) in the middle of the hook.
  local keeper worker
  keeper="$AGENT_PID"
  worker="$(op --json status | json_get pid)"
  kill -9 "$keeper" "$worker"
  wait_gone "$keeper" 10; wait_gone "$worker" 10
  # The orphaned hook (docs/hooks.md: not killed by the next agent); by its
  # pid, as other tests may run at the same time (IT_JOBS).
  kill -9 "$(cat "$T/hook.pid")" 2>/dev/null
  start_agent
  wait_for 20 jt_tstate_is hk/t running || fail "the task did not start after recovery: $(op inspect hk/t)"
  wait_for 10 test -s "$T/starts" || fail "the task's main never ran"
  expect_eq "$(wc -l <"$T/starts")" 1 "exactly one instance started"
  local n
  n="$(grep -lsaF "OUTPOST_TASK_DIR=$T/" /proc/[0-9]*/environ 2>/dev/null | wc -l)"
  expect_eq "$n" 1 "one task process runs after recovery"
}

# containerd's stock hook-injector NRI plugin adds, through its adjustment,
# the hooks of the same hooks.d files the agent reads (outpost's default
# hooks_dirs are its directories): each hook must run once, not once per
# source. The injector is played by build/test_nri_plugin adding, with
# -adjust-hook, the hook of the hooks.d file below as the injector hands it
# over (path, argv [path], no env), for the file's stages.
test_hooks_from_hooksd_and_the_hook_injector_nri_plugin_run_once() {
  mkdir -p "$T/hooks.d"
  # argv is [path] and the environment empty: builtins only. One line per
  # run: the state it read (its status tells the stage).
  printf '#!/bin/sh\nIFS= read -r s\nprintf "%%s\\n" "$s" >>%s/inj-runs\n' "$T" >"$T/inj-hook"
  chmod +x "$T/inj-hook"
  printf '{"version": "1.0.0", "hook": {"path": "%s"}, "when": {"always": true}, "stages": ["prestart", "poststop"]}\n' \
    "$T/inj-hook" >"$T/hooks.d/50-injected.json"
  nr_start
  nr_plugin 10 injector -events CreateContainer \
    -adjust-hook "prestart:$T/inj-hook" -adjust-hook "poststop:$T/inj-hook" >/dev/null
  wait_for 10 nr_ready injector || fail "plugin not ready: $(op nri)"
  nr_job inj >"$T/inj.json"
  expect_exit 0 op run -f "$T/inj.json"
  wait_for 10 nr_pid inj/t >/dev/null || fail "task not running"
  expect_contains "$(op --json inspect inj/t | json_get task.nri)" "10-injector: adjusted" "the plugin added its hooks"
  expect_contains "$(op hooks --task inj/t)" "$T/hooks.d/50-injected.json" "the hooks.d file applies to the task too"
  expect_exit 0 op rm inj  # returns once the poststop hooks have run
  expect_eq "$(grep -c '"status":"creating"' "$T/inj-runs")" 1 "prestart hook runs"
  expect_eq "$(grep -c '"status":"stopped"' "$T/inj-runs")" 1 "poststop hook runs"
}
