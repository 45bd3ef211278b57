// reduce_scatter for braid-perf: the size column is the whole vector (p blocks, as nccl-tests'
// reduce_scatter_perf counts it); every rank contributes count elements of its pattern and ends
// with block `rank` (count/p elements) of the reduction. In place, the output is that block of
// the input. busbw = algbw × (n-1)/n.
#include <string>
#include <vector>

#include "bench/perf/harness.h"

namespace braid::perf {
namespace {

double busBwFactor(int ranks) { return ranks > 0 ? static_cast<double>(ranks - 1) / ranks : 0.0; }

size_t blockCount(const BenchContext& ctx, size_t count) {
  return count / static_cast<size_t>(ctx.ranks);
}

void init(const BenchContext& ctx, void* send, void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  fillPeriodic(send, p.contribution(ctx.rank), p.period(), p.elemSize(), count);
  if (!inPlace) poison(recv, blockCount(ctx, count) * p.elemSize());
}

// In place (send == recv) the output is this rank's block of the input.
size_t outputOffset(const BenchContext& ctx, size_t count, bool inPlace) {
  return inPlace ? static_cast<size_t>(ctx.rank) * blockCount(ctx, count) * ctx.pattern->elemSize()
                 : 0;
}

Status run(const BenchContext& ctx, const void* send, void* recv, size_t count, bool inPlace) {
  return ctx.comm->reduceScatter(send, static_cast<uint8_t*>(recv) + outputOffset(ctx, count, inPlace),
                                 blockCount(ctx, count), ctx.type, ctx.op);
}

size_t check(const BenchContext& ctx, const void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  const size_t rc = blockCount(ctx, count);
  return countMismatches(static_cast<const uint8_t*>(recv) + outputOffset(ctx, count, inPlace),
                         p.reduced(), p.period(), p.elemSize(), rc, static_cast<size_t>(ctx.rank) * rc);
}

constexpr char kCollective[] = "reducescatter";

}  // namespace

const CollectiveBench& reduceScatterBench() {
  static const CollectiveBench kBench = [] {
    CollectiveBench b;
    b.name = "reduce_scatter";
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
