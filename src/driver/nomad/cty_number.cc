// cty.h's Number: cty's arbitrary-precision decimal as Nomad's configs
// need it (parsing, the int64 and float64 forms, the texts cty and Go print).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/strings.h"
#include "driver/nomad/cty.h"

namespace outpost::driver::nomad {

void Number::Normalize() {
  size_t lead = digits_.find_first_not_of('0');
  if (lead == std::string::npos) {
    digits_.clear();
    exp_ = 0;
    neg_ = false;
    return;
  }
  digits_.erase(0, lead);
  size_t last = digits_.find_last_not_of('0');
  exp_ += static_cast<int32_t>(digits_.size() - 1 - last);
  digits_.resize(last + 1);
}

Number::Parsed Number::Parse(std::string_view t, Number* out) {
  Number n;
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) n.neg_ = t[i++] == '-';
  if (t.substr(i) == "Inf" || t.substr(i) == "inf") {
    n.inf_ = true;
    *out = n;
    return Parsed::kOk;
  }
  size_t mant = 0;
  int64_t frac = 0;
  bool point = false;
  for (; i < t.size(); ++i) {
    char c = t[i];
    if (c == '.' && !point) {
      point = true;
    } else if (c >= '0' && c <= '9') {
      // Leading zeros add nothing; they are not counted against the limit.
      if (c != '0' || !n.digits_.empty()) n.digits_.push_back(c);
      if (point) ++frac;
      ++mant;
    } else {
      break;
    }
  }
  if (mant == 0) return Parsed::kSyntax;
  int64_t e = 0;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    bool eneg = false;
    if (++i < t.size() && (t[i] == '+' || t[i] == '-')) eneg = t[i++] == '-';
    size_t start = i;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
      if (e < 1000000000) e = e * 10 + (t[i] - '0');
    }
    if (i == start) return Parsed::kSyntax;
    if (eneg) e = -e;
  }
  if (i != t.size()) return Parsed::kSyntax;
  if (n.digits_.size() > 4 * kMaxDigits) return Parsed::kRange;
  e -= frac;
  if (e > 1000000000 || e < -1000000000) return Parsed::kRange;
  n.exp_ = static_cast<int32_t>(e);
  n.Normalize();
  if (n.digits_.size() > kMaxDigits) return Parsed::kRange;
  int64_t lead = static_cast<int64_t>(n.exp_) + static_cast<int64_t>(n.digits_.size()) - 1;
  if (!n.digits_.empty() && (lead > kMaxExp10 || lead < -kMaxExp10)) return Parsed::kRange;
  *out = n;
  return Parsed::kOk;
}

Number Number::Uint(uint64_t v) {
  Number n;
  n.digits_ = std::to_string(v);
  n.Normalize();
  return n;
}

