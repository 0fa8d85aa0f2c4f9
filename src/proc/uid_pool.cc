#include "proc/uid_pool.h"

#include <picojson.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::proc {

namespace {

constexpr int64_t kPoolVersion = 1;
// 16 MiB holds a few hundred thousand entries; far more tasks than an agent runs.
constexpr size_t kMaxPoolFileBytes = 16 << 20;

std::string Range(uint32_t first, uint32_t last) { return std::to_string(first) + "-" + std::to_string(last); }

}  // namespace

std::string UidPool::RangeString() const { return Range(first_, last_); }

Result<std::unique_ptr<UidPool>> UidPool::Open(const std::string& path, uint32_t first, uint32_t last) {
  // uid 0 is root and (uid_t)-1 means "unchanged" to setresuid; keeping
  // below 2^31-1 also keeps the ids positive for tools that store them as int.
  if (first < 1 || last > kMaxDynamicUid || first > last) {
    return Error(Code::kInvalidArgument,
                 "dynamic users: range " + Range(first, last) +
                     " is invalid: it must be first-last with 1 <= first <= last <= " + std::to_string(kMaxDynamicUid) +
                     " (uid 0 is root and cannot be in the pool)");
  }
  std::unique_ptr<UidPool> pool(new UidPool(path, first, last));
  auto text = sys::ReadFile(path, kMaxPoolFileBytes);
  if (!text.ok()) {
    if (text.error().code() == Code::kNotFound) return pool;  // first start
    // Unreadable is not corrupt: moving it aside could drop uids of live tasks.
    return text.error().Wrap("dynamic users");
  }
  auto entries = Decode(*text);
  if (entries.ok()) {
    for (const auto& [owner, uid] : *entries) {
      pool->by_owner_[owner] = uid;
      pool->used_.insert(uid);
    }
    return pool;
  }
  if (entries.error().code() != Code::kInvalidArgument) {
    // Written by a newer outpost: not ours to throw away.
    return entries.error().Wrap("dynamic users: '" + path + "'");
  }
  // Kept for the operator, out of the way of the next write.
  std::string bad = path + ".bad";
  if (std::rename(path.c_str(), bad.c_str()) != 0) {
    int err = errno;
    return ErrnoError("dynamic users: '" + path + "' is corrupt (" + entries.error().message() +
                          ") and cannot be moved to '" + bad + "'",
                      err);
  }
  pool->warning_ = "dynamic users: '" + path + "' is corrupt: " + entries.error().message() + " (moved to '" + bad +
                   "'; starting with an empty pool)";
  return pool;
}

std::string UidPool::Encode() const {
  picojson::object users;
  for (const auto& [owner, uid] : by_owner_) users[owner] = picojson::value(static_cast<int64_t>(uid));
  picojson::object o;
  o["version"] = picojson::value(kPoolVersion);
  // Informational: entries outside it were acquired under an older range.
  o["range"] = picojson::value(RangeString());
  o["users"] = picojson::value(users);
  return picojson::value(o).serialize(true);
}

Result<std::map<std::string, uint32_t>> UidPool::Decode(const std::string& text) {
  auto doc = json::Parse(text, json::ParseLimits{kMaxPoolFileBytes, 4});
  if (!doc.ok()) return doc.error();
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  if (!r.ok()) return Error(Code::kInvalidArgument, "not a JSON object");
  if (!r.Has("version")) return Error(Code::kInvalidArgument, "version: missing");
  int64_t version = 0;
  r.Int("version", 1, INT64_MAX, &version);
  if (version > kPoolVersion) {
    return Error(Code::kFailedPrecondition,
                 Format("written by a newer outpost (format version %lld; this one reads up to %lld)",
                        static_cast<long long>(version), static_cast<long long>(kPoolVersion)));
  }
  std::string range;
  r.String("range", &range);
  const picojson::value* users = r.Get("users");
  r.RejectUnknown();
  std::map<std::string, uint32_t> out;
  if (!users) {
    errors.push_back("users: missing");
  } else if (!users->is<picojson::object>()) {
    errors.push_back(std::string("users: expected an object of task id -> uid, got ") + json::TypeName(*users));
  } else {
    json::ObjectReader ur(*users, "users", &errors);
    std::map<uint32_t, std::string> by_uid;
    for (const auto& [owner, v] : users->get<picojson::object>()) {
      (void)v;
      if (owner.empty()) {
        errors.push_back("users: an entry has an empty task id");
        continue;
      }
      int64_t uid = 0;
      ur.Int(owner, 1, kMaxDynamicUid, &uid);
      if (uid == 0) continue;  // error recorded by Int
      auto [it, inserted] = by_uid.emplace(static_cast<uint32_t>(uid), owner);
      if (!inserted) {
        errors.push_back(Format("users: uid %lld is held by both \"%s\" and \"%s\"", static_cast<long long>(uid),
                                it->second.c_str(), owner.c_str()));
        continue;
      }
      out[owner] = static_cast<uint32_t>(uid);
    }
  }
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  return out;
}

