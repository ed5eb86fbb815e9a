// goose command-line entry point: dispatches to subcommands (apps/cli_*.cc).
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  std::fprintf(stderr, "goose: no subcommand yet\n");
  return 2;
}
