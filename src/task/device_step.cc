// The devices step of the start pipeline (task/lifecycle.cc has the order):
// a task that asks for device plugin resources gets them (chosen and
// allocated by devices/plugins, or the ones it holds already) before NRI's
// CreateContainer, so NRI plugins see the result: the plugins' env and
// annotations on the task (its own values win), their mounts and device
// nodes for the driver, their CDI devices for a driver that resolves CDI
// (one running an OCI runtime: the oci driver). A driver that runs tasks in
// the host's mount namespace (exec) takes a mount or device only where
// the task's path is the host's (nothing to do); anything else is refused
// by field (docs/devices.md). Devices are not given back when a start
// fails: the task keeps them across its restarts (released when it ends
// for good, by the job layer).
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/strings.h"
#include "devices/plugins.h"
#include "task/entry.h"

namespace outpost::task {

namespace {

// What a driver without mounts of its own can take: the host's own path.
Status CheckHostPaths(const devices::Grant& g, const std::string& driver) {
  for (size_t i = 0; i < g.mounts.size(); ++i) {
    const auto& m = g.mounts[i];
    if (m.host_path != m.container_path) {
      return Error(Code::kFailedPrecondition,
                   Format("devices: mounts[%zu]: host_path %s and container_path %s differ: the %s driver runs tasks in "
                          "the host's mount namespace",
                          i, m.host_path.c_str(), m.container_path.c_str(), driver.c_str()));
    }
  }
  for (size_t i = 0; i < g.devices.size(); ++i) {
    const auto& d = g.devices[i];
    if (!d.host_path.empty() && d.host_path != d.container_path) {
      return Error(Code::kFailedPrecondition,
                   Format("devices: devices[%zu]: host_path %s and container_path %s differ: the %s driver runs tasks in "
                          "the host's mount namespace",
                          i, d.host_path.c_str(), d.container_path.c_str(), driver.c_str()));
    }
  }
  return OkStatus();
}

}  // namespace

void TaskManager::AllocateDevices(StartOp* op, DoneCallback done) {
  driver::TaskConfig& c = op->config;
  if (c.device_requests.empty()) return done(OkStatus());
  if (devices_ == nullptr) {
    return done(Error(Code::kFailedPrecondition,
                      "resources.devices: device plugins are off on this node (kubelet_plugins_dir and "
                      "device_plugins_dir are empty)"));
  }
  std::weak_ptr<bool> alive = alive_;
  const std::string id = c.id;
  devices_->Allocate(id, c.device_requests, c.resources->cpuset_mems,
                     [this, alive, op, id, done](Result<devices::Grant> g) {
                       if (!alive.lock()) return;
                       if (!g.ok()) return done(g.error());
                       Status st = ApplyGrant(*g, op);
                       if (!st.ok()) return done(st.error());
                       if (Task* t = Find(id)) t->record.handle.config.env = op->config.env;
                       done(OkStatus());
                     });
}

Status TaskManager::ApplyGrant(const devices::Grant& g, StartOp* op) {
  driver::TaskConfig& c = op->config;
  driver::Capabilities caps = op->driver->GetCapabilities();
  if (!g.cdi_devices.empty() && !caps.oci_runtime) {
    return Error(Code::kFailedPrecondition,
                 "devices: cdi_devices (" + JoinStrings(g.cdi_devices, ", ") + "): driver " + c.driver +
                     " cannot apply CDI devices (a driver running an OCI runtime can: oci)");
  }
  const bool own_mounts = caps.mounts && caps.devices;
  if (!own_mounts) OUTPOST_RETURN_IF_ERROR(CheckHostPaths(g, c.driver));
  std::map<std::string, std::string> annotations = c.Annotations();
  devices::MergeIntoTask(g, &c.env, &annotations);
  if (annotations != c.Annotations()) {
    auto oci = c.oci ? std::make_shared<driver::TaskHooks>(*c.oci) : std::make_shared<driver::TaskHooks>();
    oci->annotations = std::move(annotations);
    c.oci = std::move(oci);
  }
  if (!own_mounts) return OkStatus();
  for (const auto& m : g.mounts) c.mounts.push_back(driver::Mount{m.host_path, m.container_path, m.read_only});
  for (const auto& d : g.devices) {
    const std::string& host = d.host_path.empty() ? d.container_path : d.host_path;
    struct stat st;
    if (::stat(host.c_str(), &st) != 0) return PathError("devices: device", host);
    if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
      return Error(Code::kFailedPrecondition, "devices: " + host + " is not a device node");
    }
    driver::Device dev;
    dev.path = d.container_path;
    dev.type = S_ISCHR(st.st_mode) ? "c" : "b";
    dev.major = major(st.st_rdev);
    dev.minor = minor(st.st_rdev);
    dev.file_mode = st.st_mode & 07777;
    dev.uid = st.st_uid;
    dev.gid = st.st_gid;
    dev.host_path = host;
    dev.access = d.permissions;
    c.devices.push_back(std::move(dev));
  }
  return OkStatus();
}

}  // namespace outpost::task
