// The canonical encoding of job specs (persistence and `inspect`), the
// per-task and per-resources fingerprints, and the `resources` section.
// Parsing and validation of the rest of a spec: job_spec_test.cc.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
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

void ExpectSameResources(const cgroup::Resources& a, const cgroup::Resources& b) {
  EXPECT_EQ(a.cpu_weight, b.cpu_weight);
  EXPECT_EQ(a.cpu_max_quota_us, b.cpu_max_quota_us);
  EXPECT_EQ(a.cpu_max_period_us, b.cpu_max_period_us);
  EXPECT_EQ(a.cpuset_cpus, b.cpuset_cpus);
  EXPECT_EQ(a.cpuset_mems, b.cpuset_mems);
  EXPECT_EQ(a.memory_max, b.memory_max);
  EXPECT_EQ(a.memory_high, b.memory_high);
  EXPECT_EQ(a.memory_low, b.memory_low);
  EXPECT_EQ(a.memory_swap_max, b.memory_swap_max);
  EXPECT_EQ(a.pids_max, b.pids_max);
  EXPECT_EQ(a.io_weight, b.io_weight);
  ASSERT_EQ(a.io_max.size(), b.io_max.size());
  for (size_t i = 0; i < a.io_max.size(); ++i) {
    // Not .device: the canonical form writes the number ("254:0") for a path.
    EXPECT_EQ(a.io_max[i].major, b.io_max[i].major);
    EXPECT_EQ(a.io_max[i].minor, b.io_max[i].minor);
    EXPECT_EQ(a.io_max[i].rbps, b.io_max[i].rbps);
    EXPECT_EQ(a.io_max[i].wbps, b.io_max[i].wbps);
    EXPECT_EQ(a.io_max[i].riops, b.io_max[i].riops);
    EXPECT_EQ(a.io_max[i].wiops, b.io_max[i].wiops);
  }
}

void ExpectSameTask(const TaskSpec& a, const TaskSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.driver, b.driver);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.args, b.args);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.workdir, b.workdir);
  ASSERT_EQ(a.rlimits.size(), b.rlimits.size());
  for (size_t i = 0; i < a.rlimits.size(); ++i) {
    EXPECT_EQ(a.rlimits[i].name, b.rlimits[i].name);
    EXPECT_EQ(a.rlimits[i].soft, b.rlimits[i].soft);
    EXPECT_EQ(a.rlimits[i].hard, b.rlimits[i].hard);
  }
  EXPECT_EQ(a.log_max_files, b.log_max_files);
  EXPECT_EQ(a.log_max_file_size, b.log_max_file_size);
  EXPECT_EQ(a.kill_signal, b.kill_signal);
  EXPECT_EQ(a.kill_timeout_nanos, b.kill_timeout_nanos);
  EXPECT_EQ(a.restart.policy, b.restart.policy);
  EXPECT_EQ(a.restart.delay_nanos, b.restart.delay_nanos);
  EXPECT_EQ(a.restart.max_delay_nanos, b.restart.max_delay_nanos);
  EXPECT_EQ(a.restart.attempts, b.restart.attempts);
  EXPECT_EQ(a.restart.interval_nanos, b.restart.interval_nanos);
  EXPECT_EQ(a.lifecycle.hook, b.lifecycle.hook);
  EXPECT_EQ(a.lifecycle.sidecar, b.lifecycle.sidecar);
  ExpectSameResources(a.resources, b.resources);
  EXPECT_TRUE(a.hooks == b.hooks);
  EXPECT_EQ(a.annotations, b.annotations);
  EXPECT_EQ(!a.job_annotations, !b.job_annotations);
  if (a.job_annotations && b.job_annotations) {
    EXPECT_EQ(*a.job_annotations, *b.job_annotations);
  }
}

void ExpectSameJob(const JobSpec& a, const JobSpec& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.annotations, b.annotations);
  ExpectSameResources(a.resources, b.resources);
  ASSERT_EQ(a.tasks.size(), b.tasks.size());
  for (size_t i = 0; i < a.tasks.size(); ++i) ExpectSameTask(a.tasks[i], b.tasks[i]);
}

