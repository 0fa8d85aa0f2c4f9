// The keeper protocol, the exit journal, the restart policy and both ends of
// the keeper socket (KeeperChannel in the keeper, KeeperLink in the worker),
// driven over a real socketpair in one process: no fork, no sleeps.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "base/fd.h"
#include "keeper/channel.h"
#include "keeper/journal.h"
#include "keeper/keeper.h"
#include "keeper/link.h"
#include "keeper/proto.h"
#include "test_util.h"

namespace outpost::keeper {
namespace {

namespace kp = keeper::proto;
using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

constexpr int64_t kSec = 1000000000;

int Exited(int code) { return (code & 0xff) << 8; }
int Killed(int sig) { return sig & 0x7f; }

kp::Message Msg(kp::Type type, int32_t pid = 0, int32_t status = 0, int64_t value = 0) {
  kp::Message m;
  m.type = type;
  m.pid = pid;
  m.status = status;
  m.value = value;
  return m;
}

std::vector<uint8_t> Bytes(const kp::Message& m) {
  uint8_t buf[kp::kMessageSize];
  kp::Encode(m, buf);
  return std::vector<uint8_t>(buf, buf + sizeof buf);
}

// ---- protocol ----------------------------------------------------------------

TEST(KeeperProto, EveryTypeRoundTrips) {
  for (kp::Type t : {kp::Type::kHello, kp::Type::kHelloReply, kp::Type::kExit, kp::Type::kAck,
                     kp::Type::kReplayDone, kp::Type::kJournalHeader, kp::Type::kHoldFifos,
                     kp::Type::kReleaseFifos, kp::Type::kBeat}) {
    std::vector<uint8_t> b = Bytes(Msg(t, 4242, Killed(SIGKILL), -1234567890123LL));
    kp::Message out;
    ASSERT_EQ(kp::DecodeError::kNone, kp::Decode(b.data(), b.size(), &out)) << static_cast<int>(t);
    EXPECT_EQ(out.type, t);
    EXPECT_EQ(out.pid, 4242);
    EXPECT_EQ(out.status, Killed(SIGKILL));
    EXPECT_EQ(out.value, -1234567890123LL);
  }
}

TEST(KeeperProto, LayoutIsFixed) {
  std::vector<uint8_t> b = Bytes(Msg(kp::Type::kExit, 0x01020304, 0x0a0b0c0d, 0x1122334455667788LL));
  ASSERT_EQ(b.size(), 32u);
  uint32_t magic;
  uint16_t version, type;
  int32_t pid, status;
  int64_t value;
  uint64_t reserved;
  std::memcpy(&magic, &b[0], 4);
  std::memcpy(&version, &b[4], 2);
  std::memcpy(&type, &b[6], 2);
  std::memcpy(&pid, &b[8], 4);
  std::memcpy(&status, &b[12], 4);
  std::memcpy(&value, &b[16], 8);
  std::memcpy(&reserved, &b[24], 8);
  EXPECT_EQ(magic, kp::kMagic);
  EXPECT_EQ(version, kp::kVersion);
  EXPECT_EQ(type, 3);
  EXPECT_EQ(pid, 0x01020304);
  EXPECT_EQ(status, 0x0a0b0c0d);
  EXPECT_EQ(value, 0x1122334455667788LL);
  EXPECT_EQ(reserved, 0u);
}

TEST(KeeperProto, EveryTruncationIsShortAndLeavesOutputAlone) {
  std::vector<uint8_t> b = Bytes(Msg(kp::Type::kAck, 7));
  for (size_t n = 0; n < b.size(); ++n) {
    kp::Message out = Msg(kp::Type::kHello, 99);
    EXPECT_EQ(kp::DecodeError::kShort, kp::Decode(b.data(), n, &out)) << n;
    EXPECT_EQ(out.pid, 99);
    EXPECT_EQ(out.type, kp::Type::kHello);
  }
}

TEST(KeeperProto, BadHeadersAreRejected) {
  kp::Message out;
  std::vector<uint8_t> b = Bytes(Msg(kp::Type::kExit, 1));
  b[0] ^= 0xff;
  EXPECT_EQ(kp::DecodeError::kBadMagic, kp::Decode(b.data(), b.size(), &out));

  b = Bytes(Msg(kp::Type::kExit, 1));
  b[4] = b[5] = 0;  // version 0
  EXPECT_EQ(kp::DecodeError::kBadVersion, kp::Decode(b.data(), b.size(), &out));

  for (uint16_t t : {0, 10, 99, 0xffff}) {
    b = Bytes(Msg(kp::Type::kExit, 1));
    std::memcpy(&b[6], &t, 2);
    EXPECT_EQ(kp::DecodeError::kUnknownType, kp::Decode(b.data(), b.size(), &out)) << t;
  }
}

TEST(KeeperProto, NewerVersionsAndTrailingBytesAreAccepted) {
  std::vector<uint8_t> b = Bytes(Msg(kp::Type::kExit, 31, Exited(3), 5));
  uint16_t v2 = 2;
  std::memcpy(&b[4], &v2, 2);
  b.resize(48, 0xee);  // a later version appended fields
  kp::Message out;
  ASSERT_EQ(kp::DecodeError::kNone, kp::Decode(b.data(), b.size(), &out));
  EXPECT_EQ(out.pid, 31);
  EXPECT_EQ(out.status, Exited(3));
  EXPECT_EQ(out.value, 5);
}

// ---- journal -----------------------------------------------------------------

std::vector<int32_t> Pids(const ExitJournal& j) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < j.size(); ++i) out.push_back(j.at(i).pid);
  return out;
}

