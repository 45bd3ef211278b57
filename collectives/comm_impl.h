// Communicator internals shared by communicator.cc (setup, failure, queue) and collectives.cc
// (argument checks and dispatch).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "braid/comm.hpp"
#include "collectives/algorithms.h"
#include "collectives/p2p.h"
#include "collectives/selector/calibration.h"
#include "collectives/selector/selector.h"
#include "collectives/shm_segment.h"
#include "braid/store.h"
#include "core/trace.h"
#include "transport/transport.h"

namespace braid {

class Communicator::Impl {
 public:
  class WorkItem;
  ~Impl();

  Status init(CommOptions options);

  /// Runs body with the arguments of one operation, in issue order, after checking health; a
  /// failure fails the communicator. collective=false (send/recv) takes no sequence number.
  Status run(const detail::Fingerprint& fp, bool collective,
             const std::function<Status(const detail::CollArgs&)>& body);
  Result<std::shared_ptr<Work>> runAsync(const detail::Fingerprint& fp,
                                         std::function<Status(const detail::CollArgs&)> body);

  /// The selector's full decision (the table's row, chunk, predicted time, reason) for a
  /// collective of `bytes` (CostModel::predictUs says what bytes counts), with what
  /// setAlgorithm forced.
  detail::Decision decide(Collective c, size_t bytes) const;
  /// The same, remembered per (collective, size): the row to run and its chunk (0 = default).
  struct Choice {
    const detail::Algorithm* algo = nullptr;
    size_t chunkBytes = 0;
  };
  Choice choose(Collective c, size_t bytes) const;
  /// Why `algo` cannot run on this communicator's layout ("" when it can).
  std::string unavailableWhy(const detail::Algorithm& algo) const;

  /// Argument checks and the body of each operation that has a blocking and an async form.
  struct Op;
  Result<Op> allReduceOp(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                         ReduceOp op) const;
  Result<Op> reduceScatterOp(const void* sendbuf, void* recvbuf, size_t recvcount, DataType type,
                             ReduceOp op) const;
  Result<Op> allGatherOp(const void* sendbuf, void* recvbuf, size_t sendcount,
                         DataType type) const;
  Result<Op> broadcastOp(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                         int root) const;
  bool hasSegment() const { return segment_ != nullptr; }
  /// Times real 8-byte all-reduces and gives the selector's model the per-call cost its other
  /// terms leave out (FabricModel::callUs, the largest any rank saw, so all ranks agree). Run
  /// collectively when the communicator is created; skipped with BRAID_CALIBRATION=off.
  /// With `checks`, it also times the runner-up at 8 bytes, and reports for both the slowest
  /// rank's typical call beside the model's prediction before the correction (identical on every
  /// rank; empty when skipped): what setUpSelector holds the model against.
  struct CallCheck {
    std::string algorithm;
    double measuredUs = 0;
    double predictedUs = 0;
  };
  Status measureCallOverhead(std::vector<CallCheck>* checks = nullptr);

  /// Records the first error, raises the host-wide abort word and publishes it in the store.
  /// Safe from any thread.
  void recordFailure(const Status& s, bool notifyPeers);
  /// For shrink, on a failed communicator: stops the progress thread (queued operations
  /// complete with the failure), waits for a collective of another thread to end (it ends at
  /// once: the communicator is failed), then closes the connections and the segment.
  void releaseResources();
  Status health() const;
  Status checkStalledOrder();
  int64_t timeoutMs() const { return timeoutMs_; }

