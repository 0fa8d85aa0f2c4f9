// A plugin built with the plugin library (include/outpost/plugin.h), for
// the integration and VM tests: registers with the agent as TYPE/NAME and
// prints one line per registration status on stdout ("registered" or
// "refused: <why>"), so a test can wait for it.
//
//   test_plugin --type TYPE --name NAME [--dir PLUGINS_DIR] [--versions v1,v2]
//               [--socket-file FILE]   (writes the socket's path there once it exists)
#include <cstdio>
#include <cstring>
#include <string>

#include "outpost/plugin.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: test_plugin --type TYPE --name NAME [--dir DIR] [--versions v1,v2] [--socket-file FILE]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  outpost::plugin_sdk::Options o;
  std::string socket_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    std::string v = argv[++i];
    if (a == "--type") {
      o.type = v;
    } else if (a == "--name") {
      o.name = v;
    } else if (a == "--dir") {
      o.plugins_dir = v;
    } else if (a == "--versions") {
      for (size_t start = 0; start <= v.size();) {
        size_t comma = v.find(',', start);
        if (comma == std::string::npos) comma = v.size();
        o.versions.push_back(v.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (a == "--socket-file") {
      socket_file = v;
    } else {
      return Usage();
    }
  }
  o.on_registration = [](bool ok, const std::string& error) {
    if (ok) {
      std::printf("registered\n");
    } else {
      std::printf("refused: %s\n", error.c_str());
    }
    std::fflush(stdout);
  };
  outpost::plugin_sdk::Plugin plugin(o);
  if (!socket_file.empty()) {
    plugin.After(0, [&plugin, socket_file] {
      FILE* f = std::fopen(socket_file.c_str(), "w");
      if (!f) return;
      std::fprintf(f, "%s\n", plugin.socket_path().c_str());
      std::fclose(f);
    });
  }
  return plugin.Run();
}
