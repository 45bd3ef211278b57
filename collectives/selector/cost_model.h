// The α-β-γ cost model behind algorithm selection.
//
// A fabric is described by two link classes, measured at communicator creation by a short probe
// (calibration.h) or read from the calibration cache:
//   intra: two ranks of one host (the shm transport, or tcp over loopback when BRAID_TRANSPORT=tcp)
//   inter: two ranks on different hosts (tcp)
// each with α (µs per message: latency plus software overhead) and β (µs per byte), plus γ (µs per
// byte reduced, float sum), the memory copy cost per byte and the cost of one hand-off through the
// intra-host shared segment (used by the segment-based algorithms: shm and hierarchical).
//
// Each algorithm prices its own schedule, in its own file (the table's cost function, next to the
// schedule comment), from the pieces below: phases (in one phase, a set of ranks exchange
// messages of a fraction of S bytes concurrently, and the phase lasts as long as its slowest
// message; a message costs α + b·β·share of its link class, where share counts the messages that
// cross one host's network link in the same direction in that phase (they split its bandwidth)
// and, within a host, how many ranks compete for each core when ranks outnumber cores), tree
// levels and steps. What a schedule depends on in the real rank placement (hostOf: which ring
// and tree edges cross hosts) is derived once per communicator by the algorithm's plan function,
// so a prediction is a sum over a few dozen phases, cheap enough to evaluate per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"
#include "collectives/algorithms.h"

namespace braid::detail {

/// α (µs per message) and β (µs per byte) of one link class. β is measured one way with the
/// peer idle (a tree edge); βsym with both sides sending and receiving at once (a ring or
/// halving/doubling step), which costs more where the transport copies with the CPU (shm).
struct LinkCost {
  double alphaUs = 0;  ///< one step of a simultaneous exchange (ring, halving/doubling)
  double betaUsPerByte = 0;
  double betaSymUsPerByte = 0;  ///< 0 = same as betaUsPerByte
  /// β when the data no longer fits in cache (either direction: memory bound), measured with
  /// buffers larger than the last-level cache; 0 = same as betaSymUsPerByte.
  double betaSymLargeUsPerByte = 0;
  /// β one way and exchanged, measured with kMidBytes messages, where the transport's
  /// per-message work weighs more; 0 = the large-message β.
  double betaMidUsPerByte = 0;
  double betaSymMidUsPerByte = 0;
  /// One way with the peer waiting (a tree edge): half an 8-byte ping-pong; 0 = alphaUs.
  double alphaOneWayUs = 0;
  /// β one way and exchanged with kSmallBytes messages, below the size from which copies into
  /// shared memory stream past the cache (core/copy.h); 0 = the mid-size β.
  double betaSmallUsPerByte = 0;
  double betaSymSmallUsPerByte = 0;
  double oneWay() const { return alphaOneWayUs > 0 ? alphaOneWayUs : alphaUs; }
  double sym() const { return betaSymUsPerByte > 0 ? betaSymUsPerByte : betaUsPerByte; }
  double symLarge() const { return betaSymLargeUsPerByte > 0 ? betaSymLargeUsPerByte : sym(); }
  /// The β of a message of `messageBytes` exchanged both ways or one way, when a fraction
  /// `outOfCache` (0..1) of the collective's data misses the last-level cache. Between
  /// kMidBytes and kLargeMessageBytes, β moves from the mid-size to the large-message value,
  /// and between kSmallBytes and kMidBytes from the small to the mid-size one (linear in log2 of
  /// the size); below kSmallBytes it is the small one.
  double beta(bool symmetric, double messageBytes, double outOfCache) const;
  static constexpr double kSmallBytes = 8.0 * 1024;
  static constexpr double kMidBytes = 16.0 * 1024;
  static constexpr double kLargeMessageBytes = 256.0 * 1024;
};

/// Everything the model knows about the machine; identical on every rank (rank 0's measurement,
/// agreed through the store), so that every rank predicts the same and selects the same.
struct FabricModel {
  LinkCost intra{2.0, 1.0 / 4000.0, 1.0 / 2000.0};  // 4 GB/s one way
  LinkCost inter{30.0, 1.0 / 1000.0, 1.0 / 1000.0};  // 1 GB/s
  double gammaUsPerByte = 1.0 / 8000.0;
  double copyUsPerByte = 1.0 / 8000.0;
  /// Segment copies below the streaming threshold (16 KiB): read back from the writer's cache;
  /// 0 = copyUsPerByte.
  double copySmallUsPerByte = 0;
  /// One core's memcpy with the other ranks idle (2 MiB, rank 0), as a broadcast's root copies
  /// in; 0 = copyUsPerByte (which has every local rank copying at once).
  double copyAloneUsPerByte = 0;
  double syncUs = 1.0;  ///< one arrive/wait hand-off through the intra-host segment
  /// µs per byte of a single copy from a peer's private buffer (process_vm_readv, 2 MiB, every
  /// local rank reading at once); 0 = not measured (no single copy here, or the default model).
  /// Beside copyUsPerByte it decides where the shm collectives' single copies pay
  /// (makeShmPlan): on a 2-core EPYC VM it ran at 0.58x a copy through the segment
  /// (7.5 GB/s against 12.9), on the Intel VM at 0.7-0.8x.
  double cmaUsPerByte = 0;
  /// Copies into the segment with non-temporal stores (core/copy.h), or plain ones where the
  /// probe measured those faster (the peers read lines dirty in the writer's cache quickly).
  bool streamShared = true;
  /// µs per byte of one copy of `bytes` into or out of the segment: copySmallUsPerByte below
  /// core/copy.h's streaming threshold (the lines are pulled from the writer's cache), else
  /// copyUsPerByte.
  double segmentCopyUsPerByte(double bytes) const;
  /// The fixed software cost of one collective call (argument checks, dispatch, sequence and
  /// fingerprint, waking the peers' polls): what a real 8-byte all-reduce takes beyond the rest
  /// of the model, measured when a communicator is created (Communicator::Impl::
  /// measureCallOverhead); 0 until then.
  double callUs = 0;
  int coresPerHost = 0;  ///< 0 = unknown (no oversubscription penalty)
  /// Last-level cache of a host, shared by its ranks (decides when data falls out of cache).
  double llcBytes = kDefaultLlcBytes;
  static constexpr double kDefaultLlcBytes = 32.0 * 1024 * 1024;
  /// Where the numbers came from: "default", "probe", "cache", "file" (tests, braid-tune).
  std::string source = "default";

