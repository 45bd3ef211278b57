// braid-perf: the all-reduce sweep in nccl-tests' conventions (see harness.h and --help).
#include "bench/perf/harness.h"

int main(int argc, char** argv) {
  return braid::perf::benchMain(braid::perf::allReduceBench(), argc, argv);
}
