// What CNI plugins print, read as untrusted bytes (every decoder here has a
// libFuzzer target, tests/fuzz/cni_fuzzer.cc). Owns: the ADD result
// (interfaces, ips, routes, dns; spec 0.3.x/0.4.0 and 1.0.0 forms), the
// address a job gets from it (Nomad's rule: interfaces sorted by name, the
// first one inside the namespace with an IPv4 address, else IPv6, else any
// interface with an address), the VERSION answer, and the error object
// ({code, msg, details}) with the text a user sees.
#pragma once

#include <picojson.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace outpost::net {

struct CniInterface {
  std::string name;
  std::string mac;
  std::string sandbox;  // "" = on the host
};
struct CniIp {
  std::string address;  // CIDR, "10.46.0.2/20"
  std::string gateway;
  int interface = -1;   // index into interfaces, -1 = none
};
struct CniResult {
  std::string cni_version;  // as printed ("" = not printed: the config's)
  std::vector<CniInterface> interfaces;
  std::vector<CniIp> ips;
  picojson::value raw;      // the whole object, as chained in prevResult and cached
};

// Parses an ADD result (stdout of a successful ADD). Errors name the field:
// "ips[0].address: expected a string". A missing cniVersion is the
// config's (libcni's fix-up, cni#895).
Result<CniResult> ParseCniResult(const std::string& text, const std::string& config_version);
Result<CniResult> CniResultFromJson(const picojson::value& v, const std::string& config_version);
// The job's address from a result: "10.46.0.2" (no prefix) and the CIDR;
// FailedPrecondition "the result has no IP address" when there is none.
Status PickAddress(const CniResult& r, std::string* ip, std::string* cidr);

// VERSION's answer: supportedVersions. InvalidArgument when malformed.
Result<std::vector<std::string>> ParseVersionAnswer(const std::string& text);

struct CniError {
  int64_t code = 0;  // 0 when the plugin printed none
  std::string msg;
  std::string details;
};
// What a failed plugin printed. Non-empty stdout is parsed as the error
// object (non-JSON stdout: msg says it could not be parsed and quotes it);
// empty stdout takes stderr's text as msg.
CniError ParseCniError(const std::string& out, const std::string& err);
// "[code 7] invalid config: details", or the msg alone without a code.
std::string DescribeCniError(const CniError& e);

// s in double quotes with '"', '\\', newlines and every byte outside
// printable ASCII escaped (\n, \x01): how messages of the net layer quote
// what a file or a plugin said, safe in a log line.
std::string QuoteForMessage(const std::string& s);

}  // namespace outpost::net
