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
#include "core/function_ref.h"
#include "core/trace.h"
#include "transport/transport.h"

namespace braid {

class Communicator::Impl {
 public:
  class WorkItem;
  ~Impl();

  Status init(CommOptions options);

  /// The body of an operation, run before run() returns (no allocation: a blocking call's fast
  /// path passes one).
  using Body = detail::FunctionRef<Status(const detail::CollArgs&)>;
  /// Runs body with the arguments of one operation, in issue order, after checking health; a
  /// failure fails the communicator. collective=false (send/recv) takes no sequence number.
  Status run(const detail::Fingerprint& fp, bool collective, Body body);
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
    double predictedUs = -1;  ///< the model's time for it (-1: none, or not the model's pick)
    double pricedUs = -1;     ///< the model's time for it, whoever picked it (-1: none)
  };
  Choice choose(Collective c, size_t bytes) const;
  /// Why `algo` cannot run on this communicator's layout ("" when it can).
  std::string unavailableWhy(const detail::Algorithm& algo) const;

  /// An operation after its arguments were checked: what every rank must agree on, and what
  /// runs (the chosen row on these buffers: operator()). The blocking and the asynchronous entry
  /// points share these, so they check exactly the same; a blocking call runs it in place.
  struct Op {
    detail::Fingerprint fp;
    Choice choice;
    const void* sendbuf = nullptr;
    void* recvbuf = nullptr;
    size_t count = 0;
    int root = -1;
    Status operator()(const detail::CollArgs& a) const;
  };
  /// Argument checks and the body of each operation that has a blocking and an async form.
  Result<Op> allReduceOp(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                         ReduceOp op) const;
  Result<Op> reduceScatterOp(const void* sendbuf, void* recvbuf, size_t recvcount, DataType type,
                             ReduceOp op) const;
  Result<Op> allGatherOp(const void* sendbuf, void* recvbuf, size_t sendcount,
                         DataType type) const;
  Result<Op> broadcastOp(const void* sendbuf, void* recvbuf, size_t count, DataType type,
                         int root) const;
  bool hasSegment() const { return segment_ != nullptr; }
  /// Marks *fp (detail::sharedWindowsRoot) when the operation runs on buffers in shared windows:
  /// `choice` is the shm row on one host, the collective's vector is above kWindowsMinBytes, and
  /// this rank's send and receive buffers lie in its windows.
  void markSharedWindows(const Choice& choice, size_t bytes, const void* sendbuf, size_t sendBytes,
                         const void* recvbuf, size_t recvBytes, detail::Fingerprint* fp) const;
  /// Communicator::allocShared/freeShared: windows of the host's segment, or, with no segment
  /// (one rank on this host, or the tcp transport forced), private memory kept in privateWindows_.
  Result<void*> allocShared(size_t bytes);
  Status freeShared(void* ptr);
  Result<SharedPart> sharedPart(const void* window, int rank);
  /// Every rank's word, gathered from inside an operation (an all-gather run in place).
  Result<std::vector<uint64_t>> gatherWords(uint64_t word);
  /// Unmaps window id, which starts at ptr here (private or in the segment).
  void releaseWindow(uint32_t id, void* ptr);
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
    size_t bytes = 8;  // the all-reduce's message
  };
  Status measureCallOverhead(detail::Selector& selector, std::vector<CallCheck>* checks = nullptr);
  /// The selector in effect (null before calibration): closed-loop tuning may replace it at any
  /// collective, so a caller outside the executing thread holds this copy while it reads.
  std::shared_ptr<detail::Selector> selector() const;

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
  detail::AlgoOverrides algoOverrides_;

 private:
  Status connectAll(Deadline deadline);
  Status parseAlgoOverrides(const std::string& spec);
  /// Calibrates the fabric (or reads the cache), agrees on the model and builds selector_, then
  /// checks the model against live 8-byte all-reduces (calibration.h, step 4).
  Status setUpSelector(const std::string& transportName, Deadline deadline);
  /// One calibration: the probe (forced, under `keyPrefix`) or the cache, and a selector built
  /// on it (installSelector puts it in effect).
  Result<std::shared_ptr<detail::Selector>> buildSelector(const std::string& transportName,
                                                          Deadline deadline, bool forceProbe,
                                                          const std::string& keyPrefix,
                                                          detail::PendingCache* pending);
  /// A forced probe under `keyPrefix` and its selector timed as at creation (nothing installed);
  /// *why says how its model is implausible against the live calls ("" when it is not).
  Result<std::shared_ptr<detail::Selector>> probeAndCheck(const std::string& keyPrefix,
                                                          Deadline deadline,
                                                          detail::PendingCache* pending,
                                                          std::string* why);
  /// Puts `selector` in effect at once for every thread, and forgets the earlier decisions.
  void installSelector(std::shared_ptr<detail::Selector> selector);
  /// Closed-loop tuning (docs/tuning-file.md): each all-reduce's time against its prediction;
  /// every BRAID_RETUNE_INTERVAL collectives the ranks agree whether the model is off, and if it
  /// is they re-probe together and install the new model.
  void startLiveChecks(const detail::Selector& sel);  ///< at the end of setUpSelector
  void recordLive(const detail::CollArgs& a);
  /// CollArgs::timeFromUs for the next operation: 0 for a traced collective or a sampled quick
  /// all-reduce, kTimeEveryCallUs while the live checks run, infinity otherwise.
  double liveTimeFromUs(bool collective);
  Status retune();
  bool retuneDue() const { return liveInterval_ > 0 && !inRetune_ && seq_ >= nextVoteSeq_; }
  Status execute(const detail::Fingerprint& fp, bool collective, Body body);
  /// Marks the thread running execute for this communicator (run calls execute directly there).
  class ExecutingHere {
   public:
    explicit ExecutingHere(const Impl* impl);
    ~ExecutingHere();
    static const Impl* current();

   private:
    const Impl* outer_;
  };
  /// Rank 0 writes the model of `sel` to the cache file a probe named (call overhead left out).
  void writeCache(const detail::PendingCache& pending, const detail::Selector& sel);
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
  /// How the shm collectives run under the model in effect: its single copies and cache bounds
  /// (installSelector; read by the thread that executes, which also installs a re-probed
  /// model).
  detail::ShmPlan shmPlan_;
  /// allocShared without a segment: start → (window id, bytes); ids count every allocShared.
  std::map<void*, std::pair<uint32_t, size_t>> privateWindows_;
  uint32_t lastWindowId_ = 0;
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
  /// Closed-loop tuning (the thread running collectives only): measured ÷ predicted time of the
  /// latest all-reduces timed (a ring), when the next vote is due (a sequence number), the interval
  /// between votes (0: off; doubled by each re-probe), re-probes so far, and whether a vote or
  /// re-probe is running (its own collectives are neither recorded nor traced).
  std::vector<float> liveRatios_;
  size_t liveNext_ = 0;
  uint32_t liveSkipped_ = 0;  ///< collectives seen (every kSmallSampling-th is timed)
  uint64_t nextVoteSeq_ = 0;
  uint64_t liveInterval_ = 0;
  int reprobes_ = 0;
  bool inRetune_ = false;

  /// Guards selector_ (the pointer; a Selector is not changed once installed).
  mutable std::mutex selectorMu_;
  std::shared_ptr<detail::Selector> selector_;

  /// Guards firstError_, and segment_ against releaseResources (recordFailure raises the
  /// segment's abort word from any thread). Order: execMu_, then errorMu_.
  mutable std::mutex errorMu_;
  Status firstError_;

  /// Lock order: queueMu_, then execMu_ (a blocking call that finds nothing active); the
  /// worker never holds both.
  std::mutex execMu_;
  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::deque<std::shared_ptr<WorkItem>> queue_;
  std::thread worker_;
  std::atomic<bool> workerStarted_{false};
  bool stopping_ = false;
  bool released_ = false;  ///< releaseResources ran (guarded by queueMu_)
  /// Operations enqueued and not finished yet (guarded by queueMu_): while any is, a blocking
  /// call queues behind them; otherwise it runs on the caller's thread.
  size_t active_ = 0;
};

}  // namespace braid
