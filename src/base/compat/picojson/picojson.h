// Stand-in for <picojson.h>, found before the real one
// (-Isrc/base/compat/picojson; a dir of its own: the tests use it, but not
// the <iostream> stand-in next to it, as GoogleTest needs std::cerr).
//
// outpost is built without exceptions (-fno-exceptions, no unwind tables:
// about 450 KB of the static aarch64 binary; docs/benchmarks.md, "Size").
// picojson throws in two places, which do not compile then:
//  - PICOJSON_ASSERT: a get<T>() of the wrong type (a programming error);
//  - value(double) of an infinite or NaN number (std::overflow_error), which
//    picojson::parse reaches for a number that overflows a double, such as
//    1e999. json::Parse refuses such a number before picojson sees it
//    (json::FindOverflowingNumber); every parse goes through it.
// With OUTPOST_PICOJSON_ABORTS (set for everything linked with outpost's
// objects: src/, tools/, the tests; Makefile) both abort instead, as an
// uncaught exception did, and picojson's namespace is renamed, so that its
// inline functions compiled this way never stand in, at link time, for those
// of a plugin built with exceptions against the plugin library. Without it
// (the examples, built as a vendor would, and the fuzzers) this header is
// picojson as it is: a number that got past json::Parse is then an uncaught
// exception the fuzzers report.
#pragma once

#ifndef OUTPOST_PICOJSON_ABORTS
#include_next <picojson.h>
#else
// Every standard header picojson includes, first: the macros below must not
// reach them.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace outpost_picojson_support {
[[noreturn]] inline void Fail() { std::abort(); }
}  // namespace outpost_picojson_support

#define PICOJSON_ASSERT(e)                        \
  do {                                            \
    if (!(e)) ::outpost_picojson_support::Fail(); \
  } while (0)
// `throw std::overflow_error("")` becomes `Fail(), std::overflow_error("")`.
#define throw ::outpost_picojson_support::Fail(),
#define picojson outpost_picojson
#include_next <picojson.h>
#undef throw
#endif
