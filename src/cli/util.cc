#include "cli/util.h"


#include <algorithm>
#include <cstdio>

#include "base/clock.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"

namespace outpost::cli {

std::string Time(int64_t unix_nanos) { return unix_nanos ? FormatWallTime(unix_nanos) : "-"; }

std::string FormatAge(int64_t s) {
  if (s < 0) s = 0;
  if (s < 60) return Format("%llds", static_cast<long long>(s));
  if (s < 3600) return Format("%lldm", static_cast<long long>(s / 60));
  if (s < 86400) return Format("%lldh", static_cast<long long>(s / 3600));
  return Format("%lldd", static_cast<long long>(s / 86400));
}

std::string Age(int64_t unix_nanos) {
  if (unix_nanos <= 0) return "-";
  return FormatAge((WallNanos() - unix_nanos) / kNanosPerSecond);
}

namespace {

// Whether c matches the bracket expression at p[at] (just after '['); sets
// *end to just after its ']'. false with *end = npos when it is not closed
// (the '[' is then an ordinary character, as in fnmatch).
bool BracketMatches(const std::string& p, size_t at, char c, size_t* end) {
  bool negate = at < p.size() && (p[at] == '!' || p[at] == '^');
  if (negate) ++at;
  bool matched = false;
  for (size_t i = at; i < p.size(); ++i) {
    if (p[i] == ']' && i > at) {
      *end = i + 1;
      return matched != negate;
    }
    if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      if (p[i] <= c && c <= p[i + 2]) matched = true;
      i += 2;
    } else if (p[i] == c) {
      matched = true;
    }
  }
  *end = std::string::npos;
  return false;
}

}  // namespace

// Byte-wise (job names are ASCII): no locale, none of libc's multibyte
// machinery that fnmatch pulls into a static binary (60 KB on aarch64).
// Iterative, with one backtrack point for the last '*': linear in practice.
bool GlobMatch(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0, star = std::string::npos, star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size()) {
      char c = pattern[p];
      if (c == '*') {
        star = ++p;
        star_n = n;
        continue;
      }
      if (c == '?') {
        ++p, ++n;
        continue;
      }
      if (c == '[') {
        size_t end;
        bool m = BracketMatches(pattern, p + 1, name[n], &end);
        if (end != std::string::npos) {
          if (m) {
            p = end, ++n;
            continue;
          }
        } else if (name[n] == '[') {
          ++p, ++n;
          continue;
        }
      } else if (c == '\\' && p + 1 < pattern.size()) {
        if (pattern[p + 1] == name[n]) {
          p += 2, ++n;
          continue;
        }
      } else if (c == name[n]) {
        ++p, ++n;
        continue;
      }
    }
    if (star == std::string::npos) return false;
    p = star;
    n = ++star_n;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool JobMatches(const std::string& name, const std::string& status, const std::vector<std::string>& globs,
                const std::vector<std::string>& statuses) {
  bool by_name = globs.empty() || std::any_of(globs.begin(), globs.end(), [&](const std::string& p) {
                   return GlobMatch(p, name);
                 });
  bool by_status = statuses.empty() || std::find(statuses.begin(), statuses.end(), status) != statuses.end();
  return by_name && by_status;
}

const std::vector<std::string>& JobStatusWords() {
  static const std::vector<std::string> kWords = {"pending",  "running", "degraded", "backoff",    "failed",
                                                  "complete", "stopping", "stopped", "restarting", "removing"};
  return kWords;
}

std::vector<std::pair<std::string, int>> CountWords(const std::vector<std::string>& words,
                                                    const std::vector<std::string>& order) {
  std::vector<std::pair<std::string, int>> out;
  for (const std::string& o : order) out.push_back({o, 0});
  for (const std::string& w : words) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == w; });
    if (it == out.end()) out.push_back({w, 1});
    else it->second++;
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const auto& p) { return p.second == 0; }), out.end());
  return out;
}

std::string CommandText(const char* command, char* const* args, size_t count) {
  std::string out = PbString(command);
  for (size_t i = 0; i < count; ++i) out += " " + QuoteIfNeeded(PbString(args[i]));
  return out.empty() ? "(in the driver's config)" : out;
}

std::string CountsText(const std::vector<std::pair<std::string, int>>& counts) {
  std::string out;
  for (const auto& [word, n] : counts) out += Format("%s%d %s", out.empty() ? "" : ", ", n, word.c_str());
  return out.empty() ? "none" : out;
}

