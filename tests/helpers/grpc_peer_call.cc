// grpc_peer call (tests/helpers/grpc_peer.cc has the program's usage): the
// client cases of the gRPC interop tests on one wire::GrpcClient, each
// checking what interop_client.py's case of the same name checks.
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "grpc_peer.h"
#include "loop/loop.h"
#include "wire/grpc_client.h"

namespace outpost::grpc_peer {
namespace {

using wire::GrpcCall;

// ---- call -------------------------------------------------------------------

constexpr int64_t kCallTimeout = 20 * kNanosPerSecond;  // no case waits on anything longer

// n bytes as interop_client.py's pattern(n, salt) makes them.
std::string Pattern(size_t n, int salt) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(((i % 251) * 7 + static_cast<size_t>(salt)) % 251);
  return out;
}

std::string Base64Unpadded(std::string_view in) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int have = 0;
  for (unsigned char ch : in) {
    bits = (bits << 8) | ch;
    have += 8;
    while (have >= 6) {
      have -= 6;
      out += kAlphabet[(bits >> have) & 63];
    }
  }
  if (have > 0) out += kAlphabet[(bits << (6 - have)) & 63];
  return out;
}

Error Bad(std::string why) { return Error(Code::kUnknown, std::move(why)); }

std::string Describe(const Status& st) {
  return st.ok() ? "OK" : std::string(CodeName(st.error().code())) + " \"" + st.error().message() + "\"";
}

// A streaming call's outcome, filled in by its callbacks.
struct Streamed {
  std::vector<Msg> replies;
  Status status;
  bool done = false;
};
using OnReply = std::function<void(GrpcCall* call, const Streamed& so_far)>;

class Caller {
 public:
  Caller(Loop* loop, wire::GrpcClient* client) : loop_(loop), client_(client) {}

  // Runs the loop until done() holds; false if it did not within timeout.
  bool RunUntil(const std::function<bool()>& done, int64_t timeout) {
    const int64_t end = MonotonicNanos() + timeout;
    while (!done()) {
      int64_t left = end - MonotonicNanos();
      if (left <= 0) return false;
      (void)loop_->RunOnce(std::min<int64_t>(left, 100 * kNanosPerMilli));
    }
    return true;
  }

  // One unary call through GrpcClient::Call; the reply decoded.
  Result<Msg> Unary(const Msg& req, int64_t timeout = kCallTimeout, const char* service = kService,
                    const char* method = "Unary") {
    auto got = std::make_shared<std::pair<bool, Result<std::string>>>(false, Bad("no answer"));
    client_->Call(service, method, Encode(req), timeout, [got](Result<std::string> r) {
      got->first = true;
      got->second = std::move(r);
    });
    if (!RunUntil([got] { return got->first; }, timeout + 5 * kNanosPerSecond)) {
      return Bad("the call's callback did not run within its timeout + 5 s");
    }
    if (!got->second.ok()) return got->second.error();
    return Decode(*got->second);
  }

  // A streaming call: writes `first` (then half-closes if close_send),
  // calls on_reply after each reply, and waits for the end.
  std::shared_ptr<Streamed> Stream(const char* method, const std::vector<Msg>& first, bool close_send,
                                   const wire::hpack::HeaderList& metadata, OnReply on_reply = nullptr,
                                   int64_t timeout = kCallTimeout) {
    auto out = std::make_shared<Streamed>();
    std::shared_ptr<GrpcCall> call = client_->StartCall(kService, method, timeout, metadata);
    std::weak_ptr<GrpcCall> weak = call;
    call->OnMessage([out, weak, on_reply](std::string_view m) {
      auto d = Decode(m);
      auto c = weak.lock();
      if (!d.ok()) {
        out->status = d.error();
        if (c) c->Cancel();
        return;
      }
      out->replies.push_back(std::move(*d));
      if (on_reply && c) on_reply(c.get(), *out);
    });
    call->OnDone([out](const Status& st) {
      if (out->status.ok()) out->status = st;
      out->done = true;
    });
    for (const Msg& m : first) {
      Status st = call->Write(Encode(m));
      if (!st.ok()) out->status = st;
    }
    if (close_send) call->CloseSend();
    if (!RunUntil([out] { return out->done; }, timeout + 5 * kNanosPerSecond)) {
      out->status = Bad("OnDone did not run within the call's timeout + 5 s");
      call->Cancel();
    }
    return out;
  }

  wire::GrpcClient* client() { return client_; }

 private:
  Loop* loop_;
  wire::GrpcClient* client_;
};

