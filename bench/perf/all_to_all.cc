// all_to_all for braid-perf, in nccl-tests' conventions: the size column is each rank's whole
// send buffer (n blocks of count/n elements, block j for rank j) and busbw = algbw × (n-1)/n (the
// share that crosses a link). Rank r's block j holds r's pattern from element j·count/n, so
// every block is distinct: rank i's output block j must be rank j's pattern from element
// i·count/n. In place, the output replaces the input.
#include "bench/perf/harness.h"

namespace braid::perf {
namespace {

double busBwFactor(int ranks) { return ranks > 0 ? static_cast<double>(ranks - 1) / ranks : 0.0; }

size_t blockCount(const BenchContext& ctx, size_t count) {
  return count / static_cast<size_t>(ctx.ranks);
}

void a2aInit(const BenchContext& ctx, void* send, void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  const size_t bc = blockCount(ctx, count);
  if (!inPlace) poison(recv, count * p.elemSize());
  uint8_t* in = static_cast<uint8_t*>(send);
  for (int j = 0; j < ctx.ranks; ++j) {
    const size_t first = static_cast<size_t>(j) * bc;
    fillPeriodic(in + first * p.elemSize(), p.contribution(ctx.rank), p.period(), p.elemSize(), bc,
                 first);
  }
}

Status a2aRun(const BenchContext& ctx, const void* send, void* recv, size_t count,
              bool /*inPlace: send == recv*/) {
  return ctx.comm->allToAll(send, recv, blockCount(ctx, count), ctx.type);
}

size_t a2aCheck(const BenchContext& ctx, const void* recv, size_t count, bool /*inPlace*/) {
  const Pattern& p = *ctx.pattern;
  const size_t bc = blockCount(ctx, count);
  const size_t mine = static_cast<size_t>(ctx.rank) * bc;
  size_t wrong = 0;
  for (int j = 0; j < ctx.ranks; ++j) {
    const uint8_t* block = static_cast<const uint8_t*>(recv) + static_cast<size_t>(j) * bc *
                                                                   p.elemSize();
    wrong += countMismatches(block, p.contribution(j), p.period(), p.elemSize(), bc, mine);
  }
  return wrong;
}

// Every rank copies the n-1 blocks addressed to it from the others' inputs, and the others read
// the n-1 blocks of its input addressed to them.
CeilingWork a2aCeiling(const BenchContext& ctx, size_t count) {
  const double others =
      static_cast<double>(blockCount(ctx, count) * ctx.pattern->elemSize()) * (ctx.ranks - 1);
  return {0, 0, others, CeilingSource::kPeersInputs};  // no publish: a single copy (ceiling.h)
}

}  // namespace

const CollectiveBench& allToAllBench() {
  static const CollectiveBench kBench = makeBench<Collective::kAllToAll>(
      {"all_to_all", "each rank's whole send buffer: n blocks of count/n elements, one per rank",
       busBwFactor, "(n-1)/n", /*reduces=*/false, /*rooted=*/false, a2aCeiling,
       "copy (n-1)/n S of the peers' inputs (private buffers too: single copy)"},
      a2aInit, a2aRun, a2aCheck);
  return kBench;
}

}  // namespace braid::perf
