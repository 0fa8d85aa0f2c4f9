#!/usr/bin/python3
"""A Nomad task-driver plugin for outpost's tests, in Python with grpcio.

It behaves the way a driver built on hashicorp/nomad's plugin SDK and
hashicorp/go-plugin behaves towards its host, so that the host cannot tell
the difference: the magic cookie check (go-plugin's refusal text and exit 1
without it), the socket made in PLUGIN_UNIX_SOCKET_DIR (else the temp dir),
the handshake line `1|2|unix|<socket>|grpc|` on stdout, hclog-style JSON log
lines on stderr, SIGINT ignored, fd 1 and 2 taken over by go-plugin's stdio
stream once the line is out, and one gRPC server with BasePlugin, Driver,
plugin.GRPCController, plugin.GRPCStdio, plugin.GRPCBroker and
grpc.health.v1.Health ("plugin" SERVING). Errors are what Nomad's SDK sends:
plain errors as UNKNOWN with the error's text, StartTask's recoverable ones
as FAILED_PRECONDITION with a RecoverableError in grpc-status-details-bin.

The driver itself runs a command (its task config's `command` and `args`) as
a child in a session of its own (setsid), in the task dir, with the task's
environment and its output on the task's stdout/stderr FIFOs. Its
driver_state (msgpack) holds the pid and the process start time, so a new
instance of the plugin (after a crash or a host restart) recovers the task
by pid (RecoverTask); such a task is no child of the new instance, so its
exit status is then unknown (WaitTask: exit code -1 and an err
"exit status unknown: ...").

Options (also read, whitespace-separated, from the --control file at every
launch and every call, so one installed copy can change behaviour between
launches):
  --name NAME              name in PluginInfo (default pydriver)
  --plugin-version V       plugin_version (default 0.1.0)
  --api-versions LIST      comma-separated plugin_api_versions (default v0.1.0)
  --exec                   Capabilities.exec; ExecTask and ExecTaskStreaming work
  --no-signals             Capabilities.send_signals false
  --control FILE           the file of extra options
  --calls FILE             append one JSON line per call (and launch, handshake,
                           exit) to FILE: what the tests check
  --crash-on-start         exit (status 2, a Go-style panic line) during StartTask,
                           before starting anything
  --crash-after-spawn      the same, after the task's process was started
  --start-error retry|fatal  StartTask fails: FAILED_PRECONDITION +
                           RecoverableError{recoverable: retry}
  --start-error-message M  that error's text
  --no-recover             RecoverTask always fails
  --netrpc                 handshake line asks for go-plugin's net/rpc
  --mtls                   handshake line carries a server certificate (AutoMTLS)
  --slow-fingerprint S     first Fingerprint message only after S seconds
  --fingerprint-interval S later messages every S seconds (default 30)
  --unhealthy              fingerprint UNHEALTHY ("simulated fault")
  --exit-after N           exit (status 2, panic line) when the Nth
                           BasePlugin/Driver call arrives
  --stdout-flood KIB       write KIB KiB to stdout (go-plugin's stdio stream)
                           during SetConfig
  --implement-init         answer Driver.Init and Driver.Shutdown (by default
                           UNIMPLEMENTED, as an SDK before Nomad 1.11)
  --proto-dir DIR          where nomad_*.proto are (else $OUTPOST_TEST_NOMAD_PROTO_DIR,
                           else ../../../proto from this script's real path)
  --stubs DIR              generated stubs to use, made there if missing
                           (else $OUTPOST_TEST_NOMAD_STUBS, else a temp dir)

The stubs are generated at start with grpc_tools.protoc from the repository's
proto/ files; nothing generated is kept in the repository.
"""

import time

T0_NS = time.monotonic_ns()  # this process's first instruction (nomad_bench)

import argparse
import base64
import json
import os
import pwd
import queue
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent import futures

COOKIE_KEY = "NOMAD_PLUGIN_MAGIC_COOKIE"
COOKIE_VALUE = "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255"
APP_PROTOCOL = 2
RECOVERABLE_TYPE_URL = "type.googleapis.com/hashicorp.nomad.plugins.shared.structs.RecoverableError"
PROTOS = ["google_protobuf.proto", "nomad_hcl_spec.proto", "nomad_structs.proto", "nomad_base.proto",
          "nomad_driver.proto", "goplugin.proto", "grpc_health.proto"]
ERR_NOT_FOUND = "task not found for given id"  # drivers.ErrTaskNotFound


def parse_options(argv):
    p = argparse.ArgumentParser(prog="test_nomad_driver", add_help=True)
    p.add_argument("--name", default="pydriver")
    p.add_argument("--plugin-version", default="0.1.0")
    p.add_argument("--api-versions", default="v0.1.0")
    p.add_argument("--exec", action="store_true", dest="exec_")
    p.add_argument("--no-signals", action="store_true")
    p.add_argument("--control")
    p.add_argument("--calls")
    p.add_argument("--crash-on-start", action="store_true")
    p.add_argument("--crash-after-spawn", action="store_true")
    p.add_argument("--start-error", choices=["retry", "fatal"])
    p.add_argument("--start-error-message")
    p.add_argument("--no-recover", action="store_true")
    p.add_argument("--netrpc", action="store_true")
    p.add_argument("--mtls", action="store_true")
    p.add_argument("--slow-fingerprint", type=float, default=0.0)
    p.add_argument("--fingerprint-interval", type=float, default=30.0)
    p.add_argument("--unhealthy", action="store_true")
    p.add_argument("--exit-after", type=int, default=0)
    p.add_argument("--stdout-flood", type=int, default=0)
    p.add_argument("--implement-init", action="store_true")
    p.add_argument("--proto-dir")
    p.add_argument("--stubs")
    return p.parse_args(argv)


ARGV = sys.argv[1:]


