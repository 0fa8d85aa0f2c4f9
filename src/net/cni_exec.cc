#include "net/cni_exec.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "loop/loop.h"
#include "proc/child_run.h"
#include "proc/exit_status.h"

extern char** environ;

namespace outpost::net {

namespace {

// Per stream (ChildRun has one bound for both): a result can list many
// interfaces and addresses.
constexpr size_t kOutputLimit = 1 << 20;
// libcni retries an exec that failed with ETXTBSY (the binary still open for
// writing, as while a package manager installs it) this many times.
constexpr int kBusyRetries = 5;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// proc/spawn reports an exec failure as "exec '<path>': <strerror> (exit
// status 126)" without keeping the errno, so the text is checked too.
bool IsTextBusy(const Error& e) {
  return e.sys_errno() == ETXTBSY || e.message().find(std::strerror(ETXTBSY)) != std::string::npos;
}

// "60s" for whole seconds (how timeouts are configured), else "200ms".
std::string TimeoutText(int64_t nanos) {
  if (nanos > 0 && nanos % kNanosPerSecond == 0) {
    return Format("%llds", static_cast<long long>(nanos / kNanosPerSecond));
  }
  return FormatDuration(nanos);
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One plugin call: the child run, with the ETXTBSY retries in between. done
// runs once, from the loop; never after the Call is destroyed.
struct Call {
  using Done = std::function<void(Result<proc::ChildRunResult>)>;
  Loop* loop = nullptr;
  proc::ChildRunRequest req;
  int64_t busy_retry_nanos = 0;
  int retries_left = kBusyRetries;
  int64_t started_mono = 0;
  Loop::TimerId retry_timer = 0;
  std::unique_ptr<proc::ChildRun> child;
  Done done;
  std::shared_ptr<Call> keep;  // set while a Call owns itself (ProbeVersion)

  ~Call() {
    if (retry_timer) loop->CancelTimer(retry_timer);
  }

  // Must run from the loop: it may call done at once.
  static void Try(std::shared_ptr<Call> self);
  static void Finish(std::shared_ptr<Call> self, Result<proc::ChildRunResult> r);
};

void Call::Finish(std::shared_ptr<Call> self, Result<proc::ChildRunResult> r) {
  Done done = std::move(self->done);
  self->done = nullptr;
  std::shared_ptr<Call> keep = std::move(self->keep);  // alive until done returns
  if (done) done(std::move(r));
}

void Call::Try(std::shared_ptr<Call> self) {
  if (self->started_mono == 0) self->started_mono = MonotonicNanos();
  std::weak_ptr<Call> weak = self;
  auto run = proc::ChildRun::Start(self->loop, self->req, [weak](const proc::ChildRunResult& r) {
    auto s = weak.lock();
    if (!s || !s->done) return;
    Finish(s, r);
  });
  if (run.ok()) {
    self->child = std::move(*run);
    return;
  }
  if (IsTextBusy(run.error()) && self->retries_left > 0) {
    --self->retries_left;
    self->retry_timer = self->loop->AddTimer(self->busy_retry_nanos, [weak] {
      auto s = weak.lock();
      if (!s) return;
      s->retry_timer = 0;
      Try(s);
    });
    return;
  }
  Finish(self, run.error());
}

// What a call came to, as the error a user reads ("plugin bridge: ...");
// OK when the plugin succeeded.
Status CallStatus(const std::string& type, const Result<proc::ChildRunResult>& r, int64_t timeout_nanos) {
  const std::string who = "plugin " + type + ": ";
  if (!r.ok()) return r.error().Wrap("plugin " + type);
  if (r->timed_out) {
    return Error(Code::kDeadlineExceeded, who + "ran past its timeout of " + TimeoutText(timeout_nanos) + "; killed");
  }
  if (r->Succeeded()) return OkStatus();
  CniError e = ParseCniError(r->out, r->err);
  std::string text = DescribeCniError(e);
  if (e.msg.empty() && e.code == 0) {
    // Nothing printed: the exit itself is all there is to say.
    text = r->exit.signal ? Format("killed by %s", proc::SignalName(r->exit.signal))
                          : Format("exit code %d with no output", r->exit.exit_code);
  }
  return Error(Code::kFailedPrecondition, who + text);
}

proc::ChildRunRequest PluginRequest(const std::string& path, std::vector<std::string> env, std::string stdin_data,
                                    int64_t timeout_nanos) {
  proc::ChildRunRequest req;
  req.path = path;
  req.argv = {path};
  req.env = std::move(env);
  req.stdin_data = std::move(stdin_data);
  req.output_limit = kOutputLimit;
  req.timeout_nanos = timeout_nanos;
  return req;
}

}  // namespace

Status ValidateAttachment(const Attachment& a) {
  const std::string& id = a.container_id;
  if (id.empty()) return Error(Code::kInvalidArgument, "container id: missing");
  bool id_ok = IsNameChar(id[0]);
  for (size_t i = 1; id_ok && i < id.size(); ++i) {
    char c = id[i];
    id_ok = IsNameChar(c) || c == '_' || c == '.' || c == '-';
  }
  if (!id_ok) {
    return Error(Code::kInvalidArgument,
                 "container id \"" + id + "\": must match ^[a-zA-Z0-9][a-zA-Z0-9_.\\-]*$");
  }
  const std::string& ifn = a.ifname;
  if (ifn.empty()) return Error(Code::kInvalidArgument, "interface name: missing");
  if (ifn.size() > 15) {
    return Error(Code::kInvalidArgument, "interface name \"" + ifn + "\": longer than 15 characters");
  }
  if (ifn == "." || ifn == "..") {
    return Error(Code::kInvalidArgument, "interface name \"" + ifn + "\": not a valid name");
  }
  for (char c : ifn) {
    if (c == '/' || c == ':' || IsBlank(c)) {
      return Error(Code::kInvalidArgument, "interface name \"" + ifn + "\": may not contain '/', ':' or spaces");
    }
  }
  for (const auto& [k, v] : a.cni_args) {
    if (k.empty()) return Error(Code::kInvalidArgument, "CNI_ARGS: a key is empty");
    if (k.find_first_of(";=") != std::string::npos) {
      return Error(Code::kInvalidArgument, "CNI_ARGS key \"" + k + "\": may not contain ';' or '='");
    }
    if (v.find(';') != std::string::npos) {
      return Error(Code::kInvalidArgument, "CNI_ARGS " + k + ": the value may not contain ';'");
    }
  }
  return OkStatus();
}

Result<std::string> FindPlugin(const std::vector<std::string>& path, const std::string& type) {
  if (type.empty()) return Error(Code::kInvalidArgument, "plugin type is empty");
  if (type.find('/') != std::string::npos) {
    return Error(Code::kInvalidArgument, "plugin type \"" + type + "\" may not contain '/'");
  }
  for (const std::string& dir : path) {
    if (dir.empty()) continue;
    std::string candidate = dir.back() == '/' ? dir + type : dir + "/" + type;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return candidate;
  }
  return Error(Code::kNotFound,
               "failed to find plugin \"" + type + "\" in path [" + JoinStrings(path, " ") + "]");
}

std::string PluginStdin(const NetworkList& list, size_t i, const picojson::value& prev_result,
                        const picojson::object& capability_args) {
  const PluginConf& p = list.plugins.at(i);
  picojson::object conf = p.raw;
  conf["name"] = picojson::value(list.name);
  conf["cniVersion"] = picojson::value(list.cni_version);
  if (prev_result.is<picojson::null>()) {
    conf.erase("prevResult");
  } else {
    conf["prevResult"] = prev_result;
  }
  // Only the capabilities the plugin asked for (libcni injectRuntimeConfig).
  picojson::object rc;
  for (const auto& [cap, wanted] : p.capabilities) {
    if (!wanted) continue;
    auto it = capability_args.find(cap);
    if (it != capability_args.end()) rc[cap] = it->second;
  }
  if (rc.empty()) {
    conf.erase("runtimeConfig");
  } else {
    conf["runtimeConfig"] = picojson::value(std::move(rc));
  }
  return picojson::value(std::move(conf)).serialize();
}

std::vector<std::string> PluginEnvironment(const std::string& command, const Attachment& a,
                                           const std::vector<std::string>& path) {
  std::vector<std::string> all;
  for (char** e = environ; e && *e; ++e) all.emplace_back(*e);
  std::string args;
  if (!a.cni_args.empty()) {
    args = "IgnoreUnknown=1";
    for (const auto& [k, v] : a.cni_args) args += ";" + k + "=" + v;
  }
  all.push_back("CNI_COMMAND=" + command);
  all.push_back("CNI_CONTAINERID=" + a.container_id);
  all.push_back("CNI_NETNS=" + a.netns);
  all.push_back("CNI_IFNAME=" + a.ifname);
  all.push_back("CNI_ARGS=" + args);
  all.push_back("CNI_PATH=" + JoinStrings(path, ":"));
  // Later entries win: keep the last of each key, in the order given.
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < all.size(); ++i) last[all[i].substr(0, all[i].find('='))] = i;
  std::vector<std::string> env;
  env.reserve(last.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if (last[all[i].substr(0, all[i].find('='))] == i) env.push_back(std::move(all[i]));
  }
  return env;
}

// ---- ListOp ----------------------------------------------------------------

struct ListOp::State {
  Loop* loop = nullptr;
  PluginEnv env;
  NetworkList list;
  std::string command;
  Attachment attachment;
  picojson::value cached;
  Done done;

