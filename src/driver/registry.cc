#include "driver/registry.h"

namespace outpost::driver {

Status Registry::Add(Driver* driver) {
  std::string name = driver->Name();
  if (!drivers_.emplace(name, driver).second) {
    return Error(Code::kAlreadyExists, "a driver named \"" + name + "\" is already registered");
  }
  return OkStatus();
}

void Registry::Remove(const std::string& name) { drivers_.erase(name); }

Driver* Registry::Find(const std::string& name) const {
  auto it = drivers_.find(name);
  return it == drivers_.end() ? nullptr : it->second;
}

Result<Driver*> Registry::Get(const std::string& name) const {
  if (Driver* d = Find(name)) return d;
  std::string known;
  for (const std::string& n : Names()) known += (known.empty() ? "" : ", ") + n;
  return Error(Code::kNotFound,
               "unknown driver \"" + name + "\"; available: " + (known.empty() ? "(none)" : known));
}

std::vector<std::string> Registry::Names() const {
  std::vector<std::string> out;
  for (const auto& [name, d] : drivers_) out.push_back(name);
  return out;
}

}  // namespace outpost::driver
