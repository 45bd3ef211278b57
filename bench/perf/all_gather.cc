// all_gather for braid-perf: the size column is the whole output (p blocks, as nccl-tests'
// all_gather_perf counts it); rank q contributes block q (count/p elements of its pattern,
// starting at element q·count/p of the table) and every rank must end with all of them. In place,
// the input is this rank's block of the output. busbw = algbw × (n-1)/n.
#include <string>
#include <vector>

#include "bench/perf/harness.h"

namespace braid::perf {
namespace {

double busBwFactor(int ranks) { return ranks > 0 ? static_cast<double>(ranks - 1) / ranks : 0.0; }

size_t blockCount(const BenchContext& ctx, size_t count) {
  return count / static_cast<size_t>(ctx.ranks);
}

const void* input(const BenchContext& ctx, const void* send, void* recv, size_t count,
                  bool inPlace) {
  const size_t bc = blockCount(ctx, count);
  return inPlace ? static_cast<const uint8_t*>(recv) +
                       static_cast<size_t>(ctx.rank) * bc * ctx.pattern->elemSize()
                 : send;
}

void init(const BenchContext& ctx, void* send, void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  const size_t bc = blockCount(ctx, count);
  poison(recv, count * p.elemSize());
  fillPeriodic(const_cast<void*>(input(ctx, send, recv, count, inPlace)), p.contribution(ctx.rank),
               p.period(), p.elemSize(), bc, static_cast<size_t>(ctx.rank) * bc);
}

Status run(const BenchContext& ctx, const void* send, void* recv, size_t count, bool inPlace) {
  return ctx.comm->allGather(input(ctx, send, recv, count, inPlace), recv, blockCount(ctx, count),
                             ctx.type);
}

size_t check(const BenchContext& ctx, const void* recv, size_t count, bool /*inPlace*/) {
  const Pattern& p = *ctx.pattern;
  const size_t bc = blockCount(ctx, count);
  size_t wrong = 0;
  for (int q = 0; q < ctx.ranks; ++q) {
    const size_t first = static_cast<size_t>(q) * bc;
    wrong += countMismatches(static_cast<const uint8_t*>(recv) + first * p.elemSize(),
                             p.contribution(q), p.period(), p.elemSize(), bc, first);
  }
  return wrong;
}

constexpr char kCollective[] = "allgather";

}  // namespace

const CollectiveBench& allGatherBench() {
  static const CollectiveBench kBench = [] {
    CollectiveBench b;
    b.name = "all_gather";
    b.busBwFactor = busBwFactor;
    b.initBuffers = init;
    b.run = run;
    b.check = check;
    b.algorithms = namedCollectiveAlgorithms<kCollective>();
    return b;
  }();
  return kBench;
}

}  // namespace braid::perf