  /// "intra.alpha_us=... " one key=value per field, stable order; parse() reads it back.
  std::string serialize() const;
  static Result<FabricModel> parse(const std::string& text);
  /// One line for logs: "intra α 1.2 µs β 5.1 GB/s, inter ..., γ ..., from probe".
  std::string describe() const;
};

/// How the shm collectives run on L local ranks, from the model, so that every rank decides
/// alike. The all-reduce's (allreduce/shm.cc) working set stays in the last-level cache the
/// ranks share:
///   oneChunkMaxBytes = LLC/(8L): one chunk holds, per rank, the input, the output and two
///          half slots (they alternate between calls) of S each, 4·L·S in all, at most half the
///          cache; larger messages take the pipelined schedule,
///   pieceMaxBytes = LLC/(64L), 64 KiB at least: its four quarter slots hold 4·L pieces.
///   On the EPYC VM (LLC 32 MiB; braid-perf --rounds 3, medians of 3-4 runs) 4 ranks 2 MiB
///   832-915 us against 1385 in one chunk, 4 MiB 2543 against 3465 in 1 MiB pieces; 2 ranks
///   4 MiB 813 against 902, 16 MiB 5484 against 6540.
/// and which single copies it takes:
///   push:  in one chunk, each rank writes its reduced shard into the L − 1 peers'
///          outputs ((L−1)/L·S by single copy in place of S of segment copies, its publish and
///          the peers' copy out): where cma·(L−1)/L < 0.7·copy (priced at 0.96 of a copy, 2
///          ranks on the EPYC VM lost 1.2-1.5x at 256 KiB-2 MiB), and the ranks do not
///          outnumber the cores (4 ranks on 2 cores, EPYC VM: 1 MiB in 330-358 us against
///          213-263 through the segment);
///   tiled: over one half slot, the whole all-reduce by single copies (2(L−1)/L·S in place of
///          the pipelined schedule's (2L−1)/L·S of copies): only where forced. The rates do not
///          predict it: priced at 0.89 of the pipelined copies (cma·2(L−1) against
///          copy·(2L−1)) it won on the Intel VM (2 ranks, 16 MiB 3.1-3.3 ms against 4.2-5.3);
///          priced at 0.85 it lost 3x on the EPYC VM (16 MiB 10.4-10.9 ms against 3.7-3.9).
///   gather:    all-gather, the L − 1 other blocks by single copy ((L−1)·b) in place of the
///              segment's copies in and out (L·b): where cma·(L−1) < 0.7·copy·L (the
///              single copy's rate flatters it, as the push's: numbers below);
///   broadcast: a reader's single copy of S in place of the segment's pipelined copies (the
///              root's in beside the readers' out, S each): where cma < copy.
///   EPYC VM (single copy 6.6 GB/s against 15.6; braid-perf-allgather/-broadcast --ranks 2,
///   BRAID_SHM_CMA=off against auto, two runs each): all-gather 4 MiB 203-267 us through the
///   segment against 276-444, 16 MiB 1.77-2.00 ms against 2.16-2.60; broadcast 4 MiB 323-340
///   against 433-462.
/// Neither push nor tiled where the ranks outnumber the cores, except the push when forced.
/// `crowded` is the segment's agreed view (true also where it has no single copy at all). An
/// unmeasured CMA rate (0) keeps the others (the push uncrowded); `force` (BRAID_SHM_CMA=on)
/// takes them all wherever they can run (the tiled path uncrowded). The collectives take a single copy
/// only where the segment allows one besides (ShmSegment::singleCopyMinBytes()).
ShmPlan makeShmPlan(const FabricModel& m, int localRanks, bool crowded, bool force);

/// The selector's collectives are the public ones (braid::Collective); BRAID_ALGO and tuning
/// files choose for the first kSelectableCollectives of them (not the barrier).
using SelCollective = Collective;
inline constexpr int kSelectableCollectives = 6;
/// "allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall", "barrier".
const char* selCollectiveName(SelCollective c);
/// One of the selectable collectives by name; the error lists them.
Result<SelCollective> parseSelCollective(const std::string& name);

/// The names of a collective's algorithms, in table order (collectives/algorithms.cc).
const std::vector<std::string>& modelAlgorithms(SelCollective c);

/// Where the ranks are: host index of every rank (hosts numbered 0..H−1).
struct Placement {
  std::vector<int> hostOf;
  bool segment = false;  ///< an intra-host shared segment exists (shm transport)
  size_t segmentHalfBytes = 4u << 20;  ///< piece size of the segment algorithms
  /// One host whose ranks read each other's memory: from this many bytes (the broadcast's
  /// message, the all-gather's block, the all-reduce's vector) the segment's all-gather and
  /// broadcast copy once, and its all-reduce writes the reduced shards straight into the peers'
  /// outputs (ShmSegment::singleCopyMinBytes, agreed by all); ShmSegment::kNoSingleCopy: never.
  size_t singleCopyMinBytes = ~size_t{0};
  /// Every local rank set BRAID_SHM_CMA=on (ShmSegment::singleCopyForced): the segment's
  /// collectives take their single copies wherever they can (makeShmPlan's force).
  bool singleCopyForced = false;
  size_t chunkBytes = 1u << 20;        ///< BRAID_CHUNK_BYTES (tree pipelining)
  /// Most ranks on one physical machine (emulated hosts, e.g. network namespaces, share its
  /// cores); 0 = as many as on the fullest host.
  int ranksPerMachine = 0;