ExitRecord Rec(int32_t pid, int32_t status = 0, int64_t nanos = 0) { return ExitRecord{pid, status, nanos}; }

TEST(ExitJournal, KeepsOrderAndAcksTheOldestEntryForAPid) {
  auto j = std::make_unique<ExitJournal>();
  EXPECT_TRUE(j->empty());
  for (int32_t p : {10, 20, 30, 20, 40}) j->Push(Rec(p, Exited(p), p * 100));
  EXPECT_EQ(Pids(*j), (std::vector<int32_t>{10, 20, 30, 20, 40}));
  EXPECT_EQ(j->at(2).status, Exited(30));
  EXPECT_EQ(j->at(2).unix_nanos, 3000);

  size_t index = 99;
  EXPECT_TRUE(j->Ack(20, &index));  // the first 20 (pid reused later)
  EXPECT_EQ(index, 1u);
  EXPECT_EQ(Pids(*j), (std::vector<int32_t>{10, 30, 20, 40}));
  EXPECT_TRUE(j->Ack(10));  // head
  EXPECT_EQ(Pids(*j), (std::vector<int32_t>{30, 20, 40}));
  EXPECT_FALSE(j->Ack(10));
  EXPECT_FALSE(j->Ack(77));
  EXPECT_TRUE(j->Ack(40));  // tail
  EXPECT_EQ(Pids(*j), (std::vector<int32_t>{30, 20}));
  EXPECT_EQ(j->dropped(), 0u);
}

TEST(ExitJournal, OverflowDropsTheOldestAndCountsIt) {
  auto j = std::make_unique<ExitJournal>();
  const int32_t n = static_cast<int32_t>(ExitJournal::kCapacity) + 3;
  for (int32_t p = 1; p <= n; ++p) j->Push(Rec(p));
  EXPECT_EQ(j->size(), ExitJournal::kCapacity);
  EXPECT_EQ(j->dropped(), 3u);
  EXPECT_EQ(j->at(0).pid, 4);
  EXPECT_EQ(j->at(j->size() - 1).pid, n);
  EXPECT_FALSE(j->Ack(3));
  EXPECT_TRUE(j->Ack(4));
  j->Push(Rec(n + 1));
  EXPECT_EQ(j->dropped(), 3u);  // there was room again
}

TEST(ExitJournal, OrderSurvivesWrappingAroundTheRing) {
  auto j = std::make_unique<ExitJournal>();
  int32_t next = 1, oldest = 1;
  for (int round = 0; round < 3; ++round) {
    while (j->size() < ExitJournal::kCapacity - 1) j->Push(Rec(next++));
    while (j->size() > 2) ASSERT_TRUE(j->Ack(oldest++));
  }
  // Remove from the middle across the wrap point too.
  ASSERT_TRUE(j->Ack(oldest + 1));
  for (size_t i = 1; i < j->size(); ++i) ASSERT_LT(j->at(i - 1).pid, j->at(i).pid);
  EXPECT_EQ(j->at(0).pid, oldest);
  EXPECT_EQ(j->dropped(), 0u);
}

TEST(ExitJournal, SentPrefixFollowsAcksAndDrops) {
  auto j = std::make_unique<ExitJournal>();
  for (int32_t p = 1; p <= 5; ++p) j->Push(Rec(p));
  j->MarkNextSent();
  j->MarkNextSent();
  j->MarkNextSent();
  EXPECT_EQ(j->sent(), 3u);
  ASSERT_TRUE(j->Ack(2));  // a sent one
  EXPECT_EQ(j->sent(), 2u);
  ASSERT_TRUE(j->Ack(5));  // an unsent one
  EXPECT_EQ(j->sent(), 2u);
  EXPECT_EQ(j->at(j->sent()).pid, 4);  // the next to send
  j->ResetSent();
  EXPECT_EQ(j->sent(), 0u);
  for (size_t i = 0; i < 10; ++i) j->MarkNextSent();
  EXPECT_EQ(j->sent(), j->size());  // never past the end

  auto full = std::make_unique<ExitJournal>();
  for (size_t p = 0; p < ExitJournal::kCapacity; ++p) full->Push(Rec(static_cast<int32_t>(p)));
  full->MarkNextSent();
  full->Push(Rec(-1));  // drops the oldest, which was the sent one
  EXPECT_EQ(full->sent(), 0u);
}

UniqueFd Memfd() { return UniqueFd(::memfd_create("journal-test", MFD_CLOEXEC)); }

TEST(ExitJournal, SaveAndLoadCarryEntriesAndDroppedCount) {
  auto j = std::make_unique<ExitJournal>();
  for (int32_t p = 1; p <= 200; ++p) j->Push(Rec(p, Exited(p % 256), 1000LL * p));
  j->set_dropped(17);
  UniqueFd fd = Memfd();
  ASSERT_TRUE(fd);
  ASSERT_TRUE(SaveJournal(*j, fd.get()).ok());
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), static_cast<off_t>(201 * kp::kMessageSize));
  ASSERT_EQ(0, ::lseek(fd.get(), 0, SEEK_SET));

  auto back = std::make_unique<ExitJournal>();
  back->Push(Rec(999));  // Load appends
  Status st = LoadJournal(fd.get(), back.get());
  ASSERT_TRUE(st.ok()) << st.error().message();
  ASSERT_EQ(back->size(), 201u);
  EXPECT_EQ(back->at(0).pid, 999);
  for (size_t i = 1; i < back->size(); ++i) {
    EXPECT_EQ(back->at(i).pid, j->at(i - 1).pid);
    EXPECT_EQ(back->at(i).status, j->at(i - 1).status);
    EXPECT_EQ(back->at(i).unix_nanos, j->at(i - 1).unix_nanos);
  }
  EXPECT_EQ(back->dropped(), 17u);
}

