// Users and groups for tasks. Owns: resolving a user and group given as
// names or numbers by reading /etc/passwd and /etc/group directly (a static
// binary has no NSS), including supplementary groups. Does not own dynamic
// workload users (the cgroup issue adds a uid pool).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace outpost::proc {

struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (includes gid)
  std::string name;           // "" for a numeric uid without a passwd entry
  std::string home = "/";
  std::string shell;
};

struct UserDb {
  std::string passwd_path = "/etc/passwd";
  std::string group_path = "/etc/group";
};

// user: "" (the agent's own uid), a name, or a decimal uid. group: "" (the
// user's primary group), a name, or a decimal gid. Unknown names fail with
// NotFound: `user "bob" not found in /etc/passwd`.
Result<Credentials> ResolveCredentials(const std::string& user, const std::string& group,
                                       const UserDb& db = UserDb());

}  // namespace outpost::proc
