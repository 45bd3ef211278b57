// braid-perf: a collective's sweep in nccl-tests' conventions (see harness.h and --help). One
// binary per collective, as nccl-tests has: BRAID_PERF_BENCH names its benchmark (all-reduce
// when unset).
#include "bench/perf/harness.h"

#ifndef BRAID_PERF_BENCH
#define BRAID_PERF_BENCH allReduceBench
#endif

int main(int argc, char** argv) {
  return braid::perf::benchMain(braid::perf::BRAID_PERF_BENCH(), argc, argv);
}
