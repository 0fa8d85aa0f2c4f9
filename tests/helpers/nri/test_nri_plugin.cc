// An NRI plugin built with the NRI plugin library (include/outpost/nri.h),
// for the integration tests of outpost's NRI runtime side: logs every
// request as one greppable line, answers CreateContainer with the
// adjustments given by flags, and misbehaves on demand.
//
//   test_nri_plugin [-idx NN] [-name NAME] [-socket-path PATH] [-events LIST]
//                   [-log FILE] [adjustments...] [misbehaviour...]
//
// -events: comma list of event names (case-insensitive), "all", "pod",
// "container"; default: every event except ValidateContainerAdjustment
// (added by -reject). The log (-log FILE, appended, else stderr) has one
// line per request, written with one write(2):
//   Configure runtime=NAME version=V config=BYTES
//   Synchronize pods=N containers=M
//   SyncContainer NAME id=ID pod=POD_ID ann=k=v,... created=NANOS   (one per container)
//   RunPodSandbox POD_ID name=NAME ns=NAMESPACE
//   CreateContainer NAME id=ID pod=POD_ID env=A=1,B=2 ann=k=v,... args=a,b mem=LIMIT created=NANOS
//   UpdateContainer NAME id=ID mem=LIMIT ann=k=v,... created=NANOS
//   EVENT NAME id=ID pod=POD_ID ann=k=v,... created=NANOS   (the other container events)
//   ValidateContainerAdjustment NAME plugins=NN-a,NN-b
//   UpdateContainers ok failed=N | UpdateContainers error=...
// CreateContainer adjustments (each may be repeated where it makes sense):
//   -adjust-env K=V  -adjust-annotation K=V  -remove-annotation K
//   -adjust-memory BYTES  -adjust-cpu-shares N  -adjust-pids N  -adjust-oom N
//   -adjust-rlimit TYPE=SOFT:HARD  -adjust-mount SRC:DST[:OPT,OPT]
//   -adjust-device PATH  -adjust-args a,b,c  -adjust-hook STAGE:PATH
//   -adjust-seccomp (the never-applied seccomp field: outpost must refuse it)
// Misbehaviour, EVENT being any request name (Configure, Synchronize, ...):
//   -fail-on EVENT     answer with an error
//   -hang-on EVENT     never answer
//   -crash-on EVENT    exit(3) at once
//   -garbage-on EVENT  answer with bytes that are no valid message
//   -update-during EVENT:ID:MEMORY   UpdateContainers first, answer after
//   -update-after-sync ID:MEMORY     UpdateContainers once Synchronize is answered
//   -evict-on EVENT:ID  evict ID (in the response where it has room, else
//                       through UpdateContainers)
//   -reject REASON     as a validator, reject every adjustment
//   -exit-after-register  exit(0) once the runtime accepted the registration
//   -old               serve only NRI v0.6's Plugin service (notifications
//                      then come through StateChange)
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nriproto/codec.h"
#include "outpost/nri.h"

using namespace outpost::nri;
namespace nriproto = outpost::nriproto;

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

std::vector<std::string> SplitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "test_nri_plugin: %s\n", msg.c_str());
  std::exit(2);
}

int64_t Num(const std::string& s, const char* what) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0) Die(std::string("bad number for ") + what + ": " + s);
  return v;
}

