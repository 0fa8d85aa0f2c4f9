// Parsing and validation of job specs: every error message, the limits,
// defaults, inheritance and the shipped examples. The canonical encoding,
// fingerprints and `resources`: job_spec_canonical_test.cc.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>
#include <vector>

#include "base/strings.h"
#include "base/sys.h"
#include "job/spec.h"
#include "job/supervisor.h"
#include "unit/job_spec_test_util.h"

namespace outpost::job {
namespace {

using spec_test::Job;
using spec_test::kSec;
using spec_test::Res;
using spec_test::Task;

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string ManyTasks(size_t n) {
  std::string tasks;
  for (size_t i = 0; i < n; ++i) {
    if (i) tasks += ", ";
    tasks += Format(R"({"name": "t%zu", "command": "/bin/true"})", i);
  }
  return R"({"id": "j", "tasks": [)" + tasks + "]}";
}

std::string BigEnv() {
  std::string env;
  for (int i = 0; i < 17; ++i) {
    if (i) env += ", ";
    env += Format(R"("V%02d": "%s")", i, std::string(4000, 'v').c_str());
  }
  return Task(R"("env": {)" + env + "}");
}

std::string ManyLabels() {
  std::string labels;
  for (int i = 0; i < 65; ++i) labels += Format(R"(%s"k%d": "v")", i ? ", " : "", i);
  return Job(R"("labels": {)" + labels + "}");
}

struct BadSpec {
  std::string doc;
  std::string error;
};

// Every row: a malformed document and the exact, complete error text.
std::vector<BadSpec> BadSpecs() {
  const std::string known_rlimits =
      "(known: as, core, cpu, data, fsize, locks, memlock, msgqueue, nice, nofile, nproc, rss, rtprio, rttime, "
      "sigpending, stack)";
  const std::string big = Job(R"("x": ")" + std::string(1 << 20, 'x') + "\"");
  return {
      // Not JSON, or not acceptable JSON.
      {R"({"id": "j",})", "invalid JSON: syntax error at line 1 near: }"},
      {"{} {}", "invalid JSON: line 1: unexpected data after the document"},
      {"", "document is empty"},
      {" \n\t", "document is empty"},
      {"{\"id\": \"\xff\"}", "line 1: invalid UTF-8 at byte offset 8"},
      {"{\"id\": \"j\",\n \"x\": \"\xc0\xaf\"}", "line 2: invalid UTF-8 at byte offset 19"},
      {Job(R"("x": )" + Repeat("[", 16) + Repeat("]", 16)),
       "document is nested 17 levels deep, more than the limit of 16"},
      {big, Format("document is %zu bytes, more than the limit of 1048576 bytes", big.size())},
      {R"({"id": 1e999})", "invalid JSON: line 1: a number is too large (byte offset 7)"},
      {"[1]", "document: expected an object, got array"},
      {R"("job")", "document: expected an object, got string"},
      // Job id.
      {R"({"tasks": [{"name": "a", "command": "/bin/sh"}]})", "id: required"},
      {R"({"id": 5, "tasks": [{"name": "a", "command": "/bin/sh"}]})", "id: expected a string, got number"},
      {R"({"id": "web.1", "tasks": [{"name": "a", "command": "/bin/sh"}]})",
       "id: job id \"web.1\" may only contain letters, digits, '-' and '_'"},
      {R"({"id": "-web", "tasks": [{"name": "a", "command": "/bin/sh"}]})",
       "id: job id \"-web\" must start with a letter or digit"},
      {R"({"id": "", "tasks": [{"name": "a", "command": "/bin/sh"}]})", "id: job id must not be empty"},
      {R"({"id": ")" + std::string(64, 'a') + R"(", "tasks": [{"name": "a", "command": "/bin/sh"}]})",
       "id: job id is 64 bytes, more than the limit of 63"},
      // Tasks list.
      {R"({"id": "j"})", "tasks: required"},
      {R"({"id": "j", "tasks": []})", "tasks: must have at least one task"},
      {R"({"id": "j", "tasks": {"a": {}}})", "tasks: expected an array of tasks, got object"},
      {ManyTasks(65), "tasks: 65 tasks, more than the limit of 64"},
      {R"({"id": "j", "tasks": [{"name": "a", "command": "x"}, {"name": "b", "command": "x"},
          {"name": "a", "command": "x"}]})",
       "tasks[2].name: duplicate task name \"a\" (also tasks[0])"},
      {R"({"id": "j", "tasks": ["a"]})", "tasks[0]: expected an object, got string"},
      {R"({"id": "j", "tasks": [{"command": "/bin/sh"}]})", "tasks[0].name: required"},
      {R"({"id": "j", "tasks": [{"name": "a b", "command": "/bin/sh"}]})",
       "tasks[0].name: task name \"a b\" may only contain letters, digits, '-' and '_'"},
      {R"({"id": "j", "tasks": [{"name": "a"}]})", "tasks[0].command: required"},
      {R"({"id": "j", "tasks": [{"name": "a", "command": ""}]})", "tasks[0].command: must not be empty"},
      {R"({"id": "j", "tasks": [{"name": "a", "command": ["/bin/sh"]}]})",
       "tasks[0].command: expected a string, got array"},
      // Unknown fields.
      {R"({"id": "j", "tasks": [{"name": "a", "comand": "/bin/sh"}]})",
       "tasks[0].command: required\n"
       "tasks[0].comand: unknown field (did you mean \"command\"?)"},
      {Job(R"("colour": "blue")"), "colour: unknown field"},
      {Job(R"("task": [])"), "task: unknown field (did you mean \"tasks\"?)"},
      // Driver, args, env, user, workdir.
      {Task(R"("driver": "a b")"),
       "tasks[0].driver: driver name \"a b\" may only contain letters, digits, '-' and '_'"},
      {Job(R"("min_healthy_time": "2h")"), "min_healthy_time: must be between 0s and 1h"},
      {Job(R"("min_healthy_time": 5)"), "min_healthy_time: expected a duration like \"5s\", got number 5"},
      {Task(R"("driver": 1)"), "tasks[0].driver: expected a string, got number"},
      {Task(R"("driver": "oci", "config": ["x"])"),
       "tasks[0].config: must be an object (the task's settings for its driver)"},
      {Task(R"("config": {"image": "x"})"),
       "tasks[0].config: the exec driver takes no config (its settings are the task's own fields)"},
      {Task(R"("driver": "oci", "config": {"k": ")" + std::string(70000, 'x') + R"("})"),
       "tasks[0].config: is 70008 bytes as JSON, more than the limit of 65536"},
      {Task(R"("args": "-c true")"), "tasks[0].args: expected an array of strings, got string"},
      {Task(R"("args": ["-c", 1, null])"),
       "tasks[0].args[1]: expected a string, got number\n"
       "tasks[0].args[2]: expected a string, got null"},
      {Task(R"("args": [)" + Repeat(R"("x", )", 256) + R"("x"])"),
       "tasks[0].args: 257 arguments, more than the limit of 256"},
      {Task(R"("args": ["a\u0000b"])"), "tasks[0].args[0]: must not contain NUL bytes"},
      {Task(R"("env": ["A=1"])"), "tasks[0].env: expected an object of strings, got array"},
      {Task(R"("env": {"PORT": 8080})"), "tasks[0].env.PORT: expected a string, got number"},
      {Task(R"("env": {"1X": "a", "A-B": "b", "A B": "c", "OK_1": "d"})"),
       "tasks[0].env.1X: not a valid variable name (letters, digits and '_', not starting with a digit)\n"
       "tasks[0].env[\"A B\"]: not a valid variable name (letters, digits and '_', not starting with a digit)\n"
       "tasks[0].env.A-B: not a valid variable name (letters, digits and '_', not starting with a digit)"},
      {BigEnv(), "tasks[0].env: 68068 bytes in total (name=value), more than the limit of 65536 bytes"},
      {Task(R"("user": 0)"), "tasks[0].user: expected a string, got number"},
      {Task(R"("workdir": "data")"), "tasks[0].workdir: must be an absolute path, got \"data\""},
      {R"({"id": "j", "tasks": [{"name": "a", "command": ")" + std::string(4097, 'x') + R"("}]})",
       "tasks[0].command: is 4097 bytes, more than the limit of 4096 bytes"},
      // rlimits.
      {Task(R"("rlimits": [])"), "tasks[0].rlimits: expected an object, got array"},
      {Task(R"("rlimits": {"nofiles": 10})"), "tasks[0].rlimits.nofiles: unknown rlimit \"nofiles\" " + known_rlimits},
      {Task(R"("rlimits": {"nofile": {"soft": 2048, "hard": 1024}})"),
       "tasks[0].rlimits.nofile: soft limit 2048 is more than the hard limit 1024"},
      {Task(R"("rlimits": {"core": {"soft": "unlimited", "hard": 10}})"),
       "tasks[0].rlimits.core: soft limit unlimited is more than the hard limit 10"},
      {Task(R"("rlimits": {"core": "lots"})"),
       "tasks[0].rlimits.core: expected a number, \"unlimited\" or {\"soft\": ..., \"hard\": ...}, got \"lots\""},
      {Task(R"("rlimits": {"core": -1})"), "tasks[0].rlimits.core: must not be negative, got -1"},
      {Task(R"("rlimits": {"nofile": {"soft": 1, "hrad": 2}})"),
       "tasks[0].rlimits.nofile.hard: required\n"
       "tasks[0].rlimits.nofile.hrad: unknown field (did you mean \"hard\"?)"},
      {Task(R"("rlimits": {"nofile": {"soft": 1.5, "hard": true}})"),
       "tasks[0].rlimits.nofile.soft: expected a number or \"unlimited\", got 1.5\n"
       "tasks[0].rlimits.nofile.hard: expected a number or \"unlimited\", got true"},
      {Task(R"("rlimits": {"nofile": 10, "RLIMIT_NOFILE": 20})"),
       "tasks[0].rlimits.nofile: \"nofile\" is set twice"},
      // logs.
      {Task(R"("logs": 10)"), "tasks[0].logs: expected an object, got number"},
      {Task(R"("logs": {"max_files": 0})"), "tasks[0].logs.max_files: must be between 1 and 1000, got 0"},
      {Task(R"("logs": {"max_file_size": "1KiB"})"),
       "tasks[0].logs.max_file_size: must be at least 4KiB (4096 bytes), got 1024"},
      {Task(R"("logs": {"max_file_size": "ten megs"})"),
       "tasks[0].logs.max_file_size: expected a size like \"10MiB\", got \"ten megs\""},
      {Task(R"("logs": {"max_file_size": -5, "max_filez": 1})"),
       "tasks[0].logs.max_file_size: must not be negative\n"
       "tasks[0].logs.max_filez: unknown field (did you mean \"max_files\"?)"},
      // kill_signal, kill_timeout.
      {Task(R"("kill_signal": "SIGFOO")"), "tasks[0].kill_signal: unknown signal \"SIGFOO\" (use a name such as TERM, HUP, USR1, KILL, or a number)"},
      {Task(R"("kill_signal": "99")"), "tasks[0].kill_signal: unknown signal \"99\" (use a name such as TERM, HUP, USR1, KILL, or a number)"},
      {Task(R"("kill_signal": 15)"), "tasks[0].kill_signal: expected a string, got number"},
      {Task(R"("kill_timeout": "five")"), "tasks[0].kill_timeout: expected a duration like \"5s\", got \"five\""},
      {Task(R"("kill_timeout": 5)"), "tasks[0].kill_timeout: expected a duration like \"5s\", got number 5"},
      {Task(R"("kill_timeout": "2h")"), "tasks[0].kill_timeout: must be between 0s and 1h, got 2h"},
      // restart.
      {Task(R"("restart": "always")"), "tasks[0].restart: expected an object, got string"},
      {Task(R"("restart": {"policy": "sometimes"})"),
       "tasks[0].restart.policy: expected one of always, on-failure, never, got \"sometimes\""},
      {Task(R"("restart": {"attempts": -1})"),
       "tasks[0].restart.attempts: must be between 0 and 1000000, got -1"},
      {Task(R"("restart": {"attempts": 1.5})"), "tasks[0].restart.attempts: expected a whole number, got 1.5"},
      {Task(R"("restart": {"delay": "10s", "max_delay": "5s"})"),
       "tasks[0].restart.max_delay: must be at least delay (10s), got 5s"},
      {Task(R"("restart": {"delay": "2h"})"), "tasks[0].restart.delay: must be between 0s and 1h, got 2h"},
      {Task(R"("restart": {"interval": "0"})"), "tasks[0].restart.interval: must be between 1s and 24h, got 0s"},
      {R"({"id": "j", "tasks": [{"name": "a", "command": "x"},
          {"name": "b", "command": "x", "restart": {"delay": "five"}}]})",
       "tasks[1].restart.delay: expected a duration like \"5s\", got \"five\""},
      {Job(R"("restart": {"attempt": 3})"), "restart.attempt: unknown field (did you mean \"attempts\"?)"},
      {R"({"id": "j", "restart": {"max_delay": "30s"},
          "tasks": [{"name": "a", "command": "x", "restart": {"delay": "45s"}}]})",
       "tasks[0].restart.delay: must be at most max_delay (30s), got 45s"},
      // lifecycle.
      {Task(R"("lifecycle": {"hook": "later"})"),
       "tasks[0].lifecycle.hook: expected one of prestart, poststart, main, got \"later\""},
      {Task(R"("lifecycle": {"hook": "poststop"})"),
       "tasks[0].lifecycle.hook: \"poststop\" is not supported yet by this version of outpost (only prestart and "
       "poststart are)"},
      {Task(R"("lifecycle": {"sidecar": false})"), "tasks[0].lifecycle.hook: required"},
      {R"({"id": "j", "tasks": [{"name": "a", "command": "x"},
          {"name": "b", "command": "x", "lifecycle": {"hook": "prestart", "sidecar": "yes"}}]})",
       "tasks[1].lifecycle.sidecar: expected true or false, got string"},
      {Task(R"("lifecycle": {"hook": "main", "sidecar": true})"),
       "tasks[0].lifecycle.sidecar: only prestart and poststart tasks can be sidecars (a main task runs as long as "
       "the job)"},
      {R"({"id": "j", "tasks": [{"name": "a", "command": "x", "lifecycle": {"hook": "prestart"}},
          {"name": "b", "command": "x", "lifecycle": {"hook": "poststart", "sidecar": true}}]})",
       "tasks: no main task: every task has a prestart or poststart hook; a job needs at least one task without "
       "\"lifecycle\""},
      // Features of later versions.
      // Job networks (net/spec.h).
      {Job(R"("network": [])"), "network: expected an object, got array"},
      {Job(R"("network": {"mode": "nat"})"),
       "network.mode: must be \"host\", \"none\", \"bridge\" or \"cni/<name>\", got \"nat\""},
      {Job(R"("network": {"mode": "cni/"})"),
       "network.mode: \"cni/<name>\" needs a CNI network name (letters, digits, '_', '.', '-'), got \"cni/\""},
      {Job(R"("network": {"mode": "cni/a b"})"),
       "network.mode: \"cni/<name>\" needs a CNI network name (letters, digits, '_', '.', '-'), got \"cni/a b\""},
      {Job(R"("network": {"mode": "bridge", "ports": [{"label": "http", "static": 0}]})"),
       "network.ports[0].static: must be between 1 and 65535, got 0"},
      {Job(R"("network": {"mode": "bridge", "ports": [{"label": "http"}]})"),
       "network.ports[0].static: required: the host port (ports are not allocated dynamically)"},
      {Job(R"("network": {"mode": "bridge", "ports": [{"static": 80, "to": 70000}]})"),
       "network.ports[0].label: required\nnetwork.ports[0].to: must be between 1 and 65535, got 70000"},
      {Job(R"("network": {"mode": "bridge", "ports": [{"label": "a-b", "static": 80, "protocol": "sctp"}]})"),
       "network.ports[0].label: may only contain letters, digits and '_' (at most 63), got \"a-b\"\n"
       "network.ports[0].protocol: must be \"tcp\" or \"udp\", got \"sctp\""},
      {Job(R"("network": {"mode": "bridge", "ports": [{"label": "a", "static": 80, "host_ip": "x"}]})"),
       "network.ports[0].host_ip: must be an IPv4 or IPv6 address, got \"x\""},
      {Job(R"("network": {"mode": "bridge", "ports": [{"label": "web", "static": 80},
                                                   {"label": "WEB", "static": 81}]})"),
       "network.ports[1].label: duplicate port label \"WEB\""},
      {Job(R"("network": {"mode": "bridge", "ports": [{"label": "a", "static": 80}, {"label": "b", "static": 80}]})"),
       "network.ports[1].static: host port 80/tcp is mapped twice"},
      {Job(R"("network": {"mode": "none", "ports": [{"label": "a", "static": 80}]})"),
       "network.ports: port mappings need network mode \"bridge\" or \"cni/<name>\" (mode is \"none\")"},
      {Job(R"("network": {"mode": "bridge", "cni_args": {"a;b": "1", "IgnoreUnknown": "1", "c": "x;y", "d": 4}})"),
       "network.cni_args.IgnoreUnknown: set by the agent\n"
       "network.cni_args.a;b: a CNI_ARGS key may not be empty or contain ';', '=' or spaces\n"
       "network.cni_args.c: a CNI_ARGS value may not contain ';' (it separates the args)\n"
       "network.cni_args.d: expected a string, got number"},
      {Job(R"("network": {"hostname": "web"})"),
       "network.hostname: needs a network mode other than \"host\" (the job shares the node's host name there)"},
      {Job(R"("network": {"mode": "none", "hostname": "-web"})"),
       "network.hostname: must be 1-63 letters, digits and '-', not starting or ending with '-', got \"-web\""},
      {Job(R"("network": {"mode": "none", "dns": {}})"), "network.dns: unknown field"},
      {Job(R"("hooks": [])"), "hooks: hooks are set per task: move this list into each task that needs it (tasks[i].hooks; docs/job-spec.md)"},
      // OCI hooks (hooks/hook.h).
      {Task(R"("hooks": [])"),
       "tasks[0].hooks: expected an object of stage -> list of hooks, got array"},
      {Task(R"("hooks": {"preStart": []})"),
       "tasks[0].hooks.preStart: unknown hook stage; the stages are prestart, createRuntime, createContainer, "
       "startContainer, poststart, poststop"},
      {Task(R"("hooks": {"prestart": {"path": "/x"}})"), "tasks[0].hooks.prestart: expected an array of hooks, got object"},
      {Task(R"("hooks": {"prestart": [{"path": "hook"}]})"),
       "tasks[0].hooks.prestart[0].path: must be an absolute path, got \"hook\""},
      {Task(R"("hooks": {"poststop": [{"args": ["x"]}]})"),
       "tasks[0].hooks.poststop[0].path: required (the hook program's absolute path)"},
      {Task(R"("hooks": {"poststop": [{"path": "/x", "timeout": 0}]})"),
       "tasks[0].hooks.poststop[0].timeout: must be between 1 and 86400, got 0"},
      {Task(R"("hooks": {"poststop": [{"path": "/x", "timeout": 1.5}]})"),
       "tasks[0].hooks.poststop[0].timeout: expected a whole number, got 1.5"},
      {Task(R"("hooks": {"poststop": [{"path": "/x", "env": ["PATH=/bin", "NOEQUALS"]}]})"),
       "tasks[0].hooks.poststop[0].env[1]: expected \"NAME=VALUE\", got \"NOEQUALS\""},
      {Task(R"("hooks": {"createRuntime": [{"path": "/x", "timout": 5}]})"),
       "tasks[0].hooks.createRuntime[0].timout: unknown field (did you mean \"timeout\"?)"},
      {Task(R"("annotations": {"a": 1})"), "tasks[0].annotations.a: expected a string, got number"},
      // resources (cgroup v2 limits).
      {Task(R"("resources": "small")"), "tasks[0].resources: expected an object, got string"},
      {Res(R"("memory": "64MiB", "cpu": 100)"),
       "tasks[0].resources.cpu: expected an object, got number\n"
       "tasks[0].resources.memory: expected an object, got string"},
      {Res(R"("memroy": {}, "gpu": 1)"),
       "tasks[0].resources.gpu: unknown field (did you mean \"cpu\"?)\n"
       "tasks[0].resources.memroy: unknown field (did you mean \"memory\"?)"},
      {Res(R"("cpu": {"weight": 0})"), "tasks[0].resources.cpu.weight: must be between 1 and 10000, got 0"},
      {Res(R"("cpu": {"weight": 10001})"), "tasks[0].resources.cpu.weight: must be between 1 and 10000, got 10001"},
      {Res(R"("cpu": {"weight": 1.5})"), "tasks[0].resources.cpu.weight: expected a whole number, got 1.5"},
      {Res(R"("cpu": {"shares": 1})"), "tasks[0].resources.cpu.shares: must be between 2 and 262144, got 1"},
      {Res(R"("cpu": {"shares": 262145})"),
       "tasks[0].resources.cpu.shares: must be between 2 and 262144, got 262145"},
      {Res(R"("cpu": {"weight": 100, "shares": 1024})"),
       "tasks[0].resources.cpu.shares: cannot be used together with weight (shares is the cgroup v1 form of weight; "
       "give one of them)"},
      {Res(R"("cpu": {"max": "50000"})"),
       "tasks[0].resources.cpu.max: expected \"QUOTA PERIOD\" in microseconds (like \"50000 100000\"), \"max\" or a "
       "number of CPUs (like 1.5), got \"50000\""},
      {Res(R"("cpu": {"max": "50ms 100ms"})"),
       "tasks[0].resources.cpu.max: expected \"QUOTA PERIOD\" in microseconds (like \"50000 100000\"), \"max\" or a "
       "number of CPUs (like 1.5), got \"50ms 100ms\""},
      {Res(R"("cpu": {"max": "500 100000"})"),
       "tasks[0].resources.cpu.max: quota must be between 1000 and 17592186044415 microseconds, got 500"},
      {Res(R"("cpu": {"max": "50000 2000000"})"),
       "tasks[0].resources.cpu.max: period must be between 1000 and 1000000 microseconds (1ms and 1s), got 2000000"},
      {Res(R"("cpu": {"max": "max 999"})"),
       "tasks[0].resources.cpu.max: period must be between 1000 and 1000000 microseconds (1ms and 1s), got 999"},
      {Res(R"("cpu": {"max": 0.001})"), "tasks[0].resources.cpu.max: must be between 0.01 and 1024 CPUs, got 0.001"},
      {Res(R"("cpu": {"max": 2000})"), "tasks[0].resources.cpu.max: must be between 0.01 and 1024 CPUs, got 2000"},
      {Res(R"("cpu": {"max": -1})"), "tasks[0].resources.cpu.max: must be between 0.01 and 1024 CPUs, got -1"},
      {Res(R"("cpu": {"max": true})"),
       "tasks[0].resources.cpu.max: expected \"QUOTA PERIOD\" in microseconds (like \"50000 100000\"), \"max\" or a "
       "number of CPUs (like 1.5), got boolean true"},
      {Res(R"("cpu": {"cpuset": {"cpus": "0-", "mems": "1-0"}})"),
       "tasks[0].resources.cpu.cpuset.cpus: expected a list of CPU numbers and ranges like \"0-3,5\", got \"0-\"\n"
       "tasks[0].resources.cpu.cpuset.mems: expected a list of memory node numbers and ranges like \"0\" or \"0-1\", "
       "got \"1-0\""},
      {Res(R"("cpu": {"cpuset": {"cpus": "0,,1"}})"),
       "tasks[0].resources.cpu.cpuset.cpus: expected a list of CPU numbers and ranges like \"0-3,5\", got \"0,,1\""},
      {Res(R"("cpu": {"cpuset": {"cpus": ""}})"),
       "tasks[0].resources.cpu.cpuset.cpus: expected a list of CPU numbers and ranges like \"0-3,5\", got \"\""},
      {Res(R"("cpu": {"cpuset": {"cpu": "0"}})"),
       "tasks[0].resources.cpu.cpuset.cpu: unknown field (did you mean \"cpus\"?)"},
      {Res(R"("cpu": {"cpuset": "0-1"})"), "tasks[0].resources.cpu.cpuset: expected an object, got string"},
      {Res(R"("memory": {"max": "1KiB"})"),
       "tasks[0].resources.memory.max: must be at least 1MiB (1048576 bytes), got 1024"},
      {Res(R"("memory": {"high": 0})"),
       "tasks[0].resources.memory.high: must be at least 1MiB (1048576 bytes), got 0"},
      {Res(R"("memory": {"max": "lots"})"),
       "tasks[0].resources.memory.max: expected a size like \"10MiB\", got \"lots\""},
      {Res(R"("memory": {"low": -1})"), "tasks[0].resources.memory.low: must not be negative"},
      {Res(R"("memory": {"swap_max": true})"),
       "tasks[0].resources.memory.swap_max: expected a size like \"10MiB\", got boolean true"},
      {Res(R"("memory": {"max": "256MiB", "high": "300MiB", "low": "1GiB"})"),
       "tasks[0].resources.memory.high: must not be more than max (256MiB), got 300MiB\n"
       "tasks[0].resources.memory.low: must not be more than max (256MiB), got 1GiB"},
      {Res(R"("memory": {"max": 1048576, "low": 1048577})"),
       "tasks[0].resources.memory.low: must not be more than max (1MiB), got 1048577 bytes"},
      {Res(R"("memory": {"swapmax": 0})"),
       "tasks[0].resources.memory.swapmax: unknown field (did you mean \"swap_max\"?)"},
      {Res(R"("pids": {"max": 0})"), "tasks[0].resources.pids.max: must be between 1 and 4194304, got 0"},
      {Res(R"("pids": {"max": 4194305})"), "tasks[0].resources.pids.max: must be between 1 and 4194304, got 4194305"},
      {Res(R"("pids": {"max": "unlimited"})"),
       "tasks[0].resources.pids.max: expected a number or \"max\", got \"unlimited\""},
      {Res(R"("pids": 100)"), "tasks[0].resources.pids: expected an object, got number"},
      {Res(R"("io": {"weight": 20000})"), "tasks[0].resources.io.weight: must be between 1 and 10000, got 20000"},
      {Res(R"("io": {"max": {"device": "8:0"}})"),
       "tasks[0].resources.io.max: expected an array of devices, got object"},
      {Res(R"("io": {"max": [8]})"), "tasks[0].resources.io.max[0]: expected an object, got number"},
      {Res(R"("io": {"max": [{"device": "/dev/sdz-outpost-test", "rbps": "10MiB"}]})"),
       "tasks[0].resources.io.max[0].device: \"/dev/sdz-outpost-test\" is not a block device on this node"},
      {Res(R"("io": {"max": [{"device": "/dev/null", "rbps": "10MiB"}]})"),
       "tasks[0].resources.io.max[0].device: \"/dev/null\" is not a block device on this node"},
      {Res(R"("io": {"max": [{"device": "sda", "wbps": 1}]})"),
       "tasks[0].resources.io.max[0].device: expected a block device path like \"/dev/vda\" or MAJOR:MINOR like "
       "\"254:0\", got \"sda\""},
      {Res(R"("io": {"max": [{"device": "5000:0", "wbps": 1}]})"),
       "tasks[0].resources.io.max[0].device: \"5000:0\" is not a valid device number (major 0-4095, minor "
       "0-1048575)"},
      {Res(R"("io": {"max": [{"device": "/dev/null\u0000", "wbps": 1}]})"),
       "tasks[0].resources.io.max[0].device: must not contain NUL bytes"},
      {Res(R"("io": {"max": [{"rbps": "1MiB"}]})"), "tasks[0].resources.io.max[0].device: required"},
      {Res(R"("io": {"max": [{"device": "8:0"}, {"device": "8:16", "rbps": "max"}]})"),
       "tasks[0].resources.io.max[0]: needs at least one of rbps, wbps, riops, wiops\n"
       "tasks[0].resources.io.max[1]: needs at least one of rbps, wbps, riops, wiops"},
      {Res(R"("io": {"max": [{"device": "8:0", "rbps": 0, "wbps": "5 MiB", "riops": "fast", "wiops": -3}]})"),
       "tasks[0].resources.io.max[0].rbps: must be at least 1 (leave it out, or write \"max\", for no limit)\n"
       "tasks[0].resources.io.max[0].wbps: expected a size like \"10MiB\", got \"5 MiB\"\n"
       "tasks[0].resources.io.max[0].riops: expected a number or \"max\", got \"fast\"\n"
       "tasks[0].resources.io.max[0].wiops: must be at least 1 (leave it out, or write \"max\", for no limit)"},
      {Res(R"("io": {"max": [{"device": "8:0", "rbps": 1}, {"device": "8:16", "rbps": 1},
                              {"device": "8:0", "wbps": 1}]})"),
       "tasks[0].resources.io.max[2].device: device 8:0 is already limited by io.max[0]"},
      {Res(R"("io": {"max": [{"device": "8:0", "rbsp": 1}]})"),
       "tasks[0].resources.io.max[0].rbsp: unknown field (did you mean \"rbps\"?)"},
      // Job-level resources: the same checks, at the top level.
      {Job(R"("resources": {"pids": {"max": -5}})"), "resources.pids.max: must be between 1 and 4194304, got -5"},
      {Job(R"("resources": {"cpu": {"weight": "high"}, "memory": {"max": "1MB"}})"),
       "resources.cpu.weight: expected a number, got string\n"
       "resources.memory.max: must be at least 1MiB (1048576 bytes), got 1000000"},
      {Job(R"("resources": [])"), "resources: expected an object, got array"},
      // Labels and annotations.
      {Job(R"("labels": ["a"])"), "labels: expected an object of strings, got array"},
      {Job(R"("labels": {"tier": 1})"), "labels.tier: expected a string, got number"},
      {ManyLabels(), "labels: 65 entries, more than the limit of 64"},
      {Job(R"("annotations": {"note": ")" + std::string(1025, 'n') + "\"}"),
       "annotations.note: is 1025 bytes, more than the limit of 1024 bytes"},
      // Several errors at once: every one, in document order per object.
      {R"({"id": "a.b", "labels": {"x": 1}, "restart": {"policy": "sometimes"}, "extra": true,
          "tasks": [{"name": "web", "command": "", "kill_timeout": "soon", "workdir": "rel"},
                    {"name": "web", "driver": "do.cker", "command": "x", "restart": {"attempts": -2}}]})",
       "id: job id \"a.b\" may only contain letters, digits, '-' and '_'\n"
       "labels.x: expected a string, got number\n"
       "restart.policy: expected one of always, on-failure, never, got \"sometimes\"\n"
       "extra: unknown field\n"
       "tasks[0].command: must not be empty\n"
       "tasks[0].workdir: must be an absolute path, got \"rel\"\n"
       "tasks[0].kill_timeout: expected a duration like \"5s\", got \"soon\"\n"
       "tasks[1].driver: driver name \"do.cker\" may only contain letters, digits, '-' and '_'\n"
       "tasks[1].restart.attempts: must be between 0 and 1000000, got -2\n"
       "tasks[1].name: duplicate task name \"web\" (also tasks[0])"},
      // A member given twice: picojson would keep the second, silently.
      {R"({"id": "j",
          "tasks": [{"name": "a", "command": "x", "env": {"A": "1"}, "env": {"B": "2"}}]})",
       "tasks[0].env: given twice (lines 2 and 2)"},
  };
}

