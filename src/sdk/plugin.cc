// The plugin library's core (include/outpost/plugin.h). Owns: the plugin's
// socket (made under a dot name, listening, then renamed into place, so the
// agent never finds it before it accepts; removed at the end only while it
// is still the one this process made), the registration service, and
// running the plugin's methods on one loop. Built into
// liboutpost-plugin.a from base, loop and wire only.
#include "outpost/plugin.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "pluginregistration.pb.h"
#include "wire/rpc_server.h"

namespace outpost::plugin_sdk {

namespace {

constexpr const char kRegistrationService[] = "pluginregistration.Registration";
constexpr const char kDefaultPluginsDir[] = "/run/outpost/plugins";

bool ValidName(const std::string& n) {
  if (n.empty() || n[0] == '.' || n.size() > 64) return false;
  for (char c : n) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

struct Reply::State {
  wire::Responder responder;
};

void Reply::Ok(const std::string& payload) const {
  if (state_) state_->responder.Reply(payload);
}

void Reply::Fail(Code code, const std::string& message) const {
  if (state_) state_->responder.Fail(Error(static_cast<outpost::Code>(code), message));
}

bool Reply::pending() const { return state_ && state_->responder.pending(); }

struct Plugin::Impl {
  Options options;
  std::unique_ptr<Loop> loop;
  std::unique_ptr<wire::RpcServer> server;
  struct Registered {
    std::string service, method;
    Method fn;
  };
  std::vector<Registered> methods;
  std::vector<std::pair<int64_t, std::function<void()>>> early_timers;  // After() before Run()
  std::string socket;
  dev_t dev = 0;
  ino_t ino = 0;

  Status Listen();
  void RemoveSocket();
};

Plugin::Plugin(Options options) : impl_(new Impl) { impl_->options = std::move(options); }

Plugin::~Plugin() { impl_->RemoveSocket(); }

void Plugin::Handle(const std::string& service, const std::string& method, Method handler) {
  impl_->methods.push_back({service, method, std::move(handler)});
}

void Plugin::After(int64_t delay_nanos, std::function<void()> fn) {
  if (impl_->loop) {
    impl_->loop->AddTimer(delay_nanos, std::move(fn));
  } else {
    impl_->early_timers.emplace_back(delay_nanos, std::move(fn));
  }
}

bool Plugin::WatchChild(int pid, std::function<void(int status)> fn) {
  if (!impl_->loop) return false;
  return impl_->loop->WatchChild(pid, [fn = std::move(fn)](pid_t, int status) { fn(status); }).ok();
}

void Plugin::Stop() {
  if (impl_->loop) impl_->loop->Stop();
}

const std::string& Plugin::socket_path() const { return impl_->socket; }

Status Plugin::Impl::Listen() {
  std::string dir = options.plugins_dir;
  if (dir.empty()) {
    const char* env = std::getenv("OUTPOST_PLUGINS_DIR");
    dir = env && *env ? env : kDefaultPluginsDir;
  }
  std::string base = Format("%s-%d.sock", options.name.c_str(), static_cast<int>(::getpid()));
  std::string tmp = dir + "/." + base + ".new";
  std::string path = dir + "/" + base;
  if (path.size() > 107 || tmp.size() > 107) {
    return Error(outpost::Code::kInvalidArgument, Format("socket path %s is longer than 107 bytes", tmp.c_str()));
  }
  // A leftover of an earlier process with the same pid (another boot): ours
  // by name, and nobody serves it.
  for (const std::string& p : {tmp, path}) {
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && !sys::UnixConnect(p, true).ok()) ::unlink(p.c_str());
  }
  auto fd = sys::UnixListen(tmp, 128);
  if (!fd.ok()) return fd.error().Wrap("plugins dir " + dir);
  ::chmod(tmp.c_str(), 0600);
  struct stat st;
  if (::lstat(tmp.c_str(), &st) != 0) return PathError("stat", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = PathError("rename into place", tmp);
    ::unlink(tmp.c_str());
    return e;
  }
  socket = path;
  dev = st.st_dev;
  ino = st.st_ino;
  auto srv = wire::RpcServer::Create(loop.get(), std::move(*fd), [] {
    wire::ServerOptions o;
    o.name = "plugin";
    o.idle_timeout_nanos = 0;  // the agent keeps its connection open for good
    return o;
  }());
  if (!srv.ok()) return srv.error();
  server = std::move(*srv);
  return OkStatus();
}

void Plugin::Impl::RemoveSocket() {
  if (socket.empty()) return;
  struct stat st;
  if (::lstat(socket.c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino) ::unlink(socket.c_str());
  socket.clear();
}

namespace {
// A process the plugin forks (a driver's task) starts the way programs
// expect: no signal blocked (the loop blocks the ones it takes through its
// signalfd, and a mask survives exec) and SIGPIPE at its default. Without
// this a task ignores SIGTERM, and every stop waits out its kill timeout.
void ResetSignalsInChild() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
}
}  // namespace

int Plugin::Run() {
  Impl& m = *impl_;
  const Options& o = m.options;
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "plugin: %s\n", why.c_str());
    return 1;
  };
  if (o.type.empty()) return fail("options.type is empty");
  if (!ValidName(o.name)) return fail("options.name \"" + o.name + "\" must be 1-64 of A-Z a-z 0-9 . _ - and not start with '.'");
  auto loop = Loop::Create();
  if (!loop.ok()) return fail(loop.error().message());
  m.loop = std::move(*loop);
  ::signal(SIGPIPE, SIG_IGN);
  static const bool reset_in_children = ::pthread_atfork(nullptr, nullptr, ResetSignalsInChild) == 0;
  if (!reset_in_children) return fail("pthread_atfork failed");
  for (int sig : {SIGTERM, SIGINT}) {
    Status st = m.loop->AddSignal(sig, [this](const signalfd_siginfo&) { Stop(); });
    if (!st.ok()) return fail(st.error().message());
  }
  for (auto& [delay, fn] : m.early_timers) m.loop->AddTimer(delay, std::move(fn));
  m.early_timers.clear();
  Status st = m.Listen();
  if (!st.ok()) return fail(st.error().message());

