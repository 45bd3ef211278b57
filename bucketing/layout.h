// Bucket layout: which parameters share a bucket, and the automatic choice of bucket sizes.
//
// Layout (as DDP's _compute_bucket_assignment_by_size): walk the parameters in the given order
// (the expected gradient-ready order), keep one open bucket per dtype, append each parameter to
// its dtype's bucket and close the bucket once it reaches its cap: the first bucket closed per
// dtype uses firstCap, the rest cap (a bucket can exceed its cap by its last parameter). Buckets
// are then ordered by the position of their first parameter, which is the launch order.
//
// Automatic sizing (rank 0 only; the result is broadcast): with a bucket's time T(b) from the
// selector's prediction for the all-reduce plus the engine's own work and the copy back
// (AlphaBeta; a fit a + b·c of two timed all-reduces where the selector has no prediction) and
// the gradient-ready time of every parameter observed in the first communicating
// step, simulate the step for each candidate (cap, firstCap) as the engine runs it (engine.cc):
// bucket k is ready when its last parameter is; it goes out in pieces of at most pieceBytes, each
// one all-reduce on the communicator, which runs them one after another (a piece starts at
// max(launch, previous piece done) and takes a + C(piece)); the engine launches a ready piece
// while fewer than `window` are queued, and otherwise waits for the oldest and copies it back to
// the gradients (copy back of piece j overlaps the all-reduce of j+1; a bucket of one gradient
// is reduced where the gradient lies and has no copy back). The candidate with the
// shortest tail (last completion − last ready) wins; within 2% (+ two bucket latencies) of it, the
// fewest buckets. Each cap is tried with and without isolating parameters that fill a bucket
// alone: a large gradient that is ready last (BERT's 94 MB word embedding) then no longer drags
// the parameters before it into the tail. This covers both
// regimes of the notes in shared/docs/compression-overlap.md §3.4: compute-bound, the smallest
// bucket that keeps up (b ≈ a/(T_b/S − c)) with a small last bucket; communication-bound,
// b ≈ S·√(a/T_b).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braid/types.h"

namespace braid::detail {

struct ParamSpec {
  uint32_t id = 0;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  std::string name;
  /// Matrix view for codecs: rows × (count / rows); 0 = 1-D (no shape given).
  size_t rows = 0;
  size_t bytes() const { return count * dataTypeSize(type); }
};

/// Parameter indices per bucket, in launch order.
using BucketPlan = std::vector<std::vector<int>>;

/// Greedy layout of `order` (parameter indices; every index exactly once). `isolateLarge`: a
/// parameter that alone reaches its bucket's cap closes the open bucket before joining it, and so
/// gets a bucket of its own (auto sizing tries both; DDP's rule, the default, lets it join the
/// open bucket).
BucketPlan planBuckets(const std::vector<ParamSpec>& params, const std::vector<int>& order,
                       size_t cap, size_t firstCap, bool isolateLarge = false);

/// The default order: reverse registration order (gradients arrive roughly in reverse).
std::vector<int> reverseOrder(size_t n);

/// The time of one bucket: aNs + bytes·nsPerByte, or, when `collectiveNs` is set (the selector's
/// prediction for the all-reduce of that many bytes, which knows the algorithm it will pick and
/// when data falls out of cache), aNs + collectiveNs(bytes) + bytes·copyNsPerByte.
struct AlphaBeta {
  double aNs = 20000;      ///< fixed cost of one bucket all-reduce (incl. engine overhead)
  double nsPerByte = 0.5;  ///< per byte
  std::function<double(size_t)> collectiveNs;
  double copyNsPerByte = 0;  ///< copying the result back to the gradients (with collectiveNs)
  int window = 1;            ///< the engine's maxInFlight
  size_t pieceBytes = 0;     ///< largest all-reduce per bucket piece; 0 = a bucket is one piece
  /// One all-reduce of `bytes` on the communicator (the fit a + b·c includes the copy back).
  double commNs(size_t bytes) const {
    const double b = static_cast<double>(bytes);
    return collectiveNs ? aNs + collectiveNs(bytes) : aNs + b * nsPerByte;
  }
  /// The engine's copy of `bytes` of results back to the gradients.
  double copyNs(size_t bytes) const {
    return collectiveNs ? static_cast<double>(bytes) * copyNsPerByte : 0.0;
  }
  double bucketNs(size_t bytes) const { return commNs(bytes) + copyNs(bytes); }
};

struct AutoChoice {
  size_t cap = 0;
  size_t firstCap = 0;
  double predictedNs = 0;     ///< simulated last completion, relative to the first ready
  size_t buckets = 0;
  bool isolateLarge = false;  ///< planBuckets' rule for parameters that fill a bucket alone
};

/// Simulated completion (ns, same origin as readyNs) of the last bucket of `plan`, copied back.
double simulatePlan(const std::vector<ParamSpec>& params, const BucketPlan& plan,
                    const std::vector<double>& readyNs, const AlphaBeta& model);

/// Picks caps for `order` given each parameter's ready time (indexed by parameter).
AutoChoice chooseCaps(const std::vector<ParamSpec>& params, const std::vector<int>& order,
                      const std::vector<double>& readyNs, const AlphaBeta& model);

/// Flattened form broadcast by rank 0: order (n entries) then bucket of each position (n).
std::vector<uint32_t> encodePlan(const BucketPlan& plan, size_t n);
/// Inverse of encodePlan; false when the encoding is not a valid plan of n parameters.
bool decodePlan(const std::vector<uint32_t>& enc, size_t n, BucketPlan* plan);

/// Stable 64-bit hash of a registration (id, count, dtype, name, rows).
uint64_t hashParam(const ParamSpec& p);
/// A bucket's identity for codec state: the hash of its parameters' hashes, in bucket order.
/// Equal on every rank, and equal across layouts for a bucket holding the same parameters.
uint64_t hashBucket(const std::vector<ParamSpec>& params, const std::vector<int>& members);

}  // namespace braid::detail