TEST(ExitJournal, DamagedTransfersKeepWhatWasReadable) {
  auto j = std::make_unique<ExitJournal>();
  for (int32_t p = 1; p <= 10; ++p) j->Push(Rec(p));
  UniqueFd fd = Memfd();
  ASSERT_TRUE(SaveJournal(*j, fd.get()).ok());
  ASSERT_EQ(0, ::ftruncate(fd.get(), 6 * kp::kMessageSize + 5));  // header + 5 records + a bit
  ASSERT_EQ(0, ::lseek(fd.get(), 0, SEEK_SET));
  auto back = std::make_unique<ExitJournal>();
  Status st = LoadJournal(fd.get(), back.get());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("truncated after 5 of 10"), std::string::npos) << st.error().message();
  EXPECT_EQ(Pids(*back), (std::vector<int32_t>{1, 2, 3, 4, 5}));

  UniqueFd empty = Memfd();
  EXPECT_FALSE(LoadJournal(empty.get(), back.get()).ok());

  UniqueFd garbage = Memfd();
  std::vector<uint8_t> b = Bytes(Msg(kp::Type::kExit, 1));  // no header
  ASSERT_EQ(static_cast<ssize_t>(b.size()), ::write(garbage.get(), b.data(), b.size()));
  ASSERT_EQ(0, ::lseek(garbage.get(), 0, SEEK_SET));
  st = LoadJournal(garbage.get(), back.get());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("bad header"), std::string::npos);
  EXPECT_EQ(back->size(), 5u);
}

// ---- flags -------------------------------------------------------------------

TEST(KeeperFlags, RolesAndStrippedArguments) {
  std::vector<std::string> args = {"--config", "/etc/c.json"};
  auto f = TakeKeeperFlags(&args);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->role, AgentRole::kKeeper);
  EXPECT_EQ(f->journal_fd, -1);
  EXPECT_EQ(args, (std::vector<std::string>{"--config", "/etc/c.json"}));

  args = {"--worker", "--config", "c.json", "--keeper-fd=5"};
  f = TakeKeeperFlags(&args);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->role, AgentRole::kWorker);
  EXPECT_EQ(f->keeper_fd, 5);
  EXPECT_EQ(args, (std::vector<std::string>{"--config", "c.json"}));

  EXPECT_FALSE(f->keeper_empty);

  args = {"--worker", "--keeper-empty", "--keeper-fd=5", "--config", "c.json"};
  f = TakeKeeperFlags(&args);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->role, AgentRole::kWorker);
  EXPECT_TRUE(f->keeper_empty);
  EXPECT_EQ(args, (std::vector<std::string>{"--config", "c.json"}));

  args = {"--no-keeper"};
  f = TakeKeeperFlags(&args);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->role, AgentRole::kNoKeeper);
  EXPECT_TRUE(args.empty());

  args = {"--keeper-journal-fd=7", "--check"};
  f = TakeKeeperFlags(&args);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->role, AgentRole::kKeeper);
  EXPECT_EQ(f->journal_fd, 7);
  EXPECT_TRUE(f->lock_fds.empty());
  EXPECT_EQ(args, (std::vector<std::string>{"--check"}));

  // An upgrade's execve carries the directory locks.
  args = {"--keeper-lock-fd=3", "--config", "c.json", "--keeper-lock-fd=4", "--keeper-journal-fd=7"};
  f = TakeKeeperFlags(&args);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->lock_fds, (std::vector<int>{3, 4}));
  EXPECT_EQ(args, (std::vector<std::string>{"--config", "c.json"}));
}

TEST(KeeperFlags, MalformedOrContradictoryFlagsAreUsageErrors) {
  using Args = std::vector<std::string>;
  for (const Args& bad : {Args{"--worker"}, Args{"--worker", "--keeper-fd="}, Args{"--worker", "--keeper-fd=x"},
                          Args{"--worker", "--keeper-fd=-1"}, Args{"--keeper-fd=3"},
                          Args{"--worker", "--keeper-fd=3", "--no-keeper"},
                          Args{"--worker", "--keeper-fd=3", "--keeper-journal-fd=4"},
                          Args{"--no-keeper", "--keeper-journal-fd=4"}, Args{"--keeper-empty"},
                          Args{"--no-keeper", "--keeper-empty"}, Args{"--keeper-lock-fd=3"},
                          Args{"--keeper-lock-fd=x", "--keeper-journal-fd=4"},
                          Args{"--worker", "--keeper-fd=3", "--keeper-lock-fd=4"}}) {
    Args a = bad;
    auto f = TakeKeeperFlags(&a);
    ASSERT_FALSE(f.ok()) << bad[0] << " " << (bad.size() > 1 ? bad[1] : "");
    EXPECT_EQ(f.error().code(), Code::kInvalidArgument);
    EXPECT_EQ(a, bad);  // untouched on error
  }
}

// ---- restart policy ------------------------------------------------------------

