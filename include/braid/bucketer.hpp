// braid's Bucketer: fuses gradients into buckets and all-reduces each bucket while backward is
// still producing the next ones (DDP's Reducer, Horovod's tensor fusion).
//
//   auto b = braid::Bucketer::create(comm, braid::BucketerOptions{});
//   for (each parameter, in model order) b->registerParam(id, count, DataType::kFloat32, "fc.w");
//   b->finalize();                                  // collective: checks every rank agrees
//   for (each step) {
//     b->beginStep();                               // or beginStep(true) to only accumulate
//     ... backward: from any thread, in any order: b->markReady(id, grad);
//     auto m = b->finishStep();                     // waits, writes results into each grad
//   }
//
// Collectives: every bucket is all-reduced (sum or average) by one engine thread per Bucketer,
// in bucket-index order on every rank, through the Communicator's asynchronous API; at the end of
// a communicating step one small all-gather carries each rank's per-bucket timestamps and its
// used-parameter bitmap (the straggler-skew metric and unused-parameter detection ride on it);
// after the first communicating step rank 0 broadcasts the rebuilt layout, once. With a codec
// (BucketerOptions::codec, BRAID_CODEC) a float32 bucket is instead reduced by the codec's own
// blocking collectives on the engine thread (compression/codec.h), still in bucket-index order;
// its error-feedback state is keyed by the bucket's identity (a hash of the parameters it holds)
// and moved parameter by parameter when the layout is rebuilt. The
// application must not issue its own collectives on the same communicator between beginStep()
// and the return of finishStep().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/status.h"
#include "braid/types.h"

namespace braid {

class Communicator;

enum class BucketSizing : int {
  kDefault = 0,  ///< BRAID_BUCKET_CAP_MB (0 there means kAuto)
  kFixed = 1,    ///< bucketCapBytes / firstBucketCapBytes
  kAuto = 2,     ///< chosen by rank 0 from the selector's cost model and the ready timeline
};

enum class GradReduction : int { kAverage = 0, kSum = 1 };

struct BucketerOptions {
  BucketSizing sizing = BucketSizing::kDefault;
  /// Largest bucket in bytes (kFixed; also the first step of kAuto); 0 = BRAID_BUCKET_CAP_MB.
  size_t bucketCapBytes = 0;
  /// Cap of bucket 0, the first one reduced; 0 = BRAID_FIRST_BUCKET_CAP_MB.
  size_t firstBucketCapBytes = 0;
  GradReduction reduction = GradReduction::kAverage;
  /// Gradients live inside bucket storage (gradientBuffer()); no copy in or out.
  bool zeroCopy = false;
  /// Parameters not marked ready by finishStep() count as unused (zero) without an error, and
  /// globallyUnused() reports those no rank used.
  bool findUnused = false;
  /// Rebuild the layout once from the ready order observed in the first communicating step
  /// (as DDP; rank 0 decides, all ranks apply). Under findUnused only the sizes are revised.
  bool rebuildLayout = true;
  /// Bounded launch window: at most this many bucket collectives queued on the communicator;
  /// the engine launches the next bucket only when one of them completes.
  int maxInFlight = 2;
  /// Buckets larger than this go out as several all-reduces of at most this many bytes, so that
  /// the copy back of one piece overlaps the all-reduce of the next (a large last bucket, the
  /// step's tail, is the case that matters); 0 = BRAID_BUCKET_PIECE_BYTES (default 0: one
  /// all-reduce per bucket). It pays where a core is free for the copy. Compressed buckets are
  /// never split.
  size_t pieceBytes = 0;
  /// "" = BRAID_METRICS_FILE ("-" or unset: no file). The engine thread writes a step's line
  /// (and rewrites FILE.prom) after finishStep() returns, before it runs the next step; every
  /// line is written once the Bucketer is destroyed.
  std::string metricsFile;
  /// Gradient compression of float32 buckets of at least codecMinBytes: a codec spec as
  /// parseCodecSpec (compression/codec.h) takes it, e.g. "fp16", "powersgd:rank=4,start=100",
  /// "topk:ratio=0.01". "" = BRAID_CODEC; "none" = uncompressed (the native all-reduce). The
  /// codec averages or sums as `reduction` says; error feedback is applied once per
  /// communicating step (accumulation steps never reach the codec).
  std::string codec;
  /// Buckets below this many bytes use smallBucketCodec instead (a second size class: e.g. the
  /// small first bucket); 0 = BRAID_CODEC_MIN_BYTES.
  size_t codecMinBytes = 0;
  /// Codec spec of the small size class; "" or "none" = uncompressed.
  std::string smallBucketCodec;
  /// Compress only what crosses hosts: a compressed bucket is summed uncompressed inside each
  /// host (to the host's first rank, over the shared segment), the hosts' first ranks run the
  /// codec among themselves, and each broadcasts the result inside its host. On one host nothing
  /// is compressed. false = BRAID_CODEC_SCOPE (all | inter-host).
  bool codecInterHostOnly = false;
};

/// One bucket's collective in one step. Times are milliseconds since beginStep() on this rank.
struct BucketMetrics {
  uint64_t bytes = 0;  ///< dense size (what an uncompressed all-reduce would send)
  /// Bytes this rank handed to collectives for the bucket: the buffer of each all-reduce, this
  /// rank's block of each all-gather (the codec's payload; `bytes` when uncompressed).
  uint64_t wireBytes = 0;
  const char* codec = "none";  ///< codec that reduced it
  uint32_t params = 0;
  double readyMs = 0;  ///< its last gradient was marked ready
  double startMs = 0;  ///< the collective could start here (launched, and the previous done)
  double doneMs = 0;   ///< result available
  /// Straggler skew: how much later the last rank reached this collective than the first.
  double skewMs = 0;
  int slowestRank = 0;  ///< the rank that reached it last
};

struct StepMetrics {
  uint64_t step = 0;          ///< counts every beginStep()
  bool communicated = false;  ///< false for accumulation steps
  bool rebuilt = false;       ///< the layout was rebuilt at the end of this step
  double stepMs = 0;          ///< beginStep() → finishStep() returned
  double computeMs = 0;       ///< beginStep() → finishStep() called (the caller's backward)
  double commMs = 0;          ///< sum of bucket collective durations (startMs → doneMs)
  double exposedMs = 0;       ///< finishStep() called → returned: communication not hidden
  /// 1 − exposed/comm, in [0, 1]: share of communication time hidden behind compute, with the
  /// in-step communication time standing in for communication alone (see braid-train-bench for
  /// the definition against separately measured compute-only and communication-only runs).
  double eta = 0;
  /// |communication ∩ compute| / |communication| (interval overlap).
  double overlap = 0;
  uint64_t bytes = 0;      ///< dense bytes of every bucket
  uint64_t wireBytes = 0;  ///< sum of the buckets' wireBytes
  double maxSkewMs = 0;    ///< largest bucket skew of the step
  int slowestRank = 0;     ///< the rank that arrived last at that bucket
  /// "monotonic" (one host: CLOCK_MONOTONIC is shared by all ranks) or "wait-difference"
  /// (several hosts: skew from how long each rank waited inside the collective, clock-free).
  const char* skewClock = "monotonic";
  /// finishStep()'s own thread ran the step's last bucket: the engine thread was still waiting
  /// for it when finishStep() was called, so the tail did not wait for that thread to wake up.
  bool tailByCaller = false;
  std::vector<BucketMetrics> buckets;
};

class Bucketer {
 public:
  /// `comm` must outlive the Bucketer. Reads BRAID_* parameters for options left at 0/default.
  static Result<std::unique_ptr<Bucketer>> create(Communicator* comm, BucketerOptions options);
  ~Bucketer();
  Bucketer(const Bucketer&) = delete;
  Bucketer& operator=(const Bucketer&) = delete;