TEST(JobSpecErrors, EveryMalformedSpecGetsItsExactMessage) {
  std::vector<BadSpec> cases = BadSpecs();
  EXPECT_GE(cases.size(), 135u);
  for (size_t i = 0; i < cases.size(); ++i) {
    auto spec = ParseJobSpec(cases[i].doc);
    std::string doc = cases[i].doc.size() > 300 ? cases[i].doc.substr(0, 300) + "..." : cases[i].doc;
    if (spec.ok()) {
      ADD_FAILURE() << "row " << i << " parsed but should not: " << doc;
      continue;
    }
    EXPECT_EQ(spec.error().code(), Code::kInvalidArgument) << "row " << i;
    EXPECT_EQ(spec.error().message(), cases[i].error) << "row " << i << ": " << doc;
  }
}

TEST(JobSpecErrors, SourcePrefixesEveryLine) {
  auto spec = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "a"}], "hooks": {}})", "/etc/outpost/jobs.d/j.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().message(),
            "/etc/outpost/jobs.d/j.json: hooks: hooks are set per task: move this list into each task that needs it (tasks[i].hooks; docs/job-spec.md)\n"
            "/etc/outpost/jobs.d/j.json: tasks[0].command: required");
  spec = ParseJobSpec("{", "j.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().message().rfind("j.json: invalid JSON: ", 0), 0u) << spec.error().message();
  EXPECT_EQ(spec.error().message().find('\n'), std::string::npos);
}

