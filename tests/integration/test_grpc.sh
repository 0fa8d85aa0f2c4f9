# gRPC interop: outpost's gRPC transport (build/grpc_peer, next to
# $OUTPOST) against Python's grpcio (tests/integration/grpc/, run by
# Debian's /usr/bin/python3 with python3-grpcio and python3-grpc-tools),
# each as the server and as the client of the Interop service
# (proto/grpc_interop.proto), over unix sockets in $T. The Python stubs are
# generated into $T/stubs by each test. Skipped, with the reason, when
# /usr/bin/python3 lacks grpc. Helpers are prefixed gr_.

GRPC_PEER="$(dirname "$OUTPOST")/grpc_peer"
GRPC_PY=/usr/bin/python3
GRPC_DIR="$(dirname "${BASH_SOURCE[0]}")/grpc"
GRPC_PROTO_DIR="$(cd "$GRPC_DIR/../../../proto" && pwd)"
# The cases that need no particular server (interop_client.py's doc).
GRPC_BASIC_CASES="unary metadata huffman server_stream client_stream bidi error stream_error unimplemented"

# gr_setup: skips the test (returns 1 after "skip: ...") without grpc;
# fails without grpc_peer; generates the stubs.
gr_setup() {
  if ! "$GRPC_PY" -c 'import grpc, grpc_tools.protoc' 2>/dev/null; then
    echo "skip: $GRPC_PY cannot import grpc and grpc_tools (python3-grpcio, python3-grpc-tools: tools/deps.sh test)"
    return 1
  fi
  [ -x "$GRPC_PEER" ] || fail "$GRPC_PEER is missing (make build/grpc_peer)"
  mkdir -p "$T/stubs"
  "$GRPC_PY" -m grpc_tools.protoc -I"$GRPC_PROTO_DIR" --python_out="$T/stubs" --grpc_python_out="$T/stubs" \
    "$GRPC_PROTO_DIR/grpc_interop.proto" >"$T/protoc.log" 2>&1 || fail "protoc: $(cat "$T/protoc.log")"
}

# gr_serve_outpost NAME [--drain-after N] / gr_serve_python NAME [...]: a
# server on $T/NAME.sock, its lines in $T/NAME.log, its pid in GR_PID;
# returns once it printed "ready".
gr_serve_outpost() {
  local name="$1"; shift
  "$GRPC_PEER" serve "$T/$name.sock" "$@" >"$T/$name.log" 2>&1 &
  GR_PID=$!
  echo "$GR_PID" >>"$T/.pids"
  wait_for 10 grep -qx ready "$T/$name.log" || fail "grpc_peer serve not ready: $(cat "$T/$name.log")"
}
gr_serve_python() {
  local name="$1"; shift
  "$GRPC_PY" "$GRPC_DIR/interop_server.py" "$T/$name.sock" --stubs "$T/stubs" "$@" >"$T/$name.log" 2>&1 &
  GR_PID=$!
  echo "$GR_PID" >>"$T/.pids"
  wait_for 20 grep -qx ready "$T/$name.log" || fail "interop_server.py not ready: $(cat "$T/$name.log")"
}

# gr_python_calls NAME CASE... / gr_outpost_calls NAME CASE...: the client
# runs the cases against the server on $T/NAME.sock; every case must pass.
gr_python_calls() {
  local name="$1"; shift
  expect_exit 0 "$GRPC_PY" "$GRPC_DIR/interop_client.py" "$T/$name.sock" "$@" --stubs "$T/stubs"
  printf 'python client -> %s:\n%s\n' "$name" "$OUT"
}
gr_outpost_calls() {
  local name="$1"; shift
  expect_exit 0 "$GRPC_PEER" call "$T/$name.sock" "$@"
  printf 'outpost client -> %s:\n%s\n' "$name" "$OUT"
}

# gr_logged NAME LINE: the server of NAME printed LINE (within 10 s).
gr_logged() {
  wait_for 10 grep -qx "$2" "$T/$1.log" || fail "$1 did not log '$2': $(tail -n 20 "$T/$1.log")"
}

