// Hierarchical reduce-scatter, for H hosts that hold L ranks each (p = H·L).
//
// Rank (h, j) is the rank with local index j on host h; its block (b bytes) sits at its global
// rank's place in the vector. The "pack" of local index j is the H blocks of ranks (0, j) ..
// (H−1, j), in host order. A flat ring crosses every host's link with (p−1)·b bytes per
// direction; this sends only the (H−1)·L·b = (p−L)·b the other hosts need, so on 2 hosts × 2
// ranks the link carries 2/3 of the ring's bytes.
//
// Schedule:
//   1. the input's blocks are laid out pack by pack ([j][h]) in a staging area;
//   2. intra: ring reduce-scatter of the packs among the L ranks of the host: rank (h, j) gets
//      pack j summed over its host;
//   3. inter: ring reduce-scatter of that pack among the ranks (·, j) of every host: each gets
//      its own block, summed over every host. kAvg sums and divides once, by p.
// Cost (S = p·b; packRingsUs in host_plan.cc): S·B_copy⁻¹ (the layout) + (L−1)·(α_host +
//   S/L·β_host + S/L·γ) + (H−1)·(α_net + S/p·β_net·L + S/p·γ): the L groups share each host's
//   link, (p−L)/p·S per direction.
// Unequal hosts (3 + 1) run the flat ring, as does a single host.
//
// With a segment on every host (L > 1, not BRAID_TRANSPORT=tcp) the two steps run through it
// instead, pipelined (runThroughSegment): no intra-host ring, no staging layout, and the link
// busy while the host reduces. Pieces: slice c (n elements) of every one of the p blocks, the
// p slices together a hierarchicalPieceBytes. Per piece, rank (h, j):
//   A(c): copies slice c of every block outside its pack into its half slot (generation g_c)
//     and arrives; then reduces slice c of each block of its pack, (q, j) for every host q,
//     across the host's L ranks (its own contribution from its input): q = h into its output,
//     the others into a send buffer;
//   B(c): posts the host sum of block (q, j) to rank (q, j) of every other host, and a receive
//     of each other host's sum of its own block;
//   W(c): waits for piece c's messages and adds the other hosts' sums into its output.
// Order: A(0) B(0) | A(c+1) B(c+1) W(c) | ...: piece c is on the wire while piece c+1 is reduced
// in the host. Cost (packRingsUs): per rank (1 − 1/L)·S copied in and (L−1)/L·S·γ reduced in
// the host, (H−1)/H·S over each host's link, overlapped piece by piece. Measured on the emulated
// 2 hosts × 2 ranks at 1 Gbit/s (braid-perf-reducescatter -a hierarchical, two runs each, against
// the two rings): 4 MiB 18.9–20.5 ms against 20.7–27.0, 16 MiB 79.4–80.7 against 91.7–101.3
// (link bound 16.8 and 67.1 ms: 83–89% of it against 62–81%); 512 KiB 2.27 against 2.9.
#include <algorithm>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/host_plan.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {
namespace {

Status runThroughSegment(const CollArgs& a, const Packs& l, ShmSegment* seg, const void* sendbuf,
                         void* recvbuf, size_t b) {
  SegmentPieces s;
  BRAID_RETURN_IF_ERROR(planSegmentPieces(a, l, seg, b, &s));
  const int H = s.H, L = s.L, h = s.h, j = s.j;
  const size_t es = a.elemSize, n = s.slice, npieces = s.npieces;
  auto rankOf = [&](int q, int jj) { return static_cast<size_t>(s.rankOf(q, jj)); };
  const size_t others = static_cast<size_t>(H - 1);
  // Per piece parity: the host sums for the other hosts, then their sums of this rank's block.
  uint8_t* scratch = a.scratch->get(4 * others * n * es + 64);
  auto sendTmp = [&](size_t c, int q) {
    return scratch + ((c & 1) * others + static_cast<size_t>(q < h ? q : q - 1)) * n * es;
  };
  auto recvTmp = [&](size_t c, int q) { return sendTmp(c, q) + 2 * others * n * es; };
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  std::vector<P2p::Handle> handles[2];
  auto reduceInHost = [&](size_t c) -> Status {  // A(c)
    const size_t off = c * n, m = std::min(n, b - off);
    const uint64_t gen = seg->nextGeneration();
    const int half = static_cast<int>(gen & 1);
    uint8_t* slot = seg->half(j, half);
    for (int jj = 0; jj < L; ++jj) {
      if (jj == j) continue;
      for (int q = 0; q < H; ++q) {
        copyToShared(slot + static_cast<size_t>(jj * H + q) * m * es,
                     in + (rankOf(q, jj) * b + off) * es, m * es);
      }
    }
    seg->arrive(gen, a.seq, a.fp);
    BRAID_RETURN_IF_ERROR(seg->waitArrived(gen, c == 0));
    for (int q = 0; q < H; ++q) {
      uint8_t* sum = q == h ? out + off * es : sendTmp(c, q);
      const uint8_t* mine = in + (rankOf(q, j) * b + off) * es;
      for (int i = 0; i < L; ++i) {
        if (i == j) continue;
        a.reduce(sum, mine, seg->half(i, half) + static_cast<size_t>(j * H + q) * m * es, m);
        mine = sum;
      }
    }
    return Status::ok();
  };
  auto post = [&](size_t c) {  // B(c)
    const size_t m = std::min(n, b - c * n);
    handles[c & 1].clear();
    for (int q = 0; q < H; ++q) {
      if (q == h) continue;
      const int peer = static_cast<int>(rankOf(q, j));
      handles[c & 1].push_back(net.postRecv(peer, recvTmp(c, q), m * es));
      handles[c & 1].push_back(net.postSend(peer, sendTmp(c, q), m * es));
    }
  };
  auto finish = [&](size_t c) -> Status {  // W(c)
    const size_t off = c * n, m = std::min(n, b - off);
    for (P2p::Handle hd : handles[c & 1]) BRAID_RETURN_IF_ERROR(net.wait(hd));
    for (int q = 0; q < H; ++q) {
      if (q != h) a.reduce(out + off * es, out + off * es, recvTmp(c, q), m);
    }
    return Status::ok();
  };
  BRAID_RETURN_IF_ERROR(reduceInHost(0));
  post(0);
  for (size_t c = 0; c < npieces; ++c) {
    if (c + 1 < npieces) {
      BRAID_RETURN_IF_ERROR(reduceInHost(c + 1));
      post(c + 1);
    }
    BRAID_RETURN_IF_ERROR(finish(c));
  }
  BRAID_RETURN_IF_ERROR(net.waitAll());
  if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, recvbuf, b, a.size);
  return Status::ok();
}

}  // namespace

