// braid-perf's command line: the flags every collective's benchmark takes (nccl-tests' letters
// where nccl-tests has the flag) and the size sweep they describe.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/perf/harness.h"

namespace braid::perf {

struct Options {
  size_t minBytes = 8;
  size_t maxBytes = size_t{128} << 20;
  double stepFactor = 2;
  size_t stepBytes = 0;
  int iters = 20;
  int warmup = 5;
  int rounds = 1;
  int check = 1;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::string algo = "auto";
  int ranks = 0;  // 0: run as one rank of an existing launch
  std::string jsonPath;
  std::string transport;
  bool fileStore = false;
  int timeoutS = 0;
  int localRegister = 0;  // -R: 0 malloc'd buffers, 1 buffers in shared windows (allocShared)
};

enum class ParseOutcome { kRun, kHelpShown, kUsageError };

/// Parses argv into *o (printing --help to stdout, or a usage error to stderr).
ParseOutcome parseOptions(const CollectiveBench& bench, int argc, char** argv, Options* o);

/// nccl-tests' size steps in elements: -b, then ×-f (or +-i) up to -e, rounded down to whole
/// elements, duplicates dropped.
std::vector<size_t> sweepCounts(const Options& o);

}  // namespace braid::perf
