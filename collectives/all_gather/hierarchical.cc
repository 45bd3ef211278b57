// Hierarchical all-gather, for H hosts that hold L ranks each (p = H·L).
//
// Rank (h, j) is the rank with local index j on host h; its block (b bytes) sits at its global
// rank's place in the vector. The "pack" of local index j is the H blocks of ranks (0, j) ..
// (H−1, j), in host order. A flat ring crosses every host's link with (p−1)·b bytes per
// direction; this sends only the (H−1)·L·b = (p−L)·b the other hosts need, so on 2 hosts × 2
// ranks the link carries 2/3 of the ring's bytes.
//
// Schedule:
//   1. inter: ring all-gather among the ranks (·, j) of every host: each gets pack j, written
//      into its own pack's place of a staging area laid out pack by pack ([j][h]);
//   2. intra: ring all-gather of the packs among the L ranks of the host, in place in the
//      staging area;
//   3. every block moves from [j][h] to its global rank's place in the output.
// Cost (S = p·b; packRingsUs in host_plan.cc): (L−1)·(α_host + S/L·β_host) + (H−1)·(α_net +
//   S/p·β_net·L) + S·B_copy⁻¹ (the layout): the L groups share each host's link, (p−L)/p·S per
//   direction.
// Unequal hosts (3 + 1) run the flat ring, as does a single host.
//
// With a segment on every host (L > 1, not BRAID_TRANSPORT=tcp) the two steps run through it
// instead, pipelined (runThroughSegment): no intra-host ring, no staging layout, and the link
// busy while the host copies. Pieces: slice c (n elements) of every one of the p blocks, the p
// slices together a hierarchicalPieceBytes. Per piece, rank (h, j):
//   B(c): posts slice c of its block to rank (q, j) of every other host, and receives of theirs
//     straight into its output;
//   W(c): waits for piece c's messages;
//   C(c): copies slice c of its pack's H blocks (its own from its input, the others from its
//     output) into its half slot (generation g_c) and arrives; then copies slice c of the other
//     packs out of the other local ranks' slots into its output.
// Order: B(0) | B(c+1) W(c) C(c) | ...: piece c+1 is on the wire while piece c is spread in the
// host. Cost (packRingsUs): per rank S/L copied in and (L−1)/L·S out in the host, (H−1)/H·S
// over each host's link, overlapped piece by piece. Measured on the emulated 2 hosts × 2 ranks
// at 1 Gbit/s (braid-perf-allgather -a hierarchical, two runs each, against the two rings):
// 4 MiB 20.1–22.7 ms against 23.4–33.8, 16 MiB 79.5–81.0 against 87.8–100.7 (link bound 16.8
// and 67.1 ms); 512 KiB 2.4–2.8 against 3.0–3.9.
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
  auto blockOf = [&](int q, int jj) { return static_cast<size_t>(s.rankOf(q, jj)) * b * es; };
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  copyIfDistinct(out + blockOf(h, j), in, b * es);  // out of place: the own block
  P2p& net = *a.p2p;
  net.begin(a.seq, a.fp);
  std::vector<P2p::Handle> handles[2];
  auto post = [&](size_t c) {  // B(c)
    const size_t off = c * n * es, m = std::min(n, b - c * n) * es;
    handles[c & 1].clear();
    for (int q = 0; q < H; ++q) {
      if (q == h) continue;
      const int peer = s.rankOf(q, j);
      handles[c & 1].push_back(net.postRecv(peer, out + blockOf(q, j) + off, m));
      handles[c & 1].push_back(net.postSend(peer, in + off, m));
    }
  };
  auto spreadInHost = [&](size_t c) -> Status {  // W(c) C(c)
    const size_t off = c * n * es, m = std::min(n, b - c * n) * es;
    for (P2p::Handle hd : handles[c & 1]) BRAID_RETURN_IF_ERROR(net.wait(hd));
    const uint64_t gen = seg->nextGeneration();
    const int half = static_cast<int>(gen & 1);
    uint8_t* slot = seg->half(j, half);
    for (int q = 0; q < H; ++q) {
      copyToShared(slot + static_cast<size_t>(q) * m, out + blockOf(q, j) + off, m);
    }
    seg->arrive(gen, a.seq, a.fp);
    BRAID_RETURN_IF_ERROR(seg->waitArrived(gen, c == 0));
    for (int i = 0; i < L; ++i) {
      if (i == j) continue;
      const uint8_t* theirs = seg->half(i, half);
      for (int q = 0; q < H; ++q) {
        copyBytes(out + blockOf(q, i) + off, theirs + static_cast<size_t>(q) * m, m);
      }
    }
    return Status::ok();
  };
  post(0);
  for (size_t c = 0; c < npieces; ++c) {
    if (c + 1 < npieces) post(c + 1);
    BRAID_RETURN_IF_ERROR(spreadInHost(c));
  }
  return net.waitAll();
}

}  // namespace

namespace all_gather_hierarchical {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t sendcount, int /*root*/) {
  Packs l;
  if (!makePacks(a, &l)) return allGatherRing(a, sendbuf, recvbuf, sendcount);
  if (ShmSegment* seg = piecesSegment(a, l); seg != nullptr && sendcount > 0) {
    return runThroughSegment(a, l, seg, sendbuf, recvbuf, sendcount);
  }
  const size_t b = sendcount * a.elemSize;
  const size_t packBytes = b * static_cast<size_t>(l.hosts);
  uint8_t* stage = a.outerScratch->get(packBytes * static_cast<size_t>(l.local) + 64);
  uint8_t* myPack = stage + packBytes * static_cast<size_t>(l.plan.local);
  BRAID_RETURN_IF_ERROR(
      allGatherRing(overGroup(a, l.plan.group, l.plan.host), sendbuf, myPack, sendcount));
  BRAID_RETURN_IF_ERROR(allGatherRing(overGroup(a, l.plan.localRanks, l.plan.local), myPack, stage,
                                      sendcount * static_cast<size_t>(l.hosts)));
  const std::vector<int> g = packOrder(a, l.hosts, l.local);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  for (size_t i = 0; i < g.size(); ++i) {
    copyBytes(out + static_cast<size_t>(g[i]) * b, stage + i * b, b);
  }
  return Status::ok();
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t chunkBytes) {
  return packRingsUs(m, bytes, false, chunkBytes);
}

}  // namespace all_gather_hierarchical
}  // namespace braid::detail
