// Same-host all-reduce in the shared segment, with no message passing.
//
// Schedule for a message of at most H bytes in one chunk (H = half of a rank's slot; the two halves
// alternate between calls, so that the next call's data is written while slow ranks still read
// this one's), and at most a.shmPlan.oneChunkMaxBytes (LLC/8L: one chunk's working set in the
// cache; selector/cost_model.h):
//   small chunks (≤ kSmallBytes, 16 KiB; 64 KiB when the machine's ranks outnumber its cores,
//     where a second hand-off costs more context switches than the extra reductions: 4 ranks on
//     2 cores reduce 32 KiB in 21 µs this way, in 33 µs the large way):
//     copy in → arrive → every rank reduces the whole chunk from all p slots in rank order into
//     its own output (one synchronization, identical results). With ranks outnumbering cores,
//     from kFoldOnceMinBytes (1 KiB), one rank folds for all instead: the first to claim the
//     generation (ShmSegment::claim) reduces the p slots into its own slot and raises its done
//     flag; the others wait for that flag alone and copy the result out. (p − 1) folds of the
//     chunk where there were p·(p − 1), on cores that run the ranks one after another.
//     Measured on the 2-core EPYC VM (braid-perf, 3 alternated rounds, medians, out of place,
//     fold once against every rank folding): 8 ranks 4 KiB 14.8 µs against 14.6 (25.4 in a slower
//     spell), 32 KiB 46 against 55, 64 KiB 72 against 118; 4 ranks 1 KiB 3.8 against 5.6,
//     4 KiB 7.3 against 9.3, 32 KiB 24 against 34, 64 KiB 42 against 54; at 64 B the wait
//     for the folding rank cost a hand-off (4 ranks 5.8 µs against 4.2), at 512 B they tied;
//   large chunks: copy in → arrive → rank i reduces shard i (n/p elements) across the p slots in
//     place in its own slot → done → every rank copies the p reduced shards out. Where the ranks
//     may write each other's memory (ShmSegment::singleCopyMinBytes(), from 16 KiB), every rank
//     has a core, and the calibrated single copy is quick enough against a copy through the
//     segment (a.shmPlan.push: selector/cost_model.h), rank i instead writes its reduced
//     shard straight into every peer's receive buffer (process_vm_writev) → done: one copy of
//     the shard where there were two.
//     Measured on the 2-core Intel VM (braid-perf --ranks 2 --rounds 3, BRAID_SHM_CMA=off
//     against auto, two runs each): out of place 256 KiB 29 µs against 38–44, 512 KiB 52
//     against 65–74, 1 MiB 127 against 168–194, 2 MiB 305–309 against 352–374; in place equal
//     at 256–512 KiB, 124–138 against 126–154 at 1 MiB, 258–265 against 292–303 at 2 MiB.
// Messages over one half slot (4 MiB by default) take the single copy below (runSingleCopy) up to
// 32 MiB where every rank has a core, may write the others' memory and BRAID_SHM_CMA=on forces
// it (a.shmPlan.tiled); otherwise (and beyond, and over oneChunkMaxBytes) the pipelined
// schedule of hierarchical.cc, which on one host is the large path above in pieces cycled over
// four quarter slots, each rank publishing piece c+1 before it gathers piece c: a rank that the
// scheduler parks holds the others up less. A piece is the pipelining chunk (1 MiB), at most
// a.shmPlan.pieceMaxBytes (LLC/64L: 256 KiB for 2 ranks and 32 MiB). Measured on the 2-core VM
// (braid-perf -a shm,hierarchical --rounds 7, 4–64 MiB, 1 MiB pieces): 4 ranks 0–11% faster in
// all six rows, 2 ranks within ±4% either way.
// Cost for S bytes: small: α_sync + S/B_copy + (p−1)·S·γ (crowded, every rank folding: the
//   reductions times the ranks per core; one rank folding: 2·α_sync + 2·S/B_copy + (p−1)·S·γ);
//   large: 2·α_sync +
//   (p−1)/p·S/B_copy (in) + (p−1)/p·S·γ (reduce) + S/p/B_copy (publish) + (p−1)/p·S/B_copy
//   (out), where α_sync is one cache-line hand-off (~0.1–1 µs), B_copy the memory copy bandwidth
//   and γ the reduction cost per byte. Nothing is sent over a transport; there is no (p−1)/p
//   bandwidth term.
#include <algorithm>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {
namespace {

constexpr size_t kSmallBytes = 16 * 1024;
constexpr size_t kSmallBytesCrowded = 64 * 1024;  // ranks outnumber cores
// Ranks outnumber cores: from here one rank folds a small chunk for all (see the top).
constexpr size_t kFoldOnceMinBytes = 1024;

// Send and receive buffers in shared windows on every rank (Communicator::allocShared): the
// ranks read each other's buffers where they lie, so none of the staging copies below happens.
//   arrive (publishing the two buffers' window references) → rank i folds shard i of the p send
//   buffers in rank order through an L1 tile and streams it into its receive buffer (non-
//   temporal stores: the peers then read it from L3 or memory, not from lines dirty in this
//   core's cache) → done → every rank copies the other shards from the peers' receive buffers →
//   a last hand-off, so that no rank returns (and lets its caller rewrite its buffers) while a
//   peer still reads them.
// Per rank: (p−1)/p·S read from the peers in the fold, S/p streamed out, (p−1)/p·S copied in;
// three hand-offs. On the 2-core VM (2 ranks, braid-perf -R 0 vs -R 1, interleaved) 1.6× quicker
// at 1 MiB and 1.9× at 4 MiB out of place; in place (the input rewritten by the previous call)
// 1.05× and 1.3×.
Status runInWindows(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count) {
  const int p = a.shm->localSize();
  const int me = a.shm->localIndex();
  const size_t es = a.elemSize;
  WindowedCall w;
  BRAID_RETURN_IF_ERROR(beginInSharedWindows(a, sendbuf, count * es, recvbuf, count * es, &w));
  uint8_t* dst = static_cast<uint8_t*>(recvbuf);
  const size_t lo = blockStart(count, p, me);
  const size_t hi = blockStart(count, p, me + 1);
  foldSharedWindows(a, w, lo, hi - lo, dst + lo * es, /*stream=*/true);
  a.shm->markDone(w.g);
  BRAID_RETURN_IF_ERROR(a.shm->waitDone(w.g));
  for (int i = 0; i < p; ++i) {
    if (i == me) continue;
    const size_t ilo = blockStart(count, p, i);
    const size_t ihi = blockStart(count, p, i + 1);
    copyBytes(dst + ilo * es, w.recv[i] + ilo * es, (ihi - ilo) * es);
  }
  return endInSharedWindows(a);
}

// Single copy, any size (ShmSegment::singleCopy(), messages over one half slot): after one
// hand-off that publishes every rank's buffer addresses, rank i alone touches elements
// [lo_i, hi_i) of every rank's buffers: it reads them from the peers' inputs tile by tile
// (process_vm_readv into a tile that stays in L2), folds them into its own output, and writes
// each reduced tile into every peer's output (process_vm_writev); a last hand-off keeps every
// buffer alive until all are written. No staging slot: no half-slot limit and no pipelining.
// Taken where every rank has a core, up to kSingleCopyMaxBytes, only where forced
// (BRAID_SHM_CMA=on; a.shmPlan.tiled: selector/cost_model.h): the calibrated rates did not tell
// the machines where it pays from those where it lost 3x. The pipelined schedule of
// hierarchical.cc otherwise. Measured on the 2-core Intel VM (braid-perf --ranks 2, two runs
// each, against hierarchical): 8 MiB 1.23–1.25 ms against 1.71–2.26 out of place, 0.83–0.91
// against 1.45–2.06 in place; 16 MiB 3.1–3.3 against 4.2–5.3, 1.7–1.8 against 3.3–3.4; 32 MiB
// 9.9–10.9 against 8.7–12.3, 4.0–5.1 against 6.0–7.4; 128 MiB 45.7–47.9 against 37.0–42.9 out of
// place (in place 27.5–30.0 against 33.7–36.7). With 4 ranks on the 2 cores it lost out of place
// (8 MiB 6.0 ms against 5.2). On the 2-core EPYC VM, 2 ranks, it lost 3x (BRAID_SHM_CMA=on
// against off, alternated): 8 MiB 5.4-5.7 ms against 1.5-1.9, 16 MiB 10.4-10.9 against 3.7-3.9.
constexpr size_t kSingleCopyTileBytes = 256 * 1024;
constexpr size_t kSingleCopyMaxBytes = 32u << 20;

Status runSingleCopy(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count) {
  ShmSegment* seg = a.shm;
  const int p = seg->localSize();
  const int me = seg->localIndex();
  const size_t es = a.elemSize;
  SingleCopyCall c;
  BRAID_RETURN_IF_ERROR(beginSingleCopy(a, sendbuf, recvbuf, &c));
  const size_t lo = blockStart(count, p, me);
  const size_t hi = blockStart(count, p, me + 1);
  const size_t tileCount = std::max<size_t>(1, kSingleCopyTileBytes / es);
  uint8_t* tile = a.scratch->get(std::min(hi - lo, tileCount) * es);
  const uint8_t* src = static_cast<const uint8_t*>(sendbuf);
  uint8_t* dst = static_cast<uint8_t*>(recvbuf);
  for (size_t first = lo; first < hi; first += tileCount) {
    const size_t n = std::min(tileCount, hi - first);
    const size_t off = first * es;
    const uint8_t* mine = src + off;
    for (int k = 1; k < p; ++k) {
      const int i = (me + k) % p;
      BRAID_RETURN_IF_ERROR(seg->readPeer(i, tile, c.send[i] + off, n * es));
      a.reduce(dst + off, mine, tile, n);
      mine = dst + off;
    }
    if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, dst + off, n, p);
    for (int k = 1; k < p; ++k) {
      const int i = (me + k) % p;
      BRAID_RETURN_IF_ERROR(seg->writePeer(i, c.recv[i] + off, dst + off, n * es));
    }
  }
  return endInSharedWindows(a);
}

}  // namespace