uint32_t ParseEvents(const std::string& list) {
  uint32_t mask = 0;
  for (const std::string& raw : SplitOn(list, ',')) {
    std::string n = Lower(raw);
    if (n.empty()) continue;
    if (n == "all") {
      mask |= kValidEvents;
      continue;
    }
    if (n == "pod") {
      for (Event e : {Event::kRunPodSandbox, Event::kStopPodSandbox, Event::kRemovePodSandbox,
                      Event::kUpdatePodSandbox, Event::kPostUpdatePodSandbox})
        mask |= EventMask(e);
      continue;
    }
    if (n == "container") {
      for (int e = 4; e <= 11; e++) mask |= EventMask(static_cast<Event>(e));
      continue;
    }
    bool found = false;
    for (int e = 1; e < 15; e++) {
      if (Lower(EventMethod(static_cast<Event>(e))) == n) {
        mask |= EventMask(static_cast<Event>(e));
        found = true;
      }
    }
    if (!found) Die("unknown event " + raw);
  }
  return mask;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string JoinMap(const std::map<std::string, std::string>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

ContainerUpdate MemoryUpdate(const std::string& id, int64_t limit) {
  ContainerUpdate u;
  u.container_id = id;
  u.resources.emplace().memory.emplace().limit = limit;
  return u;
}

struct Flags {
  std::string idx, name, socket_path, log;
  uint32_t events = 0;
  bool events_given = false;
  std::vector<KeyValue> env;
  std::map<std::string, std::string> annotations;
  std::optional<int64_t> memory, cpu_shares, pids, oom;
  std::vector<Rlimit> rlimits;
  std::vector<Mount> mounts;
  std::vector<Device> devices;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> hooks;  // stage, path
  bool seccomp = false;
  std::vector<std::string> fail_on, hang_on, crash_on, garbage_on;
  struct During {
    std::string event, id;
    int64_t memory;
  };
  std::vector<During> update_during;
  std::vector<std::pair<std::string, int64_t>> update_after_sync;
  std::vector<std::pair<std::string, std::string>> evict_on;  // event, id
  std::optional<std::string> reject;
  bool exit_after_register = false;
  bool old = false;
};

bool Has(const std::vector<std::string>& v, const std::string& ev) {
  for (const std::string& s : v)
    if (Lower(s) == Lower(ev)) return true;
  return false;
}

Device DeviceFor(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) Die("stat " + path + ": " + std::strerror(errno));
  Device d;
  d.path = path;
  d.type = S_ISBLK(st.st_mode) ? "b" : "c";
  d.major = major(st.st_rdev);
  d.minor = minor(st.st_rdev);
  d.file_mode = st.st_mode & 0777;
  return d;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    std::string v;
    while (!a.empty() && a[0] == '-') a.erase(0, 1);
    size_t eq = a.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return v;
      if (i + 1 >= argc) Die("-" + a + " needs a value");
      return argv[++i];
    };
    if (a == "idx") {
      f.idx = value();
    } else if (a == "name") {
      f.name = value();
    } else if (a == "socket-path") {
      f.socket_path = value();
    } else if (a == "log") {
      f.log = value();
    } else if (a == "events") {
      f.events |= ParseEvents(value());
      f.events_given = true;
    } else if (a == "adjust-env") {
      std::string kv = value();
      size_t p = kv.find('=');
      f.env.push_back({kv.substr(0, p), p == std::string::npos ? "" : kv.substr(p + 1)});
    } else if (a == "adjust-annotation") {
      std::string kv = value();
      size_t p = kv.find('=');
      f.annotations[kv.substr(0, p)] = p == std::string::npos ? "" : kv.substr(p + 1);
    } else if (a == "remove-annotation") {
      f.annotations["-" + value()] = "";
    } else if (a == "adjust-memory") {
      f.memory = Num(value(), "-adjust-memory");
    } else if (a == "adjust-cpu-shares") {
      f.cpu_shares = Num(value(), "-adjust-cpu-shares");
    } else if (a == "adjust-pids") {
      f.pids = Num(value(), "-adjust-pids");
    } else if (a == "adjust-oom") {
      f.oom = Num(value(), "-adjust-oom");
    } else if (a == "adjust-rlimit") {
      std::string s = value();
      size_t eqp = s.find('='), colon = s.find(':');
      if (eqp == std::string::npos || colon == std::string::npos || colon < eqp) Die("-adjust-rlimit TYPE=SOFT:HARD");
      Rlimit r;
      r.type = s.substr(0, eqp);
      r.soft = static_cast<uint64_t>(Num(s.substr(eqp + 1, colon - eqp - 1), "rlimit soft"));
      r.hard = static_cast<uint64_t>(Num(s.substr(colon + 1), "rlimit hard"));
      f.rlimits.push_back(r);
    } else if (a == "adjust-mount") {
      std::vector<std::string> parts = SplitOn(value(), ':');
      if (parts.size() < 2) Die("-adjust-mount SRC:DST[:OPTS]");
      Mount m;
      m.source = parts[0];
      m.destination = parts[1];
      m.type = "bind";
      m.options = parts.size() > 2 ? SplitOn(parts[2], ',') : std::vector<std::string>{"rbind", "ro"};
      f.mounts.push_back(m);
    } else if (a == "adjust-device") {
      f.devices.push_back(DeviceFor(value()));
    } else if (a == "adjust-args") {
      f.args = SplitOn(value(), ',');
    } else if (a == "adjust-hook") {
      std::string s = value();
      size_t p = s.find(':');
      if (p == std::string::npos) Die("-adjust-hook STAGE:PATH");
      f.hooks.emplace_back(Lower(s.substr(0, p)), s.substr(p + 1));
    } else if (a == "adjust-seccomp") {
      f.seccomp = true;
    } else if (a == "fail-on") {
      f.fail_on.push_back(value());
    } else if (a == "hang-on") {
      f.hang_on.push_back(value());
    } else if (a == "crash-on") {
      f.crash_on.push_back(value());
    } else if (a == "garbage-on") {
      f.garbage_on.push_back(value());
    } else if (a == "update-during") {
      std::vector<std::string> p = SplitOn(value(), ':');
      if (p.size() != 3) Die("-update-during EVENT:ID:MEMORY");
      f.update_during.push_back({p[0], p[1], Num(p[2], "-update-during memory")});
    } else if (a == "update-after-sync") {
      std::vector<std::string> p = SplitOn(value(), ':');
      if (p.size() != 2) Die("-update-after-sync ID:MEMORY");
      f.update_after_sync.emplace_back(p[0], Num(p[1], "-update-after-sync memory"));
    } else if (a == "evict-on") {
      std::vector<std::string> p = SplitOn(value(), ':');
      if (p.size() != 2) Die("-evict-on EVENT:ID");
      f.evict_on.emplace_back(p[0], p[1]);
    } else if (a == "reject") {
      f.reject = value();
    } else if (a == "exit-after-register") {
      f.exit_after_register = true;
    } else if (a == "old") {
      f.old = true;
    } else {
      Die("unknown flag -" + a);
    }
  }
  if (!f.events_given) f.events = kValidEvents & ~EventMask(Event::kValidateContainerAdjustment);
  if (f.reject) f.events |= EventMask(Event::kValidateContainerAdjustment);
  return f;
}