TEST(JobSpecErrors, TheLimitsThemselvesAreAccepted) {
  std::string ok_name(63, 'a');
  EXPECT_TRUE(ValidateName(ok_name, "job id").ok());
  EXPECT_TRUE(ValidateName("0web_1-x", "job id").ok());
  EXPECT_EQ(ValidateName("_x", "task name").error().message(), "task name \"_x\" must start with a letter or digit");
  EXPECT_TRUE(ParseJobSpec(ManyTasks(64)).ok());
  auto spec = ParseJobSpec(Task(R"("args": [)" + Repeat(R"("x", )", 255) + R"("x"], "workdir": "/)" +
                                std::string(4095, 'w') + "\""));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->tasks[0].args.size(), 256u);
  std::string env;
  for (int i = 0; i < 16; ++i) env += Format(R"(%s"V%02d": "%s")", i ? ", " : "", i, std::string(4092, 'v').c_str());
  spec = ParseJobSpec(Task(R"("env": {)" + env + "}"));  // 16 * (3 + 1 + 4092) = 65536 bytes
  ASSERT_TRUE(spec.ok()) << spec.error().message();
}

TEST(JobSpec, DefaultsAreApplied) {
  auto spec = ParseJobSpec(R"({"id": "web", "tasks": [{"name": "api", "command": "/bin/api"}]})");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->id, "web");
  EXPECT_TRUE(spec->labels.empty());
  EXPECT_TRUE(spec->annotations.empty());
  ASSERT_EQ(spec->tasks.size(), 1u);
  const TaskSpec& t = spec->tasks[0];
  EXPECT_EQ(t.name, "api");
  EXPECT_EQ(t.driver, "exec");
  EXPECT_EQ(t.command, "/bin/api");
  EXPECT_TRUE(t.args.empty());
  EXPECT_TRUE(t.env.empty());
  EXPECT_EQ(t.user, "");
  EXPECT_EQ(t.group, "");
  EXPECT_EQ(t.workdir, "");
  EXPECT_TRUE(t.rlimits.empty());
  EXPECT_EQ(t.log_max_files, 10);
  EXPECT_EQ(t.log_max_file_size, 10u << 20);
  EXPECT_EQ(t.kill_signal, "SIGTERM");
  EXPECT_EQ(t.kill_timeout_nanos, 5 * kSec);
  EXPECT_EQ(t.restart.policy, RestartPolicy::kOnFailure);
  EXPECT_EQ(t.restart.delay_nanos, 1 * kSec);
  EXPECT_EQ(t.restart.max_delay_nanos, 60 * kSec);
  EXPECT_EQ(t.restart.attempts, 0);  // unlimited
  EXPECT_EQ(t.restart.interval_nanos, 300 * kSec);
  EXPECT_EQ(t.lifecycle.hook, Hook::kMain);
  EXPECT_FALSE(t.lifecycle.sidecar);
  EXPECT_FALSE(t.resources->Any());
  EXPECT_FALSE(spec->resources.Any());
}

