#!/usr/bin/env python3
"""Invariants of the chaos suite, checked after each recovery.

    check.py state OUTPOST SOCK DIR
        Prints one line per broken invariant; exit 1 if any:
        - every state file under DIR/state parses as JSON;
        - every task the agent reports running has a live process with its
          task id, and every process of this run's tasks (found by the task
          dir in its environment) that is not a descendant of another process
          of the same task is the one the agent reports: no duplicates, no
          orphans;
        - no uid is held by two tasks (the dynamic-user pool and the
          processes alike);
        - a task that exits on its own ("exit3" tasks) reports exit code 3, or
          "exit status unknown" only if the keeper was killed while it ran
          (DIR/keeper-deaths lists the times, one per line).
    check.py logs DIR LOGDIR NAME
        LOGDIR/NAME.stdout(.N) hold lines "<token> <n>" of counter tasks: per
        token the numbers are 1, 2, 3, ... with no gap and no repeat, and a
        token's "<token> end <n>" line (written on SIGTERM) has n equal to the
        last number seen.
"""
import json
import os
import subprocess
import sys


def cli(outpost, sock, *args):
    r = subprocess.run([outpost, "--socket", sock, "--json", *args], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError("outpost %s: %s" % (" ".join(args), (r.stderr or r.stdout).strip()))
    return json.loads(r.stdout)


def environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for kv in raw.split(b"\0"):
        if b"=" in kv:
            k, v = kv.split(b"=", 1)
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def proc_status(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    st = {}
    for line in lines:
        k, _, v = line.partition(":")
        st[k] = v.strip()
    return st


def our_processes(run_dir):
    """pid -> (task id, ppid, uid, state) of live processes whose task dir is under run_dir."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        env = environ(pid)
        if not env or not env.get("OUTPOST_TASK_DIR", "").startswith(run_dir + "/"):
            continue
        st = proc_status(pid)
        if st is None or st.get("State", "").startswith("Z"):
            continue
        out[pid] = (env.get("OUTPOST_TASK_ID", ""), int(st["PPid"]), int(st["Uid"].split()[0]))
    return out


def check_state(outpost, sock, run_dir):
    problems = []
    state = os.path.join(run_dir, "state")
    for root, _, files in os.walk(state):
        for f in files:
            if not f.endswith(".json"):
                continue
            p = os.path.join(root, f)
            try:
                with open(p) as fh:
                    json.load(fh)
            except (OSError, ValueError) as e:
                problems.append("state file %s does not parse: %s" % (p, e))
    running = {}  # task id -> pid the agent reports
    exits = []    # (task id, exit_code, error, started, completed)
    for job in cli(outpost, sock, "ps")["jobs"]:
        detail = cli(outpost, sock, "inspect", job["id"])
        for t in detail.get("tasks", []):
            info = t.get("task") or {}
            tid = t.get("task_id") or info.get("id")
            if t.get("state") == "running" and t.get("pid"):
                running[tid] = t["pid"]
            if info.get("state") == "exited" and t.get("name", "").startswith("exit3"):
                exits.append((tid, info.get("exit_code"), info.get("error", ""), info.get("started_at", ""),
                              info.get("completed_at", "")))
    procs = our_processes(run_dir)
    mains = {}
    for pid, (tid, ppid, uid) in procs.items():
        parent = procs.get(ppid)
        if parent and parent[0] == tid:
            continue  # a descendant of the task's own process
        mains.setdefault(tid, []).append((pid, uid))
    for tid, plist in sorted(mains.items()):
        if len(plist) > 1:
            problems.append("task %s has %d main processes: %s" % (tid, len(plist), [p for p, _ in plist]))
        elif tid not in running:
            problems.append("process %d of task %s runs, but the agent does not report the task running"
                            % (plist[0][0], tid))
        elif running[tid] != plist[0][0]:
            problems.append("task %s: the agent reports pid %d, the process is %d" % (tid, running[tid], plist[0][0]))
    for tid, pid in sorted(running.items()):
        if tid not in mains:
            problems.append("task %s reported running with pid %d, which is not alive" % (tid, pid))
    uids = {}
    for tid, plist in mains.items():
        for _, uid in plist:
            if uid >= 70000:
                uids.setdefault(uid, set()).add(tid)
    for uid, tids in sorted(uids.items()):
        if len(tids) > 1:
            problems.append("uid %d is used by the processes of %s" % (uid, sorted(tids)))
    pool = os.path.join(state, "dynamic-users.json")
    if os.path.exists(pool):
        try:
            with open(pool) as fh:
                data = json.load(fh)
            owners = {}
            for tid, uid in (data.get("users") or {}).items():
                owners.setdefault(uid, []).append(tid)
            for uid, tids in sorted(owners.items()):
                if len(tids) > 1:
                    problems.append("dynamic uid %s allocated to %s" % (uid, sorted(tids)))
        except (OSError, ValueError):
            pass  # reported above
    deaths = []
    try:
        with open(os.path.join(run_dir, "keeper-deaths")) as fh:
            deaths = [float(x) for x in fh.read().split()]
    except OSError:
        pass
    for tid, code, error, started, completed in exits:
        if code == 3 and not error:
            continue
        if "unknown" in error and deaths:
            continue  # the keeper was killed at least once: documented as unknown
        problems.append("task %s exited with code %s error %r (expected 3)" % (tid, code, error))
    return problems


def check_logs(log_dir, name):
    files = []
    i = 1
    while os.path.exists(os.path.join(log_dir, "%s.stdout.%d" % (name, i))):
        i += 1
    for j in range(i - 1, 0, -1):
        files.append(os.path.join(log_dir, "%s.stdout.%d" % (name, j)))
    files.append(os.path.join(log_dir, "%s.stdout" % name))
    last = {}
    ended = {}
    problems = []
    count = 0
    for path in files:
        if not os.path.exists(path):
            continue
        with open(path, errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                count += 1
                parts = line.split()
                where = "%s:%d" % (os.path.basename(path), lineno)
                if not line.endswith("\n"):
                    problems.append("%s: line without newline %r" % (where, line))
                    continue
                if len(parts) == 3 and parts[1] == "end":
                    tok, n = parts[0], int(parts[2])
                    if last.get(tok, 0) != n:
                        problems.append("%s: %s ended at %d but its last line was %d" % (where, tok, n, last.get(tok, 0)))
                    ended[tok] = True
                    continue
                if len(parts) != 2 or not parts[1].isdigit():
                    problems.append("%s: unexpected line %r" % (where, line))
                    continue
                tok, n = parts[0], int(parts[1])
                if tok in ended:
                    problems.append("%s: %s printed %d after its end line" % (where, tok, n))
                want = last.get(tok, 0) + 1
                if n != want:
                    problems.append("%s: %s printed %d, expected %d (%s)" % (where, tok, n, want,
                                                                         "repeated" if n < want else "lost lines"))
                last[tok] = n
    return problems, count, len(last)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "state":
        problems = check_state(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 5 and sys.argv[1] == "logs":
        problems, lines, runs = check_logs(sys.argv[3], sys.argv[4])
        print("logs %s: %d lines from %d runs" % (sys.argv[4], lines, runs))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems[:20]:
        print("INVARIANT: " + p)
    if len(problems) > 20:
        print("INVARIANT: ... and %d more" % (len(problems) - 20))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
