// Where a task's hooks come from, besides its job spec: hooks.d files
// (oci-hooks(5), schema 1.0.0 and the legacy 0.1.0) in the configured
// hooks_dirs, and per-stage hook directories under hook_path (the Kata
// guest-hook layout: every executable in <hook_path>/<stage>/). Owns: parsing
// and validating hooks.d files, matching their `when` conditions against a
// task, masking between directories, the order, scanning the per-stage
// directories, watching all of these on the loop (loop/dir_watch) so a change
// applies to the next task start, and the list of invalid files with their
// errors. Never fatal: an invalid file is skipped and listed.
//
// Order of a task's hooks per stage (Resolve): the job spec's with the NRI
// plugins' after them (the start pipeline adds these to the task's own
// before resolving), then hooks.d's (files in order of their lower-cased
// names), then the per-stage directory's (in name order). A hook that comes
// from more than one of these sources runs once (OncePerSource).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "hooks/hook.h"

namespace outpost {
class Loop;
}

namespace outpost::hooks {

// What a task offers for matching hooks.d `when` conditions.
struct MatchInput {
  std::map<std::string, std::string> annotations;
  std::string command;     // the task's resolved command path (process.args[0])
  bool has_bind_mounts = false;
};

// One hooks.d file, parsed.
struct HooksDFile {
  std::string name;        // file name ("x.json")
  std::string path;        // full path
  std::string schema;      // "1.0.0" or "0.1.0"
  Hook hook;               // source "hooks.d <path>"
  std::vector<Stage> stages;
  // `when` (1.0.0: AND-ed; 0.1.0: OR-ed)
  bool always = false;
  std::map<std::string, std::string> annotations;  // key regex -> value regex
  std::vector<std::string> commands;               // regexes
  bool has_bind_mounts = false;
  bool has_bind_mounts_set = false;
  bool or_conditions = false;  // legacy schema
  // Compiled regexes (opaque; Go regexp syntax, hooks/regex.h).
  struct Compiled;
  std::shared_ptr<Compiled> compiled;

  // Whether it applies to the task; *why (when given) says which
  // conditions matched or which one did not ("annotations: key
  // ^com\\.example\\.x$ matched com.example.x, value ..."; "commands: no
  // regex matched /bin/sh").
  bool Matches(const MatchInput& in, std::string* why = nullptr) const;
};

// Parses one hooks.d file's text. Errors name the file and the field
// ("/etc/containers/oci/hooks.d/x.json: hook.path: /nope does not exist").
// A stage outside the six is an error (outpost runs no extension stages).
Result<HooksDFile> ParseHooksDFile(const std::string& path, const std::string& text);

// One stage's hooks merged from several sources, with a hook that more than
// one source lists run once: containerd's hook-injector NRI plugin, for one,
// adds to a container the hooks of the same hooks.d files the agent reads.
// The same hook is the same stage, path, argv (Hook::Argv) and env; the
// sources are the job spec, each NRI plugin, hooks.d and the per-stage
// directories (told by Hook::source). The first one stays where it is, with
// its timeout. Within one source a hook runs as often as it is listed, as
// a runtime would run it: a hook listed n times by one source and m times by
// another runs max(n, m) times.
HookSet OncePerSource(const HookSet& merged);

struct CatalogOptions {
  // Later directories mask a same-named file in earlier ones.
  std::vector<std::string> hooks_dirs = {"/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"};
  std::string hook_path = "/etc/outpost/hooks";  // "" = no per-stage directories
  bool watch = true;  // false: read once at Start and on Rescan (tests)
};

// A hook that applies, with why.
struct ResolvedHook {
  Stage stage;
  Hook hook;
  std::string why;  // "job spec", "hooks.d x.json: always", "hook_path"
};

class Catalog {
 public:
  // Reads every directory now, and watches them (missing ones are watched
  // for when they appear).
  static Result<std::unique_ptr<Catalog>> Start(Loop* loop, CatalogOptions options);
  ~Catalog();

  // The hooks for a task, per stage: spec's (and NRI's), then matching
  // hooks.d files', then the per-stage directories', each hook once per
  // OncePerSource. *resolved (when given) gets each, stage by stage in the
  // order they run, with the reason it applies (its source for spec_hooks;
  // "; also from <source>" for each source whose same hook it stands for);
  // *skipped (when given) each hooks.d file that did not match, with why.
  HookSet Resolve(const HookSet& spec_hooks, const MatchInput& in,
                  std::vector<ResolvedHook>* resolved = nullptr,
                  std::vector<std::string>* skipped = nullptr) const;

  // Valid hooks.d files in the order they apply (masked ones left out).
  const std::vector<HooksDFile>& files() const;
  // Per-stage directory hooks (each with source "hook_path <file>").
  const HookSet& stage_dir_hooks() const;
  // Invalid files and unreadable directories: "<path>: <error>", sorted.
  std::vector<std::string> Problems() const;
  // hooks.d files masked by a same-named file in a later directory.
  std::vector<std::string> Masked() const;

  // Reads everything again now (SIGHUP; tests).
  void Rescan();

 private:
  Catalog() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outpost::hooks
