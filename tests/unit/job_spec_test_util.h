// Job documents for the job spec tests (job_spec_test.cc,
// job_spec_canonical_test.cc).
#pragma once

#include <cstdint>
#include <string>

namespace outpost::job::spec_test {

constexpr int64_t kSec = 1000000000LL;

// A job with one task whose extra fields are `fields` (JSON members, no
// braces), e.g. Task(R"("kill_timeout": "five")").
inline std::string Task(const std::string& fields) {
  std::string task = R"({"name": "a", "command": "/bin/sh")";
  if (!fields.empty()) task += ", " + fields;
  return R"({"id": "j", "tasks": [)" + task + "}]}";
}

// A job whose top level has `fields` next to id and one valid task.
inline std::string Job(const std::string& fields) {
  return R"({"id": "j", "tasks": [{"name": "a", "command": "/bin/sh"}], )" + fields + "}";
}

// A job with one task whose `resources` object has `fields`.
inline std::string Res(const std::string& fields) { return Task(R"("resources": {)" + fields + "}"); }

}  // namespace outpost::job::spec_test
