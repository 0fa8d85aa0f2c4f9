// Helpers shared by the client commands: argument parsing (options with
// values, flags, "--"), printing JSON, usage errors, time display, and the
// TaskInfo JSON form.
#pragma once

#include <picojson.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "task.pb.h"

namespace outpost::cli {

// A job's spec as the agent stored it (it was a document of at most 1 MiB
// when submitted; re-serialised it may be larger).
inline const json::ParseLimits kAgentJsonLimits{16 << 20, 64};

// Options of the form --name VALUE / --name=VALUE / flags, then positionals.
struct Args {
  std::vector<std::string> pos;
  std::vector<std::pair<std::string, std::string>> opts;
  std::vector<std::string> after_dashdash;
  bool dashdash = false;

  const std::string* Get(const std::string& name) const {
    const std::string* out = nullptr;
    for (const auto& [k, v] : opts) {
      if (k == name) out = &v;
    }
    return out;
  }
  bool Has(const std::string& name) const { return Get(name) != nullptr; }
};

// takes_value: option names that take a value. Flags not listed take none.
inline Result<Args> ParseArgs(const std::vector<std::string>& in, const std::vector<std::string>& takes_value,
                       const std::vector<std::string>& flags, bool stop_at_first_positional = false) {
  Args a;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& s = in[i];
    if (a.dashdash) {
      // `exec ID -- CMD`: a "--" right after the first positional is just the separator.
      if (!(s == "--" && a.after_dashdash.empty() && stop_at_first_positional && !a.pos.empty() &&
            in[i - 1] == a.pos.back())) {
        a.after_dashdash.push_back(s);
      }
      continue;
    }
    if (s == "--") {
      a.dashdash = true;
      continue;
    }
    if (s.size() > 1 && s[0] == '-') {
      std::string name = s, value;
      size_t eq = s.find('=');
      bool has_eq = eq != std::string::npos;
      if (has_eq) {
        name = s.substr(0, eq);
        value = s.substr(eq + 1);
      }
      bool valued = std::find(takes_value.begin(), takes_value.end(), name) != takes_value.end();
      bool flag = std::find(flags.begin(), flags.end(), name) != flags.end();
      if (!valued && !flag) return Error(Code::kInvalidArgument, "unknown option \"" + name + "\"");
      if (valued && !has_eq) {
        if (i + 1 >= in.size()) return Error(Code::kInvalidArgument, "option " + name + " needs a value");
        value = in[++i];
      }
      if (flag && has_eq) return Error(Code::kInvalidArgument, "option " + name + " takes no value");
      a.opts.push_back({name, value});
      continue;
    }
    a.pos.push_back(s);
    if (stop_at_first_positional) {
      a.dashdash = true;  // the rest is the command line
    }
  }
  return a;
}

// RFC 3339 time, or "-" for 0.
std::string Time(int64_t unix_nanos);
// An age as docker shows one: "45s" under a minute, "2m" under an hour,
// "3h" under a day, else "5d" (rounded down; negative counts as 0).
std::string FormatAge(int64_t seconds);
// FormatAge of the time since unix_nanos; "-" for 0.
std::string Age(int64_t unix_nanos);
// Whether name matches the shell glob pattern: *, ?, [abc], [a-z], [!a]
// and \x as fnmatch(3) without flags takes them (byte-wise).
bool GlobMatch(const std::string& pattern, const std::string& name);
// ps's filter: name matches one of globs (any when none) and status is
// one of statuses (any when none).
bool JobMatches(const std::string& name, const std::string& status, const std::vector<std::string>& globs,
                const std::vector<std::string>& statuses);
// The job statuses of docs/supervision.md ("Job status"), in its order.
const std::vector<std::string>& JobStatusWords();
// Counts of words, in order of first appearance after those in order:
// [("running", 3), ("stopped", 1)]. A word of order that does not occur is
// left out.
std::vector<std::pair<std::string, int>> CountWords(const std::vector<std::string>& words,
                                                    const std::vector<std::string>& order);
// "3 running, 1 stopped" ("none" when empty).
std::string CountsText(const std::vector<std::pair<std::string, int>>& counts);
// inspect's "command:" text: the command and its arguments, or, for a
// driver that takes what to run from its config (a Nomad driver's task),
// "(in the driver's config)".
std::string CommandText(const char* command, char* const* args, size_t count);
// Prints v (json::Write, pretty) and a newline: every --json document.
void PrintJson(const picojson::value& v);
// {"key": "value"}: the --json document of a command that names what it did.
picojson::value JsonObject1(const char* key, const std::string& value);
// Prints v on one line (json::Write, compact): JSON lines (events, stats -f).
void PrintJsonLine(const picojson::value& v);
// --json values of fields that may be empty: null when they are (the text
// output shows "-" or nothing), else the text or the RFC 3339 time.
picojson::value JsonText(const std::string& s);
inline picojson::value JsonText(const char* s) { return JsonText(std::string(s ? s : "")); }
picojson::value JsonTime(int64_t unix_nanos);
int UsageError(const std::string& msg, const char* cmd);
picojson::value InfoJson(const outpost_v1_TaskInfo& t);
// "hooks:" and one line per hook run (nothing when the task has none).
void PrintHookRuns(const outpost_v1_TaskInfo& t);
// "network:    10.0.0.5, ports db=5432 http=8080": where the driver says
// the task can be reached (nothing when it says nothing).
void PrintNetwork(const outpost_v1_TaskInfo& t);

// Cgroup limits as the agent reports them (TaskInfo.limits, JobInfo.limits).
// JSON: [{file, value, enforced, not_enforced}].
picojson::value LimitsJson(const outpost_v1_LimitInfo* limits, pb_size_t n);
// "memory.max, pids.max not enforced: <why>", one part per reason, "; "
// between; of the files in only (all when empty). "" when all are enforced.
std::string NotEnforcedText(const outpost_v1_LimitInfo* limits, pb_size_t n, const std::vector<std::string>& only = {});
// "memory.max 64MiB, pids.max 50 (enforced)", or that list without
// "(enforced)" followed by the NotEnforcedText parts, one per line.
std::vector<std::string> LimitLines(const outpost_v1_LimitInfo* limits, pb_size_t n);
// "limits:     ..." lines (nothing when there are none).
void PrintLimits(const outpost_v1_LimitInfo* limits, pb_size_t n);

}  // namespace outpost::cli
