#include <unistd.h>

#include <cstdio>
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

// Replace glibc's message translation and its assert report, the same way
// and for the same reason. outpost never calls setlocale, so in its C
// locale glibc's gettext returns the message it is given, but linking it
// (through strerror, libstdc++'s error paths and assert) pulls in the
// message catalog loader, charset conversion and wide-character printf:
// about 45 KB on aarch64. These return the message unchanged, as glibc does
// in the C locale, and report a failed assertion as glibc does, then abort.
extern "C" {

char* __dcgettext(const char*, const char* msgid, int) { return const_cast<char*>(msgid); }
char* dcgettext(const char*, const char* msgid, int) { return const_cast<char*>(msgid); }
char* __gettext(const char* msgid) { return const_cast<char*>(msgid); }
char* gettext(const char* msgid) { return const_cast<char*>(msgid); }

void __assert_fail(const char* expr, const char* file, unsigned int line, const char* function) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "outpost: %s:%u: %s: Assertion `%s' failed.\n", file, line,
                        function ? function : "?", expr);
  if (n > 0) (void)::write(STDERR_FILENO, buf, static_cast<size_t>(n) < sizeof buf ? static_cast<size_t>(n) : sizeof buf - 1);
  std::abort();
}

}  // extern "C"
