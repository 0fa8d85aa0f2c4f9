// The task layer's pipelines around a driver, with a fake driver: what is
// prepared, persisted, undone and recovered, whatever the driver.
#include "task/manager.h"

#include <fcntl.h>
#include <picojson.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/sys.h"
#include "cgroup/cgroup.h"
#include "hooks/hook.h"
#include "proc/uid_pool.h"
#include "test_util.h"

namespace outpost::task {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

// A driver that runs nothing: it records calls and ends tasks when told.
class FakeDriver : public driver::Driver {
 public:
  explicit FakeDriver(std::string name = "fake") : name_(std::move(name)) {}
  struct Task {
    driver::TaskConfig config;
    bool running = true;
    driver::ExitResult exit;
    std::vector<WaitCallback> waiters;
  };
  std::map<std::string, Task> tasks;
  std::vector<std::string> calls;
  std::string fail_start;  // error message for the next StartTask
  std::vector<driver::TaskHandle> recovered;
  Status fail_recover = OkStatus();  // what RecoverTask answers instead
  bool stop_before_exit = false;     // StopTask answers before the task ends

  std::string Name() const override { return name_; }
  driver::Capabilities GetCapabilities() const override { return {}; }
  driver::Fingerprint GetFingerprint() override { return {}; }
  void StartTask(const driver::TaskConfig& c, StartCallback done) override {
    calls.push_back("start " + c.id);
    if (!fail_start.empty()) return done(Error(Code::kInternal, std::exchange(fail_start, "")));
    tasks[c.id].config = c;
    driver::TaskHandle h;
    h.version = 7;
    h.config = c;
    h.pid = 4242;
    h.driver_state = "state-of-" + c.id;
    done(h);
  }
  void RecoverTask(const driver::TaskHandle& h, DoneCallback done) override {
    calls.push_back("recover " + h.config.id);
    if (!fail_recover.ok()) return done(fail_recover);
    recovered.push_back(h);
    tasks[h.config.id].config = h.config;
    done(OkStatus());
  }
  void WaitTask(const std::string& id, WaitCallback done) override {
    auto it = tasks.find(id);
    if (it == tasks.end()) return done(driver::ExitResult{-1, 0, false, "unknown"});
    if (!it->second.running) return done(it->second.exit);
    it->second.waiters.push_back(std::move(done));
  }
  void StopTask(const std::string& id, int64_t timeout, const std::string& sig, DoneCallback done) override {
    calls.push_back("stop " + id + " " + std::to_string(timeout) + " " + sig);
    if (!stop_before_exit) End(id, 143, 15);
    done(OkStatus());
  }
  void DestroyTask(const std::string& id, bool force, DoneCallback done) override {
    calls.push_back(std::string("destroy ") + id + (force ? " force" : ""));
    if (!tasks.count(id)) return done(Error(Code::kNotFound, "task not found for given id"));
    if (tasks[id].running) End(id, 137, 9);
    tasks.erase(id);
    done(OkStatus());
  }
  void InspectTask(const std::string& id, InspectCallback done) override {
    driver::TaskStatus s;
    s.state = tasks.count(id) && tasks[id].running ? driver::TaskState::kRunning : driver::TaskState::kExited;
    done(s);
  }
  void SignalTask(const std::string&, const std::string&, DoneCallback done) override { done(OkStatus()); }
  void ExecTask(const std::string&, const std::vector<std::string>&, int64_t, ExecCallback done) override {
    done(Error(Code::kUnimplemented, "no"));
  }
  void TaskStats(const std::string&, StatsCallback done) override { done(driver::TaskStats{}); }
  uint64_t SubscribeEvents(EventCallback cb) override {
    event_cb_ = std::move(cb);
    return 1;
  }
  void UnsubscribeEvents(uint64_t) override { event_cb_ = nullptr; }
  void Publish(const driver::TaskEvent& ev) {
    if (event_cb_) event_cb_(ev);
  }

  void End(const std::string& id, int code, int sig = 0) {
    Task& t = tasks[id];
    if (!t.running) return;
    t.running = false;
    t.exit.exit_code = code;
    t.exit.signal = sig;
    auto waiters = std::move(t.waiters);
    for (auto& w : waiters) w(t.exit);
  }