  int rank_ = 0;
  int size_ = 1;
  int localRank_ = 0;
  int numHosts_ = 1;
  /// Ranks on this rank's machine, and the most on any machine: emulated hosts (network
  /// namespaces of one kernel) share a machine's cores.
  int ranksOnMyMachine_ = 1;
  int ranksPerMachine_ = 1;
  std::vector<int> hostOf_;
  std::vector<int> localRanks_;
  /// Per collective, the algorithm forced through setAlgorithm (null = automatic).
  static constexpr int kCollectives = static_cast<int>(Collective::kBarrier) + 1;
  const detail::Algorithm* forced_[kCollectives] = {};
  /// Decisions by (collective, message size), cleared when an algorithm is forced.
  static constexpr size_t kDecisionCacheEntries = 4096;
  mutable std::mutex decisionMu_;
  mutable std::unordered_map<uint64_t, Choice> decisionCache_;
  /// What init resolved (transport, host identity), for split; the store prefix of a split
  /// child (set before init; "" = a fresh top-level prefix); splits made so far.
  CommOptions options_;
  std::string splitPrefix_;
  /// A split or shrink child's fabric model, its parent's (set before init): the child runs on
  /// the same hosts and links, so it neither probes nor reads the cache again.
  std::optional<detail::FabricModel> inheritedModel_;
  int splits_ = 0;
  std::map<std::vector<int>, int> subgroups_;  ///< per rank list, subgroups made of it
  int shrinks_ = 0;
  const std::string& storePrefix() const { return prefix_; }
  /// The store prefix of a child (split, shrink) named `tag`: beside this one's, never under it
  /// ("braid/c0/" → "braid/c0.s1.2/"), so that erasing this prefix leaves a child that outlives
  /// it intact.
  std::string childPrefix(const std::string& tag) const;
  /// The prefix as one name part, for shm segment and trace file names: "braid/c0.s1.2/" →
  /// "c0.s1.2".
  std::string prefixTag() const;
  std::atomic<bool> aborted_{false};
  std::unique_ptr<detail::Selector> selector_;
  detail::AlgoOverrides algoOverrides_;

 private:
  Status connectAll(Deadline deadline);
  Status parseAlgoOverrides(const std::string& spec);
  /// Calibrates the fabric (or reads the cache), agrees on the model and builds selector_, then
  /// checks the model against live 8-byte all-reduces (calibration.h, step 4).
  Status setUpSelector(const std::string& transportName, Deadline deadline);
  /// One calibration: the probe (forced, under `keyPrefix`) or the cache, and selector_ built.
  Status buildSelector(const std::string& transportName, Deadline deadline, bool forceProbe,
                       const std::string& keyPrefix, detail::PendingCache* pending);
  Status execute(const detail::Fingerprint& fp, bool collective,
                 const std::function<Status(const detail::CollArgs&)>& body);
  /// BRAID_TRACE_FILE: creates tracer_ and aligns the ranks' clocks (a no-op when unset).
  Status startTrace();
  void traceCollective(const detail::CollArgs& a, uint64_t startNs, const Status& s);
  /// recordFailure, then abort frames to every peer.
  void fail(const Status& s, bool publish);
  Status checkAbort();
  Status storeAbortStatus(Deadline deadline);
  /// s names the peers this rank waited for (stalled); follows the other ranks' records.
  Status explainTimeout(const Status& s, const std::vector<int>& stalled);
  /// Publishes whom this rank waits for (waitfor/<rank>: the stalled peers), and when.
  void publishWaitFor(const std::vector<int>& peers);
  int64_t waitForLeadMs() const;
  std::shared_ptr<Work> enqueue(Collective c, std::function<Status()> fn);
  void workerLoop();

  std::shared_ptr<Store> store_;
  uint64_t secret_ = 0;
  int64_t timeoutMs_ = 0;
  size_t chunkBytes_ = 0;
  std::string prefix_;
  std::unique_ptr<transport::Transport> shm_;
  std::unique_ptr<transport::Transport> tcp_;
  std::vector<detail::PeerLink> links_;
  std::unique_ptr<detail::ShmSegment> segment_;
  std::unique_ptr<detail::Tracer> tracer_;  // before p2p_, which points to it
  std::unique_ptr<detail::P2p> p2p_;
  detail::Scratch scratch_, outerScratch_;
  uint64_t seq_ = 0;
  uint64_t nextStoreCheckNs_ = 0;
  /// The collective this rank is running (sequence 0: none), since when, and whether it has
  /// published itself for checkStalledOrder.
  uint64_t curSeq_ = 0;
  detail::Fingerprint curFp_;
  uint64_t curSinceNs_ = 0;
  bool curPublished_ = false;
  /// When publishWaitFor last ran (the thread running collectives only).
  uint64_t waitForPublishedNs_ = 0;

  /// Guards firstError_, and segment_ against releaseResources (recordFailure raises the
  /// segment's abort word from any thread). Order: execMu_, then errorMu_.
  mutable std::mutex errorMu_;
  Status firstError_;

  std::mutex execMu_;
  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::deque<std::shared_ptr<WorkItem>> queue_;
  std::thread worker_;
  std::atomic<bool> workerStarted_{false};
  bool stopping_ = false;
  bool released_ = false;  ///< releaseResources ran (guarded by queueMu_)
};

}  // namespace braid