TEST(RestartBackoff, FirstRestartAtOnceThenDoublesToThirtySecondsAndResetsAfterAMinuteUp) {
  RestartBackoff b;
  std::vector<int64_t> got;
  for (int i = 0; i < 10; ++i) got.push_back(b.NextDelay(kSec));
  EXPECT_EQ(got, (std::vector<int64_t>{0, kSec / 2, kSec, 2 * kSec, 4 * kSec, 8 * kSec, 16 * kSec, 30 * kSec,
                                       30 * kSec, 30 * kSec}));
  EXPECT_EQ(b.NextDelay(59 * kSec), 30 * kSec);  // not long enough
  EXPECT_EQ(b.NextDelay(60 * kSec), 0) << "a worker that was up a minute is restarted at once";
  EXPECT_EQ(b.NextDelay(0), kSec / 2);
}

TEST(WorkerExit, DecisionTable) {
  using D = WorkerExitDecision;
  struct Case {
    StopRequest stop;
    bool may_have_tasks;
    int status;
    D::Action action;
    int code;
  };
  const Case cases[] = {
      {StopRequest::kStop, true, Exited(0), D::kExitKeeper, 0},
      {StopRequest::kStop, true, Killed(SIGKILL), D::kExitKeeper, 1},  // had to be killed
      {StopRequest::kStop, false, Exited(0), D::kExitKeeper, 0},
      {StopRequest::kUpgrade, true, Exited(0), D::kExecUpgrade, 0},
      {StopRequest::kUpgrade, true, Killed(SIGKILL), D::kExecUpgrade, 0},
      // The first worker never came up: report like the agent itself would.
      {StopRequest::kNone, false, Exited(2), D::kExitKeeper, 2},
      {StopRequest::kNone, false, Exited(1), D::kExitKeeper, 1},
      {StopRequest::kNone, false, Exited(127), D::kExitKeeper, 127},
      {StopRequest::kNone, false, Exited(0), D::kExitKeeper, 1},
      {StopRequest::kNone, false, Killed(SIGSEGV), D::kExitKeeper, 128 + SIGSEGV},
      // A worker ran before, or there are children or journaled exits: never give up.
      {StopRequest::kNone, true, Exited(2), D::kRestart, 0},
      {StopRequest::kNone, true, Exited(0), D::kRestart, 0},
      {StopRequest::kNone, true, Killed(SIGKILL), D::kRestart, 0},
  };
  for (const Case& c : cases) {
    D d = DecideOnWorkerExit(c.stop, c.may_have_tasks, c.status);
    EXPECT_EQ(d.action, c.action) << static_cast<int>(c.stop) << " " << c.may_have_tasks << " " << c.status;
    if (c.action == D::kExitKeeper) {
      EXPECT_EQ(d.exit_code, c.code) << c.status;
    }
  }
}

// ---- both ends over a socketpair ---------------------------------------------

struct Exit {
  pid_t pid;
  int status;
  int64_t nanos;
  bool operator==(const Exit& o) const { return pid == o.pid && status == o.status && nanos == o.nanos; }
};

// The keeper side (journal + channel) and the worker side (loop + link).
class KeeperLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_ = MakeLoop();
    ASSERT_TRUE(loop_);
    journal_ = std::make_unique<ExitJournal>();
    channel_ = std::make_unique<KeeperChannel>(journal_.get());
  }

  // A fresh socketpair: the keeper end goes to the channel, the worker end
  // to a new link (which says hello at once).
  void Connect(KeeperLink::ExitHandler handler, bool ack_in_handler) {
    link_.reset();
    int sv[2];
    ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv));
    channel_->Attach(UniqueFd(sv[0]));
    if (!handler) {
      handler = [this, ack_in_handler](pid_t pid, int status, int64_t nanos) {
        got_.push_back({pid, status, nanos});
        if (ack_in_handler) link_->Ack(pid);
      };
    }
    auto link = KeeperLink::Attach(loop_.get(), UniqueFd(sv[1]), std::move(handler));
    ASSERT_TRUE(link.ok()) << link.error().message();
    link_ = std::move(*link);
    link_->SetOnJournalReplayed([this] { ++replayed_; });
  }

  // Runs both ends until pred holds (or a bounded number of rounds).
  bool Pump(const std::function<bool()>& pred) {
    for (int i = 0; i < 20000; ++i) {
      if (pred()) return true;
      if (channel_->attached()) {
        channel_->OnReadable();
        if (channel_->want_write()) channel_->OnWritable();
      }
      Status st = loop_->RunOnce(0);
      if (!st.ok()) return false;
    }
    return pred();
  }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<ExitJournal> journal_;
  std::unique_ptr<KeeperChannel> channel_;
  std::unique_ptr<KeeperLink> link_;
  std::vector<Exit> got_;
  int replayed_ = 0;
};

TEST_F(KeeperLinkTest, HelloGetsTheKeeperPidThenTheJournalInOrderThenTheMarker) {
  channel_->OnTaskExit(Rec(101, Exited(1), 11));  // before any worker: journaled only
  channel_->OnTaskExit(Rec(102, Killed(SIGTERM), 12));
  Connect(nullptr, false);
  EXPECT_FALSE(channel_->ready());
  ASSERT_TRUE(Pump([&] { return replayed_ == 1; }));
  EXPECT_TRUE(channel_->ready());
  EXPECT_TRUE(link_->connected());
  EXPECT_TRUE(link_->journal_replayed());
  EXPECT_EQ(link_->keeper_pid(), ::getpid());
  EXPECT_EQ(got_, (std::vector<Exit>{{101, Exited(1), 11}, {102, Killed(SIGTERM), 12}}));
  // Later exits go out at once, after the marker.
  channel_->OnTaskExit(Rec(103, Exited(0), 13));
  ASSERT_TRUE(Pump([&] { return got_.size() == 3; }));
  EXPECT_EQ(got_[2], (Exit{103, Exited(0), 13}));
  EXPECT_EQ(replayed_, 1);
  EXPECT_EQ(journal_->size(), 3u);  // nothing acked yet
}

