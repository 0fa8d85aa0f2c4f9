// See job_view.h.
#include "cli/job_view.h"

#include <cstdio>
#include <cstring>

#include "base/clock.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"

namespace outpost::cli {

namespace {

picojson::value Pairs(const outpost_v1_EnvVar* v, pb_size_t n) {
  picojson::object o;
  for (pb_size_t i = 0; i < n; i++) o[PbString(v[i].name)] = picojson::value(PbString(v[i].value));
  return picojson::value(o);
}

}  // namespace

std::string WithoutTaskPrefix(const std::string& why, const outpost_v1_JobTaskInfo& t) {
  // "start failed: start task web.server: command ..." names the task that
  // its row or "JOB/TASK:" already names: the inner prefix goes.
  const std::string inner = "start task " + PbString(t.task_id) + ": ";
  const std::string outer = "start failed: ";
  if (StartsWith(why, outer + inner)) return outer + why.substr(outer.size() + inner.size());
  if (StartsWith(why, inner)) return why.substr(inner.size());
  return why;
}

std::string TaskNote(const outpost_v1_JobTaskInfo& t, int64_t now_unix_nanos) {
  std::string r = WithoutTaskPrefix(PbString(t.reason), t);
  if (std::strcmp(t.state, "backoff") == 0 && t.next_start_unix_nanos) {
    int64_t left = t.next_start_unix_nanos - now_unix_nanos;
    // Whole seconds, rounded up: "restart in 4s" until it is due.
    std::string when = left <= 0 ? "restart now"
                                 : "restart in " + FormatDuration((left + kNanosPerSecond - 1) / kNanosPerSecond *
                                                                  kNanosPerSecond);
    r = r.empty() ? when : r + ", " + when;
  }
  if (r.empty() && t.last_exit && *t.last_exit) r = "last: " + WithoutTaskPrefix(PbString(t.last_exit), t);
  return r.empty() ? "-" : r;
}

std::string JobNote(const JobInfo& j, int64_t now_unix_nanos) {
  // The task that explains the status: a failed one, else one in backoff,
  // else a pending one that says why. None for a job stopped on purpose.
  if (std::strcmp(j.desired, "running") != 0) return "-";
  for (const char* want : {"failed", "backoff", "pending"}) {
    for (pb_size_t i = 0; i < j.tasks_count; i++) {
      const outpost_v1_JobTaskInfo& t = j.tasks[i];
      bool match = std::strcmp(want, "failed") == 0 ? t.failed : std::strcmp(t.state, want) == 0;
      if (!match || !t.reason || !*t.reason) continue;
      std::string note = TaskNote(t, now_unix_nanos);
      if (std::strcmp(want, "backoff") == 0) note = "backoff: " + note;
      return j.tasks_count == 1 ? note : PbString(t.name) + ": " + note;
    }
  }
  return "-";
}

std::string RunningCount(const JobInfo& j) {
  // A prestart or poststart task that completed is done, not down: it
  // counts in neither number.
  int running = 0, meant = 0;
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    bool hook = std::strcmp(t.lifecycle, "main") != 0 && !t.sidecar;
    if (hook && t.completed) continue;
    meant++;
    running += std::strcmp(t.state, "running") == 0;
  }
  return Format("%d/%d", running, meant);
}

picojson::value TaskJson(const outpost_v1_JobTaskInfo& t) {
  picojson::object o;
  o["name"] = picojson::value(PbString(t.name));
  o["task_id"] = picojson::value(PbString(t.task_id));
  o["state"] = picojson::value(PbString(t.state));
  o["lifecycle"] = picojson::value(PbString(t.lifecycle));
  o["sidecar"] = picojson::value(t.sidecar);
  o["pid"] = picojson::value(static_cast<int64_t>(t.pid));
  o["started_at"] = JsonTime(t.started_at_unix_nanos);
  o["restarts"] = picojson::value(static_cast<int64_t>(t.restarts));
  o["failed"] = picojson::value(t.failed);
  o["completed"] = picojson::value(t.completed);
  o["healthy"] = picojson::value(t.healthy);
  o["health"] = t.health && *t.health ? picojson::value(PbString(t.health)) : picojson::value();
  o["checks"] = ChecksJson(t);
  o["reason"] = JsonText(t.reason);
  o["last_exit"] = JsonText(t.last_exit);
  o["next_start_at"] = JsonTime(t.next_start_unix_nanos);
  picojson::array devs;
  for (pb_size_t i = 0; i < t.devices_count; i++) {
    picojson::object d;
    d["resource"] = picojson::value(PbString(t.devices[i].resource));
    picojson::array ids;
    for (pb_size_t k = 0; k < t.devices[i].ids_count; k++) ids.push_back(picojson::value(PbString(t.devices[i].ids[k])));
    d["ids"] = picojson::value(ids);
    devs.push_back(picojson::value(d));
  }
  o["devices"] = picojson::value(devs);
  picojson::object notes;
  for (pb_size_t i = 0; i < t.device_annotations_count; i++) {
    notes[PbString(t.device_annotations[i].name)] = picojson::value(PbString(t.device_annotations[i].value));
  }
  o["device_annotations"] = picojson::value(notes);
  if (t.has_task) o["task"] = InfoJson(t.task);
  return picojson::value(o);
}

