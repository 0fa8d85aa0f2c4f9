#include "devices/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "base/json.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::devices {

namespace {

using picojson::array;
using picojson::object;
using picojson::value;

// The kubelet's hash function (hash/fnv New32a) over outpost's canonical
// text of Data.
uint32_t Fnv32a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

Error Corrupt(const std::string& msg) { return Error(Code::kInvalidArgument, "device checkpoint: " + msg); }

const value* Field(const value& v, const char* key) {
  if (!v.is<object>()) return nullptr;
  const object& o = v.get<object>();
  auto it = o.find(key);
  return it == o.end() ? nullptr : &it->second;
}

// A required string member of an entry.
bool StringAt(const value& o, const char* key, std::string* out) {
  const value* v = Field(o, key);
  if (!v || !v->is<std::string>()) return false;
  *out = v->get<std::string>();
  return true;
}

bool StringList(const value& v, std::vector<std::string>* out) {
  if (!v.is<array>()) return false;
  for (const value& s : v.get<array>()) {
    if (!s.is<std::string>()) return false;
    out->push_back(s.get<std::string>());
  }
  return true;
}

Status DecodeEntry(const value& e, size_t i, CheckpointEntry* out) {
  std::string where = Format("PodDeviceEntries[%zu]", i);
  std::string job, task, resp;
  if (!e.is<object>() || !StringAt(e, "PodUID", &job) || !StringAt(e, "ContainerName", &task) ||
      !StringAt(e, "ResourceName", &out->resource) || !StringAt(e, "AllocResp", &resp)) {
    return Corrupt(where + ": expected an object with strings PodUID, ContainerName, ResourceName, AllocResp");
  }
  if (job.empty() || task.empty() || job.find('.') != std::string::npos) {
    return Corrupt(where + ": PodUID and ContainerName must name a job and a task");
  }
  out->task = job + "." + task;
  const value* ids = Field(e, "DeviceIDs");
  std::vector<std::string> list;
  if (ids && ids->is<array>()) {  // the kubelet's v1 format: no NUMA nodes
    if (!StringList(*ids, &list)) return Corrupt(where + ".DeviceIDs: expected strings");
    for (std::string& id : list) out->devices.emplace_back(-1, std::move(id));
  } else if (ids && ids->is<object>()) {
    for (const auto& [node, devs] : ids->get<object>()) {
      auto n = ParseInt(node, INT64_MIN, INT64_MAX);
      list.clear();
      if (!n.ok() || !StringList(devs, &list)) {
        return Corrupt(where + ".DeviceIDs: expected NUMA node numbers with lists of device IDs");
      }
      for (std::string& id : list) out->devices.emplace_back(*n, std::move(id));
    }
  } else {
    return Corrupt(where + ".DeviceIDs: expected an object or an array");
  }
  auto bytes = Base64Decode(resp);
  if (!bytes.ok()) return Corrupt(where + ".AllocResp: " + bytes.error().message());
  auto r = DecodeContainerAllocateResponse(*bytes);
  if (!r.ok()) return Corrupt(where + ".AllocResp: " + r.error().message());
  out->alloc_resp = std::move(*bytes);
  return OkStatus();
}

value DataJson(const CheckpointData& d) {
  array entries;
  for (const CheckpointEntry& e : d.entries) {
    object o;
    size_t dot = e.task.find('.');
    o["PodUID"] = value(e.task.substr(0, dot));
    o["ContainerName"] = value(dot == std::string::npos ? std::string() : e.task.substr(dot + 1));
    o["ResourceName"] = value(e.resource);
    object ids;
    for (const auto& [node, id] : e.devices) {
      value& list = ids[std::to_string(node)];
      if (!list.is<array>()) list = value(array());
      list.get<array>().emplace_back(id);
    }
    o["DeviceIDs"] = value(std::move(ids));
    o["AllocResp"] = value(Base64Encode(e.alloc_resp));
    entries.emplace_back(std::move(o));
  }
  object registered;
  for (const auto& [resource, ids] : d.registered) {
    array list;
    for (const std::string& id : ids) list.emplace_back(id);
    registered[resource] = value(std::move(list));
  }
  object data;
  data["PodDeviceEntries"] = value(std::move(entries));
  data["RegisteredDevices"] = value(std::move(registered));
  return value(std::move(data));
}

}  // namespace