TEST(JobSpec, EveryFieldIsRead) {
  auto spec = ParseJobSpec(R"({
    "id": "shop", "labels": {"tier": "front"}, "annotations": {"owner": "ops@example.com"},
    "tasks": [
      {"name": "init", "command": "/bin/sh", "args": ["-c", "mkdir -p /tmp/x"],
       "lifecycle": {"hook": "prestart"}},
      {"name": "web", "driver": "exec", "command": "/usr/bin/web", "args": ["--port", "8080"],
       "env": {"PORT": "8080", "_X": ""}, "user": "www", "group": "100", "workdir": "/srv",
       "rlimits": {"NOFILE": {"soft": 1024, "hard": "unlimited"}, "core": 0, "rlimit_nproc": "unlimited"},
       "logs": {"max_files": 3, "max_file_size": "1MiB"},
       "kill_signal": "int", "kill_timeout": "1m30s",
       "restart": {"policy": "always", "delay": "2s", "max_delay": "30s", "attempts": 0, "interval": "1h"},
       "resources": {}},
      {"name": "log-shipper", "command": "/bin/ship", "lifecycle": {"hook": "poststart", "sidecar": true},
       "logs": {"max_file_size": 4096}, "kill_signal": "9"}
    ]})");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->labels.at("tier"), "front");
  EXPECT_EQ(spec->annotations.at("owner"), "ops@example.com");
  ASSERT_EQ(spec->tasks.size(), 3u);
  EXPECT_EQ(spec->tasks[0].lifecycle.hook, Hook::kPrestart);
  const TaskSpec& w = spec->tasks[1];
  EXPECT_EQ(w.args, (std::vector<std::string>{"--port", "8080"}));
  EXPECT_EQ(w.env.size(), 2u);
  EXPECT_EQ(w.env.at("PORT"), "8080");
  EXPECT_EQ(w.user, "www");
  EXPECT_EQ(w.group, "100");
  EXPECT_EQ(w.workdir, "/srv");
  ASSERT_EQ(w.rlimits.size(), 3u);  // sorted by canonical name
  EXPECT_EQ(w.rlimits[0].name, "core");
  EXPECT_EQ(w.rlimits[0].soft, 0u);
  EXPECT_EQ(w.rlimits[0].hard, 0u);
  EXPECT_EQ(w.rlimits[1].name, "nofile");
  EXPECT_EQ(w.rlimits[1].soft, 1024u);
  EXPECT_EQ(w.rlimits[1].hard, ~uint64_t{0});
  EXPECT_EQ(w.rlimits[2].name, "nproc");
  EXPECT_EQ(w.rlimits[2].soft, ~uint64_t{0});
  EXPECT_EQ(w.log_max_files, 3);
  EXPECT_EQ(w.log_max_file_size, 1u << 20);
  EXPECT_EQ(w.kill_signal, "SIGINT");
  EXPECT_EQ(w.kill_timeout_nanos, 90 * kSec);
  EXPECT_EQ(w.restart.policy, RestartPolicy::kAlways);
  EXPECT_EQ(w.restart.delay_nanos, 2 * kSec);
  EXPECT_EQ(w.restart.max_delay_nanos, 30 * kSec);
  EXPECT_EQ(w.restart.attempts, 0);
  EXPECT_EQ(w.restart.interval_nanos, 3600 * kSec);
  const TaskSpec& s = spec->tasks[2];
  EXPECT_EQ(s.lifecycle.hook, Hook::kPoststart);
  EXPECT_TRUE(s.lifecycle.sidecar);
  EXPECT_EQ(s.log_max_file_size, 4096u);
  EXPECT_EQ(s.kill_signal, "SIGKILL");
}

