// reduce_scatter and all_gather for braid-perf. The size column is the whole vector (p blocks of
// count/p elements), as nccl-tests counts it; busbw = algbw × (n-1)/n for both.
//   reduce_scatter: every rank contributes count elements of its pattern and ends with block
//     `rank` of the reduction; in place, the output is that block of the input.
//   all_gather: rank q contributes block q (its pattern from element q·count/p of the table) and
//     every rank ends with all of them; in place, the input is this rank's block of the output.
#include <string>
#include <vector>

#include "bench/perf/harness.h"

namespace braid::perf {
namespace {

double busBwFactor(int ranks) { return ranks > 0 ? static_cast<double>(ranks - 1) / ranks : 0.0; }

size_t blockCount(const BenchContext& ctx, size_t count) {
  return count / static_cast<size_t>(ctx.ranks);
}

// Byte offset of this rank's block in a p-block buffer.
size_t ownBlock(const BenchContext& ctx, size_t count) {
  return static_cast<size_t>(ctx.rank) * blockCount(ctx, count) * ctx.pattern->elemSize();
}

// The n-1 blocks of the other ranks: reduced into this rank's block (reduce_scatter), or copied
// into the output (all_gather).
double otherBlocksBytes(const BenchContext& ctx, size_t count) {
  return static_cast<double>(blockCount(ctx, count) * ctx.pattern->elemSize()) * (ctx.ranks - 1);
}
CeilingWork reduceScatterCeiling(const BenchContext& ctx, size_t count) {
  const double others = otherBlocksBytes(ctx, count);
  return {others, others, 0, CeilingSource::kPeersInputs};
}
// all-gather: no publish, as for broadcast (rooted.cc): a single copy reads private buffers.
CeilingWork allGatherCeiling(const BenchContext& ctx, size_t count) {
  return {0, 0, otherBlocksBytes(ctx, count), CeilingSource::kPeersInputs};
}

BenchInfo describe(const char* name, bool reduces) {
  return {name, "the whole vector: n blocks of count/n elements, one per rank", busBwFactor,
          "(n-1)/n", reduces, /*rooted=*/false, reduces ? reduceScatterCeiling : allGatherCeiling,
          reduces ? "reduce (n-1)/n S with the peers' inputs\n"
                    "  (+ publish (n-1)/n S, private buffers)"
                  : "copy (n-1)/n S of the peers' inputs (private buffers too: single copy;\n"
                    "  out of place the own block's copy is not counted)"};
}

// --- reduce_scatter -----------------------------------------------------------------------------

void rsInit(const BenchContext& ctx, void* send, void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  fillPeriodic(send, p.contribution(ctx.rank), p.period(), p.elemSize(), count);
  if (!inPlace) poison(recv, blockCount(ctx, count) * p.elemSize());
}

Status rsRun(const BenchContext& ctx, const void* send, void* recv, size_t count, bool inPlace) {
  uint8_t* out = static_cast<uint8_t*>(recv) + (inPlace ? ownBlock(ctx, count) : 0);
  return ctx.comm->reduceScatter(send, out, blockCount(ctx, count), ctx.type, ctx.op);
}

size_t rsCheck(const BenchContext& ctx, const void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  const size_t bc = blockCount(ctx, count);
  const uint8_t* out = static_cast<const uint8_t*>(recv) + (inPlace ? ownBlock(ctx, count) : 0);
  return countMismatches(out, p.reduced(), p.period(), p.elemSize(), bc,
                         static_cast<size_t>(ctx.rank) * bc);
}

// --- all_gather ---------------------------------------------------------------------------------

const void* agInput(const BenchContext& ctx, const void* send, void* recv, size_t count,
                    bool inPlace) {
  return inPlace ? static_cast<const uint8_t*>(recv) + ownBlock(ctx, count) : send;
}

void agInit(const BenchContext& ctx, void* send, void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  const size_t bc = blockCount(ctx, count);
  poison(recv, count * p.elemSize());
  fillPeriodic(const_cast<void*>(agInput(ctx, send, recv, count, inPlace)),
               p.contribution(ctx.rank), p.period(), p.elemSize(), bc,
               static_cast<size_t>(ctx.rank) * bc);
}

Status agRun(const BenchContext& ctx, const void* send, void* recv, size_t count, bool inPlace) {
  return ctx.comm->allGather(agInput(ctx, send, recv, count, inPlace), recv, blockCount(ctx, count),
                             ctx.type);
}

size_t agCheck(const BenchContext& ctx, const void* recv, size_t count, bool /*inPlace*/) {
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

}  // namespace

const CollectiveBench& reduceScatterBench() {
  static const CollectiveBench kBench =
      makeBench<Collective::kReduceScatter>(describe("reduce_scatter", true), rsInit, rsRun, rsCheck);
  return kBench;
}

const CollectiveBench& allGatherBench() {
  static const CollectiveBench kBench =
      makeBench<Collective::kAllGather>(describe("all_gather", false), agInit, agRun, agCheck);
  return kBench;
}

}  // namespace braid::perf
