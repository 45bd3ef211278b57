// The algorithm table, and the internal interface between the communicator and its algorithms.
//
// Every algorithm of every collective is one row of the table in algorithms.cc: its collective,
// name, aliases, where it can run, and the three functions of its file
// (collectives/<collective>/<algorithm>.cc): run (the schedule, written only against P2p or, for
// the same-host algorithms, ShmSegment), plan (what its cost depends on in the rank placement,
// derived once per communicator) and cost (its α-β-γ price, next to the schedule comment that
// states it). The selector, the cost model, BRAID_ALGO, tuning files, the tuner plugin,
// braid-perf -a and the test matrix take names and candidates from the table and nowhere else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/comm.hpp"
#include "braid/types.h"
#include "collectives/p2p.h"
#include "collectives/shm_segment.h"
#include "core/reduce.h"

namespace braid::detail {

class CostModel;
struct CostPlan;

/// Scratch memory that grows on demand and is reused (never freed per call), so repeated large
/// collectives do not page-fault fresh memory on every call.
class Scratch {
 public:
  uint8_t* get(size_t bytes);

 private:
  std::vector<uint8_t> buf_;
};

/// How the shm collectives run on this machine (selector/cost_model.h, makeShmPlan, says when
/// each single copy pays and what the cache holds; until it has, no single copy and no cache
/// bound).
struct ShmPlan {
  bool push = false;       ///< all-reduce, one chunk: reduced shards into the peers' outputs
  bool tiled = false;      ///< all-reduce over a half slot: all of it by single copies
  bool gather = false;     ///< all-gather: the others' blocks by single copy
  bool broadcast = false;  ///< broadcast: the root's message by single copy
  /// All-reduce: largest message taken in one chunk (besides the half slot's bound); larger
  /// ones pipeline.
  size_t oneChunkMaxBytes = SIZE_MAX;
  /// All-reduce: bound on the pipelined schedule's piece (besides the chunk and the quarter
  /// slot).
  size_t pieceMaxBytes = SIZE_MAX;
};

/// Everything an algorithm needs for one call.
struct CollArgs {
  P2p* p2p = nullptr;
  ShmSegment* shm = nullptr;  ///< set when every rank is on this host
  Scratch* scratch = nullptr;
  /// A second buffer, for an algorithm that runs others inside it (they use `scratch`).
  Scratch* outerScratch = nullptr;
  uint64_t seq = 0;
  Fingerprint fp;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  ReduceFn reduce = nullptr;  ///< for op (kAvg reduces as sum)
  size_t elemSize = 0;
  size_t chunkBytes = 1 << 20;  ///< pipelining unit
  int rank = 0;
  int size = 1;
  /// The ranks this call runs over: member i is global rank group[i], and rank/size above are
  /// this rank's index in the group and the group's size. Null: every rank, 0..size−1. The
  /// ring all-reduce, reduce-scatter and all-gather and halving/doubling honour it (the
  /// hierarchical algorithms run them over the ranks of a host, or over same-local-index ranks
  /// of every host).
  const int* group = nullptr;
  int peer(int member) const { return group != nullptr ? group[member] : member; }
  /// Host layout, for the hierarchical all-reduce: host index of every global rank, and this
  /// host's shared segment whenever this host has one (shm above is set only on a single host).
  const std::vector<int>* hostOf = nullptr;
  ShmSegment* hostShm = nullptr;
  /// How the shm collectives run here (makeShmPlan: from the model, the same on every rank).
  ShmPlan shmPlan;
  /// The row the dispatcher ran (set as it runs it; BRAID_TRACE_FILE's events name it).
  mutable const char* ran = nullptr;
  /// The selector's predicted µs for that row and size (-1: none), for closed-loop tuning.
  mutable double predictedUs = -1;
  /// When the call began (CLOCK_MONOTONIC ns), read only where something uses it: the dispatcher
  /// (runChoice) reads the clock when the call's predicted µs is at least timeFromUs, which the
  /// communicator sets per call (0: always, for a trace or a sampled quick call; infinity: never).
  /// 0 = not read. Reading the clock costs 20-40 ns on the test VMs, a tenth of a 2-rank
  /// all-reduce of 32 bytes.
  double timeFromUs = 0;
  mutable uint64_t startNs = 0;
};

// ---------------------------------------------------------------------------------------------
// The table

/// What decides whether an algorithm can run: where the ranks are.
struct AlgoLayout {
  int ranks = 1;
  int hosts = 1;
  int minLocal = 1;      ///< fewest ranks on one host
  int maxLocal = 1;      ///< most ranks on one host
  bool segment = false;  ///< an intra-host shared segment exists (shm transport)
};

/// One call: `count` is what the collective's API calls it (all-reduce, broadcast, reduce: the
/// vector; reduce-scatter: recvcount; all-gather: sendcount; all-to-all: one block; barrier: 0);
/// `root` for broadcast and reduce (−1 otherwise). kAvg is finished (divided) by the algorithm.
using RunFn = Status (*)(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count,
                         int root);
/// Derives what the cost depends on in the placement (CostModel::placement()), once per model.
using PlanFn = void (*)(const CostModel& model, CostPlan* plan);
/// Predicted µs for `bytes` (CostModel::predictUs says what bytes counts) with pipelining chunk
/// `chunkBytes`, without the call's fixed cost; only called where the algorithm can run and
/// more than one rank takes part.
using CostFn = double (*)(const CostModel& model, const CostPlan& plan, size_t bytes,
                          size_t chunkBytes);
/// "" when the algorithm can run on this layout, else why not ("needs ...").
using AvailabilityFn = const char* (*)(const AlgoLayout& layout);

/// One row of the table.
struct Algorithm {
  Collective collective;
  const char* name;     ///< canonical, as logs, tuning files and braid-perf show it
  const char* aliases;  ///< other accepted names, comma-separated ("" for none)
  AvailabilityFn unavailable;
  /// 0: runs with the pipelining chunk it is given; else the selector prices chunks from this
  /// size up to 16 MiB and picks one (CostModel::bestChunk).
  size_t chunkSearchFrom;
  RunFn run;
  PlanFn plan;
  CostFn cost;
};

/// Every row, grouped by collective, in the order names are listed.
const std::vector<Algorithm>& algorithmTable();
/// The rows of one collective, in table order.
std::vector<const Algorithm*> algorithmsOf(Collective c);
/// The row of `c` called `name` (or one of its aliases), or null.
const Algorithm* findAlgorithm(Collective c, const std::string& name);
/// The same, or kInvalidArgument "unknown allreduce algorithm 'x'; valid: ring, tree, ...".
Result<const Algorithm*> lookupAlgorithm(Collective c, const std::string& name);
/// "ring, tree, ..." (canonical names of `c`, table order).
std::string algorithmNames(Collective c);
/// Position of a row in algorithmTable().
size_t algorithmIndex(const Algorithm& a);
/// Whether the row runs in the intra-host segment (the shm rows), not over a transport.
bool runsOnSegment(const Algorithm& a);

// ---------------------------------------------------------------------------------------------
// Algorithms that others run inside them (the table's run functions call these too).

Status allReduceRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count);
Status allReduceHalvingDoubling(const CollArgs& a, const void* sendbuf, void* recvbuf,
                                size_t count);