  int size() const { return static_cast<int>(hostOf.size()); }
  int numHosts() const;
  /// Host-major placement of `hosts` × `perHost` ranks (tests, braid-tune what-ifs).
  static Placement uniform(int hosts, int perHost, bool segment);
};

struct CostPlan;

/// Predicts the time of every algorithm of every collective for one placement and model.
class CostModel {
 public:
  CostModel(const FabricModel& model, const Placement& placement);

  /// Predicted µs for `bytes` (all-reduce/broadcast/reduce: the vector; reduce-scatter and
  /// all-gather: the total of all blocks; all-to-all: one rank's send buffer; barrier: 0), or a
  /// negative value when the algorithm cannot run on this placement (shm across hosts,
  /// hierarchical on one host). `chunkBytes` 0 = the placement's. Includes FabricModel::callUs.
  double predictUs(const Algorithm& algo, size_t bytes, size_t chunkBytes = 0) const;
  /// The same by name (or alias); negative for a name the table does not have.
  double predictUs(SelCollective c, const std::string& algo, size_t bytes,
                   size_t chunkBytes = 0) const;
  /// Why `algo` cannot run here ("" when it can).
  std::string unavailableWhy(const Algorithm& algo) const;
  std::string unavailableWhy(SelCollective c, const std::string& algo) const;
  /// The pipelining chunk the model prices cheapest for `algo` at `bytes`, or 0 where it keeps
  /// the placement's (BRAID_CHUNK_BYTES). Only rows with a chunk search get one (the
  /// hierarchical all-reduce: its pieces trade a hand-off and an inter-host step each against
  /// overlapping the host's copies with the link, which depends on the link).
  size_t bestChunk(const Algorithm& algo, size_t bytes) const;

