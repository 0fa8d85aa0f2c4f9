// outpost-oci-driver: the OCI runtime's command line (crun or runc; both
// take the same create/start/state/kill/delete/exec commands).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace oci_driver {

struct RunResult {
  int status = -1;     // wait status; -1: could not run
  std::string output;  // stdout and stderr, at most max_output bytes
  bool truncated = false;
  std::string error;  // why it could not run, or the runtime's last log line on a failure
  bool ok() const;
};

class Runtime {
 public:
  // name: "crun", "runc" or an absolute path; found on PATH when a name.
  // root: the runtime's state dir (--root). Empty path() when not found.
  Runtime(const std::string& name, const std::string& root);

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const std::string& root() const { return root_; }
  bool is_crun() const;
  // "crun version 1.8.1", or why the runtime is not usable.
  std::string Probe(std::string* version) const;

  // The global flags and the command: argv for exec.
  std::vector<std::string> Argv(const std::vector<std::string>& command, bool no_cgroups,
                                const std::string& log) const;

  // Runs to completion with stdin /dev/null and stdout, stderr to out_fd,
  // err_fd (-1: captured into the result). Blocks: for short commands.
  RunResult Run(const std::vector<std::string>& command, bool no_cgroups, const std::string& log,
                int out_fd = -1, int err_fd = -1, size_t max_output = 4096) const;

  // Starts it with stdout and stderr into capture_fd (a file); returns the
  // pid, or -1 with *error set.
  pid_t Spawn(const std::vector<std::string>& command, bool no_cgroups, int capture_fd, std::string* error) const;

 private:
  std::string name_, path_, root_;
};

// Finds name on PATH ("" when absent); an absolute path as it is when executable.
std::string FindExecutable(const std::string& name);

// The last non-empty line of a file (the runtime's log), at most 512 bytes.
std::string LastLine(const std::string& path);

// mkdir -p with mode; false (errno set) on a failure.
bool MkdirAll(const std::string& dir, mode_t mode);

// Writes path whole through path.tmp and a rename.
bool WriteFile(const std::string& path, const std::string& text, mode_t mode);

// What a bundle's container was created with (runtime, its root, whether
// without cgroups), written before the runtime runs: a bundle no task
// record accounts for (its task removed while the driver was away, a start
// cut short) can then be deleted as it was made, by a later driver process.
constexpr char kBundleRuntimeFile[] = "runtime.json";

// Removes a bundle dir: the files the driver writes in it, then the dir.
void RemoveBundle(const std::string& dir);

// Reads a whole small file ("" on error).
std::string ReadSmallFile(const std::string& path, size_t max = 1 << 20);

}  // namespace oci_driver
