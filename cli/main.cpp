// tandem: the command-line tool's entry point; dispatches to a subcommand.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "base/log.h"
#include "cli/command.h"
#include "kernels/cpu/matmul_dispatch.h"

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: tandem <command> [args]\n\ncommands:\n");
  for (const tandem::cli::Command& c : tandem::cli::commands()) {
    std::fprintf(out, "  %-18s %s\n", c.name, c.summary);
  }
  std::fprintf(out, "\n'tandem <command> --help' describes one command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  // The engine's start-up lines (model summary, placement table) stay out of the commands'
  // output; its warnings and errors go to stderr.
  (void)tandem::configure_logging("warn", tandem::LogFormat::kText);
  // The kernels read no environment; the tool takes tandemd's short form of runtime.cpu_kernels.
  if (const char* kernels = std::getenv("TANDEM_CPU_KERNELS"); kernels != nullptr) {
    tandem::kernels::select_matmul_kernels(kernels, "TANDEM_CPU_KERNELS");
  }
  const char* name = argv[1];
  if (std::strcmp(name, "help") == 0 || std::strcmp(name, "--help") == 0 ||
      std::strcmp(name, "-h") == 0) {
    print_usage(stdout);
    return 0;
  }
  for (const tandem::cli::Command& c : tandem::cli::commands()) {
    if (std::strcmp(c.name, name) == 0) {
      return c.run(std::span<char*>(argv + 2, static_cast<size_t>(argc - 2)));
    }
  }
  std::fprintf(stderr, "tandem: unknown command '%s'\n\n", name);
  print_usage(stderr);
  return 2;
}
