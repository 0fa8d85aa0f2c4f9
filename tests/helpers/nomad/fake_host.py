#!/usr/bin/python3
"""Plays a Nomad client against a Nomad task-driver plugin, as go-plugin's
host and Nomad's plugin loader and task runner drive one, and checks every
answer: the proof that test_nomad_driver.py behaves like a stock driver,
independent of outpost.

  fake_host.py [--plugin PATH] [--work DIR] [--stubs DIR] [--proto-dir DIR]

It launches the plugin several times, as Nomad does (the fingerprint launch:
PluginInfo and ConfigSchema; the validation launch: SetConfig twice without
nomad_config; the long-lived instance), then runs tasks through it: echo,
signals, stop, destroy, stats, events, exec, RecoverTask after a kill -9 of
the plugin, RecoverableError details, the misbehaviour knobs, refused
handshakes. One line per check, "ok ..." or "FAIL ...", and a summary;
exit status 1 on a failure.
"""

import argparse
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

COOKIE_KEY = "NOMAD_PLUGIN_MAGIC_COOKIE"
COOKIE_VALUE = "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255"
HERE = os.path.dirname(os.path.realpath(__file__))
PROTOS = ["google_protobuf.proto", "nomad_hcl_spec.proto", "nomad_structs.proto", "nomad_base.proto",
          "nomad_driver.proto", "goplugin.proto", "grpc_health.proto"]

failures = 0
passes = 0


def ok(what, detail=""):
    global passes
    passes += 1
    print("ok   %s%s" % (what, ": " + detail if detail else ""), flush=True)


def bad(what, detail):
    global failures
    failures += 1
    print("FAIL %s: %s" % (what, detail), flush=True)


def check(cond, what, detail="", why=""):
    if cond:
        ok(what, detail)
    else:
        bad(what, why or detail or "check failed")
    return cond


# ---- protobuf bits not worth a .proto: google.rpc.Status and Any -------------


def pb_fields(data):
    """(field number, wire type, value) of a protobuf message's fields."""
    i, out = 0, []

    def varint():
        nonlocal i
        shift = n = 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n
    while i < len(data):
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            out.append((num, wt, varint()))
        elif wt == 2:
            n = varint()
            out.append((num, wt, data[i:i + n]))
            i += n
        elif wt == 1:
            out.append((num, wt, data[i:i + 8]))
            i += 8
        elif wt == 5:
            out.append((num, wt, data[i:i + 4]))
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
    return out


def decode_status_details(trailers):
    """google.rpc.Status from grpc-status-details-bin: (code, message, [(type_url, value)])."""
    raw = dict(trailers or ()).get("grpc-status-details-bin")
    if raw is None:
        return None
    code, message, details = 0, "", []
    for num, _, v in pb_fields(raw):
        if num == 1:
            code = v
        elif num == 2:
            message = v.decode()
        elif num == 3:
            type_url, value = "", b""
            for n2, _, v2 in pb_fields(v):
                if n2 == 1:
                    type_url = v2.decode()
                elif n2 == 2:
                    value = v2
            details.append((type_url, value))
    return code, message, details


# ---- config encoding as Nomad's cty -> msgpack does (for the values used here) ---