// A keeper that had no child and no exit when it started the worker says
// so (--keeper-empty): the worker counts the journal as replayed at once,
// without the round trip, and the keeper's marker does not count twice.
// Exits the keeper reaps before it reads the hello still come, through the
// replay.
TEST_F(KeeperLinkTest, AnEmptyKeeperNeedsNoRoundTripBeforeTheJournalCountsAsReplayed) {
  int sv[2];
  ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv));
  channel_->Attach(UniqueFd(sv[0]));
  auto link = KeeperLink::Attach(
      loop_.get(), UniqueFd(sv[1]),
      [this](pid_t pid, int status, int64_t nanos) {
        got_.push_back({pid, status, nanos});
        link_->Ack(pid);
      },
      /*keeper_empty=*/true);
  ASSERT_TRUE(link.ok()) << link.error().message();
  link_ = std::move(*link);
  EXPECT_TRUE(link_->journal_replayed());
  link_->SetOnJournalReplayed([this] { ++replayed_; });
  EXPECT_EQ(replayed_, 1);
  EXPECT_FALSE(link_->connected());
  channel_->OnTaskExit(Rec(201, Exited(4), 21));  // a task of this worker, reaped before the hello is read
  ASSERT_TRUE(Pump([&] { return link_->connected() && got_.size() == 1 && journal_->empty(); }));
  EXPECT_EQ(got_[0], (Exit{201, Exited(4), 21}));
  ASSERT_TRUE(Pump([&] { return !channel_->want_write(); }));
  EXPECT_EQ(replayed_, 1);
}

TEST_F(KeeperLinkTest, AcksRemoveEntriesFromTheJournal) {
  Connect(nullptr, true);
  ASSERT_TRUE(Pump([&] { return replayed_ == 1; }));
  for (int32_t p = 1; p <= 50; ++p) channel_->OnTaskExit(Rec(p));
  ASSERT_TRUE(Pump([&] { return got_.size() == 50 && journal_->empty(); }));
}

TEST_F(KeeperLinkTest, WithoutAHandlerEveryExitIsAcknowledgedAtOnce) {
  channel_->OnTaskExit(Rec(7));
  int sv[2];
  ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv));
  channel_->Attach(UniqueFd(sv[0]));
  auto link = KeeperLink::Attach(loop_.get(), UniqueFd(sv[1]), nullptr);
  ASSERT_TRUE(link.ok());
  link_ = std::move(*link);
  channel_->OnTaskExit(Rec(8));
  ASSERT_TRUE(Pump([&] { return journal_->empty() && link_->journal_replayed(); }));
}

TEST_F(KeeperLinkTest, ANewWorkerGetsEveryUnacknowledgedExitAgain) {
  Connect(nullptr, false);  // this worker never acks (it "crashes")
  ASSERT_TRUE(Pump([&] { return replayed_ == 1; }));
  for (int32_t p = 1; p <= 5; ++p) channel_->OnTaskExit(Rec(p, Exited(p), p));
  ASSERT_TRUE(Pump([&] { return got_.size() == 5; }));
  link_->Ack(2);
  ASSERT_TRUE(Pump([&] { return journal_->size() == 4; }));

  channel_->Detach();  // the worker died
  channel_->OnTaskExit(Rec(6, Exited(6), 6));  // while no worker runs
  got_.clear();
  replayed_ = 0;
  Connect(nullptr, true);
  ASSERT_TRUE(Pump([&] { return replayed_ == 1 && journal_->empty(); }));
  EXPECT_EQ(got_, (std::vector<Exit>{{1, Exited(1), 1}, {3, Exited(3), 3}, {4, Exited(4), 4},
                                     {5, Exited(5), 5}, {6, Exited(6), 6}}));
}

