#!/usr/bin/python3
"""The Interop service (proto/grpc_interop.proto) on Python's grpcio, for
the gRPC interop tests (tests/integration/test_grpc.sh): what outpost's
gRPC client (grpc_peer call) is checked against. It behaves as
`grpc_peer serve` does:

  interop_server.py SOCKET [--stubs DIR] [--drain-after N]

  Unary         echoes payload, seq and the header named by echo_metadata
  ServerStream  count messages (seq, seq+1, ...), each after delay_ms
  ClientStream  the payloads concatenated, count = messages received
  Bidi          echoes each message after its delay_ms
  fail_code     ends the call with that status and fail_message: trailers-
                only when nothing was sent yet (grpcio does that itself)

Prints, one line each, flushed (the test waits for them):
  ready               listening on SOCKET
  call METHOD seq=N   a call arrived
  cancelled METHOD    a call ended (client cancel, deadline, lost
                      connection) while its handler still ran
  goaway              draining: after the Nth call (--drain-after N) or on
                      SIGUSR1. The socket is unlinked, then server.stop(10)
                      sends GOAWAY; calls in flight finish
  drained             every call finished; the process exits 0

Stubs are generated into DIR (default: a "stubs" dir beside SOCKET).
"""
import base64
import os
import signal
import sys
import threading
from concurrent import futures

import interop_common as common

import grpc

_log_lock = threading.Lock()


def log(line):
    with _log_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class CallState:
    """One call: whether its handler finished, and an event that wakes a
    handler holding the call (delay_ms) when the call ends early."""

    def __init__(self):
        self.finished = False
        self.ended = threading.Event()


def echoed(context, name):
    """The value of request header `name`; a -bin header's as its unpadded
    base64 text, which is how it travels (and what grpc_peer echoes)."""
    if not name:
        return ""
    for key, value in context.invocation_metadata():
        if key == name:
            if isinstance(value, bytes):
                return base64.b64encode(value).decode().rstrip("=")
            return value
    return ""


class Interop:
    def __init__(self, pb2, drain_after, drain):
        self.pb2 = pb2
        self.drain_after = drain_after
        self.drain = drain
        self.calls = 0
        self.lock = threading.Lock()

    def begin(self, context, method, seq):
        state = CallState()

        def on_end():
            if not state.finished:
                log("cancelled " + method)
            state.ended.set()

        if not context.add_callback(on_end):
            state.ended.set()
        log("call %s seq=%d" % (method, seq))
        with self.lock:
            self.calls += 1
            drain_now = self.calls == self.drain_after
        if drain_now:
            self.drain()
        return state

    @staticmethod
    def hold(state, context, delay_ms):
        """Waits delay_ms unless the call ends first; whether it is still on."""
        if delay_ms > 0:
            state.ended.wait(delay_ms / 1000.0)
        return context.is_active() and not state.ended.is_set()

    @staticmethod
    def cancelled_at_end(state):
        """Whether the requests ended because the call was cancelled. grpcio
        ends the request iterator (StopIteration, like a half-close) when the
        read pending at a cancellation completes, and marks the call
        cancelled only when its close event follows, from the same
        RST_STREAM: wait briefly for that before taking it as a half-close
        (the call cannot end by itself before this handler returns)."""
        return state.ended.wait(0.05)

    @staticmethod
    def fail(state, context, msg):
        state.finished = True
        context.abort(common.status_code(msg.fail_code), msg.fail_message)

    def Unary(self, req, context):
        state = self.begin(context, "Unary", req.seq)
        if not self.hold(state, context, req.delay_ms):
            return self.pb2.Msg()  # dropped: the call is over
        if req.fail_code:
            self.fail(state, context, req)
        state.finished = True
        return self.pb2.Msg(payload=req.payload, seq=req.seq, echoed_metadata=echoed(context, req.echo_metadata))

    def ServerStream(self, req, context):
        state = self.begin(context, "ServerStream", req.seq)
        for i in range(req.count):
            if not self.hold(state, context, req.delay_ms):
                return
            yield self.pb2.Msg(payload=req.payload, seq=req.seq + i, count=req.count,
                               echoed_metadata=echoed(context, req.echo_metadata))
        if req.fail_code:
            self.fail(state, context, req)
        state.finished = True

    def ClientStream(self, requests, context):
        state = None
        parts, n, first, last_seq = [], 0, None, 0
        try:
            for m in requests:
                if state is None:
                    state = self.begin(context, "ClientStream", m.seq)
                    first = m
                parts.append(m.payload)
                n += 1
                last_seq = m.seq
        except grpc.RpcError:
            return self.pb2.Msg()  # cancelled while reading (logged by on_end)
        if state is not None and self.cancelled_at_end(state):
            return self.pb2.Msg()
        if state is None:
            state = self.begin(context, "ClientStream", 0)
            first = self.pb2.Msg()
        if not self.hold(state, context, first.delay_ms):
            return self.pb2.Msg()
        if first.fail_code:
            self.fail(state, context, first)
        state.finished = True
        return self.pb2.Msg(payload=b"".join(parts), count=n, seq=last_seq,
                            echoed_metadata=echoed(context, first.echo_metadata))

    def Bidi(self, requests, context):
        state = self.begin(context, "Bidi", 0)
        try:
            for m in requests:
                if not self.hold(state, context, m.delay_ms):
                    return
                if m.fail_code:
                    self.fail(state, context, m)
                yield self.pb2.Msg(payload=m.payload, seq=m.seq, echoed_metadata=echoed(context, m.echo_metadata))
        except grpc.RpcError:
            return
        if not self.cancelled_at_end(state):
            state.finished = True


def main():
    argv = list(sys.argv[1:])
    stubs = common.stubs_arg(argv, None)
    drain_after = 0
    if "--drain-after" in argv:
        i = argv.index("--drain-after")
        drain_after = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) < 1:
        sys.exit(__doc__)
    path = os.path.abspath(argv[0])
    pb2, pb2_grpc = common.load_stubs(stubs or os.path.join(os.path.dirname(path), "stubs"))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    draining = threading.Event()

    def drain():
        if draining.is_set():
            return
        draining.set()
        log("goaway")
        try:
            os.unlink(path)  # new connections fail at once, as after grpc_peer's drain
        except FileNotFoundError:
            pass
        server.stop(10)

    pb2_grpc.add_InteropServicer_to_server(Interop(pb2, drain_after, drain), server)
    if server.add_insecure_port("unix:" + path) == 0:
        sys.exit("cannot listen on unix:" + path)
    server.start()
    signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=drain).start())
    log("ready")
    server.wait_for_termination()
    log("drained")


if __name__ == "__main__":
    main()