  const FabricModel& model() const { return model_; }
  /// Sets FabricModel::callUs (before the model is shared between threads).
  void setCallUs(double us) { model_.callUs = us; }
  const Placement& placement() const { return placement_; }
  const AlgoLayout& layout() const { return layout_; }

  // --- What an algorithm's cost function prices its schedule with -----------------------------

  /// (sender, receiver) pairs in global ranks.
  using Messages = std::vector<std::pair<int, int>>;
  /// One phase: concurrent messages of frac·S bytes, repeated `repeat` times.
  struct Phase {
    double repeat = 1;
    double frac = 0;
    bool intra = false, inter = false;  // which link classes carry a message
    bool symmetric = false;             // every receiver also sends (exchange steps)
    double intraShare = 1, interShare = 1;
    double gammaFrac = 0;  // fraction of S reduced by the busiest rank in this phase
  };
  /// The phase of messages `m` (from the placement: which cross hosts, how many share a link).
  Phase makePhase(const Messages& m, double frac, double repeat, double gammaFrac) const;
  /// Σ of the phases for a collective of `bytes`.
  double sumUs(const std::vector<Phase>& phases, double bytes) const;
  /// One step of a tree or a round of a schedule: what its messages cross and load.
  struct Step {
    bool intra = false, inter = false;  ///< which link classes carry a message
    int active = 1;                     ///< the most ranks of one host that take part
    int share = 1;                      ///< the most of its messages that leave or enter one host
    int ops = 0;                        ///< the most messages one rank sends and receives
    int in = 0;                         ///< the most messages one rank receives
    int reduces = 0;                    ///< the most messages of `reduced` one rank receives
  };
  /// The step of messages `reduced` (their receivers reduce them) and `copied`.
  Step makeStep(const Messages& reduced, const Messages& copied = {}) const;
  /// A binomial-style pipelined tree over `levels` (level k: the edges between depth k and
  /// k + 1; Step::inter and Step::active): c = ⌈bytes/chunk⌉ chunks of `chunk` bytes, the last
  /// one shorter, as the tree schedules cut them; the first chunk crosses every level, every
  /// further chunk one more edge of the slowest level. `reduce`: γ on every edge.
  double pipelinedTreeUs(const std::vector<Step>& levels, bool reduce, size_t bytes,
                         size_t chunk) const;

  int hosts() const { return hosts_; }
  int minLocal() const { return minLocal_; }
  int maxLocal() const { return maxLocal_; }
  /// The factor by which `activeOnHost` busy ranks of a host slow each other (shared cores).
  double cpuShare(int activeOnHost) const;
  /// The fraction of a collective of `bytes` that misses the last-level cache.
  double outOfCache(double bytes) const;
  /// How much slower memory-bound work (copies, reductions) runs on `bytes` out of cache.
  double memoryFactor(double bytes) const;
  /// The α of a message step when `cpu` ranks share each core.
  double stepAlpha(double alphaUs, double cpu) const;
  bool crowded() const;  ///< the machine's ranks outnumber its cores
  /// How the segment's collectives run (makeShmPlan) as the communicator decided it for its
  /// segment: crowded in the segment's agreed view where there is one (single copies from
  /// kSingleCopyMinBytes only where every rank has a core), forced as the placement says.
  ShmPlan shmPlan() const;

 private:
  FabricModel model_;
  Placement placement_;
  AlgoLayout layout_;
  int hosts_ = 1;
  int minLocal_ = 1, maxLocal_ = 1;
  int hostsPerMachine_ = 1;  // emulated hosts (network namespaces) sharing one machine's cores
  std::vector<CostPlan> plans_;  // per row of algorithmTable()
};

/// What an algorithm's plan function derives from the placement for its cost function.
struct CostPlan {
  std::vector<CostModel::Phase> phases;
  std::vector<CostModel::Step> steps;
};

}  // namespace braid::detail