const char* kFullJob = R"({
  "id": "shop", "labels": {"tier": "front"}, "annotations": {"note": "héllo \"quoted\"\n"},
  "restart": {"attempts": 7},
  "resources": {"memory": {"max": "1GiB"}, "cpu": {"weight": 200}},
  "tasks": [
    {"name": "init", "command": "/bin/sh", "args": ["-c", "echo hi"], "lifecycle": {"hook": "prestart"}},
    {"name": "web", "command": "/usr/bin/web", "args": ["a b", ""], "env": {"A": "1", "B": ""},
     "user": "1000", "group": "wheel", "workdir": "/srv/web",
     "rlimits": {"nofile": {"soft": 1024, "hard": 4096}, "core": "unlimited"},
     "logs": {"max_files": 2, "max_file_size": "64KiB"}, "kill_signal": "HUP", "kill_timeout": "1.5s",
     "restart": {"policy": "never", "delay": "3s", "interval": "10m"},
     "resources": {"cpu": {"shares": 512, "max": 0.5, "cpuset": {"cpus": "0-1,3", "mems": "0"}},
                   "memory": {"max": "256MiB", "high": "200MiB", "low": "64MiB", "swap_max": "0"},
                   "pids": {"max": 100},
                   "io": {"weight": 50, "max": [{"device": "254:0", "rbps": "10MiB", "wiops": 500},
                                                {"device": "8:16", "wbps": 5000000, "riops": 10}]}}},
    {"name": "tail", "command": "/bin/tail", "lifecycle": {"hook": "poststart", "sidecar": true},
     "kill_timeout": "250ms", "annotations": {"note": "own", "extra": "x"},
     "hooks": {"poststop": [{"path": "/bin/sh", "args": ["sh", "-c", "exit 0"], "env": ["PATH=/bin"]},
                            {"path": "/usr/libexec/b", "timeout": 3}],
               "createRuntime": [{"path": "/usr/libexec/a"}]}}
  ]})";

TEST(JobSpec, CanonicalFormRoundTrips) {
  auto spec = ParseJobSpec(kFullJob);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  std::string text = JobSpecToJson(*spec).serialize();
  auto again = ParseJobSpec(text, "canonical");
  ASSERT_TRUE(again.ok()) << again.error().message();
  ExpectSameJob(*spec, *again);
  EXPECT_EQ(JobSpecToJson(*again).serialize(), text);

  // Values the parser never produces from short text still survive.
  JobSpec odd = *spec;
  odd.tasks[1].kill_timeout_nanos = 1234567891;
  odd.tasks[1].restart.delay_nanos = 1001 * 1000000LL;
  odd.tasks[1].restart.max_delay_nanos = 3599 * kSec + 1;
  odd.tasks[1].resources.mutable_get().cpu_max_quota_us = 12345;
  odd.tasks[1].resources.mutable_get().cpu_max_period_us = 54321;
  odd.tasks[1].resources.mutable_get().memory_max = (1LL << 30) + 1;
  again = ParseJobSpec(JobSpecToJson(odd).serialize());
  ASSERT_TRUE(again.ok()) << again.error().message();
  ExpectSameJob(odd, *again);
}

TEST(JobSpec, CanonicalFormOfAMinimalJob) {
  auto spec = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "a", "command": "/bin/true"}]})");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(JobSpecToJson(*spec).serialize(),
            R"({"annotations":{},"id":"j","labels":{},"min_healthy_time":"1s","tasks":[{"args":[],)"
            R"("command":"\/bin\/true","driver":"exec",)"
            R"("env":{},"group":"","kill_signal":"SIGTERM","kill_timeout":"5s","lifecycle":{"hook":"main",)"
            R"("sidecar":false},"logs":{"max_file_size":10485760,"max_files":10},"name":"a","resources":{},)"
            R"("restart":{"attempts":0,"delay":"1s","interval":"5m","max_delay":"1m","policy":"on-failure"},)"
            R"("rlimits":{},"user":"","workdir":""}]})");
}