 private:
  std::string name_;
  EventCallback event_cb_;
};

class TaskManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outpost-tm.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    // Searchable, as a state dir's parents must be for tasks running as
    // other users (mkdtemp makes it 0700).
    ::chmod(dir_.c_str(), 0755);
    loop_ = MakeLoop();
    auto pool = proc::UidPool::Open(dir_ + "/uids.json", 90000, 90001);
    ASSERT_TRUE(pool.ok());
    uids_ = std::move(*pool);
    ASSERT_TRUE(drivers_.Add(&fake_).ok());
    Reopen();
  }
  void TearDown() override {
    tm_.reset();
    (void)sys::RemoveTree(dir_);
  }
  void Reopen() {
    tm_.reset();
    TaskManager::Options o;
    o.state_dir = dir_ + "/state";
    o.runtime_dir = dir_ + "/run";
    o.drivers = &drivers_;
    o.events = &events_;
    o.uids = uids_.get();
    o.driver_grace_nanos = driver_grace_nanos_;
    o.cgroups = cgroups_;
    o.oom = oom_;
    // A user database with the agent's own uid under a name, and one other.
    o.users.passwd_path = dir_ + "/passwd";
    o.users.group_path = dir_ + "/group";
    ASSERT_TRUE(sys::WriteFileAtomic(o.users.passwd_path,
                                     "me:x:" + std::to_string(::getuid()) + ":" + std::to_string(::getgid()) +
                                         "::/home/me:/bin/sh\n",
                                     0644)
                    .ok());
    ASSERT_TRUE(sys::WriteFileAtomic(o.users.group_path, "me:x:" + std::to_string(::getgid()) + ":\n", 0644).ok());
    auto m = TaskManager::Create(loop_.get(), o);
    ASSERT_TRUE(m.ok()) << m.error().message();
    tm_ = std::move(*m);
  }
  driver::TaskConfig Config(const std::string& id) {
    driver::TaskConfig c;
    c.id = id;
    c.job = "j";
    c.name = id;
    c.driver = "fake";
    c.command = "/bin/true";
    return c;
  }
  Result<TaskView> Start(driver::TaskConfig c, TaskManager::ExitCallback exited = nullptr) {
    Result<TaskView> out = Error(Code::kUnknown, "no callback");
    bool done = false;
    tm_->Start(
        c,
        [&](Result<TaskView> v) {
          out = std::move(v);
          done = true;
        },
        std::move(exited));
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
    return out;
  }
  Status Call(const std::function<void(TaskManager::DoneCallback)>& fn) {
    Status out = Error(Code::kUnknown, "pending");
    bool done = false;
    fn([&](Status st) {
      out = st;
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
    return out;
  }
  std::string Record(const std::string& id) {
    auto r = sys::ReadFile(dir_ + "/state/tasks/" + id + ".json");
    return r.ok() ? *r : "";
  }
  std::vector<std::string> EventTypes(const std::string& id) {
    std::vector<std::string> out;
    for (const EventRecord& r : events_.After(0, id)) out.push_back(r.event.type);
    return out;
  }
  bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

  std::string dir_;
  std::unique_ptr<Loop> loop_;
  FakeDriver fake_;
  driver::Registry drivers_;
  int64_t driver_grace_nanos_ = 200 * kNanosPerMilli;
  cgroup::Cgroups* cgroups_ = nullptr;
  cgroup::OomWatcher* oom_ = nullptr;
  EventLog events_;
  std::unique_ptr<proc::UidPool> uids_;
  std::unique_ptr<TaskManager> tm_;
};

TEST_F(TaskManagerTest, StartPreparesAroundTheDriverAndPersistsItsHandle) {
  auto v = Start(Config("a"));
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(v->status.state, driver::TaskState::kRunning);
  EXPECT_EQ(v->status.pid, 4242);
  const driver::TaskConfig& given = fake_.tasks["a"].config;
  EXPECT_EQ(given.task_dir, dir_ + "/state/task-data/a");
  EXPECT_EQ(given.stdout_path, dir_ + "/run/fifo/a.stdout");
  EXPECT_TRUE(Exists(given.task_dir));
  struct stat st;
  ASSERT_EQ(::stat(given.stdout_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  auto back = DecodeTaskRecord(Record("a"));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->driver(), "fake");
  EXPECT_EQ(back->handle.driver_state, "state-of-a");
  EXPECT_EQ(back->handle.version, 7);
  EXPECT_GT(back->handle.started_at_unix_nanos, 0) << "filled in where the driver gives none";
  EXPECT_FALSE(back->exited);

  auto dup = Start(Config("a"));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().message(), "start task a: task with ID \"a\" already started");
  EXPECT_TRUE(tm_->Inspect("a").ok()) << "a refused duplicate leaves the running task alone";
}

TEST_F(TaskManagerTest, CredentialsAreResolvedOnceFromTheConfiguredUserDatabase) {
  driver::TaskConfig c = Config("u");
  c.user = "me";
  ASSERT_TRUE(Start(c).ok());
  const driver::Identity& who = fake_.tasks["u"].config.identity;
  EXPECT_TRUE(who.switch_user);
  EXPECT_EQ(who.uid, ::getuid());
  EXPECT_EQ(who.home, "/home/me");
  c = Config("nobody");
  c.user = "no-such-user";
  auto bad = Start(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "start task nobody: user \"no-such-user\" not found in " + dir_ + "/passwd");
  EXPECT_FALSE(tm_->Inspect("nobody").ok());
  EXPECT_EQ(fake_.calls, (std::vector<std::string>{"start u"})) << "the driver never saw the failed one";
}

TEST_F(TaskManagerTest, AFailedStartUndoesEveryStepBeforeIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "dynamic users need root (chown of the task dir)";
  driver::TaskConfig c = Config("f");
  c.user = "dynamic";
  fake_.fail_start = "no such image";
  auto r = Start(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "start task f: no such image");
  EXPECT_FALSE(tm_->Inspect("f").ok());
  EXPECT_FALSE(Exists(dir_ + "/run/fifo/f.stdout")) << "FIFOs removed";
  EXPECT_FALSE(uids_->Lookup("f").has_value()) << "dynamic user released";
  EXPECT_FALSE(Exists(dir_ + "/state/tasks/f.json"));
  // And it starts fine afterwards, with the same lowest uid.
  auto ok = Start(c);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(*uids_->Lookup("f"), 90000u);
}

TEST_F(TaskManagerTest, ATaskDirOutOfReachOfTheTasksUserIsRefusedNamingTheDirInTheWay) {
  if (::geteuid() != 0) GTEST_SKIP() << "dynamic users need root (chown of the task dir)";
  ASSERT_EQ(0, ::chmod(dir_.c_str(), 0700));
  driver::TaskConfig c = Config("far");
  c.user = "dynamic";
  auto r = Start(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "start task far: task dir '" + dir_ + "/state/task-data/far' is out of reach of uid "
                                 "90000: '" + dir_ + "' (mode 0700, owner 0) does not let it search; let other "
                                 "users search it (chmod o+x)");
  EXPECT_TRUE(fake_.calls.empty()) << "the driver never saw it";
  EXPECT_FALSE(uids_->Lookup("far").has_value()) << "dynamic user released";
  // A task with a working dir of its own does not need to reach it.
  c.workdir = "/";
  auto ok = Start(c);
  EXPECT_TRUE(ok.ok()) << ok.error().message();
}

TEST_F(TaskManagerTest, UnknownDriverIsRefusedWithTheKnownOnes) {
  driver::TaskConfig c = Config("x");
  c.driver = "docker";
  auto r = Start(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "start task x: unknown driver \"docker\"; available: fake");
}

TEST_F(TaskManagerTest, ExitIsPersistedPublishedAndCalledBack) {
  driver::ExitResult seen;
  int calls = 0;
  ASSERT_TRUE(Start(Config("e"), [&](const driver::ExitResult& e) {
                seen = e;
                calls++;
              }).ok());
  fake_.End("e", 3);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen.exit_code, 3);
  auto v = tm_->Inspect("e");
  EXPECT_EQ(v->status.state, driver::TaskState::kExited);
  auto rec = DecodeTaskRecord(Record("e"));
  ASSERT_TRUE(rec.ok());
  EXPECT_TRUE(rec->exited);
  EXPECT_EQ(rec->exit.exit_code, 3);
  EXPECT_EQ(EventTypes("e"), (std::vector<std::string>{"exited"}));
  // Watch after the end: at once.
  int late = 0;
  ASSERT_TRUE(tm_->Watch("e", [&](const driver::ExitResult&) { late++; }).ok());
  EXPECT_EQ(late, 1);
  EXPECT_EQ(tm_->Watch("nope", [](const driver::ExitResult&) {}).error().code(), Code::kNotFound);
}

