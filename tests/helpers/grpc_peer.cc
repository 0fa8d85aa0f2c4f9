// outpost's gRPC transport (wire::GrpcServer, wire::GrpcClient) as either
// side of the Interop service (proto/grpc_interop.proto), for the gRPC
// interop tests (tests/integration/test_grpc.sh), whose other side is
// Python's grpcio (tests/integration/grpc/interop_{server,client}.py).
//
//   grpc_peer serve SOCKET [--drain-after N]
//       Serves Interop as interop_server.py does and prints the same lines
//       (flushed): "ready"; "call METHOD seq=N" per call; "cancelled METHOD"
//       when a call ends not ok while its handler still holds it (client
//       cancel, deadline, lost connection); "goaway" when it drains (after
//       the Nth call, or on SIGUSR1): the socket is unlinked and Drain()
//       sends GOAWAY; "drained" once no connection is left, then exits 0.
//       delay_ms is served with loop timers, never a sleep.
//   grpc_peer call SOCKET CASE...
//       The cases of interop_client.py (its doc says what each expects;
//       "all" is every case but goaway) on one GrpcClient; one line per
//       case, "ok CASE: what it saw" or "not ok CASE - why"; exits 0 only
//       when every case passed.
//
// Metadata goes as the wire carries it: a -bin header's value is its
// unpadded base64 text, and the server echoes that text.
#include "grpc_peer.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/sys.h"
#include "grpc_interop.pb.h"
#include "loop/loop.h"
#include "wire/grpc_server.h"

namespace outpost::grpc_peer {

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// ---- the Msg message (every string and bytes field a nanopb callback) ------

namespace {

bool EncodeStr(pb_ostream_t* stream, const pb_field_t* field, void* const* arg) {
  const auto* s = static_cast<const std::string*>(*arg);
  if (s->empty()) return true;
  return pb_encode_tag_for_field(stream, field) &&
         pb_encode_string(stream, reinterpret_cast<const pb_byte_t*>(s->data()), s->size());
}

bool DecodeStr(pb_istream_t* stream, const pb_field_t*, void** arg) {
  auto* s = static_cast<std::string*>(*arg);
  s->resize(stream->bytes_left);  // a size_t: no 16-bit limit
  return pb_read(stream, reinterpret_cast<pb_byte_t*>(&(*s)[0]), s->size());
}

pb_callback_t With(bool (*fn)(pb_ostream_t*, const pb_field_t*, void* const*), const std::string* s) {
  pb_callback_t cb;
  cb.funcs.encode = fn;
  cb.arg = const_cast<std::string*>(s);
  return cb;
}
pb_callback_t With(bool (*fn)(pb_istream_t*, const pb_field_t*, void**), std::string* s) {
  pb_callback_t cb;
  cb.funcs.decode = fn;
  cb.arg = s;
  return cb;
}

}  // namespace

std::string Encode(const Msg& m) {
  outpost_interop_v1_Msg pb = outpost_interop_v1_Msg_init_zero;
  pb.payload = With(EncodeStr, &m.payload);
  pb.count = m.count;
  pb.delay_ms = m.delay_ms;
  pb.fail_code = m.fail_code;
  pb.fail_message = With(EncodeStr, &m.fail_message);
  pb.echo_metadata = With(EncodeStr, &m.echo_metadata);
  pb.seq = m.seq;
  pb.echoed_metadata = With(EncodeStr, &m.echoed_metadata);
  auto out = PbEncode(outpost_interop_v1_Msg_fields, &pb, "Msg");
  if (!out.ok()) {
    std::fprintf(stderr, "grpc_peer: %s\n", out.error().message().c_str());
    std::exit(2);
  }
  return std::move(*out);
}

Result<Msg> Decode(std::string_view bytes) {
  Msg m;
  outpost_interop_v1_Msg pb = outpost_interop_v1_Msg_init_zero;
  pb.payload = With(DecodeStr, &m.payload);
  pb.fail_message = With(DecodeStr, &m.fail_message);
  pb.echo_metadata = With(DecodeStr, &m.echo_metadata);
  pb.echoed_metadata = With(DecodeStr, &m.echoed_metadata);
  OUTPOST_RETURN_IF_ERROR(PbDecode(bytes, outpost_interop_v1_Msg_fields, &pb, "Msg"));
  m.count = pb.count;
  m.delay_ms = pb.delay_ms;
  m.fail_code = pb.fail_code;
  m.seq = pb.seq;
  return m;
}

namespace {

using wire::GrpcCall;

std::string HeaderValue(const wire::hpack::HeaderList& headers, const std::string& name) {
  if (name.empty()) return "";
  for (const auto& h : headers) {
    if (h.name == name) return h.value;
  }
  return "";
}

Error StatusOf(const Msg& m) { return Error(static_cast<Code>(m.fail_code), m.fail_message); }

// ---- serve ------------------------------------------------------------------

// One streaming call on the server: its messages go out one at a time, each
// after its delay, waiting for OnWritable when the stream's queue is full;
// then its status. The call is held weakly: its callbacks hold this, not
// the other way round.
struct ServerCall : std::enable_shared_from_this<ServerCall> {
  struct Out {
    int32_t delay_ms;
    bool finish;  // the status (after the delay), not a message
    std::string message;
  };
  Loop* loop = nullptr;
  std::weak_ptr<GrpcCall> call;
  std::string method;
  std::deque<Out> out;
  bool sending = false;    // the front's delay runs, or it waits for room
  bool blocked = false;    // Write refused it: OnWritable resumes
  bool finishing = false;  // the status is queued
  bool finished = false;   // Finish was called
  bool ended = false;      // OnDone ran
  Status final_status;
  Loop::TimerId timer = 0;

