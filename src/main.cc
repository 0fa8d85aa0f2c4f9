#include <unistd.h>

#include <cstdlib>

#include "cli/cli.h"

int main(int argc, char** argv) { return outpost::cli::Main(argc, argv); }

// Replaces libstdc++'s verbose terminate handler. The default one demangles
// the exception's type name, which links the whole C++ demangler (~50 KiB)
// into the static binary. outpost never lets exceptions escape on purpose
// (errors are values), so reaching terminate is a bug: say so and abort.
// It lives here, in an object linked directly, because an archive member
// would never be pulled in to override libstdc++'s definition.
namespace __gnu_cxx {

void __verbose_terminate_handler() {
  static const char kMsg[] = "outpost: fatal: terminate called (uncaught exception or broken invariant)\n";
  (void)::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  std::abort();
}

}  // namespace __gnu_cxx
