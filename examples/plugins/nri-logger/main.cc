// nri-logger: an example NRI plugin on outpost's NRI plugin library
// (include/outpost/nri.h), after upstream's logger sample. Logs every
// request it gets as YAML-like text, and can inject an annotation or an
// environment variable into each container it sees created.
//
//   nri-logger [-idx NN] [-name NAME] [-socket-path PATH] [-events LIST]
//              [-log-file FILE] [-add-annotation K] [-set-annotation K]
//              [-add-env K] [-set-env K]
//
// -events: comma list of event names (case-insensitive: createcontainer,
// RunPodSandbox, ...), or "all" (the default), "pod", "container".
// The injected value is "logger-pid-<pid>"; -set-* removes the key first,
// overriding an earlier plugin. Installed in the runtime's plugin dir as
// NN-logger it needs no flags.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "outpost/nri.h"

using namespace outpost::nri;

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

// "" or the error.
std::string ParseEvents(const std::string& list, uint32_t* mask) {
  *mask = 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string n = Lower(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (n.empty()) continue;
    if (n == "all") {
      *mask |= kValidEvents;
    } else if (n == "pod") {
      for (Event e : {Event::kRunPodSandbox, Event::kStopPodSandbox, Event::kRemovePodSandbox,
                      Event::kUpdatePodSandbox, Event::kPostUpdatePodSandbox})
        *mask |= EventMask(e);
    } else if (n == "container") {
      for (int e = 4; e <= 11; e++) *mask |= EventMask(static_cast<Event>(e));
    } else {
      bool found = false;
      for (int e = 1; e < static_cast<int>(Event::kLast); e++) {
        if (Lower(EventMethod(static_cast<Event>(e))) == n) {
          *mask |= EventMask(static_cast<Event>(e));
          found = true;
        }
      }
      if (!found) return "unknown event \"" + n + "\"";
    }
  }
  return "";
}