/// Intra-host reduce-scatter → inter-host all-reduce per shard → intra-host all-gather; with
/// leader=true a single shard (reduce to local rank 0 → leaders' all-reduce → broadcast).
Status allReduceHierarchical(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count,
                             bool leader);
/// Its price (allreduce/hierarchical.cc), which the shm all-reduce pays beyond a half slot.
double allReduceHierarchicalUs(const CostModel& m, size_t bytes, bool leader, size_t chunk);

/// The three functions of an algorithm's file, in namespace `ns` (the table in algorithms.cc
/// declares every row with it).
#define BRAID_ALGORITHM_FUNCTIONS(ns)                                                         \
  namespace ns {                                                                              \
  Status run(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root);  \
  void plan(const CostModel& model, CostPlan* plan);                                          \
  double cost(const CostModel& model, const CostPlan& plan, size_t bytes, size_t chunkBytes); \
  }
// The rows the shm reduce-scatter, all-gather and broadcast take beyond a half slot: they plan
// and price as these.
BRAID_ALGORITHM_FUNCTIONS(reduce_scatter_ring)
BRAID_ALGORITHM_FUNCTIONS(all_gather_ring)
BRAID_ALGORITHM_FUNCTIONS(broadcast_tree)
Status reduceScatterRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t recvcount);
Status allGatherRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t sendcount);
Status broadcastTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root);
/// recvbuf may be null on ranks other than root.
Status reduceTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root);
Status barrierDissemination(const CollArgs& a);