void PrintJson(const picojson::value& v) { std::printf("%s\n", json::Write(v, true).c_str()); }

picojson::value JsonObject1(const char* key, const std::string& value) {
  picojson::object o;
  o[key] = picojson::value(value);
  return picojson::value(o);
}

void PrintJsonLine(const picojson::value& v) { std::printf("%s\n", json::Write(v).c_str()); }

picojson::value JsonText(const std::string& s) { return s.empty() ? picojson::value() : picojson::value(s); }

picojson::value JsonTime(int64_t unix_nanos) {
  return unix_nanos ? picojson::value(FormatWallTime(unix_nanos)) : picojson::value();
}

int UsageError(const std::string& msg, const char* cmd) {
  return Fail(kExitUsage, msg + "; see `outpost " + cmd + " --help`");
}

picojson::value InfoJson(const outpost_v1_TaskInfo& t) {
  picojson::object o;
  o["id"] = picojson::value(PbString(t.id));
  o["job"] = picojson::value(PbString(t.job));
  o["name"] = picojson::value(PbString(t.name));
  o["state"] = picojson::value(PbString(t.state));
  o["pid"] = picojson::value(static_cast<int64_t>(t.pid));
  o["started_at"] = JsonTime(t.started_at_unix_nanos);
  o["completed_at"] = JsonTime(t.completed_at_unix_nanos);
  o["exit_code"] = picojson::value(static_cast<int64_t>(t.exit_code));
  o["signal"] = picojson::value(static_cast<int64_t>(t.signal));
  o["oom_killed"] = picojson::value(t.oom_killed);
  o["error"] = JsonText(t.error);
  o["command"] = picojson::value(PbString(t.command));
  picojson::array args;
  for (pb_size_t i = 0; i < t.args_count; ++i) args.push_back(picojson::value(PbString(t.args[i])));
  o["args"] = picojson::value(args);
  o["user"] = JsonText(t.user);
  o["workdir"] = JsonText(t.workdir);
  o["log_dir"] = picojson::value(PbString(t.log_dir));
  o["log_bytes"] = picojson::value(static_cast<int64_t>(t.log_bytes));
  o["log_dropped_bytes"] = picojson::value(static_cast<int64_t>(t.log_dropped_bytes));
  o["log_error"] = JsonText(t.log_error);
  if (!PbString(t.nri).empty()) o["nri"] = picojson::value(PbString(t.nri));
  o["limits"] = LimitsJson(t.limits, t.limits_count);
  if (t.hook_runs_count) {
    picojson::array runs;
    for (pb_size_t i = 0; i < t.hook_runs_count; ++i) {
      const outpost_v1_HookRunInfo& r = t.hook_runs[i];
      picojson::object h;
      h["stage"] = picojson::value(PbString(r.stage));
      h["path"] = picojson::value(PbString(r.path));
      h["source"] = picojson::value(PbString(r.source));
      h["exit_code"] = picojson::value(static_cast<int64_t>(r.exit_code));
      h["timed_out"] = picojson::value(r.timed_out);
      h["ok"] = picojson::value(r.ok);
      h["started_at"] = JsonTime(r.started_at_unix_nanos);
      h["duration_ms"] = picojson::value(static_cast<double>(r.duration_nanos) / 1e6);
      h["message"] = JsonText(r.message);
      h["stderr_tail"] = JsonText(r.stderr_tail);
      runs.emplace_back(std::move(h));
    }
    o["hook_runs"] = picojson::value(std::move(runs));
  }
  if (t.network_ports_count || !PbString(t.network_address).empty()) {
    picojson::object net, ports;
    net["address"] = picojson::value(PbString(t.network_address));
    for (pb_size_t i = 0; i < t.network_ports_count; ++i) {
      ports[PbString(t.network_ports[i].label)] = picojson::value(static_cast<int64_t>(t.network_ports[i].port));
    }
    net["ports"] = picojson::value(std::move(ports));
    o["network"] = picojson::value(std::move(net));
  }
  return picojson::value(o);
}

void PrintNetwork(const outpost_v1_TaskInfo& t) {
  std::string line = PbString(t.network_address);
  for (pb_size_t i = 0; i < t.network_ports_count; ++i) {
    line += Format("%s%s=%d", i ? " " : line.empty() ? "ports " : ", ports ", PbString(t.network_ports[i].label).c_str(),
                   t.network_ports[i].port);
  }
  if (!line.empty()) std::printf("network:    %s\n", line.c_str());
}