  /// Registers a parameter; call in the same order on every rank (model order). ids are unique.
  Status registerParam(uint32_t id, size_t count, DataType type, const std::string& name = "");
  /// The same with the tensor's shape (count = product of the dims). Codecs that see matrices
  /// (PowerSGD) view it as dims[0] × (product of the rest); without a shape it is 1-D.
  Status registerParam(uint32_t id, const std::vector<size_t>& shape, DataType type,
                       const std::string& name = "");
  /// Collective: verifies that every rank registered the same parameters (else kInvalidUsage
  /// naming the first differing one on every rank), builds the layout, calibrates (kAuto).
  Status finalize();

  /// Zero-copy mode: where parameter id's gradient lives. Valid until the layout changes
  /// (layoutVersion() increases, at most once, reported by StepMetrics::rebuilt).
  Result<void*> gradientBuffer(uint32_t id);
  /// The reduced gradient of id after finishStep(): in bucket storage, or (copy mode) the
  /// gradient passed to markReady when id's bucket holds it alone and was reduced there, in
  /// place (valid as long as the caller keeps that gradient).
  Result<const void*> result(uint32_t id) const;
  /// Zero-copy mode: sets every gradient to zero.
  void zeroGradients();
  uint32_t layoutVersion() const;

  /// Starts a step. accumulate = true: no communication; gradients are summed locally (copy
  /// mode) or left in place (zero-copy) until the next communicating step. Every rank must make
  /// the same sequence of choices.
  Status beginStep(bool accumulate = false);
  /// Gradient id is final for this step (copy mode: grad is read from now on and written with
  /// the result by finishStep, so it must stay untouched and alive until finishStep returns; a
  /// gradient alone in its bucket is all-reduced in place there; zero-copy: grad is null or
  /// gradientBuffer(id)). Any thread, any order.
  Status markReady(uint32_t id, void* grad);
  /// Parameter id takes no part in this step on this rank (contributes zero).
  Status markUnused(uint32_t id);
  /// Waits (bounded by BRAID_TIMEOUT_MS) for every bucket, writes results back, returns the
  /// step's metrics. Errors name the bucket, the parameter and the rank.
  Result<StepMetrics> finishStep();

  /// After a communicating step with findUnused: no rank used parameter id.
  bool globallyUnused(uint32_t id) const;

  /// Current layout: parameter ids per bucket, in launch order.
  std::vector<std::vector<uint32_t>> bucketLayout() const;
  size_t bucketCount() const;

  class Impl;

 private:
  explicit Bucketer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// One JSON object (no newline) and Prometheus text exposition of a step's metrics.
std::string stepMetricsJson(const StepMetrics& m, int rank);
std::string stepMetricsPrometheus(const StepMetrics& m, int rank);

}  // namespace braid
