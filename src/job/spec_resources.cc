// The `resources` section of job specs (cgroup v2 limits, and a task's
// device plugin requests): parsing into cgroup::Resources (and
// devices::Request) with every error by JSON path, and the canonical
// encoding. Part of job/spec (declared in spec.h); whether the node can
// honour the limits (controllers, CPUs, devices) is checked by the agent
// (task/cgroup), except io.max device paths, which are resolved here.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cmath>

#include "base/json.h"
#include "base/strings.h"
#include "job/spec.h"

namespace outpost::job {

namespace {

using json::Errors;
using json::ObjectReader;

constexpr int64_t kMaxWeight = 10000;              // cpu.weight, io.weight: 1..10000
constexpr int64_t kMinShares = 2;                  // cgroup v1 cpu.shares
constexpr int64_t kMaxShares = 262144;
constexpr int64_t kMinCpuQuota = 1000;             // µs (the kernel's minimum, 1ms)
constexpr int64_t kMaxCpuQuota = (int64_t{1} << 44) - 1;  // µs (the kernel's max_cfs_runtime)
constexpr int64_t kMinCpuPeriod = 1000;            // µs
constexpr int64_t kMaxCpuPeriod = 1000000;
constexpr int64_t kCoresPeriod = 100000;           // period used for "max": <number of CPUs>
constexpr double kMinCores = 0.01;
constexpr double kMaxCores = 1024;
constexpr int64_t kMinMemory = 1 << 20;            // memory.max, memory.high
constexpr int64_t kMaxPids = 4194304;              // PID_MAX_LIMIT
constexpr int64_t kMaxDeviceMajor = 4095;          // dev_t: 12 bits of major, 20 of minor
constexpr int64_t kMaxDeviceMinor = 1048575;
constexpr int64_t kMaxListNumber = 65535;          // CPU / memory node numbers in cpuset lists
constexpr size_t kMaxResourceString = 4096;        // same as kMaxStringBytes in spec.cc

const char* const kCpuMaxExpected =
    "expected \"QUOTA PERIOD\" in microseconds (like \"50000 100000\"), \"max\" or a number of CPUs (like 1.5)";

// JSON-quoted for messages, without picojson's escaping of '/' ("/dev/vda",
// not "\/dev\/vda").
std::string Quote(const std::string& s) {
  std::string q = json::Preview(picojson::value(s));
  std::string out;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] == '\\' && i + 1 < q.size()) {
      if (q[i + 1] != '/') out += q[i];
      out += q[++i];
    } else {
      out += q[i];
    }
  }
  return out;
}

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "256MiB", "1GiB", "1000 bytes": exact, for messages.
std::string SizeText(int64_t n) {
  const int64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  long long v = static_cast<long long>(n);
  if (n > 0 && n % kGiB == 0) return Format("%lldGiB", v / kGiB);
  if (n > 0 && n % kMiB == 0) return Format("%lldMiB", v / kMiB);
  if (n > 0 && n % kKiB == 0) return Format("%lldKiB", v / kKiB);
  return Format("%lld bytes", v);
}

// A string field: length limit and no NUL (a path with NUL would be cut by
// stat()).
bool ReadString(ObjectReader& r, Errors* errors, const std::string& key, std::string* out) {
  size_t before = errors->size();
  std::string v;
  r.String(key, &v);
  if (!r.Has(key) || errors->size() != before) return false;
  if (v.size() > kMaxResourceString) {
    r.Fail(key, Format("is %zu bytes, more than the limit of %zu bytes", v.size(), kMaxResourceString));
    return false;
  }
  if (v.find('\0') != std::string::npos) {
    r.Fail(key, "must not contain NUL bytes");
    return false;
  }
  *out = std::move(v);
  return true;
}

bool IsMax(const picojson::value* v) { return v && v->is<std::string>() && v->get<std::string>() == "max"; }

// A size in bytes (string with unit, or number) of at least min; "max" is
// the same as leaving the field out. True when a value was stored.
bool ReadBytes(ObjectReader& r, Errors* errors, const std::string& key, int64_t min, int64_t* out) {
  const picojson::value* v = r.Get(key);
  if (!v || IsMax(v)) return false;
  size_t before = errors->size();
  uint64_t n = 0;
  r.Size(key, &n);  // at most INT64_MAX (ParseSize's limit; JSON numbers are int64)
  if (errors->size() != before) return false;
  int64_t bytes = static_cast<int64_t>(n);
  if (bytes < min) {
    r.Fail(key, Format("must be at least %s (%lld bytes), got %lld", SizeText(min).c_str(),
                       static_cast<long long>(min), static_cast<long long>(bytes)));
    return false;
  }
  *out = bytes;
  return true;
}