Number Number::Int(int64_t v) {
  // The magnitude as uint64: -INT64_MIN does not fit an int64.
  Number n = Uint(v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
  n.neg_ = v < 0;
  return n;
}

Number Number::Infinity(bool negative) {
  Number n;
  n.inf_ = true;
  n.neg_ = negative;
  return n;
}

Number Number::Double(double v) {
  if (std::isinf(v)) return Infinity(v < 0);
  Number n;
  n.f64_ = true;
  if (v == 0) return n;
  // glibc prints a double's exact value; 767 digits after the point are
  // as many as a double's decimal expansion has.
  char buf[800];
  int len = std::snprintf(buf, sizeof buf, "%.767e", v);
  std::string_view s(buf, len > 0 ? static_cast<size_t>(len) : 0);
  size_t epos = s.find('e');
  n.neg_ = s[0] == '-';
  for (char c : s.substr(0, epos)) {
    if (c >= '0' && c <= '9') n.digits_.push_back(c);
  }
  n.exp_ = std::atoi(buf + epos + 1) - 767;
  n.Normalize();
  return n;
}

bool Number::ToInt64(int64_t* out) const {
  if (inf_) return false;
  if (digits_.empty()) {
    *out = 0;
    return true;
  }
  if (exp_ < 0 || digits_.size() + static_cast<size_t>(exp_) > 19) return false;
  uint64_t v = 0;  // at most 19 digits: no overflow
  for (char c : digits_) v = v * 10 + static_cast<uint64_t>(c - '0');
  for (int32_t i = 0; i < exp_; ++i) v *= 10;
  if (neg_) {
    if (v > (uint64_t{1} << 63)) return false;
    *out = static_cast<int64_t>(0 - v);
  } else {
    if (v > (uint64_t{1} << 63) - 1) return false;
    *out = static_cast<int64_t>(v);
  }
  return true;
}

bool Number::ToDouble(double* out) const {
  if (inf_) {
    *out = neg_ ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (digits_.empty()) {
    *out = 0;
    return true;
  }
  std::string text = (neg_ ? "-" : "") + digits_ + "e" + std::to_string(exp_);
  double d = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(d) || d == 0) return false;
  Number back = Double(d);
  if (back.digits_ != digits_ || back.exp_ != exp_) return false;
  *out = d;
  return true;
}

std::string Number::Text() const {
  if (inf_) return neg_ ? "-Inf" : "+Inf";
  std::string d = digits_;
  int32_t e = exp_;
  double x;
  if (f64_ && !d.empty() && ToDouble(&x)) {
    // The shortest digits that read back as the same float64, as big.Float
    // prints one of 53 bits.
    char buf[40];
    for (int prec = 0; prec < 17; ++prec) {
      std::snprintf(buf, sizeof buf, "%.*e", prec, x);
      if (std::strtod(buf, nullptr) == x) break;
    }
    Number s;
    if (Parse(buf, &s) == Parsed::kOk) {
      d = s.digits_;
      e = s.exp_;
    }
  }
  if (d.empty()) return "0";
  std::string out = neg_ ? "-" : "";
  int64_t point = static_cast<int64_t>(d.size()) + e;  // digits before the point
  if (e >= 0) {
    out += d;
    out.append(static_cast<size_t>(e), '0');
  } else if (point > 0) {
    out += d.substr(0, static_cast<size_t>(point));
    out += '.';
    out += d.substr(static_cast<size_t>(point));
  } else {
    out += "0.";
    out.append(static_cast<size_t>(-point), '0');
    out += d;
  }
  return out;
}

std::string Number::RoundedDigits(size_t n, int32_t* point) const {
  std::string m = digits_;
  *point = static_cast<int32_t>(m.size()) + exp_;
  if (n >= m.size()) return m;
  bool up = m[n] > '5' || (m[n] == '5' && (n + 1 < m.size() || (n > 0 && ((m[n - 1] - '0') & 1))));
  m.resize(n);
  if (up) {
    size_t i = n;
    while (i > 0 && m[i - 1] == '9') --i;
    if (i == 0) {
      m = "1";
      ++*point;
    } else {
      ++m[i - 1];
      m.resize(i);
    }
  }
  while (!m.empty() && m.back() == '0') m.pop_back();
  return m;
}

std::string Number::Text10g() const {
  if (inf_) return neg_ ? "-Inf" : "+Inf";
  std::string out = neg_ ? "-" : "";
  int32_t dexp = 0;
  std::string m = digits_.empty() ? std::string() : RoundedDigits(10, &dexp);
  size_t len = m.size();
  size_t eprec = 10;
  if (eprec > len && static_cast<int64_t>(len) >= dexp) eprec = len;
  int64_t exp = static_cast<int64_t>(dexp) - 1;
  if (exp < -4 || exp >= static_cast<int64_t>(eprec)) {
    size_t prec = std::min<size_t>(10, len);
    out += len ? m[0] : '0';
    if (prec > 1) out += '.' + m.substr(1, prec - 1);
    if (len == 0) exp = 0;
    out += exp < 0 ? "e-" : "e+";
    if (exp < 0) exp = -exp;
    if (exp < 10) out += '0';
    out += std::to_string(exp);
    return out;
  }
  int64_t prec = 10;
  if (prec > dexp) prec = static_cast<int64_t>(len);
  int64_t frac = std::max<int64_t>(prec - dexp, 0);
  if (dexp > 0) {
    for (int64_t i = 0; i < dexp; ++i) out += i < static_cast<int64_t>(len) ? m[static_cast<size_t>(i)] : '0';
  } else {
    out += '0';
  }
  if (frac > 0) {
    out += '.';
    for (int64_t i = 0; i < frac; ++i) {
      int64_t at = dexp + i;
      out += at >= 0 && at < static_cast<int64_t>(len) ? m[static_cast<size_t>(at)] : '0';
    }
  }
  return out;
}

Number Number::Negated() const {
  Number n = *this;
  if (!n.zero()) n.neg_ = !n.neg_;
  return n;
}

int Number::Compare(const Number& o) const {
  auto sign = [](const Number& n) { return n.zero() ? 0 : (n.neg_ ? -1 : 1); };
  int sa = sign(*this), sb = sign(o);
  if (sa != sb) return sa < sb ? -1 : 1;
  if (sa == 0) return 0;
  int mag;
  if (inf_ || o.inf_) {
    mag = inf_ == o.inf_ ? 0 : (inf_ ? 1 : -1);
  } else {
    int64_t ea = static_cast<int64_t>(digits_.size()) + exp_;
    int64_t eb = static_cast<int64_t>(o.digits_.size()) + o.exp_;
    if (ea != eb) {
      mag = ea < eb ? -1 : 1;
    } else {
      int c = digits_.compare(o.digits_);  // no trailing zeros: longer is larger
      mag = c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
  }
  return sa * mag;
}

}  // namespace outpost::driver::nomad
