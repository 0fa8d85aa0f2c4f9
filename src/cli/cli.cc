#include "cli/cli.h"

#include <cstdio>

namespace outpost::cli {

int Main(int, char**) {
  std::fputs("outpost: not yet\n", stderr);
  return 1;
}

}  // namespace outpost::cli