def options():
    """The command line plus the control file's options, read now."""
    base = parse_options(ARGV)
    if base.control:
        try:
            with open(base.control) as f:
                extra = shlex.split(f.read())
        except FileNotFoundError:
            extra = []
        if extra:
            return parse_options(ARGV + extra)
    return base


# ---- logging: hclog's JSON lines on the real stderr ---------------------------

LOG_LOCK = threading.Lock()
REAL_STDERR = 2  # replaced by a dup once go-plugin's stdio takes fd 2


def hclog(level, message, **fields):
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%06dZ" % int((now % 1) * 1e6)
    line = {"@level": level, "@message": message, "@module": OPTS.name if OPTS else "pydriver",
            "@timestamp": stamp}
    for k, v in fields.items():
        line[k] = v
    data = (json.dumps(line) + "\n").encode()
    with LOG_LOCK:
        try:
            os.write(REAL_STDERR, data)
        except OSError:
            pass


def panic(message, code=2):
    """Dies the way a Go plugin does: a panic line on the real stderr."""
    record("exit", code=code, why=message)
    with LOG_LOCK:
        try:
            os.write(REAL_STDERR, ("panic: %s\n\ngoroutine 1 [running]:\nmain.main()\n" % message).encode())
        except OSError:
            pass
    os._exit(code)


CALLS_LOCK = threading.Lock()


def record(event, **fields):
    """One JSON line in the --calls file."""
    path = OPTS.calls if OPTS else None
    if not path:
        return
    fields["event"] = event
    fields["pid"] = os.getpid()
    fields["mono_ns"] = time.monotonic_ns()
    data = json.dumps(fields, sort_keys=True) + "\n"
    with CALLS_LOCK:
        with open(path, "a") as f:
            f.write(data)


OPTS = None

# ---- stubs ----------------------------------------------------------------------


def proto_dir(opts):
    if opts.proto_dir:
        return opts.proto_dir
    if os.environ.get("OUTPOST_TEST_NOMAD_PROTO_DIR"):
        return os.environ["OUTPOST_TEST_NOMAD_PROTO_DIR"]
    here = os.path.dirname(os.path.realpath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "proto"))


def load_stubs(opts):
    """Imports the generated modules, generating them first when needed."""
    cache = opts.stubs or os.environ.get("OUTPOST_TEST_NOMAD_STUBS")
    marker = "nomad_driver_pb2_grpc.py"
    if cache and os.path.exists(os.path.join(cache, marker)):
        where = cache
    else:
        from grpc_tools import protoc
        src = proto_dir(opts)
        tmp = tempfile.mkdtemp(prefix="pydriver-stubs-")
        args = ["protoc", "-I" + src, "--python_out=" + tmp, "--grpc_python_out=" + tmp]
        args += [os.path.join(src, p) for p in PROTOS]
        if protoc.main(args) != 0:
            sys.stderr.write("cannot generate the stubs from %s\n" % src)
            sys.exit(1)
        where = tmp
        if cache:
            try:
                os.rename(tmp, cache)  # the first one wins; the others use theirs
                where = cache
            except OSError:
                pass
    sys.path.insert(0, where)
    import google_protobuf_pb2, goplugin_pb2, goplugin_pb2_grpc, grpc_health_pb2, grpc_health_pb2_grpc  # noqa
    import nomad_base_pb2, nomad_base_pb2_grpc, nomad_driver_pb2, nomad_driver_pb2_grpc  # noqa
    import nomad_hcl_spec_pb2, nomad_structs_pb2  # noqa
    return where, dict(gp=google_protobuf_pb2, goplugin=goplugin_pb2, goplugin_grpc=goplugin_pb2_grpc,
                       health=grpc_health_pb2, health_grpc=grpc_health_pb2_grpc, base=nomad_base_pb2,
                       base_grpc=nomad_base_pb2_grpc, drv=nomad_driver_pb2, drv_grpc=nomad_driver_pb2_grpc,
                       hcl=nomad_hcl_spec_pb2, structs=nomad_structs_pb2)


# ---- hclspec helpers ---------------------------------------------------------------


def spec_attr(hcl, name, typ, required=False):
    return hcl.Spec(Attr=hcl.Attr(name=name, type=typ, required=required))


def spec_default(hcl, primary, literal):
    return hcl.Spec(default_=hcl.Default(primary=primary, default_=hcl.Spec(literal=hcl.Literal(value=literal))))


def spec_object(hcl, attrs):
    return hcl.Spec(object=hcl.Object(attributes=attrs))


def config_schema(hcl):
    # Like the skeleton driver's: a defaulted string, plus a typed one.
    return spec_object(hcl, {
        "shell": spec_default(hcl, spec_attr(hcl, "shell", "string"), '"bash"'),
        "max_tasks": spec_attr(hcl, "max_tasks", "number"),
    })


def task_config_schema(hcl):
    options = spec_object(hcl, {
        "workdir": spec_attr(hcl, "workdir", "string"),
        "stop_signal": spec_attr(hcl, "stop_signal", "string"),
        "ratio": spec_attr(hcl, "ratio", "number"),
    })
    port = spec_object(hcl, {
        "label": spec_attr(hcl, "label", "string", required=True),
        "port": spec_attr(hcl, "port", "number"),
    })
    return spec_object(hcl, {
        "command": spec_attr(hcl, "command", "string", required=True),
        "args": spec_attr(hcl, "args", "list(string)"),
        "greeting": spec_default(hcl, spec_attr(hcl, "greeting", "string"), '"Hello, World!"'),
        "options": hcl.Spec(block_value=hcl.Block(name="options", nested=options)),
        "port_map": hcl.Spec(block_list=hcl.BlockList(name="port_map", nested=port)),
    })


# ---- msgpack decoding as a Go struct would take it -----------------------------


class DecodeError(Exception):
    pass


def want_str(v, path, allow_none=True):
    if v is None and allow_none:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if not isinstance(v, str):
        raise DecodeError("%s: cannot decode %s into a string field" % (path, type(v).__name__))
    return v


