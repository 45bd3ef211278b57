// Internal interface between the communicator and its algorithms. Each algorithm is one file
// that opens with its schedule and α-β(-γ) cost, written only against P2p (or, for the same-host
// algorithms, ShmSegment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/types.h"
#include "collectives/p2p.h"
#include "collectives/shm_segment.h"
#include "core/reduce.h"

namespace braid::detail {

/// Scratch memory that grows on demand and is reused (never freed per call), so repeated large
/// collectives do not page-fault fresh memory on every call.
class Scratch {
 public:
  uint8_t* get(size_t bytes);

 private:
  std::vector<uint8_t> buf_;
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
};

// All-reduce: sendbuf may equal recvbuf. kAvg is finished (divided) by the algorithm.
Status allReduceRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count);
Status allReduceTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count);
Status allReduceHalvingDoubling(const CollArgs& a, const void* sendbuf, void* recvbuf,
                                size_t count);
Status allReduceShm(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count);
/// Intra-host reduce-scatter → inter-host all-reduce per shard → intra-host all-gather; with
/// leader=true a single shard (reduce to local rank 0 → leaders' all-reduce → broadcast).
Status allReduceHierarchical(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count,
                             bool leader);

// Other collectives (one algorithm each for now).
Status reduceScatterRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t recvcount);
Status allGatherRing(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t sendcount);
Status broadcastTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count,
                     int root);
Status reduceTree(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count, int root);
Status allToAllPairwise(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count);
Status barrierDissemination(const CollArgs& a);
Status barrierShm(const CollArgs& a);

/// This rank's view of the host layout for one call of a hierarchical algorithm.
struct HostPlan {
  int numHosts = 1;
  int host = 0;                 ///< this rank's host index
  int local = 0;                ///< this rank's index on its host
  int shards = 1;               ///< k: local ranks 0..k−1 of every host own one shard each
  bool uniform = true;          ///< every host holds the same number of ranks
  std::vector<int> localRanks;  ///< global ranks on this host, in order
  std::vector<int> group;       ///< owners only: the rank with this local index on every host
};
/// From CollArgs::hostOf (one host when unset); leader: a single shard (k = 1).
HostPlan makeHostPlan(const CollArgs& a, bool leader);

/// Hierarchical reduce-scatter and all-gather (collectives/hierarchical_rs_ag.cc), for hosts
/// that hold the same number of ranks: the inter-host step runs among the ranks with the same
/// local index, so each host's link carries only what the other hosts need.
Status reduceScatterHierarchical(const CollArgs& a, const void* sendbuf, void* recvbuf,
                                 size_t recvcount);
Status allGatherHierarchical(const CollArgs& a, const void* sendbuf, void* recvbuf,
                             size_t sendcount);

/// The all-reduce algorithms by name, for BRAID_ALGO and the benchmark.
enum class AllReduceAlgo {
  kAuto,
  kRing,
  kTree,
  kHalvingDoubling,
  kShm,
  kHierarchical,
  kHierarchicalLeader
};
const char* allReduceAlgoName(AllReduceAlgo algo);
/// Accepts "auto", "ring", "tree", "halving_doubling" (alias "hd", "rabenseifner"), "shm",
/// "hierarchical" (alias "hier"), "hierarchical_leader" (alias "leader").
Result<AllReduceAlgo> parseAllReduceAlgo(const std::string& name);

/// Splits count elements into n nearly equal blocks: block i is [blockStart(i), blockStart(i+1)).
inline size_t blockStart(size_t count, int n, int i) {
  size_t base = count / static_cast<size_t>(n);
  size_t rem = count % static_cast<size_t>(n);
  size_t ui = static_cast<size_t>(i);
  return ui * base + (ui < rem ? ui : rem);
}

/// Copies src to dst unless they are the same buffer.
void copyIfDistinct(void* dst, const void* src, size_t bytes);

}  // namespace braid::detail
