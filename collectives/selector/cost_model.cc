#include "collectives/selector/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace braid::detail {
namespace {

constexpr size_t kShmSmallBytes = 16 * 1024;             // allreduce/shm_direct.cc's small path,
constexpr size_t kShmSmallBytesCrowded = 64 * 1024;      // and with more ranks than cores
constexpr size_t kStreamMinBytes = 16 * 1024;            // core/copy.cc: memcpy below it
constexpr size_t kHierInterHdBytes = size_t{256} << 10;  // hierarchical.cc's inter-host rule

int ceilLog2(int p) {
  int d = 0;
  while ((1 << d) < p) ++d;
  return d;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// FabricModel

double LinkCost::beta(bool symmetric, double messageBytes, double outOfCache) const {
  const double big = symmetric ? sym() : betaUsPerByte;
  const double midRaw = symmetric ? betaSymMidUsPerByte : betaMidUsPerByte;
  const double mid = midRaw > 0 ? midRaw : big;
  const double w = std::clamp(std::log2(std::max(messageBytes, 1.0) / kMidBytes) /
                                  std::log2(kLargeMessageBytes / kMidBytes),
                              0.0, 1.0);
  double b = (1 - w) * mid + w * big;
  const double smallRaw = symmetric ? betaSymSmallUsPerByte : betaSmallUsPerByte;
  if (messageBytes < kMidBytes && smallRaw > 0) {
    const double v = std::clamp(
        std::log2(std::max(messageBytes, 1.0) / kSmallBytes) / std::log2(kMidBytes / kSmallBytes),
        0.0, 1.0);
    b = (1 - v) * smallRaw + v * mid;
  }
  // Out of cache, memory (and the transport's flow control) bound both directions alike.
  return (1 - outOfCache) * b + outOfCache * std::max(b, symLarge());
}

std::string FabricModel::serialize() const {
  char buf[2048];
  std::snprintf(buf, sizeof(buf),
                "intra_alpha_us=%.6g intra_beta_us_per_byte=%.6g intra_beta_sym_us_per_byte=%.6g "
                "intra_beta_sym_large_us_per_byte=%.6g inter_alpha_us=%.6g "
                "inter_beta_us_per_byte=%.6g inter_beta_sym_us_per_byte=%.6g "
                "inter_beta_sym_large_us_per_byte=%.6g gamma_us_per_byte=%.6g "
                "copy_us_per_byte=%.6g sync_us=%.6g cores_per_host=%d llc_bytes=%.0f "
                "intra_beta_mid_us_per_byte=%.6g intra_beta_sym_mid_us_per_byte=%.6g "
                "inter_beta_mid_us_per_byte=%.6g inter_beta_sym_mid_us_per_byte=%.6g call_us=%.6g "
                "intra_alpha_one_way_us=%.6g inter_alpha_one_way_us=%.6g "
                "intra_beta_small_us_per_byte=%.6g intra_beta_sym_small_us_per_byte=%.6g "
                "inter_beta_small_us_per_byte=%.6g inter_beta_sym_small_us_per_byte=%.6g "
                "copy_small_us_per_byte=%.6g",
                intra.alphaUs, intra.betaUsPerByte, intra.sym(), intra.symLarge(), inter.alphaUs,
                inter.betaUsPerByte, inter.sym(), inter.symLarge(), gammaUsPerByte, copyUsPerByte,
                syncUs, coresPerHost, llcBytes, intra.betaMidUsPerByte, intra.betaSymMidUsPerByte,
                inter.betaMidUsPerByte, inter.betaSymMidUsPerByte, callUs, intra.alphaOneWayUs,
                inter.alphaOneWayUs, intra.betaSmallUsPerByte, intra.betaSymSmallUsPerByte,
                inter.betaSmallUsPerByte, inter.betaSymSmallUsPerByte, copySmallUsPerByte);
  return buf;
}

Result<FabricModel> FabricModel::parse(const std::string& text) {
  FabricModel m;
  std::istringstream in(text);
  std::string item;
  int seen = 0;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return invalidArgument("fabric model: '" + item + "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
      return invalidArgument("fabric model: bad value in '" + item + "'");
    }
    if (key == "intra_alpha_us") m.intra.alphaUs = v;
    else if (key == "intra_beta_us_per_byte") m.intra.betaUsPerByte = v;
    else if (key == "intra_beta_sym_us_per_byte") m.intra.betaSymUsPerByte = v;
    else if (key == "inter_beta_sym_us_per_byte") m.inter.betaSymUsPerByte = v;
    else if (key == "intra_beta_sym_large_us_per_byte") m.intra.betaSymLargeUsPerByte = v;
    else if (key == "inter_beta_sym_large_us_per_byte") m.inter.betaSymLargeUsPerByte = v;
    else if (key == "inter_alpha_us") m.inter.alphaUs = v;
    else if (key == "inter_beta_us_per_byte") m.inter.betaUsPerByte = v;
    else if (key == "gamma_us_per_byte") m.gammaUsPerByte = v;
    else if (key == "copy_us_per_byte") m.copyUsPerByte = v;
    else if (key == "sync_us") m.syncUs = v;
    else if (key == "cores_per_host") m.coresPerHost = static_cast<int>(v);
    else if (key == "intra_beta_mid_us_per_byte") m.intra.betaMidUsPerByte = v;
    else if (key == "intra_beta_sym_mid_us_per_byte") m.intra.betaSymMidUsPerByte = v;
    else if (key == "inter_beta_mid_us_per_byte") m.inter.betaMidUsPerByte = v;
    else if (key == "inter_beta_sym_mid_us_per_byte") m.inter.betaSymMidUsPerByte = v;
    else if (key == "call_us") m.callUs = v;
    else if (key == "intra_alpha_one_way_us") m.intra.alphaOneWayUs = v;
    else if (key == "inter_alpha_one_way_us") m.inter.alphaOneWayUs = v;
    else if (key == "intra_beta_small_us_per_byte") m.intra.betaSmallUsPerByte = v;
    else if (key == "intra_beta_sym_small_us_per_byte") m.intra.betaSymSmallUsPerByte = v;
    else if (key == "inter_beta_small_us_per_byte") m.inter.betaSmallUsPerByte = v;
    else if (key == "inter_beta_sym_small_us_per_byte") m.inter.betaSymSmallUsPerByte = v;
    else if (key == "copy_small_us_per_byte") m.copySmallUsPerByte = v;
    else if (key == "llc_bytes") m.llcBytes = v > 0 ? v : kDefaultLlcBytes;
    else return invalidArgument("fabric model: unknown key '" + key + "'");
    ++seen;
  }
  if (seen < 12) return invalidArgument("fabric model: incomplete ('" + text + "')");
  return m;
}

std::string FabricModel::describe() const {
  auto gbps = [](double beta) { return beta > 0 ? 1e-3 / beta : 0.0; };
  auto link = [&](const LinkCost& l) {
    char b[256];
    std::snprintf(b, sizeof(b),
                  "α %.2f us (one way %.2f) β %.3f GB/s (16 KiB %.3f, 8 KiB %.3f; exchange %.3f, "
                  "16 KiB %.3f, 8 KiB %.3f; out of cache %.3f)",
                  l.alphaUs, l.oneWay(), gbps(l.betaUsPerByte), gbps(l.betaMidUsPerByte),
                  gbps(l.betaSmallUsPerByte), gbps(l.sym()), gbps(l.betaSymMidUsPerByte),
                  gbps(l.betaSymSmallUsPerByte), gbps(l.symLarge()));
    return std::string(b);
  };
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "; γ %.2f GB/s; copy %.2f GB/s (8 KiB %.2f); sync %.2f us; call %.2f us; "
                "%d cores/host; LLC %.0f MiB; from %s",
                gbps(gammaUsPerByte), gbps(copyUsPerByte), gbps(copySmallUsPerByte), syncUs, callUs,
                coresPerHost, llcBytes / (1 << 20), source.c_str());
  return "intra " + link(intra) + "; inter " + link(inter) + buf;
}