TEST(JobSpec, FingerprintIsStableAndIgnoresSpelling) {
  auto a = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "a", "command": "/bin/sh", "args": ["-c", "x"],
                             "env": {"A": "1", "B": "2"}, "kill_signal": "SIGTERM"}]})");
  // Same task: other key order, whitespace, defaults spelled out, signal and
  // rlimit spellings, and other job-level fields.
  auto b = ParseJobSpec(R"({"labels": {"x": "y"}, "tasks": [{"kill_signal": "term", "env": {"B": "2", "A": "1"},
                             "args": ["-c", "x"], "driver": "exec", "kill_timeout": "5000ms",
                             "restart": {"policy": "on-failure"}, "command": "/bin/sh", "name": "a"}],
                             "id": "other"})");
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_TRUE(b.ok()) << b.error().message();
  std::string fa = TaskFingerprint(a->tasks[0]);
  EXPECT_EQ(fa.size(), 16u);
  EXPECT_EQ(fa.find_first_not_of("0123456789abcdef"), std::string::npos) << fa;
  EXPECT_EQ(fa, TaskFingerprint(b->tasks[0]));
  EXPECT_EQ(fa, TaskFingerprint(a->tasks[0]));

  auto r1 = ParseJobSpec(Task(R"("rlimits": {"NOFILE": 10})"));
  auto r2 = ParseJobSpec(Task(R"("rlimits": {"nofile": {"hard": 10, "soft": 10}})"));
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(TaskFingerprint(r1->tasks[0]), TaskFingerprint(r2->tasks[0]));
}

TEST(JobSpec, FingerprintChangesWithEveryTaskField) {
  auto base = ParseJobSpec(kFullJob);
  ASSERT_TRUE(base.ok()) << base.error().message();
  const TaskSpec& t0 = base->tasks[1];
  std::vector<std::pair<const char*, std::function<void(TaskSpec*)>>> changes = {
      {"name", [](TaskSpec* t) { t->name = "web2"; }},
      {"driver", [](TaskSpec* t) { t->driver = "exec2"; }},
      {"command", [](TaskSpec* t) { t->command = "/usr/bin/web2"; }},
      {"args", [](TaskSpec* t) { t->args.push_back("-v"); }},
      {"args order", [](TaskSpec* t) { std::swap(t->args[0], t->args[1]); }},
      {"env value", [](TaskSpec* t) { t->env["A"] = "2"; }},
      {"env name", [](TaskSpec* t) { t->env["C"] = ""; }},
      {"user", [](TaskSpec* t) { t->user = "1001"; }},
      {"group", [](TaskSpec* t) { t->group = "staff"; }},
      {"workdir", [](TaskSpec* t) { t->workdir = "/srv"; }},
      {"rlimit soft", [](TaskSpec* t) { t->rlimits[1].soft = 1023; }},
      {"rlimit hard", [](TaskSpec* t) { t->rlimits[1].hard = 4097; }},
      {"rlimit added", [](TaskSpec* t) { t->rlimits.push_back({"stack", 1, 1}); }},
      {"log files", [](TaskSpec* t) { t->log_max_files = 3; }},
      {"log size", [](TaskSpec* t) { t->log_max_file_size += 1; }},
      {"kill signal", [](TaskSpec* t) { t->kill_signal = "SIGINT"; }},
      {"kill timeout", [](TaskSpec* t) { t->kill_timeout_nanos += 1; }},
      {"policy", [](TaskSpec* t) { t->restart.policy = RestartPolicy::kAlways; }},
      {"delay", [](TaskSpec* t) { t->restart.delay_nanos += kSec; }},
      {"max delay", [](TaskSpec* t) { t->restart.max_delay_nanos += kSec; }},
      {"attempts", [](TaskSpec* t) { t->restart.attempts += 1; }},
      {"interval", [](TaskSpec* t) { t->restart.interval_nanos += kSec; }},
      {"hook", [](TaskSpec* t) { t->lifecycle.hook = Hook::kPoststart; }},
      {"sidecar", [](TaskSpec* t) { t->lifecycle.sidecar = true; }},
      {"oci hook", [](TaskSpec* t) { t->hooks.at(hooks::Stage::kPoststop).push_back({"/x", {}, {}, 0, ""}); }},
      {"oci hook timeout",
       [](TaskSpec* t) { t->hooks.at(hooks::Stage::kPrestart).push_back({"/x", {}, {}, 2, ""}); }},
      {"task annotation", [](TaskSpec* t) { t->annotations["k"] = "v"; }},
  };
  std::string f0 = TaskFingerprint(t0);
  std::vector<std::string> seen = {f0};
  for (const auto& [what, change] : changes) {
    TaskSpec t = t0;
    change(&t);
    std::string f = TaskFingerprint(t);
    EXPECT_NE(f, f0) << what;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), f), 0) << what << " collides";
    seen.push_back(f);
    EXPECT_EQ(TaskFingerprint(t), f) << what;
  }
  // Nothing outside the task matters.
  JobSpec other = *base;
  other.id = "elsewhere";
  other.labels["x"] = "y";
  other.tasks[0].command = "/bin/false";
  other.annotations["x"] = "y";
  other.tasks[1].job_annotations = std::make_shared<const std::map<std::string, std::string>>(other.annotations);
  EXPECT_EQ(TaskFingerprint(other.tasks[1]), f0);
}

