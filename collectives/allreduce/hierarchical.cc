// Hierarchical all-reduce: reduce inside each host, all-reduce across hosts, spread inside hosts.
//
// Layout: H hosts, host h holding L_h ranks (local indices 0..L_h−1). The vector is cut into
// k = min_h L_h shards (k = 1 for the leader variant); local rank j < k of every host "owns"
// shard j, and the owners of shard j on all hosts form its inter-host group (one rank per host,
// in host order). Unequal hosts (3 + 1) thus still give every shard a peer on every host: the
// extra local ranks only contribute and receive.
//
// Schedule, per piece of P bytes (P = a quarter of the segment slot, BRAID_SHM_SEGMENT_BYTES / 4,
// 2 MiB by default, or the pipelining chunk when smaller; the same on every host, with or without
// a segment):
//   A. intra-host reduce-scatter: every rank publishes the piece in its segment slot (an owner
//      skips its own shard, which it reduces straight from its input) and arrives; owner j
//      reduces shard j across the L slots into its output.
//   B. inter-host all-reduce of shard j among its group, over P2p (tcp between hosts). kAvg
//      divides once, here, by the world size.
//      - one piece (S ≤ P): ring over the group; for shards under 256 KiB, one exchange of the
//        whole shard when H = 2, halving/doubling when H > 2 (CollArgs::group);
//      - several pieces: direct and pipelined: the shard is cut into H parts; B1 sends part q to
//        the owner on host q and receives the others' copies of this owner's part, which it
//        reduces; B2 sends the reduced part to every host and receives theirs. Per rank the order
//        is A(0) B1(0) | A(c+1) W1(c) B2(c) B1(c+1) W2(c) C(c) | ...: piece c+1's intra-host
//        step runs while piece c is on the wire (the kernel moves the posted data meanwhile),
//        so the host link stays busy.
//   C. intra-host all-gather: owner j publishes the reduced shard j and marks done; every rank
//      copies the k shards out.
//   The segment buffers cycle over four quarter slots by generation, so that a rank may publish
//   piece c+1 while its peers still read piece c; a final empty generation restores the rule the
//   other users of the segment rely on (everything of generation g is read before any rank
//   arrives at g + 1). With BRAID_TRANSPORT=tcp there is no segment: A and C send the shards to
//   and from the owners over P2p. A host with one rank skips A and C.
//   The leader variant (k = 1) is reduce to local rank 0 → all-reduce among the H leaders →
//   broadcast from local rank 0: one owner, so the fewest messages, for small messages.
// Cost (S bytes, L ranks per host, α_sync one segment hand-off, B_copy memory copy bandwidth,
//   β_host the inverse bandwidth of one host's link, which the k owners of a host share):
//   intra (A + C): 2·α_sync + 2·S/B_copy + (L−1)/k·S·γ, no link traffic;
//   inter: 2(H−1)·α_net (ring; the same per piece direct: H−1 messages out and in, twice)
//     + 2·(H−1)/H·S·β_host + (H−1)/H·S/k·γ;
//     two hosts, small shards: α_net + S·β_host + S/k·γ (one exchange);
//   pipelined over c pieces the intra-host term overlaps the link: ≈ max(intra, inter) + intra/c.
//   leader: 2·α_sync + 2·S/B_copy + (L−1)·S·γ + 2(H−1)·α_net + 2·(H−1)/H·S·β_host + (H−1)/H·S·γ.
//   A flat ring over p = H·L ranks pays 2(p−1)·α_net and moves 2·(p−1)/p·S per rank, with L ranks
//   of a host sending through its link: the hierarchy moves ((H−1)/H)/((p−1)/p) of that over the
//   link (2/3 for 2 hosts × 2 ranks) and saves 2(p−H)·α_net of latency.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/host_plan.h"
#include "collectives/selector/cost_model.h"
#include "core/copy.h"

