#!/usr/bin/python3
"""Python's grpcio as a client of the Interop service (proto/
grpc_interop.proto), for the gRPC interop tests (tests/integration/
test_grpc.sh): what outpost's gRPC server (grpc_peer serve) is checked
against; interop_server.py is the reference it must also pass against.

  interop_client.py SOCKET CASE... [--stubs DIR]

Each case checks its own expectation and prints one line, "ok CASE: what
it saw" or "not ok CASE - why"; the exit status is 0 only when every case
passed. CASE "all" is every case but goaway. One channel serves all the
cases of a run.

  unary          1 KiB payload and seq echoed
  metadata       custom ASCII metadata echoed (echo_metadata); grpcio sends
                 it as raw literals, never Huffman-coded
  huffman        -bin metadata echoed: grpcio sends -bin values base64'd
                 and Huffman-coded, so the server must decode Huffman
  large          3 MiB payload both ways (one unary call)
  server_stream  5 messages, seq counting up
  client_stream  10 messages in, their payloads concatenated back
  bidi           10 messages ping-pong
  error          trailers-only NOT_FOUND with a message holding '%' and
                 non-ASCII text (percent-encoding both ways)
  stream_error   3 messages, then FAILED_PRECONDITION in the trailers
  unimplemented  an unknown method and an unknown service: UNIMPLEMENTED
  concurrent     200 unary calls in flight at once (futures), all answered
  deadline       the server holds the call 5 s, the deadline is 300 ms:
                 DEADLINE_EXCEEDED (the server logs "cancelled Unary")
  cancel         a bidi stream cancelled after one echo: CANCELLED (the
                 server logs "cancelled Bidi")
  cancel_stream  a long server stream cancelled after 3 messages (the
                 server logs "cancelled ServerStream")
  goaway         needs a server started with --drain-after 1: the call in
                 flight when the GOAWAY comes finishes OK; the next one is
                 UNAVAILABLE (the draining server unlinked its socket)
"""
import base64
import os
import queue
import sys
import time

import interop_common as common

import grpc

CALL_TIMEOUT = 20  # seconds; no case waits on anything longer


class Failed(Exception):
    pass


def expect(cond, why):
    if not cond:
        raise Failed(why)


def expect_code(err, code, what):
    expect(isinstance(err, grpc.RpcError), "%s: no RpcError: %r" % (what, err))
    expect(err.code() == code, "%s: code %s (%s), expected %s" % (what, err.code(), err.details(), code))


