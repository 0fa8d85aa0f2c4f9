#!/usr/bin/env python3
"""Misbehaving API clients for test_hostile.sh, speaking raw ttRPC.

  hostile_client.py idle SOCK N           hold N connections that never send;
                                          prints "open K" once all are made, then
                                          "still open K" (those the agent kept) on
                                          SIGUSR1; runs until killed
  hostile_client.py trickle SOCK          send one request one byte per second;
                                          prints "closed after N bytes" when the
                                          agent cuts the connection
  hostile_client.py noread SOCK KIND ARG  pipeline requests and never read a reply
                                          (KIND logs: ReadLogs of task ARG; events:
                                          WatchEvents); prints "cut off after N
                                          requests" once the agent closes the
                                          connection
  hostile_client.py abandon SOCK N        N times: connect, start a minute-long
                                          WatchEvents that nothing will answer,
                                          make sure the agent has it (a Status
                                          call after it is answered), hang up;
                                          prints "abandoned N"
  hostile_client.py bigframes SOCK N      N connections, each sending 3 MiB of a
                                          3.5 MiB request and stopping there;
                                          prints "closed K of N" (those the
                                          agent cut off), then holds the rest
                                          until killed

Every wait is bounded (60 s); a client that is never cut off exits 1.
"""
import os
import select
import signal
import socket
import struct
import sys
import time

SERVICE = "outpost.v1.Agent"
LIMIT = 60.0


def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, value):
    if wire == 0:
        return varint(num << 3) + varint(value)
    return varint(num << 3 | 2) + varint(len(value)) + value


def request_frame(stream, method, payload):
    req = field(1, 2, SERVICE.encode()) + field(2, 2, method.encode()) + field(3, 2, payload)
    return struct.pack(">IIBB", len(req), stream, 1, 0) + req


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    deadline = time.monotonic() + 10
    while True:
        try:
            s.connect(path)
            return s
        except BlockingIOError:  # the listen backlog is full: the agent is busy
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def peer_closed(s):
    """True once the agent has closed s (POLLHUP; unread replies do not matter)."""
    p = select.poll()
    p.register(s, select.POLLHUP | select.POLLERR)
    return bool(p.poll(0))


def idle(path, n):
    conns = []
    for _ in range(n):
        try:
            conns.append(connect(path))
        except OSError as e:
            print("connect failed: %s" % e, flush=True)
            return 1
    signal.signal(signal.SIGUSR1,
                  lambda *_: print("still open %d" % sum(not peer_closed(s) for s in conns), flush=True))
    print("open %d" % sum(not peer_closed(s) for s in conns), flush=True)
    while True:
        signal.pause()


def trickle(path):
    s = connect(path)
    frame = request_frame(1, "Status", b"")
    deadline = time.monotonic() + LIMIT
    sent = 0
    while time.monotonic() < deadline:
        if peer_closed(s):
            print("closed after %d bytes" % sent, flush=True)
            return 0
        try:
            s.setblocking(True)
            s.send(frame[sent % len(frame):sent % len(frame) + 1])
            sent += 1
        except OSError:
            print("closed after %d bytes" % sent, flush=True)
            return 0
        time.sleep(1)
    print("not cut off after %d bytes" % sent, flush=True)
    return 1


def noread(path, kind, arg):
    s = connect(path)
    s.setblocking(False)
    if kind == "logs":
        # The whole active file, and wait for more: as big as replies get.
        payload = field(1, 2, arg.encode()) + field(3, 0, -1)
        method = "ReadLogs"
    else:
        # Every kept event, at once.
        payload = field(2, 0, 30 * 10**9)
        method = "WatchEvents"
    deadline = time.monotonic() + LIMIT
    stream, pending = 1, b""
    while time.monotonic() < deadline:
        if peer_closed(s):
            print("cut off after %d requests" % (stream // 2), flush=True)
            return 0
        if not pending:
            pending = request_frame(stream, method, payload)
            stream += 2
        try:
            pending = pending[s.send(pending):]
        except BlockingIOError:
            select.select([], [s], [], 0.2)  # the agent stopped reading: wait for the close
        except OSError:
            print("cut off after %d requests" % (stream // 2), flush=True)
            return 0
    print("not cut off after %d requests" % (stream // 2), flush=True)
    return 1


def read_reply(s, stream):
    """Reads frames until the reply to stream arrives; False if s closed."""
    buf = b""
    s.setblocking(True)
    s.settimeout(LIMIT)
    while True:
        while len(buf) >= 10:
            length, sid, _, _ = struct.unpack(">IIBB", buf[:10])
            if len(buf) < 10 + length:
                break
            buf = buf[10 + length:]
            if sid == stream:
                return True
        chunk = s.recv(65536)
        if not chunk:
            return False
        buf += chunk


def abandon(path, n):
    # after_seq far beyond the last event, so only a new event (none come)
    # or the end of the minute would answer it.
    wait = field(1, 0, 1 << 62) + field(2, 0, 60 * 10**9)
    for i in range(n):
        s = connect(path)
        s.setblocking(True)
        s.sendall(request_frame(1, "WatchEvents", wait) + request_frame(3, "Status", b""))
        if not read_reply(s, 3):
            print("connection %d closed before the Status reply" % i, flush=True)
            return 1
        s.close()
    print("abandoned %d" % n, flush=True)
    return 0


def bigframes(path, n):
    payload = b"x" * (7 << 19)  # 3.5 MiB: within the 4 MiB frame limit
    frame = request_frame(1, "Status", payload)[:3 << 20]
    socks, closed = [], 0
    for _ in range(n):
        s = connect(path)
        s.setblocking(True)
        s.settimeout(LIMIT)
        try:
            s.sendall(frame)
            socks.append(s)
        except OSError:  # cut off while sending
            closed += 1
            s.close()
    # Those the agent closed after taking all the bytes.
    time.sleep(0)
    for s in socks:
        if peer_closed(s):
            closed += 1
    print("closed %d of %d" % (closed, n), flush=True)
    signal.pause()
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "bigframes":
        return bigframes(argv[2], int(argv[3]))
    if len(argv) == 4 and argv[1] == "abandon":
        return abandon(argv[2], int(argv[3]))
    if len(argv) == 4 and argv[1] == "idle":
        return idle(argv[2], int(argv[3]))
    if len(argv) == 3 and argv[1] == "trickle":
        return trickle(argv[2])
    if len(argv) == 5 and argv[1] == "noread":
        return noread(argv[2], argv[3], argv[4])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
