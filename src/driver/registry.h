// Drivers by name. Owns: which drivers this node has (the built-in `exec`,
// and drivers registered by plugins), looking one up for a task, and the
// "unknown driver" message that lists the known ones. Does not own the
// drivers themselves (their owners outlive their registration).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "driver/driver.h"

namespace outpost::driver {

class Registry {
 public:
  // AlreadyExists when a driver of that name is registered.
  Status Add(Driver* driver);
  void Remove(const std::string& name);
  // nullptr when there is none of that name.
  Driver* Find(const std::string& name) const;
  // NotFound: unknown driver "x"; available: exec, ...
  Result<Driver*> Get(const std::string& name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, Driver*> drivers_;
};

}  // namespace outpost::driver