// ---------------------------------------------------------------------------------------------
// Names

const char* selCollectiveName(SelCollective c) {
  switch (c) {
    case SelCollective::kAllReduce: return "allreduce";
    case SelCollective::kReduceScatter: return "reducescatter";
    case SelCollective::kAllGather: return "allgather";
    case SelCollective::kBroadcast: return "broadcast";
    case SelCollective::kReduce: return "reduce";
    case SelCollective::kAllToAll: return "alltoall";
  }
  return "?";
}

Result<SelCollective> parseSelCollective(const std::string& name) {
  for (SelCollective c : {SelCollective::kAllReduce, SelCollective::kReduceScatter,
                          SelCollective::kAllGather, SelCollective::kBroadcast,
                          SelCollective::kReduce, SelCollective::kAllToAll}) {
    if (name == selCollectiveName(c)) return c;
  }
  return invalidArgument("unknown collective '" + name +
                         "'; valid: allreduce, reducescatter, allgather, broadcast, reduce, "
                         "alltoall");
}

const std::vector<std::string>& modelAlgorithms(SelCollective c) {
  static const std::vector<std::string> kAllReduce = {
      "ring", "tree", "halving_doubling", "shm", "hierarchical", "hierarchical_leader"};
  static const std::vector<std::string> kRing = {"ring"};
  static const std::vector<std::string> kRingHierarchical = {"ring", "hierarchical"};
  static const std::vector<std::string> kTree = {"tree"};
  static const std::vector<std::string> kPairwise = {"pairwise"};
  switch (c) {
    case SelCollective::kAllReduce: return kAllReduce;
    case SelCollective::kReduceScatter:
    case SelCollective::kAllGather:
      return kRingHierarchical;
    case SelCollective::kBroadcast:
    case SelCollective::kReduce: return kTree;
    case SelCollective::kAllToAll: return kPairwise;
  }
  return kRing;
}

