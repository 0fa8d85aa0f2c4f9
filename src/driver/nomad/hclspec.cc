#include "driver/nomad/hclspec.h"

#include <algorithm>

#include "base/strings.h"
#include "driver/nomad/hcl_expr.h"

namespace outpost::driver::nomad {

namespace {

// ---- protobuf ---------------------------------------------------------------

// Reads the fields of one protobuf message. The schema comes from another
// program: every length is checked against what is left.
class PbReader {
 public:
  explicit PbReader(std::string_view in) : in_(in) {}

  bool done() const { return pos_ == in_.size(); }

  // The next field: its number and, for wire type 2, its bytes (*bytes) or,
  // for a varint, its value (*num). Other wire types are skipped over.
  bool Next(uint32_t* field, uint32_t* wire, std::string_view* bytes, uint64_t* num) {
    uint64_t tag;
    if (!Varint(&tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    switch (*wire) {
      case 0: return Varint(num);
      case 1: return Skip(8);
      case 2: {
        uint64_t len;
        if (!Varint(&len) || len > in_.size() - pos_) return false;
        *bytes = in_.substr(pos_, static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return true;
      }
      case 5: return Skip(4);
      default: return false;
    }
  }

 private:
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && pos_ < in_.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(in_[pos_++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool Skip(size_t n) {
    if (n > in_.size() - pos_) return false;
    pos_ += n;
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
};

// ---- specs ------------------------------------------------------------------

class SpecDecoder {
 public:
  const Error& error() const { return err_; }

  // msg: a Spec message; implied: the Object key it is under ("" elsewhere).
  bool Decode(std::string_view msg, const std::string& implied, int depth, const std::string& path, Spec* out) {
    if (depth > kMaxSpecDepth) return Bad(path, Format("nested more than %d deep", kMaxSpecDepth));
    if (++nodes_ > kMaxSpecNodes) return Bad(path, Format("more than %zu nodes", kMaxSpecNodes));
    Spec& s = *out;
    // The oneof: the last kind given wins, as protobuf's decoders have it.
    Fields spec;
    if (!Read(msg, 0, &spec)) return Bad(path, "malformed protobuf");
    uint32_t kind = 0;
    for (uint32_t f = 1; f <= 10; ++f) {
      if (spec.has[f] && spec.at[f] >= spec.at[kind]) kind = f;
    }
    if (kind == 0) return Bad(path, "a spec with no kind (none of object, attr, block, ... is set)");
    s.kind = static_cast<Spec::Kind>(kind - 1);
    // The kind's own message: field numbers as in hcl_spec.proto.
    Fields f;
    uint32_t repeated = s.kind == Spec::Kind::kBlockMap ? 2 : (kind <= 2 ? 1 : 0);
    if (!Read(spec.bytes[kind], repeated, &f)) return Bad(path, "malformed protobuf");
    switch (s.kind) {
      case Spec::Kind::kObject: {
        std::vector<std::string> keys;
        std::vector<std::string_view> vals;
        for (std::string_view entry : f.reps) {
          Fields e;
          if (!Read(entry, 0, &e)) return Bad(path, "malformed protobuf");
          keys.emplace_back(e.bytes[1]);
          vals.push_back(e.bytes[2]);
          if (!e.has[2]) return Bad(KeyPath(path, keys.back()), "no spec");
        }
        std::string dup;
        SortByKey(&keys, &vals, &dup);  // a protobuf map: the last entry of a key wins
        s.children.resize(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!Decode(vals[i], keys[i], depth + 1, KeyPath(path, keys[i]), &s.children[i])) return false;
        }
        s.keys = std::move(keys);
        return true;
      }
      case Spec::Kind::kArray:
        s.children.resize(f.reps.size());
        for (size_t i = 0; i < f.reps.size(); ++i) {
          if (!Decode(f.reps[i], "", depth + 1, Format("%s[%zu]", path.c_str(), i), &s.children[i])) return false;
        }
        return true;
      case Spec::Kind::kLiteral: {
        std::string err;
        if (!ParseHclValue(f.bytes[1], &s.literal, &err)) {
          return Bad(path, Format("literal %s: %s", QuoteIfNeeded(f.bytes[1]).c_str(), err.c_str()));
        }
        return true;
      }
      case Spec::Kind::kDefault:
        if (!f.has[1] || !f.has[2]) return Bad(path, "a default needs a primary and a default spec");
        s.children.resize(2);
        return Decode(f.bytes[1], "", depth + 1, path, &s.children[0]) &&
               Decode(f.bytes[2], "", depth + 1, path, &s.children[1]);
      default: break;
    }
    // attr, block_attrs: name 1, type 2, required 3; block: name 1,
    // required 2, nested 3; block_list, block_set: name 1, min_items 2,
    // max_items 3, nested 4; block_map: name 1, labels 2, nested 3.
    static const char* const kNames[] = {"", "", "attr", "block", "block_attrs", "block_list", "block_set", "block_map"};
    const char* what = kNames[kind - 1];
    s.name = f.bytes[1].empty() ? implied : std::string(f.bytes[1]);
    if (s.name.empty()) return Bad(path, Format("%s with no name", what));
    if (s.kind == Spec::Kind::kAttr || s.kind == Spec::Kind::kBlockAttrs) {
      s.required = f.nums[3] != 0;
      std::string err;
      if (!ParseHclType(f.bytes[2], &s.type, &err)) {
        return Bad(path, Format("%s %s: type %s: %s", what, s.name.c_str(), QuoteIfNeeded(f.bytes[2]).c_str(),
                                err.c_str()));
      }
      return true;
    }
    bool list = s.kind == Spec::Kind::kBlockList || s.kind == Spec::Kind::kBlockSet;
    uint32_t nested = list ? 4 : 3;
    if (s.kind == Spec::Kind::kBlock) s.required = f.nums[2] != 0;
    if (list) {
      s.min_items = f.nums[2];
      s.max_items = f.nums[3];
    }
    for (std::string_view l : s.kind == Spec::Kind::kBlockMap ? f.reps : std::vector<std::string_view>()) {
      s.labels.emplace_back(l);
    }
    if (!f.has[nested]) return Bad(path, Format("%s %s has no nested spec", what, s.name.c_str()));
    s.children.resize(1);
    if (!Decode(f.bytes[nested], "", depth + 1, path, &s.children[0])) return false;
    if (s.kind == Spec::Kind::kBlockMap) {
      if (s.labels.empty()) return Bad(path, Format("block_map %s has no labels", s.name.c_str()));
      // hcldec panics on this; Nomad's client would crash.
      if (ImpliedType(s.children[0]).HasDynamic()) {
        return Bad(path, Format("block_map %s holds attributes of type any, which hcldec does not allow", s.name.c_str()));
      }
    }
    return true;
  }

 private:
  // A message's fields 1 to 10: the last value of each (bytes for wire
  // type 2, nums for varints) and where it came (at); every value of
  // field `repeated` in reps.
  struct Fields {
    std::string_view bytes[11];
    uint64_t nums[11] = {};
    bool has[11] = {};
    size_t at[11] = {};
    std::vector<std::string_view> reps;
  };

  static bool Read(std::string_view msg, uint32_t repeated, Fields* out) {
    PbReader r(msg);
    for (size_t n = 1; !r.done(); ++n) {
      uint32_t field, wire;
      std::string_view bytes;
      uint64_t num = 0;
      if (!r.Next(&field, &wire, &bytes, &num)) return false;
      if (field > 10) continue;
      if (wire == 2 && field == repeated) out->reps.push_back(bytes);
      out->bytes[field] = bytes;
      out->nums[field] = num;
      out->has[field] = wire == 2;
      out->at[field] = n;
    }
    return true;
  }

  bool Bad(const std::string& path, const std::string& what) {
    err_ = Error(Code::kInvalidArgument, "invalid plugin schema: " + path + ": " + what);
    return false;
  }

  size_t nodes_ = 0;
  Error err_{Code::kOk, ""};
};

}  // namespace

Result<Spec> DecodeSpec(std::string_view spec_message) {
  SpecDecoder d;
  Spec s;
  if (!d.Decode(spec_message, "", 0, "schema", &s)) return d.error();
  return s;
}

Result<Schema> DecodeSchemaResponse(std::string_view response) {
  Schema out;
  std::string_view spec;
  PbReader r(response);
  while (!r.done()) {
    uint32_t field, wire;
    std::string_view bytes;
    uint64_t num;
    if (!r.Next(&field, &wire, &bytes, &num)) {
      return Error(Code::kInvalidArgument, "invalid plugin schema: malformed protobuf");
    }
    if (field == 1 && wire == 2) {
      spec = bytes;
      out.present = true;
    }
  }
  if (!out.present) return out;
  auto root = DecodeSpec(spec);
  if (!root.ok()) return root.error();
  out.root = std::move(*root);
  return out;
}

Type ImpliedType(const Spec& spec) {
  switch (spec.kind) {
    case Spec::Kind::kObject:
    case Spec::Kind::kArray: {
      std::vector<Type> types;
      for (const Spec& c : spec.children) types.push_back(ImpliedType(c));
      if (spec.kind == Spec::Kind::kArray) return Type::Tuple(std::move(types));
      return Type::Object(spec.keys, std::move(types));
    }
    case Spec::Kind::kAttr: return spec.type;
    case Spec::Kind::kBlock:
    case Spec::Kind::kDefault: return ImpliedType(spec.children[0]);
    case Spec::Kind::kBlockAttrs: return Type::Collection(Type::kMap, spec.type);
    case Spec::Kind::kBlockList: return Type::Collection(Type::kList, ImpliedType(spec.children[0]));
    case Spec::Kind::kBlockSet: return Type::Collection(Type::kSet, ImpliedType(spec.children[0]));
    case Spec::Kind::kBlockMap: {
      Type t = ImpliedType(spec.children[0]);
      for (size_t i = 0; i < spec.labels.size(); ++i) t = Type::Collection(Type::kMap, std::move(t));
      return t;
    }
    case Spec::Kind::kLiteral: return spec.literal.type;
  }
  return Type();
}

}  // namespace outpost::driver::nomad