TEST(JobSpec, TasksInheritTheJobRestartFieldByField) {
  auto spec = ParseJobSpec(R"({"id": "j", "restart": {"policy": "always", "attempts": 3, "delay": "2s"},
    "tasks": [{"name": "a", "command": "x"},
              {"name": "b", "command": "x", "restart": {"attempts": 0, "max_delay": "10s"}},
              {"name": "c", "command": "x", "restart": {"policy": "never", "delay": "2m"}}]})");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  const Restart& a = spec->tasks[0].restart;
  EXPECT_EQ(a.policy, RestartPolicy::kAlways);
  EXPECT_EQ(a.attempts, 3);
  EXPECT_EQ(a.delay_nanos, 2 * kSec);
  EXPECT_EQ(a.max_delay_nanos, 60 * kSec);
  EXPECT_EQ(a.interval_nanos, 300 * kSec);
  const Restart& b = spec->tasks[1].restart;
  EXPECT_EQ(b.policy, RestartPolicy::kAlways);
  EXPECT_EQ(b.attempts, 0);
  EXPECT_EQ(b.delay_nanos, 2 * kSec);
  EXPECT_EQ(b.max_delay_nanos, 10 * kSec);
  const Restart& c = spec->tasks[2].restart;
  EXPECT_EQ(c.policy, RestartPolicy::kNever);
  EXPECT_EQ(c.attempts, 3);
  EXPECT_EQ(c.delay_nanos, 120 * kSec);
  EXPECT_EQ(c.max_delay_nanos, 120 * kSec);  // unset max_delay follows a longer delay
}

