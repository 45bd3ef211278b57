// Recursive halving/doubling all-reduce (Rabenseifner), correct for any p.
//
// Schedule: let q = 2^⌊log2 p⌋ and e = p − q. Fold: among ranks 0..2e−1, each even rank sends its
// whole vector to the next odd rank, which reduces it; the even ranks then sit out. The q
// remaining ranks (renumbered 0..q−1) run a reduce-scatter by recursive halving (in round k,
// exchange half of the current range with the partner at distance q/2^(k+1), keep and reduce the
// half on this rank's side), then an all-gather by recursive doubling (the same rounds in
// reverse). Unfold: each odd rank of the first 2e sends the result to its even partner.
// Cost: 2·log2 q·α + 2·(q−1)/q·S·β + (q−1)/q·S·γ, plus 2·(α + S·β) + S·γ for the fold when p is
// not a power of two (cost() below prices these phases on the real placement). Latency of the
// tree, bandwidth of the ring.
// Runs over CollArgs::group when set (r and p are then positions in the group).
#include "collectives/algorithms.h"
#include "collectives/selector/cost_model.h"

namespace braid::detail {

Status allReduceHalvingDoubling(const CollArgs& a, const void* sendbuf, void* recvbuf,
                                size_t count) {
  uint8_t* buf = beginAllReduce(a, sendbuf, recvbuf, count);
  if (a.size == 1) return Status::ok();
  const int p = a.size, r = a.rank;
  const size_t es = a.elemSize;
  P2p& net = *a.p2p;
  int q = 1;
  while (q * 2 <= p) q *= 2;
  const int extra = p - q;
  uint8_t* tmp = a.scratch->get(count * es + 64);

  // Fold the first 2·extra ranks pairwise.
  int v = -1;  // rank among the q participants, -1 when sitting out
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      net.postSend(a.peer(r + 1), buf, count * es);
      BRAID_RETURN_IF_ERROR(net.waitAll());
    } else {
      net.postRecv(a.peer(r - 1), tmp, count * es);
      BRAID_RETURN_IF_ERROR(net.waitAll());
      if (count > 0) a.reduce(buf, buf, tmp, count);
      v = r / 2;
    }
  } else {
    v = r - extra;
  }
  auto realRank = [&](int vr) { return a.peer(vr < extra ? vr * 2 + 1 : vr + extra); };

  if (v >= 0) {
    // Reduce-scatter by recursive halving over q blocks; [lo, hi) is the block range owned.
    int lo = 0, hi = q;
    for (int dist = q / 2; dist >= 1; dist /= 2) {
      const int partner = v ^ dist;
      const int mid = (lo + hi) / 2;
      int keepLo, keepHi, sendLo, sendHi;
      if (v < partner) {
        keepLo = lo, keepHi = mid, sendLo = mid, sendHi = hi;
      } else {
        keepLo = mid, keepHi = hi, sendLo = lo, sendHi = mid;
      }
      const size_t kb = blockStart(count, q, keepLo), ke = blockStart(count, q, keepHi);
      const size_t sb = blockStart(count, q, sendLo), se = blockStart(count, q, sendHi);
      net.postRecv(realRank(partner), tmp + kb * es, (ke - kb) * es);
      net.postSend(realRank(partner), buf + sb * es, (se - sb) * es);
      BRAID_RETURN_IF_ERROR(net.waitAll());
      if (ke > kb) a.reduce(buf + kb * es, buf + kb * es, tmp + kb * es, ke - kb);
      lo = keepLo, hi = keepHi;
    }
    if (a.op == ReduceOp::kAvg) {
      const size_t b = blockStart(count, q, lo), e = blockStart(count, q, hi);
      scaleForAvg(a.type, buf + b * es, e - b, p);
    }
    // All-gather by recursive doubling: the same partners in reverse order.
    for (int dist = 1; dist < q; dist *= 2) {
      const int partner = v ^ dist;
      const int width = hi - lo;
      int otherLo = (v & dist) ? lo - width : hi;
      int otherHi = otherLo + width;
      const size_t mb = blockStart(count, q, lo), me = blockStart(count, q, hi);
      const size_t ob = blockStart(count, q, otherLo), oe = blockStart(count, q, otherHi);
      net.postRecv(realRank(partner), buf + ob * es, (oe - ob) * es);
      net.postSend(realRank(partner), buf + mb * es, (me - mb) * es);
      BRAID_RETURN_IF_ERROR(net.waitAll());
      lo = std::min(lo, otherLo), hi = std::max(hi, otherHi);
    }
  }

  // Unfold: odd ranks of the first 2·extra give the result to their even partner.
  if (r < 2 * extra) {
    if (r % 2 == 1) {
      net.postSend(a.peer(r - 1), buf, count * es);
    } else {
      net.postRecv(a.peer(r + 1), buf, count * es);
    }
    BRAID_RETURN_IF_ERROR(net.waitAll());
  }
  return Status::ok();
}

namespace allreduce_halving_doubling {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int /*root*/) {
  return allReduceHalvingDoubling(a, sendbuf, recvbuf, count);
}

// Fold the first 2e ranks pairwise, then log2 q rounds of recursive halving (farthest partner
// first) and the same rounds back, then unfold.
void plan(const CostModel& m, CostPlan* plan) {
  const int p = m.placement().size();
  std::vector<CostModel::Phase>& phases = plan->phases;
  int q = 1;
  while (q * 2 <= p) q *= 2;
  const int extra = p - q;
  auto real = [&](int v) { return v < extra ? v * 2 + 1 : v + extra; };
  if (extra > 0) {
    CostModel::Messages fold;
    for (int i = 0; i < extra; ++i) fold.push_back({2 * i, 2 * i + 1});
    phases.push_back(m.makePhase(fold, 1, 1, 1));
  }
  double frac = 1;
  std::vector<CostModel::Phase> rounds;
  for (int dist = q / 2; dist >= 1; dist /= 2) {
    frac /= 2;
    CostModel::Messages msgs;
    for (int v = 0; v < q; ++v) msgs.push_back({real(v), real(v ^ dist)});
    rounds.push_back(m.makePhase(msgs, frac, 1, frac));
  }
  for (const CostModel::Phase& ph : rounds) phases.push_back(ph);
  for (auto it = rounds.rbegin(); it != rounds.rend(); ++it) {
    CostModel::Phase ph = *it;
    ph.gammaFrac = 0;
    phases.push_back(ph);
  }
  if (extra > 0) {
    CostModel::Messages unfold;
    for (int i = 0; i < extra; ++i) unfold.push_back({2 * i + 1, 2 * i});
    phases.push_back(m.makePhase(unfold, 1, 1, 0));
  }
}

double cost(const CostModel& m, const CostPlan& plan, size_t bytes, size_t /*chunkBytes*/) {
  return m.sumUs(plan.phases, static_cast<double>(bytes));
}

}  // namespace allreduce_halving_doubling
}  // namespace braid::detail