  Impl* impl = impl_.get();
  m.server->Register(kRegistrationService, "GetInfo", [impl](const wire::CallContext&, std::string_view, wire::Responder r) {
    const Options& opt = impl->options;
    std::vector<char*> versions;
    for (const std::string& v : opt.versions) versions.push_back(PbStr(v));
    pluginregistration_PluginInfo info = pluginregistration_PluginInfo_init_zero;
    info.type = PbStr(opt.type);
    info.name = PbStr(opt.name);
    info.supported_versions_count = static_cast<pb_size_t>(versions.size());
    info.supported_versions = versions.data();
    r.Finish(PbEncode(pluginregistration_PluginInfo_fields, &info, "PluginInfo"));
  });
  m.server->Register(kRegistrationService, "NotifyRegistrationStatus",
                     [impl](const wire::CallContext&, std::string_view payload, wire::Responder r) {
                       PbOwned<pluginregistration_RegistrationStatus> s(pluginregistration_RegistrationStatus_fields);
                       Status decoded = s.Decode(payload, "RegistrationStatus");
                       if (!decoded.ok()) return r.Fail(decoded.error());
                       r.Reply("");
                       if (impl->options.on_registration) {
                         impl->options.on_registration(s->plugin_registered, PbString(s->error));
                       }
                     });
  for (Impl::Registered& reg : m.methods) {
    Method fn = reg.fn;
    m.server->Register(reg.service, reg.method,
                       [fn](const wire::CallContext&, std::string_view payload, wire::Responder r) {
                         Reply reply;
                         reply.state_ = std::make_shared<Reply::State>();
                         reply.state_->responder = std::move(r);
                         fn(std::string(payload), reply);
                       });
  }
  st = m.loop->Run();
  m.server.reset();
  m.RemoveSocket();
  if (!st.ok()) return fail(st.error().message());
  return 0;
}

}  // namespace outpost::plugin_sdk
