// Helpers shared by the API handler files (agent/api, task_api, job_api):
// decoding a request or failing the call, the arena that keeps encode-side
// strings alive until a reply is encoded, and the TaskInfo and LimitInfo
// encodings.
#pragma once

#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "base/pb.h"
#include "task.pb.h"
#include "wire/rpc_server.h"

namespace outpost::task {
struct TaskView;
class TaskManager;
}  // namespace outpost::task
namespace outpost::cgroup {
class Cgroups;
struct Resources;
}  // namespace outpost::cgroup

namespace outpost::agent {

// Keeps the strings and arrays that encode-side FT_POINTER fields point to
// alive until the reply is encoded.
class Arena {
 public:
  char* Str(std::string s) {
    strings_.push_back(std::move(s));
    return PbStr(strings_.back());
  }
  char** StrArray(const std::vector<std::string>& v) {
    arrays_.emplace_back();
    for (const std::string& s : v) arrays_.back().push_back(Str(s));
    return arrays_.back().data();
  }
  pb_bytes_array_t* Bytes(const std::string& data) {
    blobs_.emplace_back(PB_BYTES_ARRAY_T_ALLOCSIZE(data.size()));
    auto* b = reinterpret_cast<pb_bytes_array_t*>(blobs_.back().data());
    b->size = static_cast<pb_size_t>(data.size());
    std::memcpy(b->bytes, data.data(), data.size());
    return b;
  }
  // Storage for repeated sub-messages, stable until the arena goes.
  template <typename T>
  T* Array(size_t n) {
    blobs_.emplace_back(sizeof(T) * (n ? n : 1));
    return reinterpret_cast<T*>(blobs_.back().data());
  }

 private:
  std::deque<std::string> strings_;
  std::deque<std::vector<char*>> arrays_;
  std::deque<std::vector<char>> blobs_;
};

// What a TaskInfo tells besides the task's record: whether its driver can
// be reached (tasks) and whether its limits are enforced (cgroups).
struct InfoSources {
  const task::TaskManager* tasks = nullptr;
  const cgroup::Cgroups* cgroups = nullptr;
};

// A running task whose driver cannot be reached is "unknown", with why in
// its error (as the job API shows it).
void FillInfo(const task::TaskView& v, const InfoSources& src, Arena* a, outpost_v1_TaskInfo* out);
// Each limit r sets, for a cgroup at path ("" = none), enforced or with why
// not (cgroup::Cgroups::Enforcement); *count set.
outpost_v1_LimitInfo* FillLimits(const cgroup::Resources& r, const std::string& path, const cgroup::Cgroups* cg,
                                 Arena* a, pb_size_t* count);

template <typename Req>
bool DecodeOrFail(std::string_view payload, PbOwned<Req>* req, const char* what, const wire::Responder& r) {
  Status st = req->Decode(payload, what);
  if (!st.ok()) r.Fail(st.error());
  return st.ok();
}

inline void ReplyEmpty(const wire::Responder& r, Status st) {
  if (st.ok()) r.Reply("");
  else r.Fail(st.error());
}

}  // namespace outpost::agent