// One unary call made as a stream (the only way to send metadata): the
// reply's echoed_metadata.
Result<std::string> EchoHeader(Caller& c, const std::string& name, const std::string& value) {
  Msg req;
  req.echo_metadata = name;
  auto s = c.Stream("Unary", {req}, true, {{name, value}});
  if (!s->status.ok()) return s->status.error();
  if (s->replies.size() != 1) return Bad(std::to_string(s->replies.size()) + " replies to a unary call");
  return s->replies[0].echoed_metadata;
}

Result<std::string> CaseUnary(Caller& c) {
  Msg req;
  req.payload = Pattern(1024, 0);
  req.seq = 7;
  auto r = c.Unary(req);
  if (!r.ok()) return r.error();
  if (r->payload != req.payload || r->seq != 7) {
    return Bad("reply differs: " + std::to_string(r->payload.size()) + " bytes, seq " + std::to_string(r->seq));
  }
  return std::string("1024 bytes and seq echoed");
}

Result<std::string> CaseMetadata(Caller& c) {
  const std::vector<std::string> values = {
      "plain", "with spaces, punctuation !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ and 0123456789", std::string(3000, 'x')};
  for (const std::string& v : values) {
    auto got = EchoHeader(c, "x-echo", v);
    if (!got.ok()) return got.error();
    if (*got != v) return Bad("x-echo '" + v.substr(0, 40) + "...' came back as '" + got->substr(0, 40) + "...'");
  }
  return std::to_string(values.size()) + " values echoed (up to 3000 bytes; outpost Huffman-codes what that shortens)";
}

Result<std::string> CaseHuffman(Caller& c) {
  std::string all96;
  for (int i = 0; i < 96; ++i) all96 += static_cast<char>(i);
  const std::vector<std::string> values = {all96, std::string("\x00\x01\xff", 3), Pattern(300, 3)};
  for (const std::string& v : values) {
    const std::string b64 = Base64Unpadded(v);
    auto got = EchoHeader(c, "x-blob-bin", b64);
    if (!got.ok()) return got.error();
    if (*got != b64) {
      return Bad("x-blob-bin of " + std::to_string(v.size()) + " bytes came back as '" + got->substr(0, 40) + "'");
    }
  }
  return std::to_string(values.size()) + " -bin values echoed";
}

Result<std::string> CaseLarge(Caller& c) {
  Msg req;
  req.payload = Pattern(3 << 20, 1);
  req.seq = 3;
  const int64_t t0 = MonotonicNanos();
  auto r = c.Unary(req);
  if (!r.ok()) return r.error();
  if (r->payload != req.payload) return Bad("3 MiB reply differs (" + std::to_string(r->payload.size()) + " bytes)");
  return "3 MiB both ways in " + std::to_string((MonotonicNanos() - t0) / kNanosPerMilli) + " ms";
}

Result<std::string> CaseServerStream(Caller& c) {
  Msg req;
  req.payload = std::string(100, 's');
  req.count = 5;
  req.seq = 100;
  auto s = c.Stream("ServerStream", {req}, true, {});
  if (!s->status.ok()) return Bad("status " + Describe(s->status));
  if (s->replies.size() != 5) return Bad(std::to_string(s->replies.size()) + " messages, expected 5");
  for (size_t i = 0; i < 5; ++i) {
    if (s->replies[i].seq != 100 + static_cast<int32_t>(i) || s->replies[i].payload != req.payload) {
      return Bad("message " + std::to_string(i) + " has seq " + std::to_string(s->replies[i].seq));
    }
  }
  return std::string("5 messages, seq 100..104");
}

Result<std::string> CaseClientStream(Caller& c) {
  std::vector<Msg> msgs(10);
  std::string want;
  for (int i = 0; i < 10; ++i) {
    msgs[i].payload = std::string(10, static_cast<char>('A' + i));
    msgs[i].seq = i;
    want += msgs[i].payload;
  }
  auto s = c.Stream("ClientStream", msgs, true, {});
  if (!s->status.ok()) return Bad("status " + Describe(s->status));
  if (s->replies.size() != 1) return Bad(std::to_string(s->replies.size()) + " replies");
  const Msg& r = s->replies[0];
  if (r.count != 10 || r.payload != want || r.seq != 9) {
    return Bad("count " + std::to_string(r.count) + ", seq " + std::to_string(r.seq));
  }
  return std::string("10 messages in, 100 bytes concatenated back");
}

Msg BidiMsg(int i) {
  Msg m;
  m.payload = Pattern(10 + static_cast<size_t>(i) * 100, i);
  m.seq = i;
  return m;
}