def pattern(n, salt=0):
    """n bytes that differ from one offset to the next (251 is prime: no
    period lines up with frame or message boundaries)."""
    block = bytes((i * 7 + salt) % 251 for i in range(251))
    return (block * (n // 251 + 1))[:n]


class Cases:
    def __init__(self, channel, pb2, pb2_grpc):
        self.channel = channel
        self.Msg = pb2.Msg
        self.stub = pb2_grpc.InteropStub(channel)

    def unary(self):
        p = pattern(1024)
        r = self.stub.Unary(self.Msg(payload=p, seq=7), timeout=CALL_TIMEOUT)
        expect(r.payload == p and r.seq == 7, "reply differs: %d bytes, seq %d" % (len(r.payload), r.seq))
        return "1024 bytes and seq echoed"

    def metadata(self):
        values = ["plain", "with spaces, punctuation !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ and 0123456789",
                  "x" * 3000]
        for v in values:
            r = self.stub.Unary(self.Msg(echo_metadata="x-echo", seq=1), metadata=[("x-echo", v)],
                                timeout=CALL_TIMEOUT)
            expect(r.echoed_metadata == v, "x-echo %.40r... came back as %.40r..." % (v, r.echoed_metadata))
        r = self.stub.Unary(self.Msg(echo_metadata="x-absent"), timeout=CALL_TIMEOUT)
        expect(r.echoed_metadata == "", "an absent header echoed as %r" % r.echoed_metadata)
        return "%d values echoed (up to 3000 bytes), an absent header empty" % len(values)

    def huffman(self):
        # Lengths that are multiples of 3: base64 without padding either way.
        values = [bytes(range(96)), b"\x00\x01\xff", pattern(300, 3)]
        for v in values:
            r = self.stub.Unary(self.Msg(echo_metadata="x-blob-bin"), metadata=[("x-blob-bin", v)],
                                timeout=CALL_TIMEOUT)
            want = base64.b64encode(v).decode().rstrip("=")
            expect(r.echoed_metadata == want, "x-blob-bin of %d bytes came back as %.40r..., expected %.40r..."
                   % (len(v), r.echoed_metadata, want))
        return "%d Huffman-coded -bin values echoed" % len(values)

    def large(self):
        p = pattern(3 << 20, 1)
        t0 = time.monotonic()
        r = self.stub.Unary(self.Msg(payload=p, seq=3), timeout=CALL_TIMEOUT)
        took = time.monotonic() - t0
        expect(len(r.payload) == len(p), "reply of %d bytes, sent %d" % (len(r.payload), len(p)))
        expect(r.payload == p, "3 MiB reply differs from the request")
        return "3 MiB both ways in %.0f ms" % (took * 1000)

    def server_stream(self):
        got = list(self.stub.ServerStream(self.Msg(payload=b"s" * 100, count=5, seq=100), timeout=CALL_TIMEOUT))
        expect([m.seq for m in got] == list(range(100, 105)), "seqs %s" % [m.seq for m in got])
        expect(all(m.payload == b"s" * 100 for m in got), "a payload differs")
        return "5 messages, seq 100..104"

    def client_stream(self):
        msgs = [self.Msg(payload=bytes([65 + i]) * 10, seq=i) for i in range(10)]
        r = self.stub.ClientStream(iter(msgs), timeout=CALL_TIMEOUT)
        want = b"".join(m.payload for m in msgs)
        expect(r.count == 10 and r.payload == want and r.seq == 9,
               "count %d, seq %d, payload %.30r" % (r.count, r.seq, r.payload))
        return "10 messages in, 100 bytes concatenated back"

    def _bidi(self):
        """A bidi call fed from a queue: (send, responses, call)."""
        q = queue.Queue()

        def requests():
            while True:
                m = q.get()
                if m is None:
                    return
                yield m

        call = self.stub.Bidi(requests(), timeout=CALL_TIMEOUT)
        return q.put, call

    def bidi(self):
        send, call = self._bidi()
        for i in range(10):
            p = pattern(10 + i * 100, i)
            send(self.Msg(payload=p, seq=i))
            r = next(call)
            expect(r.seq == i and r.payload == p, "echo %d: seq %d, %d bytes" % (i, r.seq, len(r.payload)))
        send(None)
        rest = list(call)
        expect(rest == [], "%d messages after the half-close" % len(rest))
        expect(call.code() == grpc.StatusCode.OK, "status %s" % call.code())
        return "10 echoes ping-pong, then OK"

    def error(self):
        text = "no such thing: 100% gone, naïve ünïcode ✓"
        try:
            self.stub.Unary(self.Msg(fail_code=5, fail_message=text), timeout=CALL_TIMEOUT)
            raise Failed("the call succeeded")
        except grpc.RpcError as e:
            expect_code(e, grpc.StatusCode.NOT_FOUND, "status")
            expect(e.details() == text, "message %r, expected %r" % (e.details(), text))
        return "NOT_FOUND %r" % text

    def stream_error(self):
        call = self.stub.ServerStream(self.Msg(payload=b"e", count=3, fail_code=9, fail_message="after three"),
                                      timeout=CALL_TIMEOUT)
        got = []
        try:
            for m in call:
                got.append(m)
            raise Failed("the stream ended OK after %d messages" % len(got))
        except grpc.RpcError as e:
            expect_code(e, grpc.StatusCode.FAILED_PRECONDITION, "status")
            expect(e.details() == "after three", "message %r" % e.details())
        expect(len(got) == 3, "%d messages before the error, expected 3" % len(got))
        return "3 messages, then FAILED_PRECONDITION 'after three'"

    def unimplemented(self):
        for path in ("/%s/NoSuchMethod" % common.SERVICE, "/outpost.interop.v1.NoSuchService/Unary"):
            try:
                self.channel.unary_unary(path)(b"", timeout=CALL_TIMEOUT)
                raise Failed(path + " succeeded")
            except grpc.RpcError as e:
                expect_code(e, grpc.StatusCode.UNIMPLEMENTED, path)
        return "unknown method and service: UNIMPLEMENTED"

    def concurrent(self):
        n = 200
        futs = [self.stub.Unary.future(self.Msg(payload=pattern(64, i), seq=i, delay_ms=50), timeout=CALL_TIMEOUT)
                for i in range(n)]
        t0 = time.monotonic()
        bad = []
        for i, f in enumerate(futs):
            try:
                r = f.result()
                if r.seq != i or r.payload != pattern(64, i):
                    bad.append("%d: seq %d" % (i, r.seq))
            except grpc.RpcError as e:
                bad.append("%d: %s %s" % (i, e.code(), e.details()))
        expect(not bad, "%d of %d calls failed: %s" % (len(bad), n, "; ".join(bad[:5])))
        return "%d calls in flight at once, all answered (last %.0f ms after the first wait)" % (
            n, (time.monotonic() - t0) * 1000)

    def deadline(self):
        t0 = time.monotonic()
        try:
            self.stub.Unary(self.Msg(delay_ms=5000, seq=4), timeout=0.3)
            raise Failed("the call succeeded")
        except grpc.RpcError as e:
            expect_code(e, grpc.StatusCode.DEADLINE_EXCEEDED, "status")
        took = time.monotonic() - t0
        expect(took < 3, "DEADLINE_EXCEEDED after %.1f s, the deadline was 0.3 s" % took)
        return "DEADLINE_EXCEEDED after %.0f ms" % (took * 1000)

    def cancel(self):
        send, call = self._bidi()
        send(self.Msg(payload=b"c", seq=1))
        r = next(call)
        expect(r.seq == 1, "first echo seq %d" % r.seq)
        call.cancel()
        try:
            for _ in call:
                pass
            raise Failed("the cancelled stream ended without an error")
        except grpc.RpcError as e:
            expect_code(e, grpc.StatusCode.CANCELLED, "status")
        send(None)
        return "bidi cancelled after one echo: CANCELLED"

    def cancel_stream(self):
        call = self.stub.ServerStream(self.Msg(payload=b"l", count=100000, delay_ms=5), timeout=CALL_TIMEOUT)
        for i in range(3):
            expect(next(call).seq == i, "message %d out of order" % i)
        call.cancel()
        try:
            for _ in call:
                pass
            raise Failed("the cancelled stream ended without an error")
        except grpc.RpcError as e:
            expect_code(e, grpc.StatusCode.CANCELLED, "status")
        return "server stream cancelled after 3 messages: CANCELLED"

    def goaway(self):
        r = self.stub.Unary(self.Msg(payload=b"g", seq=1, delay_ms=500), timeout=CALL_TIMEOUT)
        expect(r.payload == b"g" and r.seq == 1, "the call in flight during the GOAWAY: seq %d" % r.seq)
        try:
            self.stub.Unary(self.Msg(seq=2), timeout=5)
            raise Failed("a call after the GOAWAY succeeded")
        except grpc.RpcError as e:
            expect_code(e, grpc.StatusCode.UNAVAILABLE, "the call after the GOAWAY")
        return "the call in flight finished OK; the next one UNAVAILABLE"


ALL = ["unary", "metadata", "huffman", "large", "server_stream", "client_stream", "bidi", "error", "stream_error",
       "unimplemented", "concurrent", "deadline", "cancel", "cancel_stream"]


def main():
    argv = list(sys.argv[1:])
    stubs = common.stubs_arg(argv, None)
    if len(argv) < 2:
        sys.exit(__doc__)
    path = os.path.abspath(argv[0])
    names = []
    for a in argv[1:]:
        names.extend(ALL if a == "all" else [a])
    for n in names:
        if n not in ALL and n != "goaway":
            sys.exit("unknown case %r (cases: %s goaway all)" % (n, " ".join(ALL)))
    pb2, pb2_grpc = common.load_stubs(stubs or os.path.join(os.path.dirname(path), "stubs"))
    channel = grpc.insecure_channel("unix:" + path)
    cases = Cases(channel, pb2, pb2_grpc)
    failed = 0
    for n in names:
        try:
            print("ok %s: %s" % (n, getattr(cases, n)()), flush=True)
        except Failed as e:
            failed += 1
            print("not ok %s - %s" % (n, e), flush=True)
        except grpc.RpcError as e:
            failed += 1
            print("not ok %s - %s: %s" % (n, e.code(), e.details()), flush=True)
    channel.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
