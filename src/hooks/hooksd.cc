// hooks.d files (oci-hooks(5), containers/common pkg/hooks): parsing and
// validating schema 1.0.0 and the legacy 0.1.0, and matching their `when`
// conditions against a task. The directories, masking and order are in
// hooks/catalog.cc.
//
// Regexes are Go's regexp syntax, as upstream compiles them (hooks/regex.h).
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "base/json.h"
#include "base/strings.h"
#include "hooks/catalog.h"
#include "hooks/regex.h"

namespace outpost::hooks {

namespace {

// "..." with '"', '\\' and control characters escaped (picojson's serialize
// also escapes '/', which would make every path in a message hard to read).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += Format("\\u%04x", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

constexpr const char* kStageList =
    "prestart, createRuntime, createContainer, startContainer, poststart, poststop (outpost runs no extension "
    "stages)";

// `key`: a non-empty array of stage names, each listed once however often
// the file names it.
void ReadStages(json::ObjectReader* r, const std::string& key, HooksDFile* f, json::Errors* errors) {
  r->Known(key);
  if (!r->Has(key)) return r->Fail(key, std::string("required: the stages to run the hook in, of ") + kStageList);
  std::vector<std::string> names;
  size_t before = errors->size();
  r->StringList(key, &names);
  if (errors->size() != before) return;
  if (names.empty()) return r->Fail(key, std::string("must name at least one stage of ") + kStageList);
  for (size_t i = 0; i < names.size(); ++i) {
    Stage s;
    if (!ParseStage(names[i], &s)) {
      errors->push_back(Format("%s[%zu]: unknown stage %s; the stages are %s", r->PathOf(key).c_str(), i,
                               Quote(names[i]).c_str(), kStageList));
      continue;
    }
    bool seen = false;
    for (Stage t : f->stages) seen = seen || t == s;
    if (!seen) f->stages.push_back(s);
  }
}

// The key of a legacy field with a singular and a plural spelling (upstream
// takes either, not both); "" when neither is there.
std::string EitherKey(json::ObjectReader* r, const std::string& plural, const std::string& singular) {
  r->Known(plural);
  r->Known(singular);
  if (r->Has(plural) && r->Has(singular)) {
    r->Fail(singular, "cannot set both \"" + singular + "\" and \"" + plural + "\"");
    return "";
  }
  if (r->Has(plural)) return plural;
  return r->Has(singular) ? singular : "";
}

void ParseWhen(const picojson::value& v, HooksDFile* f, bool* always_given, json::Errors* errors) {
  json::ObjectReader w(v, "when", errors);
  if (!w.ok()) return;
  size_t before = errors->size();
  // Known before reading: a misspelt key's "did you mean" looks among them.
  for (const char* key : {"always", "annotations", "commands", "hasBindMounts"}) w.Known(key);
  if (w.Has("always")) {
    *always_given = true;
    w.Bool("always", &f->always);
  }
  if (w.Has("hasBindMounts")) {
    f->has_bind_mounts_set = true;
    w.Bool("hasBindMounts", &f->has_bind_mounts);
  }
  if (const picojson::value* a = w.Get("annotations")) {
    if (!a->is<picojson::object>()) {
      w.Fail("annotations", std::string("expected an object of key regex -> value regex, got ") + json::TypeName(*a));
    } else {
      for (const auto& [key, value] : a->get<picojson::object>()) {
        if (!value.is<std::string>()) {
          errors->push_back(Format("when.annotations[%s]: expected a string (the value regex), got %s",
                                   Quote(key).c_str(), json::TypeName(value)));
          continue;
        }
        f->annotations[key] = value.get<std::string>();
      }
    }
  }
  w.StringList("commands", &f->commands);
  w.RejectUnknown();
  if (errors->size() == before && !*always_given && !f->has_bind_mounts_set && f->annotations.empty() &&
      f->commands.empty()) {
    errors->push_back("when: needs at least one condition: always, annotations, commands or hasBindMounts");
  }
}

void Parse100(const picojson::value& doc, HooksDFile* f, bool* always_given, json::Errors* errors) {
  json::ObjectReader r(doc, "", errors);
  r.Known("version");
  if (const picojson::value* h = r.Get("hook")) {
    f->hook = HookFromJson(*h, "hook", "hooks.d " + f->path, errors);
  } else {
    r.Fail("hook", "required: the hook to run ({\"path\": \"/usr/libexec/x\", \"args\": [...]})");
  }
  if (const picojson::value* w = r.Get("when")) {
    ParseWhen(*w, f, always_given, errors);
  } else {
    r.Fail("when", "required: when to inject the hook (always, annotations, commands, hasBindMounts)");
  }
  ReadStages(&r, "stages", f, errors);
  r.RejectUnknown();
}

// 0.1.0, converted the way containers/common does: conditions OR-ed; the
// annotation regexes become one condition, {".*": "<r1>|<r2>|..."}, so one
// matches when it matches any annotation's value; args = [hook] + arguments.
void Parse010(const picojson::value& doc, HooksDFile* f, json::Errors* errors) {
  json::ObjectReader r(doc, "", errors);
  for (const char* key : {"version", "hook", "arguments", "hasbindmounts"}) r.Known(key);
  f->or_conditions = true;
  f->hook.source = "hooks.d " + f->path;
  if (!r.Has("hook")) {
    r.Fail("hook", "required: the hook program's absolute path");
  } else {
    r.String("hook", &f->hook.path, false);
    if (!f->hook.path.empty() && f->hook.path[0] != '/') {
      r.Fail("hook", "must be an absolute path, got " + Quote(f->hook.path));
    }
  }
  if (r.Has("arguments")) {
    std::vector<std::string> arguments;
    r.StringList("arguments", &arguments);
    f->hook.args = {f->hook.path};
    f->hook.args.insert(f->hook.args.end(), arguments.begin(), arguments.end());
  }
  std::string stages = EitherKey(&r, "stages", "stage");
  ReadStages(&r, stages.empty() ? "stages" : stages, f, errors);
  std::string cmds = EitherKey(&r, "cmds", "cmd");
  if (!cmds.empty()) r.StringList(cmds, &f->commands);
  std::string annotations = EitherKey(&r, "annotations", "annotation");
  if (!annotations.empty()) {
    std::vector<std::string> list;
    r.StringList(annotations, &list);
    for (size_t i = 0; i < list.size(); ++i) {
      Regex check;
      std::string bad = check.Compile(list[i]);
      if (!bad.empty()) {
        errors->push_back(Format("%s[%zu]: invalid regex %s: %s", annotations.c_str(), i, Quote(list[i]).c_str(),
                                 bad.c_str()));
      }
    }
    if (!list.empty()) f->annotations[".*"] = JoinStrings(list, "|");
  }
  if (r.Has("hasbindmounts")) {
    f->has_bind_mounts_set = true;
    r.Bool("hasbindmounts", &f->has_bind_mounts);
  }
  r.RejectUnknown();
  // containers/common gives such a file no condition that can match, so it
  // never applies there; saying so beats a file that silently does nothing.
  if (errors->empty() && f->commands.empty() && f->annotations.empty() && !f->has_bind_mounts) {
    errors->push_back("no condition (cmds, annotations, or hasbindmounts: true): a legacy 0.1.0 hook without one "
                      "never applies; add one, or use version 1.0.0 with \"when\": {\"always\": true}");
  }
}

}  // namespace

struct HooksDFile::Compiled {
  struct Pair {
    Regex key;
    Regex value;
  };
  std::vector<std::unique_ptr<Pair>> annotations;  // in the order of HooksDFile::annotations
  std::vector<std::unique_ptr<Regex>> commands;
  // 1.0.0 `always: false`: a condition that never matches (upstream), which
  // HooksDFile::always alone cannot tell from an absent `always`.
  bool always_given = false;
};

Result<HooksDFile> ParseHooksDFile(const std::string& path, const std::string& text) {
  HooksDFile f;
  f.path = path;
  size_t slash = path.rfind('/');
  f.name = slash == std::string::npos ? path : path.substr(slash + 1);
  auto fail = [&path](const json::Errors& errors) {
    return Error(Code::kInvalidArgument, path + ": " + JoinStrings(errors, "; "));
  };
  auto doc = json::Parse(text);
  if (!doc.ok()) return fail({doc.error().message()});
  if (!doc->is<picojson::object>()) {
    return fail({std::string("expected a JSON object, got ") + json::TypeName(*doc)});
  }
  const auto& obj = doc->get<picojson::object>();
  auto version = obj.find("version");
  json::Errors errors;
  auto compiled = std::make_shared<HooksDFile::Compiled>();
  if (version != obj.end() && !version->second.is<std::string>()) {
    return fail({std::string("version: expected a string (\"1.0.0\"), got ") + json::TypeName(version->second)});
  }
  std::string v = version == obj.end() ? "" : version->second.get<std::string>();
  if (v == "1.0.0") {
    f.schema = "1.0.0";
    Parse100(*doc, &f, &compiled->always_given, &errors);
  } else if (v.empty() || v == "0.1.0") {
    f.schema = "0.1.0";
    Parse010(*doc, &f, &errors);
  } else {
    return fail({"version: unknown hooks.d schema version " + Quote(v) + "; outpost reads 1.0.0 and the legacy 0.1.0"});
  }
  if (!errors.empty()) return fail(errors);

  // Upstream checks that the hook exists when it loads the file, so a typo
  // shows when the file is installed rather than at a task's start.
  const char* path_field = f.schema == "1.0.0" ? "hook.path" : "hook";
  struct stat st;
  if (::stat(f.hook.path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return fail({Format("%s: %s does not exist", path_field, f.hook.path.c_str())});
    return fail({Format("%s: cannot stat %s: %s", path_field, f.hook.path.c_str(), std::strerror(err))});
  }
  for (const auto& [key, value] : f.annotations) {
    auto p = std::make_unique<HooksDFile::Compiled::Pair>();
    std::string bad = p->key.Compile(key);
    if (!bad.empty()) {
      errors.push_back(Format("when.annotations: invalid key regex %s: %s", Quote(key).c_str(), bad.c_str()));
    }
    bad = p->value.Compile(value);
    if (!bad.empty()) {
      errors.push_back(Format("%s: invalid value regex %s: %s",
                              f.or_conditions ? "annotations" : ("when.annotations[" + Quote(key) + "]").c_str(),
                              Quote(value).c_str(), bad.c_str()));
    }
    compiled->annotations.push_back(std::move(p));
  }
  for (size_t i = 0; i < f.commands.size(); ++i) {
    auto re = std::make_unique<Regex>();
    std::string bad = re->Compile(f.commands[i]);
    if (!bad.empty()) {
      errors.push_back(Format("%s[%zu]: invalid regex %s: %s", f.or_conditions ? "cmds" : "when.commands", i,
                              Quote(f.commands[i]).c_str(), bad.c_str()));
    }
    compiled->commands.push_back(std::move(re));
  }
  if (!errors.empty()) return fail(errors);
  f.compiled = std::move(compiled);
  return f;
}

bool HooksDFile::Matches(const MatchInput& in, std::string* why) const {
  // Each condition present, with whether it holds and the words for it.
  struct Condition {
    bool holds;
    std::string text;
  };
  std::vector<Condition> conds;
  const Compiled* c = compiled.get();
  if (c == nullptr) {
    if (why) *why = "not parsed by ParseHooksDFile (no compiled regexes)";
    return false;
  }
  if (always || c->always_given) conds.push_back({always, always ? "always" : "always is false (never matches)"});
  if (has_bind_mounts_set) {
    if (!has_bind_mounts) {
      conds.push_back({false, "hasBindMounts is false (never matches)"});
    } else {
      conds.push_back({in.has_bind_mounts, in.has_bind_mounts ? "hasBindMounts: the task has bind mounts"
                                                              : "hasBindMounts: the task has none"});
    }
  }
  for (const auto& p : c->annotations) {
    Condition cond{false, "annotations: no annotation has a key matching " + Quote(p->key.text()) +
                              " and a value matching " + Quote(p->value.text())};
    for (const auto& [key, value] : in.annotations) {
      if (p->key.Match(key) && p->value.Match(value)) {
        cond = {true, "annotations: " + Quote(key) + " matches key " + Quote(p->key.text()) + ", its value " +
                          Quote(value) + " matches " + Quote(p->value.text())};
        break;
      }
    }
    conds.push_back(std::move(cond));
  }
  if (!c->commands.empty()) {
    Condition cond{false, "commands: no regex matched " + Quote(in.command)};
    for (const auto& re : c->commands) {
      if (re->Match(in.command)) {
        cond = {true, "commands: " + Quote(re->text()) + " matched " + Quote(in.command)};
        break;
      }
    }
    conds.push_back(std::move(cond));
  }

  if (conds.empty()) {
    if (why) *why = "no condition";
    return false;
  }
  std::vector<std::string> texts;
  if (or_conditions) {
    for (const Condition& cond : conds) {
      if (cond.holds) {
        if (why) *why = cond.text;
        return true;
      }
      texts.push_back(cond.text);
    }
    if (why) *why = "no condition matched: " + JoinStrings(texts, "; ");
    return false;
  }
  for (const Condition& cond : conds) {
    if (!cond.holds) {
      if (why) *why = cond.text;
      return false;
    }
    texts.push_back(cond.text);
  }
  if (why) *why = JoinStrings(texts, "; ");
  return true;
}

}  // namespace outpost::hooks
