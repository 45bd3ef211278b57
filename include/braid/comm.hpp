// braid's C++ communicator: collectives on host memory between processes.
//
//   auto comm = braid::Communicator::createFromEnvironment();   // torchrun, mpiexec or file store
//   BRAID_RETURN_IF_ERROR((*comm)->allReduce(send, recv, n, DataType::kFloat32, ReduceOp::kSum));
//
// Every rank must issue the same collectives in the same order with matching count, dtype, op and
// root; a mismatch is reported as kInvalidUsage on every rank (never a hang or a wrong result).
// Every wait is bounded by BRAID_TIMEOUT_MS. After any error the communicator is failed: later
// calls return the first error; destroy it (or abort()) and create a new one, or shrink() it to
// the ranks that are left.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/status.h"
#include "braid/store.h"
#include "braid/types.h"

namespace braid {

/// An asynchronous operation. Operations complete in the order they were issued.
class Work {
 public:
  virtual ~Work() = default;
  /// True when finished (successfully or not); never blocks.
  virtual bool test() = 0;
  /// Waits for completion (bounded by BRAID_TIMEOUT_MS inside the operation) and returns its
  /// outcome.
  virtual Status wait() = 0;
  /// Waits at most timeoutMs (<= 0: as wait()). When the operation has not finished by then,
  /// the communicator is failed with a kTimeout naming this rank and the operation (as torch's
  /// Work.wait(timeout) aborts its communicator): its peers stop waiting too, and the operation
  /// is given up to a second to stop touching its buffers. A collective that is late on one
  /// rank is stuck for all, and a buffer released after an error must not be written later.
  virtual Status wait(int64_t timeoutMs) = 0;
};

/// How shrink treats the communicator it is called on (NCCL's NCCL_SHRINK_DEFAULT and
/// NCCL_SHRINK_ABORT).
enum class ShrinkMode : int {
  /// A failed communicator is released (see shrink); a healthy one stays usable, as after split.
  kDefault = 0,
  /// The communicator is failed first ("aborted by shrink": its operations in flight end with
  /// that error on every rank) and released.
  kAbort = 1,
};

enum class Collective : int {
  kAllReduce = 0,
  kReduceScatter = 1,
  kAllGather = 2,
  kBroadcast = 3,
  kReduce = 4,
  kAllToAll = 5,
  kBarrier = 6,
  kSend = 7,
  kRecv = 8,
};
const char* collectiveName(Collective c);

/// One send or receive of a point-to-point group (Communicator::sendRecvGroup).
struct P2pOp {
  bool isSend = true;
  void* buf = nullptr;  ///< read by a send, written by a receive
  size_t count = 0;     ///< elements; a receive's must equal the matching send's
  DataType type = DataType::kFloat32;
  int peer = -1;
};

/// One rank's part of a shared window as this process maps it (Communicator::sharedPart).
struct SharedPart {
  void* ptr = nullptr;
  size_t bytes = 0;
};

/// Optional hooks of an open-ended point-to-point group, run on the calling thread while the
/// group waits (they must not call this communicator).
struct P2pGroupHooks {
  /// May append operations to *ops; they join the group (an invalid one ends joining: the
  /// group finishes what it posted and returns that error). Called whenever the wait idles.
  std::function<void(std::vector<P2pOp>* ops)> join;
  /// Called once per operation, with its index in the group, as soon as it completes.
  std::function<void(size_t index)> completed;
};

struct CommOptions {
  int rank = -1;
  int size = 0;
  /// Rendezvous store shared by all ranks (kept alive by the communicator).
  std::shared_ptr<Store> store;
  /// Per-job secret every connection presents. 0 (the usual case): rank 0 makes one and
  /// distributes it through `store`; nonzero: given by the caller, the same on every rank (the C
  /// API's unique id carries one).
  uint64_t jobSecret = 0;
  /// "" = BRAID_TRANSPORT; "auto" (shm within a host, tcp across hosts), "shm", "tcp".
  std::string transport;
  /// Host identity; "" = BRAID_HOST_ID, else derived from hostname, boot id and network namespace.
  std::string hostId;
  /// Address tcp listens on; "" = interface selection (BRAID_SOCKET_IFNAME).
  std::string tcpAddress;
  /// Where this communicator's keys live in `store`. "" = "braid/c<N>/", N counting the
  /// communicators this process created, which agrees across ranks only when every process
  /// creates the same communicators in the same order; a framework that creates one on a
  /// subset of its processes (a torch subgroup) passes a prefix unique to it instead.
  std::string keyPrefix;
  /// Deadline of every blocking wait in milliseconds (rendezvous, connections, collectives,
  /// the segment, the Bucketer). 0 = BRAID_TIMEOUT_MS, whose own 0 (or any value <= 0) means
  /// its default of 300000: nothing in braid waits without a deadline.
  int64_t timeoutMs = 0;
};

class Communicator {
 public:
  /// Collective over all ranks in options. Blocks until every rank has joined (deadline
  /// BRAID_TIMEOUT_MS).
  static Result<std::unique_ptr<Communicator>> create(CommOptions options);
  /// Bootstraps from the environment (torchrun variables, mpiexec, or BRAID_FILE_STORE).
  static Result<std::unique_ptr<Communicator>> createFromEnvironment();