// ---------------------------------------------------------------------------------------------
// Placement

int Placement::numHosts() const {
  int h = 0;
  for (int x : hostOf) h = std::max(h, x + 1);
  return std::max(h, 1);
}

Placement Placement::uniform(int hosts, int perHost, bool segment) {
  Placement p;
  for (int h = 0; h < hosts; ++h) {
    for (int l = 0; l < perHost; ++l) p.hostOf.push_back(h);
  }
  p.segment = segment && perHost > 1;
  return p;
}

// ---------------------------------------------------------------------------------------------
// CostModel

CostModel::CostModel(const FabricModel& model, const Placement& placement)
    : model_(model), placement_(placement) {
  const int p = placement_.size();
  hosts_ = placement_.numHosts();
  std::vector<int> perHost(static_cast<size_t>(hosts_), 0);
  for (int h : placement_.hostOf) ++perHost[h];
  minLocal_ = *std::min_element(perHost.begin(), perHost.end());
  maxLocal_ = *std::max_element(perHost.begin(), perHost.end());
  if (placement_.ranksPerMachine <= 0) placement_.ranksPerMachine = maxLocal_;  // "unknown"
  hostsPerMachine_ = std::max(1, placement_.ranksPerMachine / std::max(maxLocal_, 1));
  if (p <= 1) return;

  // Ring: every rank sends to r+1; p−1 reduce-scatter steps (reducing S/p) and p−1 all-gather
  // steps, S/p bytes each.
  Messages ringMsgs;
  for (int r = 0; r < p; ++r) ringMsgs.pairs.push_back({r, (r + 1) % p});
  const double dp = p;
  ring_ = {makePhase(ringMsgs, 1 / dp, p - 1, 1 / dp), makePhase(ringMsgs, 1 / dp, p - 1, 0)};
  reduceScatter_ = {makePhase(ringMsgs, 1 / dp, p - 1, 1 / dp)};
  allGather_ = {makePhase(ringMsgs, 1 / dp, p - 1, 0)};

  // Halving/doubling (halving_doubling.cc): fold the first 2e ranks pairwise, then log2 q rounds
  // of recursive halving (farthest partner first) and the same rounds back, then unfold.
  int q = 1;
  while (q * 2 <= p) q *= 2;
  const int extra = p - q;
  auto real = [&](int v) { return v < extra ? v * 2 + 1 : v + extra; };
  if (extra > 0) {
    Messages fold;
    for (int i = 0; i < extra; ++i) fold.pairs.push_back({2 * i, 2 * i + 1});
    halvingDoubling_.push_back(makePhase(fold, 1, 1, 1));
  }
  double frac = 1;
  std::vector<Phase> rounds;
  for (int dist = q / 2; dist >= 1; dist /= 2) {
    frac /= 2;
    Messages m;
    for (int v = 0; v < q; ++v) m.pairs.push_back({real(v), real(v ^ dist)});
    rounds.push_back(makePhase(m, frac, 1, frac));
  }
  for (const Phase& ph : rounds) halvingDoubling_.push_back(ph);
  for (auto it = rounds.rbegin(); it != rounds.rend(); ++it) {
    Phase ph = *it;
    ph.gammaFrac = 0;
    halvingDoubling_.push_back(ph);
  }
  if (extra > 0) {
    Messages unfold;
    for (int i = 0; i < extra; ++i) unfold.pairs.push_back({2 * i + 1, 2 * i});
    halvingDoubling_.push_back(makePhase(unfold, 1, 1, 0));
  }

  // All-to-all (all_to_all.cc): step s sends block (r+s) mod p to rank r+s. Large worlds are
  // priced by one representative step.
  if (p <= 64) {
    for (int s = 1; s < p; ++s) {
      Messages m;
      for (int r = 0; r < p; ++r) m.pairs.push_back({r, (r + s) % p});
      allToAll_.push_back(makePhase(m, 1 / dp, 1, 0));
    }
  } else {
    Messages m;
    for (int r = 0; r < p; ++r) m.pairs.push_back({r, (r + p / 2) % p});
    allToAll_.push_back(makePhase(m, 1 / dp, p - 1, 0));
  }

  // Binomial tree rooted at 0 (broadcast.cc): depth ⌈log2 p⌉; at level k, every v whose lowest
  // set bit is k talks to v − 2^k.
  treeLevelInter_.assign(static_cast<size_t>(ceilLog2(p)), false);
  treeLevelActive_.assign(static_cast<size_t>(ceilLog2(p)), 1);
  for (size_t k = 0; k < treeLevelInter_.size(); ++k) {
    std::vector<int> active(static_cast<size_t>(hosts_), 0);
    for (int v = 1 << k; v < p; v += 2 << k) {  // the ranks whose lowest set bit is k
      const int parent = v - (1 << k);
      if (placement_.hostOf[v] != placement_.hostOf[parent]) treeLevelInter_[k] = true;
      ++active[placement_.hostOf[v]];
      ++active[placement_.hostOf[parent]];
    }
    treeLevelActive_[k] = std::max(1, *std::max_element(active.begin(), active.end()));
  }
}