Status UidPool::Save() const {
  Status st = sys::WriteFileAtomic(path_, Encode(), 0600);
  if (!st.ok()) return st.error().Wrap("dynamic users: save");
  return OkStatus();
}

Result<uint32_t> UidPool::Acquire(const std::string& owner) {
  if (owner.empty()) return Error(Code::kInvalidArgument, "dynamic users: acquire: empty task id");
  auto held = by_owner_.find(owner);
  if (held != by_owner_.end()) return held->second;
  // Lowest free: walk the used uids from first while they are contiguous.
  // O(held uids), fine for the few thousand tasks an agent runs.
  uint64_t candidate = first_;
  for (auto it = used_.lower_bound(first_); it != used_.end() && *it == candidate; ++it) ++candidate;
  if (candidate > last_) {
    uint64_t size = static_cast<uint64_t>(last_) - first_ + 1;
    std::string msg = size == 1 ? "the only uid of " + RangeString() + " is in use"
                                : "all " + std::to_string(size) + " uids of " + RangeString() + " are in use";
    return Error(Code::kResourceExhausted, "no free dynamic user: " + msg + " (config dynamic_users)");
  }
  uint32_t uid = static_cast<uint32_t>(candidate);
  by_owner_[owner] = uid;
  used_.insert(uid);
  Status st = Save();
  if (!st.ok()) {
    // Nothing was handed out: the file still says what it said before.
    by_owner_.erase(owner);
    used_.erase(uid);
    return st.error().Wrap("acquire uid for task " + owner);
  }
  return uid;
}

Status UidPool::Restore(const std::string& owner, uint32_t uid) {
  if (owner.empty()) return Error(Code::kInvalidArgument, "dynamic users: restore: empty task id");
  if (uid < 1 || uid > kMaxDynamicUid) {
    return Error(Code::kInvalidArgument,
                 Format("dynamic users: restore task %s: uid %u is not a valid dynamic uid", owner.c_str(), uid));
  }
  auto held = by_owner_.find(owner);
  if (held != by_owner_.end()) {
    if (held->second == uid) return OkStatus();
    return Error(Code::kFailedPrecondition,
                 Format("dynamic users: restore task %s as uid %u: it holds uid %u", owner.c_str(), uid, held->second));
  }
  if (used_.count(uid)) {
    std::string other;
    for (const auto& [o, u] : by_owner_) {
      if (u == uid) other = o;
    }
    return Error(Code::kAlreadyExists, Format("dynamic users: restore task %s as uid %u: task %s holds it",
                                              owner.c_str(), uid, other.c_str()));
  }
  by_owner_[owner] = uid;
  used_.insert(uid);
  Status st = Save();
  if (!st.ok()) {
    // Keep the in-memory entry: the task runs as uid whether or not the file
    // says so, and handing the uid out again would be worse than a stale file.
    return st.error().Wrap("restore uid for task " + owner);
  }
  return OkStatus();
}

void UidPool::Release(const std::string& owner) {
  auto held = by_owner_.find(owner);
  if (held == by_owner_.end()) return;
  uint32_t uid = held->second;
  used_.erase(uid);
  by_owner_.erase(held);
  Status st = Save();
  if (!st.ok()) {
    log::Warn("dynamic user release not saved",
              {{"task", owner}, {"uid", std::to_string(uid)}, {"error", st.error().message()}});
  }
}

std::map<std::string, uint32_t> UidPool::Reconcile(const std::set<std::string>& live_owners) {
  std::map<std::string, uint32_t> released;
  for (auto it = by_owner_.begin(); it != by_owner_.end();) {
    if (live_owners.count(it->first)) {
      ++it;
      continue;
    }
    released.emplace(it->first, it->second);
    used_.erase(it->second);
    it = by_owner_.erase(it);
  }
  if (released.empty()) return released;
  Status st = Save();
  if (!st.ok()) {
    log::Warn("dynamic user reconcile not saved",
              {{"released", std::to_string(released.size())}, {"error", st.error().message()}});
  }
  return released;
}

std::optional<uint32_t> UidPool::Lookup(const std::string& owner) const {
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end()) return std::nullopt;
  return it->second;
}

}  // namespace outpost::proc