// A task OOM-killed in its cgroup gets one "oom-killed" event, whether the
// memory.events watch hears of the kill before the exit is handled or not:
// the exit removes the watch, and the kernel's notification may still be
// unread then (cgroup v2 on a fake cgroup2 tree).
TEST_F(TaskManagerTest, AnOomKillIsReportedOnceWhetherTheWatchOrTheExitSeesItFirst) {
  const std::string mount = dir_ + "/cgroup";
  auto put = [&](const std::string& rel, const std::string& text) {
    ASSERT_TRUE(sys::MkdirAll(sys::Dirname(mount + "/" + rel), 0755).ok());
    ASSERT_TRUE(sys::WriteFileAtomic(mount + "/" + rel, text, 0644).ok());
  };
  // In place, so the watched inode sees IN_MODIFY as the kernel's does.
  auto rewrite = [&](const std::string& rel, const std::string& text) {
    auto fd = sys::Open(mount + "/" + rel, O_WRONLY | O_TRUNC);
    ASSERT_TRUE(fd.ok()) << fd.error().message();
    ASSERT_TRUE(sys::WriteAll(fd->get(), text.data(), text.size(), rel).ok());
  };
  put("cgroup.controllers", "memory pids\n");
  put("cgroup.subtree_control", "");
  put("outpost.slice/cgroup.subtree_control", "");
  put("outpost.slice/j/cgroup.subtree_control", "");  // the job's cgroup, as the kernel makes it
  auto cg = cgroup::Cgroups::Setup({mount + "/outpost.slice", mount});
  ASSERT_TRUE(cg->available()) << cg->reason();
  auto oom = cgroup::OomWatcher::Create(loop_.get());
  ASSERT_TRUE(oom.ok()) << oom.error().message();
  cgroups_ = cg.get();
  oom_ = oom->get();
  Reopen();
  auto count = [&](const std::string& id) {
    auto types = EventTypes(id);
    return std::count(types.begin(), types.end(), std::string("oom-killed"));
  };

  // The exit first: the kill is in memory.events, its notification unread.
  put("outpost.slice/j/first/memory.events", "oom 0\noom_kill 0\n");
  auto started = Start(Config("first"));
  ASSERT_TRUE(started.ok()) << started.error().message();
  rewrite("outpost.slice/j/first/memory.events", "oom 1\noom_kill 1\n");
  fake_.End("first", 137, SIGKILL);
  EXPECT_EQ(count("first"), 1) << "events: " << ::testing::PrintToString(EventTypes("first"));
  EXPECT_TRUE(tm_->Inspect("first")->status.exit.oom_killed);

  // The watch first: the exit adds no second event.
  put("outpost.slice/j/second/memory.events", "oom 0\noom_kill 0\n");
  started = Start(Config("second"));
  ASSERT_TRUE(started.ok()) << started.error().message();
  rewrite("outpost.slice/j/second/memory.events", "oom 1\noom_kill 1\n");
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return count("second") == 1; }));
  fake_.End("second", 137, SIGKILL);
  EXPECT_EQ(count("second"), 1) << "events: " << ::testing::PrintToString(EventTypes("second"));
  EXPECT_TRUE(tm_->Inspect("second")->status.exit.oom_killed);
  // The first task's watch is gone with its exit: its notification, read
  // now, reports nothing more.
  EXPECT_EQ(count("first"), 1);
  tm_.reset();
  cgroups_ = nullptr;
  oom_ = nullptr;
}

