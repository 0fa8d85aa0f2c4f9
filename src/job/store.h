// Desired state on disk. Owns: one record per job in <state_dir>/jobs/<id>.json
// (written atomically with fsync, so a power cut leaves the old or the new
// record, never a torn one; a jobs.d job's record is written by the job
// manager without fsync, its file being the desired state), its versioned encoding, and loading all records
// at start with a clear error for each unreadable one (which is kept, moved
// aside as <id>.json.bad, never deleted). Does not decide anything.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "job/spec.h"

namespace outpost::job {

enum class Source { kApi, kFile };
const char* SourceName(Source s);  // "api", "file"

struct StoredJob {
  JobSpec spec;
  Source source = Source::kApi;
  std::string file;        // the jobs.d file (source file)
  bool running = true;     // desired: running, or stopped by the operator
  int64_t version = 1;     // bumps at every accepted change of the spec
  int64_t submitted_unix_nanos = 0;
  // Tasks that failed for good (restart limit reached, policy "never"),
  // by name, with the reason: they stay failed across agent restarts and
  // upgrades until the job is restarted or its spec changes
  // (docs/supervision.md).
  std::map<std::string, std::string> failed;
};

class JobStore {
 public:
  explicit JobStore(std::string state_dir) : dir_(std::move(state_dir) + "/jobs") {}

  Status Init();  // creates the directory
  // Every readable record; problems (one line each, naming the file) go to errors.
  std::vector<StoredJob> LoadAll(std::vector<std::string>* errors);
  Status Save(const StoredJob& job);
  Status Remove(const std::string& id);
  const std::string& dir() const { return dir_; }
  std::string PathOf(const std::string& id) const { return dir_ + "/" + id + ".json"; }

  static std::string Encode(const StoredJob& job);
  static Result<StoredJob> Decode(const std::string& text, const std::string& source);

 private:
  std::string dir_;
};

}  // namespace outpost::job
