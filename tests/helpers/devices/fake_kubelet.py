#!/usr/bin/python3
"""Plays the kubelet's device manager and plugin watcher against
test_device_plugin.py and checks every answer: the proof that the test
plugin behaves like a stock device plugin, independent of outpost.

  fake_kubelet.py [--plugin PATH] [--work DIR] [--stubs DIR] [--proto-dir DIR]
                  [--mode kubelet-sock|registry|registry-same-socket]...

What it plays (the kubelet's behaviour, docs/devices.md and the upstream
device manager):
  * kubelet.sock: a v1beta1.Registration server in a device-plugins dir. A
    Register is checked as the kubelet checks it, with its error texts
    (version, then IsExtendedResourceName), then the plugin's socket (the
    dir joined with the endpoint as Go's filepath.Join does) is dialled,
    GetDevicePluginOptions called, the endpoint of the resource replaced,
    and ListAndWatch started. A kubelet restart: the server stops, its
    streams are cancelled, every socket in the dir is deleted and
    kubelet.sock is made again.
  * plugins_registry: sockets found in the dir (not dot-files) are dialled,
    GetInfo (1 s), the type's handler looked up (DevicePlugin only), the
    versions and name validated, the endpoint (or the registration socket
    when it is empty) dialled, GetDevicePluginOptions, ListAndWatch, then
    NotifyRegistrationStatus, with the kubelet's error texts when refused.
Then it drives the plugin as the kubelet's admission does
(GetPreferredAllocation, Allocate, PreStartContainer) and changes it through
its control file. One line per check, "ok ..." or "FAIL ...", and a
summary "N passed, M failed"; exit status 1 on a failure.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.realpath(__file__))
PROTOS = ["deviceplugin.proto", "pluginregistration.proto"]
MODES = ["kubelet-sock", "registry", "registry-same-socket"]

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


def wait_until(cond, timeout):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.02)


def go_quote(s):
    """Go's %q of a plain string (what the kubelet's messages use)."""
    return json.dumps(s)


def go_join(d, elem):
    """Go's filepath.Join(d, elem): an absolute elem is appended, then Clean."""
    return os.path.normpath(d.rstrip("/") + "/" + elem)


# The kubelet's IsExtendedResourceName: not native (has a '/', no
# kubernetes.io/), no "requests." prefix, and "requests." + name a
# qualified name (DNS-1123 subdomain prefix / name of at most 63).
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_extended_resource_name(name):
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, short = ("requests." + name).rpartition("/")
    if not short or len(short) > 63 or not QUALIFIED_NAME.match(short):
        return False
    return 0 < len(prefix) <= 253 and bool(DNS_SUBDOMAIN.match(prefix))


def load_stubs(args):
    where = args.stubs or tempfile.mkdtemp(prefix="fake-kubelet-stubs-")
    if not os.path.exists(os.path.join(where, "pluginregistration_pb2_grpc.py")):
        from grpc_tools import protoc
        src = args.proto_dir or os.path.normpath(os.path.join(HERE, "..", "..", "..", "proto"))
        os.makedirs(where, exist_ok=True)
        argv = ["protoc", "-I" + src, "--python_out=" + where, "--grpc_python_out=" + where]
        if protoc.main(argv + [os.path.join(src, p) for p in PROTOS]) != 0:
            sys.exit("cannot generate the stubs from %s" % src)
    sys.path.insert(0, where)
    import deviceplugin_pb2, deviceplugin_pb2_grpc, pluginregistration_pb2, pluginregistration_pb2_grpc  # noqa
    return where, deviceplugin_pb2, deviceplugin_pb2_grpc, pluginregistration_pb2, pluginregistration_pb2_grpc


class Kube:
    """The generated modules and grpc, for the classes below."""

    def __init__(self, mods):
        import grpc
        self.grpc = grpc
        _, self.pb, self.pb_grpc, self.reg, self.reg_grpc = mods