TEST_F(TaskManagerTest, AnEndedInstanceMakesWayForTheNextStartAndKeepsItsTaskDir) {
  ASSERT_TRUE(Start(Config("r")).ok());
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/state/task-data/r/kept", "x", 0600).ok());
  fake_.End("r", 0);
  ASSERT_TRUE(Start(Config("r")).ok());
  EXPECT_EQ(tm_->Inspect("r")->status.state, driver::TaskState::kRunning);
  EXPECT_TRUE(Exists(dir_ + "/state/task-data/r/kept"));
  EXPECT_EQ(fake_.calls, (std::vector<std::string>{"start r", "destroy r", "start r"}));
  // A task dir removed between two instances is made again, 0700.
  fake_.End("r", 0);
  ASSERT_EQ(::unlink((dir_ + "/state/task-data/r/kept").c_str()), 0);
  ASSERT_EQ(::rmdir((dir_ + "/state/task-data/r").c_str()), 0);
  ASSERT_TRUE(Start(Config("r")).ok());
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/state/task-data/r").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // A plain file in its place is refused by name.
  fake_.End("r", 0);
  ASSERT_EQ(::rmdir((dir_ + "/state/task-data/r").c_str()), 0);
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/state/task-data/r", "x", 0600).ok());
  auto r = Start(Config("r"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("'" + dir_ + "/state/task-data/r' is not a directory"), std::string::npos)
      << r.error().message();
}

TEST_F(TaskManagerTest, ARestartKeepsItsLogPipesAndTheKeepersHoldUnlessTheirSetUpChanged) {
  std::vector<std::string> holder;
  tm_->SetFifoHolder([&](const std::string& id, const std::vector<int>& fds) {
    holder.push_back("hold " + id + " " + std::to_string(fds.size()));
  }, [&](const std::string& id) { holder.push_back("release " + id); });
  auto fifo_ino = [&] {
    struct stat st;
    return ::stat((dir_ + "/run/fifo/k.stdout").c_str(), &st) == 0 ? st.st_ino : 0;
  };
  ASSERT_TRUE(Start(Config("k")).ok());
  EXPECT_EQ(holder, (std::vector<std::string>{"hold k 2"}));
  const ino_t ino = fifo_ino();
  ASSERT_NE(ino, 0u);
  fake_.End("k", 1);
  // A start refused for its input leaves the ended instance as it was.
  driver::TaskConfig bad = Config("k");
  bad.driver = "no-such-driver";
  EXPECT_FALSE(Start(bad).ok());
  ASSERT_TRUE(tm_->Inspect("k").ok());
  EXPECT_EQ(tm_->Inspect("k")->status.state, driver::TaskState::kExited);
  EXPECT_EQ(holder, (std::vector<std::string>{"hold k 2"}));
  ASSERT_TRUE(Start(Config("k")).ok());
  EXPECT_EQ(holder, (std::vector<std::string>{"hold k 2"})) << "the restart kept the held FIFOs";
  EXPECT_EQ(fifo_ino(), ino);
  // The kept pipe still carries the task's output into its log.
  {
    auto w = sys::Open(dir_ + "/run/fifo/k.stdout", O_WRONLY | O_NONBLOCK);
    ASSERT_TRUE(w.ok()) << w.error().message();
    ASSERT_EQ(::write(w->get(), "second instance\n", 16), 16);
  }
  auto log = *tm_->LogPath("k", false);
  EXPECT_TRUE(RunUntil(loop_.get(), [&] {
    auto text = sys::ReadFile(log);
    return text.ok() && text->find("second instance\n") != std::string::npos;
  }));
  // Set up differently (another rotation): made anew, the old hold released.
  fake_.End("k", 1);
  driver::TaskConfig c = Config("k");
  c.log_max_files = 3;
  ASSERT_TRUE(Start(c).ok());
  EXPECT_EQ(holder, (std::vector<std::string>{"hold k 2", "release k", "hold k 2"}));
  // Removed: released, FIFOs gone.
  fake_.End("k", 1);
  ASSERT_TRUE(Call([&](TaskManager::DoneCallback cb) { tm_->Destroy("k", false, cb); }).ok());
  EXPECT_EQ(holder.back(), "release k");
  EXPECT_EQ(fifo_ino(), 0u);
}

TEST_F(TaskManagerTest, StopUsesTheTasksKillSignalAndTimeoutAndDestroyForgetsEverything) {
  driver::TaskConfig c = Config("s");
  c.kill_timeout_nanos = 7;
  c.kill_signal = "SIGUSR1";
  ASSERT_TRUE(Start(c).ok());
  ASSERT_TRUE(Call([&](TaskManager::DoneCallback cb) { tm_->Stop("s", -1, "", cb); }).ok());
  EXPECT_EQ(fake_.calls.back(), "stop s 7 SIGUSR1") << "the driver is told the task's own kill signal";
  EXPECT_EQ(EventTypes("s"), (std::vector<std::string>{"stopped"}));
  EXPECT_TRUE(Call([&](TaskManager::DoneCallback cb) { tm_->Stop("s", -1, "", cb); }).ok()) << "again: fine";
  ASSERT_TRUE(Call([&](TaskManager::DoneCallback cb) { tm_->Destroy("s", false, cb); }).ok());
  EXPECT_FALSE(tm_->Inspect("s").ok());
  EXPECT_FALSE(Exists(dir_ + "/state/tasks/s.json"));
  EXPECT_FALSE(Exists(dir_ + "/run/fifo/s.stdout"));
  EXPECT_TRUE(Exists(dir_ + "/state/task-data/s")) << "Destroy keeps the task dir; Purge removes it";
  ASSERT_TRUE(Call([&](TaskManager::DoneCallback cb) { tm_->Purge("s", cb); }).ok());
  EXPECT_FALSE(Exists(dir_ + "/state/task-data/s"));

  ASSERT_TRUE(Start(Config("run")).ok());
  Status st = Call([&](TaskManager::DoneCallback cb) { tm_->Destroy("run", false, cb); });
  EXPECT_EQ(st.error().message(), "cannot destroy running task");
  EXPECT_TRUE(Call([&](TaskManager::DoneCallback cb) { tm_->Destroy("run", true, cb); }).ok());
}

TEST_F(TaskManagerTest, AStopIsDoneOnlyOnceTheDriverHasReportedTheExit) {
  ASSERT_TRUE(Start(Config("late")).ok());
  fake_.stop_before_exit = true;  // as a plugin that answers once the kill is sent
  bool stopped = false;
  tm_->Stop("late", -1, "", [&](Status st) {
    EXPECT_TRUE(st.ok()) << st.error().message();
    stopped = true;
  });
  ASSERT_EQ(fake_.calls.back().rfind("stop late", 0), 0u);
  EXPECT_FALSE(stopped) << "the driver answered, but the task has not ended";
  fake_.End("late", 137, 9);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return stopped; }));
  EXPECT_EQ(tm_->Inspect("late")->status.state, driver::TaskState::kExited);
}

