// A task as a Nomad driver plugin is told about it (docs/nomad-drivers.md).
// Owns: the allocation directory layout Nomad's client makes (a job is an
// allocation: <root>/<alloc id>/alloc/{data,logs,tmp} shared by its tasks,
// <root>/<alloc id>/<task>/{local,secrets,tmp,private}), the NOMAD_*
// environment a task expects, the StartTask request filled as Nomad's
// client fills TaskConfig (mapped from outpost's), and the TaskHandle
// outpost keeps: the plugin's own bytes, given back at RecoverTask. Does
// not own: the gRPC calls (driver/nomad/nomad_driver), the task's config
// encoding (driver/nomad/hclspec).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/error.h"
#include "driver/driver.h"

namespace outpost::driver::nomad {

// Nomad's DriverCapabilities.FSIsolation.
enum class FsIsolation { kNone = 0, kChroot = 1, kImage = 2, kUnveil = 3 };

struct AllocLayout {
  std::string alloc_dir;    // <root>/<alloc id>: TaskConfig.alloc_dir
  std::string shared_dir;   // <alloc_dir>/alloc
  std::string task_dir;     // <alloc_dir>/<task>
  std::string local_dir;    // <task_dir>/local
  std::string secrets_dir;  // <task_dir>/secrets
  std::string tmp_dir;      // <task_dir>/tmp
};

// A job's allocation id: UUID-shaped (plugins use it in names), stable for
// the job's name, so a recovered task finds its directories.
std::string AllocId(const std::string& job);
AllocLayout Layout(const std::string& root, const std::string& job, const std::string& task);
// Makes the directories with Nomad's modes; the task's own are owned by the
// identity it runs as.
Status MakeAllocDirs(const AllocLayout& layout, const Identity& who);
// A task gone for good: its task dir goes, and the allocation dir with the
// job's last task (Nomad's client collects a finished allocation's dir; a
// new job of the same name must not find the old one's data or secrets).
Status RemoveAllocDirs(const AllocLayout& layout);

struct NodeInfo {
  std::string name;  // the node's hostname
  std::string id;    // stable per node
};

// The task's environment as Nomad's client sets it: the task's own, plus
// NOMAD_* (directories as the driver sees them, by fs_isolation; ids and
// names; limits; ports). The task's own variables win.
std::map<std::string, std::string> TaskEnv(const TaskConfig& c, const AllocLayout& layout, FsIsolation iso,
                                           const NodeInfo& node);

// The id Nomad's client gives a start: <alloc id>/<task>/<8 hex digits>,
// new for every start (a driver refuses an id it has seen).
std::string NomadTaskId(const TaskConfig& c);

// The StartTaskRequest for c under nomad_id, with msgpack_config (the
// encoded `config`) and env (TaskEnv's).
Result<std::string> EncodeStartTask(const TaskConfig& c, const std::string& nomad_id, const AllocLayout& layout,
                                    const std::map<std::string, std::string>& env, const std::string& msgpack_config,
                                    const NodeInfo& node);

// What StartTask answered.
struct StartAnswer {
  enum Result { kSuccess = 0, kRetry = 1, kFatal = 2 } result = kSuccess;
  std::string error;   // driver_error_msg
  std::string handle;  // the TaskHandle's bytes, as the plugin sent them (re-encoded)
  int32_t handle_version = 0;
  DriverNetwork network;  // network_override
};
Result<StartAnswer> DecodeStartTask(std::string_view response);

// The RecoverTaskRequest for a handle StartTask returned (task_id empty, as
// Nomad's client sends it); *nomad_id gets the handle's task id.
Result<std::string> EncodeRecoverTask(const std::string& handle, std::string* nomad_id);

}  // namespace outpost::driver::nomad
