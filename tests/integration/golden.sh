# Golden-output helpers for the integration tests (sourced by test files).
#
# A golden file is the spec of a command's output: tests/integration/golden/
# NAME.txt holds the human output (stdout, then stderr and the exit code),
# NAME.json the --json output. Both sides are normalised before comparing:
# the test dir, helper and binary paths, pids, RFC 3339 times, ages, uptimes,
# CPU/memory figures, the version, the architecture the agent was built for
# and host-dependent feature details become placeholders (<T>, <PID>, <TIME>,
# <ARCH>, ...), and runs of spaces are squeezed
# (column alignment is the formatter's business, not the golden's).
#
# To regenerate the golden files after an intended output change:
#   OUTPOST_UPDATE_GOLDEN=1 bash tests/integration/run.sh build/outpost build/test_helper golden
# then review `git diff tests/integration/golden/` line by line: wording,
# that errors say what to do, that nothing volatile slipped through.

GOLDEN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/golden"

# golden_normalise txt|json: stdin -> normalised text on stdout.
golden_normalise() { python3 -c "$GOLDEN_PY" "$1" "$T" "$HELPER" "$OUTPOST"; }

read -r -d '' GOLDEN_PY <<'PY'
import json, re, sys

kind, tdir, helper, outpost = sys.argv[1:5]
RFC3339 = re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)')
HOST_FEATURES = ('cgroup2', 'driver.exec', 'child_exits')
# The agent's build architectures (`status`); anything else is left as is,
# so a wrong or missing one still shows in the diff.
ARCHES = ('x86_64', 'aarch64', 'armhf')
# Table columns whose values change from run to run.
VOLATILE_COLUMNS = {'PID': '<PID>', 'AGE': '<AGE>', 'CPU%': '<CPU>', 'MEMORY': '<MEM>',
                    'USER': '<CPU>', 'SYSTEM': '<CPU>'}

def text(s):
    s = s.replace(tdir, '<T>').replace(helper, '<HELPER>').replace(outpost, '<OUTPOST>')
    s = RFC3339.sub('<TIME>', s)
    s = re.sub(r'\b(pid|pid=|pid:)( *)\d+', r'\1\2<PID>', s)
    s = re.sub(r'\brss=\d+', 'rss=<BYTES>', s)
    s = re.sub(r'\bmemory [\d.]+ MiB', 'memory <MEM>', s)
    s = re.sub(r'\bcpu=[\d.]+%', 'cpu=<CPU>', s)
    s = re.sub(r'\bup \d+[dhms][\dhms]*', 'up <UPTIME>', s)
    s = re.sub(r'^outpost \d+\.\d+\.\d+\S*', 'outpost <VERSION>', s, flags=re.M)
    s = re.sub(r'^(outpost <VERSION>) \((%s)\)' % '|'.join(ARCHES), r'\1 (<ARCH>)', s, flags=re.M)
    return s

def human(data):
    out, cols = [], None
    for line in data.split('\n'):
        line = text(line)
        words = line.split()
        indent = line[:len(line) - len(line.lstrip(' '))]
        if not words or words[0] == '---':
            cols = None  # a table ends at a blank line or at golden's own markers
        elif any(w in VOLATILE_COLUMNS for w in words) and words[0] in ('TASK', 'JOB', 'ID'):
            cols = {i: VOLATILE_COLUMNS[w] for i, w in enumerate(words) if w in VOLATILE_COLUMNS}
        elif cols:
            for i, ph in cols.items():
                if i < len(words) and words[i] != '-':
                    words[i] = ph
            line = indent + ' '.join(words)
        if words and words[0] in HOST_FEATURES and len(words) > 2 and words[1] in ('on', 'off'):
            line = '%s%s %s <HOST>' % (indent, words[0], words[1])
        out.append(re.sub(' +', ' ', line).rstrip())
    return '\n'.join(out).rstrip('\n') + '\n'

VOLATILE_KEYS = {
    'pid': '<PID>', 'keeper_pid': '<PID>', 'started_at': '<TIME>', 'completed_at': '<TIME>',
    'submitted_at': '<TIME>', 'next_start_at': '<TIME>', 'time': '<TIME>', 'config_loaded_at': '<TIME>',
    'uptime_seconds': '<UPTIME>', 'seq': '<SEQ>', 'rss_bytes': '<BYTES>', 'memory_bytes': '<BYTES>', 'cpu_percent': '<CPU>',
    'cpu_user_seconds': '<CPU>', 'cpu_system_seconds': '<CPU>', 'api_connections': '<N>',
}

def walk(v, key=None, parent=None):
    if isinstance(v, dict):
        if key in HOST_FEATURES and parent == 'features':
            return {k: ('<HOST>' if k == 'detail' else walk(x, k, key)) for k, x in v.items()}
        return {k: walk(x, k, key) for k, x in v.items()}
    if isinstance(v, list):
        return [walk(x, None, key) for x in v]
    if key in VOLATILE_KEYS and v not in ('-', '', None) and not (key.endswith('pid') and v == 0):
        return VOLATILE_KEYS[key]  # a pid of 0 (not running) and "-" (no time) are not volatile
    if key == 'version' and isinstance(v, str):
        return '<VERSION>'
    if key == 'arch' and v in ARCHES:
        return '<ARCH>'
    if isinstance(v, str):
        return text(v)
    return v

data = sys.stdin.read()
if kind == 'json':
    try:
        doc = json.loads(data)
    except ValueError:  # JSON lines (events, stats -f)
        doc = [json.loads(l) for l in data.split('\n') if l.strip()]
    print(json.dumps(walk(doc), sort_keys=True, indent=1))
else:
    sys.stdout.write(human(data))
PY

# golden NAME txt|json CMD...: runs CMD (usually `op ...`), normalises its
# output and compares it with golden/NAME.txt or NAME.json. The .txt form
# records stdout, then "--- stderr" and stderr if any, then "--- exit N".
# Leaves the raw stdout in $GOLDEN_OUT and the exit code in $GOLDEN_RC.
golden() {
  local name="$1" kind="$2"; shift 2
  local file="$GOLDEN_DIR/$name.$kind" got
  GOLDEN_OUT="$("$@" 2>"$T/.golden.err")"
  GOLDEN_RC=$?
  if [ "$kind" = json ]; then
    [ "$GOLDEN_RC" = 0 ] || fail "golden $name: '$*' exited $GOLDEN_RC: $(cat "$T/.golden.err")"
    got="$(printf '%s\n' "$GOLDEN_OUT" | golden_normalise json)" || fail "golden $name: output is not JSON: $GOLDEN_OUT"
  else
    got="$({
      printf '%s\n' "$GOLDEN_OUT"
      [ -s "$T/.golden.err" ] && { echo '--- stderr'; cat "$T/.golden.err"; }
      echo "--- exit $GOLDEN_RC"
    } | golden_normalise txt)"
  fi
  if [ "${OUTPOST_UPDATE_GOLDEN:-}" = 1 ]; then
    mkdir -p "$GOLDEN_DIR"
    printf '%s\n' "$got" >"$file"
    return 0
  fi
  [ -f "$file" ] || fail "golden $name: $file missing (OUTPOST_UPDATE_GOLDEN=1 creates it)"
  if ! diff -u "$file" <(printf '%s\n' "$got") >"$T/.golden.diff"; then
    sed 's/^/  /' "$T/.golden.diff" | head -n 40
    fail "golden $name.$kind differs (diff above; OUTPOST_UPDATE_GOLDEN=1 accepts the new output)"
  fi
}