Result<std::string> CaseBidi(Caller& c) {
  auto s = c.Stream("Bidi", {BidiMsg(0)}, false, {}, [](GrpcCall* call, const Streamed& so_far) {
    const int next = static_cast<int>(so_far.replies.size());
    if (next < 10) {
      (void)call->Write(Encode(BidiMsg(next)));
    } else {
      call->CloseSend();
    }
  });
  if (!s->status.ok()) return Bad("status " + Describe(s->status));
  if (s->replies.size() != 10) return Bad(std::to_string(s->replies.size()) + " echoes, expected 10");
  for (int i = 0; i < 10; ++i) {
    if (s->replies[i].seq != i || s->replies[i].payload != BidiMsg(i).payload) {
      return Bad("echo " + std::to_string(i) + " differs");
    }
  }
  return std::string("10 echoes ping-pong, then OK");
}

Result<std::string> ExpectError(const Status& st, Code code, const std::string& message) {
  if (st.ok()) return Bad("the call succeeded");
  if (st.error().code() != code || (!message.empty() && st.error().message() != message)) {
    return Bad("status " + Describe(st) + ", expected " + CodeName(code) +
               (message.empty() ? "" : " \"" + message + "\""));
  }
  return Describe(st);
}
Status StatusOf(const Result<Msg>& r) { return r.ok() ? OkStatus() : Status(r.error()); }

Result<std::string> CaseError(Caller& c) {
  Msg req;
  req.fail_code = 5;
  // interop_client.py's text: '%' and UTF-8 go percent-encoded both ways.
  req.fail_message = "no such thing: 100% gone, na\xc3\xaf" "ve \xc3\xbcn\xc3\xaf" "code \xe2\x9c\x93";
  return ExpectError(StatusOf(c.Unary(req)), Code::kNotFound, req.fail_message);
}

Result<std::string> CaseStreamError(Caller& c) {
  Msg req;
  req.payload = "e";
  req.count = 3;
  req.fail_code = 9;
  req.fail_message = "after three";
  auto s = c.Stream("ServerStream", {req}, true, {});
  auto e = ExpectError(s->status, Code::kFailedPrecondition, "after three");
  if (!e.ok()) return e;
  if (s->replies.size() != 3) return Bad(std::to_string(s->replies.size()) + " messages before the error, expected 3");
  return "3 messages, then " + *e;
}

Result<std::string> CaseUnimplemented(Caller& c) {
  auto e = ExpectError(StatusOf(c.Unary(Msg{}, kCallTimeout, kService, "NoSuchMethod")), Code::kUnimplemented, "");
  if (!e.ok()) return e;
  auto f = ExpectError(StatusOf(c.Unary(Msg{}, kCallTimeout, "outpost.interop.v1.NoSuchService", "Unary")),
                       Code::kUnimplemented, "");
  if (!f.ok()) return f;
  return "unknown method: " + *e + "; unknown service: " + *f;
}

Result<std::string> CaseConcurrent(Caller& c) {
  constexpr int kCalls = 200;
  struct Tally {
    int done = 0;
    size_t most_open = 0;
    std::vector<std::string> bad;
  };
  auto t = std::make_shared<Tally>();
  for (int i = 0; i < kCalls; ++i) {
    Msg req;
    req.payload = Pattern(64, i);
    req.seq = i;
    req.delay_ms = 50;
    c.client()->Call(kService, "Unary", Encode(req), kCallTimeout, [t, i, want = req.payload](Result<std::string> r) {
      ++t->done;
      if (!r.ok()) return t->bad.push_back(std::to_string(i) + ": " + r.error().message());
      auto d = Decode(*r);
      if (!d.ok() || d->seq != i || d->payload != want) t->bad.push_back(std::to_string(i) + ": wrong reply");
    });
  }
  t->most_open = c.client()->open_calls();
  const int64_t t0 = MonotonicNanos();
  if (!c.RunUntil([t] { return t->done == kCalls; }, kCallTimeout + 5 * kNanosPerSecond)) {
    return Bad(std::to_string(t->done) + " of " + std::to_string(kCalls) + " calls ended");
  }
  if (!t->bad.empty()) return Bad(std::to_string(t->bad.size()) + " calls failed, first: " + t->bad[0]);
  return std::to_string(kCalls) + " calls (" + std::to_string(t->most_open) + " open at once), all answered in " +
         std::to_string((MonotonicNanos() - t0) / kNanosPerMilli) + " ms";
}