TEST_F(KeeperLinkTest, AFullSocketHoldsEntriesUntilThereIsRoom) {
  const int32_t n = 3000;  // far more than a socket buffer of 32-byte datagrams
  for (int32_t p = 1; p <= n; ++p) channel_->OnTaskExit(Rec(p, 0, p));
  Connect(nullptr, true);
  KeeperChannel::ReadResult r = channel_->OnReadable();  // the hello: reply and send until the socket is full
  EXPECT_TRUE(r.hello);
  EXPECT_EQ(r.replay, static_cast<size_t>(n));
  EXPECT_TRUE(channel_->want_write());
  EXPECT_LT(journal_->sent(), static_cast<size_t>(n));
  ASSERT_TRUE(Pump([&] { return replayed_ == 1 && journal_->empty(); }));
  ASSERT_EQ(got_.size(), static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ASSERT_EQ(got_[static_cast<size_t>(i)].pid, i + 1);
}

TEST_F(KeeperLinkTest, OverflowIsReportedInTheHelloReply) {
  for (size_t p = 0; p < ExitJournal::kCapacity + 5; ++p) channel_->OnTaskExit(Rec(static_cast<int32_t>(p)));
  Connect(nullptr, true);
  ASSERT_TRUE(Pump([&] { return link_->connected(); }));
  EXPECT_EQ(link_->dropped_exits(), 5u);
  ASSERT_TRUE(Pump([&] { return replayed_ == 1 && journal_->empty(); }));
  EXPECT_EQ(got_.size(), ExitJournal::kCapacity);
  EXPECT_EQ(got_.front().pid, 5);
}

TEST_F(KeeperLinkTest, MalformedMessagesAreIgnoredByBothEnds) {
  int sv[2];
  ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv));
  UniqueFd keeper_end(sv[0]);
  auto link = KeeperLink::Attach(loop_.get(), UniqueFd(sv[1]), [&](pid_t pid, int st, int64_t t) {
    got_.push_back({pid, st, t});
  });
  ASSERT_TRUE(link.ok());
  link_ = std::move(*link);
  // To the worker: a short one, a bad magic, an unknown type, then a good exit.
  std::vector<uint8_t> bad_magic = Bytes(Msg(kp::Type::kExit, 1));
  bad_magic[1] ^= 0x55;
  std::vector<uint8_t> unknown = Bytes(Msg(kp::Type::kExit, 2));
  unknown[6] = 42;
  std::vector<uint8_t> good = Bytes(Msg(kp::Type::kExit, 3, Exited(9), 33));
  ASSERT_EQ(5, ::send(keeper_end.get(), "short", 5, 0));
  for (const auto* b : {&bad_magic, &unknown, &good}) {
    ASSERT_EQ(static_cast<ssize_t>(b->size()), ::send(keeper_end.get(), b->data(), b->size(), 0));
  }
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return got_.size() == 1; }));
  EXPECT_EQ(got_[0], (Exit{3, Exited(9), 33}));
  EXPECT_FALSE(link_->lost());

  // To the keeper: garbage, then a hello still works.
  int kv[2];
  ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, kv));
  channel_->Attach(UniqueFd(kv[0]));
  UniqueFd worker_end(kv[1]);
  ASSERT_EQ(3, ::send(worker_end.get(), "xyz", 3, 0));
  ASSERT_EQ(32, ::send(worker_end.get(), bad_magic.data(), 32, 0));
  std::vector<uint8_t> exit_from_worker = Bytes(Msg(kp::Type::kExit, 5));  // wrong direction
  ASSERT_EQ(32, ::send(worker_end.get(), exit_from_worker.data(), 32, 0));
  std::vector<uint8_t> hello = Bytes(Msg(kp::Type::kHello, 77));
  ASSERT_EQ(32, ::send(worker_end.get(), hello.data(), 32, 0));
  KeeperChannel::ReadResult r = channel_->OnReadable();
  EXPECT_TRUE(r.hello);
  EXPECT_EQ(r.worker_pid, 77);
  EXPECT_EQ(r.replay, 0u);
  EXPECT_FALSE(r.eof);
  uint8_t buf[64];
  ssize_t n = ::recv(worker_end.get(), buf, sizeof buf, MSG_DONTWAIT);
  ASSERT_EQ(n, 32);
  kp::Message reply;
  ASSERT_EQ(kp::DecodeError::kNone, kp::Decode(buf, static_cast<size_t>(n), &reply));
  EXPECT_EQ(reply.type, kp::Type::kHelloReply);
  EXPECT_EQ(reply.pid, ::getpid());
}

bool IsCloexec(int fd) { return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }

TEST_F(KeeperLinkTest, HeldFifosAreCloseOnExecAndOutliveTheWorkersConnection) {
  Connect(nullptr, true);
  ASSERT_TRUE(Pump([&] { return link_->connected(); }));
  int p[2];
  ASSERT_EQ(0, ::pipe2(p, O_CLOEXEC));
  UniqueFd r(p[0]), w(p[1]);
  link_->HoldFifos(kp::TaskKey("web", 3), {r.get(), w.get()});
  channel_->OnReadable();
  ASSERT_EQ(channel_->held_count(), 1u);
  const int held_r = channel_->held_fds(0)[0];
  EXPECT_TRUE(IsCloexec(held_r));  // a worker forked later must not inherit it
  EXPECT_TRUE(IsCloexec(channel_->held_fds(0)[1]));
  ASSERT_EQ(2, ::write(w.get(), "hi", 2));
  r.Reset();
  w.Reset();
  channel_->Detach();  // the worker is gone; the task's output is not
  EXPECT_EQ(channel_->held_count(), 1u);
  char buf[4];
  EXPECT_EQ(2, ::read(held_r, buf, sizeof buf));
}