TEST(JobSpec, TaskHooksAndAnnotations) {
  auto spec = ParseJobSpec(kFullJob);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  const TaskSpec& tail = spec->tasks[2];
  ASSERT_EQ(tail.hooks.size(), 3u);
  const auto& stop = tail.hooks.at(hooks::Stage::kPoststop);
  ASSERT_EQ(stop.size(), 2u);
  EXPECT_EQ(stop[0].path, "/bin/sh");
  EXPECT_EQ(stop[0].args, (std::vector<std::string>{"sh", "-c", "exit 0"}));
  EXPECT_EQ(stop[0].env, (std::vector<std::string>{"PATH=/bin"}));
  EXPECT_EQ(stop[0].source, "job spec");
  EXPECT_EQ(stop[1].timeout_seconds, 3);
  EXPECT_EQ(tail.hooks.at(hooks::Stage::kCreateRuntime)[0].path, "/usr/libexec/a");
  // The job's annotations reach every task; the task's own win.
  ASSERT_TRUE(tail.job_annotations);
  EXPECT_EQ(tail.job_annotations->at("note"), "héllo \"quoted\"\n");
  EXPECT_EQ(tail.job_annotations, spec->tasks[0].job_annotations) << "one copy per job";
  driver::TaskConfig c = TaskConfigFor("shop", tail);
  EXPECT_EQ(c.Annotations().at("note"), "own");
  EXPECT_EQ(c.Annotations().at("extra"), "x");
  EXPECT_TRUE(c.Hooks() == tail.hooks);
  EXPECT_TRUE(TaskConfigFor("shop", spec->tasks[0]).Hooks().empty());
  EXPECT_EQ(TaskConfigFor("shop", spec->tasks[0]).Annotations().at("note"), "héllo \"quoted\"\n");
  // A task with neither keeps nothing for hooks.
  auto bare = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "a", "command": "/bin/true"}]})");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(TaskConfigFor("j", bare->tasks[0]).oci);
  // Left out of the canonical form when empty (fingerprints of tasks
  // without them do not change); present when set.
  std::string init = TaskSpecToJson(spec->tasks[0]).serialize();
  EXPECT_EQ(init.find("hooks"), std::string::npos) << init;
  EXPECT_EQ(init.find("annotations"), std::string::npos) << init;
  std::string t = TaskSpecToJson(tail).serialize();
  EXPECT_NE(t.find(R"("hooks":{"createRuntime":[{"path":"\/usr\/libexec\/a"}])"), std::string::npos) << t;
}

