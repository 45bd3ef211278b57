// Gradient compression codecs: what a bucket (a flat f32 buffer) becomes on the wire, which
// collective carries it, and the per-bucket state (error-feedback residual, PowerSGD Q, step
// counter) kept between steps.
//
// Use by a caller that holds a bucket and a Communicator (the Bucketer's engine thread):
//
//   CodecOptions o;                                   // or parseCodecSpec("powersgd:rank=4")
//   o.powerSgdRank = 4;
//   BRAID_ASSIGN_OR_RETURN(auto codec, createCodec("powersgd", o));
//   ...
//   codec->setStep(step);                             // once per communicating step, every rank
//   for (each bucket b, in bucket-index order)        // same order, ids and counts on every rank
//     BRAID_RETURN_IF_ERROR(codec->allReduce(comm, id(b), data(b), count(b), shapes(b)));
//   // data(b) now holds the average (or sum, CodecOptions::average) of every rank's data(b),
//   // bit-identical on every rank; codec->stats() counts the bytes this rank put on the wire.
//
// Contracts:
//  - allReduce is collective: every rank calls it for the same buckets in the same order with
//    the same id, count and shapes, between no other collectives on `comm` (it issues 1–3
//    blocking collectives of its own: see info().collective and each codec's file header).
//  - BucketId is the caller's stable identity for a bucket; state is keyed by it. When the
//    bucket layout changes, the caller moves the residual per parameter with getResidual /
//    setResidual (or drops it with dropState); other state (PowerSGD's Q) is rebuilt.
//  - Only steps that communicate call allReduce (never accumulation steps): error feedback
//    assumes each call is one optimizer step's gradient.
//  - Results are bit-identical on every rank: shared seeds, sums in a fixed (rank) order after
//    all-gathers, and the same kernels on every rank (ranks on CPUs of different ISA classes,
//    AVX2 and not, may round differently in PowerSGD's matrix products).
//  - A Codec is not thread-safe: one thread (the engine) drives it. Setup (the first call for a
//    bucket, or a larger count) allocates; later calls for the same bucket do not.
//  - NaN/Inf in the input propagate to the result on every rank (loss-scaling overflow detection
//    still works); they are never clamped away.
//
// encode/decode expose one rank's payload without a communicator, for tests and benchmarks:
// decode(encode(x)) is what this rank contributes; decoding n payloads back to back (as an
// all-gather delivers them) gives their sum, in rank order. PowerSGD's encode/decode is the
// single-rank (p = 1) form of its two-round scheme (P then Q of the local matrix).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid {

class Communicator;

/// The caller's stable identity of a bucket (e.g. its index in the final layout, or a hash of
/// its parameter ids). Equal on every rank for the same bucket.
using BucketId = uint64_t;

/// How a tensor inside a bucket is viewed as a matrix (PowerSGD): rows × cols elements, row
/// major, tensors back to back in the bucket. A 1-D tensor of n elements is {n, 1}; an N-D
/// tensor is {dim0, product of the other dims} (as PyTorch's PowerSGD hook views it).
struct TensorShape {
  size_t rows = 0;
  size_t cols = 1;
  size_t count() const { return rows * cols; }
};

/// The collective a codec's payload needs.
enum class WireCollective : int {
  kAllReduce = 0,  ///< linear codecs: payloads can be summed on the wire (casts, PowerSGD)
  kAllGather = 1,  ///< sparse/quantized payloads: every rank receives every payload
};

struct CodecInfo {
  const char* name = "";
  WireCollective collective = WireCollective::kAllReduce;
  /// True when the codec keeps an error-feedback residual per bucket (as configured).
  bool errorFeedback = false;
  /// True when E[decode(encode(x))] = x (casts round to nearest: treated as unbiased).
  bool unbiased = false;
};

/// Knobs of every codec; each codec reads the ones it uses (see parseCodecSpec for names).
struct CodecOptions {
  /// Result of allReduce: average over ranks (true) or sum.
  bool average = true;
  /// Error feedback; unset = the codec's default (on for topk, sign, powersgd; off for int8;
  /// casts have none).
  std::optional<bool> errorFeedback;
  /// Seed shared by every rank (PowerSGD's random Q; int8's stochastic rounding stream).
  uint64_t seed = 0;

  // fp16 / bf16
  /// Per-bucket shared power-of-two scale from one extra 4-byte all-reduce (max |x|): no
  /// overflow or underflow of the 16-bit sum for any finite input. Off: scale by 1/p only,
  /// finite values saturate at ±65504/p (fp16) and values below about 3e-8·p flush to zero.
  /// Unset = on for fp16, off for bf16 (f32's range).
  std::optional<bool> dynamicScale;