TEST_F(TaskManagerTest, RecoveryHandsEachRunningRecordToItsDriver) {
  ASSERT_TRUE(Start(Config("live")).ok());
  ASSERT_TRUE(Start(Config("done")).ok());
  fake_.End("done", 4);
  driver::TaskConfig gone = Config("gone");
  gone.driver = "vanished";
  TaskRecord rec;
  rec.handle.config = gone;
  rec.handle.config.id = "gone";
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/state/tasks/gone.json", EncodeTaskRecord(rec), 0600).ok());
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/state/tasks/corrupt.json", "{oops", 0600).ok());
  // What a power cut leaves of a record written just before (no fsync).
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/state/tasks/cut.json", "", 0600).ok());
  fake_.calls.clear();
  Reopen();
  ASSERT_TRUE(tm_->Recover().ok());
  EXPECT_EQ(fake_.calls, (std::vector<std::string>{"recover live"})) << "ended tasks are not the driver's";
  EXPECT_EQ(fake_.recovered[0].driver_state, "state-of-live");
  EXPECT_EQ(tm_->Inspect("live")->status.state, driver::TaskState::kRunning);
  EXPECT_EQ(tm_->Inspect("done")->status.exit.exit_code, 4);
  // A driver that is not registered gets its grace period to come.
  auto g = tm_->Inspect("gone");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->status.state, driver::TaskState::kRunning);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return tm_->Inspect("gone")->status.state == driver::TaskState::kExited; }));
  EXPECT_EQ(tm_->Inspect("gone")->status.exit.error,
            "exit status unknown: its driver \"vanished\" did not register within 200ms");
  EXPECT_FALSE(tm_->Inspect("corrupt").ok());
  EXPECT_FALSE(Exists(dir_ + "/state/tasks/corrupt.json")) << "moved out of the way of the next start";
  EXPECT_TRUE(Exists(dir_ + "/state/tasks/corrupt.json.bad")) << "kept for inspection";
  EXPECT_FALSE(tm_->Inspect("cut").ok());
  EXPECT_FALSE(Exists(dir_ + "/state/tasks/cut.json")) << "an empty record is what a power cut left: dropped";
  EXPECT_FALSE(Exists(dir_ + "/state/tasks/cut.json.bad"));
  int ended = 0;
  ASSERT_TRUE(tm_->Watch("live", [&](const driver::ExitResult&) { ended++; }).ok());
  fake_.End("live", 0);
  EXPECT_EQ(ended, 1);
}

