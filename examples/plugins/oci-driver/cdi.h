// outpost-oci-driver: the Container Device Interface (CDI). Device names
// like "vendor.com/camera=cam0" are resolved from the JSON spec files in
// the CDI spec dirs (/etc/cdi, then /var/run/cdi, which wins: CDI's
// priorities), and their containerEdits are applied to the container's
// config.json as CDI's own library does (env, deviceNodes with their cgroup
// rules, mounts, hooks, additionalGids, intelRdt). A name no spec defines,
// or an edit this driver does not know (a newer CDI's), is refused by name.
// The names come from the spec's annotations "cdi.k8s.io/<anything>"
// (comma-separated, CDI's ParseAnnotations), where outpost puts a device
// plugin's cdi_devices (docs/devices.md). YAML specs are not read.
// Only picojson: a third-party driver could be written the same way.
#pragma once

#include <picojson.h>

#include <cstdint>
#include <string>
#include <vector>

namespace oci_driver::cdi {

// Lowest priority first: a device in a later dir replaces one of an earlier.
std::vector<std::string> DefaultSpecDirs();  // {"/etc/cdi", "/var/run/cdi"}

struct DeviceNode {
  std::string path, host_path, type, permissions;
  int64_t major = -1, minor = -1, file_mode = -1, uid = -1, gid = -1;  // -1: not given
};
struct Mount {
  std::string host_path, container_path, type;
  std::vector<std::string> options;
};
struct Hook {
  std::string hook_name, path;
  std::vector<std::string> args, env;
  int64_t timeout = -1;
};

// One containerEdits object.
struct Edits {
  std::vector<std::string> env;  // "NAME=value"
  std::vector<DeviceNode> device_nodes;
  std::vector<Mount> mounts;
  std::vector<Hook> hooks;
  std::vector<int64_t> additional_gids;
  picojson::value intel_rdt;             // null: none
  std::vector<std::string> unsupported;  // fields this driver cannot apply, by name
};

struct Device {
  std::string name;  // unqualified: "cam0"
  Edits edits;
};

struct Spec {
  std::string path;
  int priority = 0;  // the index of its dir
  std::string kind;  // "vendor.com/camera"
  Edits edits;       // applied once when any of its devices is
  std::vector<Device> devices;
};

// A fully qualified CDI device name, by CDI's parser rules.
bool IsQualifiedName(const std::string& name);

// Parses one spec (JSON). False with problems, each "<path>: <field>:
// <what>", when it is not a valid spec (its devices are then unknown).
bool ParseSpec(const std::string& text, const std::string& path, int priority, Spec* out,
               std::vector<std::string>* problems);

class Registry {
 public:
  // Reads every *.json of dirs (missing dirs are fine), lowest priority
  // first. Two specs of one dir defining a name: neither is used (CDI's
  // conflict rule), and a problem says so.
  void Load(const std::vector<std::string>& dirs);
  // For tests: one parsed spec as if read from a file.
  void Add(Spec spec);

  // Applies the devices' edits to a config.json: each spec's own edits once
  // (when the first of its devices is named), then each device's, in the
  // order named. "" when done; otherwise every problem, one per line, and
  // spec is left as it was.
  std::string Inject(const std::vector<std::string>& names, picojson::value* spec) const;

  const std::vector<std::string>& problems() const { return problems_; }

 private:
  struct Entry {
    std::string name;  // qualified
    size_t spec, device;
    int priority;
    bool conflict;  // two specs of one dir define it: nobody's
  };
  const Entry* Find(const std::string& name) const;

  std::vector<std::string> dirs_;
  std::vector<Spec> specs_;
  std::vector<Entry> devices_;  // sorted by name
  std::vector<std::string> problems_;
};

// The device names a config.json asks for in its annotations
// "cdi.k8s.io/*", appended to names (each once). An invalid name is an
// error ("" when none).
std::string AnnotatedDevices(const picojson::value& spec, std::vector<std::string>* names);

}  // namespace oci_driver::cdi