  Status invalid;             // found by Start, reported from the loop
  std::vector<size_t> order;  // plugin indexes in call order
  size_t pos = 0;
  picojson::value prev;       // ADD: the last plugin's result
  Status first_failure;
  std::vector<PluginTiming> timings;
  int64_t started_mono = 0;
  bool stopped = false;
  std::shared_ptr<Call> call;

  static void Next(const std::shared_ptr<State>& s);
  static void OnCall(const std::shared_ptr<State>& s, size_t i, Result<proc::ChildRunResult> r);
  // Records a failure; whether the operation goes on is the caller's.
  void Fail(const Error& e) {
    if (first_failure.ok()) first_failure = e;
  }
  static void Finish(const std::shared_ptr<State>& s);
};

std::unique_ptr<ListOp> ListOp::Start(Loop* loop, const PluginEnv& env, const NetworkList& list,
                                      const std::string& command, const Attachment& a,
                                      const picojson::value& cached, Done done) {
  auto s = std::make_shared<State>();
  s->loop = loop;
  s->env = env;
  s->list = list;
  s->command = command;
  s->attachment = a;
  s->cached = cached;
  s->done = std::move(done);
  s->started_mono = MonotonicNanos();
  if (command != "ADD" && command != "DEL" && command != "CHECK") {
    s->invalid = Error(Code::kInvalidArgument, "unknown CNI command \"" + command + "\"");
  } else if (Status st = ValidateAttachment(a); !st.ok()) {
    s->invalid = st;
  } else if (command != "DEL" && a.netns.empty()) {
    s->invalid = Error(Code::kInvalidArgument, "network namespace: missing (needed for " + command + ")");
  } else if (command == "CHECK" && CompareVersions(list.cni_version, "0.4.0") < 0) {
    s->invalid = Error(Code::kFailedPrecondition, "CHECK needs cniVersion 0.4.0 or newer");
  }
  for (size_t i = 0; i < list.plugins.size(); ++i) s->order.push_back(i);
  if (command == "DEL") std::reverse(s->order.begin(), s->order.end());
  std::weak_ptr<State> weak = s;
  loop->Defer([weak] {
    auto st = weak.lock();
    if (!st || st->stopped) return;
    if (!st->invalid.ok()) {
      st->first_failure = st->invalid;
      return State::Finish(st);
    }
    State::Next(st);
  });
  return std::unique_ptr<ListOp>(new ListOp(std::move(s)));
}

ListOp::~ListOp() {
  state_->stopped = true;
  state_->done = nullptr;
  state_->call.reset();  // kills a plugin still running
}

void ListOp::State::Finish(const std::shared_ptr<State>& s) {
  s->stopped = true;
  s->call.reset();
  ListOutcome out;
  out.status = s->first_failure;
  if (s->command == "ADD" && s->first_failure.ok()) out.result = s->prev;
  out.timings = std::move(s->timings);
  out.nanos = MonotonicNanos() - s->started_mono;
  Done done = std::move(s->done);
  s->done = nullptr;
  if (done) done(std::move(out));
}

void ListOp::State::Next(const std::shared_ptr<State>& s) {
  const bool is_del = s->command == "DEL";
  while (!s->stopped) {
    if (s->pos >= s->order.size()) return Finish(s);
    const size_t i = s->order[s->pos++];
    const PluginConf& p = s->list.plugins[i];
    auto found = FindPlugin(s->env.path, p.type);
    if (!found.ok()) {
      if (!is_del) {
        s->Fail(found.error().Wrap("plugin " + p.type));
        return Finish(s);
      }
      // DEL: a plugin that is not installed cannot clean anything up, now or
      // later; failing the DEL would keep the attachment (and its namespace)
      // forever. Every other plugin still gets its call.
      log::Warn("CNI DEL skips a plugin that is not installed",
                {{"plugin", p.type}, {"network", s->list.name}, {"error", found.error().message()}});
      continue;
    }
    const picojson::value& prev = s->command == "ADD" ? s->prev : s->cached;
    auto call = std::make_shared<Call>();
    call->loop = s->loop;
    call->busy_retry_nanos = s->env.busy_retry_nanos;
    call->req = PluginRequest(*found, PluginEnvironment(s->command, s->attachment, s->env.path),
                              PluginStdin(s->list, i, prev, s->attachment.capability_args), s->env.timeout_nanos);
    std::weak_ptr<State> weak = s;
    call->done = [weak, i](Result<proc::ChildRunResult> r) {
      auto st = weak.lock();
      if (!st || st->stopped) return;
      OnCall(st, i, std::move(r));
    };
    s->call = call;
    Call::Try(call);
    return;
  }
}

void ListOp::State::OnCall(const std::shared_ptr<State>& s, size_t i, Result<proc::ChildRunResult> r) {
  std::shared_ptr<Call> call = std::move(s->call);  // freed once this returns
  const PluginConf& p = s->list.plugins[i];
  s->timings.push_back(PluginTiming{p.type, MonotonicNanos() - call->started_mono});
  Status st = CallStatus(p.type, r, s->env.timeout_nanos);
  if (st.ok() && s->command == "ADD") {
    auto parsed = ParseCniResult(r->out, s->list.cni_version);
    if (parsed.ok()) {
      s->prev = std::move(parsed->raw);
    } else {
      st = Error(Code::kFailedPrecondition, "plugin " + p.type + ": invalid result: " + parsed.error().message());
    }
  }
  if (!st.ok()) {
    s->Fail(st.error());
    if (s->command != "DEL") return Finish(s);
  }
  Next(s);
}

// ---- ProbeVersion ----------------------------------------------------------

void ProbeVersion(Loop* loop, const PluginEnv& env, const std::string& binary,
                  std::function<void(Result<std::vector<std::string>>)> done) {
  // The dummy values libcni's GetVersionInfo passes; the container id is
  // left empty as there.
  Attachment a;
  a.netns = "dummy";
  a.ifname = "dummy";
  auto call = std::make_shared<Call>();
  call->loop = loop;
  call->busy_retry_nanos = env.busy_retry_nanos;
  call->req = PluginRequest(binary, PluginEnvironment("VERSION", a, {"dummy"}), "{\"cniVersion\":\"1.0.0\"}",
                            env.timeout_nanos);
  const std::string type = Basename(binary);
  const int64_t timeout = env.timeout_nanos;
  call->done = [type, timeout, done = std::move(done)](Result<proc::ChildRunResult> r) {
    if (r.ok() && !r->timed_out && !r->Succeeded()) {
      // Plugins older than spec 0.2.0 do not know VERSION.
      CniError e = ParseCniError(r->out, r->err);
      if (e.msg == "unknown CNI_COMMAND: VERSION") return done(std::vector<std::string>{"0.1.0"});
    }
    Status st = CallStatus(type, r, timeout);
    if (!st.ok()) return done(st.error());
    auto versions = ParseVersionAnswer(r->out);
    if (!versions.ok()) return done(versions.error().Wrap("plugin " + type + ": invalid VERSION answer"));
    done(std::move(*versions));
  };
  call->keep = call;  // owns itself until done has run
  loop->Defer([call] { Call::Try(call); });
}

}  // namespace outpost::net