namespace {

// A byte count of a memory or hugetlb file as a size ("64MiB") when it is a
// whole number of KiB, MiB or GiB; any other value as written.
std::string LimitValue(const outpost_v1_LimitInfo& l) {
  std::string file = PbString(l.file), value = PbString(l.value);
  if (!StartsWith(file, "memory.") && !StartsWith(file, "hugetlb.")) return value;
  auto n = ParseInt(value, 1, INT64_MAX);
  if (!n.ok()) return value;
  for (auto [unit, shift] : {std::pair<const char*, int>{"GiB", 30}, {"MiB", 20}, {"KiB", 10}}) {
    if (*n % (int64_t{1} << shift) == 0) return std::to_string(*n >> shift) + unit;
  }
  return value;
}

}  // namespace

picojson::value LimitsJson(const outpost_v1_LimitInfo* limits, pb_size_t n) {
  picojson::array out;
  for (pb_size_t i = 0; i < n; ++i) {
    picojson::object o;
    o["file"] = picojson::value(PbString(limits[i].file));
    o["value"] = picojson::value(PbString(limits[i].value));
    o["enforced"] = picojson::value(limits[i].enforced);
    if (!limits[i].enforced) o["not_enforced"] = JsonText(limits[i].not_enforced);
    out.emplace_back(std::move(o));
  }
  return picojson::value(std::move(out));
}

namespace {

std::vector<std::string> NotEnforcedParts(const outpost_v1_LimitInfo* limits, pb_size_t n,
                                          const std::vector<std::string>& only) {
  // Reasons in the order first seen, each with its files (io.max once
  // however many devices it limits).
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (pb_size_t i = 0; i < n; ++i) {
    std::string file = PbString(limits[i].file), why = PbString(limits[i].not_enforced);
    if (limits[i].enforced || (!only.empty() && std::find(only.begin(), only.end(), file) == only.end())) continue;
    auto it = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& p) { return p.first == why; });
    if (it == by_reason.end()) it = by_reason.insert(by_reason.end(), {why, {}});
    if (std::find(it->second.begin(), it->second.end(), file) == it->second.end()) it->second.push_back(file);
  }
  std::vector<std::string> out;
  for (const auto& [why, files] : by_reason) out.push_back(JoinStrings(files, ", ") + " not enforced: " + why);
  return out;
}

}  // namespace

std::string NotEnforcedText(const outpost_v1_LimitInfo* limits, pb_size_t n, const std::vector<std::string>& only) {
  return JoinStrings(NotEnforcedParts(limits, n, only), "; ");
}

std::vector<std::string> LimitLines(const outpost_v1_LimitInfo* limits, pb_size_t n) {
  std::vector<std::string> lines;
  if (n == 0) return lines;
  std::string list;
  for (pb_size_t i = 0; i < n; ++i) list += (i ? ", " : "") + PbString(limits[i].file) + " " + LimitValue(limits[i]);
  std::vector<std::string> unenforced = NotEnforcedParts(limits, n, {});
  lines.push_back(unenforced.empty() ? list + " (enforced)" : list);
  lines.insert(lines.end(), unenforced.begin(), unenforced.end());
  return lines;
}

void PrintLimits(const outpost_v1_LimitInfo* limits, pb_size_t n) {
  std::vector<std::string> lines = LimitLines(limits, n);
  for (size_t i = 0; i < lines.size(); ++i) std::printf("%-12s%s\n", i ? "" : "limits:", lines[i].c_str());
}

void PrintHookRuns(const outpost_v1_TaskInfo& t) {
  if (!PbString(t.nri).empty()) std::printf("nri:        %s\n", PbString(t.nri).c_str());
  if (t.hook_runs_count == 0) return;
  std::printf("hooks:      (last run of each)\n");
  for (pb_size_t i = 0; i < t.hook_runs_count; ++i) {
    const outpost_v1_HookRunInfo& r = t.hook_runs[i];
    std::printf("  %s %s: %s\n", Time(r.started_at_unix_nanos).c_str(), r.ok ? "ok" : "FAILED",
                PbString(r.message).c_str());
  }
}

}  // namespace outpost::cli