TEST_F(KeeperLinkTest, HeldFifosAreListedForAnUpgradeAndAdoptedByTheNewImage) {
  Connect(nullptr, true);
  ASSERT_TRUE(Pump([&] { return link_->connected(); }));
  int p[2];
  ASSERT_EQ(0, ::pipe2(p, O_CLOEXEC));
  UniqueFd r(p[0]), w(p[1]);
  link_->HoldFifos(77, {r.get(), w.get()});
  channel_->OnReadable();
  ASSERT_EQ(channel_->held_count(), 1u);
  channel_->OnTaskExit(Rec(5, Exited(1), 50));

  // What the old image writes: header, the exit, then the held fds.
  UniqueFd mfd = Memfd();
  ASSERT_TRUE(SaveJournal(*journal_, mfd.get(), channel_.get()).ok());
  ASSERT_EQ(0, ::lseek(mfd.get(), 0, SEEK_SET));
  uint8_t rec[3][kp::kMessageSize];
  ASSERT_EQ(static_cast<ssize_t>(sizeof rec), ::read(mfd.get(), rec, sizeof rec));
  kp::Message header, exit, held;
  ASSERT_EQ(kp::DecodeError::kNone, kp::Decode(rec[0], kp::kMessageSize, &header));
  ASSERT_EQ(kp::DecodeError::kNone, kp::Decode(rec[1], kp::kMessageSize, &exit));
  ASSERT_EQ(kp::DecodeError::kNone, kp::Decode(rec[2], kp::kMessageSize, &held));
  EXPECT_EQ(header.type, kp::Type::kJournalHeader);
  EXPECT_EQ(header.pid, 1);
  EXPECT_EQ(header.status, 1);
  EXPECT_EQ(exit.pid, 5);
  EXPECT_EQ(held.type, kp::Type::kHoldFifos);
  EXPECT_EQ(held.value, 77);
  EXPECT_EQ(held.pid, channel_->held_fds(0)[0]);
  EXPECT_EQ(held.status, channel_->held_fds(0)[1]);
  // They must stay open across the execve, and only then.
  channel_->SetHeldCloseOnExec(false);
  EXPECT_FALSE(IsCloexec(channel_->held_fds(0)[0]));
  channel_->SetHeldCloseOnExec(true);
  EXPECT_TRUE(IsCloexec(channel_->held_fds(0)[0]));

  // What the new image reads. The numbers must be open fds in it: here
  // fresh pipe ends without close-on-exec (as after execve), and a number
  // that is not open, which is skipped.
  int q[2];
  ASSERT_EQ(0, ::pipe(q));
  ASSERT_EQ(1, ::write(q[1], "x", 1));
  UniqueFd transfer = Memfd();
  std::vector<uint8_t> h = Bytes(Msg(kp::Type::kJournalHeader, 0, 2, 0));
  std::vector<uint8_t> a = Bytes(Msg(kp::Type::kHoldFifos, q[0], q[1], 1001));
  std::vector<uint8_t> b = Bytes(Msg(kp::Type::kHoldFifos, 987654, -1, 1002));
  for (const auto* v : {&h, &a, &b}) ASSERT_EQ(32, ::write(transfer.get(), v->data(), v->size()));
  ASSERT_EQ(0, ::lseek(transfer.get(), 0, SEEK_SET));
  auto j2 = std::make_unique<ExitJournal>();
  auto adopted = std::make_unique<KeeperChannel>(j2.get());
  Status st = LoadJournal(transfer.get(), j2.get(), adopted.get());
  ASSERT_TRUE(st.ok()) << st.error().message();
  ASSERT_EQ(adopted->held_count(), 1u);
  EXPECT_EQ(adopted->held_key(0), 1001);
  EXPECT_TRUE(IsCloexec(q[0]));
  EXPECT_TRUE(IsCloexec(q[1]));
  char c;
  EXPECT_EQ(1, ::read(q[0], &c, 1));
  ::close(q[0]);  // in a keeper the channel owns them for good; here the test cleans up
  ::close(q[1]);
}

TEST_F(KeeperLinkTest, TheWorkerStopsItsLoopWhenTheKeeperGoesAway) {
  bool lost_called = false;
  Connect(nullptr, true);
  link_->SetOnLost([&] { lost_called = true; });
  ASSERT_TRUE(Pump([&] { return link_->connected(); }));
  channel_->Detach();  // the keeper's end closes
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return link_->lost(); }));
  EXPECT_TRUE(loop_->stopped());
  EXPECT_TRUE(lost_called);
  EXPECT_FALSE(link_->connected());
  link_->Ack(1);  // harmless after the loss
}

TEST_F(KeeperLinkTest, TheKeeperSeesTheWorkerGoAway) {
  Connect(nullptr, true);
  ASSERT_TRUE(Pump([&] { return channel_->ready(); }));
  link_.reset();  // closes the worker's end
  KeeperChannel::ReadResult r = channel_->OnReadable();
  EXPECT_TRUE(r.eof);
  EXPECT_FALSE(channel_->attached());
  EXPECT_FALSE(channel_->ready());
}

TEST_F(KeeperLinkTest, TheSocketLeavesTheLoopWhenTheKeeperGoesAwayAndWhenTheLinkEnds) {
  for (bool keeper_goes_away : {true, false}) {
    int sv[2];
    ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv));
    UniqueFd keeper_end(sv[0]);
    const int worker_fd = sv[1];
    auto link = KeeperLink::Attach(loop_.get(), UniqueFd(worker_fd), nullptr);
    ASSERT_TRUE(link.ok()) << link.error().message();
    EXPECT_TRUE(loop_->HasFd(worker_fd));
    if (keeper_goes_away) {
      keeper_end.Reset();
      ASSERT_TRUE(RunUntil(loop_.get(), [&] { return (*link)->lost(); }));
    } else {
      link->reset();
    }
    EXPECT_FALSE(loop_->HasFd(worker_fd)) << keeper_goes_away;
    EXPECT_EQ(-1, ::fcntl(worker_fd, F_GETFD)) << keeper_goes_away;  // closed, after leaving the loop
  }
}