// A message step on a machine whose ranks outnumber its cores: the peer must be scheduled
// first, which costs at least a segment hand-off (timed with every local rank running), even when
// only `cpu` = 1 rank per core takes part in the step (the others wait, yielding, but still get
// their turns); with more active ranks, α stretches by their share.
double CostModel::stepAlpha(double alphaUs, double cpu) const {
  return crowded() ? std::max(alphaUs * cpu, model_.syncUs) : alphaUs;
}

bool CostModel::crowded() const {
  return model_.coresPerHost > 0 && placement_.ranksPerMachine > model_.coresPerHost;
}

// The fraction of a collective's data that misses the last-level cache: every rank of the machine
// holds an input and an output of S bytes in the cache they share. A smooth share rather than a
// step, because the transport's buffers and other tenants take part of the cache too (measured
// here: a 2-rank ring slows from in-cache speed already at 2–8 MiB).
double CostModel::outOfCache(double bytes) const {
  const double ranks = std::max(maxLocal_, placement_.ranksPerMachine);
  const double w = 2 * bytes * ranks;
  return w / (w + std::max(model_.llcBytes, 1.0));
}

// How much slower memory-bound work (copies, reductions) runs on data that misses the cache,
// taken from the intra-host link's out-of-cache probe.
double CostModel::memoryFactor(double bytes) const {
  const double slow = model_.intra.symLarge() / std::max(model_.intra.sym(), 1e-12);
  return 1 + outOfCache(bytes) * std::max(0.0, slow - 1);
}

