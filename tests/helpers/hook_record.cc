// outpost-test-helper `hook`: an OCI hook program for the hook tests. It
// appends one JSON line per run to FILE with what it was given and where it
// ran, then does what its options say:
//
//   hook FILE [--exit N] [--stderr TEXT] [--hang] [--orphan PIDFILE]
//
// The line: {"argv":[...], "env":[...], "stdin":"<the state>", "pid":N,
// "ppid":N, "pgid":N, "cgroup":"<the 0:: line of /proc/self/cgroup>",
// "bundle_config":"ok" | "<why not>", "bundle_hooks":N}. bundle_config
// checks what hooks written for runc read: <bundle>/config.json (bundle
// from the state) parses, and has ociVersion, process.args, process.cwd and
// root.path. --orphan forks a child into the hook's process group that writes
// its pid to PIDFILE and sleeps (a timeout must kill it too); --hang sleeps
// forever after recording.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include <picojson.h>

extern char** environ;

namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string s = ReadAll(fd);
  close(fd);
  return s;
}

std::string CheckBundle(const std::string& state, int64_t* hooks_count) {
  picojson::value st;
  if (!picojson::parse(st, state).empty() || !st.is<picojson::object>()) return "state is not JSON";
  if (!st.contains("bundle") || !st.get("bundle").is<std::string>()) return "state has no bundle";
  std::string text = ReadFile(st.get("bundle").get<std::string>() + "/config.json");
  if (text.empty()) return "cannot read config.json";
  picojson::value c;
  std::string err = picojson::parse(c, text);
  if (!err.empty()) return "config.json: " + err;
  if (!c.contains("ociVersion")) return "config.json: no ociVersion";
  const picojson::value& p = c.get("process");
  if (!p.is<picojson::object>() || !p.get("args").is<picojson::array>() || !p.get("cwd").is<std::string>()) {
    return "config.json: no process.args or process.cwd";
  }
  if (!c.get("root").is<picojson::object>() || !c.get("root").get("path").is<std::string>()) {
    return "config.json: no root.path";
  }
  *hooks_count = 0;
  if (c.get("hooks").is<picojson::object>()) {
    for (const auto& [stage, list] : c.get("hooks").get<picojson::object>()) {
      if (list.is<picojson::array>()) *hooks_count += static_cast<int64_t>(list.get<picojson::array>().size());
    }
  }
  return "ok";
}

}  // namespace

int HookRecord(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: hook FILE [--exit N] [--stderr TEXT] [--hang] [--orphan PIDFILE]\n");
    return 2;
  }
  std::string file = argv[2];
  int exit_code = 0;
  const char* err_text = nullptr;
  const char* orphan = nullptr;
  bool hang = false;
  for (int i = 3; i < argc; ++i) {
    if (!strcmp(argv[i], "--exit") && i + 1 < argc) exit_code = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--stderr") && i + 1 < argc) err_text = argv[++i];
    else if (!strcmp(argv[i], "--orphan") && i + 1 < argc) orphan = argv[++i];
    else if (!strcmp(argv[i], "--hang")) hang = true;
  }
  std::string state = ReadAll(0);
  picojson::object o;
  picojson::array av, ev;
  for (int i = 0; i < argc; ++i) av.emplace_back(std::string(argv[i]));
  for (char** e = environ; *e; ++e) ev.emplace_back(std::string(*e));
  o["argv"] = picojson::value(av);
  o["env"] = picojson::value(ev);
  o["stdin"] = picojson::value(state);
  o["pid"] = picojson::value(static_cast<int64_t>(getpid()));
  o["ppid"] = picojson::value(static_cast<int64_t>(getppid()));
  o["pgid"] = picojson::value(static_cast<int64_t>(getpgrp()));
  std::string cg = ReadFile("/proc/self/cgroup");
  size_t at = cg.find("0::");
  o["cgroup"] = picojson::value(at == std::string::npos ? std::string() : cg.substr(at + 3, cg.find('\n', at) - at - 3));
  int64_t hooks = -1;
  o["bundle_config"] = picojson::value(CheckBundle(state, &hooks));
  o["bundle_hooks"] = picojson::value(hooks);
  std::string line = picojson::value(o).serialize() + "\n";
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    fprintf(stderr, "hook: cannot record to %s: %s\n", file.c_str(), strerror(errno));
    return 3;
  }
  close(fd);
  if (orphan) {
    pid_t child = fork();
    if (child == 0) {
      int pf = open(orphan, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (pf >= 0) {
        dprintf(pf, "%d\n", static_cast<int>(getpid()));
        close(pf);
      }
      for (;;) pause();
    }
  }
  if (err_text) fprintf(stderr, "%s\n", err_text);
  if (hang) {
    for (;;) pause();
  }
  return exit_code;
}