// A whole number in [min, max] or "max" (= unset).
bool ReadCountOrMax(ObjectReader& r, Errors* errors, const std::string& key, int64_t min, int64_t max, int64_t* out) {
  const picojson::value* v = r.Get(key);
  if (!v || IsMax(v)) return false;
  if (v->is<std::string>()) {
    r.Fail(key, "expected a number or \"max\", got " + Quote(v->get<std::string>()));
    return false;
  }
  size_t before = errors->size();
  int64_t n = 0;
  r.Int(key, min, max, &n);
  if (errors->size() != before) return false;
  *out = n;
  return true;
}

// cpuset lists: "0-3,5" (numbers and ascending ranges, comma separated).
bool ValidList(const std::string& s) {
  for (const std::string& item : Split(s, ',')) {
    std::vector<std::string> ends = Split(item, '-');
    if (ends.size() > 2) return false;
    int64_t prev = -1;
    for (const std::string& e : ends) {
      if (!AllDigits(e) || e.size() > 5) return false;
      int64_t n = std::stoll(e);
      if (n > kMaxListNumber || n < prev) return false;
      prev = n;
    }
  }
  return true;
}

void ReadCpuset(const picojson::value& v, const std::string& path, Errors* errors, cgroup::Resources* out) {
  ObjectReader r(v, path, errors);
  if (!r.ok()) return;
  std::string s;
  if (ReadString(r, errors, "cpus", &s)) {
    if (ValidList(s)) out->cpuset_cpus = s;
    else r.Fail("cpus", "expected a list of CPU numbers and ranges like \"0-3,5\", got " + Quote(s));
  }
  if (ReadString(r, errors, "mems", &s)) {
    if (ValidList(s)) out->cpuset_mems = s;
    else r.Fail("mems", "expected a list of memory node numbers and ranges like \"0\" or \"0-1\", got " + Quote(s));
  }
  r.RejectUnknown();
}

// cpu.max: "QUOTA PERIOD", "max" / "max PERIOD" (no limit), or a number of
// CPUs (quota = CPUs x 100000 per 100000 µs).
void ReadCpuMax(const picojson::value& v, const std::string& path, Errors* errors, cgroup::Resources* out) {
  if (v.is<std::string>()) {
    const std::string& s = v.get<std::string>();
    std::vector<std::string> parts;
    for (const std::string& p : Split(s, ' ')) {
      if (!p.empty()) parts.push_back(p);
    }
    if (parts.size() == 1 && parts[0] == "max") return;
    bool quota_max = !parts.empty() && parts[0] == "max";
    if (parts.size() != 2 || !(quota_max || AllDigits(parts[0])) || !AllDigits(parts[1])) {
      errors->push_back(path + ": " + kCpuMaxExpected + ", got " + Quote(s));
      return;
    }
    bool good = true;
    auto quota = ParseInt(parts[0], kMinCpuQuota, kMaxCpuQuota);
    if (!quota_max && !quota.ok()) {
      errors->push_back(Format("%s: quota must be between %lld and %lld microseconds, got %s", path.c_str(),
                               static_cast<long long>(kMinCpuQuota), static_cast<long long>(kMaxCpuQuota),
                               parts[0].c_str()));
      good = false;
    }
    auto period = ParseInt(parts[1], kMinCpuPeriod, kMaxCpuPeriod);
    if (!period.ok()) {
      errors->push_back(Format("%s: period must be between %lld and %lld microseconds (1ms and 1s), got %s",
                               path.c_str(), static_cast<long long>(kMinCpuPeriod),
                               static_cast<long long>(kMaxCpuPeriod), parts[1].c_str()));
      good = false;
    }
    if (!good || quota_max) return;
    out->cpu_max_quota_us = *quota;
    out->cpu_max_period_us = static_cast<uint64_t>(*period);
    return;
  }
  if (v.is<double>()) {  // also whole numbers
    double cpus = v.get<double>();
    if (!(cpus >= kMinCores && cpus <= kMaxCores)) {
      errors->push_back(path + ": must be between 0.01 and 1024 CPUs, got " + json::Preview(v));
      return;
    }
    out->cpu_max_quota_us = std::llround(cpus * kCoresPeriod);
    out->cpu_max_period_us = kCoresPeriod;
    return;
  }
  errors->push_back(path + ": " + kCpuMaxExpected + ", got " + json::TypeName(v) + " " + json::Preview(v));
}

