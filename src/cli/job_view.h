// How the CLI shows jobs, shared by the job commands: the JSON form of a
// job and its tasks, the task table, the failed-task summary, JOB/TASK
// references, and the InspectJob call.
#pragma once

#include <picojson.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/pb.h"
#include "job.pb.h"
#include "task.pb.h"

namespace outpost::cli {

struct GlobalOptions;
using JobInfo = outpost_v1_JobInfo;

picojson::value TaskJson(const outpost_v1_JobTaskInfo& t);
// With the canonical spec when the reply carries it (InspectJob).
picojson::value JobJson(const JobInfo& j);

// Splits JOB/TASK; task is "" for JOB.
void SplitRef(const std::string& ref, std::string* job, std::string* task);

// An encoded JobIdRequest.
Result<std::string> EncodeJobId(const std::string& id);

// InspectJob; on failure the error is printed and *code set.
bool InspectJob(const GlobalOptions& g, const std::string& id, PbOwned<JobInfo>* out, int* code);

// TaskStats of a job's task into *out; false when it cannot be had (the
// error printed unless quiet, and in *why when given; *code: the exit code
// it would give, kExitDriverUnavailable for a driver that is away).
bool TaskStatsOf(const GlobalOptions& g, const outpost_v1_JobTaskInfo& t, bool quiet,
                 PbOwned<outpost_v1_TaskStatsResponse>* out, std::string* why = nullptr, int* code = nullptr);

// why without the "start task TASK_ID: " its row already names
// ("start failed: start task web.server: command not found" becomes
// "start failed: command not found").
std::string WithoutTaskPrefix(const std::string& why, const outpost_v1_JobTaskInfo& t);
// A task's NOTE: why it is pending, in backoff ("exit code 1, restart in
// 4s") or dead; "last: EXIT" for one that ran; "-".
std::string TaskNote(const outpost_v1_JobTaskInfo& t, int64_t now_unix_nanos);
// A job's NOTE in ps: the note of the task that explains its status (a
// failed one, else one in backoff, else a pending one), named when the job
// has more than one task; "-".
std::string JobNote(const JobInfo& j, int64_t now_unix_nanos);
// ps's RUNNING: "running/meant to run"; a completed prestart or poststart
// task (not a sidecar) counts in neither.
std::string RunningCount(const JobInfo& j);

// The last n lines of data (a final line without its newline counts).
std::vector<std::string> LastLines(std::string_view data, size_t n);
// The last lines of a task's stderr (or stdout) log, by ReadLogs (bounded
// by the agent's chunk size).
Result<std::vector<std::string>> LogTail(const GlobalOptions& g, const outpost_v1_JobTaskInfo& t, bool stderr_,
                                         int lines);

// TASK STATE PID RESTARTS LIFECYCLE NOTE, one row per task.
void PrintTaskTable(const JobInfo& j, const char* indent);
// "limits:" and the job's own and each task's limits, enforced or why not
// (InspectJob's reply; nothing when none is set).
void PrintJobLimits(const JobInfo& j);

// Health (health_view.cc): a job's from its tasks' ("-" when none has
// checks; else unhealthy, starting or healthy, the worst one), a task's
// ("-" without checks), the JSON of a task's checks (null without), and
// "health:" with each check's last result for `inspect JOB/TASK`.
std::string JobHealth(const JobInfo& j);
std::string TaskHealth(const outpost_v1_JobTaskInfo& t);
picojson::value ChecksJson(const outpost_v1_JobTaskInfo& t);
void PrintTaskChecks(const outpost_v1_JobTaskInfo& t);

// What `outpost run` shows of a task as it goes: its state, with
// "healthy" / "unhealthy" for a running task that is (or whose checks
// say), "backoff (exit code 1)", "completed", "failed (...)".
std::string TaskProgress(const outpost_v1_JobTaskInfo& t);
// "JOB/TASK: PROGRESS" for each task whose progress differs from the one
// in *shown (by task index), which is updated.
std::vector<std::string> ProgressLines(const JobInfo& j, std::vector<std::string>* shown);
// `outpost update`'s error for an invalid limit: the agent's lines, each
// naming the flag (--memory-max) instead of the spec's JSON path
// (tasks[0].resources.memory.max) given in paths as (path, flag).
std::string UpdateErrorText(const std::string& agent_error,
                            const std::vector<std::pair<std::string, std::string>>& paths, const std::string& ref);
// "task b failed (exit code 3; ...)", for each task that failed for good.
std::string FailedTasks(const JobInfo& j);

}  // namespace outpost::cli
