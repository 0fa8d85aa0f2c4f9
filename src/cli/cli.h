// Command-line entry point of the multi-call binary: `outpost agent ...`
// runs the agent, every other command is a client of the API socket.
#pragma once

namespace outpost::cli {

int Main(int argc, char** argv);

}  // namespace outpost::cli