  // powersgd
  int powerSgdRank = 1;
  /// Steps (setStep, or per-bucket calls) before which buckets are all-reduced uncompressed.
  uint64_t startStep = 10;
  /// A tensor is compressed only when (rows + cols)·rank·minCompressionRate < rows·cols.
  double minCompressionRate = 2.0;
  /// Reuse last step's Q (else a fresh random Q each step).
  bool warmStart = true;
  /// Added to column norms in Gram-Schmidt (use ~1e-8 when columns may be all zeros).
  float orthogonalizationEpsilon = 0.0f;

  // topk
  /// Fraction of elements each rank sends (k = max(1, ceil(ratio·count))).
  double topkRatio = 0.01;
  /// Fraction of elements sampled (strided) to estimate the threshold.
  double topkSampleRatio = 0.01;

  // int8, sign
  /// Elements per scale factor.
  size_t chunkSize = 1024;
};

/// Cumulative traffic of a codec on this rank.
struct CodecStats {
  /// Bytes this rank handed to collectives as its payload (send-buffer sizes: for an all-reduce
  /// the buffer, for an all-gather its own block), not the algorithm's link traffic.
  uint64_t wireBytes = 0;
  /// The same buckets' f32 size (what an uncompressed all-reduce would hand over).
  uint64_t denseBytes = 0;
  uint64_t collectives = 0;
  uint64_t buckets = 0;
  /// Buckets (or, for PowerSGD, tensors) that went uncompressed (start step, small/1-D).
  uint64_t uncompressed = 0;
};

class Codec {
 public:
  virtual ~Codec() = default;
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  virtual CodecInfo info() const = 0;

  /// Step index used by step-dependent behaviour (PowerSGD's start step, fresh random draws).
  /// Same value on every rank. Until it is called, each bucket counts its own allReduce calls.
  void setStep(uint64_t step) {
    step_ = step;
    stepSet_ = true;
  }

  /// Compressed all-reduce of one bucket, in place: data (count floats) becomes the average (or
  /// sum) over ranks, identical on every rank. shapes: the tensors in the bucket (their counts
  /// sum to count); empty = one tensor (PowerSGD views it as a near-square matrix). Collective.
  [[nodiscard]] virtual Status allReduce(Communicator& comm, BucketId bucket, float* data,
                                         size_t count,
                                         const std::vector<TensorShape>& shapes = {}) = 0;

  /// Upper bound of encode's output for count elements.
  virtual size_t maxEncodedBytes(size_t count,
                                 const std::vector<TensorShape>& shapes = {}) const = 0;
  /// One rank's payload for data, with `scale` applied first (allReduce passes 1/p when
  /// averaging; tests pass 1). Updates the bucket's error-feedback state. Returns bytes written.
  virtual Result<size_t> encode(BucketId bucket, const float* data, size_t count,
                                const std::vector<TensorShape>& shapes, float scale, void* wire,
                                size_t capacity) = 0;
  /// out (count floats) = sum, in order, of the n payloads at wire (each `bytes` long).
  virtual Status decode(const void* wire, size_t bytes, int n, float* out, size_t count,
                        const std::vector<TensorShape>& shapes = {}) = 0;

  /// Error-feedback residual of a bucket (zeros when none is kept yet), for moving it across a
  /// layout rebuild or checkpointing it.
  virtual Status getResidual(BucketId bucket, float* out, size_t count) const = 0;
  virtual Status setResidual(BucketId bucket, const float* in, size_t count) = 0;
  /// Forgets a bucket's state (residual, Q, call counter); clearState forgets every bucket's.
  virtual void dropState(BucketId bucket) = 0;
  virtual void clearState() = 0;

  const CodecStats& stats() const { return stats_; }
  void resetStats() { stats_ = CodecStats{}; }

 protected:
  Codec() = default;
  /// The step for a bucket whose own call counter is `calls`.
  uint64_t stepFor(uint64_t calls) const { return stepSet_ ? step_ : calls; }
  CodecStats stats_;

 private:
  uint64_t step_ = 0;
  bool stepSet_ = false;
};

/// Names: "none" (plain f32 all-reduce, for baselines), "fp16", "bf16", "powersgd", "topk",
/// "int8", "sign". kInvalidArgument lists them for an unknown name or a bad option.
Result<std::unique_ptr<Codec>> createCodec(const std::string& name,
                                           const CodecOptions& options = {});

/// "name" or "name:key=value,key=value", e.g. "powersgd:rank=4,start=100,ef=1",
/// "topk:ratio=0.001", "fp16:dynamic=0". Keys: average, ef, seed, dynamic, rank, start,
/// min_rate, warm, eps, ratio, sample, chunk. Fills *name and *options (starting from *options).
Status parseCodecSpec(const std::string& spec, std::string* name, CodecOptions* options);

}  // namespace braid
