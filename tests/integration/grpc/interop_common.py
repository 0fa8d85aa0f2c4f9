"""What interop_server.py and interop_client.py share: the stubs of
proto/grpc_interop.proto, generated at test time (never committed) with
Debian's grpc_tools into a directory of the caller's, and the status codes
by number.

Runs under Debian's /usr/bin/python3 (python3-grpcio, python3-grpc-tools):
a python3 found first on PATH may lack both.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "proto"))
PROTO = "grpc_interop.proto"
SERVICE = "outpost.interop.v1.Interop"


def load_stubs(stubs_dir):
    """Imports grpc_interop_pb2 and _pb2_grpc from stubs_dir, generating
    them there first when they are not there yet. Returns (pb2, pb2_grpc)."""
    os.makedirs(stubs_dir, exist_ok=True)
    if not os.path.exists(os.path.join(stubs_dir, "grpc_interop_pb2_grpc.py")):
        cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I" + PROTO_DIR, "--python_out=" + stubs_dir,
               "--grpc_python_out=" + stubs_dir, os.path.join(PROTO_DIR, PROTO)]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            sys.exit("protoc failed (%s): %s" % (" ".join(cmd), done.stdout.decode(errors="replace")))
    if stubs_dir not in sys.path:
        sys.path.insert(0, stubs_dir)
    import grpc_interop_pb2  # noqa: E402 (generated above)
    import grpc_interop_pb2_grpc  # noqa: E402
    return grpc_interop_pb2, grpc_interop_pb2_grpc


def status_code(number):
    """The grpc.StatusCode of a numeric code (UNKNOWN for one out of range)."""
    import grpc
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code
    return grpc.StatusCode.UNKNOWN


def stubs_arg(argv, default):
    """Takes "--stubs DIR" out of argv; returns DIR (default when absent)."""
    if "--stubs" in argv:
        i = argv.index("--stubs")
        value = argv[i + 1]
        del argv[i:i + 2]
        return value
    return default