def sorted_deep(v):
    if isinstance(v, dict):
        return {k: sorted_deep(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [sorted_deep(x) for x in v]
    return v


def cty_msgpack(v):
    import msgpack
    return msgpack.packb(sorted_deep(v), use_bin_type=True)


# ---- go-plugin's host side ---------------------------------------------------------


class Plugin:
    def __init__(self, pb, path, args, env=None, cookie=True, socket_dir=None):
        import grpc
        self.grpc = grpc
        self.pb = pb
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("PLUGIN_") or k == COOKIE_KEY:
                del e[k]
        if cookie:
            e[COOKIE_KEY] = COOKIE_VALUE
        e.update({"PLUGIN_PROTOCOL_VERSIONS": "2", "PLUGIN_MIN_PORT": "10000", "PLUGIN_MAX_PORT": "25000"})
        if socket_dir:
            e["PLUGIN_UNIX_SOCKET_DIR"] = socket_dir
        e.update(env or {})
        self.t_launch = time.monotonic()
        self.proc = subprocess.Popen([path] + args, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.stderr_lines = []
        self.stdio = {1: b"", 2: b""}
        self.channel = None
        self.line = None
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self):
        for raw in self.proc.stderr:
            self.stderr_lines.append(raw.decode(errors="replace").rstrip("\n"))

    def handshake(self, timeout=60):
        """The first stdout line, or an exception saying why there is none."""
        fd = self.proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("timeout while waiting for plugin to start")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    self.proc.wait(5)
                    raise RuntimeError("plugin exited before we could connect (exit status %s)" % self.proc.returncode)
                buf += chunk
        self.line = buf.split(b"\n", 1)[0].decode().strip()
        self.handshake_s = time.monotonic() - self.t_launch
        threading.Thread(target=self._drain_stdout, daemon=True).start()  # go-plugin discards later lines
        return self.line

    def _drain_stdout(self):
        while os.read(self.proc.stdout.fileno(), 65536):
            pass

    @staticmethod
    def refusal(line):
        """What go-plugin's host (as Nomad configures it) says of a handshake line, or None."""
        f = line.split("|")
        if len(f) < 4:
            return "Unrecognized remote plugin message: " + line
        if f[0] != "1":
            return "incompatible core API version with plugin"
        if f[1] != "2":
            return "incompatible API version with plugin"
        proto = f[4] if len(f) > 4 else "netrpc"
        if proto != "grpc":
            return 'unsupported plugin protocol "%s"' % proto
        if len(f) > 5 and len(f[5]) > 50:
            return "plugin sent a server certificate (AutoMTLS), which this host did not ask for"
        if f[2] != "unix":
            return "network " + f[2]
        return None

    def connect(self):
        grpc = self.grpc
        why = self.refusal(self.line)
        if why:
            raise RuntimeError(why)
        addr = self.line.split("|")[3]
        self.channel = grpc.insecure_channel("unix:" + addr, options=[
            ("grpc.max_receive_message_length", 2**31 - 1), ("grpc.max_send_message_length", 2**31 - 1),
            ("grpc.default_authority", "unused")])
        grpc.channel_ready_future(self.channel).result(timeout=10)
        pb = self.pb
        self.base = pb["base_grpc"].BasePluginStub(self.channel)
        self.drv = pb["drv_grpc"].DriverStub(self.channel)
        self.ctl = pb["goplugin_grpc"].GRPCControllerStub(self.channel)
        self.health = pb["health_grpc"].HealthStub(self.channel)
        stdio = pb["goplugin_grpc"].GRPCStdioStub(self.channel)
        broker = pb["goplugin_grpc"].GRPCBrokerStub(self.channel)
        self.stdio_call = stdio.StreamStdio(pb["gp"].Empty())
        threading.Thread(target=self._stdio, daemon=True).start()
        self.broker_done = threading.Event()

        def broker_requests():
            self.broker_done.wait()
            return
            yield
        self.broker_call = broker.StartStream(broker_requests())
        threading.Thread(target=lambda: [None for _ in self._safe(self.broker_call)], daemon=True).start()
        self.socket = addr
        return addr

    @staticmethod
    def _safe(it):
        try:
            for x in it:
                yield x
        except Exception:  # noqa: BLE001 - a stream ending with the plugin
            return

    def _stdio(self):
        for m in self._safe(self.stdio_call):
            self.stdio[int(m.channel)] = self.stdio.get(int(m.channel), b"") + m.data

    def kill(self):
        """go-plugin's Kill: GRPCController.Shutdown, close, wait 2 s, SIGKILL."""
        graceful = False
        if self.channel is not None:
            self.broker_done.set()
            try:
                self.ctl.Shutdown(self.pb["goplugin"].Empty(), timeout=2)
            except self.grpc.RpcError:
                pass
            self.channel.close()
        try:
            self.proc.wait(2)
            graceful = True
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return graceful


def load_stubs(args):
    where = args.stubs
    if not where or not os.path.exists(os.path.join(where, "nomad_driver_pb2_grpc.py")):
        from grpc_tools import protoc
        src = args.proto_dir or os.path.normpath(os.path.join(HERE, "..", "..", "..", "proto"))
        where = where or tempfile.mkdtemp(prefix="fake-host-stubs-")
        os.makedirs(where, exist_ok=True)
        rc = protoc.main(["protoc", "-I" + src, "--python_out=" + where, "--grpc_python_out=" + where] +
                         [os.path.join(src, p) for p in PROTOS])
        if rc != 0:
            sys.exit("protoc failed")
    sys.path.insert(0, where)
    import google_protobuf_pb2, goplugin_pb2, goplugin_pb2_grpc, grpc_health_pb2, grpc_health_pb2_grpc  # noqa
    import nomad_base_pb2, nomad_base_pb2_grpc, nomad_driver_pb2, nomad_driver_pb2_grpc  # noqa
    import nomad_hcl_spec_pb2, nomad_structs_pb2  # noqa
    return where, dict(gp=google_protobuf_pb2, goplugin=goplugin_pb2, goplugin_grpc=goplugin_pb2_grpc,
                       health=grpc_health_pb2, health_grpc=grpc_health_pb2_grpc, base=nomad_base_pb2,
                       base_grpc=nomad_base_pb2_grpc, drv=nomad_driver_pb2, drv_grpc=nomad_driver_pb2_grpc,
                       hcl=nomad_hcl_spec_pb2, structs=nomad_structs_pb2)


def spec_summary(spec):
    """An hclspec tree in one line, e.g. {command: string!, greeting: string = "Hello, World!"}."""
    kind = spec.WhichOneof("block")
    if kind == "object":
        return "{" + ", ".join("%s: %s" % (k, spec_summary(v)) for k, v in sorted(spec.object.attributes.items())) + "}"
    if kind == "Attr":
        return spec.Attr.type + ("!" if spec.Attr.required else "")
    if kind == "default_":
        return "%s = %s" % (spec_summary(spec.default_.primary), spec.default_.default_.literal.value)
    if kind == "block_value":
        return "block " + spec_summary(spec.block_value.nested)
    if kind == "block_list":
        return "blocks [" + spec_summary(spec.block_list.nested) + "]"
    return kind or "?"


# ---- a Nomad-like task ----------------------------------------------------------------


class Alloc:
    """An allocation dir as Nomad's client lays it out, with logmon's FIFOs and readers."""

    def __init__(self, root, task):
        self.dir = os.path.join(root, "alloc-%d" % int(time.monotonic_ns() % 10**9))
        for d, mode in (("alloc", 0o755), ("alloc/data", 0o777), ("alloc/logs", 0o777), ("alloc/tmp", 0o777),
                        (task, 0o777), (task + "/local", 0o777), (task + "/secrets", 0o777),
                        (task + "/tmp", 0o1777), (task + "/private", 0o777)):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
            os.chmod(os.path.join(self.dir, d), mode)
        self.task = task
        self.out = {}
        self.paths = {}
        for s in ("stdout", "stderr"):
            p = os.path.join(self.dir, "alloc", "logs", ".%s.%s.fifo" % (task, s))
            os.mkfifo(p, 0o600)
            self.paths[s] = p
            self.out[s] = b""
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)  # logmon's reader, before StartTask
            threading.Thread(target=self._read, args=(fd, s), daemon=True).start()

    def _read(self, fd, s):
        while True:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if data:
                    self.out[s] += data
                else:
                    time.sleep(0.02)  # no writer now; one may come

    def env(self, alloc_id):
        return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "NOMAD_ALLOC_DIR": os.path.join(self.dir, "alloc"),
                "NOMAD_TASK_DIR": os.path.join(self.dir, self.task, "local"),
                "NOMAD_SECRETS_DIR": os.path.join(self.dir, self.task, "secrets"),
                "NOMAD_ALLOC_ID": alloc_id, "NOMAD_TASK_NAME": self.task, "NOMAD_JOB_NAME": "fake",
                "NOMAD_GROUP_NAME": "g"}