picojson::value JobJson(const JobInfo& j) {
  picojson::object o;
  o["id"] = picojson::value(PbString(j.id));
  o["status"] = picojson::value(PbString(j.status));
  o["desired"] = picojson::value(PbString(j.desired));
  o["source"] = picojson::value(PbString(j.source));
  o["file"] = JsonText(j.file);
  o["version"] = picojson::value(j.version);
  o["submitted_at"] = JsonTime(j.submitted_at_unix_nanos);
  o["labels"] = Pairs(j.labels, j.labels_count);
  o["annotations"] = Pairs(j.annotations, j.annotations_count);
  if (j.pending && *j.pending) o["pending"] = picojson::value(PbString(j.pending));
  picojson::array tasks;
  for (pb_size_t i = 0; i < j.tasks_count; i++) tasks.push_back(TaskJson(j.tasks[i]));
  o["tasks"] = picojson::value(tasks);
  if (j.spec_json && *j.spec_json) {
    auto spec = json::Parse(j.spec_json, kAgentJsonLimits);
    if (spec.ok()) o["spec"] = std::move(*spec);
    o["limits"] = LimitsJson(j.limits, j.limits_count);  // the job cgroup's own (InspectJob)
  }
  return picojson::value(o);
}

void SplitRef(const std::string& ref, std::string* job, std::string* task) {
  size_t slash = ref.find('/');
  *job = ref.substr(0, slash);
  *task = slash == std::string::npos ? "" : ref.substr(slash + 1);
}

Result<std::string> EncodeJobId(const std::string& id) {
  outpost_v1_JobIdRequest req = outpost_v1_JobIdRequest_init_zero;
  req.id = PbStr(id);
  return PbEncode(outpost_v1_JobIdRequest_fields, &req, "JobIdRequest");
}

bool InspectJob(const GlobalOptions& g, const std::string& id, PbOwned<JobInfo>* out, int* code) {
  auto reply = CallAgent(g, "InspectJob", *EncodeJobId(id), code);
  if (!reply.ok()) return false;
  if (!out->Decode(*reply, "JobInfo").ok()) {
    *code = Fail(kExitFailure, "bad reply from the agent");
    return false;
  }
  return true;
}

bool TaskStatsOf(const GlobalOptions& g, const outpost_v1_JobTaskInfo& t, bool quiet,
                 PbOwned<outpost_v1_TaskStatsResponse>* out, std::string* why, int* code) {
  outpost_v1_TaskIdRequest req = outpost_v1_TaskIdRequest_init_zero;
  std::string tid = PbString(t.task_id);
  req.id = PbStr(tid);
  auto encoded = PbEncode(outpost_v1_TaskIdRequest_fields, &req, "TaskIdRequest");
  if (!encoded.ok()) return false;
  int c = 0;
  auto r = quiet ? CallAgentQuiet(g, "TaskStats", *encoded, &c) : CallAgent(g, "TaskStats", *encoded, &c);
  if (code) *code = c;
  if (!r.ok()) {
    if (why) *why = r.error().message();
    return false;
  }
  if (!out->Decode(*r, "TaskStatsResponse").ok()) {
    if (why) *why = "bad reply from the agent";
    if (code) *code = kExitFailure;
    return false;
  }
  return true;
}

