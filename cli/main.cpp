// tandem: the command-line tool's entry point and subcommand dispatch.
#include <cstdio>
#include <cstring>

#include "tandem/build_info.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "version") == 0) {
    std::printf("tandem %s (%s)\n", tandem::build_info::kVersion, tandem::build_info::kGitRevision);
    return 0;
  }
  std::fprintf(stderr, "usage: tandem version\n");
  return 2;
}