  /// Collective over this communicator (like MPI_Comm_split / ncclCommSplit): the ranks that pass
  /// the same color >= 0 form a new communicator, ranked by (key, rank here); color -1 takes part
  /// but gets no communicator (a null pointer). The new one shares this one's store and job
  /// secret and works independently of it (its own connections, sequence numbers and thread).
  Result<std::unique_ptr<Communicator>> split(int color, int key);

  /// Collective over the listed ranks only (like MPI_Comm_create_group): `ranks` (ranks of this
  /// communicator, no duplicates, the caller among them) form a new communicator ranked in list
  /// order; ranks not listed do not call. For frameworks that create a subgroup on its members
  /// alone (torch.distributed's new_group). Every member must pass the same list, and members
  /// create the subgroups of one list in the same order (each list counts its own); a member that
  /// does not call, or passes another list, is a kTimeout within timeoutMs() naming it. The new
  /// one shares this one's store, job secret, transport, timeout and fabric model (no new probe)
  /// and works independently of it, as after split; its timeout is `timeoutMs`, or this one's
  /// when 0. Not concurrently with another split or subgroup of this communicator.
  Result<std::unique_ptr<Communicator>> subgroup(const std::vector<int>& ranks,
                                                 int64_t timeoutMs = 0);

  /// Collective over the ranks of this communicator that stay (like ncclCommShrink): a new
  /// communicator of every rank not in `excluded` (ranks of this one, any order, no duplicates),
  /// renumbered densely in this one's rank order. Made for recovery: it works on a failed
  /// communicator (the survivors of a killed rank shrink it away), and can also drop a healthy
  /// rank. Every rank that stays must pass the same set: a different one is kInvalidUsage on
  /// the ranks that see it, and a rank that stays but does not call within timeoutMs() is a
  /// kTimeout naming it. An excluded rank need not call (a dead one cannot); one that does takes
  /// part in the agreement and gets a null pointer, like split's color -1.
  /// A failed communicator (or any, with ShrinkMode::kAbort) is released here: its progress
  /// thread stops (queued operations complete with its error), its connections and shared
  /// segment are closed; it stays failed, and is still destroyed by its owner. The new one
  /// shares its store, job secret, transport and timeout; repeated shrinks each use fresh keys.
  Result<std::unique_ptr<Communicator>> shrink(const std::vector<int>& excluded,
                                               ShrinkMode mode = ShrinkMode::kDefault);

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  /// Position among the ranks of this host, and how many share it.
  int localRank() const;
  int localSize() const;
  /// Index of this rank's host (hosts numbered by their lowest rank) and the number of hosts.
  int hostIndex() const;
  int numHosts() const;
  /// The host index of any rank.
  int hostOf(int rank) const;
  /// The deadline of every wait, in milliseconds (CommOptions::timeoutMs or BRAID_TIMEOUT_MS).
  int64_t timeoutMs() const;

