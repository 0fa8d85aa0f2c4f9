#include "driver/nomad/plugin_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "proc/exit_status.h"
#include "proc/spawn.h"

extern char** environ;

namespace outpost::driver::nomad {

namespace {

// A handshake line or a log line longer than this is cut (a plugin that
// prints without newlines must not make the agent buffer without bound).
constexpr size_t kMaxLine = 64 << 10;

std::vector<std::string_view> SplitBar(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t bar = s.find('|', start);
    out.push_back(s.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start));
    if (bar == std::string_view::npos) return out;
    start = bar + 1;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

int LevelOf(std::string_view name) {
  if (name == "error") return static_cast<int>(log::Level::kError);
  if (name == "warn") return static_cast<int>(log::Level::kWarn);
  if (name == "info") return static_cast<int>(log::Level::kInfo);
  return static_cast<int>(log::Level::kDebug);  // trace, debug, anything else
}

}  // namespace

Result<Handshake> ParseHandshake(std::string_view line) {
  line = Trim(line);
  std::vector<std::string_view> f = SplitBar(line);
  auto bad = [&](const std::string& why) {
    return Error(Code::kFailedPrecondition, why + " (handshake line \"" + std::string(line.substr(0, 200)) + "\")");
  };
  if (f.size() < 4) return bad("not a go-plugin handshake: expected at least 4 fields separated by '|'");
  Handshake h;
  auto num = [](std::string_view s, int* out) {
    auto v = ParseInt(s, 0, 1000);
    if (!v.ok()) return false;
    *out = static_cast<int>(*v);
    return true;
  };
  if (!num(f[0], &h.core_version) || h.core_version != kCoreProtocolVersion) {
    return bad("incompatible go-plugin core protocol version " + std::string(f[0]) + " (outpost speaks " +
               std::to_string(kCoreProtocolVersion) + ")");
  }
  if (!num(f[1], &h.app_version) || h.app_version != kAppProtocolVersion) {
    return bad("incompatible Nomad plugin protocol version " + std::string(f[1]) + " (outpost speaks " +
               std::to_string(kAppProtocolVersion) + ", Nomad's since 0.9)");
  }
  h.network = std::string(f[2]);
  h.address = std::string(f[3]);
  h.protocol = f.size() > 4 ? std::string(f[4]) : "netrpc";
  if (h.protocol != "grpc") {
    return bad("the plugin speaks go-plugin's " + (h.protocol.empty() ? std::string("netrpc") : h.protocol) +
               " protocol; outpost hosts gRPC plugins only");
  }
  // go-plugin ignores a certificate of 50 characters or fewer.
  if (f.size() > 5 && f[5].size() > 50) {
    return bad("the plugin asks for TLS (go-plugin AutoMTLS); outpost speaks to plugins over a local unix socket "
               "without TLS");
  }
  if (h.network != "unix") return bad("network \"" + h.network + "\": outpost connects to plugins over unix sockets");
  if (h.address.empty() || h.address[0] != '/') return bad("the socket path is not absolute");
  return h;
}

StderrLine ParseStderrLine(std::string_view line) {
  StderrLine out;
  out.level = static_cast<int>(log::Level::kDebug);
  line = Trim(line);
  if (!line.empty() && line.front() == '{') {
    json::ParseLimits limits;
    limits.max_bytes = kMaxLine;
    auto v = json::Parse(std::string(line), limits);
    if (v.ok() && v->is<picojson::object>()) {
      for (const auto& [k, val] : v->get<picojson::object>()) {
        std::string text = val.is<std::string>() ? val.get<std::string>() : val.serialize();
        if (k == "@level") {
          out.level = LevelOf(text);
        } else if (k == "@message") {
          out.message = text;
        } else if (k == "@timestamp") {
          continue;  // the agent's log line has its own
        } else {
          out.fields.emplace_back(k == "@module" ? "module" : k, text);
        }
      }
      return out;
    }
  }
  static const struct {
    const char* prefix;
    log::Level level;
  } kPrefixes[] = {{"[TRACE]", log::Level::kDebug}, {"[DEBUG]", log::Level::kDebug}, {"[INFO]", log::Level::kInfo},
                   {"[WARN]", log::Level::kWarn},   {"[ERROR]", log::Level::kError}, {"panic: ", log::Level::kError},
                   {"fatal error: ", log::Level::kError}};
  for (const auto& p : kPrefixes) {
    size_t at = line.find(p.prefix);
    if (at != std::string_view::npos && at < 40) {
      out.level = static_cast<int>(p.level);
      break;
    }
  }
  out.message = std::string(line);
  return out;
}

Result<std::unique_ptr<PluginProcess>> PluginProcess::Launch(Loop* loop, PluginProcessOptions options, ReadyFn ready,
                                                            ExitFn exited) {
  std::unique_ptr<PluginProcess> p(new PluginProcess(loop, std::move(options)));
  p->ready_ = std::move(ready);
  p->exited_ = std::move(exited);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoError("pipe");
  UniqueFd out_r(out[0]), out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoError("pipe");
  UniqueFd err_r(err[0]), err_w(err[1]);
  // The plugin's ends block like any stdout and stderr.
  (void)sys::SetNonBlocking(out_w.get(), false);
  (void)sys::SetNonBlocking(err_w.get(), false);

  proc::SpawnRequest req;
  req.path = p->opts_.path;
  req.argv.push_back(p->opts_.path);
  req.argv.insert(req.argv.end(), p->opts_.args.begin(), p->opts_.args.end());
  // The agent's environment (go-plugin's host passes its own), minus what
  // would make the plugin do what outpost does not host, plus the handshake.
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    if (StartsWith(kv, "PLUGIN_") || StartsWith(kv, std::string(kMagicCookieKey) + "=")) continue;
    req.env.emplace_back(kv);
  }
  req.env.push_back(std::string(kMagicCookieKey) + "=" + kMagicCookieValue);
  req.env.push_back("PLUGIN_PROTOCOL_VERSIONS=" + std::to_string(kAppProtocolVersion));
  req.env.push_back("PLUGIN_MIN_PORT=10000");
  req.env.push_back("PLUGIN_MAX_PORT=25000");
  if (!p->opts_.socket_dir.empty()) req.env.push_back("PLUGIN_UNIX_SOCKET_DIR=" + p->opts_.socket_dir);
  req.stdout_fd = out_w.get();
  req.stderr_fd = err_w.get();
  req.new_process_group = true;
  auto spawned = proc::Spawn(req);
  if (!spawned.ok()) return spawned.error();
  p->pid_ = spawned->pid;
  out_w.Reset();
  err_w.Reset();
  PluginProcess* self = p.get();
  std::weak_ptr<bool> alive = p->alive_;
  auto so = LoopFd::Watch(loop, std::move(out_r), EPOLLIN, [self, alive](uint32_t) {
    if (alive.lock()) self->OnStdout();
  });
  auto se = LoopFd::Watch(loop, std::move(err_r), EPOLLIN, [self, alive](uint32_t) {
    if (alive.lock()) self->OnStderr();
  });
  if (so.ok()) p->stdout_ = std::move(*so);
  if (se.ok()) p->stderr_ = std::move(*se);
  Status watched = loop->WatchChild(p->pid_, [self, alive](pid_t, int status) {
    if (alive.lock()) self->OnExit(status);
  });
  if (!watched.ok()) {
    ::kill(p->pid_, SIGKILL);
    int st;
    (void)sys::RetryEintr([&] { return ::waitpid(p->pid_, &st, 0); });
    p->pid_ = 0;
    return watched.error();
  }
  p->start_timer_ = loop->AddTimer(p->opts_.start_timeout_nanos, [self, alive] {
    if (!alive.lock()) return;
    self->start_timer_ = 0;
    if (!self->handshaken_) {
      self->Ready(Error(Code::kDeadlineExceeded,
                        "timeout while waiting for plugin to start (" + FormatDuration(self->opts_.start_timeout_nanos) +
                            " without a handshake line on its stdout)"));
    }
  });
  log::Info("nomad plugin launched", {{"plugin", p->opts_.name}, {"path", p->opts_.path}, {"pid", std::to_string(p->pid_)}});
  return p;
}