double CostModel::cpuShare(int activeOnHost) const {
  // Emulated hosts on one machine: the same step runs on each of them at once, so the ranks that
  // share the machine's cores are the active ones of every host there (ranks that wait yield).
  const int active =
      std::min(std::max(activeOnHost, 1) * hostsPerMachine_, placement_.ranksPerMachine);
  if (model_.coresPerHost <= 0 || active <= model_.coresPerHost) return 1;
  return static_cast<double>(active) / model_.coresPerHost;
}

CostModel::Phase CostModel::makePhase(const Messages& m, double frac, double repeat,
                                      double gammaFrac) const {
  Phase ph;
  ph.repeat = repeat;
  ph.frac = frac;
  ph.gammaFrac = gammaFrac;
  const size_t h = static_cast<size_t>(hosts_);
  std::vector<int> out(h, 0), in(h, 0), active(h, 0);
  std::vector<uint8_t> seen(placement_.hostOf.size(), 0), sends(placement_.hostOf.size(), 0);
  for (const auto& [s, d] : m.pairs) sends[s] = 1;
  ph.symmetric = true;
  for (const auto& [s, d] : m.pairs) {
    if (!sends[d]) ph.symmetric = false;
    const int hs = placement_.hostOf[s], hd = placement_.hostOf[d];
    if (hs != hd) {
      ph.inter = true;
      ++out[hs];
      ++in[hd];
    } else {
      ph.intra = true;
    }
    for (int r : {s, d}) {
      if (!seen[r]) {
        seen[r] = 1;
        ++active[placement_.hostOf[r]];
      }
    }
  }
  int share = 1, busiest = 1;
  for (size_t i = 0; i < h; ++i) {
    share = std::max({share, out[i], in[i]});
    busiest = std::max(busiest, active[i]);
  }
  ph.interShare = share;
  ph.intraShare = cpuShare(busiest);
  return ph;
}

double CostModel::phaseUs(const Phase& ph, double bytes) const {
  const double b = ph.frac * bytes;
  double t = 0;
  const double miss = outOfCache(bytes);
  const double bIntra = model_.intra.beta(ph.symmetric, b, miss);
  const double bInter = model_.inter.beta(ph.symmetric, b, miss);
  if (ph.intra) {
    const double a = ph.symmetric ? model_.intra.alphaUs : model_.intra.oneWay();
    t = std::max(t, stepAlpha(a, ph.intraShare) + ph.intraShare * b * bIntra);
  }
  if (ph.inter) {
    // Shared cores delay the start of a step (the peer must be scheduled), not the wire: the
    // link's bytes are priced by how many messages share it. (An unshaped link between emulated
    // hosts is CPU-bound instead, and so priced low when ranks outnumber cores.)
    const double a = ph.symmetric ? model_.inter.alphaUs : model_.inter.oneWay();
    t = std::max(t, stepAlpha(a, ph.intraShare) + b * bInter * ph.interShare);
  }
  t += ph.intraShare * ph.gammaFrac * bytes * model_.gammaUsPerByte * memoryFactor(bytes);
  return ph.repeat * t;
}

double CostModel::sumUs(const std::vector<Phase>& phases, double bytes) const {
  double t = 0;
  for (const Phase& ph : phases) t += phaseUs(ph, bytes);
  return t;
}