def dial(kube, path, timeout=10.0):
    """A channel to a unix socket, ready, or an error text. A socket nobody
    listens on fails at once (grpc-go would retry until its 10 s are out)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(path)
    except OSError as e:
        return None, "dial unix %s: connect: %s" % (path, e.strerror or e)
    finally:
        probe.close()
    ch = kube.grpc.insecure_channel("unix:" + path)
    try:
        kube.grpc.channel_ready_future(ch).result(timeout=timeout)
    except kube.grpc.FutureTimeoutError:
        ch.close()
        return None, "context deadline exceeded"
    return ch, None


class Endpoint:
    """A registered plugin: its channel, options and ListAndWatch stream."""

    def __init__(self, kube, resource, path, channel, opts):
        self.kube, self.resource, self.path, self.channel, self.options = kube, resource, path, channel, opts
        self.stub = kube.pb_grpc.DevicePluginStub(channel)
        self.lists = []  # every ListAndWatchResponse: [(id, health, [numa])]
        self.ended = threading.Event()
        self.end_error = None
        self.call = None

    def start(self):
        self.call = self.stub.ListAndWatch(self.kube.pb.Empty())
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        try:
            for resp in self.call:
                self.lists.append([(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in resp.devices])
        except self.kube.grpc.RpcError as e:
            self.end_error = "%s: %s" % (e.code().name, e.details())
        self.ended.set()

    def last(self):
        return self.lists[-1] if self.lists else None

    def stop(self):
        if self.call is not None:
            self.call.cancel()
        self.channel.close()


class Kubelet:
    """kubelet.sock and the device manager's registry of endpoints."""

    def __init__(self, kube, directory):
        self.kube, self.dir = kube, directory
        self.sock = os.path.join(directory, "kubelet.sock")
        self.server = None
        self.lock = threading.Lock()
        self.requests = []       # every RegisterRequest
        self.errors = []         # what Register answered, "" for success
        self.endpoints = {}      # resource -> the current Endpoint
        self.history = []        # every Endpoint, in order

    def start(self):
        os.makedirs(self.dir, mode=0o750, exist_ok=True)
        # Every socket in the dir goes (the signal to plugins that a new
        # kubelet is up); other files stay.
        for name in os.listdir(self.dir):
            p = os.path.join(self.dir, name)
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                os.unlink(p)
        kubelet = self
        kube = self.kube

        class Registration(kube.pb_grpc.RegistrationServicer):
            def Register(self, request, context):
                with kubelet.lock:
                    kubelet.requests.append(request)
                err = kubelet.register(request)
                with kubelet.lock:
                    kubelet.errors.append(err or "")
                if err:
                    context.abort(kube.grpc.StatusCode.UNKNOWN, err)
                return kube.pb.Empty()

        self.server = kube.grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        kube.pb_grpc.add_RegistrationServicer_to_server(Registration(), self.server)
        self.server.add_insecure_port("unix:" + self.sock)
        self.server.start()

    def register(self, req):
        if req.version != "v1beta1":
            return 'requested API version %s is not supported by kubelet. Supported version is ["v1beta1"]' % \
                go_quote(req.version)
        if not is_extended_resource_name(req.resource_name):
            return "the ResourceName %s is invalid" % go_quote(req.resource_name)
        return self.connect(req.resource_name, go_join(self.dir, req.endpoint), "failed to dial device plugin: ",
                            "failed to get device plugin options: ")

    def connect(self, resource, path, dial_prefix, options_prefix):
        ch, err = dial(self.kube, path)
        if err:
            return dial_prefix + err
        try:
            opts = self.kube.pb_grpc.DevicePluginStub(ch).GetDevicePluginOptions(self.kube.pb.Empty())
        except self.kube.grpc.RpcError as e:
            ch.close()
            return options_prefix + e.details()
        ep = Endpoint(self.kube, resource, path, ch, opts)
        with self.lock:
            self.endpoints[resource] = ep  # the newest registration wins
            self.history.append(ep)
        ep.start()
        return None

    def stop(self):
        if self.server:
            self.server.stop(None)
            self.server = None
        with self.lock:
            for ep in self.history:
                ep.stop()

    def restart(self):
        self.stop()
        self.start()

    def registrations(self, resource):
        with self.lock:
            return [ep for ep in self.history if ep.resource == resource]