Result<std::string> CaseDeadline(Caller& c) {
  Msg req;
  req.delay_ms = 5000;
  req.seq = 4;
  const int64_t t0 = MonotonicNanos();
  auto e = ExpectError(StatusOf(c.Unary(req, 300 * kNanosPerMilli)), Code::kDeadlineExceeded, "");
  if (!e.ok()) return e;
  const int64_t took = (MonotonicNanos() - t0) / kNanosPerMilli;
  if (took >= 3000) return Bad("DeadlineExceeded after " + std::to_string(took) + " ms; the deadline was 300 ms");
  return *e + " after " + std::to_string(took) + " ms";
}

Result<std::string> CaseCancel(Caller& c, const char* method) {
  const bool bidi = std::strcmp(method, "Bidi") == 0;
  Msg req;
  req.payload = bidi ? "c" : "l";
  req.seq = bidi ? 1 : 0;
  req.count = bidi ? 0 : 100000;
  req.delay_ms = bidi ? 0 : 5;
  const size_t after = bidi ? 1 : 3;
  auto s = c.Stream(method, {req}, !bidi, {}, [after](GrpcCall* call, const Streamed& so_far) {
    if (so_far.replies.size() == after) call->Cancel();
  });
  auto e = ExpectError(s->status, Code::kCanceled, "");
  if (!e.ok()) return e;
  if (s->replies.size() != after) {
    return Bad(std::to_string(s->replies.size()) + " messages, cancelled after " + std::to_string(after));
  }
  return std::string(method) + " cancelled after " + std::to_string(after) + " message(s): " + *e;
}

Result<std::string> CaseGoaway(Caller& c) {
  Msg req;
  req.payload = "g";
  req.seq = 1;
  req.delay_ms = 500;
  auto r = c.Unary(req);
  if (!r.ok()) return Bad("the call in flight during the GOAWAY: " + r.error().message());
  wire::GrpcClient* client = c.client();
  if (!c.RunUntil([client] { return !client->accepting_calls(); }, 5 * kNanosPerSecond)) {
    return Bad("the client still accepts calls 5 s after the call the server drained on");
  }
  Msg next;
  next.seq = 2;
  auto e = ExpectError(StatusOf(c.Unary(next, 5 * kNanosPerSecond)), Code::kUnavailable, "");
  if (!e.ok()) return Bad("the call after the GOAWAY: " + e.error().message());
  if (!c.RunUntil([client] { return !client->connected(); }, 15 * kNanosPerSecond)) {
    return Bad("the server did not close the drained connection within 15 s");
  }
  return "the call in flight finished OK; the next one " + *e + "; the connection closed";
}

const char* const kAll[] = {"unary", "metadata", "huffman", "large", "server_stream", "client_stream", "bidi",
                            "error", "stream_error", "unimplemented", "concurrent", "deadline", "cancel",
                            "cancel_stream"};

Result<std::string> RunCase(Caller& c, const std::string& name) {
  if (name == "unary") return CaseUnary(c);
  if (name == "metadata") return CaseMetadata(c);
  if (name == "huffman") return CaseHuffman(c);
  if (name == "large") return CaseLarge(c);
  if (name == "server_stream") return CaseServerStream(c);
  if (name == "client_stream") return CaseClientStream(c);
  if (name == "bidi") return CaseBidi(c);
  if (name == "error") return CaseError(c);
  if (name == "stream_error") return CaseStreamError(c);
  if (name == "unimplemented") return CaseUnimplemented(c);
  if (name == "concurrent") return CaseConcurrent(c);
  if (name == "deadline") return CaseDeadline(c);
  if (name == "cancel") return CaseCancel(c, "Bidi");
  if (name == "cancel_stream") return CaseCancel(c, "ServerStream");
  if (name == "goaway") return CaseGoaway(c);
  return Error(Code::kInvalidArgument, "unknown case");
}

}  // namespace

int CallCases(const std::string& path, const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const std::string& a : args) {
    if (a == "all") {
      names.insert(names.end(), std::begin(kAll), std::end(kAll));
    } else {
      names.push_back(a);
    }
  }
  auto loop = Loop::Create();
  if (!loop.ok()) return Say("error: " + loop.error().message()), 2;
  auto client = wire::GrpcClient::Connect(loop->get(), path);
  if (!client.ok()) return Say("error: connect " + path + ": " + client.error().message()), 2;
  Caller caller(loop->get(), client->get());
  int failed = 0;
  for (const std::string& name : names) {
    auto r = RunCase(caller, name);
    if (r.ok()) {
      Say("ok " + name + ": " + *r);
    } else {
      ++failed;
      Say("not ok " + name + " - " + r.error().message());
    }
  }
  (*client)->Close();
  return failed == 0 ? 0 : 1;
}

}  // namespace outpost::grpc_peer