// The repository root: the tests normally run from it; otherwise it is
// found above the test binary (build/unit_tests, build/<arch>/unit_tests).
std::string RepoRoot() {
  if (::access("examples", F_OK) == 0 && ::access("src/job/spec.h", F_OK) == 0) return ".";
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string dir = n > 0 ? sys::Dirname(std::string(buf, static_cast<size_t>(n))) : "/";
  while (dir != "/" && !dir.empty()) {
    if (::access((dir + "/src/job/spec.h").c_str(), F_OK) == 0) return dir;
    dir = sys::Dirname(dir);
  }
  return ".";
}

TEST(JobSpec, EveryExampleParses) {
  // examples/*.json (what `make run` puts in its jobs.d) and
  // examples/networks/ (left out of `make run`: they wire the host's network).
  int parsed = 0;
  for (std::string dir : {RepoRoot() + "/examples", RepoRoot() + "/examples/networks"}) {
    auto names = sys::ListDir(dir);
    ASSERT_TRUE(names.ok()) << names.error().message();
    for (const std::string& name : *names) {
      if (!EndsWith(name, ".json")) continue;
      auto text = sys::ReadFile(dir + "/" + name, kMaxSpecBytes + 1);
      ASSERT_TRUE(text.ok()) << text.error().message();
      auto spec = ParseJobSpec(*text, name);
      EXPECT_TRUE(spec.ok()) << spec.error().message();
      ++parsed;
    }
  }
  EXPECT_GE(parsed, 6);
}