class Watcher:
    """The plugin watcher on a plugins_registry dir (polled every 20 ms). A
    socket is registered once; again when it is made anew, or when it could
    not be dialled. "Made anew" is a new (inode, ctime): a socket deleted and
    bound again often gets the inode it had, and a poll may miss the moment
    it was gone."""

    def __init__(self, kube, kubelet, directory):
        self.kube, self.kubelet, self.dir = kube, kubelet, directory
        self.seen = set()  # (path, (inode, ctime_ns))
        self.infos = []    # (path, PluginInfo)
        self.notified = []  # (path, registered, error)
        self.stop_flag = threading.Event()

    def start(self):
        os.makedirs(self.dir, mode=0o750, exist_ok=True)
        threading.Thread(target=self.loop, daemon=True).start()

    def stop(self):
        self.stop_flag.set()

    def loop(self):
        while not self.stop_flag.is_set():
            for root, dirs, files in os.walk(self.dir):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                for name in files:
                    if name.startswith("."):
                        continue
                    p = os.path.join(root, name)
                    try:
                        st = os.lstat(p)
                    except FileNotFoundError:
                        continue
                    key = (st.st_ino, st.st_ctime_ns)
                    if not stat.S_ISSOCK(st.st_mode) or (p, key) in self.seen:
                        continue
                    self.seen.add((p, key))
                    threading.Thread(target=self.register, args=(p, key), daemon=True).start()
            time.sleep(0.02)

    def register(self, path, key):
        kube = self.kube
        ch, err = dial(kube, path)
        if err:
            # Found between bind and listen: tried again (the kubelet's
            # reconciler retries a failed registration).
            self.notified.append((path, None, "RegisterPlugin error -- dial failed at socket %s, err: %s" % (path, err)))
            time.sleep(0.1)
            self.seen.discard((path, key))
            return
        regstub = kube.reg_grpc.RegistrationStub(ch)
        try:
            info = regstub.GetInfo(kube.reg.InfoRequest(), timeout=1)
        except kube.grpc.RpcError as e:
            self.notified.append((path, None, "RegisterPlugin error -- failed to get plugin info using RPC GetInfo "
                                  "at socket %s, err: %s" % (path, e.details())))
            ch.close()
            return
        self.infos.append((path, info))
        err = None
        if info.type != "DevicePlugin":
            err = "RegisterPlugin error -- no handler registered for plugin type: %s at socket %s" % (info.type, path)
        elif "v1beta1" not in info.supported_versions:
            err = ("RegisterPlugin error -- plugin validation failed with err: manager version, v1beta1, is not "
                   "among plugin supported versions [%s]" % " ".join(info.supported_versions))
        elif not is_extended_resource_name(info.name):
            err = ("RegisterPlugin error -- plugin validation failed with err: invalid name of device plugin "
                   "socket: the ResourceName %s is invalid" % go_quote(info.name))
        else:
            e2 = self.kubelet.connect(info.name, info.endpoint or path, "", "")
            if e2:
                err = "RegisterPlugin error -- plugin registration failed with err: " + e2
        try:
            regstub.NotifyRegistrationStatus(kube.reg.RegistrationStatus(plugin_registered=err is None,
                                                                         error=err or ""), timeout=5)
        except kube.grpc.RpcError as e:
            err = (err or "") + " (NotifyRegistrationStatus: %s)" % e.details()
        self.notified.append((path, err is None, err))
        ch.close()


# ---- driving the plugin ----------------------------------------------------------


class Plugins:
    def __init__(self, args, work, stubs):
        self.args, self.work, self.stubs = args, work, stubs
        self.procs = []

    def launch(self, name, argv):
        calls = os.path.join(self.work, name + ".calls")
        control = os.path.join(self.work, name + ".control")
        for p in (calls, control):
            if os.path.exists(p):
                os.unlink(p)
        cmd = [sys.executable, self.args.plugin, "--calls", calls, "--control", control, "--stubs", self.stubs] + argv
        err = open(os.path.join(self.work, name + ".log"), "a")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        err.close()
        self.procs.append(proc)
        return proc

    def calls(self, name):
        path = os.path.join(self.work, name + ".calls")
        out = []
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
        return out

    def find(self, name, **want):
        return [c for c in self.calls(name) if all(c.get(k) == v for k, v in want.items())]

    def control(self, name, text):
        with open(os.path.join(self.work, name + ".control"), "w") as f:
            f.write(text)

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def devices(lst):
    return [(d, h) for d, h, _ in lst] if lst is not None else None