namespace allreduce_shm {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int /*root*/) {
  // One rank: every algorithm is a copy (a 1-rank communicator has no intra-host segment).
  if (a.size == 1) return allReduceRing(a, sendbuf, recvbuf, count);
  ShmSegment* seg = a.shm;
  if (seg == nullptr) return internalError("shm all-reduce needs every rank on one host");
  const size_t bytes = count * a.elemSize;
  if (inSharedWindows(a)) return runInWindows(a, sendbuf, recvbuf, count);
  if (bytes > seg->halfBytes() || bytes > a.shmPlan.oneChunkMaxBytes) {
    if (bytes > seg->halfBytes() && a.shmPlan.tiled && bytes <= kSingleCopyMaxBytes) {
      return runSingleCopy(a, sendbuf, recvbuf, count);
    }
    CollArgs pieces = a;
    pieces.chunkBytes = std::min(a.chunkBytes, a.shmPlan.pieceMaxBytes);
    return allReduceHierarchical(pieces, sendbuf, recvbuf, count, false);
  }
  // One chunk (at most a half slot). count == 0 still synchronizes once, so that a mismatch
  // (0 vs n) is detected.
  const int p = seg->localSize();
  const int me = seg->localIndex();
  const size_t es = a.elemSize;
  const uint8_t* src = static_cast<const uint8_t*>(sendbuf);
  uint8_t* dst = static_cast<uint8_t*>(recvbuf);
  const uint64_t g = seg->nextGeneration();
  const int h = static_cast<int>(g & 1);
  const bool small = bytes <= (seg->oversubscribed() ? kSmallBytesCrowded : kSmallBytes) || p == 1;
  // Large chunks: this rank's own shard is reduced straight from its input, so only the other
  // ranks' shards need publishing (saves 1/p of the copy).
  const size_t lo = small ? 0 : blockStart(count, p, me);
  const size_t hi = small ? 0 : blockStart(count, p, me + 1);
  copyToShared(seg->half(me, h), src, lo * es);
  copyToShared(seg->half(me, h) + hi * es, src + hi * es, (count - hi) * es);
  const bool pushOut = !small && a.shmPlan.push && bytes >= seg->singleCopyMinBytes();
  if (pushOut) seg->setWindowRefs(g, 0, reinterpret_cast<uintptr_t>(recvbuf));
  seg->arrive(g, a.seq, a.fp);
  BRAID_RETURN_IF_ERROR(seg->waitArrived(g, true));
  if (small && seg->oversubscribed() && p > 1 && bytes >= kFoldOnceMinBytes) {
    // Ranks outnumber cores: one rank folds, the others copy its result. The first to claim
    // the generation (usually the last to arrive, the one on a core) folds the p contributions
    // in rank order into its own slot (its own from its input, which it has not written yet),
    // then raises its done flag; everyone copies the slot out. p − 1 folds of the chunk where
    // every rank folding took p·(p − 1), on cores that run the ranks one after another.
    const int r = seg->claim(g);
    uint8_t* result = seg->half(r, h);
    if (r == me) {
      auto contribution = [&](int i) -> const uint8_t* { return i == me ? src : seg->half(i, h); };
      a.reduce(result, contribution(0), contribution(1), count);
      for (int i = 2; i < p; ++i) a.reduce(result, result, contribution(i), count);
      if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, result, count, p);
      seg->markDone(g);
    } else {
      BRAID_RETURN_IF_ERROR(seg->waitDoneFrom(r, g));
    }
    copyBytes(dst, result, bytes);
    return Status::ok();
  }
  if (small) {
    // Every rank folds the p contributions in rank order, so all get the same bits; its own
    // contribution is read from its input (in cache), not from its streamed-out slot.
    // In place, ranks ≥ 2 would overwrite their input before folding it in: use the slot.
    const uint8_t* own = (dst == src && me >= 2) ? seg->half(me, h) : src;
    auto contribution = [&](int i) -> const uint8_t* { return i == me ? own : seg->half(i, h); };
    if (p == 1) {
      copyIfDistinct(dst, own, bytes);
    } else {
      a.reduce(dst, contribution(0), contribution(1), count);
      for (int i = 2; i < p; ++i) a.reduce(dst, dst, contribution(i), count);
    }
    if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, dst, count, p);
    return Status::ok();
  }
  // Reduce this rank's shard into its own output, then publish it in its slot (streamed, so the
  // peers read it from memory rather than from this core's cache; see core/copy.h).
  uint8_t* out = dst + lo * es;
  const uint8_t* mine = src + lo * es;
  for (int i = 0; i < p; ++i) {
    if (i == me) continue;
    a.reduce(out, mine, seg->half(i, h) + lo * es, hi - lo);
    mine = out;
  }
  if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, out, hi - lo, p);
  if (pushOut) {
    // The reduced shard straight into every peer's receive buffer (one copy instead of the
    // publish and the peer's copy out), then a hand-off so that nobody returns before its
    // buffer is whole.
    for (int k = 1; k < p; ++k) {
      const int i = (me + k) % p;
      const uint64_t peerOut = seg->peerRef(i, g, false) + lo * es;
      BRAID_RETURN_IF_ERROR(seg->writePeer(i, peerOut, out, (hi - lo) * es));
    }
    seg->markDone(g);
    return seg->waitDone(g);
  }
  copyToShared(seg->half(me, h) + lo * es, out, (hi - lo) * es);
  seg->markDone(g);
  BRAID_RETURN_IF_ERROR(seg->waitDone(g));
  for (int i = 0; i < p; ++i) {
    if (i == me) continue;
    const size_t ilo = blockStart(count, p, i);
    const size_t ihi = blockStart(count, p, i + 1);
    copyBytes(dst + ilo * es, seg->half(i, h) + ilo * es, (ihi - ilo) * es);
  }
  return Status::ok();
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

