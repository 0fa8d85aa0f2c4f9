#include "job/check_http.h"

#include "base/strings.h"

namespace outpost::job {

std::string HttpCheckRequest(const std::string& address, int port, const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: " + address + ":" + std::to_string(port) +
         "\r\nUser-Agent: outpost-check\r\nAccept: */*\r\nConnection: close\r\n\r\n";
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsTokenChar(unsigned char c) {
  if (c <= 0x20 || c >= 0x7f) return false;
  static const char kSeparators[] = "()<>@,;:\\\"/[]?={}";
  for (const char* s = kSeparators; *s; s++) {
    if (c == static_cast<unsigned char>(*s)) return false;
  }
  return true;
}

// What a peer sent, for messages: printable ASCII, the rest as '?', cut.
std::string Printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 64; i++) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > 64) out += "...";
  return out;
}

}  // namespace

HttpResponseParser::State HttpResponseParser::Fail(const std::string& why) {
  state_ = State::kError;
  error_ = why;
  line_.clear();
  return state_;
}

HttpResponseParser::State HttpResponseParser::Feed(const char* data, size_t n) {
  for (size_t i = 0; i < n && state_ == State::kNeedMore; i++) {
    char c = data[i];
    if (++head_bytes_ > kMaxHeadBytes) return Fail(Format("response head over %zu bytes", kMaxHeadBytes));
    if (c != '\n') {
      if (line_.size() >= kMaxLineBytes) return Fail(Format("response line over %zu bytes", kMaxLineBytes));
      line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    std::string line;
    line.swap(line_);
    Line(line);
  }
  return state_;
}

HttpResponseParser::State HttpResponseParser::Finish() {
  if (state_ != State::kNeedMore) return state_;
  if (head_bytes_ == 0) return Fail("connection closed without a response");
  return Fail(in_headers_ ? "connection closed in the response headers" : "connection closed in the status line");
}

HttpResponseParser::State HttpResponseParser::Line(const std::string& line) {
  if (!in_headers_) {
    // "HTTP/1.1 200 OK": version, a space, three digits, then a space and
    // the reason, or nothing.
    if (line.size() < 12 || line.compare(0, 7, "HTTP/1.") != 0 || !IsDigit(line[7]) || line[8] != ' ' ||
        !IsDigit(line[9]) || !IsDigit(line[10]) || !IsDigit(line[11]) || (line.size() > 12 && line[12] != ' ')) {
      return Fail("not an HTTP/1.x status line: \"" + Printable(line) + "\"");
    }
    status_ = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    if (status_ < 100) return Fail(Format("status %d out of range", status_));
    reason_ = line.size() > 13 ? Printable(line.substr(13)) : "";
    in_headers_ = true;
    return state_;
  }
  if (line.empty()) {
    if (status_ >= 100 && status_ < 200 && status_ != 101) {
      // An interim response: the real one follows.
      in_headers_ = false;
      status_ = 0;
      reason_.clear();
      return state_;
    }
    state_ = State::kDone;
    return state_;
  }
  if (line[0] == ' ' || line[0] == '\t') return Fail("folded header line");
  size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0) return Fail("header line without a name: \"" + Printable(line) + "\"");
  for (size_t i = 0; i < colon; i++) {
    if (!IsTokenChar(static_cast<unsigned char>(line[i]))) {
      return Fail("bad header name: \"" + Printable(line.substr(0, colon)) + "\"");
    }
  }
  return state_;
}

}  // namespace outpost::job
