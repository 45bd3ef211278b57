// trace_check: one rank of the merged-timeline test (check_trace.py starts four with braid-run and
// BRAID_TRACE_FILE set). A Bucketer over 8 parameters of 256 KiB in buckets of 512 KiB runs a few
// steps; rank --slow R waits 20 ms before its backward in every step, so it is the last to launch
// every bucket, which `braid-trace report` must say.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/bucketer.hpp"
#include "braid/comm.hpp"

int main(int argc, char** argv) {
  int slow = 2, steps = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--slow") == 0) slow = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
  }
  auto comm = braid::Communicator::createFromEnvironment();
  if (!comm.isOk()) {
    std::fprintf(stderr, "trace_check: %s\n", comm.status().toString().c_str());
    return 1;
  }
  const int rank = (*comm)->rank();
  int rc = 0;
  {
    braid::BucketerOptions o;
    o.sizing = braid::BucketSizing::kFixed;
    o.bucketCapBytes = 512 << 10;
    o.firstBucketCapBytes = 512 << 10;
    o.rebuildLayout = false;
    o.maxInFlight = 8;  // every bucket launches when ready: its launch is the rank's arrival
    auto b = braid::Bucketer::create(comm->get(), o);
    if (!b.isOk()) {
      std::fprintf(stderr, "trace_check: %s\n", b.status().toString().c_str());
      return 1;
    }
    constexpr int kParams = 8;
    constexpr size_t kCount = 64 << 10;  // floats: 256 KiB
    std::vector<std::vector<float>> grads(kParams, std::vector<float>(kCount));
    for (uint32_t id = 0; id < kParams; ++id) {
      if (!(*b)->registerParam(id, kCount, braid::DataType::kFloat32).isOk()) return 1;
    }
    if (!(*b)->finalize().isOk()) return 1;
    for (int s = 0; s < steps && rc == 0; ++s) {
      // Every rank starts the step together, so that the slow rank's lag is its own delay.
      if (!(*comm)->barrier().isOk()) return 1;
      if (!(*b)->beginStep().isOk()) return 1;
      if (rank == slow) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      // Backward: the last parameters first, a millisecond of "compute" each.
      for (int id = kParams - 1; id >= 0; --id) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (float& x : grads[static_cast<size_t>(id)]) x = static_cast<float>(rank + 1);
        if (!(*b)->markReady(static_cast<uint32_t>(id), grads[static_cast<size_t>(id)].data())
                 .isOk()) {
          return 1;
        }
      }
      auto m = (*b)->finishStep();
      if (!m.isOk()) {
        std::fprintf(stderr, "trace_check: step %d: %s\n", s, m.status().toString().c_str());
        rc = 1;
      }
      const float want = (1.0f + (*comm)->size()) / 2;  // the average of rank + 1
      if (grads[0][0] != want || grads[kParams - 1][kCount - 1] != want) {
        std::fprintf(stderr, "trace_check: step %d: wrong result %g, want %g\n", s, grads[0][0],
                     want);
        rc = 1;
      }
    }
  }
  comm->reset();  // writes this rank's trace file
  if (rc == 0) std::printf("trace_check rank %d: OK\n", rank);
  return rc;
}
