// One braid-chaos op that drives a Bucketer (include/braid/bucketer.hpp) instead of a single
// collective: a random set of gradient tensors is registered, marked ready in a random order
// (from several threads) over several communicating steps, and every reduced gradient is checked
// against the braid-perf harness's reference patterns after each finishStep().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "braid/comm.hpp"
#include "braid/status.h"

namespace braid::chaos {

struct BucketerOpOptions {
  /// Decides the parameters, dtypes, sizes, options and steps; the same on every rank.
  uint64_t seed = 1;
  /// Largest gradient in bytes.
  size_t maxBytes = size_t{64} << 20;
  /// The fault's op: more and larger gradients, more steps, so that it is still in flight when
  /// the driver strikes.
  bool large = false;
  /// Called once, on the calling thread, in the first step after half of the gradients were
  /// marked ready in backward's order (the last registered first), so that the first buckets
  /// are in flight: the victim's own fault (exit, socket shutdown).
  std::function<void()> midStep;
};

/// Runs the Bucketer op on comm. Returns the first error of create, finalize, markReady or
/// finishStep; *wrong gets the number of gradient elements that differ from the reference in
/// steps that reported success.
Status runBucketerOp(Communicator& comm, const BucketerOpOptions& options, size_t* wrong);

}  // namespace braid::chaos
