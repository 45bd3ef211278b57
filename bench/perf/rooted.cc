// broadcast and reduce for braid-perf, in nccl-tests' conventions: the size column is the whole
// message (count elements) and busbw = algbw (factor 1: a bandwidth-optimal pipelined broadcast or
// reduce moves the message once over each link, so busbw is comparable with a link's peak).
//   broadcast: the root's input is its pattern; every rank's output must equal it. In place, the
//     root's buffer holds the input and every other rank's buffer is overwritten.
//   reduce: every rank contributes its pattern; the root's output must equal the reduction, and
//     no other rank's output buffer may be written (out of place; in place it holds the input).
#include "bench/perf/harness.h"

namespace braid::perf {
namespace {

double busBwFactor(int /*ranks*/) { return 1.0; }

bool isRoot(const BenchContext& ctx) { return ctx.rank == ctx.root; }

// broadcast: the n-1 copies of the message out of the root's input, shared by all n ranks
// (the root writing part of each other rank's output, as braid's single copy does), with no
// publish: a single copy (process_vm_readv/writev) reads and writes private buffers. reduce:
// reduce-scatter through shared memory (each rank reduces the other ranks' parts into its 1/n
// slice), then the root copies the n-1 slices the others reduced.
CeilingWork broadcastCeiling(const BenchContext& ctx, size_t count) {
  const double s = static_cast<double>(count * ctx.pattern->elemSize());
  return {0, 0, s * (ctx.ranks - 1) / ctx.ranks, CeilingSource::kRootInput};
}
CeilingWork reduceCeiling(const BenchContext& ctx, size_t count) {
  const double share = static_cast<double>(count * ctx.pattern->elemSize()) * (ctx.ranks - 1) /
                       ctx.ranks;
  return {share, share, isRoot(ctx) ? share : 0.0, CeilingSource::kPeersResults};
}

BenchInfo describe(const char* name, bool reduces) {
  return {name, "the whole message (count elements)", busBwFactor, "1", reduces, /*rooted=*/true,
          reduces ? reduceCeiling : broadcastCeiling,
          reduces ? "reduce (n-1)/n S with the peers' inputs, the root copies (n-1)/n S of\n"
                    "  their results (+ publish (n-1)/n S, private buffers)"
                  : "every rank copies (n-1)/n S from the root's input (the n-1 copies\n"
                    "  shared by all; out of place the root's own copy is not counted)"};
}

// --- broadcast ----------------------------------------------------------------------------------

void bcastInit(const BenchContext& ctx, void* send, void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  poison(recv, count * p.elemSize());
  if (!inPlace) poison(send, count * p.elemSize());  // read on the root only
  if (isRoot(ctx)) {
    fillPeriodic(inPlace ? recv : send, p.contribution(ctx.root), p.period(), p.elemSize(), count);
  }
}

Status bcastRun(const BenchContext& ctx, const void* send, void* recv, size_t count,
                bool /*inPlace: send == recv*/) {
  return ctx.comm->broadcast(send, recv, count, ctx.type, ctx.root);
}

size_t bcastCheck(const BenchContext& ctx, const void* recv, size_t count, bool /*inPlace*/) {
  const Pattern& p = *ctx.pattern;
  return countMismatches(recv, p.contribution(ctx.root), p.period(), p.elemSize(), count);
}

// --- reduce -------------------------------------------------------------------------------------

void reduceInit(const BenchContext& ctx, void* send, void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  fillPeriodic(send, p.contribution(ctx.rank), p.period(), p.elemSize(), count);
  if (!inPlace) poison(recv, count * p.elemSize());
}

Status reduceRun(const BenchContext& ctx, const void* send, void* recv, size_t count,
                 bool /*inPlace*/) {
  return ctx.comm->reduce(send, recv, count, ctx.type, ctx.op, ctx.root);
}

size_t reduceCheck(const BenchContext& ctx, const void* recv, size_t count, bool inPlace) {
  const Pattern& p = *ctx.pattern;
  if (isRoot(ctx)) return countMismatches(recv, p.reduced(), p.period(), p.elemSize(), count);
  if (inPlace) return 0;  // the buffer is this rank's input; reduce may use it as it likes
  return countUnpoisoned(recv, p.elemSize(), count);
}

}  // namespace

const CollectiveBench& broadcastBench() {
  static const CollectiveBench kBench =
      makeBench<Collective::kBroadcast>(describe("broadcast", false), bcastInit, bcastRun, bcastCheck);
  return kBench;
}

const CollectiveBench& reduceBench() {
  static const CollectiveBench kBench =
      makeBench<Collective::kReduce>(describe("reduce", true), reduceInit, reduceRun, reduceCheck);
  return kBench;
}

}  // namespace braid::perf
