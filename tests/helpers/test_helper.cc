// outpost-test-helper: a small static program the integration, VM and
// benchmark suites run as a task. One subcommand per behaviour:
//
//   exit N                 exit with status N
//   sleep SECONDS          sleep, then exit 0 (fractions allowed)
//   ignore-term SECONDS    ignore SIGTERM and SIGINT, then sleep
//   trap SIG N             on signal SIG (name or number) exit N; wait forever
//   orphan SECONDS         fork a background child that sleeps SECONDS in its
//                          own session, print its pid, exit 0
//   lines N [PREFIX]       print N numbered lines "PREFIX<i>" to stdout fast
//   huge-line BYTES        print one line of BYTES 'x' characters
//   stderr TEXT            print TEXT to stderr
//   list-fds               print the open fd numbers, one per line
//   timestamp FILE         write CLOCK_MONOTONIC nanoseconds to FILE, exit 0
//   stamp-exec FILE PROG [ARG...]  write CLOCK_MONOTONIC nanoseconds to
//                          FILE, then execv PROG with ARGs (argv[0] = PROG;
//                          PROG is a path, no PATH lookup): a measurement
//                          that starts at PROG's exec (exit 127 if it fails)
//   clocks                 print "MONOTONIC_NS REALTIME_NS", read one right
//                          after the other (puts wall-clock log times on
//                          the CLOCK_MONOTONIC axis of the stamps)
//   env                    print the environment
//   pwd / id               print working dir / "uid gid groups"
//   memhog MIB             allocate and touch MIB MiB, one MiB at a time
//                          (printing the count), then sleep forever
//   burn SECONDS           spin on the CPU for SECONDS of wall time
//   forkbomb               fork children (each sleeps) until fork fails,
//                          print "fork failed after N", then sleep forever
//   affinity               print the CPUs this process may run on ("0-1")
//   touch FILE             create FILE (0644) and print its owner "uid gid"
//   cat                    copy stdin to stdout until EOF, exit 0
//   args ARG...            print each argument on a line of its own
//   hook FILE [OPTIONS]    an OCI hook that records what it got (hook_record.cc)
//   serve tcp|udp PORT [REPLY]   answer on 0.0.0.0:PORT forever (net_serve.cc)
//   connect tcp|udp HOST PORT [TIMEOUT_MS]  print a server's answer (net_serve.cc)
//   service STEP...        a supervised service of the peer benchmark, steps
//                          done in order:
//                            stamp FILE  write "<ns> <pid>" (CLOCK_MONOTONIC
//                                        at the first instruction of main)
//                                        to FILE.tmp, then rename it to FILE
//                            count FILE  append "<ns>\n" to FILE (one line
//                                        per start, for crash loops)
//                            cpu FILE    append "<ns> <cpu ns>\n": the CPU
//                                        this process used so far, the time
//                                        before its exec included
//                            lines N     print N numbered lines "<i>" to stdout
//                            sleep S     sleep S seconds
//                            exit N      exit with status N at once
//                          (exit 0 after the last step)
//   (run as `run`, with no argument or one: s6-supervise passes the service's
//                          name) read the arguments, one per line, from
//                          ./run.args: a service directory's `run` can be a
//                          symlink to this helper (s6, runit and outpost then
//                          exec the very same program, without a shell)
//   floor                  the benchmarks' fork+exec floor, measured from this
//                          small process (a big one forks slower): reads
//                          requests on stdin, one per line, answers each with
//                          one line (nanoseconds, or "error TEXT"):
//                            stamp FILE  fork + exec of `<self> timestamp
//                                        FILE`: before the fork until the
//                                        child wrote its clock to FILE
//                            exec K      K x fork + exec of `<self> sleep
//                                        1000`: before the first fork until
//                                        all K have exec'd (CLOEXEC pipes at
//                                        EOF); they are then killed, reaped
//                            run K PROG [ARG...]  K x what an OCI hook run
//                                        costs at least: fork + execve of
//                                        PROG (a path; argv ARG..., or
//                                        [PROG] without ARGs; an empty
//                                        environment), stdin a pipe that
//                                        gets a 200-byte state JSON and is
//                                        closed, stdout and stderr pipes
//                                        read to EOF, waitpid; each run from
//                                        before its fork until waitpid
//                                        returned. Answers the MEDIAN of the
//                                        K runs (K 1..1000); an error if a
//                                        run does not exit 0
//
// Uses only libc (no iostream) so it starts fast and stays small.
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