class TestPlugin : public Stub {
 public:
  TestPlugin(StubOptions o, Flags f) : Stub(std::move(o)), f_(std::move(f)) {
    if (!f_.log.empty()) {
      log_fd_ = ::open(f_.log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      if (log_fd_ < 0) Die("open " + f_.log + ": " + std::strerror(errno));
    }
  }

  std::string Configure(const ConfigureRequest& req, uint32_t* events) override {
    *events = f_.events;
    return Handle("Configure",
                  "runtime=" + req.runtime_name + " version=" + req.runtime_version +
                      " config=" + std::to_string(req.config.size()),
                  [&] { return nriproto::Encode(ConfigureResponse{static_cast<int32_t>(*events), 0}); });
  }

  std::string Synchronize(const std::vector<PodSandbox>& pods, const std::vector<Container>& ctrs,
                          std::vector<ContainerUpdate>*) override {
    for (const auto& [id, mem] : f_.update_after_sync) {
      std::string cid = id;
      int64_t m = mem;
      After(0, [this, cid, m] { SendUpdate({MemoryUpdate(cid, m)}, {}, nullptr); });
    }
    std::string detail = "pods=" + std::to_string(pods.size()) + " containers=" + std::to_string(ctrs.size());
    for (const Container& c : ctrs) detail += "\nSyncContainer " + Describe(c);
    return Handle("Synchronize", detail, [] { return nriproto::Encode(SynchronizeResponse{}); });
  }

  void Shutdown() override { Line("Shutdown"); }

  std::string RunPodSandbox(const PodSandbox& p) override { return PodEvent("RunPodSandbox", p); }
  std::string StopPodSandbox(const PodSandbox& p) override { return PodEvent("StopPodSandbox", p); }
  std::string RemovePodSandbox(const PodSandbox& p) override { return PodEvent("RemovePodSandbox", p); }
  std::string PostUpdatePodSandbox(const PodSandbox& p) override { return PodEvent("PostUpdatePodSandbox", p); }
  std::string UpdatePodSandbox(const UpdatePodSandboxRequest& req) override {
    return PodEvent("UpdatePodSandbox", req.pod ? *req.pod : PodSandbox{});
  }

  std::string CreateContainer(const PodSandbox& pod, const Container& c, CreateContainerResponse* out) override {
    ContainerAdjustment adj;
    adj.env = f_.env;
    adj.annotations = f_.annotations;
    adj.rlimits = f_.rlimits;
    adj.mounts = f_.mounts;
    adj.args = f_.args;
    LinuxAdjustment lin;
    bool has_linux = false;
    if (f_.memory || f_.cpu_shares || f_.pids) {
      Resources& r = lin.resources.emplace();
      if (f_.memory) r.memory.emplace().limit = *f_.memory;
      if (f_.cpu_shares) r.cpu.emplace().shares = static_cast<uint64_t>(*f_.cpu_shares);
      if (f_.pids) r.pids_limit = *f_.pids;
      has_linux = true;
    }
    if (f_.oom) lin.oom_score_adj = *f_.oom, has_linux = true;
    if (!f_.devices.empty()) lin.devices = f_.devices, has_linux = true;
    if (f_.seccomp) lin.seccomp_policy_raw = std::string("\x0a\x0cSCMP_ACT_LOG", 14), has_linux = true;
    if (has_linux) adj.linux = lin;
    for (const auto& [stage, path] : f_.hooks) {
      Hooks& h = adj.hooks ? *adj.hooks : adj.hooks.emplace();
      Hook hook;
      hook.path = path;
      hook.args = {path};
      if (stage == "prestart") h.prestart.push_back(hook);
      else if (stage == "createruntime") h.create_runtime.push_back(hook);
      else if (stage == "createcontainer") h.create_container.push_back(hook);
      else if (stage == "startcontainer") h.start_container.push_back(hook);
      else if (stage == "poststart") h.poststart.push_back(hook);
      else if (stage == "poststop") h.poststop.push_back(hook);
      else Die("unknown hook stage " + stage);
    }
    out->adjust = adj;
    for (const auto& [ev, id] : f_.evict_on) {
      if (Lower(ev) == "createcontainer") out->evict.push_back({id, "evicted by test plugin"});
    }
    std::string mem = c.resources && c.resources->memory && c.resources->memory->limit
                          ? std::to_string(*c.resources->memory->limit)
                          : "-";
    return Handle("CreateContainer",
                  c.name + " id=" + c.id + " pod=" + pod.id + " env=" + Join(c.env) + " ann=" + JoinMap(c.annotations) +
                      " args=" + Join(c.args) + " mem=" + mem + " created=" + std::to_string(c.created_at),
                  [out] { return nriproto::Encode(*out); });
  }

  std::string PostCreateContainer(const PodSandbox& p, const Container& c) override {
    return CtrEvent("PostCreateContainer", p, c);
  }
  std::string StartContainer(const PodSandbox& p, const Container& c) override { return CtrEvent("StartContainer", p, c); }
  std::string PostStartContainer(const PodSandbox& p, const Container& c) override {
    return CtrEvent("PostStartContainer", p, c);
  }
  std::string PostUpdateContainer(const PodSandbox& p, const Container& c) override {
    return CtrEvent("PostUpdateContainer", p, c);
  }
  std::string RemoveContainer(const PodSandbox& p, const Container& c) override {
    return CtrEvent("RemoveContainer", p, c);
  }

  std::string UpdateContainer(const PodSandbox&, const Container& c, const Resources& res,
                              UpdateContainerResponse* out) override {
    for (const auto& [ev, id] : f_.evict_on) {
      if (Lower(ev) == "updatecontainer") out->evict.push_back({id, "evicted by test plugin"});
    }
    std::string mem = res.memory && res.memory->limit ? std::to_string(*res.memory->limit) : "-";
    return Handle("UpdateContainer",
                  c.name + " id=" + c.id + " mem=" + mem + " ann=" + JoinMap(c.annotations) +
                      " created=" + std::to_string(c.created_at),
                  [out] { return nriproto::Encode(*out); });
  }

  std::string StopContainer(const PodSandbox& p, const Container& c, StopContainerResponse* out) override {
    return Handle("StopContainer", Describe(c, p.id), [out] { return nriproto::Encode(*out); });
  }

  std::string ValidateContainerAdjustment(const ValidateContainerAdjustmentRequest& req,
                                          ValidateContainerAdjustmentResponse* out) override {
    std::vector<std::string> plugins;
    for (const PluginInstance& p : req.plugins) plugins.push_back(p.index + "-" + p.name);
    if (f_.reject) {
      out->reject = true;
      out->reason = *f_.reject;
    }
    return Handle("ValidateContainerAdjustment",
                  (req.container ? req.container->name : std::string("-")) + " plugins=" + Join(plugins),
                  [out] { return nriproto::Encode(*out); });
  }

 private:
  void Line(const std::string& s) {
    std::string l = s + "\n";
    int fd = log_fd_ >= 0 ? log_fd_ : 2;
    ssize_t n = ::write(fd, l.data(), l.size());
    (void)n;
  }

  std::string PodEvent(const char* ev, const PodSandbox& p) {
    return Handle(ev, p.id + " name=" + p.name + " ns=" + p.namespace_, [] { return std::string(); });
  }

  std::string CtrEvent(const char* ev, const PodSandbox& p, const Container& c) {
    return Handle(ev, Describe(c, p.id), [] { return std::string(); });
  }

  // What every container event logs: enough to tell whether it describes
  // the container as CreateContainer left it.
  static std::string Describe(const Container& c, const std::string& pod = "") {
    return c.name + " id=" + c.id + " pod=" + (pod.empty() ? c.pod_sandbox_id : pod) + " ann=" + JoinMap(c.annotations) +
           " created=" + std::to_string(c.created_at);
  }

  void SendUpdate(std::vector<ContainerUpdate> updates, std::vector<ContainerEviction> evict, Reply* then,
                  std::string answer = "") {
    UpdateContainersRequest req;
    req.update = std::move(updates);
    req.evict = std::move(evict);
    Reply r = then ? *then : Reply();
    bool answer_after = then != nullptr;
    UpdateContainers(req, [this, r, answer_after, answer](const std::string& err, const UpdateContainersResponse& resp) {
      Line(err.empty() ? "UpdateContainers ok failed=" + std::to_string(resp.failed.size())
                       : "UpdateContainers error=" + err);
      if (answer_after) r.Send(answer);
    });
  }

  // The common part of every request: the log line, then the misbehaviour
  // asked for this event; encode gives the normal answer's bytes for the
  // paths that answer later.
  template <typename Encode>
  std::string Handle(const std::string& ev, const std::string& detail, Encode encode) {
    Line(detail.empty() ? ev : ev + " " + detail);
    if (Has(f_.crash_on, ev)) {
      Line("crashing on " + ev);
      ::_exit(3);
    }
    if (Has(f_.fail_on, ev)) return "test plugin: failing " + ev + " as asked";
    if (Has(f_.hang_on, ev)) {
      hung_.push_back(TakeReply());  // kept, never answered
      return "";
    }
    if (Has(f_.garbage_on, ev)) {
      TakeReply().Send(std::string("\xff\xff\xff\xff\x0f\x0a\x7f", 7));
      return "";
    }
    std::vector<ContainerUpdate> updates;
    for (const Flags::During& d : f_.update_during) {
      if (Lower(d.event) == Lower(ev)) updates.push_back(MemoryUpdate(d.id, d.memory));
    }
    std::vector<ContainerEviction> evict;
    if (ev != "CreateContainer" && ev != "UpdateContainer") {
      for (const auto& [e, id] : f_.evict_on) {
        if (Lower(e) == Lower(ev)) evict.push_back({id, "evicted by test plugin"});
      }
    }
    if (!updates.empty() || !evict.empty()) {
      Reply r = TakeReply();
      SendUpdate(std::move(updates), std::move(evict), &r, encode());
    }
    return "";
  }

  Flags f_;
  int log_fd_ = -1;
  std::vector<Reply> hung_;
};

}  // namespace

int main(int argc, char** argv) {
  Flags f = ParseFlags(argc, argv);
  StubOptions o;
  o.argv0 = argv[0];
  o.name = f.name;
  o.index = f.idx;
  o.socket_path = f.socket_path;
  o.events = f.events;
  if (f.exit_after_register) o.on_registered = [] { ::_exit(0); };
  o.v06_service = f.old;
  TestPlugin p(o, f);
  return p.Run();
}