def want_number(v, path):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        # Nomad sends inexact decimals as strings, which a Go float64 field refuses.
        raise DecodeError("%s: cannot decode %s %r into a float64 field" % (path, type(v).__name__, v))
    return v


def decode_task_config(raw):
    import msgpack
    if not raw:
        raise DecodeError("EOF")
    try:
        v = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as e:  # noqa: BLE001 - any decoding problem is the caller's
        raise DecodeError(str(e))
    if not isinstance(v, dict):
        raise DecodeError("expected a map, got %s" % type(v).__name__)
    cfg = {"command": want_str(v.get("command"), "command"), "greeting": want_str(v.get("greeting"), "greeting")}
    args = v.get("args") or []
    if not isinstance(args, list):
        raise DecodeError("args: cannot decode %s into a []string field" % type(args).__name__)
    cfg["args"] = [want_str(a, "args[%d]" % i, False) for i, a in enumerate(args)]
    opts = v.get("options")
    if opts is not None and not isinstance(opts, dict):
        raise DecodeError("options: cannot decode %s into a struct" % type(opts).__name__)
    opts = opts or {}
    cfg["options"] = {"workdir": want_str(opts.get("workdir"), "options.workdir"),
                      "stop_signal": want_str(opts.get("stop_signal"), "options.stop_signal"),
                      "ratio": want_number(opts.get("ratio"), "options.ratio")}
    ports = v.get("port_map") or []
    cfg["port_map"] = [{"label": want_str(p.get("label"), "port_map.label"),
                        "port": want_number(p.get("port"), "port_map.port")} for p in ports]
    return v, cfg


# ---- the tasks ------------------------------------------------------------------------


def proc_start_time(pid):
    """Field 22 of /proc/PID/stat (start time in clock ticks), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2:].split()
    return int(rest[19])


def proc_alive(pid, start_time=None):
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return False
    rest = data[data.rindex(")") + 2:].split()
    if rest[0] == "Z":
        return False
    return start_time is None or int(rest[19]) == start_time


def signal_number(name, default):
    if not name:
        return default
    n = name.upper()
    if n.isdigit():
        return int(n)
    if not n.startswith("SIG"):
        n = "SIG" + n
    sig = getattr(signal, n, None)
    if not isinstance(sig, signal.Signals):
        raise ValueError('unknown signal "%s"' % name)
    return int(sig)


class Task:
    def __init__(self, task_id, name, config_pb, pid, start_time, started_at_ns, child=None, adopted=False):
        self.id = task_id
        self.name = name
        self.config_pb = config_pb
        self.pid = pid
        self.start_time = start_time
        self.started_at_ns = started_at_ns
        self.completed_at_ns = 0
        self.child = child  # the Popen, when this instance started it
        self.adopted = adopted
        self.exited = threading.Event()
        self.exit_code = 0
        self.signal = 0
        self.err = ""
        self.stop_signal = ""
        self.env = {}
        self.cwd = "/"
        self.cpu_last = None

    def running(self):
        return not self.exited.is_set()

    def finish(self, code, sig, err=""):
        self.exit_code, self.signal, self.err = code, sig, err
        self.completed_at_ns = time.time_ns()
        self.exited.set()


class Driver:
    def __init__(self, pb):
        self.pb = pb
        self.lock = threading.Lock()
        self.tasks = {}
        self.config = {}
        self.event_subscribers = []
        self.calls = 0

    # -- events
    def emit(self, task, message, **annotations):
        ev = self.pb["drv"].DriverTaskEvent(task_id=task.id, alloc_id=task.config_pb.alloc_id, task_name=task.name,
                                            message=message, annotations={k: str(v) for k, v in annotations.items()})
        now = time.time_ns()
        ev.timestamp.seconds, ev.timestamp.nanos = now // 10**9, now % 10**9
        with self.lock:
            subs = list(self.event_subscribers)
        for q in subs:
            q.put(ev)
        record("task_event", task_id=task.id, message=message)

    # -- waiting for exits
    def watch_child(self, task):
        def run():
            st = task.child.wait()
            if st < 0:
                task.finish(128 - st, -st)
            else:
                task.finish(st, 0)
            hclog("info", "task exited", task_id=task.id, exit_code=task.exit_code, signal=task.signal)
            self.emit(task, "pydriver: task exited with code %d" % task.exit_code, exit_code=task.exit_code)
        threading.Thread(target=run, daemon=True).start()

    def watch_adopted(self, task):
        def run():
            fd = None
            try:
                fd = os.pidfd_open(task.pid)
            except (OSError, AttributeError):
                fd = None
            while proc_alive(task.pid, task.start_time):
                if fd is not None:
                    select.select([fd], [], [], 1.0)
                else:
                    time.sleep(0.05)
            if fd is not None:
                os.close(fd)
            task.finish(-1, 0, "exit status unknown: pid %d was started by an earlier instance of %s"
                        % (task.pid, OPTS.name))
            hclog("info", "recovered task exited", task_id=task.id, pid=task.pid)
            self.emit(task, "pydriver: recovered task exited, status unknown")
        threading.Thread(target=run, daemon=True).start()

    def get(self, task_id):
        with self.lock:
            return self.tasks.get(task_id)


# ---- gRPC services ------------------------------------------------------------------


def fail(context, message, code=None):
    import grpc
    context.abort(code or grpc.StatusCode.UNKNOWN, message)


class RecoverableStatus:
    """A grpc.Status: FAILED_PRECONDITION with a RecoverableError detail,
    as Nomad's plugins/drivers/server.go sends (status.WithDetails)."""

    def __init__(self, pb, message, recoverable):
        import grpc
        self.code = grpc.StatusCode.FAILED_PRECONDITION
        self.details = message
        detail = pb["structs"].RecoverableError(recoverable=recoverable).SerializeToString()
        any_msg = pb_bytes(1, RECOVERABLE_TYPE_URL.encode()) + pb_bytes(2, detail)
        status = pb_varint_field(1, 9) + pb_bytes(2, message.encode()) + pb_bytes(3, any_msg)
        self.trailing_metadata = (("grpc-status-details-bin", status),)


