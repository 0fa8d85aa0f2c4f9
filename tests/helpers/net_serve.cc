// outpost-test-helper `serve` and `connect`: a tiny TCP/UDP server and
// client for the networking tests (a task that answers on a port, a check
// that reaches it from the host or from another namespace).
//
//   serve tcp|udp PORT [REPLY]
//       binds 0.0.0.0:PORT (SO_REUSEADDR), prints "listening tcp|udp PORT"
//       once bound, then forever: TCP writes REPLY to each connection and
//       closes it; UDP sends REPLY back to the sender of each datagram.
//       REPLY defaults to "hello from <hostname> <$OUTPOST_IP or ->\n".
//   connect tcp|udp HOST PORT [TIMEOUT_MS]
//       HOST is an IPv4 address (or "localhost"; no resolver: the helper is
//       static). TCP prints what the server sends until EOF; UDP sends
//       "ping" and prints the one reply. Exit 0, or 1 with a message on
//       stderr on failure or when TIMEOUT_MS (default 5000) passes.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace {

int Fail(const char* what) {
  fprintf(stderr, "%s: %s\n", what, strerror(errno));
  return 1;
}

bool ParseProto(const char* s, int* type) {
  if (!strcmp(s, "tcp")) *type = SOCK_STREAM;
  else if (!strcmp(s, "udp")) *type = SOCK_DGRAM;
  else return false;
  return true;
}

bool ParsePort(const char* s, uint16_t* port) {
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < 1 || v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the peer went away: nothing more to tell it
    off += static_cast<size_t>(n);
  }
}

long long NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

// Waits for events on fd until deadline_ms; false on timeout (errno
// ETIMEDOUT) or error.
bool WaitFor(int fd, short events, long long deadline_ms) {
  for (;;) {
    long long left = deadline_ms - NowMs();
    if (left <= 0) {
      errno = ETIMEDOUT;
      return false;
    }
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

}  // namespace

int NetServe(int argc, char** argv) {
  int type = 0;
  uint16_t port = 0;
  if (argc < 4 || argc > 5 || !ParseProto(argv[2], &type) || !ParsePort(argv[3], &port)) {
    fputs("usage: outpost-test-helper serve tcp|udp PORT [REPLY]\n", stderr);
    return 2;
  }
  std::string reply;
  if (argc == 5) {
    reply = argv[4];
  } else {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const char* ip = getenv("OUTPOST_IP");
    reply = std::string("hello from ") + host + " " + (ip && *ip ? ip : "-") + "\n";
  }
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up early must not kill us
  int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (s < 0) return Fail("socket");
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return Fail("bind");
  if (type == SOCK_STREAM && listen(s, 64) != 0) return Fail("listen");
  printf("listening %s %u\n", argv[2], port);
  fflush(stdout);
  for (;;) {
    if (type == SOCK_STREAM) {
      int c = accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return Fail("accept");
      }
      WriteAll(c, reply);
      close(c);
    } else {
      char buf[2048];
      struct sockaddr_in from = {};
      socklen_t len = sizeof from;
      ssize_t n = recvfrom(s, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Fail("recvfrom");
      }
      sendto(s, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }
}

int NetConnect(int argc, char** argv) {
  int type = 0;
  uint16_t port = 0;
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  const char* host = argc > 3 && !strcmp(argv[3], "localhost") ? "127.0.0.1" : argc > 3 ? argv[3] : "";
  long timeout_ms = argc == 6 ? strtol(argv[5], nullptr, 10) : 5000;
  if (argc < 5 || argc > 6 || !ParseProto(argv[2], &type) || !ParsePort(argv[4], &port) ||
      inet_pton(AF_INET, host, &addr.sin_addr) != 1 || timeout_ms <= 0) {
    fputs("usage: outpost-test-helper connect tcp|udp IPV4 PORT [TIMEOUT_MS]\n", stderr);
    return 2;
  }
  addr.sin_port = htons(port);
  const long long deadline = NowMs() + timeout_ms;
  int s = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return Fail("socket");
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return Fail("connect");
    if (!WaitFor(s, POLLOUT, deadline)) return Fail("connect (no answer)");
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      errno = err;
      return Fail("connect");
    }
  }
  if (type == SOCK_DGRAM && send(s, "ping", 4, 0) != 4) return Fail("send");
  std::string got;
  for (;;) {
    if (!WaitFor(s, POLLIN, deadline)) {
      return Fail(type == SOCK_DGRAM ? "wait for the reply" : "read (no EOF from the server)");
    }
    char buf[4096];
    ssize_t n = recv(s, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Fail(type == SOCK_DGRAM ? "recv" : "read");  // UDP: ECONNREFUSED when nobody listens
    got.append(buf, static_cast<size_t>(n));
    if (n == 0 || type == SOCK_DGRAM) break;
  }
  fwrite(got.data(), 1, got.size(), stdout);
  fflush(stdout);
  close(s);
  return 0;
}