TEST(JobSpec, NamesOfEnums) {
  EXPECT_STREQ(RestartPolicyName(RestartPolicy::kAlways), "always");
  EXPECT_STREQ(RestartPolicyName(RestartPolicy::kOnFailure), "on-failure");
  EXPECT_STREQ(RestartPolicyName(RestartPolicy::kNever), "never");
  EXPECT_STREQ(HookName(Hook::kMain), "main");
  EXPECT_STREQ(HookName(Hook::kPrestart), "prestart");
  EXPECT_STREQ(HookName(Hook::kPoststart), "poststart");
}

}  // namespace

// A driver's config is kept as canonical JSON (keys sorted), goes into the
// task's config for its driver, and shows in the spec's JSON form.
TEST(JobSpec, DriverAndItsConfigReachTheTask) {
  auto spec = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "t", "driver": "oci", "command": "/x",
      "config": {"z": 1, "image": "busybox", "mounts": ["a"]}}]})");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->tasks[0].driver_config, R"({"image":"busybox","mounts":["a"],"z":1})");
  driver::TaskConfig c = TaskConfigFor("j", spec->tasks[0]);
  EXPECT_EQ(c.driver, "oci");
  EXPECT_EQ(c.driver_config, spec->tasks[0].driver_config);
  std::string json = TaskSpecToJson(spec->tasks[0]).serialize();
  EXPECT_NE(json.find(R"("config":{"image":"busybox","mounts":["a"],"z":1})"), std::string::npos) << json;
  auto empty = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "t", "command": "/x", "config": {}}]})");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->tasks[0].driver_config, "");
}

}  // namespace outpost::job
