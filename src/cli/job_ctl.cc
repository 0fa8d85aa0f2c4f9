// Job control commands, each for one or many jobs: start, stop, rm,
// restart. One connection to the agent carries every call; each job is
// reported on its own line, and the command fails (naming the jobs) when
// any of them did.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/job_view.h"
#include "cli/util.h"
#include "job.pb.h"

namespace outpost::cli {

const char kStartHelp[] =
    "Usage: outpost start JOB...\n"
    "\n"
    "Starts stopped jobs again (stop's counterpart): each job's tasks start in\n"
    "lifecycle order, and the job is marked running, also across agent\n"
    "restarts and reboots. A job that is meant to run already is left alone\n"
    "(said so; `outpost restart JOB` restarts it). Returns once the start is\n"
    "requested; `outpost ps` or `outpost events JOB` show how it goes.\n"
    "\n"
    "Exit codes: 0 every job started or was running; 1 a job is unknown or\n"
    "could not be started (the others are still started; the last line names\n"
    "the ones that failed); 2 usage; 3 no agent.\n"
    "\n"
    "Examples:\n"
    "  outpost start web\n"
    "  outpost start web db cache\n";

const char kStopHelp[] =
    "Usage: outpost stop JOB... [--timeout DUR]\n"
    "\n"
    "Stops every task of each job (main and poststart tasks first, prestart\n"
    "sidecars last): each gets its kill_signal, then SIGKILL after its\n"
    "kill_timeout (or DUR). The job stays, marked stopped, also across agent\n"
    "restarts and reboots; `outpost start` starts it again.\n"
    "Returns once every task has stopped. A task whose driver is away cannot\n"
    "be stopped yet: after waiting DUR (default 10s) for it, the command says\n"
    "the stop is pending and why, and fails; the agent stops the task as soon\n"
    "as its driver is back. With many jobs, each is stopped in turn and\n"
    "reported; the command fails if any stop did, naming those jobs.\n"
    "\n"
    "Examples:\n"
    "  outpost stop web\n"
    "  outpost stop web db --timeout 30s\n";

const char kRmHelp[] =
    "Usage: outpost rm JOB... [--timeout DUR]\n"
    "\n"
    "Stops each job and removes it with its tasks' private dirs and logs.\n"
    "A job that comes from a jobs.d file is removed by removing the file.\n"
    "Returns once the job is gone. While a task's driver is away the job\n"
    "cannot be removed (the driver still has the task): after waiting DUR\n"
    "(default 10s) the command says the removal is pending and why, and\n"
    "fails; the job shows as removing, and the agent removes it as soon as\n"
    "the driver is back. With many jobs, each is removed in turn and\n"
    "reported; the command fails if any removal did, naming those jobs.\n"
    "\n"
    "Examples:\n"
    "  outpost rm web\n"
    "  outpost rm web db\n";

const char kRestartHelp[] =
    "Usage: outpost restart JOB[/TASK]...\n"
    "\n"
    "Restarts one task, or the whole job (stopped, then started again in\n"
    "lifecycle order), for each argument. The restart-policy window starts\n"
    "afresh; a failed task is given a new chance; a stopped job is started.\n"
    "The command fails if any restart did, naming those.\n"
    "\n"
    "Examples:\n"
    "  outpost restart web/api\n"
    "  outpost restart web db\n";

namespace {

// What one job's call came to: a line for stdout, or the error (already
// printed) and its exit code.
struct Outcome {
  explicit Outcome(std::string r) : ref(std::move(r)) {}
  std::string ref;
  int code = kExitOk;
  std::string line;       // text output
  picojson::object json;  // --json output (one document per job)
};

// Prints each outcome as it comes (a text line or a JSON document) and, at the end,
// fails naming the references that failed.
class Report {
 public:
  Report(const GlobalOptions& g, const char* verb, size_t total) : g_(g), verb_(verb), total_(total) {}
  void Add(const Outcome& o) {
    if (o.code != kExitOk) {
      failed_.push_back(o.ref);
      if (code_ == kExitOk) code_ = o.code;
      return;  // the error is on stderr
    }
    if (g_.json) PrintJson(picojson::value(o.json));
    else std::printf("%s\n", o.line.c_str());
    std::fflush(stdout);
  }
  // Whether to go on after o: not once there is no agent to ask.
  bool GoOn(const Outcome& o) const { return o.code != kExitNoAgent; }
  // The references after the one that ended the loop, never tried.
  void NotTried(std::vector<std::string>::const_iterator from, std::vector<std::string>::const_iterator to) {
    untried_.insert(untried_.end(), from, to);
  }
  int Finish() const {
    if (failed_.empty()) return kExitOk;
    if (total_ == 1) return code_;
    std::string msg = Format("%s failed for %zu of %zu: %s", verb_, failed_.size() + untried_.size(), total_,
                             JoinStrings(failed_, ", ").c_str());
    if (!untried_.empty()) msg += "; not tried: " + JoinStrings(untried_, ", ");
    return Fail(code_, msg);
  }

