// braid-perf's ceiling column: a floor under any algorithm's time for a collective on one host,
// measured in the same run (runner.cc), so that every row says how close to the machine it is.
//
// What it times, every rank at once, per iteration (the collective's own schedule stripped to the
// memory traffic it cannot avoid, CeilingWork): the probe's memory is a shared window
// (Communicator::allocShared) holding, per rank, an input part and a result part of S bytes each,
// each rank reaching the others' parts through Communicator::sharedPart.
//   publish (private buffers only, -R 0): copy the bytes of its input that other ranks must
//     reduce into its input part (a reduction needs both operands in memory it can load; a
//     kernel single copy, CMA, would be the same copy), with plain and non-temporal stores in
//     alternate iterations (core/copy.h), the quicker kind's phases counted. All-gather,
//     all-to-all and broadcast publish nothing: a single copy (process_vm_readv/writev) moves
//     private bytes once; braid uses it for all-gather and broadcast where the kernel allows
//     (ShmSegment::singleCopy) and the calibration measured it quick enough (ShmPlan), not yet
//     for all-to-all;
//   reduce: its share of the reduction, the second operand read from each peer's input part in
//     turn (a block of equal size per peer), the result written into its own result part;
//   copy: bytes copied (copyBytes, core/copy.h) from other ranks' parts into its output, from
//     each peer's result part (what that peer reduced a moment ago, still in its cache or just
//     evicted: as an all-reduce's reduced shards are), from each peer's input part (all-gather,
//     all-to-all), or from the root's (broadcast; every rank, the root included, copies an
//     equal share of the n − 1 copies the others need).
// Phases are separated by barriers that are not timed; a phase's time is the slowest rank's median
// over the iterations, and the ceiling is the sum of the phases' times (with --rounds, the median
// round's: runner.cc). Every byte crosses cores
// as in the collective (the reads of another core's lines, not a local memcpy of data hot in this
// core's cache, which no collective between processes gets).
#pragma once

#include <memory>
#include <vector>

#include "bench/perf/harness.h"
#include "braid/comm.hpp"

namespace braid::perf {

class CeilingProbe {
 public:
  /// Collective: a window of 2 · maxBytes per rank, mapped by every rank. Null (and *why says
  /// why) when the ranks do not share one host's segment; an error only when the communicator
  /// fails.
  static Result<std::unique_ptr<CeilingProbe>> create(Communicator* comm, size_t maxBytes,
                                                      std::string* why);
  ~CeilingProbe();

  /// The ceiling (µs) of one call whose traffic on this rank is `w`; every rank calls it with
  /// its own CeilingWork (the same phases on every rank). `privateBuffers`: the collective's
  /// buffers are not in shared windows (the publish phase runs).
  Status measure(const CeilingWork& w, DataType type, int root, int iters, int warmup,
                 bool privateBuffers, double* ceilingUs);

 private:
  CeilingProbe(Communicator* comm, void* window, size_t partBytes);
  uint8_t* input(int rank) const { return parts_[static_cast<size_t>(rank)]; }
  uint8_t* result(int rank) const { return parts_[static_cast<size_t>(rank)] + partBytes_; }

  Communicator* comm_;
  void* window_;
  size_t partBytes_;            // S: each rank's input part, then its result part
  std::vector<uint8_t*> parts_;  // per rank, its window part as mapped here
  std::vector<uint8_t> local_;   // this rank's private source (publish) and output (copy)
};

}  // namespace braid::perf
