// How the CLI shows health checks (job_view.h): the HEALTH column of `ps`,
// the checks of `inspect JOB/TASK` and their JSON.
#include <cstdio>
#include <cstring>

#include "base/strings.h"
#include "cli/job_view.h"
#include "cli/util.h"

namespace outpost::cli {

std::string TaskHealth(const outpost_v1_JobTaskInfo& t) {
  if (t.health && *t.health) return t.health;
  return "-";
}

std::string JobHealth(const JobInfo& j) {
  int rank = 0;  // 0 none, 1 healthy, 2 starting, 3 unhealthy
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const char* h = j.tasks[i].health;
    if (!h || !*h) continue;
    int r = std::strcmp(h, "unhealthy") == 0 ? 3 : std::strcmp(h, "starting") == 0 ? 2 : 1;
    if (r > rank) rank = r;
  }
  static const char* const kNames[] = {"-", "healthy", "starting", "unhealthy"};
  return kNames[rank];
}

picojson::value ChecksJson(const outpost_v1_JobTaskInfo& t) {
  if (!t.checks_count) return picojson::value();
  picojson::array a;
  for (pb_size_t i = 0; i < t.checks_count; i++) {
    const outpost_v1_CheckResultInfo& c = t.checks[i];
    picojson::object o;
    o["name"] = picojson::value(PbString(c.name));
    o["type"] = picojson::value(PbString(c.type));
    o["status"] = picojson::value(PbString(c.status));
    o["runs"] = picojson::value(static_cast<int64_t>(c.runs));
    o["successes"] = picojson::value(static_cast<int64_t>(c.successes));
    o["failures"] = picojson::value(static_cast<int64_t>(c.failures));
    if (c.last_unix_nanos) {
      o["last_ok"] = picojson::value(c.last_ok);
      o["last_output"] = JsonText(c.output);
      o["last_at"] = JsonTime(c.last_unix_nanos);
    } else {
      o["last_ok"] = picojson::value();
      o["last_output"] = picojson::value();
      o["last_at"] = picojson::value();
    }
    a.push_back(picojson::value(o));
  }
  return picojson::value(a);
}

void PrintTaskChecks(const outpost_v1_JobTaskInfo& t) {
  if (!t.health || !*t.health) return;
  std::printf("health:     %s\n", t.health);
  for (pb_size_t i = 0; i < t.checks_count; i++) {
    const outpost_v1_CheckResultInfo& c = t.checks[i];
    std::string last = c.last_unix_nanos ? Format("%s at %s: %s", c.last_ok ? "ok" : "failed",
                                                  Time(c.last_unix_nanos).c_str(), PbString(c.output).c_str())
                                         : std::string("not run yet");
    std::printf("  check %-20s %-8s %s\n", PbString(c.name).c_str(), PbString(c.status).c_str(), last.c_str());
  }
}

}  // namespace outpost::cli
