// hclspec.h's config half: a JSON config decoded against a Spec tree as
// hcldec decodes HCL's JSON syntax, and its bytes for SetConfig and
// StartTask (the Spec tree itself is decoded in hclspec.cc).
#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "base/strings.h"
#include "driver/nomad/cty_msgpack.h"
#include "driver/nomad/hcl_expr.h"
#include "driver/nomad/hclspec.h"

namespace outpost::driver::nomad {

namespace {

// NOMAD_ variables whose names depend on the job (its port labels, meta).
bool DynamicNomadName(const std::string& name) {
  static const char* const kPrefixes[] = {"NOMAD_PORT_",      "NOMAD_HOST_PORT_", "NOMAD_ALLOC_PORT_", "NOMAD_IP_",
                                          "NOMAD_ADDR_",      "NOMAD_HOST_IP_",   "NOMAD_HOST_ADDR_",  "NOMAD_META_",
                                          "NOMAD_UPSTREAM_", "NOMAD_UNIX_ADDR_"};
  for (const char* p : kPrefixes) {
    if (StartsWith(name, p)) return true;
  }
  return false;
}


struct Member {
  const std::string* key;
  const picojson::value* value;
  std::string path;  // of the member itself
};

struct Block {
  const Spec* spec;
  std::vector<std::string> labels;
  const picojson::value* body;
  std::string path;
};

struct Content {
  std::vector<Member> attrs;
  std::vector<Block> blocks;

