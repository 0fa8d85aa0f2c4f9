#!/usr/bin/env python3
"""A raw NRI client for the integration tests (no Go, no plugin library):
connects to the runtime's NRI socket, sends one RegisterPlugin request as
a stock plugin does (NRI mux frame on connection 2, ttRPC request, stream 1)
and prints the runtime's answer: "ok", or "error <code>: <message>".

  nri_raw_client.py SOCKET NAME INDEX
"""
import socket
import struct
import sys


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, data):  # length-delimited field
    return varint(num << 3 | 2) + varint(len(data)) + data


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def fields(buf):
    i, out = 0, {}
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            ln, i = read_varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        else:
            raise ValueError("unexpected wire type %d" % wt)
        out[num] = v
    return out


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return data


def main():
    path, name, idx = sys.argv[1:4]
    payload = field(1, name.encode()) + field(2, idx.encode())
    req = field(1, b"nri.pkg.api.v1alpha1.Runtime") + field(2, b"RegisterPlugin") + field(3, payload)
    msg = struct.pack(">IIBB", len(req), 1, 1, 0) + req
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    s.sendall(struct.pack(">II", 2, len(msg)) + msg)
    stream = {1: b"", 2: b""}
    while True:
        conn, ln = struct.unpack(">II", recv_exact(s, 8))
        data = recv_exact(s, ln)
        if conn not in stream:
            continue
        stream[conn] += data
        buf = stream[2]
        if len(buf) >= 10:
            ln2, sid, typ, _ = struct.unpack(">IIBB", buf[:10])
            if len(buf) >= 10 + ln2 and sid == 1 and typ == 2:
                resp = fields(buf[10:10 + ln2])
                status = fields(resp.get(1, b""))
                if status.get(1, 0) == 0:
                    print("ok")
                else:
                    print("error %d: %s" % (status[1], status.get(2, b"").decode()))
                return


if __name__ == "__main__":
    main()