void ReadCpu(const picojson::value& v, const std::string& path, Errors* errors, cgroup::Resources* out) {
  ObjectReader r(v, path, errors);
  if (!r.ok()) return;
  int64_t weight = 0;
  int64_t shares = 0;
  r.Int("weight", 1, kMaxWeight, &weight);
  r.Int("shares", kMinShares, kMaxShares, &shares);
  if (r.Has("weight") && r.Has("shares")) {
    r.Fail("shares", "cannot be used together with weight (shares is the cgroup v1 form of weight; give one of them)");
  } else if (weight) {
    out->cpu_weight = static_cast<uint64_t>(weight);
  } else if (shares) {
    // The OCI runtime spec's conversion (runc, crun): 2 -> 1, 1024 -> 39, 262144 -> 10000.
    out->cpu_weight = static_cast<uint64_t>(1 + ((shares - 2) * 9999) / 262142);
  }
  if (const picojson::value* m = r.Get("max")) ReadCpuMax(*m, r.PathOf("max"), errors, out);
  if (const picojson::value* c = r.Get("cpuset")) ReadCpuset(*c, r.PathOf("cpuset"), errors, out);
  r.RejectUnknown();
}

void ReadMemory(const picojson::value& v, const std::string& path, Errors* errors, cgroup::Resources* out) {
  ObjectReader r(v, path, errors);
  if (!r.ok()) return;
  ReadBytes(r, errors, "max", kMinMemory, &out->memory_max);
  ReadBytes(r, errors, "high", kMinMemory, &out->memory_high);
  ReadBytes(r, errors, "low", 0, &out->memory_low);
  ReadBytes(r, errors, "swap_max", 0, &out->memory_swap_max);
  r.RejectUnknown();
  if (out->memory_max < 0) return;
  std::string max = SizeText(out->memory_max);
  if (out->memory_high > out->memory_max) {
    r.Fail("high", "must not be more than max (" + max + "), got " + SizeText(out->memory_high));
    out->memory_high = -1;
  }
  if (out->memory_low > out->memory_max) {
    r.Fail("low", "must not be more than max (" + max + "), got " + SizeText(out->memory_low));
    out->memory_low = -1;
  }
}

void ReadPids(const picojson::value& v, const std::string& path, Errors* errors, cgroup::Resources* out) {
  ObjectReader r(v, path, errors);
  if (!r.ok()) return;
  ReadCountOrMax(r, errors, "max", 1, kMaxPids, &out->pids_max);
  r.RejectUnknown();
}

