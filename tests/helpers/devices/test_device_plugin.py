#!/usr/bin/python3
"""A kubelet device plugin for outpost's tests, in Python with grpcio.

It behaves towards its host the way stock device plugins behave towards the
kubelet (the kubelet's sample device plugin and its plugin stub, NVIDIA's
k8s-device-plugin), so that the host cannot tell the difference:

  * It serves v1beta1.DevicePlugin (proto/deviceplugin.proto, upstream's
    package, names and field numbers) on a unix socket of its own:
    GetDevicePluginOptions; ListAndWatch sending the complete device list at
    once and again on every change (never a delta); GetPreferredAllocation
    (when offered) answering from a given order; Allocate refusing unknown
    and unhealthy IDs (as the sample plugin does) and otherwise answering
    with the configured envs, mounts, device nodes, annotations and CDI
    names; PreStartContainer (when asked for).
  * --mode kubelet-sock (the classic path): the socket is <dir>/<socket>,
    made before it calls v1beta1.Registration/Register on <dir>/kubelet.sock
    with the endpoint relative to <dir> (filepath.Base, as the stub does)
    and the options also in the request (as the stub and older kubelets
    want). It watches <dir> with inotify: kubelet.sock created (a restarted
    kubelet, what NVIDIA's plugin and the sample plugin watch for) or its
    own socket deleted (a new kubelet cleans the dir) makes it restart its
    server on a fresh socket and register again. A DEPRECATION file in
    <dir> makes it skip Register, as the kubelet's stub does. A failed
    Register is retried after --retry seconds (NVIDIA's plugin: 30 s).
  * --mode registry (the pluginwatcher path): the device socket in
    --socket-dir (an absolute endpoint), then a registration socket in
    --registry-dir serving pluginregistration.Registration: GetInfo {type
    DevicePlugin, name the resource, endpoint the device socket, versions
    [v1beta1]}; NotifyRegistrationStatus logged. --mode
    registry-same-socket: one server on the registration socket serves both
    services and GetInfo's endpoint is empty (the stub's layout). Either
    socket deleted: both are made again (a new registration).
  * SIGTERM/SIGINT: the servers stop and its sockets are removed (exit 0).

Options (also read, shell-words, from the --control file on every call and
every tick of 50 ms, so a test changes behaviour live):
  --resource NAME          extended resource name (default example.com/dev)
  --devices LIST           "id[:health][@numa[+numa...]],..." (default dev0);
                           health defaults to Healthy; any other text is sent
                           as it is (the kubelet takes only "Healthy")
  --mode M                 kubelet-sock | registry | registry-same-socket
  --dir DIR                the device plugins dir, where kubelet.sock is
                           (default /var/lib/kubelet/device-plugins)
  --registry-dir DIR       the plugins_registry dir (default
                           /var/lib/kubelet/plugins_registry)
  --socket NAME            the device socket's file name (default the
                           resource's name part + .sock)
  --socket-dir DIR         registry mode: where the device socket is (default --dir)
  --registry-socket NAME   registry modes: the registration socket's file name
                           (default the resource with / as _ + .sock)
  --pre-start              options.pre_start_required
  --preferred ORDER        options.get_preferred_allocation_available; answers
                           must_include, then ORDER's IDs that are available,
                           up to allocation_size (comma-separated)
  --allocate-fail MSG      Allocate fails (UNKNOWN, MSG: a Go plugin's error)
  --prestart-fail MSG      PreStartContainer fails the same way
  --preferred-fail MSG     GetPreferredAllocation fails the same way
  --envs K=V,...           Allocate's envs; {ids} in a value: the allocated IDs, comma-joined
  --mounts H:C[:ro],...    Allocate's mounts; {id} in a path: one entry per allocated ID
  --device-nodes H:C[:P],...  Allocate's devices (permissions default rwm); {id} as for mounts
  --annotations K=V,...    Allocate's annotations; {ids} as for envs
  --cdi NAME,...           Allocate's cdi_devices; {id} as for mounts
  --register-version V     RegisterRequest.version (default v1beta1)
  --register-resource N    RegisterRequest.resource_name (default --resource)
  --register-endpoint E    RegisterRequest.endpoint (default the socket's name)
  --info-type T            PluginInfo.type (default DevicePlugin)
  --info-name N            PluginInfo.name (default --resource)
  --info-endpoint E        PluginInfo.endpoint (default as the mode says)
  --info-versions LIST     PluginInfo.supported_versions (default v1beta1)
  --retry S                seconds before a failed Register is tried again (default 30)
  --no-watch               kubelet-sock mode: do not watch the dir (register once)
  --exit CODE              (control file) exit at once with CODE, sockets left
                           behind, as a crashed plugin leaves them
  --calls FILE             one JSON line per RPC and event: what tests check
  --control FILE           the file of extra options
  --proto-dir DIR          where deviceplugin.proto and pluginregistration.proto
                           are (else $OUTPOST_TEST_DEVICE_PROTO_DIR, else
                           ../../../proto from this script's real path)
  --stubs DIR              generated stubs to use, made there if missing (else
                           $OUTPOST_TEST_DEVICE_STUBS, else a temp dir)

The stubs are generated at start with grpc_tools.protoc from the
repository's proto/ files; nothing generated is kept in the repository.
"""

