#include "job/store.h"

#include <unistd.h>

#include <cstdio>

#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::job {

namespace {
constexpr int64_t kRecordVersion = 1;
}

const char* SourceName(Source s) { return s == Source::kFile ? "file" : "api"; }

Status JobStore::Init() { return sys::MkdirAll(dir_, 0700); }

std::string JobStore::Encode(const StoredJob& j) {
  picojson::object o;
  o["version"] = picojson::value(kRecordVersion);
  o["source"] = picojson::value(std::string(SourceName(j.source)));
  o["file"] = picojson::value(j.file);
  o["desired"] = picojson::value(std::string(j.running ? "running" : "stopped"));
  o["job_version"] = picojson::value(j.version);
  o["submitted_at_ns"] = picojson::value(j.submitted_unix_nanos);
  o["spec"] = JobSpecToJson(j.spec);
  if (!j.failed.empty()) {
    picojson::object f;
    for (const auto& [task, reason] : j.failed) f[task] = picojson::value(reason);
    o["failed"] = picojson::value(f);
  }
  return picojson::value(o).serialize(true);
}

Result<StoredJob> JobStore::Decode(const std::string& text, const std::string& source) {
  json::ParseLimits limits;
  limits.max_bytes = kMaxSpecBytes + 4096;
  limits.max_depth = kMaxSpecDepth + 1;
  auto doc = json::Parse(text, limits);
  if (!doc.ok()) return doc.error().Wrap(source);
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  if (!r.ok()) return Error(Code::kInvalidArgument, source + ": not a JSON object");
  StoredJob j;
  int64_t version = 0;
  r.Int("version", 1, kRecordVersion, &version);
  std::string src, desired;
  r.String("source", &src);
  r.String("file", &j.file);
  r.String("desired", &desired);
  r.Int("job_version", 1, INT64_MAX, &j.version);
  r.Int("submitted_at_ns", 0, INT64_MAX, &j.submitted_unix_nanos);
  const picojson::value* spec = r.Get("spec");
  if (const picojson::value* f = r.Get("failed")) {
    if (!f->is<picojson::object>()) {
      errors.push_back("failed: expected an object");
    } else {
      for (const auto& [task, reason] : f->get<picojson::object>()) {
        if (!reason.is<std::string>()) {
          errors.push_back("failed." + task + ": expected a string");
          continue;
        }
        j.failed[task] = reason.get<std::string>();
      }
    }
  }
  r.RejectUnknown();
  if (src == "file") {
    j.source = Source::kFile;
  } else if (src != "api") {
    errors.push_back("source: expected \"api\" or \"file\", got \"" + src + "\"");
  }
  if (desired == "stopped") {
    j.running = false;
  } else if (desired != "running") {
    errors.push_back("desired: expected \"running\" or \"stopped\", got \"" + desired + "\"");
  }
  if (!spec) errors.push_back("spec: missing");
  if (!errors.empty()) return Error(Code::kInvalidArgument, source + ": " + json::JoinErrors(errors));
  auto parsed = JobSpecFromJson(*spec, source);
  if (!parsed.ok()) return parsed.error();
  j.spec = std::move(*parsed);
  return j;
}

std::vector<StoredJob> JobStore::LoadAll(std::vector<std::string>* errors) {
  std::vector<StoredJob> out;
  auto names = sys::ListDir(dir_);
  if (!names.ok()) {
    errors->push_back(names.error().message());
    return out;
  }
  for (const std::string& n : *names) {
    if (!EndsWith(n, ".json")) continue;
    std::string path = dir_ + "/" + n;
    auto text = sys::ReadFile(path, kMaxSpecBytes + 4096);
    if (text.ok() && text->find_first_not_of(std::string("\0 \n", 3)) == std::string::npos) {
      // The record of a jobs.d job is not fsync'd (its file is): a power cut
      // can leave a new one empty, or its blocks unwritten (zeros). The next
      // pass over jobs.d adds the job again.
      log::Warn("job record left empty by a power cut: removed (a jobs.d file adds its job again)",
                {{"file", path}});
      ::unlink(path.c_str());
      continue;
    }
    Result<StoredJob> j = text.ok() ? Decode(*text, path) : Result<StoredJob>(text.error());
    if (j.ok() && j->spec.id + ".json" != n) {
      j = Error(Code::kInvalidArgument, path + ": holds job \"" + j->spec.id + "\"");
    }
    if (!j.ok()) {
      // Kept for the operator, out of the way of the next start.
      std::string bad = path + ".bad";
      std::rename(path.c_str(), bad.c_str());
      // One log line per record, even when it has several problems.
      std::string why;
      for (char c : j.error().message()) why += c == '\n' ? std::string("; ") : std::string(1, c);
      errors->push_back(why + " (moved to " + bad + ")");
      continue;
    }
    out.push_back(std::move(*j));
  }
  return out;
}

Status JobStore::Save(const StoredJob& j) {
  return sys::WriteFileAtomic(PathOf(j.spec.id), Encode(j), 0600);
}

Status JobStore::Remove(const std::string& id) {
  return sys::RemoveFileDurable(PathOf(id));
}

}  // namespace outpost::job
