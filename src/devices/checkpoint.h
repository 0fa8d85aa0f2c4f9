// The device manager's checkpoint: which task holds which devices of which
// resource, with the plugin's ContainerAllocateResponse for them, and the
// resources known when it was written. Read at the agent's start, so running
// tasks keep their devices and none is given twice; written after every
// change that matters (manager.h says which).
// Owns: the file's format, its checksum, reading it back from untrusted
// bytes (a corrupt or foreign file is an error, never a crash), setting a
// corrupt file aside, and writing it atomically and durably. Does not own
// what the entries mean (manager.h).
//
// The format is the kubelet's kubelet_internal_checkpoint (v2) layout with
// outpost's meaning and checksum (docs/devices.md, "The checkpoint"):
//   {"Data": {"PodDeviceEntries": [{"PodUID": "<job>", "ContainerName":
//    "<task>", "ResourceName": "vendor.example/camera",
//    "DeviceIDs": {"-1": ["cam0"]}, "AllocResp": "<base64 protobuf>"}],
//    "RegisteredDevices": {"vendor.example/camera": ["cam0", "cam1"]}},
//   "Checksum": 123, "BootID": "..."}
// DeviceIDs by NUMA node ("-1": no topology; a device on two nodes is under
// both), as the kubelet writes them; a flat array (its v1 format) is read as
// node -1. RegisteredDevices lists every device of a resource, healthy or
// not (the kubelet lists the healthy ones; it uses only the names), so a
// health flip does not rewrite the file. Checksum: FNV-1a 32 (the kubelet's
// hash) of Data as compact JSON with sorted keys (the kubelet hashes Go's
// dump of its structs, which C++ cannot reproduce): the kubelet refuses
// outpost's file, and outpost the kubelet's, each as corrupt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "devices/codec.h"
#include "loop/loop.h"
#include "loop/pending_writes.h"

namespace outpost::devices {

constexpr char kCheckpointFile[] = "device-checkpoint.json";  // in the state dir
constexpr size_t kMaxCheckpointBytes = 16 << 20;

struct CheckpointEntry {
  std::string task;  // "<job>.<task>" (PodUID and ContainerName in the file)
  std::string resource;
  std::vector<std::pair<int64_t, std::string>> devices;  // (NUMA node or -1, device ID)
  std::string alloc_resp;  // the ContainerAllocateResponse, encoded (checked by DecodeCheckpoint)
};

struct CheckpointData {
  std::vector<CheckpointEntry> entries;
  std::vector<std::pair<std::string, std::vector<std::string>>> registered;  // resource -> device IDs, sorted
  std::string boot_id;  // the kernel's boot id when written ("" = unknown)
  bool empty() const { return entries.empty() && registered.empty(); }
};

std::string EncodeCheckpoint(const CheckpointData& data);
// The checksum, the layout and every AllocResp are checked; any problem is
// an error (InvalidArgument) naming where.
Result<CheckpointData> DecodeCheckpoint(std::string_view text);

class CheckpointFile {
 public:
  // path: <state_dir>/device-checkpoint.json. Writes survive an agent
  // crash, not a power cut (Durability::kProcessCrash): after a power cut
  // the node has rebooted and Restore drops the allocations anyway, so an
  // fsync would only slow every start that allocates.
  CheckpointFile(Loop* loop, std::string path);

  // What the file holds. Missing: empty data, no problem. Unreadable or
  // corrupt: empty data, the file moved to <path>.bad for the operator, and
  // *problem says why and where it went.
  CheckpointData Load(std::string* problem);
  // Writes data unless the file holds it already. A full disk is no error:
  // the data is kept and written when there is room (PendingWrites).
  Status Save(const CheckpointData& data);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string last_;  // what the file holds, or will once there is room
  PendingWrites writes_;
};

}  // namespace outpost::devices