// On one host of L ranks, up to one half slot (beyond it, hierarchical.cc's pipelined schedule,
// priced by allReduceHierarchicalUs). Copies and reductions slow out of cache like everything
// else that streams memory.
double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t chunkBytes) {
  const FabricModel& f = m.model();
  const int L = m.placement().size();
  const ShmPlan how = m.shmPlan();
  if (bytes > m.placement().segmentHalfBytes || bytes > how.oneChunkMaxBytes) {
    return allReduceHierarchicalUs(m, bytes, false, std::min(chunkBytes, how.pieceMaxBytes));
  }
  const double cpu = m.cpuShare(L);
  const double mem = m.memoryFactor(static_cast<double>(bytes));  // copies and reductions
  const double dn = static_cast<double>(bytes);
  // sync and copy were measured with every local rank at once (their contention included);
  // the reduction kernel alone on one core, so it pays the oversubscription.
  if (bytes <= (m.crowded() ? kSmallBytesCrowded : kSmallBytes)) {
    // One hand-off: arrive, then every rank folds all slots, or with the ranks outnumbering the
    // cores one rank folds them while the others wait, then all copy its result out.
    // Below 16 KiB the copy is a memcpy whose lines the peers pull from this core's cache.
    const double copy = dn * f.segmentCopyUsPerByte(dn);
    if (m.crowded() && bytes >= kFoldOnceMinBytes) {
      // Two hand-offs: every rank's arrival, then the folding rank's done flag (at 64 B this
      // wait cost 4 ranks on 2 cores 5.8 us against 4.2 for every rank folding).
      return 2 * f.syncUs + mem * (2 * copy + (L - 1) * dn * f.gammaUsPerByte);
    }
    return f.syncUs + mem * (copy + cpu * (L - 1) * dn * f.gammaUsPerByte);
  }
  // Copies: the others' shards in ((L−1)/L), the reduced own shard back (1/L), the others'
  // reduced shards out ((L−1)/L); with the single copy, no shard back: the own reduced shard
  // goes straight into the L − 1 peers' outputs ((L−1)/L).
  const bool push = bytes >= m.placement().singleCopyMinBytes && how.push;
  const double copies = push ? 2.0 * (L - 1) / L : 2.0 - 1.0 / L;
  return 2 * f.syncUs +
         mem * (copies * dn * f.copyUsPerByte + cpu * (L - 1) * dn / L * f.gammaUsPerByte);
}

}  // namespace allreduce_shm
}  // namespace braid::detail