TEST_F(KeeperLinkTest, AttachRejectsWhatIsNotTheKeeperSocketAndClosesOnExec) {
  int p[2];
  ASSERT_EQ(0, ::pipe(p));
  UniqueFd w(p[1]);
  auto bad = KeeperLink::Attach(loop_.get(), UniqueFd(p[0]), nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("not the keeper's socket"), std::string::npos);

  int sv[2];
  ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));  // inherited: no CLOEXEC, blocking
  UniqueFd keeper_end(sv[0]);
  const int worker_fd = sv[1];
  auto link = KeeperLink::Attach(loop_.get(), UniqueFd(worker_fd), nullptr);
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(FD_CLOEXEC, ::fcntl(worker_fd, F_GETFD) & FD_CLOEXEC);
  EXPECT_TRUE(::fcntl(worker_fd, F_GETFL) & O_NONBLOCK);
}

}  // namespace
}  // namespace outpost::keeper

namespace outpost::keeper {
namespace {

// A keeper channel and a worker link joined by a socketpair, in one process.
struct LinkedPair {
  ExitJournal journal;
  KeeperChannel channel{&journal};
  std::unique_ptr<Loop> loop = outpost::testing::MakeLoop();
  std::unique_ptr<KeeperLink> link;

  void Join() {
    int sp[2];
    ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
    channel.Attach(UniqueFd(sp[1]));
    auto l = KeeperLink::Attach(loop.get(), UniqueFd(sp[0]), nullptr);
    ASSERT_TRUE(l.ok()) << l.error().message();
    link = std::move(*l);
  }
};

// kHoldFifos carries fds; the keeper keeps them until kReleaseFifos.
TEST(KeeperFifoHold, HoldAndReleaseOverTheSocket) {
  LinkedPair pair;
  ASSERT_NO_FATAL_FAILURE(pair.Join());
  KeeperChannel& channel = pair.channel;
  std::unique_ptr<KeeperLink>* link = &pair.link;
  int p[2];
  ASSERT_EQ(0, ::pipe2(p, O_CLOEXEC | O_NONBLOCK));
  UniqueFd r(p[0]), w(p[1]);
  int64_t key = keeper::proto::TaskKey("web", 3);
  (*link)->HoldFifos(key, {w.get()});
  channel.OnReadable();
  EXPECT_EQ(channel.held_count(), 1u);
  // Our copy goes; the keeper's keeps the pipe's write side open: no EOF.
  w.Reset();
  char c;
  EXPECT_EQ(-1, ::read(r.get(), &c, 1));
  EXPECT_EQ(EAGAIN, errno);
  (*link)->HoldFifos(key, {r.get()});  // same key: replaces
  channel.OnReadable();
  EXPECT_EQ(channel.held_count(), 1u);
  EXPECT_EQ(0, ::read(r.get(), &c, 1)) << "the old hold (the write side) was closed: EOF";
  (*link)->ReleaseFifos(key);
  (*link)->ReleaseFifos(keeper::proto::TaskKey("other", 5));  // unknown key: nothing happens
  channel.OnReadable();
  EXPECT_EQ(channel.held_count(), 0u);
}

}  // namespace
}  // namespace outpost::keeper

namespace outpost::keeper {
namespace {

TEST(KeeperProto, BeatCarriesItsTimeout) {
  std::vector<uint8_t> b = Bytes(Msg(kp::Type::kBeat, 77, 0, 30LL * kNanosPerSecond));
  uint16_t type;
  std::memcpy(&type, &b[6], 2);
  EXPECT_EQ(type, 9);
  kp::Message out;
  ASSERT_EQ(kp::DecodeError::kNone, kp::Decode(b.data(), b.size(), &out));
  EXPECT_EQ(out.type, kp::Type::kBeat);
  EXPECT_EQ(out.pid, 77);
  EXPECT_EQ(out.value, 30LL * kNanosPerSecond);
}

// Beats start only when asked (the worker is up), carry the timeout, follow
// a changed timeout at once, and then come from the loop's timer.
TEST(KeeperHeartbeat, LinkBeatsOnlyOnceStartedAndFromItsLoop) {
  LinkedPair pair;
  ASSERT_NO_FATAL_FAILURE(pair.Join());
  KeeperChannel& channel = pair.channel;
  std::unique_ptr<KeeperLink>* link = &pair.link;
  (*link)->SetHeartbeat(3 * kNanosPerSecond);
  KeeperChannel::ReadResult r = channel.OnReadable();
  EXPECT_TRUE(r.hello);
  EXPECT_FALSE(r.beat) << "no beat before StartHeartbeat";

  (*link)->StartHeartbeat();
  r = channel.OnReadable();
  EXPECT_TRUE(r.beat);
  EXPECT_EQ(r.beat_timeout_nanos, 3 * kNanosPerSecond);

  (*link)->SetHeartbeat(30 * kNanosPerMilli);  // a reload: told at once
  r = channel.OnReadable();
  EXPECT_TRUE(r.beat);
  EXPECT_EQ(r.beat_timeout_nanos, 30 * kNanosPerMilli);
  int beats = 0;
  EXPECT_TRUE(outpost::testing::RunUntil(pair.loop.get(), [&] {
    if (channel.OnReadable().beat) ++beats;
    return beats >= 3;
  })) << "the loop's timer sends a beat every timeout/3";

  (*link)->SetHeartbeat(0);  // off: one last beat that says so
  r = channel.OnReadable();
  EXPECT_TRUE(r.beat);
  EXPECT_EQ(r.beat_timeout_nanos, 0);
  EXPECT_EQ(pair.loop->PendingTimers(), 0u);
}

}  // namespace
}  // namespace outpost::keeper