namespace reduce_scatter_hierarchical {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t recvcount, int /*root*/) {
  Packs l;
  if (!makePacks(a, &l)) return reduceScatterRing(a, sendbuf, recvbuf, recvcount);
  if (ShmSegment* seg = piecesSegment(a, l); seg != nullptr && recvcount > 0) {
    return runThroughSegment(a, l, seg, sendbuf, recvbuf, recvcount);
  }
  const size_t b = recvcount * a.elemSize;
  const size_t packBytes = b * static_cast<size_t>(l.hosts);
  const size_t all = packBytes * static_cast<size_t>(l.local);
  uint8_t* stage = a.outerScratch->get(all + packBytes + 64);
  uint8_t* pack = stage + all;  // this rank's pack, summed over its host
  const std::vector<int> g = packOrder(a, l.hosts, l.local);
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  for (size_t i = 0; i < g.size(); ++i) {
    copyBytes(stage + i * b, in + static_cast<size_t>(g[i]) * b, b);
  }
  CollArgs sum = a;
  if (a.op == ReduceOp::kAvg) sum.op = ReduceOp::kSum;
  BRAID_RETURN_IF_ERROR(reduceScatterRing(overGroup(sum, l.plan.localRanks, l.plan.local), stage,
                                          pack, recvcount * static_cast<size_t>(l.hosts)));
  BRAID_RETURN_IF_ERROR(
      reduceScatterRing(overGroup(sum, l.plan.group, l.plan.host), pack, recvbuf, recvcount));
  if (a.op == ReduceOp::kAvg) scaleForAvg(a.type, recvbuf, recvcount, a.size);
  return Status::ok();
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t chunkBytes) {
  return packRingsUs(m, bytes, true, chunkBytes);
}

}  // namespace reduce_scatter_hierarchical
}  // namespace braid::detail
