// Starting N local ranks of a program, as torchrun does on one host: each child gets RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT (or,
// with a file store, BRAID_FILE_STORE); the variables that would mark an outer launcher
// (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, GROUP_RANK) are removed, so that
// braid-run under srun or mpirun starts a local world. Used by braid-run, braid-perf --ranks and
// the tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "braid/status.h"

namespace braid::launch {

struct LaunchOptions {
  int ranks = 2;
  /// argv of the program, argv[0] a path.
  std::vector<std::string> argv;
  /// Extra environment for every rank.
  std::vector<std::pair<std::string, std::string>> env;
  /// Use a temporary directory as BRAID_FILE_STORE instead of the TCP store.
  bool fileStore = false;
  /// Kill every rank after this long (0 = no limit).
  int timeoutMs = 0;
  /// Rank i runs under `wrapper[i]` prefixes when set (e.g. "ip netns exec h1"); empty = none.
  std::vector<std::vector<std::string>> wrappers;
};

struct LaunchResult {
  /// Exit status per rank: exit code, or 128 + signal.
  std::vector<int> exitCodes;
  bool timedOut = false;
};

/// Starts the ranks and waits for all. When one rank fails, the others are left to finish on
/// their own (bounded by their own deadlines) so that their error reports are seen.
Result<LaunchResult> launchLocalRanks(const LaunchOptions& options);

/// Path of the running executable.
std::string selfExecutable();

}  // namespace braid::launch