TEST(JobSpecResources, EveryFieldIsRead) {
  auto spec = ParseJobSpec(Res(R"(
      "cpu": {"weight": 300, "max": "50000 100000", "cpuset": {"cpus": "0-3,5", "mems": "0"}},
      "memory": {"max": "256MiB", "high": "200MiB", "low": 67108864, "swap_max": "0"},
      "pids": {"max": 100},
      "io": {"weight": 100, "max": [{"device": "254:0", "rbps": "10MiB", "wbps": "5MB", "riops": 1000,
                                     "wiops": 500},
                                    {"device": "8:16", "riops": "max", "wiops": 1}]})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  const cgroup::Resources& r = spec->tasks[0].resources;
  EXPECT_TRUE(r.Any());
  EXPECT_EQ(r.cpu_weight, 300u);
  EXPECT_EQ(r.cpu_max_quota_us, 50000);
  EXPECT_EQ(r.cpu_max_period_us, 100000u);
  EXPECT_EQ(r.cpuset_cpus, "0-3,5");
  EXPECT_EQ(r.cpuset_mems, "0");
  EXPECT_EQ(r.memory_max, 256 << 20);
  EXPECT_EQ(r.memory_high, 200 << 20);
  EXPECT_EQ(r.memory_low, 64 << 20);
  EXPECT_EQ(r.memory_swap_max, 0);
  EXPECT_EQ(r.pids_max, 100);
  EXPECT_EQ(r.io_weight, 100u);
  ASSERT_EQ(r.io_max.size(), 2u);
  EXPECT_EQ(r.io_max[0].device, "254:0");
  EXPECT_EQ(r.io_max[0].major, 254u);
  EXPECT_EQ(r.io_max[0].minor, 0u);
  EXPECT_EQ(r.io_max[0].rbps, 10u << 20);
  EXPECT_EQ(r.io_max[0].wbps, 5000000u);
  EXPECT_EQ(r.io_max[0].riops, 1000u);
  EXPECT_EQ(r.io_max[0].wiops, 500u);
  EXPECT_EQ(r.io_max[1].major, 8u);
  EXPECT_EQ(r.io_max[1].minor, 16u);
  EXPECT_EQ(r.io_max[1].rbps, 0u);  // 0 = no limit
  EXPECT_EQ(r.io_max[1].wbps, 0u);
  EXPECT_EQ(r.io_max[1].riops, 0u);
  EXPECT_EQ(r.io_max[1].wiops, 1u);
}

TEST(JobSpecResources, EmptyAndMaxMeanUnset) {
  for (const char* fields : {"", R"("cpu": {}, "memory": {}, "pids": {}, "io": {"max": []})",
                             R"("cpu": {"max": "max"}, "memory": {"max": "max", "high": "max", "low": "max",
                                "swap_max": "max"}, "pids": {"max": "max"})",
                             R"("cpu": {"max": "max 100000"})"}) {
    auto spec = ParseJobSpec(Res(fields));
    ASSERT_TRUE(spec.ok()) << fields << ": " << spec.error().message();
    const cgroup::Resources& r = spec->tasks[0].resources;
    EXPECT_FALSE(r.Any()) << fields;
    EXPECT_EQ(r.cpu_max_quota_us, -1) << fields;
    EXPECT_EQ(r.memory_max, -1) << fields;
    EXPECT_EQ(r.memory_swap_max, -1) << fields;
    EXPECT_EQ(r.pids_max, -1) << fields;
    EXPECT_EQ(TaskSpecToJson(spec->tasks[0]).get("resources").serialize(), "{}") << fields;
  }
}