def pb_varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_bytes(num, data):
    return pb_varint((num << 3) | 2) + pb_varint(len(data)) + data


def pb_varint_field(num, v):
    return pb_varint(num << 3) + pb_varint(v)


def counted(method):
    """Logs the call, counts it for --exit-after."""
    name = method.__name__

    def wrapper(self, request, context):
        opts = options()
        d = self.d
        with d.lock:
            d.calls += 1
            n = d.calls
        if opts.exit_after and n >= opts.exit_after:
            record("call", rpc=name)
            panic("exit-after: call %d (%s)" % (n, name))
        return method(self, request, context)
    wrapper.__name__ = name
    return wrapper


def build_services(pb, drv, server_stop):
    import grpc
    base_pb, drv_pb, hcl = pb["base"], pb["drv"], pb["hcl"]

    class Base(pb["base_grpc"].BasePluginServicer):
        def __init__(self):
            self.d = drv

        @counted
        def PluginInfo(self, request, context):
            opts = options()
            record("call", rpc="PluginInfo")
            return base_pb.PluginInfoResponse(type=base_pb.DRIVER, name=opts.name,
                                              plugin_api_versions=[v for v in opts.api_versions.split(",") if v],
                                              plugin_version=opts.plugin_version)

        @counted
        def ConfigSchema(self, request, context):
            record("call", rpc="ConfigSchema")
            return base_pb.ConfigSchemaResponse(spec=config_schema(hcl))

        @counted
        def SetConfig(self, request, context):
            import msgpack
            opts = options()
            raw = request.msgpack_config
            fields = {"msgpack_config": raw.hex(), "plugin_api_version": request.plugin_api_version,
                      "has_nomad_config": request.HasField("nomad_config")}
            if request.HasField("nomad_config") and request.nomad_config.HasField("driver"):
                dc = request.nomad_config.driver
                fields.update(client_min_port=dc.ClientMinPort, client_max_port=dc.ClientMaxPort)
            cfg = {}
            if raw:  # as the skeleton: decoded only when not empty
                try:
                    cfg = msgpack.unpackb(raw, raw=False)
                except Exception as e:  # noqa: BLE001
                    record("call", rpc="SetConfig", error=str(e), **fields)
                    fail(context, "failed to decode plugin config: %s" % e)
                fields["decoded"] = cfg
            shell = cfg.get("shell") if isinstance(cfg, dict) else None
            if shell not in ("bash", "sh"):
                record("call", rpc="SetConfig", error="invalid shell", **fields)
                fail(context, "invalid shell %s" % json.dumps(shell if shell is not None else ""))
            record("call", rpc="SetConfig", **fields)
            drv.config = cfg
            hclog("info", "plugin configured", shell=shell)
            if opts.stdout_flood:
                chunk = ("pydriver stdout flood " + "x" * 1000 + "\n")
                for _ in range(opts.stdout_flood):
                    sys.stdout.write(chunk)
                sys.stdout.flush()
            print("pydriver stdout: configured shell=%s" % shell, flush=True)
            return base_pb.SetConfigResponse()

    class Drv(pb["drv_grpc"].DriverServicer):
        def __init__(self):
            self.d = drv

        @counted
        def Init(self, request, context):
            record("call", rpc="Init")
            if not options().implement_init:
                fail(context, "Method not implemented!", grpc.StatusCode.UNIMPLEMENTED)
            return drv_pb.InitResponse()

        @counted
        def Shutdown(self, request, context):
            record("call", rpc="Shutdown")
            if not options().implement_init:
                fail(context, "Method not implemented!", grpc.StatusCode.UNIMPLEMENTED)
            return drv_pb.ShutdownResponse()

        @counted
        def TaskConfigSchema(self, request, context):
            record("call", rpc="TaskConfigSchema")
            return drv_pb.TaskConfigSchemaResponse(spec=task_config_schema(hcl))

        @counted
        def Capabilities(self, request, context):
            opts = options()
            record("call", rpc="Capabilities")
            caps = drv_pb.DriverCapabilities(send_signals=not opts.no_signals, exec=opts.exec_,
                                             fs_isolation=drv_pb.DriverCapabilities.NONE)
            return drv_pb.CapabilitiesResponse(capabilities=caps)

        def fingerprint_message(self, opts):
            attrs = {
                "driver.%s.version" % opts.name: pb["structs"].Attribute(string_val=opts.plugin_version),
                "driver.%s.shell" % opts.name: pb["structs"].Attribute(string_val=str(drv.config.get("shell", ""))),
            }
            if opts.unhealthy:
                return drv_pb.FingerprintResponse(attributes=attrs, health=drv_pb.FingerprintResponse.UNHEALTHY,
                                                  health_description="simulated fault")
            return drv_pb.FingerprintResponse(attributes=attrs, health=drv_pb.FingerprintResponse.HEALTHY,
                                              health_description="Healthy")

        @counted
        def Fingerprint(self, request, context):
            opts = options()
            record("call", rpc="Fingerprint")
            if opts.slow_fingerprint > 0:
                deadline = time.monotonic() + opts.slow_fingerprint
                while context.is_active() and time.monotonic() < deadline:
                    time.sleep(0.05)
            first = True
            while context.is_active():
                opts = options()
                msg = self.fingerprint_message(opts)
                record("fingerprint_sent", health=int(msg.health), first=first)
                first = False
                yield msg
                deadline = time.monotonic() + max(opts.fingerprint_interval, 0.1)
                while context.is_active() and time.monotonic() < deadline:
                    time.sleep(0.1)

        @counted
        def TaskEvents(self, request, context):
            record("call", rpc="TaskEvents")
            q = queue.Queue()
            with drv.lock:
                drv.event_subscribers.append(q)
            try:
                while context.is_active():
                    try:
                        yield q.get(timeout=0.2)
                    except queue.Empty:
                        pass
            finally:
                with drv.lock:
                    drv.event_subscribers.remove(q)

        @counted
        def StartTask(self, request, context):
            t_in = time.monotonic_ns()
            opts = options()
            c = request.task
            base_fields = {"rpc": "StartTask", "task_id": c.id, "name": c.name, "job_id": c.job_id,
                           "job_name": c.job_name, "alloc_id": c.alloc_id, "task_group_name": c.task_group_name,
                           "alloc_dir": c.alloc_dir, "stdout_path": c.stdout_path, "stderr_path": c.stderr_path,
                           "user": c.user, "msgpack_driver_config": c.msgpack_driver_config.hex(),
                           "cgroup": c.resources.linux_resources.cpuset_cgroup,
                           "memory_limit_bytes": c.resources.linux_resources.memory_limit_bytes,
                           "env_keys": sorted(c.env.keys())}
            if opts.crash_on_start:
                record("call", crashed=True, **base_fields)
                panic("crash-on-start requested")
            if opts.start_error:
                msg = opts.start_error_message or "start refused: simulated %s failure" % (
                    "retryable" if opts.start_error == "retry" else "fatal")
                record("call", error=msg, recoverable=opts.start_error == "retry", **base_fields)
                context.abort_with_status(RecoverableStatus(pb, msg, opts.start_error == "retry"))
            if drv.get(c.id):
                record("call", error="duplicate", **base_fields)
                fail(context, 'task with ID "%s" already started' % c.id)
            try:
                decoded, cfg = decode_task_config(c.msgpack_driver_config)
            except DecodeError as e:
                record("call", error=str(e), **base_fields)
                fail(context, "failed to decode driver config: %s" % e)
            base_fields["decoded"] = decoded
            max_tasks = drv.config.get("max_tasks") if isinstance(drv.config, dict) else None
            if isinstance(max_tasks, int) and sum(1 for t in list(drv.tasks.values()) if t.running()) >= max_tasks:
                record("call", error="max_tasks", **base_fields)
                fail(context, "max_tasks (%d) reached" % max_tasks)
            env = dict(c.env) if c.env else {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
            env.update(c.device_env)
            cwd = cfg["options"]["workdir"]
            if not cwd and c.alloc_dir:
                cwd = os.path.join(c.alloc_dir, c.name)
            if not cwd or not os.path.isdir(cwd):
                cwd = env.get("NOMAD_TASK_DIR") if os.path.isdir(env.get("NOMAD_TASK_DIR", "")) else "/"
            popen_user = {}
            if c.user:
                try:
                    pw = pwd.getpwnam(c.user) if not c.user.isdigit() else pwd.getpwuid(int(c.user))
                except KeyError:
                    record("call", error="user", **base_fields)
                    fail(context, 'failed to identify user "%s": unknown user' % c.user)
                if os.geteuid() == 0:
                    popen_user = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
                elif pw.pw_uid != os.geteuid():
                    record("call", error="user", **base_fields)
                    fail(context, 'cannot run the task as user "%s": the plugin runs as uid %d' % (c.user, os.geteuid()))
            try:
                out = os.open(c.stdout_path or "/dev/null", os.O_WRONLY | os.O_CLOEXEC)
                err = os.open(c.stderr_path or "/dev/null", os.O_WRONLY | os.O_CLOEXEC)
            except OSError as e:
                record("call", error=str(e), **base_fields)
                fail(context, "failed to open the task's output: %s" % e)
            try:
                if cfg["greeting"]:
                    os.write(out, (cfg["greeting"] + "\n").encode())
                procs = cgroup_procs(c.resources.linux_resources.cpuset_cgroup)

                def join_cgroup():
                    if procs:
                        with open(procs, "w") as f:
                            f.write("0")
                argv = [cfg["command"]] + cfg["args"]
                try:
                    child = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=err, start_new_session=True, close_fds=True,
                                             preexec_fn=join_cgroup if procs else None, **popen_user)
                except OSError as e:
                    record("call", error=str(e), **base_fields)
                    fail(context, "failed to launch command with executor: %s" % e)
            finally:
                os.close(out)
                os.close(err)
            started = time.time_ns()
            st = proc_start_time(child.pid)
            task = Task(c.id, c.name, c, child.pid, st, started, child=child)
            task.stop_signal = cfg["options"]["stop_signal"]
            task.env, task.cwd = env, cwd
            with drv.lock:
                drv.tasks[c.id] = task
            if opts.crash_after_spawn:
                record("call", crashed=True, spawned_pid=child.pid, **base_fields)
                panic("crash-after-spawn requested")
            drv.watch_child(task)
            hclog("info", "starting task", task_id=c.id, pid=child.pid, command=cfg["command"])
            drv.emit(task, "pydriver started pid %d" % child.pid, pid=child.pid)
            state = {"Pid": child.pid, "StartTime": st, "StartedAt": started, "TaskID": c.id, "Name": c.name,
                     "Command": argv, "StopSignal": task.stop_signal, "Cwd": cwd, "PluginPid": os.getpid()}
            import msgpack
            handle = drv_pb.TaskHandle(version=1, config=c, state=drv_pb.RUNNING,
                                       driver_state=msgpack.packb(state, use_bin_type=True))
            record("call", spawned_pid=child.pid, took_ns=time.monotonic_ns() - t_in,
                   driver_state=handle.driver_state.hex(), **base_fields)
            # A DriverNetwork, as Docker's driver answers with its port_map:
            # the config's port_map blocks, at the loopback address.
            if cfg["port_map"]:
                net = drv_pb.NetworkOverride(addr="127.0.0.1",
                                             port_map={p["label"]: int(p["port"] or 0) for p in cfg["port_map"]})
                return drv_pb.StartTaskResponse(handle=handle, network_override=net)
            return drv_pb.StartTaskResponse(handle=handle)

        @counted
        def RecoverTask(self, request, context):
            import msgpack
            opts = options()
            if not request.HasField("handle"):
                record("call", rpc="RecoverTask", error="nil handle")
                fail(context, "error: handle cannot be nil")
            h = request.handle
            task_id = request.task_id or h.config.id
            fields = {"rpc": "RecoverTask", "task_id": task_id, "request_task_id": request.task_id,
                      "handle_version": h.version, "handle_state": int(h.state),
                      "driver_state": h.driver_state.hex()}
            if drv.get(task_id):
                record("call", result="known", **fields)
                return drv_pb.RecoverTaskResponse()
            if opts.no_recover:
                record("call", error="no-recover", **fields)
                fail(context, "failed to recover task: simulated (--no-recover)")
            try:
                state = msgpack.unpackb(h.driver_state, raw=False)
                pid, st = int(state["Pid"]), state.get("StartTime")
            except Exception as e:  # noqa: BLE001
                record("call", error="bad state", **fields)
                fail(context, "failed to decode task state from handle: %s" % e)
            if not proc_alive(pid, st):
                record("call", error="gone", pid=pid, **fields)
                fail(context, "failed to recover task: process %d is gone" % pid)
            task = Task(task_id, h.config.name, h.config, pid, st, int(state.get("StartedAt", 0)), adopted=True)
            task.stop_signal = state.get("StopSignal", "")
            task.env, task.cwd = dict(h.config.env), state.get("Cwd", "/")
            with drv.lock:
                drv.tasks[task_id] = task
            drv.watch_adopted(task)
            record("call", result="recovered", recovered_pid=pid, **fields)
            hclog("info", "recovered task", task_id=task_id, pid=pid)
            drv.emit(task, "pydriver recovered pid %d" % pid, pid=pid)
            return drv_pb.RecoverTaskResponse()

        @counted
        def WaitTask(self, request, context):
            record("call", rpc="WaitTask", task_id=request.task_id)
            t = drv.get(request.task_id)
            if not t:
                fail(context, ERR_NOT_FOUND)
            while not t.exited.wait(0.2):
                if not context.is_active():
                    fail(context, "context canceled", grpc.StatusCode.CANCELLED)
            record("wait_done", task_id=t.id, exit_code=t.exit_code, signal=t.signal, err=t.err)
            return drv_pb.WaitTaskResponse(result=drv_pb.ExitResult(exit_code=t.exit_code, signal=t.signal),
                                           err=t.err)

        @counted
        def StopTask(self, request, context):
            timeout = request.timeout.seconds + request.timeout.nanos / 1e9
            record("call", rpc="StopTask", task_id=request.task_id, signal=request.signal, timeout_s=timeout)
            t = drv.get(request.task_id)
            if not t:
                fail(context, ERR_NOT_FOUND)
            if not t.running():
                return drv_pb.StopTaskResponse()
            try:
                sig = signal_number(request.signal or t.stop_signal, signal.SIGTERM)
            except ValueError as e:
                fail(context, str(e))
            kill_group(t.pid, sig)
            if not t.exited.wait(timeout):
                kill_group(t.pid, signal.SIGKILL)
                t.exited.wait(10)
            return drv_pb.StopTaskResponse()

        @counted
        def DestroyTask(self, request, context):
            record("call", rpc="DestroyTask", task_id=request.task_id, force=request.force)
            t = drv.get(request.task_id)
            if not t:
                fail(context, ERR_NOT_FOUND)
            if t.running():
                if not request.force:
                    fail(context, "cannot destroy running task")
                kill_group(t.pid, signal.SIGKILL)
                t.exited.wait(10)
            with drv.lock:
                drv.tasks.pop(t.id, None)
            return drv_pb.DestroyTaskResponse()

        @counted
        def InspectTask(self, request, context):
            record("call", rpc="InspectTask", task_id=request.task_id)
            t = drv.get(request.task_id)
            if not t:
                fail(context, ERR_NOT_FOUND)
            st = drv_pb.TaskStatus(id=t.id, name=t.name, state=drv_pb.RUNNING if t.running() else drv_pb.EXITED,
                                   result=drv_pb.ExitResult(exit_code=t.exit_code, signal=t.signal))
            st.started_at.seconds, st.started_at.nanos = t.started_at_ns // 10**9, t.started_at_ns % 10**9
            if t.completed_at_ns:
                st.completed_at.seconds, st.completed_at.nanos = t.completed_at_ns // 10**9, t.completed_at_ns % 10**9
            return drv_pb.InspectTaskResponse(task=st, driver=drv_pb.TaskDriverStatus(
                attributes={"pid": str(t.pid), "adopted": str(t.adopted).lower()}))

        @counted
        def TaskStats(self, request, context):
            interval = request.collection_interval.seconds + request.collection_interval.nanos / 1e9
            record("call", rpc="TaskStats", task_id=request.task_id, interval_s=interval)
            t = drv.get(request.task_id)
            if not t:
                fail(context, ERR_NOT_FOUND)
            interval = interval if interval > 0 else 1.0
            last = None
            while context.is_active() and t.running():
                now_ns = time.time_ns()
                usage, last = sample_usage(pb, t.pid, last)
                stats = drv_pb.TaskStats(id=t.id, agg_resource_usage=usage)
                stats.resource_usage_by_pid[str(t.pid)].CopyFrom(usage)
                stats.timestamp.seconds, stats.timestamp.nanos = now_ns // 10**9, now_ns % 10**9
                yield drv_pb.TaskStatsResponse(stats=stats)
                deadline = time.monotonic() + interval
                while context.is_active() and t.running() and time.monotonic() < deadline:
                    time.sleep(min(0.1, interval))

        @counted
        def SignalTask(self, request, context):
            record("call", rpc="SignalTask", task_id=request.task_id, signal=request.signal)
            t = drv.get(request.task_id)
            if not t:
                fail(context, ERR_NOT_FOUND)
            try:
                sig = signal_number(request.signal, None)
            except ValueError as e:
                fail(context, str(e))
            if sig is None:
                fail(context, "no signal given")
            try:
                os.kill(t.pid, sig)  # the task's process, as Nomad's executors do
            except ProcessLookupError:
                fail(context, "os: process already finished")
            return drv_pb.SignalTaskResponse()

        @counted
        def ExecTask(self, request, context):
            record("call", rpc="ExecTask", task_id=request.task_id, command=list(request.command))
            if not options().exec_:
                fail(context, "This driver does not support exec")
            t = drv.get(request.task_id)
            if not t:
                fail(context, ERR_NOT_FOUND)
            if not request.command:
                fail(context, "command is required")
            timeout = request.timeout.seconds + request.timeout.nanos / 1e9
            try:
                p = subprocess.run(list(request.command), cwd=t.cwd, env=t.env, stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=timeout if timeout > 0 else None,
                                   start_new_session=True)
            except subprocess.TimeoutExpired as e:
                return drv_pb.ExecTaskResponse(stdout=e.stdout or b"", stderr=e.stderr or b"",
                                               result=drv_pb.ExitResult(exit_code=128 + 9, signal=9))
            except OSError as e:
                fail(context, "failed to exec: %s" % e)
            code, sig = (p.returncode, 0) if p.returncode >= 0 else (128 - p.returncode, -p.returncode)
            return drv_pb.ExecTaskResponse(stdout=p.stdout, stderr=p.stderr,
                                           result=drv_pb.ExitResult(exit_code=code, signal=sig))

        @counted
        def ExecTaskStreaming(self, request_iterator, context):
            first = next(request_iterator, None)
            if first is None or not first.HasField("setup"):
                record("call", rpc="ExecTaskStreaming", error="no setup")
                fail(context, "first message should always be setup")
            setup = first.setup
            record("call", rpc="ExecTaskStreaming", task_id=setup.task_id, command=list(setup.command), tty=setup.tty)
            if not options().exec_:
                fail(context, "driver does not support exec")
            t = drv.get(setup.task_id)
            if not t:
                fail(context, ERR_NOT_FOUND)
            try:
                p = subprocess.Popen(list(setup.command), cwd=t.cwd, env=t.env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            except OSError as e:
                fail(context, "failed to exec: %s" % e)
            out_q = queue.Queue()

            def pump(stream, which):
                for chunk in iter(lambda: os.read(stream.fileno(), 32768), b""):
                    out_q.put((which, chunk))
                out_q.put((which, None))

            def feed():
                for m in request_iterator:
                    if m.HasField("stdin"):
                        try:
                            if m.stdin.data:
                                p.stdin.write(m.stdin.data)
                                p.stdin.flush()
                            if m.stdin.close:
                                p.stdin.close()
                        except (OSError, ValueError):
                            pass
            for s, w in ((p.stdout, "stdout"), (p.stderr, "stderr")):
                threading.Thread(target=pump, args=(s, w), daemon=True).start()
            threading.Thread(target=feed, daemon=True).start()
            open_streams = 2
            IO = drv_pb.ExecTaskStreamingIOOperation
            while open_streams:
                which, chunk = out_q.get()
                if chunk is None:
                    open_streams -= 1
                    yield drv_pb.ExecTaskStreamingResponse(**{which: IO(close=True)})
                else:
                    yield drv_pb.ExecTaskStreamingResponse(**{which: IO(data=chunk)})
            rc = p.wait()
            code, sig = (rc, 0) if rc >= 0 else (128 - rc, -rc)
            yield drv_pb.ExecTaskStreamingResponse(exited=True, result=drv_pb.ExitResult(exit_code=code, signal=sig))

    class Controller(pb["goplugin_grpc"].GRPCControllerServicer):
        def Shutdown(self, request, context):
            record("call", rpc="GRPCController.Shutdown")
            hclog("debug", "plugin shutting down (GRPCController.Shutdown)")
            threading.Thread(target=server_stop, daemon=True).start()
            return pb["goplugin"].Empty()

    class Stdio(pb["goplugin_grpc"].GRPCStdioServicer):
        def StreamStdio(self, request, context):
            record("call", rpc="GRPCStdio.StreamStdio")
            while context.is_active():
                try:
                    channel, data = STDIO_QUEUE.get(timeout=0.2)
                except queue.Empty:
                    continue
                yield pb["goplugin"].StdioData(channel=channel, data=data)

    class Broker(pb["goplugin_grpc"].GRPCBrokerServicer):
        def StartStream(self, request_iterator, context):
            record("call", rpc="GRPCBroker.StartStream")
            for _ in request_iterator:  # Nomad's drivers open no sub-connections
                pass
            return
            yield  # noqa: unreachable - makes this a (server-streaming) generator

    class Health(pb["health_grpc"].HealthServicer):
        def Check(self, request, context):
            record("call", rpc="Health.Check", service=request.service)
            if request.service in ("", "plugin"):
                return pb["health"].HealthCheckResponse(status=pb["health"].HealthCheckResponse.SERVING)
            fail(context, "unknown service", grpc.StatusCode.NOT_FOUND)

    return Base(), Drv(), Controller(), Stdio(), Broker(), Health()


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    except PermissionError:
        pass


def cgroup_procs(path):
    """The cgroup.procs file to join for the task's cgroup, or None."""
    if not path:
        return None
    for cand in (path, os.path.join("/sys/fs/cgroup", path.lstrip("/"))):
        p = os.path.join(cand, "cgroup.procs")
        if os.path.isabs(cand) and os.path.exists(p):
            return p
    return None


TICKS = os.sysconf("SC_CLK_TCK")


def sample_usage(pb, pid, last):
    drv_pb = pb["drv"]
    rss = 0
    user = system = 0
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        user, system = int(rest[11]), int(rest[12])
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    now = time.monotonic()
    user_pct = system_pct = 0.0
    if last:
        dt = now - last[0]
        if dt > 0:
            user_pct = 100.0 * (user - last[1]) / TICKS / dt
            system_pct = 100.0 * (system - last[2]) / TICKS / dt
    cpu = drv_pb.CPUUsage(user_mode=user_pct, system_mode=system_pct, total_ticks=float(user + system),
                          percent=user_pct + system_pct,
                          measured_fields=[drv_pb.CPUUsage.USER_MODE, drv_pb.CPUUsage.SYSTEM_MODE,
                                           drv_pb.CPUUsage.TOTAL_TICKS, drv_pb.CPUUsage.PERCENT])
    mem = drv_pb.MemoryUsage(rss=rss, measured_fields=[drv_pb.MemoryUsage.RSS])
    return drv_pb.TaskResourceUsage(cpu=cpu, memory=mem), (now, user, system)


# ---- go-plugin's stdio: fd 1 and 2 become pipes served by StreamStdio -------------

STDIO_QUEUE = queue.Queue(maxsize=1)  # unbuffered, like go-plugin's channel


def take_over_stdio(goplugin_pb):
    global REAL_STDERR
    REAL_STDERR = os.dup(2)
    for fd, channel in ((1, goplugin_pb.StdioData.STDOUT), (2, goplugin_pb.StdioData.STDERR)):
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)

        def pump(r=r, channel=channel):
            while True:
                try:
                    data = os.read(r, 32768)
                except OSError:
                    return
                if not data:
                    return
                STDIO_QUEUE.put((channel, data))  # blocks while nobody streams
        threading.Thread(target=pump, daemon=True).start()
    # Python's own uncaught errors go where a Go panic goes: the real stderr.
    real = os.fdopen(os.dup(REAL_STDERR), "w", buffering=1)
    sys.excepthook = lambda t, v, tb: __import__("traceback").print_exception(t, v, tb, file=real)


