// outpost-oci-driver: probing the OCI runtime for real. A runtime that
// answers --version may still be unable to create any container on this
// node (crun on a host with cgroup v1 and v2 mounted side by side refuses
// every container: "cgroups in hybrid mode not supported, drop all
// controllers from cgroupv2"). The probe creates a container the way a
// task's is created (the same bundle builder; the runtime's global flags
// as for a task outpost gives no cgroup; --no-pivot when the driver uses
// it) and deletes it again. Nothing is started in it: its process is an
// empty file (create only checks that it is there).
//
// It blocks for two runs of the runtime (tens of milliseconds): the driver
// runs it once before it registers, and later in a child process of its
// own (`outpost-oci-driver --probe ...`), so that task starts never wait
// for it.
#pragma once

#include <string>

#include "runtime.h"

namespace oci_driver {

struct ProbeResult {
  std::string version;  // "crun version 1.8.1" ("" when the runtime did not answer)
  // Why the runtime is not usable at all (missing, --version fails): the
  // driver is undetected. "" = it answered.
  std::string unusable;
  // Why it could not create a container here, in the runtime's words
  // ("cgroups in hybrid mode not supported, ..."): the driver is unhealthy.
  std::string create_error;
};

// dir: the probe's own directory: its rootfs, its bundles and the
// runtime's --root, apart from the tasks' (several probes may run at once,
// of different driver processes: each container id has the probing pid).
ProbeResult ProbeRuntime(const Runtime& rt, const std::string& dir, bool no_pivot);

// The child process's side: ProbeRuntime, then the result as three lines
// on stdout ("version ...", "unusable ...", "create ..."). Returns the
// exit code. args: --runtime PATH --dir DIR [--no-pivot].
int ProbeMain(int argc, char** argv);

// The driver's side: the result from the child's output ("" lines kept).
ProbeResult ParseProbeOutput(const std::string& text);

}  // namespace oci_driver