def rpc_error(fn):
    """(code name, details) of a failed call, or None when it succeeded."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - grpc.RpcError
        if hasattr(e, "code"):
            return e.code().name, e.details()
        raise
    return None


def run_kubelet_sock(kube, plugins, work):
    pb = kube.pb
    dpdir = os.path.join(work, "device-plugins")
    os.makedirs(dpdir, mode=0o750)
    kubelet = Kubelet(kube, dpdir)
    res = "example.com/dev"
    # The plugin first: it waits for kubelet.sock, as plugins started before
    # the kubelet do.
    args = ["--mode", "kubelet-sock", "--dir", dpdir, "--socket", "ks.sock", "--resource", res,
            "--devices", "dev0,dev1:Unhealthy@1", "--pre-start", "--preferred", "dev2,dev1,dev0",
            "--envs", "DEV_IDS={ids},STATIC=1", "--mounts", "/srv/{id}:/mnt/{id}:ro",
            "--device-nodes", "/dev/null:/dev/null:rw", "--annotations", "example.com/ids=ids-{ids}",
            "--cdi", "example.com/dev={id}"]
    proc = plugins.launch("ks", args)
    check(wait_until(lambda: plugins.find("ks", event="waiting_for_kubelet"), 20),
          "kubelet-sock: a plugin started before the kubelet waits for kubelet.sock")
    kubelet.start()
    try:
        ep = wait_until(lambda: kubelet.endpoints.get(res) and kubelet.endpoints[res].last() is not None and
                        kubelet.endpoints[res], 20)
        if not check(ep, "kubelet-sock: registers once kubelet.sock appears, ListAndWatch sends the list",
                     why="no registration: %s" % plugins.calls("ks")[-3:]):
            return
        req = kubelet.requests[0]
        check(req.version == "v1beta1" and req.endpoint == "ks.sock" and req.resource_name == res,
              "kubelet-sock: RegisterRequest{v1beta1, endpoint relative to the dir, resource}",
              "%s %s %s" % (req.version, req.endpoint, req.resource_name))
        check(ep.options.pre_start_required and ep.options.get_preferred_allocation_available and
              req.options.pre_start_required == ep.options.pre_start_required and
              req.options.get_preferred_allocation_available == ep.options.get_preferred_allocation_available,
              "kubelet-sock: GetDevicePluginOptions answered during Register, the request's options the same")
        check(wait_until(lambda: plugins.find("ks", event="register", ok=True), 5),
              "kubelet-sock: the plugin saw its Register succeed")
        check(ep.lists[0] == [("dev0", "Healthy", []), ("dev1", "Unhealthy", [1])],
              "kubelet-sock: the first list: health and NUMA topology", str(ep.lists[0]))
        # (Starting, the kubelet cleaned the dir: the plugin saw its socket go
        # and kubelet.sock come, and may have registered more than once; the
        # newest endpoint is the one that counts.)
        def cur():
            return kubelet.endpoints.get(res)

        # Health changes and removals: the whole list again each time.
        plugins.control("ks", "--devices dev0,dev1,dev2")
        check(wait_until(lambda: devices(cur().last()) == [("dev0", "Healthy"), ("dev1", "Healthy"), ("dev2", "Healthy")],
                         5), "kubelet-sock: a health change and a new device: the complete list again",
              str(cur().last()))
        plugins.control("ks", "--devices dev0,dev2")
        check(wait_until(lambda: devices(cur().last()) == [("dev0", "Healthy"), ("dev2", "Healthy")], 5),
              "kubelet-sock: a device gone: the complete list without it (no delta)", str(cur().last()))
        plugins.control("ks", "--devices dev0,dev1,dev2")
        wait_until(lambda: len(cur().last() or []) == 3, 5)
        # Admission: preferred, Allocate, PreStartContainer.
        r = cur().stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=["dev0", "dev1", "dev2"], allocation_size=2)]))
        check(list(r.container_responses[0].deviceIDs) == ["dev2", "dev1"],
              "GetPreferredAllocation answers in the given order", str(list(r.container_responses[0].deviceIDs)))
        r = cur().stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=["dev0", "dev1"],
                                                   must_include_deviceIDs=["dev0"], allocation_size=2)]))
        check(list(r.container_responses[0].deviceIDs) == ["dev0", "dev1"],
              "GetPreferredAllocation keeps must_include and only available IDs",
              str(list(r.container_responses[0].deviceIDs)))
        a = cur().stub.Allocate(pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["dev2", "dev1"])]))
        c = a.container_responses[0] if len(a.container_responses) == 1 else None
        check(c is not None and dict(c.envs) == {"DEV_IDS": "dev2,dev1", "STATIC": "1"} and
              [(m.host_path, m.container_path, m.read_only) for m in c.mounts] ==
              [("/srv/dev2", "/mnt/dev2", True), ("/srv/dev1", "/mnt/dev1", True)] and
              [(d.host_path, d.container_path, d.permissions) for d in c.devices] == [("/dev/null", "/dev/null", "rw")]
              and dict(c.annotations) == {"example.com/ids": "ids-dev2,dev1"} and
              [x.name for x in c.cdi_devices] == ["example.com/dev=dev2", "example.com/dev=dev1"],
              "Allocate: one response with envs, mounts, devices, annotations, cdi_devices as configured",
              why=str(c).replace("\n", " "))
        e = rpc_error(lambda: cur().stub.Allocate(pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["nope"])])))
        check(e == ("UNKNOWN", "invalid allocation request with non-existing device nope"),
              "Allocate refuses an unknown device (as the sample plugin)", str(e))
        cur().stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["dev2", "dev1"]), timeout=30)
        pre = plugins.find("ks", rpc="PreStartContainer")
        check(pre and pre[-1]["devices_ids"] == ["dev2", "dev1"], "PreStartContainer recorded with its devices",
              str(pre[-1:]))
        plugins.control("ks", "--devices dev0,dev1,dev2 --allocate-fail 'board fault: dev1 is busy'")
        e = rpc_error(lambda: cur().stub.Allocate(pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["dev1"])])))
        check(e == ("UNKNOWN", "board fault: dev1 is busy"), "--allocate-fail: UNKNOWN with the message", str(e))
        plugins.control("ks", "--devices dev0,dev1,dev2")

        # A kubelet restart: streams cancelled, sockets deleted, kubelet.sock again.
        n = len(kubelet.registrations(res))
        kubelet.restart()
        check(wait_until(lambda: plugins.find("ks", event="stream_end"), 5),
              "kubelet restart: the plugin sees its stream end")
        ep2 = wait_until(lambda: len(kubelet.registrations(res)) > n and kubelet.endpoints[res].last() and
                         kubelet.endpoints[res], 20)
        check(ep2 and devices(ep2.last()) == [("dev0", "Healthy"), ("dev1", "Healthy"), ("dev2", "Healthy")],
              "kubelet restart: kubelet.sock re-created, the plugin registers again, a new stream",
              str([c.get("why") for c in plugins.find("ks", event="restart")]))
        # Its own socket deleted (a new kubelet cleaning the dir).
        n = len(kubelet.registrations(res))
        os.unlink(os.path.join(dpdir, "ks.sock"))
        ep3 = wait_until(lambda: len(kubelet.registrations(res)) > n and kubelet.endpoints[res].last() and
                         kubelet.endpoints[res], 20)
        check(ep3 and os.path.exists(os.path.join(dpdir, "ks.sock")),
              "own socket deleted: made again and registered again")
        # The control file's --exit: gone, sockets left behind as after a crash.
        plugins.control("ks", "--exit 3")
        check(wait_until(lambda: proc.poll() is not None, 5) and proc.returncode == 3,
              "--exit 3 in the control file: exit status 3", str(proc.returncode))
        check(wait_until(lambda: ep3.ended.is_set(), 5), "the kubelet's stream ends with the plugin")

        # A clean stop: SIGTERM removes the socket.
        plugins.control("ks", "")
        proc = plugins.launch("ks2", args[:5] + ["ks2.sock"] + args[6:])
        wait_until(lambda: plugins.find("ks2", event="register", ok=True), 20)
        proc.send_signal(signal.SIGTERM)
        check(wait_until(lambda: proc.poll() is not None, 10) and proc.returncode == 0 and
              not os.path.exists(os.path.join(dpdir, "ks2.sock")), "SIGTERM: exit 0, socket removed",
              str(proc.returncode))

        # Refusals, with the kubelet's words, recorded by the plugin.
        for name, extra, want in [
                ("bad-version", ["--register-version", "v1"],
                 'requested API version "v1" is not supported by kubelet. Supported version is ["v1beta1"]'),
                ("bad-name", ["--resource", "x"], 'the ResourceName "x" is invalid'),
                ("bad-endpoint", ["--register-endpoint", "../escape.sock"], "failed to dial device plugin: ")]:
            plugins.launch(name, ["--mode", "kubelet-sock", "--dir", dpdir, "--socket", name + ".sock"] +
                           (extra if extra[0] == "--resource" else ["--resource", "example.com/" + name] + extra))
            got = wait_until(lambda: plugins.find(name, event="register"), 20)
            check(got and not got[0]["ok"] and got[0]["code"] == "UNKNOWN" and got[0]["error"].startswith(want),
                  "Register refused (%s): %s" % (name, want), str(got[:1]))
        check(plugins.find("bad-endpoint", event="register")[:1] and
              plugins.find("bad-endpoint", event="register")[0]["endpoint"] == "../escape.sock",
              "--register-endpoint: the endpoint is sent as given")
        # A DEPRECATION file: Register is skipped, as the kubelet's stub does.
        open(os.path.join(dpdir, "DEPRECATION"), "w").close()
        plugins.launch("dep", ["--mode", "kubelet-sock", "--dir", dpdir, "--socket", "dep.sock",
                               "--resource", "example.com/dep"])
        check(wait_until(lambda: plugins.find("dep", event="deprecation_file"), 20) and
              not plugins.find("dep", event="register"), "a DEPRECATION file in the dir: no Register (the stub's rule)")
        os.unlink(os.path.join(dpdir, "DEPRECATION"))
    finally:
        kubelet.stop()


def run_registry(kube, plugins, work, same_socket):
    pb = kube.pb
    tag = "ss" if same_socket else "rg"
    regdir = os.path.join(work, tag + "-plugins_registry")
    sockdir = os.path.join(work, tag + "-sockets")
    dpdir = os.path.join(work, tag + "-device-plugins")
    os.makedirs(sockdir, mode=0o750)
    kubelet = Kubelet(kube, dpdir)
    watcher = Watcher(kube, kubelet, regdir)
    kubelet.start()
    watcher.start()
    mode = "registry-same-socket" if same_socket else "registry"
    what = mode + ": "
    res = "example.com/" + tag
    try:
        proc = plugins.launch(tag, ["--mode", mode, "--registry-dir", regdir, "--socket-dir", sockdir,
                                    "--dir", dpdir, "--socket", tag + ".sock", "--registry-socket", tag + "-reg.sock",
                                    "--resource", res, "--devices", "a,b@0"])
        reg_sock = os.path.join(regdir, tag + "-reg.sock")
        service = reg_sock if same_socket else os.path.join(sockdir, tag + ".sock")
        ep = wait_until(lambda: kubelet.endpoints.get(res) and kubelet.endpoints[res].last() is not None and
                        kubelet.endpoints[res], 20)
        if not check(ep, what + "found in plugins_registry, GetInfo, dialled, ListAndWatch",
                     why="not registered: %s %s" % (watcher.notified, plugins.calls(tag)[-3:])):
            return
        path, info = watcher.infos[0]
        check(path == reg_sock and info.type == "DevicePlugin" and info.name == res and
              list(info.supported_versions) == ["v1beta1"] and info.endpoint == ("" if same_socket else service),
              what + "GetInfo {DevicePlugin, resource, %s, [v1beta1]}" %
              ("empty endpoint" if same_socket else "absolute endpoint"), str(info).replace("\n", " "))
        check(ep.path == service, what + "the DevicePlugin service dialled at " + service, ep.path)
        check(devices(ep.last()) == [("a", "Healthy"), ("b", "Healthy")] and ep.last()[1][2] == [0],
              what + "the device list", str(ep.last()))
        check(wait_until(lambda: plugins.find(tag, rpc="NotifyRegistrationStatus", plugin_registered=True), 5),
              what + "NotifyRegistrationStatus(true) received")
        a = ep.stub.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["b"])]))
        check(len(a.container_responses) == 1, what + "Allocate through the endpoint")
        # GetInfo may be asked again at any time.
        ch, _ = dial(kube, reg_sock)
        again = kube.reg_grpc.RegistrationStub(ch).GetInfo(kube.reg.InfoRequest(), timeout=1)
        ch.close()
        check(again.name == res, what + "GetInfo answers again")
        # Its service socket deleted: both made again, registered again.
        n = len(kubelet.registrations(res))
        os.unlink(service)
        check(wait_until(lambda: len(kubelet.registrations(res)) > n and kubelet.endpoints[res].last(), 20),
              what + "a deleted socket: made again, found again, registered again",
              str([c.get("why") for c in plugins.find(tag, event="restart")]))
        proc.send_signal(signal.SIGTERM)
        check(wait_until(lambda: proc.poll() is not None, 10) and proc.returncode == 0 and
              not os.path.exists(reg_sock) and not os.path.exists(service), what + "SIGTERM: exit 0, sockets removed")
        if same_socket:
            return
        # Refusals told through NotifyRegistrationStatus, in the kubelet's words.
        for name, extra, want in [
                ("csi", ["--info-type", "CSIPlugin"], "RegisterPlugin error -- no handler registered for plugin type: "
                 "CSIPlugin at socket "),
                ("dra", ["--info-type", "DRAPlugin"], "RegisterPlugin error -- no handler registered for plugin type: "
                 "DRAPlugin at socket "),
                ("vers", ["--info-versions", "v1,v2"], "RegisterPlugin error -- plugin validation failed with err: "
                 "manager version, v1beta1, is not among plugin supported versions [v1 v2]"),
                ("iname", ["--info-name", "x"], "RegisterPlugin error -- plugin validation failed with err: invalid "
                 'name of device plugin socket: the ResourceName "x" is invalid')]:
            plugins.launch(name, ["--mode", "registry", "--registry-dir", regdir, "--socket-dir", sockdir,
                                  "--dir", dpdir, "--socket", name + ".sock", "--resource", "example.com/" + name]
                           + extra)
            got = wait_until(lambda: plugins.find(name, rpc="NotifyRegistrationStatus"), 20)
            check(got and got[0]["plugin_registered"] is False and got[0]["error"].startswith(want),
                  what + "refused and told: " + want, str(got[:1]))
    finally:
        watcher.stop()
        kubelet.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", default=os.path.join(HERE, "test_device_plugin.py"))
    ap.add_argument("--work")
    ap.add_argument("--stubs")
    ap.add_argument("--proto-dir")
    ap.add_argument("--mode", action="append", choices=MODES)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="fake-kubelet-")
    os.makedirs(work, exist_ok=True)
    mods = load_stubs(args)
    kube = Kube(mods)
    plugins = Plugins(args, work, mods[0])
    try:
        for mode in args.mode or MODES:
            print("# mode %s" % mode, flush=True)
            if mode == "kubelet-sock":
                run_kubelet_sock(kube, plugins, work)
            else:
                run_registry(kube, plugins, work, mode == "registry-same-socket")
    except Exception as e:  # noqa: BLE001 - report, then fail
        import traceback
        traceback.print_exc()
        bad("unexpected", repr(e))
    finally:
        plugins.kill_all()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
        if not args.stubs:
            shutil.rmtree(mods[0], ignore_errors=True)  # the temp dir load_stubs made
    print("%d passed, %d failed" % (passes, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
