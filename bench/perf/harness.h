// The braid-perf harness: the nccl-tests sweep (sizes -b..-e by -f, warm-up, timed iterations,
// verification, algbw/busbw columns, JSON lines) shared by every collective. A collective's
// benchmark is one small file that fills a CollectiveBench: its name, busbw factor, how to fill
// the buffers with a verifiable pattern, how to run it, and how to count wrong elements.
// The harness's parts: options.{h,cc} (the command line and the sweep), pattern.cc (verifiable
// data), report.{h,cc} (header, columns, JSON, summary), runner.cc (launch and the per-rank loop).
//
// Timing: per size and placement (out-of-place, then in-place), `-w` untimed calls, a barrier,
// then `-n` calls timed together; a rank's time is their average and the reported time is the
// maximum over ranks. algbw = bytes / time; busbw = algbw × busBwFactor(ranks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/comm.hpp"
#include "braid/status.h"
#include "braid/types.h"

namespace braid::perf {

/// Reference data for the verifiable patterns. Every rank's contribution and the expected result
/// repeat with period() elements, so filling and checking a buffer are table copies and compares.
/// The values are small integers chosen so that every partial result of every dtype × op is exact
/// (sums of {-2..2}, products of {1, 2, -1} with at most two 2s, averages whose sum is a multiple
/// of the rank count), hence the expected result is bit-exact whatever the reduction order.
class Pattern {
 public:
  Pattern(DataType type, ReduceOp op, int ranks);

  size_t period() const { return period_; }
  size_t elemSize() const { return elemSize_; }
  /// period() encoded elements that `rank` contributes.
  const uint8_t* contribution(int rank) const;
  /// period() encoded elements of the reduction over all ranks.
  const uint8_t* reduced() const { return reduced_.data(); }
  /// Empty when the pattern is exact for this dtype, op and rank count; else why it is not.
  const std::string& limitation() const { return limitation_; }