// "/dev/vda" (resolved with stat()) or "254:0".
bool ReadDevice(ObjectReader& r, Errors* errors, cgroup::IoDeviceLimit* out) {
  if (!r.Has("device")) {
    r.Known("device");
    r.Fail("device", "required");
    return false;
  }
  std::string dev;
  if (!ReadString(r, errors, "device", &dev)) return false;
  if (StartsWith(dev, "/dev/")) {
    struct stat st;
    if (::stat(dev.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) {
      r.Fail("device", Quote(dev) + " is not a block device on this node");
      return false;
    }
    out->major = major(st.st_rdev);
    out->minor = minor(st.st_rdev);
    out->device = dev;
    return true;
  }
  std::vector<std::string> parts = Split(dev, ':');
  if (parts.size() != 2 || !AllDigits(parts[0]) || !AllDigits(parts[1])) {
    r.Fail("device", "expected a block device path like \"/dev/vda\" or MAJOR:MINOR like \"254:0\", got " + Quote(dev));
    return false;
  }
  auto maj = ParseInt(parts[0], 0, kMaxDeviceMajor);
  auto min = ParseInt(parts[1], 0, kMaxDeviceMinor);
  if (!maj.ok() || !min.ok()) {
    r.Fail("device", Format("%s is not a valid device number (major 0-%lld, minor 0-%lld)", Quote(dev).c_str(),
                            static_cast<long long>(kMaxDeviceMajor), static_cast<long long>(kMaxDeviceMinor)));
    return false;
  }
  out->major = static_cast<uint32_t>(*maj);
  out->minor = static_cast<uint32_t>(*min);
  out->device = dev;
  return true;
}

// rbps / wbps: a size per second; riops / wiops: a number. "max" = no limit.
void ReadRate(ObjectReader& r, Errors* errors, const std::string& key, bool bytes, uint64_t* out) {
  const picojson::value* v = r.Get(key);
  if (!v || IsMax(v)) return;
  int64_t n = 0;
  if (bytes) {
    if (!ReadBytes(r, errors, key, 0, &n)) return;
  } else if (!ReadCountOrMax(r, errors, key, INT64_MIN, INT64_MAX, &n)) {
    return;
  }
  if (n < 1) {
    r.Fail(key, "must be at least 1 (leave it out, or write \"max\", for no limit)");
    return;
  }
  *out = static_cast<uint64_t>(n);
}

void ReadIo(const picojson::value& v, const std::string& path, Errors* errors, cgroup::Resources* out) {
  ObjectReader r(v, path, errors);
  if (!r.ok()) return;
  int64_t weight = 0;
  r.Int("weight", 1, kMaxWeight, &weight);
  out->io_weight = static_cast<uint64_t>(weight);
  const picojson::value* max = r.Get("max");
  r.RejectUnknown();
  if (!max) return;
  std::string max_path = r.PathOf("max");
  if (!max->is<picojson::array>()) {
    errors->push_back(max_path + ": expected an array of devices, got " + json::TypeName(*max));
    return;
  }
  const auto& arr = max->get<picojson::array>();
  std::vector<size_t> indexes;  // of out->io_max's entries in arr
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string item = Format("%s[%zu]", max_path.c_str(), i);
    size_t before = errors->size();
    ObjectReader er(arr[i], item, errors);
    if (!er.ok()) continue;
    cgroup::IoDeviceLimit lim;
    bool dev_ok = ReadDevice(er, errors, &lim);
    ReadRate(er, errors, "rbps", true, &lim.rbps);
    ReadRate(er, errors, "wbps", true, &lim.wbps);
    ReadRate(er, errors, "riops", false, &lim.riops);
    ReadRate(er, errors, "wiops", false, &lim.wiops);
    er.RejectUnknown();
    if (errors->size() != before) continue;
    if (!lim.rbps && !lim.wbps && !lim.riops && !lim.wiops) {
      errors->push_back(item + ": needs at least one of rbps, wbps, riops, wiops");
      continue;
    }
    if (!dev_ok) continue;
    size_t j = 0;
    while (j < out->io_max.size() && (out->io_max[j].major != lim.major || out->io_max[j].minor != lim.minor)) ++j;
    if (j == out->io_max.size()) {
      out->io_max.push_back(lim);
      indexes.push_back(i);
      continue;
    }
    std::string what = Format("device %u:%u is", lim.major, lim.minor);
    if (StartsWith(lim.device, "/dev/")) what = Quote(lim.device) + Format(" is device %u:%u,", lim.major, lim.minor);
    er.Fail("device", Format("%s already limited by io.max[%zu]", what.c_str(), indexes[j]));
  }
}

// A task's device requests: {"vendor.example/camera": 1}, each name a
// kubelet extended resource name, each count a whole number >= 1.
void ReadDevices(const picojson::value& v, const std::string& path, Errors* errors,
                 std::vector<devices::Request>* out) {
  if (!v.is<picojson::object>()) {
    errors->push_back(path + ": expected an object of resource names and device counts, like "
                             "{\"vendor.example/camera\": 1}, got " + std::string(json::TypeName(v)));
    return;
  }
  const auto& obj = v.get<picojson::object>();
  if (obj.size() > kMaxDeviceResources) {
    errors->push_back(Format("%s: %zu resources, more than the limit of %zu", path.c_str(), obj.size(),
                             kMaxDeviceResources));
    return;
  }
  for (const auto& [name, count] : obj) {  // sorted by name (picojson's map)
    std::string item = path + "[" + Quote(name) + "]";
    std::string problem = devices::ResourceNameProblem(name);
    if (!problem.empty()) {
      errors->push_back(item + ": " + devices::InvalidResourceNameText(name) + ": " + problem);
      continue;
    }
    if (!count.is<int64_t>() || count.get<int64_t>() < 1 || count.get<int64_t>() > kMaxDeviceCount) {
      errors->push_back(Format("%s: expected a whole number of devices from 1 to %lld, got %s", item.c_str(),
                               static_cast<long long>(kMaxDeviceCount), json::Preview(count).c_str()));
      continue;
    }
    out->push_back({name, count.get<int64_t>()});
  }
}