  void Queue(int32_t delay_ms, std::string message) {
    if (finishing) return;
    out.push_back({delay_ms, false, std::move(message)});
    Pump();
  }
  void QueueFinish(Status st, int32_t delay_ms = 0) {
    if (finishing) return;
    finishing = true;
    final_status = std::move(st);
    out.push_back({delay_ms, true, {}});
    Pump();
  }
  void Pump() {
    if (sending || ended || out.empty()) return;
    sending = true;
    auto self = shared_from_this();
    auto send = [self] { self->SendFront(); };
    if (out.front().delay_ms > 0) {
      timer = loop->AddTimer(out.front().delay_ms * kNanosPerMilli, send);
    } else {
      loop->Defer(send);
    }
  }
  void SendFront() {
    timer = 0;
    auto c = call.lock();
    if (!c || ended || out.empty()) return;
    Out& o = out.front();
    if (o.finish) {
      out.clear();
      finished = true;
      c->Finish(final_status);
      return;
    }
    Status st = c->Write(o.message);
    if (!st.ok() && st.error().code() == Code::kResourceExhausted) {
      blocked = true;
      return;
    }
    if (!st.ok()) return out.clear();  // the call is over
    out.pop_front();
    sending = false;
    Pump();
  }
  void Resume() {  // OnWritable
    if (!blocked || ended) return;
    blocked = false;
    SendFront();
  }
  void Ended(const Status& st) {
    ended = true;
    if (timer != 0) loop->CancelTimer(timer);
    // Not ok before this side finished: the client cancelled, the deadline
    // passed or the connection went.
    if (!st.ok() && !finished) Say("cancelled " + method);
  }
  std::string Header(const std::string& name) {
    auto c = call.lock();
    return c ? HeaderValue(c->headers(), name) : std::string();
  }
};

class Server {
 public:
  Server(Loop* loop, std::string path, int drain_after)
      : loop_(loop), path_(std::move(path)), drain_after_(drain_after) {}