std::string EncodeCheckpoint(const CheckpointData& d) {
  value data = DataJson(d);
  object doc;
  doc["Checksum"] = value(static_cast<int64_t>(Fnv32a(json::Write(data))));
  doc["Data"] = std::move(data);
  if (!d.boot_id.empty()) doc["BootID"] = value(d.boot_id);
  return json::Write(value(std::move(doc))) + "\n";
}

Result<CheckpointData> DecodeCheckpoint(std::string_view text) {
  auto doc = json::Parse(std::string(text), json::ParseLimits{kMaxCheckpointBytes, 16});
  if (!doc.ok()) return Corrupt(doc.error().message());
  const value* data = Field(*doc, "Data");
  const value* sum = Field(*doc, "Checksum");
  if (!data || !data->is<object>() || !sum || !sum->is<int64_t>()) {
    return Corrupt("expected an object with Data and Checksum");
  }
  uint32_t want = Fnv32a(json::Write(*data));
  if (sum->get<int64_t>() != static_cast<int64_t>(want)) {
    return Corrupt(Format("checksum %lld does not match its data (%lu)", static_cast<long long>(sum->get<int64_t>()),
                          static_cast<unsigned long>(want)));
  }
  CheckpointData out;
  const value* boot = Field(*doc, "BootID");
  if (boot && boot->is<std::string>()) out.boot_id = boot->get<std::string>();
  const value* entries = Field(*data, "PodDeviceEntries");
  if (entries && !entries->is<picojson::null>()) {
    if (!entries->is<array>()) return Corrupt("Data.PodDeviceEntries: expected an array");
    const array& a = entries->get<array>();
    for (size_t i = 0; i < a.size(); ++i) {
      CheckpointEntry e;
      OUTPOST_RETURN_IF_ERROR(DecodeEntry(a[i], i, &e));
      out.entries.push_back(std::move(e));
    }
  }
  const value* registered = Field(*data, "RegisteredDevices");
  if (registered && !registered->is<picojson::null>()) {
    if (!registered->is<object>()) return Corrupt("Data.RegisteredDevices: expected an object");
    for (const auto& [resource, ids] : registered->get<object>()) {
      std::vector<std::string> list;
      if (!ids.is<picojson::null>() && !StringList(ids, &list)) {
        return Corrupt("Data.RegisteredDevices: expected lists of device IDs");
      }
      std::sort(list.begin(), list.end());
      out.registered.emplace_back(resource, std::move(list));
    }
  }
  return out;
}

CheckpointFile::CheckpointFile(Loop* loop, std::string path)
    : path_(std::move(path)), writes_(loop, sys::Durability::kProcessCrash) {}

CheckpointData CheckpointFile::Load(std::string* problem) {
  problem->clear();
  auto text = sys::ReadFile(path_, kMaxCheckpointBytes);
  if (!text.ok() && text.error().sys_errno() == ENOENT) return CheckpointData();
  Result<CheckpointData> data = text.ok() ? DecodeCheckpoint(*text) : Result<CheckpointData>(text.error());
  if (data.ok()) {
    last_ = *text;
    return std::move(*data);
  }
  // Kept for the operator, out of the way of the next write.
  std::string bad = path_ + ".bad";
  std::string where = std::rename(path_.c_str(), bad.c_str()) == 0 ? " (moved to " + bad + ")" : "";
  *problem = data.error().message() + where;
  return CheckpointData();
}

Status CheckpointFile::Save(const CheckpointData& data) {
  std::string text = EncodeCheckpoint(data);
  if (text == last_) return OkStatus();
  bool kept = false;
  Status st = writes_.Write(path_, text, &kept);
  if (st.ok()) last_ = std::move(text);
  return st;
}

}  // namespace outpost::devices
