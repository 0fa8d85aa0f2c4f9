#include "agent/dir_claims.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sys.h"
#include "test_util.h"

namespace outpost::agent {
namespace {

Config ConfigIn(const std::string& dir) {
  Config c;
  c.state_dir = dir + "/state";
  c.runtime_dir = dir + "/run";
  c.api_socket = dir + "/run/outpost.sock";
  c.jobs_dir = dir + "/jobs.d";
  return c;
}

// A child process that holds the claims of c until killed; its pid.
pid_t ChildHolding(const Config& c) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    auto claims = DirClaims::Take(c, 0);
    char ok = claims.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    _exit(0);
  }
  ::close(ready[1]);
  char ok = 0;
  ssize_t n = ::read(ready[0], &ok, 1);
  ::close(ready[0]);
  if (n != 1 || ok != 'y') {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

void Reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

TEST(DirClaims, ASecondClaimerIsRefusedNamingTheDirectoryTheHolderAndItsSocket) {
  std::string dir = testing::MakeTempDir("/tmp", "claims");
  Config c = ConfigIn(dir);
  pid_t holder = ChildHolding(c);
  ASSERT_GT(holder, 0);
  // Each directory on its own is enough to be refused.
  for (int which = 0; which < 3; ++which) {
    Config other = ConfigIn(dir + "/other" + std::to_string(which));
    ASSERT_TRUE(sys::MkdirAll(dir + "/other" + std::to_string(which), 0755).ok());
    const char* key = which == 0 ? "state_dir" : which == 1 ? "runtime_dir" : "jobs_dir";
    std::string* field = which == 0 ? &other.state_dir : which == 1 ? &other.runtime_dir : &other.jobs_dir;
    *field = which == 0 ? c.state_dir : which == 1 ? c.runtime_dir : c.jobs_dir;
    auto refused = DirClaims::Take(other, 0);
    ASSERT_FALSE(refused.ok()) << key;
    EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition);
    const std::string want = std::string(key) + " '" + *field + "' is in use by another agent (pid " +
                             std::to_string(holder) + ", serving " + c.api_socket + ")";
    EXPECT_NE(refused.error().message().find(want), std::string::npos) << refused.error().message();
  }
  // The holder's pid counts as ours (a worker and its keeper).
  EXPECT_TRUE(DirClaims::Take(c, holder).ok());
  Reap(holder);
  // Released with the process: the directories can be claimed again.
  auto again = DirClaims::Take(c, 0);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->fds().size(), 3u);
  auto text = sys::ReadFile(c.state_dir + "/agent.lock");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "pid " + std::to_string(::getpid()) + "\nsocket " + c.api_socket + "\n");
  // This process's own holds count as its own.
  EXPECT_TRUE(DirClaims::Take(c, 0).ok());
  (void)sys::RemoveTree(dir);
}

TEST(DirClaims, FlockHolderReadsProcLocks) {
  std::string dir = testing::MakeTempDir("/tmp", "claims");
  auto fd = sys::Open(dir + "/f", O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(FlockHolder(fd->get()), 0);
  ASSERT_EQ(::flock(fd->get(), LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(FlockHolder(fd->get()), ::getpid());
  ::flock(fd->get(), LOCK_UN);
  EXPECT_EQ(FlockHolder(fd->get()), 0);
  (void)sys::RemoveTree(dir);
}

TEST(DirClaims, FdsSurviveAnExecOnlyWhenAsked) {
  std::string dir = testing::MakeTempDir("/tmp", "claims");
  auto claims = DirClaims::Take(ConfigIn(dir), 0);
  ASSERT_TRUE(claims.ok());
  for (int fd : claims->fds()) EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  claims->SetCloseOnExec(false);
  for (int fd : claims->fds()) EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  // Adopted after the exec: close-on-exec again.
  std::vector<int> carried;
  for (int fd : claims->fds()) carried.push_back(::dup(fd));
  DirClaims adopted = DirClaims::Adopt(carried);
  for (int fd : adopted.fds()) EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  (void)sys::RemoveTree(dir);
}

}  // namespace
}  // namespace outpost::agent