// A driver plugin registers after the agent started: its tasks wait for
// it and are recovered through it; a driver whose instances all went away
// for its grace period leaves its tasks lost.
TEST_F(TaskManagerTest, TasksWaitForTheirDriverPluginAndAreRecoveredThroughIt) {
  driver_grace_nanos_ = 60 * kNanosPerSecond;
  FakeDriver plugin("plug");
  ASSERT_TRUE(drivers_.Add(&plugin).ok());
  driver::TaskConfig c = Config("pt");
  c.driver = "plug";
  ASSERT_TRUE(Start(c).ok());
  drivers_.Remove("plug");  // the agent restarts before the plugin is back
  Reopen();
  ASSERT_TRUE(tm_->Recover().ok());
  EXPECT_EQ(tm_->Inspect("pt")->status.state, driver::TaskState::kRunning);
  EXPECT_TRUE(plugin.recovered.empty());
  tm_->OnDriverChanged("plug");  // not registered yet: nothing to do
  EXPECT_TRUE(plugin.recovered.empty());
  ASSERT_TRUE(drivers_.Add(&plugin).ok());
  tm_->OnDriverChanged("plug");
  ASSERT_EQ(plugin.recovered.size(), 1u);
  EXPECT_EQ(plugin.recovered[0].config.id, "pt");
  // Another instance takes over: recovered again (a no-op for a driver that
  // tracks it), its exit still waited for once.
  tm_->OnDriverChanged("plug");
  EXPECT_EQ(plugin.recovered.size(), 2u);
  // The driver disconnected before it answered: the task is not lost.
  plugin.fail_recover = Error(Code::kUnavailable, "driver plug is disconnected");
  tm_->OnDriverChanged("plug");
  EXPECT_EQ(tm_->Inspect("pt")->status.state, driver::TaskState::kRunning);
  plugin.fail_recover = OkStatus();
  int ended = 0;
  ASSERT_TRUE(tm_->Watch("pt", [&](const driver::ExitResult&) { ended++; }).ok());
  plugin.End("pt", 0);
  EXPECT_EQ(ended, 1);
  // A second task; the plugin then has no instance for its grace period.
  c.id = "pt2";
  ASSERT_TRUE(Start(c).ok());
  tm_->OnDriverGone("plug", "driver \"plug\" had no connected instance for 30s");
  auto v = tm_->Inspect("pt2");
  EXPECT_EQ(v->status.state, driver::TaskState::kExited);
  EXPECT_EQ(v->status.exit.exit_code, -1);
  EXPECT_EQ(v->status.exit.error, "exit status unknown: driver \"plug\" had no connected instance for 30s");
  drivers_.Remove("plug");
}

TEST_F(TaskManagerTest, PathsDerivedFromTheIdAreWrittenShownAndRecoveredInFull) {
  ASSERT_TRUE(Start(Config("p")).ok());
  const std::string task_dir = dir_ + "/state/task-data/p", log_dir = dir_ + "/state/logs/p";
  const std::string out = dir_ + "/run/fifo/p.stdout", err = dir_ + "/run/fifo/p.stderr";
  auto check = [&](const driver::TaskConfig& c, const char* where) {
    EXPECT_EQ(c.task_dir, task_dir) << where;
    EXPECT_EQ(c.log_dir, log_dir) << where;
    EXPECT_EQ(c.stdout_path, out) << where;
    EXPECT_EQ(c.stderr_path, err) << where;
  };
  auto rec = DecodeTaskRecord(Record("p"));
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  check(rec->config(), "record");
  check(tm_->Inspect("p")->config, "inspect");
  EXPECT_EQ(*tm_->LogPath("p", true), log_dir + "/p.stderr");

  // A record from an agent with another runtime dir keeps its own FIFO path.
  TaskRecord moved = *rec;
  moved.handle.config.id = moved.handle.config.name = "m";
  moved.handle.config.stdout_path = dir_ + "/old-run/fifo/m.stdout";
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/state/tasks/m.json", EncodeTaskRecord(moved), 0600).ok());
  fake_.calls.clear();
  Reopen();
  ASSERT_TRUE(tm_->Recover().ok());
  ASSERT_EQ(fake_.recovered.size(), 2u);
  for (const driver::TaskHandle& h : fake_.recovered) {
    if (h.config.id == "p") check(h.config, "given to the driver at recovery");
  }
  check(tm_->Inspect("p")->config, "inspect after recovery");
  EXPECT_EQ(tm_->Inspect("m")->config.stdout_path, dir_ + "/old-run/fifo/m.stdout");
  EXPECT_EQ(tm_->Inspect("m")->config.stderr_path, err) << "as recorded";
}

TEST_F(TaskManagerTest, DriverEventsGetTheJobAndTaskNameFromTheRecord) {
  driver::TaskConfig c = Config("e");
  c.name = "web";
  ASSERT_TRUE(Start(c).ok());
  driver::TaskEvent ev;
  ev.task_id = "e";
  ev.type = "started";
  fake_.Publish(ev);
  auto got = events_.After(0, "e");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().event.type, "started");
  EXPECT_EQ(got.back().event.task_name, "web");
  EXPECT_EQ(got.back().event.job, "j");
}

