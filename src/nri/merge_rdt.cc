// CreateContainer: merging LinuxRdt adjustments. The model keeps LinuxRdt
// encoded (outpost never applies it), so this reads just enough of the
// protobuf to own its parts like upstream: clos_id (RdtClosID), schemata
// (RdtSchemata), enable_monitoring (RdtEnableMonitoring), and remove=true,
// which clears all three and drops what earlier plugins set.
#include <cstdint>
#include <string>

#include "nri/merge.h"

namespace outpost::nri {

namespace {

constexpr int kRdtRemove = 4;

bool ReadVarint(const std::string& b, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= b.size()) return false;
    auto c = static_cast<uint8_t>(b[(*pos)++]);
    *v |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) return true;
  }
  return false;
}

struct RdtParts {
  std::map<int, std::string> entries;  // field -> its encoded entries, in order
  bool remove = false;
};

// Splits an encoded LinuxRdt into its top-level entries. Unknown fields
// are dropped; malformed bytes are an error.
bool SplitRdt(const std::string& b, RdtParts* out) {
  size_t pos = 0;
  while (pos < b.size()) {
    size_t start = pos;
    uint64_t tag = 0;
    if (!ReadVarint(b, &pos, &tag)) return false;
    uint64_t field = tag >> 3;
    uint64_t v = 0;
    switch (tag & 7) {
      case 0:
        if (!ReadVarint(b, &pos, &v)) return false;
        break;
      case 1:
        if (b.size() - pos < 8) return false;
        pos += 8;
        break;
      case 2:
        if (!ReadVarint(b, &pos, &v) || v > b.size() - pos) return false;
        pos += static_cast<size_t>(v);
        break;
      case 5:
        if (b.size() - pos < 4) return false;
        pos += 4;
        break;
      default:
        return false;
    }
    if (field == 0) return false;
    if (field == kRdtRemove && (tag & 7) == 0) {
      out->remove = v != 0;
    } else if (field >= 1 && field <= 3) {
      out->entries[static_cast<int>(field)] += b.substr(start, pos - start);
    }
  }
  return true;
}

}  // namespace

Status CreateResult::AdjustRdt(const std::string& plugin, const std::string& raw) {
  RdtParts parts;
  if (!SplitRdt(raw, &parts)) {
    return Error(Code::kInvalidArgument, "plugin " + GoQuote(plugin) + " sent a malformed LinuxRdt adjustment");
  }
  const std::string& id = current_.id;
  if (parts.remove) {
    book_.ClearSimple(id, Field::kRdtClosID, plugin);
    book_.ClearSimple(id, Field::kRdtSchemata, plugin);
    book_.ClearSimple(id, Field::kRdtEnableMonitoring, plugin);
    rdt_parts_.clear();
    rdt_remove_ = true;
  }
  static const Field kFields[] = {Field::kRdtClosID, Field::kRdtSchemata, Field::kRdtEnableMonitoring};
  for (const auto& [field, bytes] : parts.entries) {
    OUTPOST_RETURN_IF_ERROR(book_.ClaimSimple(id, kFields[field - 1], plugin));
    rdt_parts_[field] = bytes;
    rdt_remove_ = false;
  }
  std::string merged;
  for (const auto& [field, bytes] : rdt_parts_) merged += bytes;
  if (rdt_remove_) merged += std::string("\x20\x01", 2);  // remove = true
  linux().rdt_raw = std::move(merged);
  return OkStatus();
}

}  // namespace outpost::nri