namespace braid::detail {
namespace {

constexpr size_t kInterHalvingDoublingBytes = size_t{256} << 10;

// Data buffer of local rank i for generation g: four quarter slots cycled by generation (half
// g & 1, as every user of the segment, then quarter (g >> 1) & 1), so that a rank may publish
// piece c+1 while its peers still read piece c.
uint8_t* quarter(ShmSegment* seg, int i, uint64_t g) {
  return seg->half(i, static_cast<int>(g & 1)) + ((g >> 1) & 1) * (seg->halfBytes() / 2);
}

// One call's state and its stages; see the schedule at the top of the file.
class Hierarchical {
 public:
  Hierarchical(const CollArgs& a, const HostPlan& plan, ShmSegment* seg, const void* sendbuf,
               void* recvbuf, size_t count)
      : a_(a),
        net_(*a.p2p),
        plan_(plan),
        seg_(seg),
        nlocal_(static_cast<int>(plan.localRanks.size())),
        k_(plan.shards),
        me_(plan.local),
        owner_(plan.local < plan.shards),
        nhosts_(plan.numHosts),
        es_(a.elemSize),
        src_(static_cast<const uint8_t*>(sendbuf)),
        dst_(static_cast<uint8_t*>(recvbuf)),
        count_(count) {
    pieceElems_ = std::max<size_t>(1, hierarchicalPieceBytes(a.chunkBytes) / es_);
    npieces_ = std::max<size_t>(1, (count + pieceElems_ - 1) / pieceElems_);
    maxShard_ = pieceElems_ / static_cast<size_t>(k_) + 1;
    maxPart_ = maxShard_ / static_cast<size_t>(nhosts_) + 1;
  }

  Status run() {
    if (seg_ != nullptr) BRAID_RETURN_IF_ERROR(checkSegmentPieces(a_, seg_, nlocal_, me_));
    // Scratch: the other local ranks' contributions to this owner's shard (without a segment),
    // then the other hosts' copies of this owner's part.
    const size_t intraBytes = seg_ == nullptr && owner_ ? maxShard_ * es_ * (nlocal_ - 1) : 0;
    // (Two hosts exchange whole small shards: see exchangeShard.)
    const size_t interBytes =
        owner_ ? std::max(maxPart_ * (nhosts_ - 1), nhosts_ == 2 ? maxShard_ : 0) * es_ : 0;
    uint8_t* scratch = a_.scratch->get(intraBytes + interBytes + 64);
    intraTmp_ = scratch;
    interTmp_ = scratch + intraBytes;
    if (seg_ == nullptr) intraHandles_.assign(2 * static_cast<size_t>(nlocal_), 0);
    return npieces_ == 1 ? runOne() : runPipelined();
  }

 private:
  struct Piece {
    uint64_t g = 0;                         // segment generation
    size_t off = 0, n = 0, lo = 0, hi = 0;  // [lo, hi): this owner's shard within the piece
  };

  Piece piece(size_t c) const {
    Piece p;
    p.off = c * pieceElems_;
    p.n = std::min(pieceElems_, count_ - std::min(p.off, count_));
    p.lo = owner_ ? blockStart(p.n, k_, me_) : 0;
    p.hi = owner_ ? blockStart(p.n, k_, me_ + 1) : 0;
    return p;
  }

  // Part q of this owner's shard of piece p, as element offsets into the output.
  void part(const Piece& p, int q, size_t* b, size_t* e) const {
    const size_t m = p.hi - p.lo;
    *b = p.off + p.lo + blockStart(m, nhosts_, q);
    *e = p.off + p.lo + blockStart(m, nhosts_, q + 1);
  }