TEST_F(TaskManagerTest, RecordsOfTheFirstOnDiskFormatAreRecovered) {
  // What the exec driver wrote itself before the task layer kept records.
  std::string v1 = R"({"version": 1, "driver": "exec", "pid": 99, "start_ticks": 5, "started_at_ns": 10,
    "driver_state": "keeper", "instance": "old@1", "cgroup": "/sys/fs/cgroup/x/old",
    "config": {"id": "old", "job": "j", "name": "old", "command": "/bin/true", "args": ["a"], "env": {},
               "workdir": "", "user": "", "group": "", "rlimits": [], "kill_signal": "SIGTERM",
               "kill_timeout_ns": 5000000000, "task_dir": "/t", "stdout": "", "stderr": "", "log_dir": "",
               "log_max_files": 10, "log_max_file_size": 10485760}})";
  auto rec = DecodeTaskRecord(v1);
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  EXPECT_EQ(rec->driver(), "exec");
  EXPECT_EQ(rec->handle.version, 0);
  EXPECT_EQ(rec->handle.driver_state, v1) << "the exec driver reads its old fields from the whole file";
  EXPECT_EQ(rec->handle.pid, 99);
  EXPECT_EQ(rec->config().cgroup, "/sys/fs/cgroup/x/old");
  EXPECT_EQ(rec->config().args, std::vector<std::string>{"a"});
  EXPECT_FALSE(DecodeTaskRecord(R"({"version": 3, "config": {"id": "x"}})").ok());
  EXPECT_EQ(DecodeTaskRecord(R"({"version": 2, "handle": {}, "config": {}})").error().message(),
            "config.id: missing");
}

TEST_F(TaskManagerTest, TaskIdsBecomeFileNames) {
  EXPECT_TRUE(ValidateTaskId("web.api-1_x").ok());
  EXPECT_FALSE(ValidateTaskId("").ok());
  EXPECT_FALSE(ValidateTaskId(".hidden").ok());
  EXPECT_FALSE(ValidateTaskId("a/b").ok());
  EXPECT_FALSE(ValidateTaskId(std::string(129, 'a')).ok());
  auto r = Start(Config("bad/id"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(fake_.calls.size(), 0u);
}


// ---- OCI hooks (task/hook_steps.cc) -------------------------------------

class TaskManagerHooksTest : public TaskManagerTest {
 protected:
  // A hook appending "<label> <status>" (from the state on stdin) to the log.
  hooks::Hook Hook(const std::string& label, int exit_code = 0) {
    hooks::Hook h;
    h.path = "/bin/sh";
    h.args = {"sh", "-c",
              "read s; st=${s#*\\\"status\\\":\\\"}; echo \"" + label + " ${st%%\\\"*}\" >> " + dir_ +
                  "/hooks.log; exit " + std::to_string(exit_code)};
    h.source = "job spec";
    return h;
  }
  std::string Log() {
    auto r = sys::ReadFile(dir_ + "/hooks.log");
    return r.ok() ? *r : "";
  }
  driver::TaskConfig WithHooks(const std::string& id, const std::string& failing = "") {
    driver::TaskConfig c = Config(id);
    auto oci = std::make_shared<driver::TaskHooks>();
    for (hooks::Stage s : hooks::kAllStages) {
      std::string name = hooks::StageName(s);
      oci->hooks.at(s).push_back(Hook(name, name == failing ? 3 : 0));
    }
    oci->annotations["a"] = "b";
    c.oci = oci;
    return c;
  }
  // c with one hook at stage.
  static void AddHook(driver::TaskConfig* c, hooks::Stage stage, const hooks::Hook& h) {
    auto oci = std::make_shared<driver::TaskHooks>(c->oci ? *c->oci : driver::TaskHooks());
    oci->hooks.at(stage).push_back(h);
    c->oci = oci;
  }
};

TEST_F(TaskManagerHooksTest, EveryStageRunsInOrderAroundTheDriverAndPoststopBeforeTheExitIsTold) {
  bool told = false;
  auto v = Start(WithHooks("h"), [&](const driver::ExitResult&) { told = true; });
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(Log(),
            "prestart creating\ncreateRuntime creating\ncreateContainer creating\nstartContainer created\n"
            "poststart running\n");
  // The driver got the merged hooks and the bundle.
  const driver::TaskConfig& given = fake_.tasks["h"].config;
  ASSERT_TRUE(given.oci);
  EXPECT_EQ(given.oci->bundle, dir_ + "/run/bundles/h");
  EXPECT_EQ(given.oci->hooks.size(), 6u);
  auto bundle = sys::ReadFile(given.oci->bundle + "/config.json");
  ASSERT_TRUE(bundle.ok()) << bundle.error().message();
  picojson::value doc;
  ASSERT_EQ(picojson::parse(doc, *bundle), "") << *bundle;
  EXPECT_EQ(doc.get("hooks").get("poststop").get<picojson::array>().size(), 1u) << *bundle;
  EXPECT_EQ(doc.get("annotations").get("a").to_str(), "b") << *bundle;
  auto view = tm_->Inspect("h");
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->hook_runs.size(), 5u);
  EXPECT_TRUE(view->hook_runs[0].ok());
  EXPECT_EQ(view->hook_runs[4].stage, hooks::Stage::kPoststart);
  size_t hook_events = 0;
  for (const std::string& t : EventTypes("h")) hook_events += t == "hook";
  EXPECT_EQ(hook_events, 5u);

  fake_.End("h", 0);
  EXPECT_FALSE(told) << "the exit is told once the poststop hooks have run";
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return told; }));
  EXPECT_NE(Log().find("poststop stopped\n"), std::string::npos) << Log();
  EXPECT_EQ(tm_->Inspect("h")->hook_runs.size(), 6u);
  ASSERT_TRUE(Call([&](TaskManager::DoneCallback d) { tm_->Destroy("h", false, d); }).ok());
  EXPECT_FALSE(Exists(dir_ + "/run/bundles/h")) << "the bundle goes with the task";
}

