#!/usr/bin/python3
"""grpc_bench's grpcio side (tools/bench/grpc_bench.cc runs it with Debian's
/usr/bin/python3, which has python3-grpcio). The method is
/bench.v1.Bench/Echo with raw bytes (no protobuf), as grpc_bench's own
outpost server serves it.

  grpc_bench.py serve SOCKET
      a grpcio server (one thread pool of 4) echoing every request; prints
      "ready" once it listens
  grpc_bench.py call SOCKET_A SOCKET_B SIZE SECONDS
      one channel to each socket; after 200 warm-up calls on each, unary
      calls of SIZE bytes one at a time, A and B alternating in 20 rounds
      for SECONDS in all (background load hits both alike); prints
      "latency a <p50 us> <p99 us> <calls>" and the same for b
"""
import sys
import time
from concurrent import futures

import grpc

METHOD = "/bench.v1.Bench/Echo"


def serve(path):
    handler = grpc.method_handlers_generic_handler(
        "bench.v1.Bench", {"Echo": grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    if server.add_insecure_port("unix:" + path) == 0:
        sys.exit("cannot listen on unix:" + path)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def percentile(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] / 1000.0


def call(path_a, path_b, size, seconds):
    payload = b"p" * size
    echoes = []
    for path in (path_a, path_b):
        echo = grpc.insecure_channel("unix:" + path).unary_unary(METHOD)
        for _ in range(200):
            if echo(payload, timeout=10) != payload:
                sys.exit("echo of %s differs" % path)
        echoes.append(echo)
    samples = [[], []]
    rounds = 20
    for _ in range(rounds):
        for which in (0, 1):
            end = time.monotonic() + seconds / (2 * rounds)
            echo = echoes[which]
            while time.monotonic() < end:
                t0 = time.perf_counter_ns()
                reply = echo(payload, timeout=10)
                samples[which].append(time.perf_counter_ns() - t0)
                if len(reply) != size:
                    sys.exit("short reply")
    for name, s in zip("ab", samples):
        print("latency %s %.1f %.1f %d" % (name, percentile(s, 0.5), percentile(s, 0.99), len(s)), flush=True)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] == "call":
        call(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
