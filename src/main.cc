#include "cli/cli.h"

int main(int argc, char** argv) { return outpost::cli::Main(argc, argv); }
