// Internal: what every codec shares — options, the per-bucket state table (residual, call
// counter, PowerSGD's Q), the residual accessors, and scratch buffers reused across calls.
#pragma once

#include <unordered_map>
#include <vector>

#include "braid/comm.hpp"
#include "compression/codec.h"
#include "compression/kernels.h"

namespace braid::detail {

struct BucketState {
  /// Error-feedback residual in input units; empty until the first call that keeps one.
  std::vector<float> residual;
  /// allReduce/encode calls so far (the step when setStep was never called).
  uint64_t calls = 0;
  /// PowerSGD: each compressed tensor's Q, transposed (rank × cols), back to back.
  std::vector<float> q;
  /// The layout q was built for (a changed layout drops q).
  std::vector<TensorShape> qShapes;
};

class CodecBase : public Codec {
 public:
  explicit CodecBase(const CodecOptions& options) : options_(options) {}

  Status getResidual(BucketId bucket, float* out, size_t count) const override;
  Status setResidual(BucketId bucket, const float* in, size_t count) override;
  void dropState(BucketId bucket) override { states_.erase(bucket); }
  void clearState() override { states_.clear(); }

 protected:
  BucketState& state(BucketId bucket) { return states_[bucket]; }
  /// The bucket's residual sized for count (zero-filled when new or resized).
  std::vector<float>& residualFor(BucketState& s, size_t count);
  /// The values to compress, data·scale: with error feedback added into the bucket's residual
  /// (which the encoder then lowers by what it sends), else written to scratch_.
  float* compensatedInput(BucketState& s, const float* data, size_t count, float scale,
                          bool errorFeedback);
  /// Rank-dependent key for random streams: (seed, bucket, step, rank) mixed.
  uint32_t streamKey(BucketId bucket, uint64_t step, int rank) const;
  void countCall(size_t count, size_t wireBytes, int collectives) {
    stats_.denseBytes += count * sizeof(float);
    stats_.wireBytes += wireBytes;
    stats_.collectives += static_cast<uint64_t>(collectives);
    stats_.buckets += 1;
  }
  static Status checkBuffer(const void* p, size_t count, const char* what);
  /// The all-gather schedule shared by topk, int8 and sign: encode (scale 1, this rank's
  /// residual), all-gather the fixed-size payloads, decode them in rank order (bit-identical on
  /// every rank), then multiply by 1/p when averaging.
  Status gatherAllReduce(Communicator& comm, BucketId bucket, float* data, size_t count,
                         const std::vector<TensorShape>& shapes);

  CodecOptions options_;
  const CodecKernels& k_ = codecKernels();
  std::unordered_map<BucketId, BucketState> states_;
  std::vector<unsigned char> wire_;     // this rank's payload
  std::vector<unsigned char> gather_;   // every rank's payloads (all-gather codecs)
  std::vector<float> scratch_;
  /// This rank, for rank-dependent random streams (set by allReduce; 0 for bare encode calls).
  int rank_ = 0;
};

/// Multiplies x by s (no-op for s = 1).
void scaleInPlace(float* x, size_t n, float s);

}  // namespace braid::detail
