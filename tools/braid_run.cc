// braid-run: starts N local ranks of a program with torchrun-style variables.
//   braid-run -n 4 [--file-store] [--timeout SECONDS] -- PROGRAM [ARGS...]
// Exits 0 when every rank exited 0, 77 when every rank exited 77 (the test convention for
// "skipped", which CTest's SKIP_RETURN_CODE reads); otherwise prints each failing rank and exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport/bootstrap/local_launch.h"

int main(int argc, char** argv) {
  braid::launch::LaunchOptions options;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-n" || a == "--ranks") && i + 1 < argc) {
      options.ranks = atoi(argv[++i]);
    } else if (a == "--file-store") {
      options.fileStore = true;
    } else if (a == "--timeout" && i + 1 < argc) {
      options.timeoutMs = atoi(argv[++i]) * 1000;
    } else if (a == "--") {
      ++i;
      break;
    } else if (a == "-h" || a == "--help") {
      printf(
          "usage: braid-run -n RANKS [--file-store] [--timeout SECONDS] -- PROGRAM [ARGS...]\n"
          "Starts RANKS local processes of PROGRAM with RANK, WORLD_SIZE, LOCAL_RANK,\n"
          "LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT (or BRAID_FILE_STORE\n"
          "with --file-store). Exits 0 when every rank exits 0, 77 when every rank exits 77\n"
          "(a test that skipped itself), 1 otherwise.\n");
      return 0;
    } else {
      break;
    }
  }
  for (; i < argc; ++i) options.argv.push_back(argv[i]);
  if (options.argv.empty()) {
    fprintf(stderr, "braid-run: no program given (see --help)\n");
    return 2;
  }
  auto result = braid::launch::launchLocalRanks(options);
  if (!result.isOk()) {
    fprintf(stderr, "braid-run: %s\n", result.status().toString().c_str());
    return 2;
  }
  int bad = 0, skipped = 0;
  for (size_t r = 0; r < result->exitCodes.size(); ++r) {
    if (result->exitCodes[r] == 77) ++skipped;
    if (result->exitCodes[r] != 0) {
      fprintf(stderr, "braid-run: rank %zu exited with %d\n", r, result->exitCodes[r]);
      ++bad;
    }
  }
  if (result->timedOut) fprintf(stderr, "braid-run: timed out; ranks were killed\n");
  if (!result->timedOut && skipped > 0 &&
      static_cast<size_t>(skipped) == result->exitCodes.size()) {
    return 77;
  }
  return bad == 0 && !result->timedOut ? 0 : 1;
}