 private:
  const GlobalOptions& g_;
  const char* verb_;
  size_t total_;
  std::vector<std::string> failed_;
  std::vector<std::string> untried_;
  int code_ = kExitOk;
};

// The JOB arguments: at least one; no JOB/TASK unless allowed.
int CheckRefs(const std::vector<std::string>& refs, const char* cmd, bool tasks) {
  if (refs.empty()) return UsageError(std::string(cmd) + " needs at least one JOB", cmd);
  for (const std::string& r : refs) {
    if (r.empty()) return UsageError(std::string(cmd) + ": an empty job name", cmd);
    if (!tasks && r.find('/') != std::string::npos) {
      if (std::string(cmd) == "stop") {
        return UsageError("stop takes a whole job, not a task (" + r +
                              "); to stop one task for good, remove it from the job's spec",
                          cmd);
      }
      return UsageError(std::string(cmd) + " takes whole jobs, not tasks (" + r + ")", cmd);
    }
  }
  return kExitOk;
}

// --timeout DUR of stop and rm: *d (-1 without it).
int TimeoutOption(const Args& a, const char* cmd, int64_t* d) {
  *d = -1;
  const std::string* t = a.Get("--timeout");
  if (!t) return kExitOk;
  auto v = ParseDuration(*t);
  if (!v.ok()) return UsageError("--timeout: " + v.error().message(), cmd);
  *d = *v;
  return kExitOk;
}

int StopCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--timeout"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "stop");
  if (int c = CheckRefs(a->pos, "stop", false)) return c;
  int64_t d = -1;
  if (int c = TimeoutOption(*a, "stop", &d)) return c;
  Session s(g);
  Report report(g, "stop", a->pos.size());
  for (auto it = a->pos.cbegin(); it != a->pos.cend(); ++it) {
    const std::string& id = *it;
    outpost_v1_StopJobRequest req = outpost_v1_StopJobRequest_init_zero;
    req.id = PbStr(id);
    req.timeout_nanos = -1;
    int64_t wait = kDefaultCallTimeoutNanos + 120 * kNanosPerSecond;
    if (d >= 0) {
      req.timeout_nanos = d;
      req.wait_nanos = d;
      wait = kDefaultCallTimeoutNanos + 2 * d;
    }
    Outcome o(id);
    auto reply = s.Call("StopJob", *PbEncode(outpost_v1_StopJobRequest_fields, &req, "StopJobRequest"), &o.code, wait);
    o.line = "job " + id + " stopped";
    o.json["stopped"] = picojson::value(id);
    report.Add(o);
    if (!report.GoOn(o)) {
      report.NotTried(it + 1, a->pos.cend());
      break;
    }
  }
  return report.Finish();
}

int RmCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--timeout"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "rm");
  if (int c = CheckRefs(a->pos, "rm", false)) return c;
  int64_t d = -1;
  if (int c = TimeoutOption(*a, "rm", &d)) return c;
  Session s(g);
  Report report(g, "rm", a->pos.size());
  for (auto it = a->pos.cbegin(); it != a->pos.cend(); ++it) {
    const std::string& id = *it;
    outpost_v1_RemoveJobRequest req = outpost_v1_RemoveJobRequest_init_zero;
    req.id = PbStr(id);
    int64_t wait = kDefaultCallTimeoutNanos + 120 * kNanosPerSecond;
    if (d >= 0) {
      req.wait_nanos = d;
      wait += d;
    }
    Outcome o(id);
    auto reply =
        s.Call("RemoveJob", *PbEncode(outpost_v1_RemoveJobRequest_fields, &req, "RemoveJobRequest"), &o.code, wait);
    o.line = "job " + id + " removed";
    o.json["removed"] = picojson::value(id);
    report.Add(o);
    if (!report.GoOn(o)) {
      report.NotTried(it + 1, a->pos.cend());
      break;
    }
  }
  return report.Finish();
}

// restart (start_only false) and start.
int RestartOrStart(const GlobalOptions& g, const std::vector<std::string>& in, bool start) {
  const char* cmd = start ? "start" : "restart";
  auto a = ParseArgs(in, {}, {});
  if (!a.ok()) return UsageError(a.error().message(), cmd);
  if (int c = CheckRefs(a->pos, cmd, !start)) return c;
  Session s(g);
  Report report(g, cmd, a->pos.size());
  for (auto it = a->pos.cbegin(); it != a->pos.cend(); ++it) {
    const std::string& ref = *it;
    std::string id, task;
    SplitRef(ref, &id, &task);
    outpost_v1_RestartJobRequest req = outpost_v1_RestartJobRequest_init_zero;
    req.id = PbStr(id);
    req.task = PbStr(task);
    req.start_only = start;
    Outcome o(ref);
    auto reply = s.Call("RestartJob", *PbEncode(outpost_v1_RestartJobRequest_fields, &req, "RestartJobRequest"), &o.code);
    PbOwned<outpost_v1_RestartJobResponse> resp(outpost_v1_RestartJobResponse_fields);
    if (reply.ok() && !resp.Decode(*reply, "RestartJobResponse").ok()) o.code = Fail(kExitFailure, "bad reply from the agent");
    if (o.code == kExitOk && start && resp->already_running) {
      std::string status = PbString(resp->status);
      o.line = "job " + id + " is running already (status " + status + "): nothing to do";
      if (status != "running" && status != "complete") o.line += "; `outpost restart " + id + "` restarts it";
      o.json["job"] = picojson::value(id);
      o.json["already_running"] = picojson::value(true);
      o.json["status"] = picojson::value(status);
    } else if (start) {
      o.line = "job " + id + " starting";
      o.json["starting"] = picojson::value(id);
    } else {
      o.line = "restarting " + ref;
      o.json["restarting"] = picojson::value(ref);
    }
    report.Add(o);
    if (!report.GoOn(o)) {
      report.NotTried(it + 1, a->pos.cend());
      break;
    }
  }
  return report.Finish();
}

}  // namespace

int RunStart(const GlobalOptions& g, const std::vector<std::string>& a) { return RestartOrStart(g, a, true); }
int RunStop(const GlobalOptions& g, const std::vector<std::string>& a) { return StopCmd(g, a); }
int RunRm(const GlobalOptions& g, const std::vector<std::string>& a) { return RmCmd(g, a); }
int RunRestart(const GlobalOptions& g, const std::vector<std::string>& a) { return RestartOrStart(g, a, false); }

}  // namespace outpost::cli
