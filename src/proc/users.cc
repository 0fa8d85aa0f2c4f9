#include "proc/users.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "base/strings.h"
#include "base/sys.h"

namespace outpost::proc {

namespace {

struct PasswdEntry {
  std::string name;
  uid_t uid;
  gid_t gid;
  std::string home, shell;
};

struct GroupEntry {
  std::string name;
  gid_t gid;
  std::vector<std::string> members;
};

bool IsNumber(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Lines that do not parse are skipped, like libc does; a missing file is an
// empty database (minimal busybox images may have no /etc/group).
std::vector<PasswdEntry> ReadPasswd(const std::string& path) {
  std::vector<PasswdEntry> out;
  auto text = sys::ReadFile(path, 4 << 20);
  if (!text.ok()) return out;
  for (const std::string& line : Split(*text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = Split(line, ':');
    if (f.size() < 7) continue;
    auto uid = ParseInt(f[2], 0, 0xfffffffe);
    auto gid = ParseInt(f[3], 0, 0xfffffffe);
    if (!uid.ok() || !gid.ok()) continue;
    out.push_back({f[0], static_cast<uid_t>(*uid), static_cast<gid_t>(*gid), f[5], f[6]});
  }
  return out;
}

std::vector<GroupEntry> ReadGroups(const std::string& path) {
  std::vector<GroupEntry> out;
  auto text = sys::ReadFile(path, 4 << 20);
  if (!text.ok()) return out;
  for (const std::string& line : Split(*text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = Split(line, ':');
    if (f.size() < 4) continue;
    auto gid = ParseInt(f[2], 0, 0xfffffffe);
    if (!gid.ok()) continue;
    GroupEntry g{f[0], static_cast<gid_t>(*gid), {}};
    if (!f[3].empty()) g.members = Split(f[3], ',');
    out.push_back(std::move(g));
  }
  return out;
}

// The parsed file, kept while a stat of it shows the same file unchanged:
// every task start resolves its user, and reading and splitting both files
// each time cost hundreds of allocations per start. A file changed less than
// kSettledSecs before it was read is not kept (a timestamp has the
// granularity of the kernel's tick: two writes of the same size within one
// would look the same), so an edit is seen by the next start whatever its
// timing.
template <typename Entry>
class ParsedFile {
 public:
  using Parse = std::vector<Entry> (*)(const std::string&);
  const std::vector<Entry>& Get(const std::string& path, Parse parse) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      valid_ = false;
      entries_.clear();  // a missing file is an empty database
      return entries_;
    }
    if (valid_ && path == path_ && Same(st)) return entries_;
    entries_ = parse(path);
    path_ = path;
    st_ = st;
    valid_ = std::time(nullptr) - st.st_mtim.tv_sec > kSettledSecs && std::time(nullptr) - st.st_ctim.tv_sec > kSettledSecs;
    return entries_;
  }

 private:
  static constexpr time_t kSettledSecs = 2;
  bool Same(const struct stat& st) const {
    return st.st_dev == st_.st_dev && st.st_ino == st_.st_ino && st.st_size == st_.st_size &&
           st.st_mtim.tv_sec == st_.st_mtim.tv_sec && st.st_mtim.tv_nsec == st_.st_mtim.tv_nsec &&
           st.st_ctim.tv_sec == st_.st_ctim.tv_sec && st.st_ctim.tv_nsec == st_.st_ctim.tv_nsec;
  }
  bool valid_ = false;
  std::string path_;
  struct stat st_ {};
  std::vector<Entry> entries_;
};

}  // namespace

Result<Credentials> ResolveCredentials(const std::string& user, const std::string& group, const UserDb& db) {
  static ParsedFile<PasswdEntry> passwd_file;  // the worker's loop is its only caller
  static ParsedFile<GroupEntry> group_file;
  const std::vector<PasswdEntry>& passwd = passwd_file.Get(db.passwd_path, ReadPasswd);
  Credentials c;
  const PasswdEntry* entry = nullptr;
  if (user.empty()) {
    c.uid = ::getuid();
    c.gid = ::getgid();
    for (const auto& p : passwd) {
      if (p.uid == c.uid) { entry = &p; break; }
    }
  } else if (IsNumber(user)) {
    auto uid = ParseInt(user, 0, 0xfffffffe);
    if (!uid.ok()) return Error(Code::kInvalidArgument, "user \"" + user + "\": " + uid.error().message());
    c.uid = static_cast<uid_t>(*uid);
    c.gid = c.uid;  // no passwd entry: primary group defaults to the same number
    for (const auto& p : passwd) {
      if (p.uid == c.uid) { entry = &p; break; }
    }
  } else {
    for (const auto& p : passwd) {
      if (p.name == user) { entry = &p; break; }
    }
    if (!entry) return Error(Code::kNotFound, "user \"" + user + "\" not found in " + db.passwd_path);
  }
  if (entry) {
    c.uid = entry->uid;
    c.gid = entry->gid;
    c.name = entry->name;
    c.home = entry->home.empty() ? "/" : entry->home;
    c.shell = entry->shell;
  }

  const std::vector<GroupEntry>& groups = group_file.Get(db.group_path, ReadGroups);
  if (!group.empty()) {
    if (IsNumber(group)) {
      auto gid = ParseInt(group, 0, 0xfffffffe);
      if (!gid.ok()) return Error(Code::kInvalidArgument, "group \"" + group + "\": " + gid.error().message());
      c.gid = static_cast<gid_t>(*gid);
    } else {
      auto it = std::find_if(groups.begin(), groups.end(), [&](const GroupEntry& g) { return g.name == group; });
      if (it == groups.end()) return Error(Code::kNotFound, "group \"" + group + "\" not found in " + db.group_path);
      c.gid = it->gid;
    }
  }
  c.groups.push_back(c.gid);
  if (!c.name.empty()) {
    for (const GroupEntry& g : groups) {
      if (std::find(g.members.begin(), g.members.end(), c.name) != g.members.end() &&
          std::find(c.groups.begin(), c.groups.end(), g.gid) == c.groups.end()) {
        c.groups.push_back(g.gid);
      }
    }
  }
  return c;
}

}  // namespace outpost::proc