def main():
    global OPTS
    OPTS = options()
    if os.environ.get(COOKIE_KEY) != COOKIE_VALUE:
        sys.stderr.write("This binary is a plugin. These are not meant to be executed directly.\n"
                         "Please execute the program that consumes these plugins, which will\n"
                         "load any plugins automatically\n")
        sys.exit(1)
    record("launch", t0_ns=T0_NS, argv=sys.argv[1:], socket_dir=os.environ.get("PLUGIN_UNIX_SOCKET_DIR", ""),
           protocol_versions=os.environ.get("PLUGIN_PROTOCOL_VERSIONS", ""),
           min_port=os.environ.get("PLUGIN_MIN_PORT", ""), max_port=os.environ.get("PLUGIN_MAX_PORT", ""),
           client_cert=bool(os.environ.get("PLUGIN_CLIENT_CERT")))
    # go-plugin ignores SIGINT (and logs it); hosts stop plugins otherwise.
    signal.signal(signal.SIGINT, lambda s, f: hclog("trace", "plugin received interrupt signal, ignoring"))
    signal.signal(signal.SIGTERM, on_sigterm)

    import grpc
    stubs_dir, pb = load_stubs(OPTS)
    versions = [v for v in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", "").split(",") if v.strip()]
    app_version = APP_PROTOCOL  # the only version Nomad's plugins serve (go-plugin falls back to it)
    if versions and str(APP_PROTOCOL) not in [v.strip() for v in versions]:
        hclog("warn", "host does not list our protocol version", host_versions=",".join(versions))

    sock_dir = os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or tempfile.gettempdir()
    fd, sock = tempfile.mkstemp(prefix="plugin", dir=sock_dir)
    os.close(fd)
    os.unlink(sock)

    done = threading.Event()
    drv = Driver(pb)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=256),
                         options=[("grpc.max_receive_message_length", 2**31 - 1),
                                  ("grpc.max_send_message_length", 2**31 - 1)])

    def stop():
        server.stop(0.5).wait()
        done.set()

    base, drvsvc, ctl, stdio, broker, health = build_services(pb, drv, stop)
    if not OPTS.netrpc:
        pb["base_grpc"].add_BasePluginServicer_to_server(base, server)
        pb["drv_grpc"].add_DriverServicer_to_server(drvsvc, server)
        pb["goplugin_grpc"].add_GRPCControllerServicer_to_server(ctl, server)
        pb["goplugin_grpc"].add_GRPCStdioServicer_to_server(stdio, server)
        pb["goplugin_grpc"].add_GRPCBrokerServicer_to_server(broker, server)
        pb["health_grpc"].add_HealthServicer_to_server(health, server)
    server.add_insecure_port("unix:" + sock)
    server.start()
    group = os.environ.get("PLUGIN_UNIX_SOCKET_GROUP")
    if group:
        import grp
        gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        os.chown(sock, -1, gid)
        os.chmod(sock, 0o660)
    hclog("debug", "plugin address", network="unix", address=sock)

    protocol = "netrpc" if OPTS.netrpc else "grpc"
    cert = ""
    if OPTS.mtls:  # base64 (no padding) of a DER certificate: what AutoMTLS puts there
        cert = base64.b64encode(b"\x30\x82\x01\x8a" + os.urandom(390)).decode().rstrip("=")
    line = "%d|%d|unix|%s|%s|%s\n" % (1, app_version, sock, protocol, cert)
    os.write(1, line.encode())
    record("handshake", line=line.strip(), socket=sock)
    take_over_stdio(pb["goplugin"])

    CLEANUP.extend([sock, stubs_dir if not (OPTS.stubs or os.environ.get("OUTPOST_TEST_NOMAD_STUBS")) else None])
    done.wait()  # until GRPCController.Shutdown (a host that just goes away leaves it running, as in go-plugin)
    record("exit", code=0, why="stopped")
    clean_up()
    os._exit(0)


CLEANUP = []


def clean_up():
    import shutil
    for path in CLEANUP:
        if not path:
            continue
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def on_sigterm(signum, frame):
    """Dies of the signal as a Go program does, after removing its socket and temp stubs."""
    record("exit", code=-signum, why="SIGTERM")
    clean_up()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    main()
