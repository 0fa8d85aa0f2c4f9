#!/bin/sh
# user "dynamic": two tasks get different uids from the pool, their files
# are owned by them, and a released uid is handed out again.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/jobs.sh"
wait_for 20 outpost status || fail "agent not answering: $(wait_output)"

task() { echo '{"name": "'$1'", "user": "dynamic", "command": "/bin/sh", "args": ["-c", "'$HELPER' id; '$HELPER' touch $OUTPOST_TASK_DIR/f; exec sleep 600"]}'; }
submit du1 '{"id": "du1", "tasks": ['"$(task a)"']}' >/dev/null
submit du2 '{"id": "du2", "tasks": ['"$(task b)"']}' >/dev/null
uid_of() { outpost logs "$1" | head -n 1 | cut -d' ' -f1; }
have() { [ -n "$(outpost logs "$1" | sed -n 2p)" ]; }
wait_for 10 have du1/a || fail "du1/a printed nothing: $(outpost logs du1/a)"
wait_for 10 have du2/b || fail "du2/b printed nothing"
u1=$(uid_of du1/a); u2=$(uid_of du2/b)
[ "$u1" -ge 80000 ] && [ "$u1" -le 89999 ] || fail "uid $u1 not from the pool"
[ "$u2" -ge 80000 ] && [ "$u2" -le 89999 ] || fail "uid $u2 not from the pool"
[ "$u1" != "$u2" ] || fail "both tasks got uid $u1"
[ "$(outpost logs du1/a | sed -n 2p)" = "$u1 $u1" ] || fail "file of du1/a owned by '$(outpost logs du1/a | sed -n 2p)'"
ls -lnd /var/lib/outpost/task-data/du1.a | grep -q " $u1 *$u1 " || fail "task dir not owned by $u1: $(ls -lnd /var/lib/outpost/task-data/du1.a)"
# The logs stay the agent's (a task cannot rewrite its own history).
ls -ln /var/lib/outpost/logs/du1.a/ | grep -q " 0 *0 .*a.stdout" || fail "log files: $(ls -ln /var/lib/outpost/logs/du1.a/)"
outpost rm du1 >/dev/null || fail "rm du1 failed"
submit du3 '{"id": "du3", "tasks": ['"$(task c)"']}' >/dev/null
wait_for 10 have du3/c || fail "du3/c printed nothing"
[ "$(uid_of du3/c)" = "$u1" ] || fail "released uid $u1 not reused (got $(uid_of du3/c))"
outpost rm du2 >/dev/null; outpost rm du3 >/dev/null
echo "uids $u1 and $u2; $u1 reused"
