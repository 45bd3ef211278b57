// The Bucketer's private state, shared by bucketer.cc (caller-facing side: registration,
// markReady, finishStep) and engine.cc (the engine thread: every collective the Bucketer issues).
//
// Threads. Caller threads run beginStep/markReady/markUnused/finishStep; one engine thread per
// Bucketer issues every collective (finalize checks, calibration, bucket all-reduces in index
// order, the end-of-step exchange, the rebuild broadcast), so the communicator sees one issuer
// and the same sequence on every rank. The one exception is handed over under mu_: when the
// engine waits for a step's last bucket, finishStep may take the rest of that step (Tail) and
// run it on the caller's thread while the engine stays out. markReady touches only its
// parameter's slot and the bucket's atomic pending counter; the thread that brings a counter to
// zero wakes the engine, unless the engine offered that bucket to finishStep. Layout changes
// happen only between steps, on whichever thread completes the step, while the caller is in
// finishStep().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "braid/bucketer.hpp"
#include "braid/comm.hpp"
#include "bucketing/layout.h"
#include "compression/codec.h"

namespace braid {

struct AlignedFree {
  void operator()(uint8_t* p) const;
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;

class Bucketer::Impl {
 public:
  struct Bucket {
    DataType type = DataType::kFloat32;
    size_t bytes = 0;
    size_t count = 0;
    std::vector<int> params;
    uint8_t* data = nullptr;
    // What this step's collectives run on: data, or (copy mode) the gradient of a bucket's
    // only parameter, reduced in place where the caller keeps it (no copy in or back, as
    // Horovod skips its fusion buffer for one tensor). Set before pending reaches zero.
    uint8_t* live = nullptr;
    std::atomic<int> pending{0};
    // Compression: the codec of its size class (null: the native all-reduce), its identity
    // for codec state (hashBucket), and its tensors as the codec views them.
    Codec* codec = nullptr;
    BucketId codecId = 0;
    std::vector<TensorShape> shapes;
    // Written by the engine only.
    uint64_t launchNs = 0, startNs = 0, doneNs = 0;
    uint64_t wireBytes = 0;
  };

  ~Impl();

  // --- configuration (immutable after finalize) ---
  Communicator* comm_ = nullptr;
  BucketerOptions opts_;
  bool autoSize_ = false;
  size_t cap_ = 0, firstCap_ = 0;
  size_t pieceBytes_ = 0;  // 0: a bucket is one all-reduce
  ReduceOp op_ = ReduceOp::kAvg;
  int64_t timeoutMs_ = 300000;
  std::string metricsPath_;
  std::vector<detail::ParamSpec> specs_;
  std::unordered_map<uint32_t, int> indexOf_;
  bool finalized_ = false;
  detail::AlphaBeta model_;
  // Codecs (null: uncompressed), driven by the engine thread only.
  std::unique_ptr<Codec> codec_, smallCodec_;
  size_t codecMinBytes_ = 0;
  // Inter-host-only compression: this host's ranks, and the hosts' first ranks (null on the
  // others); both split from comm_ at creation.
  std::unique_ptr<Communicator> hostComm_, leaderComm_;
  /// Runs bucket b's codec: over comm_, or host reduce → leaders' codec → host broadcast.
  Status reduceCompressed(Bucket& b);
  uint64_t commSteps_ = 0;  // communicating steps so far (the codecs' step index)

  // --- layout (changed by the engine only, between steps) ---
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<int> bucketOf_;     // per parameter
  std::vector<size_t> offsetOf_;  // byte offset inside its bucket
  AlignedBytes storage_;
  std::atomic<uint32_t> layoutVersion_{0};
  bool rebuildPending_ = true;

  // --- per step (caller side) ---
  std::atomic<bool> stepActive_{false};
  bool stepAccumulate_ = false;
  uint64_t stepIndex_ = 0;
  uint64_t stepT0_ = 0;
  std::unique_ptr<std::atomic<uint8_t>[]> marked_;  // 0 pending, 1 ready, 2 unused
  std::vector<uint8_t> hasData_;    // copy mode: slot holds this window's (accumulated) gradient
  std::vector<uint8_t> used_;       // marked ready in some step of this window
  std::vector<void*> userPtr_;      // copy mode: where finishStep writes the result
  std::vector<uint64_t> readyNs_;   // per parameter, this step
  std::unique_ptr<std::atomic<int>[]> observed_;  // ready order of this step
  std::atomic<int> observedCount_{0};
  std::vector<uint8_t> globallyUnused_;