// Pipelined binomial tree: c chunks; the first chunk crosses every level (level k: the edges
// between v and v − 2^k, inter-host if any of them crosses hosts), every further chunk one more
// edge of the slowest level. Waiting ranks poll (spin, then yield), so a level whose active
// ranks outnumber the cores pays the shared cores.
double CostModel::treeUs(bool reduce, size_t bytes, size_t chunk) const {
  const int p = placement_.size();
  if (p <= 1) return 0;
  const double c = std::max<double>(1, std::ceil(static_cast<double>(bytes) / chunk));
  const double cb = bytes / c;
  const double miss = outOfCache(static_cast<double>(bytes));
  const double mem = memoryFactor(static_cast<double>(bytes));
  double first = 0, slowest = 0;
  for (size_t k = 0; k < treeLevelInter_.size(); ++k) {
    const bool inter = treeLevelInter_[k];
    const LinkCost& l = inter ? model_.inter : model_.intra;
    const double cpu = cpuShare(treeLevelActive_[k]);
    // The wire of an inter-host edge is not slowed by shared cores; a copy through memory is.
    const double edge = stepAlpha(l.oneWay(), cpu) +
                        cb * l.beta(false, cb, miss) * (inter ? 1 : cpu) +
                        (reduce ? cpu * cb * model_.gammaUsPerByte * mem : 0);
    first += edge;
    slowest = std::max(slowest, edge);
  }
  // The sends of one node to its children overlap (separate connections, all posted at once), so
  // a further chunk costs one edge, not one per child (measured: 4 ranks on shm).
  return first + (c - 1) * slowest;
}

// The shm algorithm (allreduce/shm_direct.cc) on one host of L ranks, up to one half slot
// (beyond it, shm runs hierarchical.cc's pipelined schedule, priced by hierarchicalUs). Copies
// and reductions slow out of cache like everything else that streams memory.
double CostModel::segmentAllReduceUs(size_t bytes, int L) const {
  const double cpu = cpuShare(L);
  const double mem = memoryFactor(static_cast<double>(bytes));  // copies and reductions
  const double dn = static_cast<double>(bytes);
  // sync and copy were measured with every local rank at once (their contention included);
  // the reduction kernel alone on one core, so it pays the oversubscription.
  if (bytes <= (crowded() ? kShmSmallBytesCrowded : kShmSmallBytes)) {
    // One hand-off: arrive, then every rank folds all slots.
    // Below 16 KiB the copy is a memcpy whose lines the peers pull from this core's cache.
    const double copy = bytes < kStreamMinBytes && model_.copySmallUsPerByte > 0
                            ? model_.copySmallUsPerByte
                            : model_.copyUsPerByte;
    return model_.syncUs + mem * (dn * copy + cpu * (L - 1) * dn * model_.gammaUsPerByte);
  }
  // Copies: the others' shards in ((L−1)/L), the reduced own shard back (1/L), the others'
  // reduced shards out ((L−1)/L).
  return 2 * model_.syncUs + mem * ((2.0 - 1.0 / L) * dn * model_.copyUsPerByte +
                                    cpu * (L - 1) * dn / L * model_.gammaUsPerByte);
}

// A flat all-reduce of `bytes` among `hosts` ranks, one per host, whose links are shared by
// `share` such groups at once (hierarchical.cc's rule below 256 KiB: one exchange for H = 2,
// halving/doubling for H > 2);
// `miss`: the out-of-cache share of the whole collective.
double CostModel::flatInterUs(size_t bytes, int hosts, double share, double miss) const {
  if (hosts <= 1) return 0;
  const double S = static_cast<double>(bytes);
  const LinkCost& l = model_.inter;
  const double cpu = cpuShare(static_cast<int>(share));  // `share` ranks per host take part
  if (hosts > 2 && bytes < kHierInterHdBytes) {
    int q = 1, lg = 0;
    while (q * 2 <= hosts) q *= 2, ++lg;
    double t = 2 * lg * stepAlpha(l.alphaUs, cpu) +
               2.0 * (q - 1) / q * S * l.beta(true, S / 2, miss) * share +
               (q - 1.0) / q * S * model_.gammaUsPerByte * cpu;
    if (q != hosts) {
      t += 2 * (stepAlpha(l.alphaUs, cpu) + S * l.betaUsPerByte * share) + S * model_.gammaUsPerByte;
    }
    return t;
  }
  if (hosts == 2 && bytes < kHierInterHdBytes) {  // one exchange of the whole shard
    return stepAlpha(l.alphaUs, cpu) + S * l.beta(true, S, miss) * share +
           S * model_.gammaUsPerByte * cpu;
  }
  const double H = hosts;
  return 2 * (H - 1) * (stepAlpha(l.alphaUs, cpu) + S / H * l.beta(true, S / H, miss) * share) +
         (H - 1) / H * S * model_.gammaUsPerByte * cpu;
}