int HookRecord(int argc, char** argv);  // hook_record.cc
int NetServe(int argc, char** argv);    // net_serve.cc
int NetConnect(int argc, char** argv);  // net_serve.cc

namespace {

int g_trap_exit = 0;

void SleepSeconds(double s) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(s);
  ts.tv_nsec = static_cast<long>((s - static_cast<double>(ts.tv_sec)) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int SignalByName(const char* s) {
  static const struct { const char* name; int sig; } kSigs[] = {
      {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
      {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"ALRM", SIGALRM}, {"CONT", SIGCONT}, {"WINCH", SIGWINCH}};
  if (strncmp(s, "SIG", 3) == 0) s += 3;
  for (const auto& k : kSigs) {
    if (strcmp(s, k.name) == 0) return k.sig;
  }
  return atoi(s);
}

void OnTrap(int) { _exit(g_trap_exit); }

long long NowNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// One `stamp FILE` request of `floor`: nanoseconds, or -1 (errno set).
long long FloorStamp(const char* self, const char* file) {
  const char* argv[] = {self, "timestamp", file, nullptr};
  long long t0 = NowNanos();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execve(self, const_cast<char* const*>(argv), environ);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    errno = ECHILD;
    return -1;
  }
  FILE* f = fopen(file, "r");
  long long ts = -1;
  if (!f) return -1;
  if (fscanf(f, "%lld", &ts) != 1) ts = -1;
  fclose(f);
  return ts < 0 ? -1 : ts - t0;
}

// One `exec K` request of `floor`.
long long FloorExec(const char* self, int k) {
  const char* argv[] = {self, "sleep", "1000", nullptr};
  pid_t pids[64];
  int fds[64];
  if (k < 1 || k > 64) {
    errno = EINVAL;
    return -1;
  }
  long long t0 = NowNanos();
  int started = 0;
  for (; started < k; started++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) break;
    pid_t pid = fork();
    if (pid < 0) {
      close(p[0]);
      close(p[1]);
      break;
    }
    if (pid == 0) {
      execve(self, const_cast<char* const*>(argv), environ);
      int e = errno;
      (void)!write(p[1], &e, sizeof e);
      _exit(127);
    }
    close(p[1]);
    pids[started] = pid;
    fds[started] = p[0];
  }
  bool failed = started < k;
  for (int i = 0; i < started; i++) {
    int e = 0;
    ssize_t n;
    while ((n = read(fds[i], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    if (n != 0) failed = true;  // the child wrote execve's errno
    close(fds[i]);
  }
  long long took = NowNanos() - t0;
  for (int i = 0; i < started; i++) kill(pids[i], SIGKILL);
  for (int i = 0; i < started; i++) {
    while (waitpid(pids[i], nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (failed) {
    errno = ECHILD;
    return -1;
  }
  return took;
}

// One `run K PROG [ARG...]` request of `floor` (line: what follows "run "):
// the median nanoseconds of K runs, or -1 (errno set).
long long FloorRun(char* line) {
  char* words[64];
  int nw = 0;
  for (char* w = strtok(line, " "); w && nw < 63; w = strtok(nullptr, " ")) words[nw++] = w;
  words[nw] = nullptr;
  int k = nw >= 2 ? atoi(words[0]) : 0;
  if (k < 1 || k > 1000) {
    errno = EINVAL;
    return -1;
  }
  const char* prog = words[1];
  const char* only_prog[] = {prog, nullptr};
  char* const* argv = nw > 2 ? &words[2] : const_cast<char* const*>(only_prog);
  char* const empty_env[] = {nullptr};
  // The shape of the agent's state on stdin (docs/hooks.md), 200 bytes.
  static const char kState[] =
      "{\"ociVersion\":\"1.3.0\",\"id\":\"hookbench-0001.t\",\"status\":\"creating\","
      "\"bundle\":\"/run/outpost/bundles/hookbench-0001.t\",\"annotations\":{\"owner\":\"ops\","
      "\"com.example.bench\":\"floor-probe-run-of-one-hook-xxxx\"}}";
  static long long took[1000];
  // A hook that exits without reading its stdin must not kill us with SIGPIPE.
  struct sigaction ign, old_pipe;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old_pipe);
  long long failed = 0;
  for (int i = 0; i < k && !failed; i++) {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) {
      failed = -1;
      break;
    }
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      failed = -1;  // fds may leak: the probe ends soon after an error
      break;
    }
    long long t0 = NowNanos();
    pid_t pid = fork();
    if (pid < 0) {
      failed = -1;
      break;
    }
    if (pid == 0) {
      signal(SIGPIPE, SIG_DFL);
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      execve(prog, argv, empty_env);
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    // 200 bytes < PIPE_BUF: never blocks; EPIPE (SIGPIPE ignored) if it does not read.
    (void)!write(in[1], kState, sizeof kState - 1);
    close(in[1]);
    struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
      if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
      for (struct pollfd& f : fds) {
        if (f.fd < 0 || !f.revents) continue;
        char buf[4096];
        ssize_t n = read(f.fd, buf, sizeof buf);
        if (n > 0 || (n < 0 && errno == EINTR)) continue;
        close(f.fd);
        f.fd = -1;
        open_fds--;
      }
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    took[i] = NowNanos() - t0;
    for (struct pollfd& f : fds) {
      if (f.fd >= 0) close(f.fd);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      errno = ECHILD;
      failed = -1;
    }
  }
  int saved = errno;
  sigaction(SIGPIPE, &old_pipe, nullptr);
  errno = saved;
  if (failed) return -1;
  // Insertion sort: K is small.
  for (int i = 1; i < k; i++) {
    long long v = took[i];
    int j = i;
    for (; j > 0 && took[j - 1] > v; j--) took[j] = took[j - 1];
    took[j] = v;
  }
  return took[k / 2];
}

int Floor() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    printf("error readlink /proc/self/exe: %s\n", strerror(errno));
    return 1;
  }
  self[n] = '\0';
  char line[4200];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = '\0';
    long long ns = -1;
    if (!strncmp(line, "stamp ", 6)) {
      ns = FloorStamp(self, line + 6);
    } else if (!strncmp(line, "exec ", 5)) {
      ns = FloorExec(self, atoi(line + 5));
    } else if (!strncmp(line, "run ", 4)) {
      char words[sizeof line];
      strcpy(words, line + 4);  // strtok writes into it; line is kept for the error message
      ns = FloorRun(words);
    } else {
      errno = EINVAL;
    }
    if (ns < 0) {
      printf("error %s: %s\n", line, strerror(errno));
    } else {
      printf("%lld\n", ns);
    }
    fflush(stdout);
  }
  return 0;
}

// `service STEP...`, started at main_ns.
int Service(int argc, char** argv, long long main_ns) {
  for (int i = 2; i + 1 < argc; i += 2) {
    const char* step = argv[i];
    const char* arg = argv[i + 1];
    if (!strcmp(step, "stamp")) {
      char tmp[4200];
      snprintf(tmp, sizeof tmp, "%s.tmp", arg);
      int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return 1;
      dprintf(fd, "%lld %d\n", main_ns, static_cast<int>(getpid()));
      close(fd);
      if (rename(tmp, arg) != 0) return 1;
    } else if (!strcmp(step, "count")) {
      int fd = open(arg, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) return 1;
      dprintf(fd, "%lld\n", main_ns);
      close(fd);
    } else if (!strcmp(step, "cpu")) {
      // "MAIN_NS CPU_NS": this process's CPU so far, the time its supervisor's
      // child spent before exec included (peer_bench's crash loop).
      struct timespec ts;
      if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 1;
      int fd = open(arg, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) return 1;
      dprintf(fd, "%lld %lld\n", main_ns, static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
      close(fd);
    } else if (!strcmp(step, "lines")) {
      long n = atol(arg);
      static char buf[1 << 16];
      setvbuf(stdout, buf, _IOFBF, sizeof buf);
      for (long k = 1; k <= n; ++k) printf("%ld\n", k);
      if (fflush(stdout) != 0) return 1;
    } else if (!strcmp(step, "sleep")) {
      SleepSeconds(atof(arg));
    } else if (!strcmp(step, "exit")) {
      return atoi(arg);
    } else {
      fprintf(stderr, "service: unknown step %s\n", step);
      return 2;
    }
  }
  return 0;
}

// Run as `run` without arguments: argv from ./run.args, one per line.
int RunArgs(const char* argv0, char** out, int max) {
  const char* base = strrchr(argv0, '/');
  base = base ? base + 1 : argv0;
  if (strcmp(base, "run") != 0) return 0;
  static char text[8192];
  int fd = open("run.args", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  int argc = 0;
  out[argc++] = const_cast<char*>(argv0);
  for (char* p = text; *p && argc < max - 1;) {
    char* nl = strchr(p, '\n');
    if (nl) *nl = '\0';
    out[argc++] = p;
    if (!nl) break;
    p = nl + 1;
  }
  out[argc] = nullptr;
  return argc;
}

int Usage() {
  fputs("usage: outpost-test-helper exit N | sleep S | ignore-term S | trap SIG N | orphan S | lines N [PREFIX]"
        " | huge-line BYTES | stderr TEXT | list-fds | timestamp FILE | stamp-exec FILE PROG [ARG...]"
        " | clocks | env | pwd | id | service STEP... | serve tcp|udp PORT [REPLY]"
        " | connect tcp|udp HOST PORT [TIMEOUT_MS]\n",
        stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const long long main_ns = NowNanos();  // first: `service stamp` reports it
  char* run_argv[64];
  if (argc <= 2) {  // s6-supervise passes the service's name as an argument
    int n = RunArgs(argv[0], run_argv, 64);
    if (n > 0) {
      argc = n;
      argv = run_argv;
    }
  }
  if (argc < 2) return Usage();
  const char* cmd = argv[1];
  if (!strcmp(cmd, "exit") && argc == 3) return atoi(argv[2]);
  if (!strcmp(cmd, "sleep") && argc == 3) {
    SleepSeconds(atof(argv[2]));
    return 0;
  }
  if (!strcmp(cmd, "ignore-term") && argc == 3) {
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    SleepSeconds(atof(argv[2]));
    return 0;
  }
  if (!strcmp(cmd, "trap") && argc == 4) {
    g_trap_exit = atoi(argv[3]);
    signal(SignalByName(argv[2]), OnTrap);
    for (;;) pause();
  }
  if (!strcmp(cmd, "orphan") && argc == 3) {
    pid_t pid = fork();
    if (pid == 0) {
      setsid();
      SleepSeconds(atof(argv[2]));
      _exit(0);
    }
    printf("%d\n", pid);
    return 0;
  }
  if (!strcmp(cmd, "lines") && (argc == 3 || argc == 4)) {
    long n = atol(argv[2]);
    const char* prefix = argc == 4 ? argv[3] : "";
    static char buf[1 << 16];
    setvbuf(stdout, buf, _IOFBF, sizeof buf);
    for (long i = 1; i <= n; ++i) printf("%s%ld\n", prefix, i);
    return fflush(stdout) == 0 ? 0 : 1;
  }
  if (!strcmp(cmd, "huge-line") && argc == 3) {
    long n = atol(argv[2]);
    for (long i = 0; i < n; ++i) putchar('x');
    putchar('\n');
    return fflush(stdout) == 0 ? 0 : 1;
  }
  if (!strcmp(cmd, "stderr") && argc == 3) {
    fprintf(stderr, "%s\n", argv[2]);
    return 0;
  }
  if (!strcmp(cmd, "list-fds")) {
    DIR* d = opendir("/proc/self/fd");
    if (!d) return 1;
    int self = dirfd(d);
    while (struct dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
      printf("%s\n", e->d_name);
    }
    closedir(d);
    return 0;
  }
  if (!strcmp(cmd, "timestamp") && argc == 3) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return 1;
    dprintf(fd, "%lld\n", static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
    close(fd);
    return 0;
  }
  if (!strcmp(cmd, "stamp-exec") && argc >= 4) {
    // The stamp is written (and the file closed) before the exec, so the
    // interval it starts holds PROG's execve and nothing of ours after it.
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      fprintf(stderr, "stamp-exec: open %s: %s\n", argv[2], strerror(errno));
      return 127;
    }
    dprintf(fd, "%lld\n", static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
    close(fd);
    execv(argv[3], argv + 3);
    fprintf(stderr, "stamp-exec: exec %s: %s\n", argv[3], strerror(errno));
    return 127;
  }
  if (!strcmp(cmd, "clocks")) {
    struct timespec mono, real;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    printf("%lld %lld\n", static_cast<long long>(mono.tv_sec) * 1000000000LL + mono.tv_nsec,
           static_cast<long long>(real.tv_sec) * 1000000000LL + real.tv_nsec);
    return 0;
  }
  if (!strcmp(cmd, "env")) {
    for (char** e = environ; *e; ++e) printf("%s\n", *e);
    return 0;
  }
  if (!strcmp(cmd, "pwd")) {
    char buf[4096];
    if (!getcwd(buf, sizeof buf)) return 1;
    printf("%s\n", buf);
    return 0;
  }
  if (!strcmp(cmd, "id")) {
    gid_t groups[64];
    int n = getgroups(64, groups);
    printf("%u %u", getuid(), getgid());
    for (int i = 0; i < n; ++i) printf(" %u", groups[i]);
    printf("\n");
    return 0;
  }
  if (!strcmp(cmd, "memhog") && argc == 3) {
    long mib = atol(argv[2]);
    for (long i = 0; i < mib; ++i) {
      char* p = static_cast<char*>(malloc(1 << 20));
      if (!p) return 3;
      for (int k = 0; k < (1 << 20); k += 4096) p[k] = static_cast<char>(k + 1);
      printf("%ld\n", i + 1);
      fflush(stdout);
    }
    for (;;) pause();
  }
  if (!strcmp(cmd, "burn") && argc == 3) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double limit = atof(argv[2]);
    volatile unsigned long x = 0;
    do {
      for (int i = 0; i < 100000; ++i) x += static_cast<unsigned long>(i);
      clock_gettime(CLOCK_MONOTONIC, &t);
    } while (static_cast<double>(t.tv_sec - t0.tv_sec) + static_cast<double>(t.tv_nsec - t0.tv_nsec) / 1e9 < limit);
    (void)x;  // read once: clang counts += on a volatile as a set, not a use
    return 0;
  }
  if (!strcmp(cmd, "forkbomb")) {
    long n = 0;
    for (;;) {
      pid_t pid = fork();
      if (pid == 0) {
        for (;;) pause();
      }
      if (pid < 0) break;
      ++n;
    }
    printf("fork failed after %ld: %s\n", n, strerror(errno));
    fflush(stdout);
    for (;;) pause();
  }
  if (!strcmp(cmd, "affinity")) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int first = -1;
    bool any = false;
    for (int c = 0; c <= CPU_SETSIZE; ++c) {
      bool in = c < CPU_SETSIZE && CPU_ISSET(c, &set);
      if (in && first < 0) first = c;
      if (!in && first >= 0) {
        printf(first == c - 1 ? "%s%d" : "%s%d-%d", any ? "," : "", first, c - 1);
        any = true;
        first = -1;
      }
    }
    printf("\n");
    return 0;
  }
  if (!strcmp(cmd, "cat")) {
    char buf[8192];
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0 && write(1, buf, (size_t)n) != n) return 1;
    }
    return n == 0 ? 0 : 1;
  }
  if (!strcmp(cmd, "floor") && argc == 2) return Floor();
  if (!strcmp(cmd, "hook")) return HookRecord(argc, argv);
  if (!strcmp(cmd, "serve")) return NetServe(argc, argv);
  if (!strcmp(cmd, "connect")) return NetConnect(argc, argv);
  if (!strcmp(cmd, "service")) return Service(argc, argv, main_ns);
  if (!strcmp(cmd, "args")) {
    for (int i = 2; i < argc; i++) printf("%s\n", argv[i]);
    return 0;
  }
  if (!strcmp(cmd, "touch") && argc == 3) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      printf("open %s: %s\n", argv[2], strerror(errno));
      return 1;
    }
    struct stat st;
    fstat(fd, &st);
    close(fd);
    printf("%u %u\n", st.st_uid, st.st_gid);
    return 0;
  }
  return Usage();
}