  // A message spanning one piece: reduce-scatter, the shard's inter-host all-reduce (for shards
  // under 256 KiB one exchange between two hosts, halving/doubling among more; else the ring),
  // all-gather.
  Status runOne() {
    Piece p = piece(0);
    BRAID_RETURN_IF_ERROR(intraReduceScatter(p));
    if (owner_) {
      uint8_t* shard = dst_ + (p.off + p.lo) * es_;
      const size_t m = p.hi - p.lo;
      if (nhosts_ > 1) {
        CollArgs inter = a_;
        inter.rank = plan_.host;
        inter.size = nhosts_;
        inter.group = plan_.group.data();
        inter.op = a_.op == ReduceOp::kAvg ? ReduceOp::kSum : a_.op;
        if (m * es_ >= kInterHalvingDoublingBytes) {
          BRAID_RETURN_IF_ERROR(allReduceRing(inter, shard, shard, m));
        } else if (nhosts_ == 2) {
          BRAID_RETURN_IF_ERROR(exchangeShard(inter, shard, m));
        } else {
          BRAID_RETURN_IF_ERROR(allReduceHalvingDoubling(inter, shard, shard, m));
        }
      }
      if (a_.op == ReduceOp::kAvg) scaleForAvg(a_.type, shard, m, a_.size);
    }
    return intraAllGather(p);
  }

  // Order per rank: A(0) B1(0) | A(c+1) W1(c) B2(c) B1(c+1) W2(c) C(c) | ... | barrier.
  Status runPipelined() {
    b1_.assign(2 * static_cast<size_t>(nhosts_), 0);
    b2_.assign(2 * static_cast<size_t>(nhosts_), 0);
    Piece cur = piece(0);
    BRAID_RETURN_IF_ERROR(intraReduceScatter(cur));
    if (owner_) postInterReduceScatter(cur);
    for (size_t c = 0; c < npieces_; ++c) {
      Piece next;
      const bool hasNext = c + 1 < npieces_;
      if (hasNext) {
        next = piece(c + 1);
        BRAID_RETURN_IF_ERROR(intraReduceScatter(next));
      }
      if (owner_) {
        BRAID_RETURN_IF_ERROR(finishInterReduceScatter(cur));
        if (hasNext) postInterReduceScatter(next);
        for (int i = 0; i < nb2_; ++i) BRAID_RETURN_IF_ERROR(net_.wait(b2_[i]));
      }
      BRAID_RETURN_IF_ERROR(intraAllGather(cur));
      cur = next;
    }
    BRAID_RETURN_IF_ERROR(net_.waitAll());
    if (seg_ == nullptr) return Status::ok();
    // An empty generation: every rank has read everything of the earlier ones before any rank
    // runs the next operation on the segment.
    const uint64_t g = seg_->nextGeneration();
    seg_->arrive(g, a_.seq, a_.fp);
    return seg_->waitArrived(g, false);
  }

  // A: owner j ends with shard j of the host's reduction of piece p in the output.
  // Two hosts: the owners swap their whole shards and each reduces, one step where the ring
  // takes two, for the same bytes on the link (and twice its reduction, which small shards do
  // not notice). Both reduce the first host's values with the second's in that order, so they
  // agree bit for bit for every op (min/max with NaN too).
  Status exchangeShard(const CollArgs& inter, uint8_t* shard, size_t m) {
    if (m == 0) return Status::ok();
    const int other = 1 - inter.rank;
    net_.begin(inter.seq, inter.fp);
    BRAID_RETURN_IF_ERROR(
        net_.sendRecv(inter.peer(other), shard, m * es_, inter.peer(other), interTmp_, m * es_));
    if (inter.rank == 0) {
      inter.reduce(shard, shard, interTmp_, m);
    } else {
      inter.reduce(shard, interTmp_, shard, m);
    }
    return Status::ok();
  }