import time

T0_NS = time.monotonic_ns()  # this process's first instruction (device_bench)

import argparse
import ctypes
import json
import os
import select
import shlex
import signal
import socket
import struct
import sys
import tempfile
import threading
from concurrent import futures

PROTOS = ["deviceplugin.proto", "pluginregistration.proto"]
API_VERSION = "v1beta1"
TICK = 0.05
MODES = ("kubelet-sock", "registry", "registry-same-socket")


def parse_options(argv):
    p = argparse.ArgumentParser(prog="test_device_plugin", add_help=True)
    p.add_argument("--resource", default="example.com/dev")
    p.add_argument("--devices", default="dev0")
    p.add_argument("--mode", choices=MODES, default="kubelet-sock")
    p.add_argument("--dir", default="/var/lib/kubelet/device-plugins")
    p.add_argument("--registry-dir", default="/var/lib/kubelet/plugins_registry")
    p.add_argument("--socket")
    p.add_argument("--socket-dir")
    p.add_argument("--registry-socket")
    p.add_argument("--pre-start", action="store_true")
    p.add_argument("--preferred")
    p.add_argument("--allocate-fail")
    p.add_argument("--prestart-fail")
    p.add_argument("--preferred-fail")
    p.add_argument("--envs", default="")
    p.add_argument("--mounts", default="")
    p.add_argument("--device-nodes", default="")
    p.add_argument("--annotations", default="")
    p.add_argument("--cdi", default="")
    p.add_argument("--register-version", default=API_VERSION)
    p.add_argument("--register-resource")
    p.add_argument("--register-endpoint")
    p.add_argument("--info-type", default="DevicePlugin")
    p.add_argument("--info-name")
    p.add_argument("--info-endpoint")
    p.add_argument("--info-versions", default=API_VERSION)
    p.add_argument("--retry", type=float, default=30.0)
    p.add_argument("--no-watch", action="store_true")
    p.add_argument("--exit", type=int)
    p.add_argument("--calls")
    p.add_argument("--control")
    p.add_argument("--proto-dir")
    p.add_argument("--stubs")
    return p.parse_args(argv)


ARGV = sys.argv[1:]
OPTS = None


def options():
    """The command line plus the control file's options, read now. A
    control file asking for --exit ends the process here."""
    base = parse_options(ARGV)
    if base.control:
        try:
            with open(base.control) as f:
                extra = shlex.split(f.read())
        except FileNotFoundError:
            extra = []
        if extra:
            try:
                base = parse_options(ARGV + extra)
            except SystemExit:
                log("E", "bad control file %s: %r" % (base.control, extra))
    if base.exit is not None:
        record("exit", code=base.exit, why="control file")
        log("I", "exiting with %d as the control file says" % base.exit)
        os._exit(base.exit)
    return base


# ---- logging and the calls log --------------------------------------------------

LOG_LOCK = threading.Lock()


def log(level, message):
    """klog's line format on stderr."""
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now)) + ".%06d" % int((now % 1) * 1e6)
    line = "%s%s %7d test_device_plugin.py] %s\n" % (level, stamp, os.getpid(), message)
    with LOG_LOCK:
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


CALLS_LOCK = threading.Lock()


def record(event, **fields):
    """One JSON line in the --calls file. An RPC is {"rpc": NAME, ...}, anything
    else {"event": NAME, ...}."""
    path = OPTS.calls if OPTS else None
    if not path:
        return
    key = "rpc" if event in RPCS else "event"
    fields[key] = event
    fields["pid"] = os.getpid()
    fields["mono_ns"] = time.monotonic_ns()
    data = json.dumps(fields, sort_keys=True) + "\n"
    with CALLS_LOCK:
        with open(path, "a") as f:
            f.write(data)