def task_config(pb, alloc, name, config, alloc_id="8c3b5d1e-0000-4000-8000-000000000001"):
    drv = pb["drv"]
    c = drv.TaskConfig(id="%s/%s/%08x" % (alloc_id, name, int(time.monotonic_ns()) & 0xFFFFFFFF), name=name,
                       msgpack_driver_config=cty_msgpack(config), env=alloc.env(alloc_id), alloc_dir=alloc.dir,
                       stdout_path=alloc.paths["stdout"], stderr_path=alloc.paths["stderr"], task_group_name="g",
                       job_name="fake", job_id="fake", namespace_="default", alloc_id=alloc_id,
                       node_name="fake-node", node_id="fake-node-id")
    c.resources.allocated_resources.cpu.cpu_shares = 100
    c.resources.allocated_resources.memory.memory_mb = 64
    c.resources.linux_resources.cpu_shares = 100
    c.resources.linux_resources.memory_limit_bytes = 64 << 20
    return c


def cfg(command, args=(), **extra):
    """A task config as Nomad's hcldec makes it from the schema: every attribute present."""
    v = {"command": command, "args": list(args), "greeting": "Hello, World!", "options": None, "port_map": []}
    v.update(extra)
    return v


def duration(pb, seconds):
    d = pb["gp"].Duration()
    d.seconds = int(seconds)
    d.nanos = int((seconds - int(seconds)) * 1e9)
    return d