  Status intraReduceScatter(Piece& p) {
    const uint8_t* in = src_ + p.off * es_;
    uint8_t* out = dst_ + p.off * es_;
    if (seg_ != nullptr) {
      p.g = seg_->nextGeneration();
      uint8_t* buf = quarter(seg_, me_, p.g);
      // An owner reduces its own shard straight from its input: only the rest is published.
      copyToShared(buf, in, p.lo * es_);
      copyToShared(buf + p.hi * es_, in + p.hi * es_, (p.n - p.hi) * es_);
      seg_->arrive(p.g, a_.seq, a_.fp);
      BRAID_RETURN_IF_ERROR(seg_->waitArrived(p.g, first_));
      first_ = false;
      if (!owner_ || p.hi == p.lo) return Status::ok();
      const uint8_t* mine = in + p.lo * es_;
      for (int i = 0; i < nlocal_; ++i) {
        if (i == me_) continue;
        a_.reduce(out + p.lo * es_, mine, quarter(seg_, i, p.g) + p.lo * es_, p.hi - p.lo);
        mine = out + p.lo * es_;
      }
      return Status::ok();
    }
    if (nlocal_ == 1) {
      copyIfDistinct(out + p.lo * es_, in + p.lo * es_, (p.hi - p.lo) * es_);
      return Status::ok();
    }
    // No segment (BRAID_TRANSPORT=tcp): the shards travel to their owners over P2p.
    P2p::Handle* h = intraHandles_.data();
    int nh = 0, slot = 0;
    for (int i = 0; i < nlocal_; ++i) {
      if (i == me_) continue;
      const int peer = plan_.localRanks[i];
      if (owner_)
        h[nh++] = net_.postRecv(peer, intraTmp_ + maxShard_ * es_ * slot++, (p.hi - p.lo) * es_);
      if (i < k_) {
        const size_t jlo = blockStart(p.n, k_, i), jhi = blockStart(p.n, k_, i + 1);
        h[nh++] = net_.postSend(peer, in + jlo * es_, (jhi - jlo) * es_);
      }
    }
    for (int i = 0; i < nh; ++i) BRAID_RETURN_IF_ERROR(net_.wait(h[i]));
    if (!owner_ || p.hi == p.lo) return Status::ok();
    const uint8_t* mine = in + p.lo * es_;
    for (int i = 0; i < nlocal_ - 1; ++i) {
      a_.reduce(out + p.lo * es_, mine, intraTmp_ + maxShard_ * es_ * i, p.hi - p.lo);
      mine = out + p.lo * es_;
    }
    return Status::ok();
  }

  // B1: this owner sends part q of its shard to the owner on host q and receives the other
  // hosts' copies of its own part.
  void postInterReduceScatter(const Piece& p) {
    nb1_ = 0;
    size_t mb, me;
    part(p, plan_.host, &mb, &me);
    int slot = 0;
    for (int q = 0; q < nhosts_; ++q) {
      if (q == plan_.host) continue;
      size_t qb, qe;
      part(p, q, &qb, &qe);
      b1_[nb1_++] =
          net_.postRecv(plan_.group[q], interTmp_ + maxPart_ * es_ * slot++, (me - mb) * es_);
      b1_[nb1_++] = net_.postSend(plan_.group[q], dst_ + qb * es_, (qe - qb) * es_);
    }
  }

  // W1 + B2: reduces its part across hosts (kAvg divides here, once), sends it to every other
  // host and receives theirs in place.
  Status finishInterReduceScatter(const Piece& p) {
    for (int i = 0; i < nb1_; ++i) BRAID_RETURN_IF_ERROR(net_.wait(b1_[i]));
    size_t mb, me;
    part(p, plan_.host, &mb, &me);
    uint8_t* mine = dst_ + mb * es_;
    if (me > mb) {
      for (int i = 0; i < nhosts_ - 1; ++i)
        a_.reduce(mine, mine, interTmp_ + maxPart_ * es_ * i, me - mb);
      if (a_.op == ReduceOp::kAvg) scaleForAvg(a_.type, mine, me - mb, a_.size);
    }
    nb2_ = 0;
    for (int q = 0; q < nhosts_; ++q) {
      if (q == plan_.host) continue;
      size_t qb, qe;
      part(p, q, &qb, &qe);
      b2_[nb2_++] = net_.postSend(plan_.group[q], mine, (me - mb) * es_);
      b2_[nb2_++] = net_.postRecv(plan_.group[q], dst_ + qb * es_, (qe - qb) * es_);
    }
    return Status::ok();
  }

  // C: every rank copies the k reduced shards of piece p into its output.
  Status intraAllGather(const Piece& p) {
    uint8_t* out = dst_ + p.off * es_;
    if (seg_ != nullptr) {
      if (owner_)
        copyToShared(quarter(seg_, me_, p.g) + p.lo * es_, out + p.lo * es_, (p.hi - p.lo) * es_);
      seg_->markDone(p.g);
      BRAID_RETURN_IF_ERROR(seg_->waitDone(p.g));
      for (int j = 0; j < k_; ++j) {
        if (j == me_) continue;
        const size_t jlo = blockStart(p.n, k_, j), jhi = blockStart(p.n, k_, j + 1);
        if (jhi > jlo)
          copyBytes(out + jlo * es_, quarter(seg_, j, p.g) + jlo * es_, (jhi - jlo) * es_);
      }
      return Status::ok();
    }
    if (nlocal_ == 1) return Status::ok();
    P2p::Handle* h = intraHandles_.data();
    int nh = 0;
    for (int i = 0; i < nlocal_; ++i) {
      if (i == me_) continue;
      const int peer = plan_.localRanks[i];
      if (owner_) h[nh++] = net_.postSend(peer, out + p.lo * es_, (p.hi - p.lo) * es_);
      if (i < k_) {
        const size_t jlo = blockStart(p.n, k_, i), jhi = blockStart(p.n, k_, i + 1);
        h[nh++] = net_.postRecv(peer, out + jlo * es_, (jhi - jlo) * es_);
      }
    }
    for (int i = 0; i < nh; ++i) BRAID_RETURN_IF_ERROR(net_.wait(h[i]));
    return Status::ok();
  }

  const CollArgs& a_;
  P2p& net_;
  const HostPlan& plan_;
  ShmSegment* seg_;
  const int nlocal_, k_, me_;
  const bool owner_;
  const int nhosts_;
  const size_t es_;
  const uint8_t* src_;
  uint8_t* dst_;
  const size_t count_;
  size_t pieceElems_ = 1, npieces_ = 1, maxShard_ = 1, maxPart_ = 1;
  uint8_t* intraTmp_ = nullptr;
  uint8_t* interTmp_ = nullptr;
  bool first_ = true;
  std::vector<P2p::Handle> intraHandles_, b1_, b2_;
  int nb1_ = 0, nb2_ = 0;
};

}  // namespace

Status allReduceHierarchical(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count,
                             bool leader) {
  a.p2p->begin(a.seq, a.fp);
  const HostPlan plan = makeHostPlan(a, leader);
  ShmSegment* seg = plan.localRanks.size() > 1 ? a.hostShm : nullptr;
  return Hierarchical(a, plan, seg, sendbuf, recvbuf, count).run();
}

namespace {

// A flat all-reduce of `bytes` among `hosts` ranks, one per host, whose links are shared by
// `share` such groups at once (runOne's rule below 256 KiB: one exchange for H = 2,
// halving/doubling for H > 2); `miss`: the out-of-cache share of the whole collective.
double flatInterUs(const CostModel& m, size_t bytes, int hosts, double share, double miss) {
  if (hosts <= 1) return 0;
  const FabricModel& f = m.model();
  const double S = static_cast<double>(bytes);
  const LinkCost& l = f.inter;
  const double cpu = m.cpuShare(static_cast<int>(share));  // `share` ranks per host take part
  if (hosts > 2 && bytes < kInterHalvingDoublingBytes) {
    int q = 1, lg = 0;
    while (q * 2 <= hosts) q *= 2, ++lg;
    double t = 2 * lg * m.stepAlpha(l.alphaUs, cpu) +
               2.0 * (q - 1) / q * S * l.beta(true, S / 2, miss) * share +
               (q - 1.0) / q * S * f.gammaUsPerByte * cpu;
    if (q != hosts) {
      t += 2 * (m.stepAlpha(l.alphaUs, cpu) + S * l.betaUsPerByte * share) + S * f.gammaUsPerByte;
    }
    return t;
  }
  if (hosts == 2 && bytes < kInterHalvingDoublingBytes) {  // one exchange of the whole shard
    return m.stepAlpha(l.alphaUs, cpu) + S * l.beta(true, S, miss) * share +
           S * f.gammaUsPerByte * cpu;
  }
  const double H = hosts;
  return 2 * (H - 1) * (m.stepAlpha(l.alphaUs, cpu) + S / H * l.beta(true, S / H, miss) * share) +
         (H - 1) / H * S * f.gammaUsPerByte * cpu;
}

}  // namespace

// Per piece, intra reduce-scatter (k = min local ranks shards), inter-host all-reduce of each
// shard among the k owner groups (sharing each host's link), intra all-gather; the leader
// variant uses one shard. Pieces are a quarter segment slot or the chunk, whichever is smaller;
// one piece runs its steps in turn, several overlap one piece's intra-host steps with another's
// transfer (fill, then the slower stage per further piece; the last piece is the remainder).
// Several pieces send each part straight to its host (2 steps of H−1 messages each, α per
// message pair), one piece uses flatInterUs's rule.
double allReduceHierarchicalUs(const CostModel& m, size_t bytes, bool leader, size_t chunk) {
  const FabricModel& f = m.model();
  const int L = m.maxLocal();
  const int k = leader ? 1 : m.minLocal();
  const bool seg = m.placement().segment && L > 1;
  const size_t piece = hierarchicalPieceBytes(m, chunk);
  // The schedule's pieces: c of `piece` bytes, the last one shorter.
  const size_t c = bytes <= piece ? 1 : (bytes + piece - 1) / piece;
  const double cpu = m.cpuShare(L);
  const double miss = m.outOfCache(static_cast<double>(bytes));
  auto intraUs = [&](double n) {
    if (L <= 1) return 0.0;
    if (seg) {
      // As in the shm algorithm; a rank owning no shard (L > k) copies all in and all out.
      const double copies = L > k ? 2.0 : 2.0 - 1.0 / k;
      return 2 * f.syncUs +
             m.memoryFactor(static_cast<double>(bytes)) *
                 (copies * n * f.copyUsPerByte + cpu * (L - 1) * n / k * f.gammaUsPerByte);
    }
    return cpu * (2 * f.intra.alphaUs + 2 * (L - 1) * n / k * f.intra.betaUsPerByte +
                  (L - 1) * n / k * f.gammaUsPerByte);
  };
  if (c == 1) {
    return intraUs(static_cast<double>(bytes)) +
           flatInterUs(m, bytes / static_cast<size_t>(k), m.hosts(), k, miss);
  }
  // Direct: each owner sends H−1 parts and receives H−1 (B1), then again (B2); like every
  // schedule here, a rank pays α per send/receive pair it handles (the double binary tree's
  // rounds), not once per step.
  auto interUs = [&](double n) {
    if (m.hosts() <= 1) return 0.0;
    const double H = m.hosts(), shard = n / k;
    return 2 * (H - 1) * m.stepAlpha(f.inter.alphaUs, m.cpuShare(k)) +
           2 * (H - 1) / H * shard * f.inter.beta(true, shard / H, miss) * k +
           (H - 1) / H * shard * f.gammaUsPerByte * m.cpuShare(k);
  };
  const double full = static_cast<double>(piece);
  const double last = static_cast<double>(bytes - (c - 1) * piece);
  return intraUs(full) + interUs(full) +
         static_cast<double>(c - 2) * std::max(intraUs(full), interUs(full)) +
         std::max(intraUs(last), interUs(last));
}

namespace allreduce_hierarchical {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int /*root*/) {
  return allReduceHierarchical(a, sendbuf, recvbuf, count, false);
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t chunkBytes) {
  return allReduceHierarchicalUs(m, bytes, false, chunkBytes);
}

}  // namespace allreduce_hierarchical

namespace allreduce_hierarchical_leader {

Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int /*root*/) {
  return allReduceHierarchical(a, sendbuf, recvbuf, count, true);
}

void plan(const CostModel& /*model*/, CostPlan* /*plan*/) {}

double cost(const CostModel& m, const CostPlan& /*plan*/, size_t bytes, size_t chunkBytes) {
  return allReduceHierarchicalUs(m, bytes, true, chunkBytes);
}

}  // namespace allreduce_hierarchical_leader
}  // namespace braid::detail
