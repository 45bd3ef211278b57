// The algorithm table. Adding an algorithm is its file (collectives/<collective>/<name>.cc,
// defining run, plan and cost in namespace braid::detail::<collective>_<name>), one line in
// BRAID_ALGORITHM_TABLE below, and that file in collectives/CMakeLists.txt.
#include "collectives/algorithms.h"

#include <cstdint>
#include <cstring>

#include "core/copy.h"

namespace braid {

// Here rather than with the communicator, so that what only needs names and the cost model (the
// tuner plugin) does not link the communicator.
const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllToAll:
      return "alltoall";
    case Collective::kBarrier:
      return "barrier";
    case Collective::kSend:
      return "send";
    case Collective::kRecv:
      return "recv";
  }
  return "?";
}

}  // namespace braid

namespace braid::detail {
namespace {

// Where a row can run (AvailabilityFn).
const char* anyLayout(const AlgoLayout&) { return ""; }
const char* oneHostWithSegment(const AlgoLayout& l) {
  if (l.hosts > 1) return "needs every rank on one host";
  return l.segment ? "" : "needs the shm transport";
}
const char* severalHosts(const AlgoLayout& l) {
  return l.hosts > 1 ? "" : "needs ranks on more than one host";
}
const char* severalEqualHosts(const AlgoLayout& l) {
  return l.hosts > 1 && l.minLocal == l.maxLocal
             ? ""
             : "needs ranks on more than one host, as many on each";
}

// The smallest pipelining chunk the selector tries. Below 64 KiB a round's fixed work (posting,
// waking the peer, waiting: 4–8 µs on the 2-core test VM over shm) outweighs the α the model
// charges a round, so smaller chunks look cheaper than they run: the double binary tree chosen
// with 8 KiB chunks at 2 MiB on 2 ranks ran in 1.0 ms against 0.5 ms with 1 MiB.
constexpr size_t k64K = size_t{64} << 10;

}  // namespace

// One line per algorithm, grouped by collective; within a collective, the order in which names
// are listed (error messages, braid-perf -a all) and in which the selector breaks ties.
// Columns: collective, name, aliases, availability, chunk search (0: none, else the smallest
// chunk the selector tries), and the namespace of the algorithm's file.
// clang-format off
#define BRAID_ALGORITHM_TABLE(X)                                                                    \
  X(kAllReduce,     "ring",                "",                 anyLayout,          0,    allreduce_ring)                \
  X(kAllReduce,     "tree",                "",                 anyLayout,          0,    allreduce_tree)                \
  X(kAllReduce,     "halving_doubling",    "hd,rabenseifner",  anyLayout,          0,    allreduce_halving_doubling)    \
  X(kAllReduce,     "shm",                 "",                 oneHostWithSegment, 0,    allreduce_shm)                 \
  X(kAllReduce,     "hierarchical",        "hier",             severalHosts,       k64K, allreduce_hierarchical)        \
  X(kAllReduce,     "hierarchical_leader", "leader",           severalHosts,       k64K, allreduce_hierarchical_leader) \
  X(kAllReduce,     "double_binary_tree",  "dbt",              anyLayout,          k64K, allreduce_double_binary_tree)  \
  X(kReduceScatter, "ring",                "",                 anyLayout,          0,    reduce_scatter_ring)           \
  X(kReduceScatter, "hierarchical",        "hier",             severalEqualHosts,  0,    reduce_scatter_hierarchical)   \
  X(kReduceScatter, "shm",                 "",                 oneHostWithSegment, 0,    reduce_scatter_shm)            \
  X(kAllGather,     "ring",                "",                 anyLayout,          0,    all_gather_ring)               \
  X(kAllGather,     "hierarchical",        "hier",             severalEqualHosts,  0,    all_gather_hierarchical)       \
  X(kAllGather,     "shm",                 "",                 oneHostWithSegment, 0,    all_gather_shm)                \
  X(kBroadcast,     "tree",                "",                 anyLayout,          0,    broadcast_tree)                \
  X(kBroadcast,     "shm",                 "",                 oneHostWithSegment, 0,    broadcast_shm)                 \
  X(kReduce,        "tree",                "",                 anyLayout,          0,    reduce_tree)                   \
  X(kAllToAll,      "pairwise",            "",                 anyLayout,          0,    all_to_all_pairwise)           \
  X(kBarrier,       "dissemination",       "",                 anyLayout,          0,    barrier_dissemination)         \
  X(kBarrier,       "shm",                 "",                 oneHostWithSegment, 0,    barrier_shm)
// clang-format on

// Each file's three functions.
#define BRAID_DECLARE_ALGORITHM(coll, name, aliases, available, chunkFrom, ns) \
  BRAID_ALGORITHM_FUNCTIONS(ns)
BRAID_ALGORITHM_TABLE(BRAID_DECLARE_ALGORITHM)
#undef BRAID_DECLARE_ALGORITHM

const std::vector<Algorithm>& algorithmTable() {
#define BRAID_ALGORITHM_ROW(coll, name, aliases, available, chunkFrom, ns) \
  Algorithm{Collective::coll, name, aliases, available, chunkFrom, &ns::run, &ns::plan, &ns::cost},
  static const std::vector<Algorithm> kTable = {BRAID_ALGORITHM_TABLE(BRAID_ALGORITHM_ROW)};
#undef BRAID_ALGORITHM_ROW
  return kTable;
}

bool runsOnSegment(const Algorithm& a) { return a.unavailable == oneHostWithSegment; }

size_t algorithmIndex(const Algorithm& a) {
  return static_cast<size_t>(&a - algorithmTable().data());
}

std::vector<const Algorithm*> algorithmsOf(Collective c) {
  std::vector<const Algorithm*> out;
  for (const Algorithm& a : algorithmTable()) {
    if (a.collective == c) out.push_back(&a);
  }
  return out;
}

namespace {

// Whether `name` is one of the comma-separated `aliases`.
bool isAlias(const char* aliases, const std::string& name) {
  for (const char* p = aliases; *p != '\0';) {
    const char* end = std::strchr(p, ',');
    const size_t n = end != nullptr ? static_cast<size_t>(end - p) : std::strlen(p);
    if (n == name.size() && name.compare(0, n, p, n) == 0) return true;
    if (end == nullptr) break;
    p = end + 1;
  }
  return false;
}

}  // namespace

const Algorithm* findAlgorithm(Collective c, const std::string& name) {
  for (const Algorithm& a : algorithmTable()) {
    if (a.collective == c && (name == a.name || isAlias(a.aliases, name))) return &a;
  }
  return nullptr;
}

std::string algorithmNames(Collective c) {
  std::string s;
  for (const Algorithm* a : algorithmsOf(c)) s += (s.empty() ? "" : ", ") + std::string(a->name);
  return s;
}

Result<const Algorithm*> lookupAlgorithm(Collective c, const std::string& name) {
  if (const Algorithm* a = findAlgorithm(c, name)) return a;
  return invalidArgument(std::string("unknown ") + collectiveName(c) + " algorithm '" + name +
                         "'; valid: " + algorithmNames(c));
}

// ---------------------------------------------------------------------------------------------
// What the algorithms share

uint8_t* Scratch::get(size_t bytes) {
  if (buf_.size() < bytes) {
    buf_.clear();
    buf_.shrink_to_fit();
    buf_.resize(bytes);
  }
  return buf_.data();
}

void copyIfDistinct(void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  if (rangesOverlap(dst, bytes, src, bytes)) {
    std::memmove(dst, src, bytes);  // overlapping (no caller's buffers do: checkOverlap)
    return;
  }
  copyBytes(dst, src, bytes);  // glibc's memcpy is 15x slower at some offsets (core/copy.h)
}

uint8_t* beginAllReduce(const CollArgs& a, const void* sendbuf, void* recvbuf, size_t count) {
  copyIfDistinct(recvbuf, sendbuf, count * a.elemSize);
  a.p2p->begin(a.seq, a.fp);
  return static_cast<uint8_t*>(recvbuf);
}

}  // namespace braid::detail