  // Blocking collectives. sendbuf == recvbuf (or, for gathers, sendbuf at recvbuf + rank's
  // offset) is in-place. Counts are in elements.
  Status allReduce(const void* sendbuf, void* recvbuf, size_t count, DataType type, ReduceOp op);
  /// recvbuf gets this rank's recvcount-element block of the reduction of sendbuf
  /// (size × recvcount elements).
  Status reduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType type,
                       ReduceOp op);
  /// recvbuf (size × sendcount) gets every rank's sendbuf, in rank order.
  Status allGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType type);
  /// sendbuf is read on root only; recvbuf filled on every rank.
  Status broadcast(const void* sendbuf, void* recvbuf, size_t count, DataType type, int root);
  /// recvbuf is written on root only (may be null elsewhere).
  Status reduce(const void* sendbuf, void* recvbuf, size_t count, DataType type, ReduceOp op,
                int root);
  /// Block j (count elements) of sendbuf goes to rank j, landing at block i of its recvbuf.
  Status allToAll(const void* sendbuf, void* recvbuf, size_t count, DataType type);
  Status barrier();
  Status send(const void* buf, size_t count, DataType type, int peer);
  Status recv(void* buf, size_t count, DataType type, int peer);
  /// A point-to-point group (as ncclGroupStart/End around sends and receives, or MPI_Waitall
  /// over Isend/Irecv): posts every operation at once and progresses them together, so ranks
  /// that send to each other before they receive do not wait on each other. Messages between
  /// two ranks keep their order per direction. Returns when every operation has completed;
  /// invalid operations are reported before anything is posted.
  Status sendRecvGroup(std::vector<P2pOp> ops, const P2pGroupHooks& hooks = {});

  /// Shared windows (as MPI_Win_allocate_shared, or NCCL's registered buffers): `bytes` of
  /// zeroed memory that every rank on this host maps. An all-reduce, reduce-scatter,
  /// all-gather or broadcast whose buffers lie inside windows (above 16 KiB) reads the peers'
  /// data where it lies, with none of the copies through braid's staging segment (on one host
  /// with the shm transport; elsewhere the memory works as any other). Either every rank passes
  /// window buffers to such a call or none does (kInvalidUsage naming both ranks otherwise). Collective: every rank calls it in the same
  /// order as its other operations, sizes may differ. Valid until freeShared or the
  /// communicator's end (a shrink of it releases it too); an allocation one rank cannot make
  /// fails on every rank, nothing kept.
  Result<void*> allocShared(size_t bytes);
  /// Frees a window of allocShared on this rank (local, as ncclMemFree; in issue order after
  /// this rank's asynchronous operations). Every rank frees it once no operation uses it any
  /// more; a collective naming a window a peer freed fails on every rank.
  Status freeShared(void* ptr);
  /// Where rank `rank`'s part of a window is mapped in this process, and its size, as
  /// MPI_Win_shared_query: `window` is the pointer allocShared returned on this rank. The caller
  /// may read and write that memory directly, synchronizing with its owner by other means (a
  /// barrier, say). kInvalidArgument when `window` is no window of this communicator (or was
  /// freed), or when rank's memory is not mapped here: another host, the tcp transport forced,
  /// or one rank on this host (then only this rank's own part is).
  Result<SharedPart> sharedPart(const void* window, int rank);

  // Asynchronous variants: run on the communicator's progress thread in issue order. Buffers
  // must stay valid until the Work completes. A blocking call issued while any of them is
  // unfinished runs after them (on the progress thread); otherwise on the calling thread.
  Result<std::shared_ptr<Work>> allReduceAsync(const void* sendbuf, void* recvbuf, size_t count,
                                               DataType type, ReduceOp op);
  Result<std::shared_ptr<Work>> reduceScatterAsync(const void* sendbuf, void* recvbuf,
                                                   size_t recvcount, DataType type, ReduceOp op);
  Result<std::shared_ptr<Work>> allGatherAsync(const void* sendbuf, void* recvbuf,
                                               size_t sendcount, DataType type);
  Result<std::shared_ptr<Work>> broadcastAsync(const void* sendbuf, void* recvbuf, size_t count,
                                               DataType type, int root);

  // Algorithm choice. Every collective's algorithms are rows of one table (the names braid-perf
  // -a, BRAID_ALGO and tuning files use); `bytes` is the collective's vector (reduce-scatter and
  // all-gather: all p blocks; all-to-all: one rank's send buffer; barrier: 0).

  /// The algorithms of `collective` that can run on this communicator's ranks, in the table's
  /// order (empty for send and recv).
  std::vector<std::string> algorithms(Collective collective) const;
  /// The algorithm that runs a `collective` of `bytes`: the one forced here, else BRAID_ALGO's,
  /// a tuning-file rule's, or the cost model's cheapest.
  std::string algorithmFor(Collective collective, size_t bytes) const;
  /// Forces one of algorithms(collective), by name or alias, on this rank ("" or "auto": the
  /// automatic choice again). Every rank must force the same. kInvalidArgument names the valid
  /// algorithms for an unknown name, and says why for one that cannot run on these ranks.
  Status setAlgorithm(Collective collective, const std::string& name);
  /// The selector's predicted time in microseconds of a `collective` of `bytes` with `algorithm`
  /// ("" = the one algorithmFor picks); negative when it cannot run here or is unknown.
  double predictedUs(Collective collective, size_t bytes, const std::string& algorithm = "") const;
  /// The selector's cost model in one line: α/β per link class, γ, and where they came from.
  std::string selectorModel() const;

  /// Marks the communicator failed, tells peers, wakes every wait and releases connections.
  /// Safe to call from any thread, also while a collective is running.
  void abort(const std::string& reason = "aborted by the application");
  /// ok, or the error that failed the communicator.
  Status health() const;

  class Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid
