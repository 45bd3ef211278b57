#include "collectives/host_plan.h"

#include <algorithm>
#include <cmath>

#include "collectives/selector/cost_model.h"
#include "collectives/shm_segment.h"
#include "core/params.h"

namespace braid::detail {

HostPlan makeHostPlan(const CollArgs& a, bool leader) {
  HostPlan plan;
  if (a.hostOf == nullptr || static_cast<int>(a.hostOf->size()) != a.size) {
    // No layout: one host.
    for (int r = 0; r < a.size; ++r) plan.localRanks.push_back(r);
    plan.local = a.rank;
    plan.shards = leader ? 1 : a.size;
    plan.group.push_back(a.rank);
    return plan;
  }
  const std::vector<int>& hostOf = *a.hostOf;
  for (int h : hostOf) plan.numHosts = std::max(plan.numHosts, h + 1);
  std::vector<int> perHost(static_cast<size_t>(plan.numHosts), 0);
  plan.host = hostOf[a.rank];
  for (int r = 0; r < a.size; ++r) {
    if (hostOf[r] == plan.host) {
      if (r == a.rank) plan.local = static_cast<int>(plan.localRanks.size());
      plan.localRanks.push_back(r);
    }
    ++perHost[hostOf[r]];
  }
  const int fewest = *std::min_element(perHost.begin(), perHost.end());
  plan.uniform = fewest == *std::max_element(perHost.begin(), perHost.end());
  plan.shards = std::min(leader ? 1 : fewest, kMaxLocalRanks);
  if (plan.local < plan.shards) {
    std::vector<int> seen(static_cast<size_t>(plan.numHosts), 0);
    plan.group.assign(static_cast<size_t>(plan.numHosts), -1);
    for (int r = 0; r < a.size; ++r) {
      if (seen[hostOf[r]]++ == plan.local) plan.group[hostOf[r]] = r;
    }
  }
  return plan;
}

bool makePacks(const CollArgs& a, Packs* out) {
  out->plan = makeHostPlan(a, false);
  const HostPlan& plan = out->plan;
  if (plan.numHosts <= 1 || !plan.uniform || a.outerScratch == nullptr) return false;
  out->hosts = plan.numHosts;
  out->local = static_cast<int>(plan.localRanks.size());
  return static_cast<int>(plan.group.size()) == out->hosts;
}

std::vector<int> packOrder(const CollArgs& a, int hosts, int local) {
  std::vector<int> g(static_cast<size_t>(hosts) * static_cast<size_t>(local), -1);
  std::vector<int> seen(static_cast<size_t>(hosts), 0);
  for (int r = 0; r < a.size; ++r) {
    const int h = (*a.hostOf)[r];
    g[static_cast<size_t>(seen[h]++) * static_cast<size_t>(hosts) + static_cast<size_t>(h)] = r;
  }
  return g;  // [j][h]
}

size_t hierarchicalQuarterBytes() {
  const size_t slot =
      static_cast<size_t>(std::max<int64_t>(0, paramInt("BRAID_SHM_SEGMENT_BYTES")));
  const size_t half = (std::max<size_t>(slot / 2, 4096) + 4095) / 4096 * 4096;
  return half / 2;
}

size_t hierarchicalPieceBytes(size_t chunk) {
  return std::min(hierarchicalQuarterBytes(), std::max<size_t>(chunk / 4096 * 4096, 64 << 10));
}

ShmSegment* piecesSegment(const CollArgs& a, const Packs& l) {
  return l.local > 1 ? a.hostShm : nullptr;
}

Status checkSegmentPieces(const CollArgs& a, const ShmSegment* seg, int L, int local) {
  if (seg->localSize() != L || seg->localIndex() != local) {
    return internalError("rank " + std::to_string(a.rank) +
                         ": the intra-host segment does not match the host layout");
  }
  if (seg->halfBytes() / 2 != hierarchicalQuarterBytes()) {
    return invalidUsage("rank " + std::to_string(a.rank) +
                        ": BRAID_SHM_SEGMENT_BYTES differs from the size the intra-host segment "
                        "was created with; the hierarchical collectives need every rank to use "
                        "the same value throughout");
  }
  return Status::ok();
}

Status planSegmentPieces(const CollArgs& a, const Packs& l, const ShmSegment* seg, size_t block,
                         SegmentPieces* out) {
  SegmentPieces& s = *out;
  s.H = l.hosts;
  s.L = l.local;
  s.h = l.plan.host;
  s.j = l.plan.local;
  BRAID_RETURN_IF_ERROR(checkSegmentPieces(a, seg, s.L, s.j));
  s.order = packOrder(a, s.H, s.L);
  const size_t slice = hierarchicalPieceBytes(a.chunkBytes) / (s.order.size() * a.elemSize);
  s.slice = std::min(block, std::max<size_t>(1, slice));
  s.npieces = (block + s.slice - 1) / s.slice;
  return Status::ok();
}

CollArgs overGroup(const CollArgs& a, const std::vector<int>& group, int index) {
  CollArgs sub = a;
  sub.group = group.data();
  sub.size = static_cast<int>(group.size());
  sub.rank = index;
  sub.hostOf = nullptr;
  return sub;
}

size_t hierarchicalPieceBytes(const CostModel& m, size_t chunk) {
  const size_t quarter = std::max<size_t>(m.placement().segmentHalfBytes / 2, 4096);
  return std::min(quarter, std::max<size_t>(chunk / 4096 * 4096, 64 << 10));
}

double packRingsUs(const CostModel& m, size_t bytes, bool reduce, size_t chunk) {
  const FabricModel& f = m.model();
  const double S = static_cast<double>(bytes), L = m.maxLocal(), H = m.hosts();
  const double pack = S / L, block = S / (L * H);
  const double miss = m.outOfCache(S);
  const double cpu = m.cpuShare(m.maxLocal());
  const double gamma = reduce ? f.gammaUsPerByte * m.memoryFactor(S) * cpu : 0;
  if (m.placement().segment && L > 1) {
    // Through the segment in c pieces: in the host, the reduce-scatter copies (1 − 1/L)·S in and
    // reduces (L−1)/L·S, the all-gather copies S/L in and (L−1)/L·S out; each host's link
    // carries (H−1)/H·S, in messages of a piece's block slice, and the reduce-scatter adds the
    // other hosts' (H−1)/p·S. One piece's host work or transfer is not overlapped.
    const double piece = static_cast<double>(hierarchicalPieceBytes(m, chunk));
    const double c = std::max(1.0, std::ceil(S / piece));
    const double copies = reduce ? 1 - 1 / L : 1;
    const double intra = c * f.syncUs + copies * S * f.copyUsPerByte * m.memoryFactor(S) +
                         (L - 1) / L * S * gamma;
    const double slice = std::min(S, piece) / (L * H);
    const double inter = c * (H - 1) * m.stepAlpha(f.inter.alphaUs, cpu) +
                         (H - 1) / H * S * f.inter.beta(true, slice, miss) +
                         (H - 1) * block * gamma;
    return std::max(intra, inter) + std::min(intra, inter) / c;
  }
  double t = S * f.copyUsPerByte * m.memoryFactor(S);
  if (L > 1) {
    t += (L - 1) * (m.stepAlpha(f.intra.alphaUs, cpu) +
                    pack * f.intra.beta(true, pack, miss) * cpu + pack * gamma);
  }
  t += (H - 1) * (m.stepAlpha(f.inter.alphaUs, cpu) + block * f.inter.beta(true, block, miss) * L +
                  block * gamma);
  return t;
}

}  // namespace braid::detail