TEST_F(TaskManagerHooksTest, AStopOfAnEndedTaskWaitsForItsPoststopHooks) {
  driver::TaskConfig c = Config("w");
  hooks::Hook slow;
  slow.path = "/bin/sh";
  std::string go = dir_ + "/go";
  slow.args = {"sh", "-c", "echo started >> " + dir_ + "/hooks.log; while [ ! -e " + go + " ]; do sleep 0.01; done"};
  AddHook(&c, hooks::Stage::kPoststop, slow);
  ASSERT_TRUE(Start(c).ok());
  fake_.End("w", 0);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return Log() == "started\n"; }));
  bool stopped = false, destroyed = false;
  tm_->Stop("w", 0, "", [&](Status) { stopped = true; });
  tm_->Destroy("w", false, [&](Status) { destroyed = true; });
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(loop_->RunOnce(10 * kNanosPerMilli).ok());
  EXPECT_FALSE(stopped) << "the stop is done once poststop has run";
  EXPECT_FALSE(destroyed);
  EXPECT_TRUE(tm_->Inspect("w").ok());
  ASSERT_TRUE(sys::WriteFileAtomic(go, "", 0600).ok());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return stopped && destroyed; }));
  EXPECT_FALSE(tm_->Inspect("w").ok());
}

TEST_F(TaskManagerHooksTest, ARecoveredTaskRunsThePoststopHooksOfItsBundle) {
  driver::TaskConfig c = Config("rec");
  AddHook(&c, hooks::Stage::kPoststop, Hook("poststop"));
  ASSERT_TRUE(Start(c).ok());
  // A new agent: the hooks it knows come from the bundle on disk.
  Reopen();
  ASSERT_TRUE(tm_->Recover().ok());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return fake_.recovered.size() == 1; }));
  bool told = false;
  ASSERT_TRUE(tm_->Watch("rec", [&](const driver::ExitResult&) { told = true; }).ok());
  fake_.End("rec", 0);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return told; }));
  EXPECT_EQ(Log(), "poststop stopped\n");
  auto runs = tm_->Inspect("rec")->hook_runs;
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].hook.source, "bundle " + dir_ + "/run/bundles/rec");
}

TEST_F(TaskManagerHooksTest, ATaskNoHookAppliesToHasNoBundleAndKeepsNothingForHooks) {
  bool ended = false;
  ASSERT_TRUE(Start(WithHooks("n"), [&](const driver::ExitResult&) { ended = true; }).ok());
  EXPECT_TRUE(Exists(dir_ + "/run/bundles/n/config.json"));
  fake_.End("n", 0);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ended; }));
  // The next instance has no hooks: the earlier one's bundle goes, so no
  // later poststop (after an agent restart) could take its hooks.
  ASSERT_TRUE(Start(Config("n")).ok());
  EXPECT_FALSE(Exists(dir_ + "/run/bundles/n"));
  EXPECT_FALSE(fake_.tasks["n"].config.oci);
  ASSERT_TRUE(Start(Config("plain")).ok());
  EXPECT_FALSE(Exists(dir_ + "/run/bundles/plain"));
}

TEST_F(TaskManagerHooksTest, AFailedCreateRuntimeHookFailsTheStartAndStillRunsPoststop) {
  auto v = Start(WithHooks("f", "createRuntime"));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message().rfind("start task f: hook createRuntime /bin/sh: exit code 3 in ", 0), 0u)
      << v.error().message();
  EXPECT_EQ(Log(), "prestart creating\ncreateRuntime creating\npoststop stopped\n");
  EXPECT_TRUE(fake_.calls.empty()) << "the driver never saw it";
  EXPECT_FALSE(tm_->Inspect("f").ok());
  EXPECT_FALSE(Exists(dir_ + "/state/tasks/f.json"));
}

TEST_F(TaskManagerHooksTest, AFailedPoststartHookStopsTheTask) {
  auto v = Start(WithHooks("p", "poststart"));
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message().find("hook poststart /bin/sh: exit code 3"), std::string::npos) << v.error().message();
  EXPECT_EQ(fake_.calls, (std::vector<std::string>{"start p", "destroy p force"}));
  EXPECT_NE(Log().find("poststop stopped\n"), std::string::npos) << Log();
  EXPECT_FALSE(Exists(dir_ + "/state/tasks/p.json")) << "never recorded";
}

}  // namespace
}  // namespace outpost::task
