#!/usr/bin/env bash
# Tests `make install` (into a DESTDIR) and what it installs: the binary,
# outpost(1) and the bash completion. Every command of `outpost help` must
# be in the man page and completed by the script; the script completes
# options, files for -f, and job names from `outpost ps`. Needs build/outpost
# (OUTPOST=path to use another). Prints "ok NAME" or "not ok NAME - why" per
# case; exits 1 if any case failed.
set -u
cd "$(dirname "$0")/../.."
OUTPOST="${OUTPOST:-build/outpost}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
ok() { echo "ok $1"; }
not_ok() { echo "not ok $1 - $2"; FAILED=1; }

if make --no-print-directory install DESTDIR="$TMP/stage" PREFIX=/usr >"$TMP/make.log" 2>&1; then
  ok "make install DESTDIR=... PREFIX=/usr"
else
  not_ok "make install" "$(tail -n 20 "$TMP/make.log")"
fi
BIN="$TMP/stage/usr/bin/outpost"
MAN="$TMP/stage/usr/share/man/man1/outpost.1"
COMP="$TMP/stage/usr/share/bash-completion/completions/outpost"
for f in "$BIN" "$MAN" "$COMP"; do
  if [ -s "$f" ]; then ok "installed ${f#"$TMP/stage"}"; else not_ok "installed ${f#"$TMP/stage"}" "missing or empty"; fi
done
[ -x "$BIN" ] && ok "the binary is executable" || not_ok "the binary is executable" "$(ls -l "$BIN" 2>&1)"
# Nothing outside DESTDIR: the stage holds exactly these three files.
n=$(find "$TMP/stage" -type f | wc -l)
[ "$n" = 3 ] && ok "only three files installed" || not_ok "only three files installed" "$(find "$TMP/stage" -type f)"

COMMANDS=$("$OUTPOST" help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
[ "$(wc -w <<<"$COMMANDS")" -ge 20 ] && ok "help lists the commands" || not_ok "help lists the commands" "$COMMANDS"

# The man page: a section per command, and groff renders it without a warning.
missing=""
for c in $COMMANDS; do grep -qx "\.SS $c" "$MAN" || missing="$missing $c"; done
[ -z "$missing" ] && ok "man page has every command" || not_ok "man page has every command" "missing:$missing"
if command -v groff >/dev/null; then
  warn=$(groff -man -Tutf8 -ww -z "$MAN" 2>&1)
  [ -z "$warn" ] && ok "groff renders the man page without warnings" || not_ok "groff warnings" "$warn"
fi
cmp -s "$MAN" <("$OUTPOST" help --man) && ok "installed page is outpost help --man" || not_ok "man page" "differs from outpost help --man"

# The completion: source it and ask it as bash would.
cat >"$TMP/fake-outpost" <<'SH'
#!/bin/sh
# ps as the agent would answer it, for the completion's job names.
[ "$1" = --socket ] && { echo "$2" >"$(dirname "$0")/socket-used"; shift 2; }
# Its table ends at the first blank line; the sections after it are not
# jobs (src/cli/jobs.cc prints them so).
[ "$1" = ps ] && cat <<'PS'
JOB                  STATUS     RUNNING  HEALTH    RESTARTS SOURCE  VERSION AGE   NOTE
web                  running    1/1      -         0        api     1       2m    -
worker               stopping   0/2      -         0        api     1       5d    -

Pending (carried out as soon as it can be):
  worker stopping: stop waits for its driver: driver x is disconnected

jobs dir: '/etc/outpost/jobs.d' is not a directory

Invalid job files (not applied; fix or remove them):
  /etc/outpost/jobs.d/g.json: tasks[0].command: required
PS
SH
chmod +x "$TMP/fake-outpost"
complete_words() {  # WORD...: the completions of the last word, one per line
  bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _outpost
    printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP" "$@"
}
bash -n "$COMP" && ok "completion script parses" || not_ok "completion script parses" "bash -n failed"
got=$(complete_words "$TMP/fake-outpost" "")
missing=""
for c in $COMMANDS; do grep -qx "$c" <<<"$got" || missing="$missing $c"; done
[ -z "$missing" ] && ok "completion offers every command" || not_ok "completion offers every command" "missing:$missing"
expect() {  # NAME EXPECTED WORD...: the completions are EXPECTED (sorted, space-separated)
  local name="$1" want="$2"; shift 2
  local got
  got=$(complete_words "$@" | sort | xargs)
  [ "$got" = "$want" ] && ok "$name" || not_ok "$name" "got '$got', want '$want'"
}
expect "commands by prefix" "start stats status stop" "$TMP/fake-outpost" st
expect "options of logs" "--tail --timestamps" "$TMP/fake-outpost" logs --t
expect "job names from ps" "web worker" "$TMP/fake-outpost" stop ""
expect "job names by prefix, after options" "worker" "$TMP/fake-outpost" logs -f --tail 5 wo
expect "no value completion for --timeout" "" "$TMP/fake-outpost" stop --timeout ""
expect "a job for hooks --task" "web worker" "$TMP/fake-outpost" hooks --task ""
expect "task subcommands" "rm run" "$TMP/fake-outpost" task r
expect "help completes commands" "nri" "$TMP/fake-outpost" help nr
expect "completion shells" "bash" "$TMP/fake-outpost" completion ""
expect "global options" "--json" "$TMP/fake-outpost" --js
expect "nothing after exec's --" "" "$TMP/fake-outpost" exec web/api -- ""
expect "one job operand only" "" "$TMP/fake-outpost" logs web ""
expect "a job for each operand of stop" "web worker" "$TMP/fake-outpost" stop web ""
expect "a job for each operand of restart, by prefix" "worker" "$TMP/fake-outpost" restart web wo
expect "no section title or file as a job" "" "$TMP/fake-outpost" start I
mkdir -p "$TMP/specs" && touch "$TMP/specs/web.json"
expect "files for run -f" "$TMP/specs/web.json" "$TMP/fake-outpost" run -f "$TMP/specs/w"
rm -f "$TMP/socket-used"
complete_words "$TMP/fake-outpost" --socket /x/api.sock stop "" >/dev/null
[ "$(cat "$TMP/socket-used" 2>/dev/null)" = /x/api.sock ] && ok "ps asked on the --socket given" \
  || not_ok "ps asked on the --socket given" "socket used: $(cat "$TMP/socket-used" 2>/dev/null)"
exit $FAILED