  const Member* Attr(const std::string& name) const {
    for (const Member& m : attrs) {
      if (*m.key == name) return &m;
    }
    return nullptr;
  }
};

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class ConfigDecoder {
 public:
  ConfigDecoder(const DecodeOptions& opts, json::Errors* errors) : opts_(opts), errors_(errors) {}

  // hcldec's decode: the body's content by the spec's schema, then the
  // spec's value from it.
  Value Body(const Spec& spec, const picojson::value& body, const std::string& path, int depth) {
    if (depth > 64) {
      Fail(path, "nested too deeply");
      return Value::Unknown(ImpliedType(spec));
    }
    std::vector<const Spec*> schema;  // the attributes and blocks it may hold
    Schema(spec, &schema);
    std::vector<Member> members;
    Members(body, path, nullptr, &members);
    Content content;
    for (Member& m : members) {
      if (*m.key == "//") continue;  // HCL's JSON comments
      const Spec* hit = nullptr;
      std::string best;
      size_t best_dist = 3;
      for (const Spec* s : schema) {
        if (s->name == *m.key) hit = s;
        size_t d = EditDistance(*m.key, s->name, best_dist);
        if (d < best_dist) {
          best_dist = d;
          best = s->name;
        }
      }
      if (!hit) {
        Fail(m.path, best.empty() ? "unknown field" : "unknown field (did you mean \"%s\"?)", best.c_str());
      } else if (hit->kind != Spec::Kind::kAttr) {
        std::vector<std::string> labels;
        Unpack(*hit, *m.value, &labels, m.path, &content);
      } else if (content.Attr(*m.key)) {
        Fail(m.path, "set twice");
      } else {
        content.attrs.push_back(std::move(m));
      }
    }
    std::vector<const std::string*> told;
    for (const Spec* s : schema) {
      if (s->kind != Spec::Kind::kAttr || !s->required || content.Attr(s->name)) continue;
      if (std::none_of(told.begin(), told.end(), [&](const std::string* t) { return *t == s->name; })) {
        told.push_back(&s->name);
        Fail(KeyPath(path, s->name), "required attribute missing");
      }
    }
    return Eval(spec, content, path, depth);
  }

 private:
  void Fail(const std::string& path, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    errors_->push_back(path + ": " + buf);
  }

  // hcldec's ImpliedSchema: what the body may hold at this level.
  static void Schema(const Spec& s, std::vector<const Spec*>* out) {
    if (s.kind == Spec::Kind::kObject || s.kind == Spec::Kind::kArray || s.kind == Spec::Kind::kDefault) {
      for (const Spec& c : s.children) Schema(c, out);
    } else if (s.kind != Spec::Kind::kLiteral) {
      out->push_back(&s);
    }
  }

  // HCL's collectDeepAttrs: the members of an object, of each object of an
  // array, none of null. label: what they name, for block_map labels.
  void Members(const picojson::value& v, const std::string& path, const std::string* label, std::vector<Member>* out) {
    const picojson::array* items = v.is<picojson::array>() ? &v.get<picojson::array>() : nullptr;
    if (v.is<picojson::null>()) return;
    for (size_t i = 0; i < (items ? items->size() : 1); ++i) {
      const picojson::value& o = items ? (*items)[i] : v;
      std::string at = items ? Format("%s[%zu]", path.c_str(), i) : path;
      if (!o.is<picojson::object>()) {
        Fail(at, "expected an object%s%s, got %s", label ? " keyed by " : "", label ? label->c_str() : "",
             json::TypeName(o));
        continue;
      }
      for (const auto& [k, x] : o.get<picojson::object>()) out->push_back({&k, &x, KeyPath(at, k)});
    }
  }

  // HCL's unpackBlock: one level of labels per block_map label, then one
  // block per object (an array holds several).
  void Unpack(const Spec& spec, const picojson::value& v, std::vector<std::string>* labels, const std::string& path,
              Content* content) {
    if (labels->size() < spec.labels.size()) {
      const std::string& label = spec.labels[labels->size()];
      std::vector<Member> members;
      size_t before = errors_->size();
      Members(v, path, &label, &members);
      if (members.empty() && errors_->size() == before) Fail(path, "expected an object keyed by %s, got none", label.c_str());
      for (const Member& m : members) {
        labels->push_back(*m.key);
        Unpack(spec, *m.value, labels, m.path, content);
        labels->pop_back();
      }
      return;
    }
    if (v.is<picojson::object>()) {
      content->blocks.push_back({&spec, *labels, &v, path});
    } else if (v.is<picojson::array>()) {
      const picojson::array& a = v.get<picojson::array>();
      for (size_t i = 0; i < a.size(); ++i) {
        content->blocks.push_back({&spec, *labels, &a[i], Format("%s[%zu]", path.c_str(), i)});
      }
    } else if (!v.is<picojson::null>()) {
      Fail(path, "expected an object or an array of objects (blocks), got %s", json::TypeName(v));
    }
  }

  // A JSON value as HCL's JSON syntax reads an attribute's expression.
  Value FromJson(const picojson::value& v, const std::string& path, int depth) {
    if (depth > 64) {
      Fail(path, "nested too deeply");
      return Value::Unknown(Type());
    }
    if (v.is<picojson::null>()) return Value::Null(Type());
    if (v.is<bool>()) return Value::Bool(v.get<bool>());
    if (v.is<int64_t>()) return Value::Num(Number::Int(v.get<int64_t>()));
    if (v.is<double>()) {
      // The number as written (the shortest text of the double picojson
      // made of it): Nomad parses the JSON text as a decimal.
      Number n;
      if (Number::Parse(json::FormatNumber(v.get<double>()), &n) != Number::Parsed::kOk) {
        Fail(path, "number out of range");
        return Value::Unknown(Type(Type::kNumber));
      }
      return Value::Num(std::move(n));
    }
    bool unknown = false;
    if (v.is<std::string>()) {
      std::string s;
      if (!Template(v.get<std::string>(), path, &s, &unknown)) return Value::Unknown(Type());
      return unknown ? Value::Unknown(Type(Type::kString)) : Value::String(std::move(s));
    }
    std::vector<Value> vals;
    if (v.is<picojson::array>()) {
      const picojson::array& a = v.get<picojson::array>();
      for (size_t i = 0; i < a.size(); ++i) vals.push_back(FromJson(a[i], Format("%s[%zu]", path.c_str(), i), depth + 1));
      return Value::Tuple(std::move(vals));
    }
    // An object; its keys are templates too.
    std::vector<std::string> keys;
    for (const auto& [k, x] : v.get<picojson::object>()) {
      std::string at = KeyPath(path, k);
      keys.emplace_back();
      if (!Template(k, at, &keys.back(), &unknown)) keys.back() = k;
      vals.push_back(FromJson(x, at, depth + 1));
    }
    if (unknown) return Value::Unknown(Type());
    std::string dup;
    if (!SortByKey(&keys, &vals, &dup)) Fail(KeyPath(path, dup), "set twice");
    return Value::Object(std::move(keys), std::move(vals));
  }

  // Values of one block list, set or map made one type (hcldec unifies
  // them: attributes of type any may differ from block to block).
  bool Uniform(std::vector<Value>* vals, const std::string& path, Type* ety, const char* what = "the blocks' values") {
    if (UnifyValues(vals, ety)) return true;
    Fail(path, "%s differ in type", what);
    return false;
  }

  // A block_map's nested maps: items[lo, hi) share their first `level`
  // labels and are in label order.
  Value MapLevel(const std::vector<const Block*>& blocks, std::vector<Value>* vals, const std::vector<uint32_t>& order,
                 size_t lo, size_t hi, size_t level, const Spec& spec, const std::string& path) {
    std::vector<std::string> keys;
    std::vector<Value> out;
    bool last = level + 1 == spec.labels.size();
    for (size_t i = lo; i < hi;) {
      const std::string& key = blocks[order[i]]->labels[level];
      size_t j = i + 1;
      while (j < hi && blocks[order[j]]->labels[level] == key) {
        if (last) Fail(blocks[order[j]]->path, "a block with these labels is already given");
        ++j;
      }
      keys.push_back(key);
      out.push_back(last ? std::move((*vals)[order[i]]) : MapLevel(blocks, vals, order, i, j, level + 1, spec, path));
      i = j;
    }
    Type ety;
    if (!Uniform(&out, path, &ety)) return Value::Unknown(Type());
    return Value::Map(std::move(ety), std::move(keys), std::move(out));
  }

  Value Eval(const Spec& spec, const Content& content, const std::string& path, int depth) {
    std::vector<Value> vals;
    switch (spec.kind) {
      case Spec::Kind::kObject:
      case Spec::Kind::kArray:
        for (const Spec& c : spec.children) vals.push_back(Eval(c, content, path, depth));
        if (spec.kind == Spec::Kind::kArray) return Value::Tuple(std::move(vals));
        return Value::Object(spec.keys, std::move(vals));
      case Spec::Kind::kAttr: {
        const Member* m = content.Attr(spec.name);
        if (!m) return Value::Null(spec.type);
        Value out;
        if (!Convert(FromJson(*m->value, m->path, depth + 1), spec.type, m->path, &out, errors_)) {
          return Value::Unknown(spec.type);
        }
        return out;
      }
      case Spec::Kind::kDefault: {
        Value v = Eval(spec.children[0], content, path, depth);
        return v.null() ? Eval(spec.children[1], content, path, depth) : v;
      }
      case Spec::Kind::kLiteral: return spec.literal;
      default: break;
    }
    std::vector<const Block*> blocks;
    for (const Block& b : content.blocks) {
      if (b.spec->name == spec.name) blocks.push_back(&b);
    }
    std::string at = KeyPath(path, spec.name);
    Type type = ImpliedType(spec);
    bool single = spec.kind == Spec::Kind::kBlock || spec.kind == Spec::Kind::kBlockAttrs;
    if (single) {
      for (size_t i = 1; i < blocks.size(); ++i) Fail(blocks[i]->path, "only one %s block is allowed", spec.name.c_str());
      if (blocks.empty()) {
        if (spec.required) Fail(at, "required block missing");
        return Value::Null(type);
      }
    }
    if (spec.kind == Spec::Kind::kBlockAttrs) {
      // hcl's JustAttributes: an object whose every member is an
      // attribute of the one type.
      const Block& b = *blocks[0];
      if (!b.body->is<picojson::object>()) {
        Fail(b.path, "expected an object, got %s", json::TypeName(*b.body));
        return Value::Unknown(type);
      }
      std::vector<std::string> keys;
      bool ok = true;
      for (const auto& [k, x] : b.body->get<picojson::object>()) {
        if (k == "//") continue;
        std::string kp = KeyPath(b.path, k);
        keys.push_back(k);
        vals.emplace_back();
        ok &= Convert(FromJson(x, kp, depth + 1), spec.type, kp, &vals.back(), errors_);
      }
      // A map's values share one type: those of an `any` map are unified
      // (cty.MapVal would panic on them in Nomad).
      Type ety = spec.type;
      if (!ok || (ety.HasDynamic() && !vals.empty() && !Uniform(&vals, b.path, &ety, "the values"))) {
        return Value::Unknown(type);
      }
      return Value::Map(std::move(ety), std::move(keys), std::move(vals));
    }
    for (const Block* b : blocks) vals.push_back(Body(spec.children[0], *b->body, b->path, depth + 1));
    if (spec.kind == Spec::Kind::kBlock) return std::move(vals[0]);
    if (spec.kind == Spec::Kind::kBlockMap) {
      if (blocks.empty()) return Value::Map(ImpliedType(spec.children[0]), {}, {});  // as hcldec makes it
      std::vector<uint32_t> order = SortOrder(
          blocks.size(),
          [](const void* ctx, uint32_t a, uint32_t b) {
            const auto& bl = *static_cast<const std::vector<const Block*>*>(ctx);
            return bl[a]->labels < bl[b]->labels;
          },
          &blocks);
      return MapLevel(blocks, &vals, order, 0, blocks.size(), 0, spec, at);
    }
    // hcldec converts the uint64 limits to int: one past 2^63 is none.
    int64_t min = static_cast<int64_t>(spec.min_items), max = static_cast<int64_t>(spec.max_items);
    if (min > 0 && vals.size() < static_cast<uint64_t>(min)) {
      Fail(at, "at least %lld %s blocks required, got %zu", static_cast<long long>(min), spec.name.c_str(), vals.size());
    } else if (max > 0 && vals.size() > static_cast<uint64_t>(max)) {
      Fail(at, "at most %lld %s blocks allowed, got %zu", static_cast<long long>(max), spec.name.c_str(), vals.size());
    }
    Type ety = type.elems[0];
    if (!vals.empty() && !Uniform(&vals, at, &ety)) return Value::Unknown(type);
    return Value::Collection(type.kind, std::move(ety), std::move(vals));
  }

  // An HCL template in a JSON string: text, $${ and %%{ for ${ and %{, and
  // ${name} or ${a.b["c"]} interpolations, whose value comes from
  // opts_.env. Anything else in ${...}, and %{...} directives, is refused:
  // outpost evaluates no HCL functions or expressions in configs.
  bool Template(const std::string& in, const std::string& path, std::string* out, bool* unknown) {
    out->clear();
    for (size_t i = 0; i < in.size();) {
      char c = in[i];
      bool open = i + 1 < in.size() && in[i + 1] == '{';
      if ((c == '$' || c == '%') && i + 2 < in.size() && in[i + 1] == c && in[i + 2] == '{') {
        out->push_back(c);
        out->push_back('{');
        i += 3;
        continue;
      }
      if (c == '%' && open) {
        Fail(path, "template directives (%%{...}) are not supported; write %%%%{ for a literal %%{");
        return false;
      }
      if (c != '$' || !open) {
        out->push_back(c);
        ++i;
        continue;
      }
      size_t j = i + 2;
      if (j < in.size() && in[j] == '~') {
        ++j;
        while (!out->empty() && IsBlank(out->back())) out->pop_back();
      }
      while (j < in.size() && IsBlank(in[j])) ++j;
      // A traversal: name, then .name or ["key"] steps.
      std::string name;
      bool ok = j < in.size() && IsHclIdentStart(in[j]);
      while (ok && j < in.size()) {
        if (IsHclIdentChar(in[j])) {
          name.push_back(in[j++]);
        } else if (in[j] == '.' && j + 1 < in.size() && IsHclIdentStart(in[j + 1])) {
          name.push_back(in[j++]);
        } else if (in.compare(j, 2, "[\"") == 0 && in.find("\"]", j + 2) != std::string::npos) {
          size_t end = in.find("\"]", j + 2);
          name += "." + in.substr(j + 2, end - j - 2);
          j = end + 2;
        } else {
          break;
        }
      }
      while (j < in.size() && IsBlank(in[j])) ++j;
      bool strip = j < in.size() && in[j] == '~';
      if (strip) ++j;
      if (!ok || j >= in.size() || in[j] != '}') {
        Fail(path, "only a variable, such as ${NOMAD_TASK_DIR}, is supported inside ${...}; write $${ for a literal ${");
        return false;
      }
      for (i = j + 1; strip && i < in.size() && IsBlank(in[i]);) ++i;
      const std::map<std::string, std::string>* env = opts_.env;
      auto it = env ? env->find(name) : std::map<std::string, std::string>::const_iterator();
      if (opts_.vars == DecodeOptions::Vars::kDefer) {
        // Only Nomad's own names can be known before the task starts: one
        // of those that is not among them is a typo.
        if (env != nullptr && it == env->end() && StartsWith(name, "NOMAD_") && !DynamicNomadName(name)) {
          Fail(path, "unknown variable \"%s\" in ${...}", name.c_str());
          return false;
        }
        *unknown = true;
      } else if (opts_.vars == DecodeOptions::Vars::kRefuse) {
        Fail(path, "variables are not allowed here (${%s}); write $${ for a literal ${", name.c_str());
        return false;
      } else if (!env || it == env->end()) {
        Fail(path, "unknown variable \"%s\" in ${...}", name.c_str());
        return false;
      } else {
        *out += it->second;
      }
    }
    return true;
  }

  const DecodeOptions& opts_;
  json::Errors* errors_;
};

}  // namespace

Value DecodeConfig(const Spec& spec, const picojson::value& config, const DecodeOptions& opts, json::Errors* errors) {
  ConfigDecoder d(opts, errors);
  // No config is an empty one: the schema's defaults apply.
  picojson::value empty{picojson::object()};
  return d.Body(spec, config.is<picojson::null>() ? empty : config, opts.path, 0);
}

Result<Value> DecodeConfig(const Spec& spec, const picojson::value& config, const DecodeOptions& opts) {
  json::Errors errors;
  Value v = DecodeConfig(spec, config, opts, &errors);
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  return v;
}

Result<std::string> EncodeConfig(const Schema& schema, const picojson::value& config, const DecodeOptions& opts) {
  if (!schema.present) {
    bool empty = config.is<picojson::null>() ||
                 (config.is<picojson::object>() && config.get<picojson::object>().empty());
    if (empty) return std::string();
    return Error(Code::kInvalidArgument, opts.path + ": the plugin takes no configuration");
  }
  auto v = DecodeConfig(schema.root, config, opts);
  if (!v.ok()) return v.error();
  if (v->HasUnknown()) {
    return Error(Code::kInvalidArgument, opts.path + ": holds ${...} values not known yet");
  }
  return MsgpackEncode(*v);
}

}  // namespace outpost::driver::nomad
