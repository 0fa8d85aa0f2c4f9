// The CNI result cache (libcni's layout and format, so that cnitool and
// other libcni runtimes can read it): <dir>/results/<net>-<containerId>-<ifName>,
// directory 0700, file 0600, content
//   {"kind":"cniCacheV1","containerId","config":<list bytes, base64>,
//    "ifName","networkName","netns","cniArgs":[[k,v]...],
//    "capabilityArgs":{...},"result":{...}}
// Owns: writing an entry atomically and fsync'd, reading one back as
// untrusted bytes (a zero-byte or corrupt file is an error the caller
// tolerates: DEL then runs without prevResult, cni#1055), listing the
// entries, and removing one. outpost writes an entry *before* ADD (without
// "result") so that an agent killed during ADD still knows what to DEL,
// and again with the result once the last plugin succeeded.
#pragma once

#include <picojson.h>

#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/strings.h"

namespace outpost::net {

struct CacheEntry {
  std::string network;       // networkName
  std::string container_id;
  std::string ifname;
  std::string netns;
  std::string config;        // the network list's bytes (base64 in the file)
  std::vector<std::pair<std::string, std::string>> cni_args;
  picojson::object capability_args;  // e.g. {"portMappings":[...]}
  picojson::value result;    // null until the ADD succeeded
  bool HasResult() const { return result.is<picojson::object>(); }
};

std::string CacheEntryPath(const std::string& dir, const std::string& network, const std::string& container_id,
                           const std::string& ifname);
std::string EncodeCacheEntry(const CacheEntry& e);
Result<CacheEntry> DecodeCacheEntry(const std::string& text);
// Atomic (temp file + rename) and fsync'd; creates <dir>/results (0700).
Status WriteCacheEntry(const std::string& dir, const CacheEntry& e);
// NotFound when there is none; InvalidArgument (naming the file) when corrupt.
Result<CacheEntry> ReadCacheEntry(const std::string& dir, const std::string& network,
                                  const std::string& container_id, const std::string& ifname);
// One entry by its file's path (from ListCacheFiles).
Result<CacheEntry> ReadCacheFile(const std::string& path);
// Every entry's file under <dir>/results, sorted, as paths
// ("<dir>/results/<name>", for ReadCacheFile); temp and dot files left out.
std::vector<std::string> ListCacheFiles(const std::string& dir);
// Removed durably; a missing entry is fine.
Status RemoveCacheEntry(const std::string& dir, const std::string& network, const std::string& container_id,
                        const std::string& ifname);

// base/strings.h's, where they moved (the device checkpoint uses them too).
using outpost::Base64Decode;
using outpost::Base64Encode;

}  // namespace outpost::net