  Status Start() {
    auto fd = sys::UnixListen(path_, 128);
    if (!fd.ok()) return fd.error();
    wire::GrpcServerOptions opts;
    opts.name = "interop";
    auto server = wire::GrpcServer::Create(loop_, std::move(*fd), opts);
    if (!server.ok()) return server.error();
    server_ = std::move(*server);
    server_->Register(kService, "Unary", [this](const wire::GrpcCallContext& ctx, std::string_view req,
                                                wire::GrpcResponder r) { Unary(ctx, req, std::move(r)); });
    using Ctx = const wire::GrpcCallContext&;
    server_->RegisterStream(kService, "ServerStream", [this](Ctx, std::shared_ptr<GrpcCall> c) { ServerStream(c); });
    server_->RegisterStream(kService, "ClientStream", [this](Ctx, std::shared_ptr<GrpcCall> c) { ClientStream(c); });
    server_->RegisterStream(kService, "Bidi", [this](Ctx, std::shared_ptr<GrpcCall> c) { Bidi(c); });
    return loop_->AddSignal(SIGUSR1, [this](const signalfd_siginfo&) { Drain(); });
  }

 private:
  void Called(const std::string& method, int32_t seq) {
    Say("call " + method + " seq=" + std::to_string(seq));
    if (++calls_ == drain_after_) loop_->Defer([this] { Drain(); });
  }

  void Drain() {
    if (draining_) return;
    draining_ = true;
    Say("goaway");
    ::unlink(path_.c_str());  // new connections fail at once
    server_->Drain();
    WatchDrained();
  }
  void WatchDrained() {
    if (server_->stats().connections == 0) {
      Say("drained");
      loop_->Stop();
      return;
    }
    loop_->AddTimer(20 * kNanosPerMilli, [this] { WatchDrained(); });
  }

  void Unary(const wire::GrpcCallContext& ctx, std::string_view request, wire::GrpcResponder r) {
    auto req = Decode(request);
    if (!req.ok()) return r.Fail(req.error());
    Called("Unary", req->seq);
    Msg reply;
    reply.payload = req->payload;
    reply.seq = req->seq;
    if (ctx.headers != nullptr) reply.echoed_metadata = HeaderValue(*ctx.headers, req->echo_metadata);
    const bool fail = req->fail_code != 0;
    const Error failure = StatusOf(*req);
    auto answer = [r, fail, failure, encoded = Encode(reply)] {
      if (fail) {
        r.Fail(failure);
      } else {
        r.Reply(encoded);
      }
    };
    if (req->delay_ms <= 0) return answer();
    HoldUnary(r, MonotonicNanos() + req->delay_ms * kNanosPerMilli, std::move(answer));
  }
  // A unary handler learns of its call's end through pending(): checked
  // every 10 ms while the answer waits.
  void HoldUnary(wire::GrpcResponder r, int64_t due, std::function<void()> answer) {
    if (!r.pending()) return Say("cancelled Unary");
    if (MonotonicNanos() >= due) return answer();
    loop_->AddTimer(std::min<int64_t>(10 * kNanosPerMilli, due - MonotonicNanos()),
                    [this, r, due, answer = std::move(answer)] { HoldUnary(r, due, answer); });
  }

  std::shared_ptr<ServerCall> Track(const std::shared_ptr<GrpcCall>& c, const char* method) {
    auto sc = std::make_shared<ServerCall>();
    sc->loop = loop_;
    sc->call = c;
    sc->method = method;
    c->OnDone([sc](const Status& st) { sc->Ended(st); });
    c->OnWritable([sc] { sc->Resume(); });
    return sc;
  }