 private:
  size_t period_ = 0;
  size_t elemSize_ = 0;
  std::vector<std::vector<uint8_t>> contributions_;
  std::vector<uint8_t> reduced_;
  std::string limitation_;
};

/// Writes `count` elements of a periodic table (period elements of elemSize bytes) to dst,
/// starting at element `phase` of the table.
void fillPeriodic(void* dst, const uint8_t* table, size_t period, size_t elemSize, size_t count,
                  size_t phase = 0);
/// Number of the `count` elements of buf that differ (bitwise) from the periodic table.
size_t countMismatches(const void* buf, const uint8_t* table, size_t period, size_t elemSize,
                       size_t count, size_t phase = 0);
/// Fills with a byte pattern no verifiable result uses, so that unwritten output is caught.
void poison(void* buf, size_t bytes);
/// Number of the `count` elements of buf that are not poison(): output written where none belongs.
size_t countUnpoisoned(const void* buf, size_t elemSize, size_t count);

/// What a collective's functions see.
struct BenchContext {
  Communicator* comm = nullptr;
  int rank = 0;
  int ranks = 1;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;  ///< -r, for rooted collectives
  const Pattern* pattern = nullptr;
};

/// Optional hooks for collectives with several algorithms (-a).
struct AlgorithmHooks {
  /// Every algorithm that can be forced on these ranks (the table's), "auto" excluded.
  std::vector<std::string> (*candidates)(const Communicator& comm) = nullptr;
  /// Forces an algorithm on this rank ("" = automatic choice).
  Status (*select)(Communicator& comm, const std::string& name) = nullptr;
  /// The algorithm the automatic choice uses for a message of `bytes`.
  std::string (*chosen)(const Communicator& comm, size_t bytes) = nullptr;
  /// The selector's predicted µs for `name` at `bytes` ("": for its own choice, with its chunk;
  /// negative: no prediction); optional.
  double (*predictedUs)(const Communicator& comm, const std::string& name, size_t bytes) = nullptr;
};

/// One collective's benchmark. `count` is the element count of the size column (nccl-tests'
/// "count"); buffers hold at least that many elements. In-place calls get send == recv (the
/// collective places its input inside recv where its in-place convention says so).
/// Where the bytes a rank must copy from other ranks lie (the ceiling column, ceiling.h).
enum class CeilingSource {
  kPeersResults,  ///< each peer's share of the reduction, written just before (all-reduce, reduce)
  kPeersInputs,   ///< each peer's input (all-gather, all-to-all)
  kRootInput,     ///< the root's input (broadcast)
};

/// The memory traffic a collective cannot avoid on one host, per rank (the ceiling column,
/// ceiling.h): bytes of its input that other ranks read (which private buffers must first copy
/// into shared memory), bytes it reduces with the other operand read from the peers' inputs, and
/// bytes it copies from other ranks' memory.
struct CeilingWork {
  double publishBytes = 0;
  double reduceBytes = 0;
  double copyBytes = 0;
  CeilingSource copyFrom = CeilingSource::kPeersResults;
};

/// What a collective's benchmark says about itself.
struct BenchInfo {
  const char* name;
  /// What the size column measures (--help).
  const char* sizeText;
  /// busbw / algbw for `ranks` ranks (all-reduce: 2(n-1)/n), and that formula as text.
  double (*busBwFactor)(int ranks);
  const char* busBwFormula;
  /// Takes -o (a reduction) and -r (a root).
  bool reduces;
  bool rooted;
  /// This rank's share of the single-host memory traffic for a call of `count` elements, and
  /// the formula as text (S = the size column's bytes).
  CeilingWork (*ceilingWork)(const BenchContext& ctx, size_t count);
  const char* ceilingFormula;
};

struct CollectiveBench : BenchInfo {
  /// Fills the input with this rank's pattern and poisons the output.
  void (*initBuffers)(const BenchContext& ctx, void* send, void* recv, size_t count,
                      bool inPlace) = nullptr;
  /// One call of the collective.
  Status (*run)(const BenchContext& ctx, const void* send, void* recv, size_t count,
                bool inPlace) = nullptr;
  /// Elements of the output that differ from the expected result on this rank (recv as run got
  /// it: in place, the buffer that held the input).
  size_t (*check)(const BenchContext& ctx, const void* recv, size_t count, bool inPlace) = nullptr;
  AlgorithmHooks algorithms;
};

/// Algorithm hooks for a collective, over Communicator's algorithm-choice API: the names come from
/// the algorithm table (Communicator::algorithms).
template <Collective kCollective>
AlgorithmHooks collectiveAlgorithms() {
  AlgorithmHooks h;
  h.candidates = [](const Communicator& c) { return c.algorithms(kCollective); };
  h.select = [](Communicator& c, const std::string& n) { return c.setAlgorithm(kCollective, n); };
  h.chosen = [](const Communicator& c, size_t b) { return c.algorithmFor(kCollective, b); };
  h.predictedUs = [](const Communicator& c, const std::string& n, size_t b) {
    return c.predictedUs(kCollective, b, n);
  };
  return h;
}

/// A collective's benchmark from its description and functions, with the table's algorithms.
template <Collective kCollective>
CollectiveBench makeBench(const BenchInfo& info,
                          void (*init)(const BenchContext&, void*, void*, size_t, bool),
                          Status (*run)(const BenchContext&, const void*, void*, size_t, bool),
                          size_t (*check)(const BenchContext&, const void*, size_t, bool)) {
  CollectiveBench b;
  static_cast<BenchInfo&>(b) = info;
  b.initBuffers = init;
  b.run = run;
  b.check = check;
  b.algorithms = collectiveAlgorithms<kCollective>();
  return b;
}

/// The collectives, one file each (all_reduce.cc, ...), each with its own braid-perf binary.
const CollectiveBench& allReduceBench();
const CollectiveBench& reduceScatterBench();
const CollectiveBench& allGatherBench();
const CollectiveBench& broadcastBench();
const CollectiveBench& reduceBench();
const CollectiveBench& allToAllBench();

/// Parses the command line (-h lists it), launches local ranks for --ranks, or runs as one rank of
/// an existing launch. Returns the process exit code: 0, 1 on wrong results or a failed
/// collective, 2 on a usage error.
int benchMain(const CollectiveBench& bench, int argc, char** argv);

/// "8", "4K", "128M", "1G" (powers of 1024; an optional trailing B or iB) in bytes.
Result<size_t> parseSize(const std::string& text);

}  // namespace braid::perf
