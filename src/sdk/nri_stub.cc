// The NRI plugin library's connection side (include/outpost/nri.h). Owns:
// resolving the plugin's name and index, the connection to the runtime
// (an inherited fd from NRI_PLUGIN_SOCKET, or a dialled socket), the NRI
// multiplexer with the Plugin service served on connection 1 and the
// Runtime client on connection 2, registration, and Run()'s life cycle
// (signals, Stop, a lost connection). What each Plugin method does with
// its request is nri_dispatch.cc.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "base/strings.h"
#include "base/sys.h"
#include "nriproto/codec.h"
#include "sdk/nri_internal.h"

#ifndef OUTPOST_VERSION
#define OUTPOST_VERSION "0.0.0"
#endif

namespace outpost::nri {

namespace {

constexpr const char kDefaultSocket[] = "/var/run/nri/nri.sock";

bool TwoDigits(const std::string& s) { return s.size() == 2 && s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9'; }

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::string ResolveIdentity(const StubOptions& options, std::string* name, std::string* index) {
  std::string n = !options.name.empty() ? options.name : Env("NRI_PLUGIN_NAME");
  std::string i = !options.index.empty() ? options.index : Env("NRI_PLUGIN_IDX");
  std::string base = sys::Basename(options.argv0);
  if (i.empty()) {
    size_t dash = base.find('-');
    if (dash == std::string::npos) {
      return Format("invalid plugin name \"%s\", idx-pluginname expected", base.c_str());
    }
    i = base.substr(0, dash);
    if (n.empty()) n = base.substr(dash + 1);
  } else if (n.empty()) {
    n = base;
  }
  if (!TwoDigits(i)) return Format("invalid plugin index \"%s\", must be 2 digits", i.c_str());
  if (n.empty()) return "empty plugin name";
  *name = n;
  *index = i;
  return "";
}

// ---- Reply ------------------------------------------------------------------

Stub::Reply::Reply() = default;

void Stub::Reply::Send(const std::string& payload) const {
  if (state_) state_->responder.Reply(payload);
}

void Stub::Reply::Fail(const std::string& error) const {
  if (state_) state_->responder.Fail(Error(Code::kUnknown, error));
}

bool Stub::Reply::pending() const { return state_ && state_->responder.pending(); }

// ---- Stub -------------------------------------------------------------------

Stub::Stub(StubOptions options) : impl_(std::make_shared<Impl>()) {
  impl_->self = this;
  impl_->options = std::move(options);
  impl_->events = impl_->options.events;
  std::string err = ResolveIdentity(impl_->options, &impl_->name, &impl_->index);
  if (!err.empty()) impl_->identity_error = err;
}

const std::string& Stub::name() const { return impl_->name; }
const std::string& Stub::index() const { return impl_->index; }
const ConfigureRequest& Stub::runtime() const { return impl_->runtime; }
uint32_t Stub::events() const { return impl_->events; }

void Stub::Stop() {
  impl_->stop_requested = true;
  if (impl_->loop) impl_->loop->Stop();
}

void Stub::After(int64_t delay_nanos, std::function<void()> fn) {
  if (impl_->loop) {
    impl_->loop->AddTimer(delay_nanos, std::move(fn));
  } else {
    impl_->early_timers.emplace_back(delay_nanos, std::move(fn));
  }
}

Stub::Reply Stub::TakeReply() {
  Reply r;
  if (impl_->current == nullptr) return r;  // not inside a handler: detached
  r.state_ = std::make_shared<Reply::State>();
  r.state_->responder = *impl_->current;
  impl_->reply_taken = true;
  return r;
}

void Stub::UpdateContainers(const UpdateContainersRequest& req,
                            std::function<void(const std::string& error, const UpdateContainersResponse& resp)> done) {
  Impl& m = *impl_;
  if (!m.client || !m.loop) {
    auto fail = [done = std::move(done)] { done("not connected to the runtime", UpdateContainersResponse{}); };
    if (m.loop) {
      m.loop->Defer(std::move(fail));
    } else {
      fail();
    }
    return;
  }
  m.client->Call(kRuntimeService, "UpdateContainers", nriproto::Encode(req), 0,
                 [done = std::move(done)](Result<std::string> reply) {
                   UpdateContainersResponse resp;
                   if (!reply.ok()) return done(reply.error().message(), resp);
                   Status st = nriproto::Decode(*reply, &resp);
                   if (!st.ok()) return done(st.error().message(), resp);
                   done("", resp);
                 });
}

// ---- Run ------------------------------------------------------------------

void Stub::Impl::Log(const std::string& msg) const {
  std::fprintf(stderr, "nri plugin %s-%s: %s\n", index.c_str(), name.c_str(), msg.c_str());
}

void Stub::Impl::Finish(int code, const std::string& why) {
  if (finished) return;
  finished = true;
  exit_code = code;
  if (!why.empty()) Log(why);
  if (loop) loop->Stop();
}

void Stub::Impl::Lost(const std::string& why) {
  if (finished || stop_requested) return;
  Finish(1, "Connection to the runtime lost, exiting... (" + why + ")");
  if (options.on_close) options.on_close(why);
}

Result<UniqueFd> Stub::Impl::ConnectFd() {
  std::string env = Env("NRI_PLUGIN_SOCKET");
  if (!env.empty()) {
    // Children (a hook the plugin runs, say) must not think they are plugins.
    ::unsetenv("NRI_PLUGIN_SOCKET");
    auto fd = ParseInt(env, 0, 1 << 30);
    if (!fd.ok()) {
      return Error(Code::kInvalidArgument, Format("invalid socket in environment (NRI_PLUGIN_SOCKET=\"%s\")", env.c_str()));
    }
    int raw = static_cast<int>(*fd);
    if (::fcntl(raw, F_GETFD) < 0) {
      return Error(Code::kInvalidArgument, Format("invalid socket (%d) in environment: not open", raw));
    }
    ::fcntl(raw, F_SETFD, FD_CLOEXEC);
    return UniqueFd(raw);
  }
  std::string path = options.socket_path.empty() ? kDefaultSocket : options.socket_path;
  auto fd = sys::UnixConnect(path, false);
  if (!fd.ok()) return fd.error().Wrap("failed to connect to NRI service " + path);
  return fd;
}

Status Stub::Impl::Connect() {
  auto fd = ConnectFd();
  if (!fd.ok()) return fd.error();
  sys::PeerCred peer{};
  auto cred = sys::GetPeerCred(fd->get());
  if (cred.ok()) peer = *cred;
  wire::MuxOptions mo;
  mo.name = "nri-" + index + "-" + name;
  auto trunk_or = wire::MuxTrunk::Create(loop.get(), std::move(*fd), mo);
  if (!trunk_or.ok()) return trunk_or.error();
  trunk = std::move(*trunk_or);

  wire::ServerOptions so;
  so.name = "nri-plugin";
  so.allow_any_uid = true;  // the connection is ours; the runtime may run as anyone
  so.idle_timeout_nanos = 0;
  so.frame_timeout_nanos = 0;
  auto srv = wire::RpcServer::Create(loop.get(), UniqueFd(), so);
  if (!srv.ok()) return srv.error();
  server = std::move(*srv);
  RegisterMethods();
  auto added = server->AddLink(trunk->Open(kPluginServiceConn), peer);
  if (!added.ok()) return added.error();

  wire::ClientOptions co;
  co.name = "nri-runtime";
  auto cli = wire::RpcClient::CreateOnLink(loop.get(), trunk->Open(kRuntimeServiceConn), co);
  if (!cli.ok()) return cli.error();
  client = std::move(*cli);

  trunk->SetCloseCallback([this](const Error& why) { Lost(why.message()); });
  return trunk->Start();
}

void Stub::Impl::Register() {
  RegisterPluginRequest req;
  req.plugin_name = name;
  req.plugin_idx = index;
  req.nri_version = "outpost-" OUTPOST_VERSION;
  int64_t timeout = options.registration_timeout_ms > 0 ? options.registration_timeout_ms * 1000000 : 0;
  client->Call(kRuntimeService, "RegisterPlugin", nriproto::Encode(req), timeout, [this](Result<std::string> r) {
    if (!r.ok()) {
      Finish(1, "failed to register with NRI/Runtime: " + r.error().message());
      return;
    }
    registered = true;
    if (options.on_registered) options.on_registered();
  });
}

void Stub::Impl::Reset() {
  client.reset();
  server.reset();
  trunk.reset();
  loop.reset();
}

int Stub::Run() {
  Impl& m = *impl_;
  if (!m.identity_error.empty()) {
    std::fprintf(stderr, "nri plugin: %s\n", m.identity_error.c_str());
    return 1;
  }
  m.finished = false;
  m.stop_requested = false;
  m.exit_code = 0;
  m.registered = false;
  m.configured = false;
  m.events = m.options.events;
  m.sync_pending = SynchronizeRequest{};
  m.sync_buffered = false;
  auto loop = Loop::Create();
  if (!loop.ok()) {
    m.Log(loop.error().message());
    return 1;
  }
  m.loop = std::move(*loop);
  ::signal(SIGPIPE, SIG_IGN);
  for (int sig : {SIGTERM, SIGINT}) {
    Status st = m.loop->AddSignal(sig, [this](const signalfd_siginfo&) { Stop(); });
    if (!st.ok()) {
      m.Log(st.error().message());
      m.Reset();
      return 1;
    }
  }
  for (auto& [delay, fn] : m.early_timers) m.loop->AddTimer(delay, std::move(fn));
  m.early_timers.clear();

  Status st = m.Connect();
  if (!st.ok()) {
    m.Log(st.error().message());
    m.Reset();
    return 1;
  }
  m.Register();
  Status ran = m.loop->Run();
  int code = m.stop_requested && !m.finished ? 0 : m.exit_code;
  if (!ran.ok()) {
    m.Log(ran.error().message());
    code = 1;
  }
  m.Reset();
  return code;
}

}  // namespace outpost::nri