  void ServerStream(const std::shared_ptr<GrpcCall>& c) {
    auto sc = Track(c, "ServerStream");
    auto req = std::make_shared<Msg>();
    c->OnMessage([this, sc, req](std::string_view m) {
      auto d = Decode(m);
      if (!d.ok()) return sc->QueueFinish(d.error());
      *req = std::move(*d);
      Called("ServerStream", req->seq);
    });
    c->OnHalfClose([sc, req] {
      Msg out;
      out.payload = req->payload;
      out.count = req->count;
      out.echoed_metadata = sc->Header(req->echo_metadata);
      for (int32_t i = 0; i < req->count; ++i) {
        out.seq = req->seq + i;
        sc->Queue(req->delay_ms, Encode(out));
      }
      sc->QueueFinish(req->fail_code != 0 ? Status(StatusOf(*req)) : OkStatus());
    });
  }

  void ClientStream(const std::shared_ptr<GrpcCall>& c) {
    auto sc = Track(c, "ClientStream");
    struct Sum {
      Msg first, reply;
      bool any = false;
    };
    auto sum = std::make_shared<Sum>();
    c->OnMessage([this, sc, sum](std::string_view m) {
      auto d = Decode(m);
      if (!d.ok()) return sc->QueueFinish(d.error());
      if (!sum->any) {
        sum->any = true;
        sum->first = *d;
        Called("ClientStream", d->seq);
      }
      sum->reply.payload += d->payload;
      sum->reply.count++;
      sum->reply.seq = d->seq;
    });
    c->OnHalfClose([this, sc, sum] {
      if (!sum->any) Called("ClientStream", 0);
      // The delay, then trailers-only.
      if (sum->first.fail_code != 0) return sc->QueueFinish(StatusOf(sum->first), sum->first.delay_ms);
      sum->reply.echoed_metadata = sc->Header(sum->first.echo_metadata);
      sc->Queue(sum->first.delay_ms, Encode(sum->reply));
      sc->QueueFinish(OkStatus());
    });
  }

  void Bidi(const std::shared_ptr<GrpcCall>& c) {
    auto sc = Track(c, "Bidi");
    Called("Bidi", 0);
    c->OnMessage([sc](std::string_view m) {
      auto d = Decode(m);
      if (!d.ok()) return sc->QueueFinish(d.error());
      if (d->fail_code != 0) return sc->QueueFinish(StatusOf(*d), d->delay_ms);
      Msg echo;
      echo.payload = std::move(d->payload);
      echo.seq = d->seq;
      echo.echoed_metadata = sc->Header(d->echo_metadata);
      sc->Queue(d->delay_ms, Encode(echo));
    });
    c->OnHalfClose([sc] { sc->QueueFinish(OkStatus()); });
  }

  Loop* loop_;
  std::string path_;
  int drain_after_;
  int calls_ = 0;
  bool draining_ = false;
  std::unique_ptr<wire::GrpcServer> server_;
};

}  // namespace

int Serve(const std::string& path, int drain_after) {
  auto loop = Loop::Create();
  if (!loop.ok()) return Say("error: " + loop.error().message()), 2;
  Server server(loop->get(), path, drain_after);
  Status st = server.Start();
  if (!st.ok()) return Say("error: " + st.error().message()), 2;
  Say("ready");
  st = (*loop)->Run();
  if (!st.ok()) return Say("error: " + st.error().message()), 2;
  return 0;
}

}  // namespace outpost::grpc_peer

namespace {

int Usage() {
  std::fprintf(stderr, "usage: grpc_peer serve SOCKET [--drain-after N]\n       grpc_peer call SOCKET CASE...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  outpost::log::SetLevel(outpost::log::Level::kWarn);
  if (argc < 3) return Usage();
  const std::string mode = argv[1], path = argv[2];
  if (mode == "serve") {
    int drain_after = 0;
    if (argc == 5 && std::strcmp(argv[3], "--drain-after") == 0) {
      drain_after = std::atoi(argv[4]);
    } else if (argc != 3) {
      return Usage();
    }
    return outpost::grpc_peer::Serve(path, drain_after);
  }
  if (mode == "call" && argc >= 4) {
    return outpost::grpc_peer::CallCases(path, std::vector<std::string>(argv + 3, argv + argc));
  }
  return Usage();
}
