// OCI lifecycle hooks (runtime-spec "POSIX-platform Hooks"): the hook object,
// the six stages, the state document a hook reads on stdin, and reading and
// writing the runtime-spec `hooks` object. Owns: these types and their JSON
// forms, with every error named by its JSON path. Does not own where hooks
// come from (hooks/catalog: job spec, hooks.d, per-stage directories),
// running them (hooks/runner) or when each stage runs (the task pipelines).
#pragma once

#include <picojson.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"

namespace outpost::hooks {

// The runtime-spec version outpost's documents (state, config.json) claim.
// Its poststart rule (a failing hook stops the task) is the default here.
constexpr const char* kOciVersion = "1.3.0";

// In the order they run for one task instance.
enum class Stage : int {
  kPrestart = 0,  // deprecated by the runtime-spec, still run (before createRuntime)
  kCreateRuntime,
  kCreateContainer,
  kStartContainer,
  kPoststart,
  kPoststop,
};
constexpr int kStageCount = 6;
constexpr std::array<Stage, kStageCount> kAllStages = {Stage::kPrestart,       Stage::kCreateRuntime,
                                                       Stage::kCreateContainer, Stage::kStartContainer,
                                                       Stage::kPoststart,      Stage::kPoststop};

// "prestart", "createRuntime", "createContainer", "startContainer",
// "poststart", "poststop" (the runtime-spec's keys, case as there).
const char* StageName(Stage s);
// Exact match of one of the names above.
bool ParseStage(const std::string& name, Stage* out);
// The state's `status` during the stage: "creating" (prestart,
// createRuntime, createContainer), "created" (startContainer), "running"
// (poststart), "stopped" (poststop).
const char* StageStatus(Stage s);

struct Hook {
  std::string path;               // absolute
  std::vector<std::string> args;  // argv exactly, argv[0] included; empty = [path]
  std::vector<std::string> env;   // "K=V", exactly; empty = an empty environment
  int64_t timeout_seconds = 0;    // > 0; 0 = not given (the node's hook_timeout applies)
  // Where it came from, for messages, events and `outpost hooks` (not part
  // of the JSON form): "job spec", "hooks.d /etc/containers/oci/hooks.d/x.json",
  // "hook_path /etc/outpost/hooks/prestart/x", "nri plugin y".
  std::string source;

  // argv as exec'd: args, or [path] when args is empty.
  std::vector<std::string> Argv() const;
  bool operator==(const Hook& o) const {
    return path == o.path && args == o.args && env == o.env && timeout_seconds == o.timeout_seconds;
  }
};

// Hooks by stage, each list in the order the hooks run. One pointer when
// empty (most tasks have no hooks, and every job's task spec holds a set):
// the lists are allocated by the first non-const at().
class HookSet {
 public:
  HookSet() = default;
  HookSet(const HookSet& o);
  HookSet& operator=(const HookSet& o);
  HookSet(HookSet&&) noexcept = default;
  HookSet& operator=(HookSet&&) noexcept = default;
  ~HookSet();

  std::vector<Hook>& at(Stage s);
  const std::vector<Hook>& at(Stage s) const;
  bool empty() const;
  size_t size() const;  // all stages
  // Appends o's hooks after ours, stage by stage.
  void Append(const HookSet& o);
  bool operator==(const HookSet& o) const;

 private:
  using Stages = std::array<std::vector<Hook>, kStageCount>;
  std::unique_ptr<Stages> stages_;
};

// One hook object at path (e.g. "tasks[0].hooks.prestart[1]"): `path`
// (required, absolute), `args`, `env` (each "K=V" with a non-empty K),
// `timeout` (integer seconds, > 0). Unknown keys are errors. Appends one
// "<path>.<field>: <problem>" line per problem to errors; the returned hook
// is only meaningful when none was added. source is copied into the hook.
Hook HookFromJson(const picojson::value& v, const std::string& path, const std::string& source,
                  std::vector<std::string>* errors);
// A runtime-spec `hooks` object: stage name -> array of hook objects. An
// unknown stage is an error naming the known ones.
HookSet HooksFromJson(const picojson::value& v, const std::string& path, const std::string& source,
                      std::vector<std::string>* errors);
// The runtime-spec form: only the stages that have hooks; per hook `path`,
// and `args`, `env`, `timeout` when set. Sources are left out.
picojson::value HookToJson(const Hook& h);
picojson::value HooksToJson(const HookSet& set);

// The state a hook reads on stdin (runtime-spec "State").
struct State {
  std::string id;      // the task's id
  Stage stage = Stage::kPrestart;  // gives `status`
  pid_t pid = 0;       // 0 = none (left out): the stages before the task exists, and poststop
  std::string bundle;  // absolute path of the task's bundle dir
  std::map<std::string, std::string> annotations;
};
// {"ociVersion", "id", "status", "pid" (when > 0), "bundle",
// "annotations" (when any)}, compact, keys in that order.
std::string StateJson(const State& s);

}  // namespace outpost::hooks
