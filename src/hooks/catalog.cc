// The catalog's directories: reading the hooks.d directories and the
// per-stage directories, masking and ordering hooks.d files, watching all of
// them, and resolving a task's hooks. Parsing and matching one hooks.d file
// is hooks/hooksd.cc.
//
// A change anywhere in a directory re-reads that whole directory: they hold a
// handful of small files, and reading everything again leaves no state to get
// wrong (a file renamed over another, a hook program installed late).
#include "hooks/catalog.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "loop/dir_watch.h"

namespace outpost::hooks {

namespace {

// A hooks.d file is JSON of a few hundred bytes; this only stops a mistake
// (a log file named x.json) from being read whole.
constexpr size_t kMaxFileBytes = 1 << 20;

bool IsHooksDName(const std::string& name) { return name.size() > 5 && EndsWith(name, ".json"); }

std::string LowerCase(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string StripSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// "<dir>: cannot read: <why>", or "" for a directory that is simply not
// there (missing directories are fine: nothing is installed).
std::string ListProblem(const std::string& dir, const Error& e) {
  if (e.sys_errno() == ENOENT) return "";
  return dir + ": cannot read: " + (e.sys_errno() != 0 ? std::strerror(e.sys_errno()) : e.message());
}

}  // namespace

struct Catalog::Impl {
  // One file in a hooks.d directory: parsed, or why not.
  struct Entry {
    std::string name;
    std::string path;
    bool ok = false;
    HooksDFile file;
    std::string problem;  // "<path>: <error>" when !ok
  };
  struct HooksDir {
    std::string dir;
    std::vector<Entry> entries;  // name order
    std::string problem;         // the directory cannot be read
    std::unique_ptr<loop::DirWatch> watch;
  };

  Loop* loop = nullptr;
  CatalogOptions options;
  std::vector<HooksDir> dirs;  // options.hooks_dirs, in order (later masks earlier)
  HookSet stage_hooks;
  std::vector<std::string> stage_problems;
  std::unique_ptr<loop::DirWatch> stage_watch;
  // Merged: valid, unmasked files in the order they apply; masked paths.
  std::vector<HooksDFile> files;
  std::vector<std::string> masked;
  std::vector<std::string> problems;       // sorted
  std::set<std::string> warned;            // problems already logged
  bool absorbing = false;                  // a watch's rescan of what we read anyway

