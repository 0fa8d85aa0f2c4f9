"""A TCP echo server and a client that holds one connection open, for the
network tests that need a connection to a task to survive agent restarts
(test_networks.sh). The one-shot helper (`test_helper serve/connect`)
closes each connection at once, so it cannot tell a kept connection from a
new one.

  net_echo.py serve PORT
      binds 0.0.0.0:PORT, prints "listening tcp PORT", then echoes every
      line of every connection back (one thread per connection).
  net_echo.py hold HOST PORT LOG GO
      connects once; round N sends "ping N", reads the echo and appends
      "echo ping N" to LOG, then waits for the file GO-<N+1> before round
      N+1 (the test creates it once it has seen what it waits for). Any
      failure appends "error: ..." to LOG and exits 1; the connection is
      never re-made.
  net_echo.py once HOST PORT
      one new connection, one line: prints the echo of "once".
"""
import os
import socket
import sys
import threading
import time


def serve(port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(16)
    print("listening tcp %d" % port, flush=True)

    def echo(conn):
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                conn.sendall(line)

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def round_trip(sock, lines, text):
    sock.sendall(text.encode() + b"\n")
    got = lines.readline()
    if not got:
        raise OSError("connection closed by the server")
    return got.decode().rstrip("\n")


def hold(host, port, log_path, go):
    with open(log_path, "a", buffering=1) as log:
        try:
            sock = socket.create_connection((host, port), timeout=10)
            lines = sock.makefile("rb")
            n = 1
            while True:
                log.write("echo %s\n" % round_trip(sock, lines, "ping %d" % n))
                n += 1
                # Waiting for the test's go, not for time: the file is the event.
                while not os.path.exists("%s-%d" % (go, n)):
                    time.sleep(0.05)
        except OSError as e:
            log.write("error: %s\n" % e)
            sys.exit(1)


def once(host, port):
    sock = socket.create_connection((host, port), timeout=10)
    print(round_trip(sock, sock.makefile("rb"), "once"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "serve":
        serve(int(sys.argv[2]))
    elif cmd == "hold":
        hold(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif cmd == "once":
        once(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("unknown command " + cmd)