# gr_exits_ok PID: the server exits 0 within 15 s.
gr_exits_ok() {
  wait_gone "$1" 15 || fail "server $1 still runs 15 s after it drained"
  wait "$1"
  local rc=$?
  expect_eq "$rc" 0 "the drained server's exit status"
}

test_grpc_python_client_calls_outpost_server() {
  gr_setup || return 0
  gr_serve_outpost peer
  # shellcheck disable=SC2086  # one word per case
  gr_python_calls peer $GRPC_BASIC_CASES
}

test_grpc_outpost_client_calls_python_server() {
  gr_setup || return 0
  gr_serve_python py
  # shellcheck disable=SC2086
  gr_outpost_calls py $GRPC_BASIC_CASES
}

# 3 MiB in one message each way (flow-control windows of 64 KiB and 4 MiB,
# frames of 16 KiB and up to 4 MiB).
test_grpc_3mib_messages_both_ways() {
  gr_setup || return 0
  gr_serve_outpost peer
  gr_python_calls peer large
  gr_serve_python py
  gr_outpost_calls py large
}

# 200 unary calls in flight on one connection: over outpost's limit of 100
# concurrent streams on its server (grpcio's client queues the rest), and
# the outpost client's 200 open calls against grpcio's server.
test_grpc_200_concurrent_calls_both_ways() {
  gr_setup || return 0
  gr_serve_outpost peer
  gr_python_calls peer concurrent
  gr_serve_python py
  gr_outpost_calls py concurrent
}

# The server holds the call 5 s, the client's deadline is 300 ms: the client
# sees DEADLINE_EXCEEDED and the server's handler learns its call is over.
test_grpc_deadlines_both_ways() {
  gr_setup || return 0
  gr_serve_outpost peer
  gr_python_calls peer deadline
  gr_logged peer "cancelled Unary"
  gr_serve_python py
  gr_outpost_calls py deadline
  gr_logged py "cancelled Unary"
}

# The client cancels a bidi stream after one echo and a server stream after
# three messages: CANCELLED on the client, and each server handler notices.
test_grpc_cancellation_both_ways() {
  gr_setup || return 0
  gr_serve_outpost peer
  gr_python_calls peer cancel cancel_stream
  gr_logged peer "cancelled Bidi"
  gr_logged peer "cancelled ServerStream"
  gr_serve_python py
  gr_outpost_calls py cancel cancel_stream
  gr_logged py "cancelled Bidi"
  gr_logged py "cancelled ServerStream"
}

# A server drains (GOAWAY) on its first call: that call finishes, the next
# is UNAVAILABLE, the server closes the connection and exits. grpc_peer
# also drains on SIGUSR1 with a connection open and idle.
test_grpc_goaway_both_ways() {
  gr_setup || return 0
  gr_serve_outpost peer --drain-after 1
  local peer_pid=$GR_PID
  gr_python_calls peer goaway
  gr_logged peer goaway
  gr_logged peer drained
  gr_exits_ok "$peer_pid"

  gr_serve_python py --drain-after 1
  local py_pid=$GR_PID
  gr_outpost_calls py goaway
  gr_logged py goaway
  gr_logged py drained
  gr_exits_ok "$py_pid"

  gr_serve_outpost idle
  local idle_pid=$GR_PID
  # A client that connects and stays (until the test's end kills it): its
  # connection must close on the drain.
  "$GRPC_PY" -c '
import grpc, sys, threading
ch = grpc.insecure_channel("unix:" + sys.argv[1])
grpc.channel_ready_future(ch).result(timeout=10)
print("connected", flush=True)
threading.Event().wait(120)' "$T/idle.sock" >"$T/idle-client.log" 2>&1 &
  echo $! >>"$T/.pids"
  wait_for 10 grep -qx connected "$T/idle-client.log" || fail "idle client: $(cat "$T/idle-client.log")"
  kill -USR1 "$idle_pid"
  gr_logged idle goaway
  gr_logged idle drained
  gr_exits_ok "$idle_pid"
}