TEST(JobSpecResources, SharesMapToWeightWithTheOciFormula) {
  std::vector<std::pair<int64_t, uint64_t>> cases = {
      {2, 1}, {100, 4}, {512, 20}, {1024, 39}, {2048, 79}, {262142, 9999}, {262144, 10000}};
  for (const auto& [shares, weight] : cases) {
    auto spec = ParseJobSpec(Res(Format(R"("cpu": {"shares": %lld})", static_cast<long long>(shares))));
    ASSERT_TRUE(spec.ok()) << spec.error().message();
    EXPECT_EQ(spec->tasks[0].resources->cpu_weight, weight) << "shares " << shares;
    EXPECT_EQ(spec->tasks[0].resources->cpu_weight, 1 + ((shares - 2) * 9999) / 262142) << "shares " << shares;
  }
  // Stored as the weight: the canonical form has no shares.
  auto spec = ParseJobSpec(Res(R"("cpu": {"shares": 1024})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(ResourcesToJson(spec->tasks[0].resources).serialize(), R"({"cpu":{"weight":39}})");
}

TEST(JobSpecResources, CpuMaxFromCores) {
  struct Case {
    const char* value;
    int64_t quota;
    uint64_t period;
  };
  for (const Case& c : std::vector<Case>{{"0.5", 50000, 100000},
                                         {"1.5", 150000, 100000},
                                         {"2", 200000, 100000},
                                         {"0.01", 1000, 100000},
                                         {"0.333", 33300, 100000},
                                         {"1024", 102400000, 100000},
                                         {"\"1000 1000\"", 1000, 1000},
                                         {"\"  250000   1000000 \"", 250000, 1000000},
                                         {"\"17592186044415 1000000\"", 17592186044415, 1000000}}) {
    auto spec = ParseJobSpec(Res(std::string(R"("cpu": {"max": )") + c.value + "}"));
    ASSERT_TRUE(spec.ok()) << c.value << ": " << spec.error().message();
    const cgroup::Resources& r = spec->tasks[0].resources;
    EXPECT_EQ(r.cpu_max_quota_us, c.quota) << c.value;
    EXPECT_EQ(r.cpu_max_period_us, c.period) << c.value;
    EXPECT_EQ(ResourcesToJson(r).serialize(),
              Format(R"({"cpu":{"max":"%lld %llu"}})", static_cast<long long>(c.quota),
                     static_cast<unsigned long long>(c.period)))
        << c.value;
  }
}

TEST(JobSpecResources, TheLimitsThemselvesAreAccepted) {
  auto spec = ParseJobSpec(Res(R"("cpu": {"weight": 10000, "cpuset": {"cpus": "65535", "mems": "0-65535"}},
                                  "memory": {"max": "1MiB", "high": 1048576, "low": "1MiB", "swap_max": 0},
                                  "pids": {"max": 4194304}, "io": {"weight": 1,
                                  "max": [{"device": "4095:1048575", "rbps": 1, "riops": 9223372036854775807}]})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  const cgroup::Resources& r = spec->tasks[0].resources;
  EXPECT_EQ(r.cpu_weight, 10000u);
  EXPECT_EQ(r.memory_max, 1 << 20);
  EXPECT_EQ(r.memory_high, 1 << 20);
  EXPECT_EQ(r.memory_low, 1 << 20);  // low == max is fine
  EXPECT_EQ(r.pids_max, 4194304);
  EXPECT_EQ(r.io_weight, 1u);
  ASSERT_EQ(r.io_max.size(), 1u);
  EXPECT_EQ(r.io_max[0].major, 4095u);
  EXPECT_EQ(r.io_max[0].minor, 1048575u);
  EXPECT_EQ(r.io_max[0].riops, 9223372036854775807u);
  // high and low may be set without max, and above each other.
  spec = ParseJobSpec(Res(R"("memory": {"high": "1GiB", "low": "2GiB"})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->tasks[0].resources->memory_low, 2LL << 30);
}

// The first block device in /dev, if the test machine has one.
std::string SomeBlockDevice(struct stat* st) {
  auto names = sys::ListDir("/dev");
  if (!names.ok()) return "";
  std::sort(names->begin(), names->end());
  for (const std::string& n : *names) {
    std::string path = "/dev/" + n;
    if (::stat(path.c_str(), st) == 0 && S_ISBLK(st->st_mode)) return path;
  }
  return "";
}

TEST(JobSpecResources, DevicePathsAreResolvedOnThisNode) {
  struct stat st;
  std::string dev = SomeBlockDevice(&st);
  if (dev.empty()) GTEST_SKIP() << "no block device in /dev";
  auto spec = ParseJobSpec(Res(R"("io": {"max": [{"device": ")" + dev + R"(", "rbps": "1MiB"}]})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  const cgroup::Resources& r = spec->tasks[0].resources;
  ASSERT_EQ(r.io_max.size(), 1u);
  EXPECT_EQ(r.io_max[0].device, dev);
  EXPECT_EQ(r.io_max[0].major, major(st.st_rdev));
  EXPECT_EQ(r.io_max[0].minor, minor(st.st_rdev));
  // The canonical form keeps the number, so a stored job loads even when
  // the device has gone.
  std::string number = Format("%u:%u", major(st.st_rdev), minor(st.st_rdev));
  EXPECT_EQ(ResourcesToJson(r).serialize(), R"({"io":{"max":[{"device":")" + number + R"(","rbps":1048576}]}})");
  // A path and the number of the same device are the same device.
  spec = ParseJobSpec(Res(R"("io": {"max": [{"device": ")" + number + R"(", "rbps": 1}, {"device": ")" + dev +
                          R"(", "wbps": 1}]})"));
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().message(), "tasks[0].resources.io.max[1].device: \"" + dev + "\" is device " + number +
                                        ", already limited by io.max[0]");
}

TEST(JobSpecResources, JobLevelResources) {
  auto spec = ParseJobSpec(Job(R"("resources": {"memory": {"max": "512MiB"}, "pids": {"max": 200}})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->resources.memory_max, 512 << 20);
  EXPECT_EQ(spec->resources.pids_max, 200);
  EXPECT_FALSE(spec->tasks[0].resources->Any());  // not inherited: the job's cgroup is the tasks' parent
  picojson::value canonical = JobSpecToJson(*spec);
  EXPECT_EQ(canonical.get("resources").serialize(), R"({"memory":{"max":536870912},"pids":{"max":200}})");
  auto again = JobSpecFromJson(canonical);
  ASSERT_TRUE(again.ok()) << again.error().message();
  ExpectSameJob(*spec, *again);
  // Without job-level limits the key is left out (see CanonicalFormOfAMinimalJob).
  spec = ParseJobSpec(Job(R"("resources": {})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_FALSE(JobSpecToJson(*spec).contains("resources"));
}

TEST(JobSpecResources, CanonicalFormHoldsOnlyTheSetLimits) {
  auto spec = ParseJobSpec(kFullJob);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(TaskSpecToJson(spec->tasks[1]).get("resources").serialize(),
            R"({"cpu":{"cpuset":{"cpus":"0-1,3","mems":"0"},"max":"50000 100000","weight":20},)"
            R"("io":{"max":[{"device":"254:0","rbps":10485760,"wiops":500},)"
            R"({"device":"8:16","riops":10,"wbps":5000000}],"weight":50},)"
            R"("memory":{"high":209715200,"low":67108864,"max":268435456,"swap_max":0},"pids":{"max":100}})");
  EXPECT_EQ(JobSpecToJson(*spec).get("resources").serialize(),
            R"({"cpu":{"weight":200},"memory":{"max":1073741824}})");
  EXPECT_EQ(TaskSpecToJson(spec->tasks[0]).get("resources").serialize(), "{}");
}

TEST(JobSpecResources, TaskFingerprintIgnoresResourcesAndResourcesFingerprintDoesNot) {
  auto base = ParseJobSpec(kFullJob);
  ASSERT_TRUE(base.ok()) << base.error().message();
  const TaskSpec& t0 = base->tasks[1];
  std::string task_print = TaskFingerprint(t0);
  std::string res0 = ResourcesFingerprint(t0.resources);
  EXPECT_EQ(res0.size(), 16u);
  EXPECT_EQ(res0.find_first_not_of("0123456789abcdef"), std::string::npos) << res0;
  std::vector<std::pair<const char*, std::function<void(cgroup::Resources*)>>> changes = {
      {"cpu weight", [](cgroup::Resources* r) { r->cpu_weight = 21; }},
      {"cpu quota", [](cgroup::Resources* r) { r->cpu_max_quota_us = 60000; }},
      {"cpu period", [](cgroup::Resources* r) { r->cpu_max_period_us = 200000; }},
      {"cpu max unset", [](cgroup::Resources* r) { r->cpu_max_quota_us = -1; }},
      {"cpus", [](cgroup::Resources* r) { r->cpuset_cpus = "0-3"; }},
      {"mems", [](cgroup::Resources* r) { r->cpuset_mems = "0-1"; }},
      {"memory max", [](cgroup::Resources* r) { r->memory_max += 4096; }},
      {"memory high", [](cgroup::Resources* r) { r->memory_high = -1; }},
      {"memory low", [](cgroup::Resources* r) { r->memory_low = 0; }},
      {"swap max", [](cgroup::Resources* r) { r->memory_swap_max = 1 << 20; }},
      {"pids", [](cgroup::Resources* r) { r->pids_max = 101; }},
      {"io weight", [](cgroup::Resources* r) { r->io_weight = 51; }},
      {"io rbps", [](cgroup::Resources* r) { r->io_max[0].rbps += 1; }},
      {"io wbps", [](cgroup::Resources* r) { r->io_max[0].wbps = 1; }},
      {"io riops", [](cgroup::Resources* r) { r->io_max[1].riops = 11; }},
      {"io wiops", [](cgroup::Resources* r) { r->io_max[1].wiops = 1; }},
      {"io device", [](cgroup::Resources* r) { r->io_max[1].minor = 17; }},
      {"io removed", [](cgroup::Resources* r) { r->io_max.pop_back(); }},
      {"all unset", [](cgroup::Resources* r) { *r = cgroup::Resources(); }},
  };
  std::vector<std::string> seen = {res0};
  for (const auto& [what, change] : changes) {
    TaskSpec t = t0;
    change(&t.resources.mutable_get());
    EXPECT_EQ(TaskFingerprint(t), task_print) << what << ": limits change live, without a restart";
    std::string f = ResourcesFingerprint(t.resources);
    EXPECT_NE(f, res0) << what;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), f), 0) << what << " collides";
    seen.push_back(f);
  }
  // Spelling does not count: shares 512 is weight 20, 0.5 CPUs is "50000 100000",
  // a device path is its number.
  auto a = ParseJobSpec(Res(R"("cpu": {"shares": 512, "max": 0.5}, "memory": {"max": "1GiB"})"));
  auto b = ParseJobSpec(Res(R"("memory": {"max": 1073741824, "high": "max"}, "cpu": {"max": "50000 100000",
                               "weight": 20}, "pids": {"max": "max"})"));
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(ResourcesFingerprint(a->tasks[0].resources), ResourcesFingerprint(b->tasks[0].resources));
  // The job's and a task's limits use the same function.
  EXPECT_EQ(ResourcesFingerprint(cgroup::Resources()), ResourcesFingerprint(base->tasks[0].resources));
}

TEST(JobSpecResources, FingerprintOfATaskWithoutLimitsDidNotChange) {
  // The value before resources existed (the canonical form then had
  // "resources":{} too), with the restart default of that time (attempts
  // 5): a task stored that way keeps its fingerprint across upgrades.
  auto spec = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "a", "command": "/bin/true",
                                                   "restart": {"attempts": 5}}]})");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(TaskFingerprint(spec->tasks[0]), "ecec03ccc4a23bd5");
}

TEST(JobSpecResources, ATaskWithTheNewUnlimitedRestartDefaultKeepsItsFingerprint) {
  // The same jobs.d file read by an agent whose default is "attempts": 0
  // (no limit): the task must not restart when the agent is upgraded.
  auto spec = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "a", "command": "/bin/true"}]})");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->tasks[0].restart.attempts, 0);
  EXPECT_EQ(TaskFingerprint(spec->tasks[0]), "ecec03ccc4a23bd5");
  auto limited = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "a", "command": "/bin/true",
                                                     "restart": {"attempts": 3}}]})");
  ASSERT_TRUE(limited.ok());
  EXPECT_NE(TaskFingerprint(limited->tasks[0]), "ecec03ccc4a23bd5");
}

}  // namespace
}  // namespace outpost::job