picojson::value Int(int64_t n) { return picojson::value(n); }
picojson::value Uint(uint64_t n) { return picojson::value(static_cast<int64_t>(n)); }

}  // namespace

cgroup::Resources ResourcesFromJson(const picojson::value& v, const std::string& path,
                                  std::vector<std::string>* errors, std::vector<devices::Request>* devices) {
  cgroup::Resources res;
  ObjectReader r(v, path, errors);
  if (!r.ok()) return res;
  if (const picojson::value* d = r.Get("devices")) {
    if (devices) ReadDevices(*d, r.PathOf("devices"), errors, devices);
    else r.Fail("devices", "devices are requested per task (tasks[i].resources.devices; docs/devices.md)");
  }
  if (const picojson::value* c = r.Get("cpu")) ReadCpu(*c, r.PathOf("cpu"), errors, &res);
  if (const picojson::value* m = r.Get("memory")) ReadMemory(*m, r.PathOf("memory"), errors, &res);
  if (const picojson::value* p = r.Get("pids")) ReadPids(*p, r.PathOf("pids"), errors, &res);
  if (const picojson::value* i = r.Get("io")) ReadIo(*i, r.PathOf("io"), errors, &res);
  r.RejectUnknown();
  return res;
}

picojson::value DevicesToJson(const std::vector<devices::Request>& devices) {
  picojson::object o;
  for (const devices::Request& d : devices) o[d.resource] = Int(d.count);
  return picojson::value(std::move(o));
}

picojson::value ResourcesToJson(const cgroup::Resources& r) {
  picojson::object o;
  picojson::object cpu;
  if (r.cpu_weight) cpu["weight"] = Uint(r.cpu_weight);
  if (r.cpu_max_quota_us >= 0) {
    cpu["max"] = picojson::value(Format("%lld %llu", static_cast<long long>(r.cpu_max_quota_us),
                                        static_cast<unsigned long long>(r.cpu_max_period_us)));
  }
  picojson::object cpuset;
  if (!r.cpuset_cpus.empty()) cpuset["cpus"] = picojson::value(r.cpuset_cpus);
  if (!r.cpuset_mems.empty()) cpuset["mems"] = picojson::value(r.cpuset_mems);
  if (!cpuset.empty()) cpu["cpuset"] = picojson::value(std::move(cpuset));
  if (!cpu.empty()) o["cpu"] = picojson::value(std::move(cpu));

  picojson::object memory;
  if (r.memory_max >= 0) memory["max"] = Int(r.memory_max);
  if (r.memory_high >= 0) memory["high"] = Int(r.memory_high);
  if (r.memory_low >= 0) memory["low"] = Int(r.memory_low);
  if (r.memory_swap_max >= 0) memory["swap_max"] = Int(r.memory_swap_max);
  if (!memory.empty()) o["memory"] = picojson::value(std::move(memory));

  if (r.pids_max >= 0) {
    picojson::object pids;
    pids["max"] = Int(r.pids_max);
    o["pids"] = picojson::value(std::move(pids));
  }

  picojson::object io;
  if (r.io_weight) io["weight"] = Uint(r.io_weight);
  if (!r.io_max.empty()) {
    picojson::array devices;
    for (const cgroup::IoDeviceLimit& d : r.io_max) {
      picojson::object dev;
      // The device number, not the path: a stored job must load even when
      // the device is gone (the agent then reports it), and it is what the
      // kernel is given.
      dev["device"] = picojson::value(Format("%u:%u", d.major, d.minor));
      if (d.rbps) dev["rbps"] = Uint(d.rbps);
      if (d.wbps) dev["wbps"] = Uint(d.wbps);
      if (d.riops) dev["riops"] = Uint(d.riops);
      if (d.wiops) dev["wiops"] = Uint(d.wiops);
      devices.emplace_back(std::move(dev));
    }
    io["max"] = picojson::value(std::move(devices));
  }
  if (!io.empty()) o["io"] = picojson::value(std::move(io));
  return picojson::value(std::move(o));
}

}  // namespace outpost::job
