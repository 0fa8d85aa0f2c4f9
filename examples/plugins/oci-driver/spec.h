// outpost-oci-driver: the task's `config` object, and the OCI runtime-spec
// bundle (config.json) built from it and from what outpost decided
// (TaskConfig::oci_spec). Only the public plugin library and picojson: a
// third-party driver could be written the same way.
#pragma once

#include <picojson.h>

#include <cstdint>
#include <string>
#include <vector>

#include "outpost/driver.h"

namespace oci_driver {

struct MountConfig {
  std::string source, destination, type;
  std::vector<std::string> options;
};

struct DeviceConfig {
  std::string host_path;       // a char or block device on the node
  std::string container_path;  // where the container sees it
};

// A task's `config`, validated (docs/oci-driver.md).
struct TaskOptions {
  std::string rootfs;  // absolute, a directory
  bool readonly_rootfs = false;
  std::vector<std::string> args;  // empty: the task's command and args
  bool has_args = false;
  std::string hostname;
  std::vector<MountConfig> mounts;
  std::vector<DeviceConfig> devices;
  std::vector<std::string> capabilities;  // "CAP_..." names
  bool has_capabilities = false;
  bool no_new_privileges = true;
  std::string runtime;  // "" = the driver's; "crun", "runc" or an absolute path
};

// The fields ConfigSchema announces (outpost checks their types at submission).
std::vector<outpost::plugin_sdk::ConfigField> Schema();

// Parses and checks config_json: one problem per entry, each starting with
// "config.<field>: " ("config.mounts[1].destination: must be absolute").
// Checks the node too: rootfs is a directory, devices exist.
bool ParseOptions(const std::string& config_json, TaskOptions* out, std::vector<std::string>* problems);

// Default capabilities (those runc and Docker give a container).
const std::vector<std::string>& DefaultCapabilities();

// The complete config.json for the task. base is TaskConfig::oci_spec
// parsed ("" = outpost sent none: built from the config alone).
// cgroups_path: linux.cgroupsPath ("" = none).
picojson::value BuildSpec(const outpost::plugin_sdk::TaskConfig& task, const TaskOptions& opts,
                          const picojson::value& base);

// The runtime's `state` output: {"status": "running", "pid": 123, ...}.
// False when it is not that (status "" and pid 0 then).
bool ParseState(const std::string& json, std::string* status, int64_t* pid);

// picojson::parse without its exception: picojson throws for a number
// that overflows a double ("1e999"). The error text, "" when it parsed.
std::string ParseJson(picojson::value* out, const std::string& text);

// Joins problems with "\n" (the form outpost shows).
std::string JoinLines(const std::vector<std::string>& lines);

}  // namespace oci_driver
