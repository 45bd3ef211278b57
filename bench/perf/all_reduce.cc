// all_reduce for braid-perf: every rank contributes count elements of its pattern; every rank's
// output must equal the reduction of all patterns. busbw = algbw × 2(n-1)/n, the fraction of the
// data each rank sends and receives in a bandwidth-optimal all-reduce (nccl-tests'
// PERFORMANCE.md), so busbw is comparable with a link's peak whatever n is.
#include <string>
#include <vector>

#include "bench/perf/harness.h"

namespace braid::perf {
namespace {

double allReduceBusBwFactor(int ranks) { return ranks > 0 ? 2.0 * (ranks - 1) / ranks : 0.0; }

void allReduceInit(const BenchContext& ctx, void* send, void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  fillPeriodic(send, p.contribution(ctx.rank), p.period(), p.elemSize(), count);
  if (!inPlace) poison(recv, count * p.elemSize());
}

Status allReduceRun(const BenchContext& ctx, const void* send, void* recv, size_t count,
                    bool /*inPlace: send == recv*/) {
  return ctx.comm->allReduce(send, recv, count, ctx.type, ctx.op);
}

size_t allReduceCheck(const BenchContext& ctx, const void* recv, size_t count, bool /*inPlace*/) {
  const Pattern& p = *ctx.pattern;
  return countMismatches(recv, p.reduced(), p.period(), p.elemSize(), count);
}

// Reduce-scatter then all-gather through shared memory: every rank reduces the other ranks'
// (n-1) parts into its 1/n slice and copies the (n-1) slices the others reduced; the others read
// (n-1)/n of its input.
CeilingWork allReduceCeiling(const BenchContext& ctx, size_t count) {
  const double share = static_cast<double>(count * ctx.pattern->elemSize()) * (ctx.ranks - 1) /
                       ctx.ranks;
  return {share, share, share, CeilingSource::kPeersResults};
}

}  // namespace

const CollectiveBench& allReduceBench() {
  static const CollectiveBench kBench = makeBench<Collective::kAllReduce>(
      {"all_reduce", "each rank's input and output (count elements)", allReduceBusBwFactor,
       "2(n-1)/n", /*reduces=*/true, /*rooted=*/false, allReduceCeiling,
       "reduce (n-1)/n S with the peers' inputs, copy (n-1)/n S of their results\n"
       "  (+ publish (n-1)/n S of the input, private buffers)"},
      allReduceInit, allReduceRun, allReduceCheck);
  return kBench;
}

}  // namespace braid::perf