  void ReadHooksDir(HooksDir* d);
  void ReadStageDirs();
  void Merge();
  void WarnNew();
  void ReadAll();
  Status Watch();
};

void Catalog::Impl::ReadHooksDir(HooksDir* d) {
  d->entries.clear();
  d->problem.clear();
  auto names = sys::ListDir(d->dir);
  if (!names.ok()) {
    d->problem = ListProblem(d->dir, names.error());
    return;
  }
  for (const std::string& name : *names) {
    // Dot names are editors' and installers' temporary files (the watch
    // skips them too).
    if (name[0] == '.' || !IsHooksDName(name)) continue;
    Entry e;
    e.name = name;
    e.path = d->dir + "/" + name;
    struct stat st;
    if (::stat(e.path.c_str(), &st) != 0) {
      e.problem = e.path + ": cannot stat: " + std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
      e.problem = e.path + ": not a regular file";
    } else if (auto text = sys::ReadFile(e.path, kMaxFileBytes); !text.ok()) {
      e.problem = e.path + ": " + text.error().message();
    } else if (auto f = ParseHooksDFile(e.path, *text); !f.ok()) {
      e.problem = f.error().message();  // already starts with the path
    } else {
      e.ok = true;
      e.file = std::move(f.value());
    }
    d->entries.push_back(std::move(e));
  }
}

void Catalog::Impl::ReadStageDirs() {
  stage_hooks = HookSet();
  stage_problems.clear();
  if (options.hook_path.empty()) return;
  for (Stage s : kAllStages) {
    const std::string dir = options.hook_path + "/" + StageName(s);
    auto names = sys::ListDir(dir);
    if (!names.ok()) {
      std::string p = ListProblem(dir, names.error());
      if (!p.empty()) stage_problems.push_back(p);
      continue;
    }
    for (const std::string& name : *names) {  // ListDir sorts: strcmp order
      if (name[0] == '.') continue;
      Hook h;
      h.path = dir + "/" + name;
      struct stat st;
      if (::lstat(h.path.c_str(), &st) != 0) {
        if (errno != ENOENT) stage_problems.push_back(h.path + ": cannot stat: " + std::strerror(errno));
        continue;
      }
      // Only real executables: a symlink could point anywhere, and a file
      // without an exec bit is a README or a disabled hook.
      if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) continue;
      h.args = {name, StageName(s)};
      h.source = "hook_path " + h.path;
      stage_hooks.at(s).push_back(std::move(h));
    }
  }
}

void Catalog::Impl::Merge() {
  std::map<std::string, const Entry*> winners;  // by name
  masked.clear();
  problems.clear();
  for (const HooksDir& d : dirs) {
    if (!d.problem.empty()) problems.push_back(d.problem);
    for (const Entry& e : d.entries) {
      auto [it, added] = winners.emplace(e.name, &e);
      if (!added) {
        masked.push_back(it->second->path);
        it->second = &e;
      }
    }
  }
  std::vector<const Entry*> order;
  for (const auto& [name, e] : winners) order.push_back(e);
  // Lower-cased names as upstream; names differing only in case keep their
  // byte order.
  std::stable_sort(order.begin(), order.end(),
                   [](const Entry* a, const Entry* b) { return LowerCase(a->name) < LowerCase(b->name); });
  files.clear();
  for (const Entry* e : order) {
    if (e->ok) {
      files.push_back(e->file);
    } else {
      problems.push_back(e->problem);
    }
  }
  problems.insert(problems.end(), stage_problems.begin(), stage_problems.end());
  std::sort(problems.begin(), problems.end());
  std::sort(masked.begin(), masked.end());
}

void Catalog::Impl::WarnNew() {
  for (const std::string& p : problems) {
    if (!warned.count(p)) {
      log::Warn("hooks catalog: skipping an invalid file or unreadable directory", {{"problem", p}});
    }
  }
  // A problem fixed and made again is logged again.
  warned = std::set<std::string>(problems.begin(), problems.end());
}

void Catalog::Impl::ReadAll() {
  for (HooksDir& d : dirs) ReadHooksDir(&d);
  ReadStageDirs();
  Merge();
  WarnNew();
}

Status Catalog::Impl::Watch() {
  for (size_t i = 0; i < dirs.size(); ++i) {
    loop::DirWatch::Options o;
    o.dir = dirs[i].dir;
    o.filter = IsHooksDName;
    // Every type: a directory or dangling symlink under a .json name is
    // listed as a problem, so its coming and going must be seen too.
    o.types = loop::DirWatch::kAnyType;
    // An editor's save (x.json renamed away, written anew) is one change,
    // so a task starting meanwhile does not miss the hook; a file renamed
    // in (the atomic way to install one) applies at once.
    o.settle_all_events = true;
    o.moved_in_at_once = true;
    o.log_name = "hooks dir";
    auto w = loop::DirWatch::Start(loop, o, [this, i](const std::vector<loop::DirWatch::Change>&) {
      if (absorbing) return;
      ReadHooksDir(&dirs[i]);
      Merge();
      log::Info("hooks catalog: hooks.d changed", {{"dir", dirs[i].dir}, {"files", std::to_string(files.size())}});
      WarnNew();
    });
    if (!w.ok()) return w.error().Wrap("watch hooks dir " + dirs[i].dir);
    dirs[i].watch = std::move(w.value());
  }
  if (!options.hook_path.empty()) {
    loop::DirWatch::Options o;
    o.dir = options.hook_path;
    o.recursive = true;  // the stage directories and their files
    o.settle_all_events = true;
    o.moved_in_at_once = true;
    o.log_name = "hook_path";
    auto w = loop::DirWatch::Start(loop, o, [this](const std::vector<loop::DirWatch::Change>&) {
      if (absorbing) return;
      ReadStageDirs();
      Merge();
      log::Info("hooks catalog: hook_path changed",
                {{"dir", options.hook_path}, {"hooks", std::to_string(stage_hooks.size())}});
      WarnNew();
    });
    if (!w.ok()) return w.error().Wrap("watch hook_path " + options.hook_path);
    stage_watch = std::move(w.value());
  }
  return OkStatus();
}

Result<std::unique_ptr<Catalog>> Catalog::Start(Loop* loop, CatalogOptions options) {
  for (size_t i = 0; i < options.hooks_dirs.size(); ++i) {
    if (options.hooks_dirs[i].empty() || options.hooks_dirs[i][0] != '/') {
      return Error(Code::kInvalidArgument,
                   Format("hooks_dirs[%zu]: must be an absolute path, got \"%s\"", i, options.hooks_dirs[i].c_str()));
    }
  }
  if (!options.hook_path.empty() && options.hook_path[0] != '/') {
    return Error(Code::kInvalidArgument, "hook_path: must be an absolute path, got \"" + options.hook_path + "\"");
  }
  if (options.watch && loop == nullptr) return Error(Code::kInvalidArgument, "hooks catalog: watching needs a loop");
  std::unique_ptr<Catalog> c(new Catalog());
  c->impl_ = std::make_unique<Impl>();
  Impl* impl = c->impl_.get();
  impl->loop = loop;
  impl->options = std::move(options);
  if (!impl->options.hook_path.empty()) impl->options.hook_path = StripSlashes(impl->options.hook_path);
  for (const std::string& dir : impl->options.hooks_dirs) {
    Impl::HooksDir d;
    d.dir = StripSlashes(dir);
    impl->dirs.push_back(std::move(d));
  }
  if (impl->options.watch) {
    OUTPOST_RETURN_IF_ERROR(impl->Watch());
  }
  // Watches first, then read: a change made in between is seen by both.
  c->Rescan();
  return c;
}

Catalog::~Catalog() = default;

void Catalog::Rescan() {
  // The watches' own lists are brought up to date (so later changes are
  // told from them); what they report is covered by reading everything.
  impl_->absorbing = true;
  for (Impl::HooksDir& d : impl_->dirs) {
    if (d.watch) d.watch->Rescan();
  }
  if (impl_->stage_watch) impl_->stage_watch->Rescan();
  impl_->absorbing = false;
  impl_->ReadAll();
}

const std::vector<HooksDFile>& Catalog::files() const { return impl_->files; }
const HookSet& Catalog::stage_dir_hooks() const { return impl_->stage_hooks; }
std::vector<std::string> Catalog::Problems() const { return impl_->problems; }
std::vector<std::string> Catalog::Masked() const { return impl_->masked; }

namespace {

// The source a hook is counted under for OncePerSource: the job spec, each
// NRI plugin, hooks.d and the per-stage directories (two hooks.d files, or
// two per-stage files, are one source: each file is listed by itself there).
std::string SourceKind(const std::string& source) {
  if (StartsWith(source, "hooks.d ")) return "hooks.d";
  if (StartsWith(source, "hook_path ")) return "hook_path";
  return source;
}

// What makes two hooks the same one: everything that decides what runs
// (the timeout only bounds it; the first one's is kept).
std::string SameHookKey(const Hook& h) {
  std::string k = h.path;
  for (const std::string& a : h.Argv()) k += '\0' + a;
  k += '\1';
  for (const std::string& e : h.env) k += '\0' + e;
  return k;
}

// The merge of one stage's candidates, in order: a candidate is dropped
// when its source kind has listed that hook no more often, so far, than
// what is kept already (a hook listed n times by one source and m times by
// another runs max(n, m) times). *whys (parallel to hooks, when given)
// gains "; also from <source>" on the kept hook a dropped one repeats.
void KeepOncePerSource(std::vector<Hook>* hooks, std::vector<std::string>* whys) {
  std::map<std::string, size_t> kept;                        // key -> hooks kept
  std::map<std::string, std::map<std::string, size_t>> seen;  // key -> source kind -> listed
  std::map<std::string, size_t> first;                        // key -> index (in the output) of the first kept
  std::vector<Hook> out;
  std::vector<std::string> out_whys;
  for (size_t i = 0; i < hooks->size(); ++i) {
    Hook& h = (*hooks)[i];
    std::string key = SameHookKey(h);
    size_t n = ++seen[key][SourceKind(h.source)];
    if (n <= kept[key]) {
      if (whys) out_whys[first[key]] += "; also from " + h.source;
      continue;
    }
    kept[key]++;
    first.emplace(key, out.size());
    if (whys) out_whys.push_back(std::move((*whys)[i]));
    out.push_back(std::move(h));
  }
  *hooks = std::move(out);
  if (whys) *whys = std::move(out_whys);
}

}  // namespace

HookSet OncePerSource(const HookSet& merged) {
  HookSet out = merged;
  for (Stage s : kAllStages) {
    if (!out.at(s).empty()) KeepOncePerSource(&out.at(s), nullptr);
  }
  return out;
}

HookSet Catalog::Resolve(const HookSet& spec_hooks, const MatchInput& in, std::vector<ResolvedHook>* resolved,
                         std::vector<std::string>* skipped) const {
  // Every candidate per stage, with why it applies, in the order they run.
  HookSet out = spec_hooks;
  std::array<std::vector<std::string>, kStageCount> whys;
  for (Stage s : kAllStages) {
    for (const Hook& h : spec_hooks.at(s)) {
      whys[static_cast<int>(s)].push_back(h.source.empty() ? "job spec" : h.source);
    }
  }
  for (const HooksDFile& f : impl_->files) {
    std::string why;
    if (!f.Matches(in, &why)) {
      if (skipped) skipped->push_back(f.name + ": " + why);
      continue;
    }
    for (Stage s : f.stages) {
      out.at(s).push_back(f.hook);
      whys[static_cast<int>(s)].push_back("hooks.d " + f.name + ": " + why);
    }
  }
  for (Stage s : kAllStages) {
    for (const Hook& h : impl_->stage_hooks.at(s)) {
      out.at(s).push_back(h);
      whys[static_cast<int>(s)].push_back("hook_path");
    }
  }
  for (Stage s : kAllStages) {
    if (out.at(s).empty()) continue;
    KeepOncePerSource(&out.at(s), &whys[static_cast<int>(s)]);
    if (!resolved) continue;
    for (size_t i = 0; i < out.at(s).size(); ++i) resolved->push_back({s, out.at(s)[i], whys[static_cast<int>(s)][i]});
  }
  return out;
}

}  // namespace outpost::hooks