std::string TaskProgress(const outpost_v1_JobTaskInfo& t) {
  std::string state = PbString(t.state);
  std::string last = WithoutTaskPrefix(PbString(t.last_exit), t);
  if (state == "running") {
    if (PbString(t.health) == "unhealthy") return "unhealthy";
    return t.healthy ? "healthy" : "running";
  }
  if (state == "backoff") return last.empty() ? "backoff" : "backoff (" + last + ")";
  if (state == "dead" && t.completed) return "completed";
  if (state == "dead" && t.failed) return last.empty() ? "failed" : "failed (" + last + ")";
  return state;
}

std::vector<std::string> ProgressLines(const JobInfo& j, std::vector<std::string>* shown) {
  std::vector<std::string> out;
  if (shown->size() != j.tasks_count) shown->assign(j.tasks_count, "");
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    std::string now = TaskProgress(j.tasks[i]);
    if ((*shown)[i] == now) continue;
    (*shown)[i] = now;
    out.push_back(PbString(j.id) + "/" + PbString(j.tasks[i].name) + ": " + now);
  }
  return out;
}

void PrintTaskTable(const JobInfo& j, const char* indent) {
  std::printf("%s%-16s %-9s %-7s %-8s %-10s %s\n", indent, "TASK", "STATE", "PID", "RESTARTS", "LIFECYCLE", "NOTE");
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    std::string life = PbString(t.lifecycle) + (t.sidecar ? "+sidecar" : "");
    std::string pid = t.pid ? std::to_string(t.pid) : "-";
    std::printf("%s%-16s %-9s %-7s %-8llu %-10s %s\n", indent, PbString(t.name).c_str(), PbString(t.state).c_str(),
                pid.c_str(), static_cast<unsigned long long>(t.restarts), life.c_str(), TaskNote(t, WallNanos()).c_str());
  }
}

std::vector<std::string> LastLines(std::string_view data, size_t n) {
  if (!data.empty() && data.back() == '\n') data.remove_suffix(1);
  std::vector<std::string> lines;
  if (data.empty() || n == 0) return lines;
  size_t end = data.size();
  while (lines.size() < n) {
    size_t nl = data.rfind('\n', end == 0 ? 0 : end - 1);
    size_t from = nl == std::string_view::npos || end == 0 ? 0 : nl + 1;
    lines.push_back(std::string(data.substr(from, end - from)));
    if (nl == std::string_view::npos || end == 0) break;
    end = nl;
  }
  return {lines.rbegin(), lines.rend()};
}

Result<std::vector<std::string>> LogTail(const GlobalOptions& g, const outpost_v1_JobTaskInfo& t, bool stderr_,
                                         int lines) {
  outpost_v1_ReadLogsRequest req = outpost_v1_ReadLogsRequest_init_zero;
  std::string tid = PbString(t.task_id);
  req.id = PbStr(tid);
  req.stderr = stderr_;
  req.tail_lines = lines;
  auto encoded = PbEncode(outpost_v1_ReadLogsRequest_fields, &req, "ReadLogsRequest");
  if (!encoded.ok()) return encoded.error();
  int code = 0;
  auto reply = CallAgentQuiet(g, "ReadLogs", *encoded, &code);
  if (!reply.ok()) return reply.error();
  PbOwned<outpost_v1_ReadLogsResponse> resp(outpost_v1_ReadLogsResponse_fields);
  if (!resp.Decode(*reply, "ReadLogsResponse").ok()) return Error(Code::kInternal, "bad reply from the agent");
  std::string_view data;
  if (resp->data) data = std::string_view(reinterpret_cast<const char*>(resp->data->bytes), resp->data->size);
  return LastLines(data, static_cast<size_t>(lines));
}

void PrintJobLimits(const JobInfo& j) {
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  if (j.limits_count) rows.push_back({"(job)", LimitLines(j.limits, j.limits_count)});
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    if (t.has_task && t.task.limits_count) rows.push_back({PbString(t.name), LimitLines(t.task.limits, t.task.limits_count)});
  }
  if (rows.empty()) return;
  std::printf("limits:\n");
  for (const auto& [who, lines] : rows) {
    for (size_t k = 0; k < lines.size(); k++) std::printf("  %-16s %s\n", k ? "" : who.c_str(), lines[k].c_str());
  }
}

std::string FailedTasks(const JobInfo& j) {
  std::string out;
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    if (!t.failed) continue;
    if (!out.empty()) out += ", ";
    out += "task " + PbString(t.name) + " failed";
    if (t.last_exit && *t.last_exit) out += " (" + WithoutTaskPrefix(PbString(t.last_exit), t) + ")";
  }
  return out;
}

}  // namespace outpost::cli