// hierarchical.cc: per piece, intra reduce-scatter (k = min local ranks shards), inter-host
// all-reduce of each shard among the k owner groups (sharing each host's link), intra all-gather;
// the leader variant uses one shard. Pieces are a quarter segment slot or the chunk, whichever is
// smaller; one piece runs its steps in turn, several overlap one piece's intra-host steps with
// another's transfer (fill, then the slower stage per further piece). Several pieces send each
// part straight to its host (2 steps of the H−1 parts), one piece uses flatInterUs's rule.
double CostModel::hierarchicalUs(size_t bytes, bool leader, size_t chunk) const {
  const int L = maxLocal_;
  const int k = leader ? 1 : minLocal_;
  const bool seg = placement_.segment && L > 1;
  const size_t quarter = std::max<size_t>(placement_.segmentHalfBytes / 2, 4096);
  const size_t piece = std::min(quarter, std::max<size_t>(chunk / 4096 * 4096, 64 << 10));
  const double c = std::max<double>(1, std::ceil(static_cast<double>(bytes) / piece));
  const double n = static_cast<double>(bytes) / c;
  const double cpu = cpuShare(L);
  const double miss = outOfCache(static_cast<double>(bytes));
  double intra = 0;
  if (L > 1) {
    if (seg) {
      // As in the shm algorithm; a rank owning no shard (L > k) copies all in and all out.
      const double copies = L > k ? 2.0 : 2.0 - 1.0 / k;
      intra = 2 * model_.syncUs + memoryFactor(static_cast<double>(bytes)) *
                                      (copies * n * model_.copyUsPerByte +
                                       cpu * (L - 1) * n / k * model_.gammaUsPerByte);
    } else {
      intra = cpu * (2 * model_.intra.alphaUs + 2 * (L - 1) * n / k * model_.intra.betaUsPerByte +
                     (L - 1) * n / k * model_.gammaUsPerByte);
    }
  }
  if (c == 1) return intra + flatInterUs(bytes / static_cast<size_t>(k), hosts_, k, miss);
  double inter = 0;
  if (hosts_ > 1) {
    const double H = hosts_, shard = n / k;
    inter = 2 * stepAlpha(model_.inter.alphaUs, cpuShare(k)) +
            2 * (H - 1) / H * shard * model_.inter.beta(true, shard / H, miss) * k +
            (H - 1) / H * shard * model_.gammaUsPerByte * cpuShare(k);
  }
  return intra + inter + (c - 1) * std::max(intra, inter);
}

// hierarchical_rs_ag.cc: a ring over the L ranks of each host with packs of S/L, a ring over
// the H hosts with blocks of S/p (the L groups share each host's link), one pass over S in
// memory for the layout; `reduce`: reduce-scatter (γ on both rings).
double CostModel::hierarchicalRsAgUs(size_t bytes, bool reduce) const {
  const double S = static_cast<double>(bytes), L = maxLocal_, H = hosts_;
  const double pack = S / L, block = S / (L * H);
  const double miss = outOfCache(S);
  const double cpu = cpuShare(maxLocal_);
  const double gamma = reduce ? model_.gammaUsPerByte * memoryFactor(S) * cpu : 0;
  double t = S * model_.copyUsPerByte * memoryFactor(S);
  if (L > 1) {
    t += (L - 1) * (stepAlpha(model_.intra.alphaUs, cpu) +
                    pack * model_.intra.beta(true, pack, miss) * cpu + pack * gamma);
  }
  t += (H - 1) * (stepAlpha(model_.inter.alphaUs, cpu) +
                  block * model_.inter.beta(true, block, miss) * L + block * gamma);
  return t;
}