RPCS = {"GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation", "Allocate", "PreStartContainer",
        "GetInfo", "NotifyRegistrationStatus"}

# ---- stubs ----------------------------------------------------------------------


def proto_dir(opts):
    if opts.proto_dir:
        return opts.proto_dir
    if os.environ.get("OUTPOST_TEST_DEVICE_PROTO_DIR"):
        return os.environ["OUTPOST_TEST_DEVICE_PROTO_DIR"]
    here = os.path.dirname(os.path.realpath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "proto"))


def load_stubs(opts):
    """Imports the generated modules, generating them first when needed."""
    cache = opts.stubs or os.environ.get("OUTPOST_TEST_DEVICE_STUBS")
    marker = "pluginregistration_pb2_grpc.py"
    if cache and os.path.exists(os.path.join(cache, marker)):
        where = cache
    else:
        from grpc_tools import protoc
        src = proto_dir(opts)
        tmp = tempfile.mkdtemp(prefix="devplugin-stubs-")
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
    import deviceplugin_pb2, deviceplugin_pb2_grpc, pluginregistration_pb2, pluginregistration_pb2_grpc  # noqa
    return deviceplugin_pb2, deviceplugin_pb2_grpc, pluginregistration_pb2, pluginregistration_pb2_grpc


# ---- devices and the allocation answer ------------------------------------------


def split_list(text):
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def parse_devices(text):
    """[(id, health, [numa...])] from "id[:health][@numa[+numa]],..."."""
    out = []
    for item in split_list(text):
        numa = []
        if "@" in item:
            item, nodes = item.rsplit("@", 1)
            numa = [int(n) for n in nodes.split("+") if n != ""]
        health = "Healthy"
        if ":" in item:
            item, health = item.split(":", 1)
        out.append((item, health, numa))
    return out


def device_messages(pb, devs):
    msgs = []
    for dev_id, health, numa in devs:
        d = pb.Device(ID=dev_id, health=health)
        if numa:
            d.topology.CopyFrom(pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in numa]))
        msgs.append(d)
    return msgs


def expand(spec, ids):
    """A path spec with {id}: one per allocated ID; without: itself."""
    if "{id}" in spec:
        return [spec.replace("{id}", i) for i in ids]
    return [spec]


def container_response(pb, opts, ids):
    r = pb.ContainerAllocateResponse()
    joined = ",".join(ids)
    for kv in split_list(opts.envs):
        k, _, v = kv.partition("=")
        r.envs[k] = v.replace("{ids}", joined)
    for kv in split_list(opts.annotations):
        k, _, v = kv.partition("=")
        r.annotations[k] = v.replace("{ids}", joined)
    for spec in split_list(opts.mounts):
        for one in expand(spec, ids):
            parts = one.split(":")
            host = parts[0]
            cont = parts[1] if len(parts) > 1 else host
            r.mounts.add(host_path=host, container_path=cont, read_only=len(parts) > 2 and parts[2] == "ro")
    for spec in split_list(opts.device_nodes):
        for one in expand(spec, ids):
            parts = one.split(":")
            host = parts[0]
            cont = parts[1] if len(parts) > 1 else host
            r.devices.add(host_path=host, container_path=cont, permissions=parts[2] if len(parts) > 2 else "rwm")
    for spec in split_list(opts.cdi):
        for one in expand(spec, ids):
            r.cdi_devices.add(name=one)
    return r


def response_summary(r):
    return {"envs": dict(r.envs), "annotations": dict(r.annotations),
            "mounts": [[m.host_path, m.container_path, m.read_only] for m in r.mounts],
            "devices": [[d.host_path, d.container_path, d.permissions] for d in r.devices],
            "cdi_devices": [c.name for c in r.cdi_devices]}


# ---- inotify (ctypes: Python's standard library has none) ---------------------

IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED = 0x400, 0x800, 0x8000