  // --- engine ---
  std::thread engine_;
  std::mutex mu_;  // guards jobs_, stop_, stepStatus_, wake-ups (and stepDone_'s writes)
  std::condition_variable engineCv_;  // the engine waits here for jobs and ready buckets
  std::condition_variable doneCv_;    // callers wait here for jobs to finish
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  // Written under mu_; finishStep also polls it without mu_ before it sleeps on doneCv_.
  std::atomic<bool> stepDone_{true};
  uint64_t spinNs_ = 0;  // finishStep's spinning and yielding before that sleep (BRAID_SHM_SPIN_US)
  Status stepStatus_;
  StepMetrics stepResult_;  // filled by whoever completes the communicating step

  // One communicating step's schedule: bucket pieces launched and not yet waited for, the next
  // bucket (and element) to launch, the last completion. Run by the engine, or by finishStep's
  // thread once it took the step over (Tail).
  struct Piece {
    size_t bucket = 0;
    size_t lo = 0, hi = 0;  // element range of the bucket
    std::shared_ptr<Work> work;
  };
  struct StepRun {
    uint64_t step = 0;
    Status st;
    std::deque<Piece> inflight;
    size_t next = 0;
    size_t nextLo = 0;  // first element of bucket `next` not launched yet
    uint64_t prevDone = 0;
    StepMetrics metrics;  // buckets filled as each completes, so the tail only adds the last
  };
  StepRun run_;
  // The tail hand-off, under mu_. kOffered: the engine waits for the step's last bucket with
  // nothing in flight. finishStep, finding the offer, takes the rest of the step (kCaller) and
  // runs it on its own thread, so the tail does not wait for the engine's wake-up (20-90 us on
  // the VMs measured); the engine leaves the step at its next wake-up without touching it. An
  // engine woken first keeps it (kEngine), and finishStep waits as before. The mark that
  // completes an offered bucket does not wake the engine, which polls (kTailPollMs in engine.cc):
  // with a core per rank, that wake-up competes with both ranks' tails for the cores.
  enum class Tail { kNone, kOffered, kCaller, kEngine };
  Tail tail_ = Tail::kNone;

  Status init(Communicator* comm, BucketerOptions options);
  /// Runs fn on the engine thread and waits for it (bounded by the timeout).
  Status runOnEngine(const std::function<Status()>& fn, const char* what);
  void engineLoop();

  // engine.cc
  Status verifyRegistrations();
  Status calibrate();
  void runStep(uint64_t step);
  /// Launches and completes run_'s buckets. On the engine (engine = true): false when finishStep
  /// took the rest of the step over while the engine waited for the last bucket.
  bool advanceStep(bool engine);
  /// Bucket k's metrics (and trace event), once its collective completed.
  void noteBucketDone(size_t k);
  /// The step's metrics, the end-of-step exchange and the pending rebuild; publishes the outcome.
  void completeStep();
  /// Copies bytes [from, to) of bucket b back to the gradients that overlap them (none when the
  /// bucket was reduced where its gradient lies).
  void copyOut(const Bucket& b, size_t from, size_t to);
  std::string bucketWhere(size_t k) const;
  Status exchangeStepInfo(StepMetrics* m);
  Status rebuildNow(StepMetrics* m);

  // bucketer.cc
  Status initCodecs();
  /// The codec for a bucket of this dtype and size (null: uncompressed).
  Codec* codecFor(DataType type, size_t bytes) const;
  /// Copy mode, a communicating step: a bucket of one uncompressed parameter is all-reduced in
  /// the caller's gradient (Bucket::live) instead of a copy of it.
  bool reducesInPlace(const Bucket& b) const {
    return !opts_.zeroCopy && !stepAccumulate_ && b.params.size() == 1 && b.codec == nullptr;
  }
  void applyPlan(const detail::BucketPlan& plan);
  /// Moves error-feedback residuals from buckets_ to the new layout nb, per parameter.
  void moveCodecState(const std::vector<std::unique_ptr<Bucket>>& nb);
  void resetBucketCounters();
  Result<int> lookup(uint32_t id, const char* what) const;
  /// Marks parameter idx ready (grad may be null) or unused; the flag says which.
  Status markInternal(int idx, void* grad, bool unused);
  void writeMetricsFile(const StepMetrics& m);
  std::string paramLabel(int idx) const;
};

}  // namespace braid