std::string CostModel::unavailableWhy(SelCollective c, const std::string& algo) const {
  const auto& names = modelAlgorithms(c);
  if (std::find(names.begin(), names.end(), algo) == names.end()) {
    return std::string("not an algorithm of ") + selCollectiveName(c);
  }
  if ((c == SelCollective::kReduceScatter || c == SelCollective::kAllGather) &&
      algo == "hierarchical" && (hosts_ <= 1 || minLocal_ != maxLocal_)) {
    return "needs ranks on more than one host, as many on each";
  }
  if (c != SelCollective::kAllReduce) return "";
  if (algo == "shm" && (hosts_ > 1 || !placement_.segment)) {
    return hosts_ > 1 ? "needs every rank on one host" : "needs the shm transport";
  }
  if ((algo == "hierarchical" || algo == "hierarchical_leader") && hosts_ <= 1) {
    return "needs ranks on more than one host";
  }
  return "";
}

size_t CostModel::bestChunk(SelCollective c, const std::string& algo, size_t bytes) const {
  if (c != SelCollective::kAllReduce || (algo != "hierarchical" && algo != "hierarchical_leader") ||
      !unavailableWhy(c, algo).empty()) {
    return 0;
  }
  size_t best = 0;
  double bestUs = predictUs(c, algo, bytes);
  for (size_t chunk = size_t{64} << 10; chunk <= size_t{16} << 20; chunk *= 2) {
    const double t = predictUs(c, algo, bytes, chunk);
    if (t >= 0 && t < bestUs * 0.98) {  // only a clear gain moves it off the default
      bestUs = t;
      best = chunk;
    }
  }
  return best;
}

double CostModel::predictUs(SelCollective c, const std::string& algo, size_t bytes,
                            size_t chunkBytes) const {
  if (!unavailableWhy(c, algo).empty()) return -1;
  if (placement_.size() <= 1) return 0;
  const double t = transferUs(c, algo, bytes, chunkBytes);
  return t < 0 ? t : t + model_.callUs;
}

double CostModel::transferUs(SelCollective c, const std::string& algo, size_t bytes,
                             size_t chunkBytes) const {
  const size_t chunk = std::max<size_t>(chunkBytes ? chunkBytes : placement_.chunkBytes, 4096);
  const double S = static_cast<double>(bytes);
  switch (c) {
    case SelCollective::kAllReduce:
      if (algo == "ring") return sumUs(ring_, S);
      if (algo == "halving_doubling") return sumUs(halvingDoubling_, S);
      if (algo == "tree") return treeUs(true, bytes, chunk) + treeUs(false, bytes, chunk);
      if (algo == "shm") {  // beyond a half slot it runs hierarchical.cc's pipelined schedule
        return bytes > placement_.segmentHalfBytes ? hierarchicalUs(bytes, false, chunk)
                                                   : segmentAllReduceUs(bytes, placement_.size());
      }
      if (algo == "hierarchical") return hierarchicalUs(bytes, false, chunk);
      if (algo == "hierarchical_leader") return hierarchicalUs(bytes, true, chunk);
      return -1;
    case SelCollective::kReduceScatter:
      return algo == "hierarchical" ? hierarchicalRsAgUs(bytes, true) : sumUs(reduceScatter_, S);
    case SelCollective::kAllGather:
      return algo == "hierarchical" ? hierarchicalRsAgUs(bytes, false) : sumUs(allGather_, S);
    case SelCollective::kBroadcast: return treeUs(false, bytes, chunk);
    case SelCollective::kReduce: return treeUs(true, bytes, chunk);
    case SelCollective::kAllToAll: return sumUs(allToAll_, S);
  }
  return -1;
}

}  // namespace braid::detail