def wait_until(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def rpc_error(fn):
    """Runs fn; the grpc.RpcError it raised, or None."""
    import grpc
    try:
        fn()
    except grpc.RpcError as e:
        return e
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", default=os.path.join(HERE, "test_nomad_driver.py"))
    ap.add_argument("--work")
    ap.add_argument("--stubs")
    ap.add_argument("--proto-dir")
    args = ap.parse_args()
    import grpc
    import msgpack
    work = args.work or tempfile.mkdtemp(prefix="fake-host-")
    os.makedirs(work, exist_ok=True)
    args.stubs = args.stubs or os.path.join(work, "stubs")
    stubs, pb = load_stubs(args)
    base, drv = pb["base"], pb["drv"]
    control = os.path.join(work, "control")
    calls = os.path.join(work, "calls")
    sockets = os.path.join(work, "sockets")
    os.makedirs(sockets, exist_ok=True)
    open(control, "w").close()
    pargs = ["--control", control, "--calls", calls]
    penv = {"OUTPOST_TEST_NOMAD_STUBS": stubs}
    plugins = []

    def launch(extra=(), **kw):
        p = Plugin(pb, args.plugin, pargs + list(extra), env=penv, socket_dir=sockets, **kw)
        plugins.append(p)
        return p

    def set_control(text):
        with open(control, "w") as f:
            f.write(text)

    try:
        # -- the cookie
        p = launch(cookie=False)
        rc = p.proc.wait(30)
        time.sleep(0.1)
        check(rc == 1 and any("This binary is a plugin" in l for l in p.stderr_lines), "no magic cookie: refused",
              "exit %d, stderr %r" % (rc, p.stderr_lines[0] if p.stderr_lines else ""))

        # -- launch 1: what Nomad's loader asks of every binary
        p = launch()
        line = p.handshake()
        f = line.split("|")
        check(len(f) == 6 and f[:3] == ["1", "2", "unix"] and f[4] == "grpc" and f[5] == "" and
              os.path.dirname(f[3]) == sockets, "handshake line", "%s (%.2f s after launch)" % (line, p.handshake_s))
        p.connect()
        h = p.health.Check(pb["health"].HealthCheckRequest(service="plugin"), timeout=5)
        check(h.status == pb["health"].HealthCheckResponse.SERVING, "grpc.health.v1 Check(\"plugin\")", "SERVING")
        info = p.base.PluginInfo(base.PluginInfoRequest(), timeout=5)
        check(info.type == base.DRIVER and info.name == "pydriver" and list(info.plugin_api_versions) == ["v0.1.0"],
              "PluginInfo", "type DRIVER name %s api %s version %s" % (info.name, list(info.plugin_api_versions),
                                                                          info.plugin_version))
        cs = p.base.ConfigSchema(base.ConfigSchemaRequest(), timeout=5)
        check(cs.spec.object.attributes["shell"].default_.default_.literal.value == '"bash"', "ConfigSchema",
              spec_summary(cs.spec))
        check(p.kill(), "GRPCController.Shutdown: the plugin exits within 2 s",
              "exit status %s, socket removed: %s" % (p.proc.returncode, not os.path.exists(p.socket)))

        # -- launch 2: validation (SetConfig twice, no nomad_config)
        p = launch()
        p.handshake()
        p.connect()
        plugin_cfg = cty_msgpack({"max_tasks": None, "shell": "bash"})
        for i in (1, 2):
            p.base.SetConfig(base.SetConfigRequest(msgpack_config=plugin_cfg, plugin_api_version="v0.1.0"), timeout=5)
        ok("SetConfig x2 without nomad_config", "msgpack %s" % plugin_cfg.hex())
        e = rpc_error(lambda: p.base.SetConfig(base.SetConfigRequest(
            msgpack_config=cty_msgpack({"max_tasks": None, "shell": "zsh"}), plugin_api_version="v0.1.0"), timeout=5))
        check(e is not None and e.code() == grpc.StatusCode.UNKNOWN and e.details() == 'invalid shell "zsh"',
              "SetConfig refused by the plugin", "%s %r" % (e.code().name, e.details()) if e else "accepted")
        e = rpc_error(lambda: p.base.SetConfig(base.SetConfigRequest(plugin_api_version="v0.1.0"), timeout=5))
        check(e is not None and 'invalid shell ""' in e.details(),
              "SetConfig with no config at all (the skeleton's trap)", e.details() if e else "accepted")
        p.kill()

        # -- launch 3: the long-lived instance
        p = launch()
        p.handshake()
        p.connect()
        nc = base.NomadConfig(driver=base.NomadDriverConfig(ClientMinPort=14000, ClientMaxPort=14512))
        p.base.SetConfig(base.SetConfigRequest(msgpack_config=plugin_cfg, nomad_config=nc,
                                               plugin_api_version="v0.1.0"), timeout=5)
        e = rpc_error(lambda: p.drv.Init(drv.InitRequest(), timeout=5))
        check(e is not None and e.code() == grpc.StatusCode.UNIMPLEMENTED, "Driver.Init",
              "UNIMPLEMENTED (tolerated, as Nomad does)" if e else "answered")
        fp_stream = p.drv.Fingerprint(drv.FingerprintRequest())
        t = time.monotonic()
        fp = next(fp_stream)
        check(fp.health == drv.FingerprintResponse.HEALTHY and
              fp.attributes["driver.pydriver.version"].string_val == "0.1.0", "Fingerprint: first message",
              "%s %r attributes %s after %.0f ms" % (drv.FingerprintResponse.HealthState.Name(fp.health),
                                                     fp.health_description,
                                                     {k: v.string_val for k, v in sorted(fp.attributes.items())},
                                                     (time.monotonic() - t) * 1000))
        events = queue.Queue()
        ev_stream = p.drv.TaskEvents(drv.TaskEventsRequest())
        threading.Thread(target=lambda: [events.put(x) for x in Plugin._safe(ev_stream)], daemon=True).start()
        caps = p.drv.Capabilities(drv.CapabilitiesRequest(), timeout=5).capabilities
        check(caps.send_signals and not caps.exec, "Capabilities",
              "send_signals %s exec %s fs_isolation %s" % (caps.send_signals, caps.exec,
                                                           drv.DriverCapabilities.FSIsolation.Name(caps.fs_isolation)))
        ts = p.drv.TaskConfigSchema(drv.TaskConfigSchemaRequest(), timeout=5)
        check(ts.spec.object.attributes["command"].Attr.required, "TaskConfigSchema", spec_summary(ts.spec))

        # a task that prints and exits
        a = Alloc(work, "echo")
        c = task_config(pb, a, "echo", cfg("/bin/echo", ["hi"]))
        r = p.drv.StartTask(drv.StartTaskRequest(task=c), timeout=10)
        state = msgpack.unpackb(r.handle.driver_state, raw=False)
        check(r.handle.config.id == c.id and r.handle.state == drv.RUNNING and state["Pid"] > 0,
              "StartTask /bin/echo hi", "handle version %d, driver_state %s" % (
                  r.handle.version, {k: state[k] for k in ("Pid", "StartTime", "Cwd")}))
        w = p.drv.WaitTask(drv.WaitTaskRequest(task_id=c.id), timeout=10)
        check(w.result.exit_code == 0 and not w.err, "WaitTask", "exit_code %d signal %d err %r" % (
            w.result.exit_code, w.result.signal, w.err))
        wait_until(lambda: b"hi\n" in a.out["stdout"], 5)
        check(a.out["stdout"] == b"Hello, World!\nhi\n", "the task's stdout FIFO", repr(a.out["stdout"]))
        ins = p.drv.InspectTask(drv.InspectTaskRequest(task_id=c.id), timeout=5)
        check(ins.task.state == drv.EXITED, "InspectTask after the exit", "state EXITED, pid %s" %
              ins.driver.attributes["pid"])
        p.drv.DestroyTask(drv.DestroyTaskRequest(task_id=c.id), timeout=5)
        e = rpc_error(lambda: p.drv.DestroyTask(drv.DestroyTaskRequest(task_id=c.id), timeout=5))
        check(e is not None and e.details() == "task not found for given id", "DestroyTask, twice",
              "second: %s %r" % (e.code().name, e.details()) if e else "second succeeded")

        # the greeting and a ${...}-free decode of every config shape
        a2 = Alloc(work, "cfg")
        c2 = task_config(pb, a2, "cfg", cfg("/bin/sh", ["-c", "pwd"], greeting="howdy",
                                                options={"ratio": 1.5, "stop_signal": "SIGINT", "workdir": None},
                                                port_map=[{"label": "http", "port": 8080}]))
        p.drv.StartTask(drv.StartTaskRequest(task=c2), timeout=10)
        p.drv.WaitTask(drv.WaitTaskRequest(task_id=c2.id), timeout=10)
        wait_until(lambda: a2.out["stdout"].count(b"\n") >= 2, 5)
        check(a2.out["stdout"] == b"howdy\n" + os.path.join(a2.dir, "cfg").encode() + b"\n",
              "blocks, block lists, a float: decoded; the task runs in its task dir", repr(a2.out["stdout"]))
        c3 = task_config(pb, a2, "cfg2", cfg("/bin/true", options={"ratio": "0.1", "stop_signal": None,
                                                                   "workdir": None}))
        e = rpc_error(lambda: p.drv.StartTask(drv.StartTaskRequest(task=c3), timeout=10))
        check(e is not None and "cannot decode str '0.1' into a float64 field" in e.details(),
              "a number Nomad sends as a string (0.1) into a float field: refused as Go would",
              e.details() if e else "accepted")

        # signals, stats, inspect of a running task
        a = Alloc(work, "trap")
        c = task_config(pb, a, "trap", cfg("/bin/sh", ["-c", 'trap "exit 3" USR1; echo ready; '
                                                             'while :; do sleep 0.05; done']))
        r = p.drv.StartTask(drv.StartTaskRequest(task=c), timeout=10)
        pid = msgpack.unpackb(r.handle.driver_state, raw=False)["Pid"]
        wait_until(lambda: b"ready" in a.out["stdout"], 5)
        ins = p.drv.InspectTask(drv.InspectTaskRequest(task_id=c.id), timeout=5)
        check(ins.task.state == drv.RUNNING and ins.driver.attributes["pid"] == str(pid), "InspectTask while running",
              "RUNNING pid %d" % pid)
        st = next(p.drv.TaskStats(drv.TaskStatsRequest(task_id=c.id, collection_interval=duration(pb, 0.2)),
                                  timeout=5))
        check(st.stats.agg_resource_usage.memory.rss > 0 and str(pid) in st.stats.resource_usage_by_pid,
              "TaskStats: first sample", "rss %d bytes, total_ticks %.0f" % (
                  st.stats.agg_resource_usage.memory.rss, st.stats.agg_resource_usage.cpu.total_ticks))
        e = rpc_error(lambda: p.drv.DestroyTask(drv.DestroyTaskRequest(task_id=c.id), timeout=5))
        check(e is not None and e.details() == "cannot destroy running task", "DestroyTask of a running task",
              e.details() if e else "succeeded")
        p.drv.SignalTask(drv.SignalTaskRequest(task_id=c.id, signal="SIGUSR1"), timeout=5)
        w = p.drv.WaitTask(drv.WaitTaskRequest(task_id=c.id), timeout=10)
        check(w.result.exit_code == 3, "SignalTask SIGUSR1 reaches the task's trap", "exit_code %d" %
              w.result.exit_code)
        p.drv.DestroyTask(drv.DestroyTaskRequest(task_id=c.id), timeout=5)

        # stop: signal, timeout, 128+signo as Nomad's executor reports
        a = Alloc(work, "sleep")
        c = task_config(pb, a, "sleep", cfg("/bin/sleep", ["300"]))
        p.drv.StartTask(drv.StartTaskRequest(task=c), timeout=10)
        p.drv.StopTask(drv.StopTaskRequest(task_id=c.id, signal="SIGTERM", timeout=duration(pb, 2)), timeout=10)
        w = p.drv.WaitTask(drv.WaitTaskRequest(task_id=c.id), timeout=10)
        check(w.result.exit_code == 143 and w.result.signal == 15, "StopTask SIGTERM", "exit_code %d signal %d" % (
            w.result.exit_code, w.result.signal))
        p.drv.DestroyTask(drv.DestroyTaskRequest(task_id=c.id), timeout=5)
        e = rpc_error(lambda: p.drv.ExecTask(drv.ExecTaskRequest(task_id=c.id, command=["true"]), timeout=5))
        check(e is not None and e.details() == "This driver does not support exec", "ExecTask without the capability",
              e.details() if e else "ran")
        seen = []
        while not events.empty():
            seen.append(events.get().message)
        check(any(m.startswith("pydriver started pid") for m in seen), "TaskEvents stream",
              "%d events, e.g. %r" % (len(seen), seen[0] if seen else None))

        # -- the plugin dies with a task running: relaunch, RecoverTask, WaitTask again
        a = Alloc(work, "long")
        c = task_config(pb, a, "long", cfg("/bin/sleep", ["300"]))
        r = p.drv.StartTask(drv.StartTaskRequest(task=c), timeout=10)
        handle = r.handle
        pid = msgpack.unpackb(handle.driver_state, raw=False)["Pid"]
        waiting = p.drv.WaitTask.future(drv.WaitTaskRequest(task_id=c.id))
        os.kill(p.proc.pid, signal.SIGKILL)
        p.proc.wait()
        e = waiting.exception(timeout=10)
        check(e is not None and e.code() == grpc.StatusCode.UNAVAILABLE,
              "kill -9 of the plugin: the blocked WaitTask fails", "%s (Nomad: plugin is shut down)" %
              (e.code().name if e else "none"))
        check(os.path.exists("/proc/%d" % pid), "the task survives its plugin", "pid %d" % pid)
        p = launch()
        p.handshake()
        p.connect()
        p.base.SetConfig(base.SetConfigRequest(msgpack_config=plugin_cfg, nomad_config=nc,
                                               plugin_api_version="v0.1.0"), timeout=5)
        p.drv.RecoverTask(drv.RecoverTaskRequest(handle=handle), timeout=5)  # task_id empty, as Nomad sends it
        ins = p.drv.InspectTask(drv.InspectTaskRequest(task_id=c.id), timeout=5)
        check(ins.task.state == drv.RUNNING and ins.driver.attributes["pid"] == str(pid),
              "RecoverTask (task_id empty, the handle from StartTask) in a new instance", "pid %d adopted" % pid)
        p.drv.RecoverTask(drv.RecoverTaskRequest(handle=handle), timeout=5)
        ok("RecoverTask of a task it already has", "no error")
        waiting = p.drv.WaitTask.future(drv.WaitTaskRequest(task_id=c.id))
        p.drv.StopTask(drv.StopTaskRequest(task_id=c.id, signal="SIGTERM", timeout=duration(pb, 2)), timeout=10)
        w = waiting.result(timeout=10)
        check(w.result.exit_code == -1 and w.err.startswith("exit status unknown"), "a recovered task's exit",
              "exit_code %d err %r" % (w.result.exit_code, w.err))
        p.drv.DestroyTask(drv.DestroyTaskRequest(task_id=c.id), timeout=5)
        e = rpc_error(lambda: p.drv.RecoverTask(drv.RecoverTaskRequest(handle=handle), timeout=5))
        check(e is not None and "is gone" in e.details(), "RecoverTask of a task whose process is gone",
              e.details() if e else "recovered")
        e = rpc_error(lambda: p.drv.RecoverTask(drv.RecoverTaskRequest(), timeout=5))
        check(e is not None and e.details() == "error: handle cannot be nil", "RecoverTask without a handle",
              e.details() if e else "recovered")

        # -- --no-recover: a live task the new instance cannot take
        c = task_config(pb, a, "long2", cfg("/bin/sleep", ["300"]))
        handle = p.drv.StartTask(drv.StartTaskRequest(task=c), timeout=10).handle
        pid = msgpack.unpackb(handle.driver_state, raw=False)["Pid"]
        set_control("--no-recover")
        os.kill(p.proc.pid, signal.SIGKILL)
        p.proc.wait()
        p = launch()
        p.handshake()
        p.connect()
        e = rpc_error(lambda: p.drv.RecoverTask(drv.RecoverTaskRequest(handle=handle), timeout=5))
        check(e is not None and e.code() == grpc.StatusCode.UNKNOWN and "simulated" in e.details(),
              "--no-recover (control file, read at the new launch)", e.details() if e else "recovered")
        e = rpc_error(lambda: p.drv.DestroyTask(drv.DestroyTaskRequest(task_id=c.id, force=True), timeout=5))
        check(e is not None and e.details() == "task not found for given id",
              "DestroyTask(force) of the lost task", e.details() if e else "destroyed")
        os.kill(pid, signal.SIGKILL)

        # -- StartTask errors: FAILED_PRECONDITION + RecoverableError, as Nomad's server.go sends them
        for mode, want in (("retry", True), ("fatal", False)):
            set_control("--start-error " + mode)
            c = task_config(pb, a, "err-" + mode, cfg("/bin/true"))
            e = rpc_error(lambda: p.drv.StartTask(drv.StartTaskRequest(task=c), timeout=10))
            det = decode_status_details(e.trailing_metadata()) if e else None
            rec = None
            if det and det[2] and det[2][0][0].endswith("/hashicorp.nomad.plugins.shared.structs.RecoverableError"):
                rec = pb["structs"].RecoverableError.FromString(det[2][0][1]).recoverable
            check(e is not None and e.code() == grpc.StatusCode.FAILED_PRECONDITION and det and det[0] == 9
                  and rec is want, "StartTask --start-error %s" % mode,
                  "%s %r; grpc-status-details-bin: Status{code %s, details [%s value %s]} -> recoverable=%s" % (
                      e.code().name, e.details(), det[0], det[2][0][0], det[2][0][1].hex() or "(empty)", rec)
                  if e and det else repr(e))

        # -- exec, when the control file turns it on
        set_control("--exec")
        caps = p.drv.Capabilities(drv.CapabilitiesRequest(), timeout=5).capabilities
        c = task_config(pb, a, "ex", cfg("/bin/sleep", ["300"]))
        p.drv.StartTask(drv.StartTaskRequest(task=c), timeout=10)
        x = p.drv.ExecTask(drv.ExecTaskRequest(task_id=c.id, command=["/bin/sh", "-c", "echo in-task $NOMAD_TASK_NAME; exit 4"],
                                               timeout=duration(pb, 5)), timeout=10)
        check(caps.exec and x.stdout == b"in-task long\n" and x.result.exit_code == 4,
              "ExecTask with --exec", "stdout %r exit_code %d" % (x.stdout, x.result.exit_code))

        def exec_requests():
            S = drv.ExecTaskStreamingRequest
            yield S(setup=S.Setup(task_id=c.id, command=["/bin/cat"]))
            yield S(stdin=drv.ExecTaskStreamingIOOperation(data=b"ping\n"))
            yield S(stdin=drv.ExecTaskStreamingIOOperation(close=True))
        got, result = b"", None
        for m in p.drv.ExecTaskStreaming(exec_requests(), timeout=10):
            got += m.stdout.data
            if m.exited:
                result = m.result
        check(got == b"ping\n" and result is not None and result.exit_code == 0, "ExecTaskStreaming (cat)",
              "stdout %r exit_code %s" % (got, result.exit_code if result else None))
        p.drv.DestroyTask(drv.DestroyTaskRequest(task_id=c.id, force=True), timeout=10)

        # -- dies during StartTask
        set_control("--crash-on-start")
        c = task_config(pb, a, "crash", cfg("/bin/true"))
        e = rpc_error(lambda: p.drv.StartTask(drv.StartTaskRequest(task=c), timeout=10))
        rc = p.proc.wait(10)
        wait_until(lambda: any(l.startswith("panic: ") for l in p.stderr_lines), 2)
        check(e is not None and e.code() == grpc.StatusCode.UNAVAILABLE and rc == 2 and
              any(l.startswith("panic: crash-on-start") for l in p.stderr_lines), "--crash-on-start",
              "StartTask %s, plugin exit status %d, stderr %r" % (e.code().name if e else None, rc,
                                                                  [l for l in p.stderr_lines if "panic" in l][:1]))
        set_control("")

        # -- refused handshakes
        for knob, want in (("--netrpc", 'unsupported plugin protocol "netrpc"'), ("--mtls", "AutoMTLS")):
            q = launch([knob])
            line = q.handshake()
            why = Plugin.refusal(line)
            check(why is not None and want in why, "%s: the host refuses the handshake" % knob,
                  "%s -> %s" % (line if len(line) < 90 else line[:86] + "...", why))
            q.proc.kill()
            q.proc.wait()

        # -- --exit-after N: dies when its Nth call arrives
        set_control("--exit-after 2")
        q = launch()
        q.handshake()
        q.connect()
        q.base.PluginInfo(base.PluginInfoRequest(), timeout=5)
        e = rpc_error(lambda: q.base.ConfigSchema(base.ConfigSchemaRequest(), timeout=5))
        check(e is not None and q.proc.wait(10) == 2, "--exit-after 2", "second call: %s" % (
            e.code().name if e else "answered"))
        set_control("")

        # -- stdout through go-plugin's stdio stream, which a host must drain
        q = launch(["--stdout-flood", "256"])
        q.handshake()
        q.connect()
        t = time.monotonic()
        q.base.SetConfig(base.SetConfigRequest(msgpack_config=plugin_cfg, plugin_api_version="v0.1.0"), timeout=20)
        wait_until(lambda: b"pydriver stdout: configured" in q.stdio[1], 5)
        check(len(q.stdio[1]) >= 256 * 1000 and b"pydriver stdout: configured shell=bash" in q.stdio[1],
              "StreamStdio: the plugin's stdout (256 KiB, more than a pipe holds)",
              "%d bytes in %.0f ms" % (len(q.stdio[1]), (time.monotonic() - t) * 1000))
        check(any(l.startswith("{") and json.loads(l).get("@message") == "plugin configured" for l in q.stderr_lines),
              "hclog JSON on stderr", next((l for l in q.stderr_lines if "plugin configured" in l), ""))
        check(q.kill() and q.proc.returncode == 0, "GRPCController.Shutdown", "exit status 0")
    except Exception as e:  # noqa: BLE001 - report, then fail
        import traceback
        traceback.print_exc()
        bad("unexpected", repr(e))
    finally:
        for p in plugins:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()
        # Any task a check left behind.
        for line in open(calls) if os.path.exists(calls) else []:
            pid = json.loads(line).get("spawned_pid")
            if pid:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passes, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