/// Splits count elements into n nearly equal blocks: block i is [blockStart(i), blockStart(i+1)).
inline size_t blockStart(size_t count, int n, int i) {
  size_t base = count / static_cast<size_t>(n);
  size_t rem = count % static_cast<size_t>(n);
  size_t ui = static_cast<size_t>(i);
  return ui * base + (ui < rem ? ui : rem);
}

/// Shared windows (Communicator::allocShared): the frame of the shm rows' schedules that read
/// the peers' buffers where they lie (shm_windows.cc; allreduce/shm.cc and the others use it).
struct WindowedCall {
  uint64_t g = 0;
  const uint8_t* send[kMaxLocalRanks] = {};  ///< every local rank's send buffer, mapped here
  uint8_t* recv[kMaxLocalRanks] = {};        ///< and its receive buffer
};
/// At or below this (the collective's whole vector) the segment's schedules, one hand-off and a
/// copy that stays in cache, are quicker than the windows' two or three hand-offs.
inline constexpr size_t kWindowsMinBytes = 16 * 1024;
/// Whether the call runs on buffers in shared windows: its fingerprint says so. The
/// communicator decides it when it builds the operation (the shm row on one host, above
/// kWindowsMinBytes, this rank's buffers in its windows), so that the operation's first
/// announcement already tells a peer that decided otherwise.
inline bool inSharedWindows(const CollArgs& a) { return sharedWindowsMarked(a.fp.root); }
/// Publishes where this rank's buffers lie in its windows (kInvalidUsage when one is no longer
/// in a window), arrives (a rank whose buffers are not in windows fails the order check: the
/// fingerprints differ), waits for every local rank and resolves their buffers (sendBytes and
/// recvBytes: what every rank's buffers hold).
Status beginInSharedWindows(const CollArgs& a, const void* sendbuf, size_t sendBytes,
                            const void* recvbuf, size_t recvBytes, WindowedCall* w);
/// The last hand-off: no rank returns (letting its caller rewrite its buffers) while a peer
/// still reads them. Single-copy calls end with it too.
Status endInSharedWindows(const CollArgs& a);
/// Single-copy calls (ShmSegment::singleCopy(): the ranks read and write each other's private
/// buffers with process_vm_readv/writev): every local rank's buffer addresses, in its process.
struct SingleCopyCall {
  uint64_t send[kMaxLocalRanks] = {};
  uint64_t recv[kMaxLocalRanks] = {};
};
/// Publishes this rank's buffer addresses, arrives (checking every rank's fingerprint: counts,
/// dtypes, roots and the operation agree before anybody reads) and collects the others'.
Status beginSingleCopy(const CollArgs& a, const void* sendbuf, const void* recvbuf,
                       SingleCopyCall* c);
/// Folds elements [first, first + count) of every local rank's send buffer in rank order (all
/// ranks get the same bits) into dst, dividing for kAvg; stream: with non-temporal stores, for
/// an output the peers read next.
void foldSharedWindows(const CollArgs& a, const WindowedCall& w, size_t first, size_t count,
                       uint8_t* dst, bool stream);

/// Copies src to dst unless they are the same buffer: copyBytes where the two do not overlap,
/// memmove where they do.
void copyIfDistinct(void* dst, const void* src, size_t bytes);

/// How an all-reduce over P2p starts: the input copied to the output (unless in place) and the
/// operation begun (sequence and fingerprint); returns the output, where it reduces.
uint8_t* beginAllReduce(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count);

}  // namespace braid::detail