// A double-quoted YAML scalar.
std::string Q(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

class Yaml {
 public:
  void Field(int indent, const std::string& key, const std::string& value) {
    out_ += std::string(indent, ' ') + key + ": " + value + "\n";
  }
  void Key(int indent, const std::string& key) { out_ += std::string(indent, ' ') + key + ":\n"; }
  void Item(int indent, const std::string& value) { out_ += std::string(indent, ' ') + "- " + value + "\n"; }
  void Map(int indent, const std::string& key, const std::map<std::string, std::string>& m) {
    if (m.empty()) return;
    Key(indent, key);
    for (const auto& [k, v] : m) Field(indent + 2, Q(k), Q(v));
  }
  void List(int indent, const std::string& key, const std::vector<std::string>& l) {
    if (l.empty()) return;
    Key(indent, key);
    for (const std::string& s : l) Item(indent + 2, Q(s));
  }
  void Resources(int indent, const std::string& key, const outpost::nri::Resources& r) {
    Key(indent, key);
    if (r.memory) {
      Key(indent + 2, "memory");
      if (r.memory->limit) Field(indent + 4, "limit", std::to_string(*r.memory->limit));
      if (r.memory->reservation) Field(indent + 4, "reservation", std::to_string(*r.memory->reservation));
      if (r.memory->swap) Field(indent + 4, "swap", std::to_string(*r.memory->swap));
    }
    if (r.cpu) {
      Key(indent + 2, "cpu");
      if (r.cpu->shares) Field(indent + 4, "shares", std::to_string(*r.cpu->shares));
      if (r.cpu->quota) Field(indent + 4, "quota", std::to_string(*r.cpu->quota));
      if (r.cpu->period) Field(indent + 4, "period", std::to_string(*r.cpu->period));
      if (!r.cpu->cpus.empty()) Field(indent + 4, "cpus", Q(r.cpu->cpus));
      if (!r.cpu->mems.empty()) Field(indent + 4, "mems", Q(r.cpu->mems));
    }
    if (r.pids_limit) Field(indent + 2, "pids", std::to_string(*r.pids_limit));
    Map(indent + 2, "unified", r.unified);
  }
  void Pod(int indent, const PodSandbox& p) {
    Key(indent, "pod");
    Field(indent + 2, "id", Q(p.id));
    Field(indent + 2, "name", Q(p.name));
    Field(indent + 2, "uid", Q(p.uid));
    Field(indent + 2, "namespace", Q(p.namespace_));
    Map(indent + 2, "labels", p.labels);
    Map(indent + 2, "annotations", p.annotations);
    if (!p.runtime_handler.empty()) Field(indent + 2, "runtime_handler", Q(p.runtime_handler));
    if (!p.cgroup_parent.empty()) Field(indent + 2, "cgroup_parent", Q(p.cgroup_parent));
    if (p.pid) Field(indent + 2, "pid", std::to_string(p.pid));
    List(indent + 2, "ips", p.ips);
  }
  void Ctr(int indent, const Container& c) {
    Key(indent, "container");
    Field(indent + 2, "id", Q(c.id));
    Field(indent + 2, "pod_sandbox_id", Q(c.pod_sandbox_id));
    Field(indent + 2, "name", Q(c.name));
    Field(indent + 2, "state", std::to_string(static_cast<int>(c.state)));
    Map(indent + 2, "labels", c.labels);
    Map(indent + 2, "annotations", c.annotations);
    List(indent + 2, "args", c.args);
    List(indent + 2, "env", c.env);
    if (!c.mounts.empty()) {
      Key(indent + 2, "mounts");
      for (const Mount& m : c.mounts) Item(indent + 4, "{destination: " + Q(m.destination) + ", type: " + Q(m.type) +
                                                            ", source: " + Q(m.source) + "}");
    }
    if (c.resources) Resources(indent + 2, "resources", *c.resources);
    if (c.oom_score_adj) Field(indent + 2, "oom_score_adj", std::to_string(*c.oom_score_adj));
    if (!c.cgroups_path.empty()) Field(indent + 2, "cgroups_path", Q(c.cgroups_path));
    if (c.pid) Field(indent + 2, "pid", std::to_string(c.pid));
    if (c.exit_code) Field(indent + 2, "exit_code", std::to_string(c.exit_code));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

struct Flags {
  std::string idx, name, socket_path, log_file;
  std::string events = "all";
  std::vector<std::string> add_annotation, set_annotation, add_env, set_env;
};

class Logger : public Stub {
 public:
  Logger(StubOptions o, Flags f, int log_fd) : Stub(std::move(o)), f_(std::move(f)), fd_(log_fd) {}

  std::string Configure(const ConfigureRequest& req, uint32_t* events) override {
    Yaml y;
    y.Field(0, "config", Q(req.config));
    y.Field(0, "runtime", Q(req.runtime_name));
    y.Field(0, "version", Q(req.runtime_version));
    y.Field(0, "nri_version", Q(req.nri_version));
    Emit("Configure", y);
    (void)events;  // the subscription from -events stands
    return "";
  }

  std::string Synchronize(const std::vector<PodSandbox>& pods, const std::vector<Container>& ctrs,
                          std::vector<ContainerUpdate>*) override {
    Yaml y;
    for (const PodSandbox& p : pods) y.Pod(0, p);
    for (const Container& c : ctrs) y.Ctr(0, c);
    Emit("Synchronize (" + std::to_string(pods.size()) + " pods, " + std::to_string(ctrs.size()) + " containers)",
         y);
    return "";
  }

  void Shutdown() override { Emit("Shutdown", Yaml()); }

  std::string RunPodSandbox(const PodSandbox& p) override { return PodOnly("RunPodSandbox", p); }
  std::string StopPodSandbox(const PodSandbox& p) override { return PodOnly("StopPodSandbox", p); }
  std::string RemovePodSandbox(const PodSandbox& p) override { return PodOnly("RemovePodSandbox", p); }
  std::string PostUpdatePodSandbox(const PodSandbox& p) override { return PodOnly("PostUpdatePodSandbox", p); }
  std::string UpdatePodSandbox(const UpdatePodSandboxRequest& req) override {
    Yaml y;
    if (req.pod) y.Pod(0, *req.pod);
    if (req.linux_resources) y.Resources(0, "linux_resources", *req.linux_resources);
    Emit("UpdatePodSandbox", y);
    return "";
  }

  std::string CreateContainer(const PodSandbox& pod, const Container& c, CreateContainerResponse* out) override {
    Yaml y;
    y.Pod(0, pod);
    y.Ctr(0, c);
    Emit("CreateContainer", y);
    std::string value = "logger-pid-" + std::to_string(::getpid());
    if (f_.add_annotation.empty() && f_.set_annotation.empty() && f_.add_env.empty() && f_.set_env.empty()) {
      return "";
    }
    ContainerAdjustment& adj = out->adjust.emplace();
    for (const std::string& k : f_.add_annotation) adj.annotations[k] = value;
    for (const std::string& k : f_.set_annotation) {
      adj.annotations["-" + k] = "";
      adj.annotations[k] = value;
    }
    for (const std::string& k : f_.add_env) adj.env.push_back({k, value});
    for (const std::string& k : f_.set_env) {
      adj.env.push_back({"-" + k, ""});
      adj.env.push_back({k, value});
    }
    return "";
  }

  std::string PostCreateContainer(const PodSandbox& p, const Container& c) override {
    return PodCtr("PostCreateContainer", p, c);
  }
  std::string StartContainer(const PodSandbox& p, const Container& c) override { return PodCtr("StartContainer", p, c); }
  std::string PostStartContainer(const PodSandbox& p, const Container& c) override {
    return PodCtr("PostStartContainer", p, c);
  }
  std::string PostUpdateContainer(const PodSandbox& p, const Container& c) override {
    return PodCtr("PostUpdateContainer", p, c);
  }
  std::string RemoveContainer(const PodSandbox& p, const Container& c) override {
    return PodCtr("RemoveContainer", p, c);
  }
  std::string StopContainer(const PodSandbox& p, const Container& c, StopContainerResponse*) override {
    return PodCtr("StopContainer", p, c);
  }
  std::string UpdateContainer(const PodSandbox& p, const Container& c, const Resources& r,
                              UpdateContainerResponse*) override {
    Yaml y;
    y.Pod(0, p);
    y.Ctr(0, c);
    y.Resources(0, "linux_resources", r);
    Emit("UpdateContainer", y);
    return "";
  }
  std::string ValidateContainerAdjustment(const ValidateContainerAdjustmentRequest& req,
                                          ValidateContainerAdjustmentResponse*) override {
    Yaml y;
    if (req.pod) y.Pod(0, *req.pod);
    if (req.container) y.Ctr(0, *req.container);
    if (!req.plugins.empty()) {
      y.Key(0, "plugins");
      for (const PluginInstance& p : req.plugins) y.Item(2, Q(p.index + "-" + p.name));
    }
    Emit("ValidateContainerAdjustment", y);
    return "";
  }

 private:
  std::string PodOnly(const char* what, const PodSandbox& p) {
    Yaml y;
    y.Pod(0, p);
    Emit(what, y);
    return "";
  }
  std::string PodCtr(const char* what, const PodSandbox& p, const Container& c) {
    Yaml y;
    y.Pod(0, p);
    y.Ctr(0, c);
    Emit(what, y);
    return "";
  }
  // One write per request, each body line prefixed with the event.
  void Emit(const std::string& what, Yaml y) {
    std::string body = y.Take();
    std::string text = "=== " + what + " ===\n";
    size_t start = 0;
    while (start < body.size()) {
      size_t nl = body.find('\n', start);
      text += "  " + body.substr(start, nl - start + 1);
      start = nl + 1;
    }
    const char* p = text.data();
    size_t left = text.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n <= 0) return;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

  Flags f_;
  int fd_;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "nri-logger: %s\n"
               "usage: nri-logger [-idx NN] [-name NAME] [-socket-path PATH] [-events LIST] [-log-file FILE]\n"
               "                  [-add-annotation K] [-set-annotation K] [-add-env K] [-set-env K]\n",
               why.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    while (!a.empty() && a[0] == '-') a.erase(0, 1);
    std::string v;
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else {
      if (a == "h" || a == "help") Usage("help");
      if (i + 1 >= argc) Usage("-" + a + " needs a value");
      v = argv[++i];
    }
    if (a == "idx") f.idx = v;
    else if (a == "name") f.name = v;
    else if (a == "socket-path") f.socket_path = v;
    else if (a == "log-file") f.log_file = v;
    else if (a == "events") f.events = v;
    else if (a == "add-annotation") f.add_annotation.push_back(v);
    else if (a == "set-annotation") f.set_annotation.push_back(v);
    else if (a == "add-env") f.add_env.push_back(v);
    else if (a == "set-env") f.set_env.push_back(v);
    else Usage("unknown flag -" + a);
  }
  StubOptions o;
  o.argv0 = argv[0];
  o.name = f.name;
  o.index = f.idx;
  o.socket_path = f.socket_path;
  std::string err = ParseEvents(f.events, &o.events);
  if (!err.empty()) Usage(err);
  int fd = 2;
  if (!f.log_file.empty()) {
    fd = ::open(f.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) Usage("cannot open " + f.log_file);
  }
  Logger logger(o, f, fd);
  return logger.Run();
}