PluginProcess::~PluginProcess() {
  *alive_ = false;
  if (start_timer_ != 0) loop_->CancelTimer(start_timer_);
  if (kill_timer_ != 0) loop_->CancelTimer(kill_timer_);
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    loop_->UnwatchChild(pid_);
    int st;
    (void)sys::RetryEintr([&] { return ::waitpid(pid_, &st, 0); });
  }
}

void PluginProcess::OnStdout() {
  char buf[16384];
  for (;;) {
    ssize_t n = sys::Read(stdout_.get(), buf, sizeof buf);
    if (n > 0) {
      if (handshaken_) continue;  // later stdout is drained and dropped, as go-plugin does
      stdout_partial_.append(buf, static_cast<size_t>(n));
      size_t nl = stdout_partial_.find('\n');
      if (nl != std::string::npos || stdout_partial_.size() > kMaxLine) {
        std::string line = stdout_partial_.substr(0, nl);
        stdout_partial_.clear();
        OnHandshakeLine(line);
        if (!stdout_) return;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    stdout_.Reset();  // EOF: the plugin closed its stdout (or exited)
    return;
  }
}

void PluginProcess::OnHandshakeLine(const std::string& line) {
  handshaken_ = true;
  auto h = ParseHandshake(line);
  if (!h.ok()) return Ready(h.error());
  wire::GrpcClientOptions o;
  o.name = "nomad plugin " + opts_.name;
  // go-plugin's host allows messages of any size from its plugins.
  o.max_message_bytes = 64 << 20;
  // go-plugin dials "unused" as its target.
  o.authority = "unused";
  auto client = wire::GrpcClient::Connect(loop_, h->address, o);
  if (!client.ok()) return Ready(client.error().Wrap("connect to the plugin's socket " + h->address));
  Ready(std::move(*client));
}

void PluginProcess::Ready(Result<std::unique_ptr<wire::GrpcClient>> r) {
  if (start_timer_ != 0) loop_->CancelTimer(start_timer_);
  start_timer_ = 0;
  if (!ready_) return;
  ReadyFn fn = std::move(ready_);
  ready_ = nullptr;
  if (!r.ok() && pid_ > 0) ::kill(pid_, SIGKILL);
  fn(std::move(r));
}

void PluginProcess::OnStderr() {
  char buf[16384];
  for (;;) {
    ssize_t n = sys::Read(stderr_.get(), buf, sizeof buf);
    if (n > 0) {
      stderr_partial_.append(buf, static_cast<size_t>(n));
      size_t start = 0, nl;
      while ((nl = stderr_partial_.find('\n', start)) != std::string::npos) {
        RelayStderr(std::string_view(stderr_partial_).substr(start, nl - start));
        start = nl + 1;
      }
      stderr_partial_.erase(0, start);
      if (stderr_partial_.size() > kMaxLine) {
        RelayStderr(stderr_partial_);
        stderr_partial_.clear();
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (!stderr_partial_.empty()) RelayStderr(stderr_partial_);
    stderr_partial_.clear();
    stderr_.Reset();
    return;
  }
}

void PluginProcess::RelayStderr(std::string_view line) {
  if (Trim(line).empty()) return;
  StderrLine l = ParseStderrLine(line);
  // hclog's own key/value pairs follow the message, as hclog prints them.
  std::string msg = "nomad plugin: " + l.message;
  for (const auto& [k, v] : l.fields) {
    bool quote = v.empty() || v.find_first_of(" \"=") != std::string::npos;
    msg += " " + k + "=" + (quote ? "\"" + v + "\"" : v);
  }
  log::Write(static_cast<log::Level>(l.level), msg, {{"plugin", opts_.name}});
}

void PluginProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (kill_timer_ != 0) return;
  std::weak_ptr<bool> alive = alive_;
  kill_timer_ = loop_->AddTimer(opts_.stop_grace_nanos, [this, alive] {
    if (!alive.lock()) return;
    kill_timer_ = 0;
    if (pid_ > 0) ::kill(pid_, SIGKILL);
  });
}

void PluginProcess::OnExit(int wait_status) {
  pid_ = 0;
  if (kill_timer_ != 0) loop_->CancelTimer(kill_timer_);
  kill_timer_ = 0;
  // What it wrote last still counts.
  if (stderr_) OnStderr();
  std::string how = proc::DescribeExitStatus(proc::DecodeWaitStatus(wait_status));
  log::Info("nomad plugin exited", {{"plugin", opts_.name}, {"status", how}});
  auto alive = alive_;
  if (!handshaken_) Ready(Error(Code::kUnavailable, "plugin exited before we could connect (" + how + ")"));
  if (!*alive) return;
  if (exited_) {
    ExitFn fn = std::move(exited_);
    exited_ = nullptr;
    fn(wait_status);
  }
}

}  // namespace outpost::driver::nomad