class Inotify:
    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.dirs = {}  # wd -> dir

    def watch(self, path):
        """True once path (a dir) is watched."""
        if path in self.dirs.values():
            return True
        wd = self.libc.inotify_add_watch(self.fd, path.encode(), IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                         IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
        if wd < 0:
            return False
        self.dirs[wd] = path
        return True

    def read(self, timeout):
        """[(dir, name, mask)] of what happened within timeout seconds."""
        try:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        except InterruptedError:
            return []
        if not ready:
            return []
        out = []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        i = 0
        while i + 16 <= len(data):
            wd, mask, _cookie, n = struct.unpack_from("iIII", data, i)
            name = data[i + 16:i + 16 + n].split(b"\0", 1)[0].decode()
            i += 16 + n
            d = self.dirs.get(wd)
            if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                self.dirs.pop(wd, None)  # watched again once it is back
            if d is not None:
                out.append((d, name, mask))
        return out


# ---- the plugin -------------------------------------------------------------------


class Stop(Exception):
    pass


class Plugin:
    def __init__(self, opts, mods):
        import grpc
        self.grpc = grpc
        self.pb, self.pb_grpc, self.reg, self.reg_grpc = mods
        self.opts = opts
        self.mode = opts.mode
        self.dir = os.path.abspath(opts.dir)
        self.registry_dir = os.path.abspath(opts.registry_dir)
        name_part = opts.resource.split("/")[-1] or "device"
        self.socket_name = opts.socket or name_part + ".sock"
        sock_dir = self.dir if self.mode == "kubelet-sock" else os.path.abspath(opts.socket_dir or opts.dir)
        self.socket = os.path.join(sock_dir, self.socket_name)
        self.reg_socket = os.path.join(self.registry_dir,
                                       opts.registry_socket or opts.resource.replace("/", "_") + ".sock")
        self.kubelet_sock = os.path.join(self.dir, "kubelet.sock")
        self.servers = []
        self.owned = []  # sockets this instance made
        self.serving = False
        self.register_due = None  # monotonic seconds of the next Register attempt
        self.waiting_logged = False
        self.streams = 0
        self.streams_lock = threading.Lock()
        self.inotify = None

    # -- the services ----------------------------------------------------------

    def plugin_options(self, opts):
        return self.pb.DevicePluginOptions(pre_start_required=opts.pre_start,
                                           get_preferred_allocation_available=opts.preferred is not None)

    def make_services(self):
        plugin = self
        pb, grpc = self.pb, self.grpc

        class DevicePlugin(self.pb_grpc.DevicePluginServicer):
            def GetDevicePluginOptions(self, request, context):
                opts = options()
                o = plugin.plugin_options(opts)
                record("GetDevicePluginOptions", pre_start_required=o.pre_start_required,
                       get_preferred_allocation_available=o.get_preferred_allocation_available)
                return o

            def ListAndWatch(self, request, context):
                with plugin.streams_lock:
                    plugin.streams += 1
                    stream = plugin.streams
                record("ListAndWatch", stream=stream)
                log("I", "ListAndWatch: stream %d opened" % stream)
                context.add_callback(lambda: record("stream_end", stream=stream))
                last = None
                while True:
                    devs = parse_devices(options().devices)
                    if devs != last:
                        record("list_sent", stream=stream,
                               devices=[{"id": d, "health": h, "numa": n} for d, h, n in devs])
                        yield pb.ListAndWatchResponse(devices=device_messages(pb, devs))
                        last = devs
                    if not context.is_active():
                        return
                    time.sleep(TICK)

            def GetPreferredAllocation(self, request, context):
                opts = options()
                order = split_list(opts.preferred)
                resp = pb.PreferredAllocationResponse()
                asked, answers = [], []
                for creq in request.container_requests:
                    chosen = list(creq.must_include_deviceIDs)
                    for d in order:
                        if len(chosen) >= creq.allocation_size:
                            break
                        if d in creq.available_deviceIDs and d not in chosen:
                            chosen.append(d)
                    resp.container_responses.add(deviceIDs=chosen)
                    asked.append({"available": list(creq.available_deviceIDs),
                                  "must_include": list(creq.must_include_deviceIDs),
                                  "allocation_size": creq.allocation_size})
                    answers.append(chosen)
                first = asked[0] if asked else {}
                record("GetPreferredAllocation", containers=len(asked), requests=asked,
                       available=first.get("available"), must_include=first.get("must_include"),
                       allocation_size=first.get("allocation_size"), answer=answers[0] if answers else None,
                       error=opts.preferred_fail)
                if opts.preferred_fail:
                    context.abort(grpc.StatusCode.UNKNOWN, opts.preferred_fail)
                return resp

            def Allocate(self, request, context):
                opts = options()
                devs = {d: h for d, h, _ in parse_devices(opts.devices)}
                all_ids = [list(c.devices_ids) for c in request.container_requests]
                error = opts.allocate_fail
                if not error:
                    for ids in all_ids:
                        for i in ids:
                            if i not in devs:
                                error = "invalid allocation request with non-existing device %s" % i
                            elif devs[i] != "Healthy":
                                error = "invalid allocation request with unhealthy device: %s" % i
                            if error:
                                break
                        if error:
                            break
                resp = pb.AllocateResponse()
                if not error:
                    for ids in all_ids:
                        resp.container_responses.append(container_response(pb, opts, ids))
                record("Allocate", containers=len(all_ids), devices_ids=all_ids[0] if all_ids else [],
                       error=error, response=response_summary(resp.container_responses[0])
                       if resp.container_responses else None)
                if error:
                    log("E", "Allocate: %s" % error)
                    context.abort(grpc.StatusCode.UNKNOWN, error)
                return resp

            def PreStartContainer(self, request, context):
                opts = options()
                record("PreStartContainer", devices_ids=list(request.devices_ids), error=opts.prestart_fail,
                       deadline_s=context.time_remaining())
                if opts.prestart_fail:
                    context.abort(grpc.StatusCode.UNKNOWN, opts.prestart_fail)
                return pb.PreStartContainerResponse()

        reg = self.reg

        class Registration(self.reg_grpc.RegistrationServicer):
            def GetInfo(self, request, context):
                opts = options()
                if opts.info_endpoint is not None:
                    endpoint = opts.info_endpoint
                elif plugin.mode == "registry-same-socket":
                    endpoint = ""
                else:
                    endpoint = plugin.socket
                info = reg.PluginInfo(type=opts.info_type, name=opts.info_name or opts.resource, endpoint=endpoint,
                                      supported_versions=split_list(opts.info_versions))
                record("GetInfo", type=info.type, name=info.name, endpoint=info.endpoint,
                       supported_versions=list(info.supported_versions))
                return info

            def NotifyRegistrationStatus(self, request, context):
                options()
                record("NotifyRegistrationStatus", plugin_registered=request.plugin_registered, error=request.error)
                if request.plugin_registered:
                    log("I", "registered through the plugins_registry")
                else:
                    log("E", "Registration failed: %s" % request.error)
                return reg.RegistrationStatusResponse()

        return DevicePlugin(), Registration()

    def serve(self, path, device_plugin, registration):
        """A gRPC server on a fresh socket at path."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        server = self.grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        dp, rg = self.make_services()
        if device_plugin:
            self.pb_grpc.add_DevicePluginServicer_to_server(dp, server)
        if registration:
            self.reg_grpc.add_RegistrationServicer_to_server(rg, server)
        if server.add_insecure_port("unix:" + path) == 0:
            raise OSError("cannot listen on %s" % path)
        server.start()
        self.servers.append(server)
        self.owned.append(path)
        record("serving", socket=path, device_plugin=device_plugin, registration=registration)
        log("I", "Starting to serve on %s" % path)

    def stop_servers(self, remove):
        for s in self.servers:
            s.stop(None)
        self.servers = []
        if remove:
            for p in self.owned:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
        self.owned = []
        self.serving = False

    def dirs(self):
        if self.mode == "kubelet-sock":
            return [self.dir]
        return sorted({self.registry_dir, os.path.dirname(self.socket)})

    def start(self):
        """Serves (and registers) once the dirs exist; False while one is missing."""
        for d in self.dirs():
            if not os.path.isdir(d):
                if not self.waiting_logged:
                    record("waiting_for_dir", dir=d)
                    log("I", "waiting for %s to exist" % d)
                    self.waiting_logged = True
                return False
        if self.mode == "kubelet-sock":
            self.serve(self.socket, True, False)
        elif self.mode == "registry":
            self.serve(self.socket, True, False)
            self.serve(self.reg_socket, False, True)
        else:
            self.serve(self.reg_socket, True, True)
        self.serving = True
        if self.mode == "kubelet-sock":
            self.try_register()
        return True

    def restart(self, why):
        record("restart", why=why)
        log("I", "restarting: %s" % why)
        self.stop_servers(remove=True)
        self.start()

    # -- Register on kubelet.sock ------------------------------------------------

    def try_register(self):
        self.register_due = None
        if os.path.exists(os.path.join(self.dir, "DEPRECATION")):
            record("deprecation_file", path=os.path.join(self.dir, "DEPRECATION"))
            log("I", "Deprecation file found. Skip registration")
            return
        if not os.path.exists(self.kubelet_sock):
            record("waiting_for_kubelet", socket=self.kubelet_sock)
            log("I", "waiting for %s" % self.kubelet_sock)
            return  # its creation is watched for
        opts = options()
        req = self.pb.RegisterRequest(version=opts.register_version,
                                      endpoint=opts.register_endpoint if opts.register_endpoint is not None
                                      else os.path.basename(self.socket),
                                      resource_name=opts.register_resource or opts.resource,
                                      options=self.plugin_options(opts))
        sent = {"version": req.version, "endpoint": req.endpoint, "resource_name": req.resource_name}
        # A stale kubelet.sock (nobody listening) fails at once instead of
        # taking the 10 s of a blocking dial.
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(2)
        try:
            probe.connect(self.kubelet_sock)
        except OSError as e:
            self.register_failed(sent, "UNAVAILABLE", "connect %s: %s" % (self.kubelet_sock, e.strerror or e))
            return
        finally:
            probe.close()
        t0 = time.monotonic_ns()
        ch = self.grpc.insecure_channel("unix:" + self.kubelet_sock)
        try:
            self.grpc.channel_ready_future(ch).result(timeout=10)
            self.pb_grpc.RegistrationStub(ch).Register(req, timeout=30)
        except self.grpc.FutureTimeoutError:
            self.register_failed(sent, "DEADLINE_EXCEEDED", "dial %s: timed out after 10 s" % self.kubelet_sock)
            return
        except self.grpc.RpcError as e:
            self.register_failed(sent, e.code().name, e.details())
            return
        finally:
            ch.close()
        record("register", ok=True, took_ns=time.monotonic_ns() - t0, **sent)
        log("I", "Registered device plugin for '%s' with Kubelet" % req.resource_name)

    def register_failed(self, sent, code, message):
        record("register", ok=False, code=code, error=message, **sent)
        log("E", "Could not register device plugin: %s" % message)
        self.register_due = time.monotonic() + options().retry

    # -- the main loop ------------------------------------------------------------

    def own_socket_gone(self, d, name):
        for p in self.owned:
            if os.path.dirname(p) == d and os.path.basename(p) == name:
                return not os.path.exists(p)
        return False

    def run(self):
        watch = not (self.mode == "kubelet-sock" and self.opts.no_watch)
        try:
            self.inotify = Inotify() if watch else None
        except OSError as e:
            log("E", "inotify: %s (not watching)" % e)
            self.inotify = None
        while True:
            if self.inotify:
                for d in self.dirs():
                    if os.path.isdir(d) and not self.inotify.watch(d):
                        log("E", "cannot watch %s" % d)
            if not self.serving:
                self.start()
            timeout = TICK * 2
            if self.register_due is not None:
                timeout = min(timeout, self.register_due - time.monotonic())
            events = self.inotify.read(timeout) if self.inotify else (time.sleep(max(0.0, timeout)) or [])
            options()  # an --exit in the control file
            why = None
            for d, name, mask in events:
                if not self.serving:
                    continue
                if (self.mode == "kubelet-sock" and d == self.dir and name == "kubelet.sock"
                        and mask & (IN_CREATE | IN_MOVED_TO)):
                    why = "kubelet.sock created"
                elif mask & (IN_DELETE | IN_MOVED_FROM) and self.own_socket_gone(d, name):
                    why = why or "socket %s deleted" % os.path.join(d, name)
            if why:
                self.restart(why)
            elif self.register_due is not None and time.monotonic() >= self.register_due:
                self.try_register()


def main():
    global OPTS
    OPTS = parse_options(ARGV)
    OPTS = options()
    record("launch", t0_ns=T0_NS, argv=ARGV, mode=OPTS.mode, resource=OPTS.resource)
    mods = load_stubs(OPTS)
    plugin = Plugin(OPTS, mods)

    def on_signal(signum, _frame):
        raise Stop(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        plugin.run()
    except Stop as s:
        log("I", "Received signal %d, shutting down." % s.args[0])
        plugin.stop_servers(remove=True)
        record("exit", code=0, why="signal %d" % s.args[0])
        os._exit(0)


if __name__ == "__main__":
    main()
