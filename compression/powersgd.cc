// powersgd: rank-r PowerSGD (Vogels et al., NeurIPS 2019) with error feedback and warm start,
// following the steps of PyTorch's powerSGD_hook (facts in ../shared/docs/compression-overlap.md).
//
// Each tensor of the bucket is viewed as a rows × cols matrix M (TensorShape; without shapes the
// bucket is one near-square matrix ⌊n/c⌋ × c with c = ⌈√n⌉ plus a 1-D tail). Schedule of
// allReduce, p ranks:
//   step < startStep: one plain f32 all-reduce of the bucket (DDP rebuilds buckets after step 1,
//                     so compressing from step 0 would tie state to a layout about to change).
//   1. M = x + e (error feedback).
//   2. Tensors not worth compressing — 1-D, or (rows + cols)·r·minCompressionRate ≥ rows·cols —
//      are packed and all-reduced uncompressed, first (4·u bytes).
//   3. Q (cols × r): last step's all-reduced Q (warm start), else drawn from a stream keyed by
//      (seed, bucket, tensor, step) — the same numbers on every rank — and orthogonalized.
//   4. P = M·Q; all-reduce (sum) every tensor's P in one buffer (4·Σ rows·r bytes).
//   5. Orthogonalize P's columns (modified Gram-Schmidt, + eps in the norm).
//   6. Q = Mᵀ·P; all-reduce (sum) every Q (4·Σ cols·r bytes); ×1/p when averaging.
//   7. x = P·Qᵀ; e = M − x̄ (x̄ the average approximation): the residual in gradient units.
// Wire: 4·(u + Σ (rows + cols)·r) bytes in up to three sequential all-reduces (α cost 3x a plain
// all-reduce); compute: two rows·cols·r matrix products per tensor and two orthogonalizations.
// All ranks hold the same all-reduced P and Q, so x is bit-identical on every rank.
//
// The effective rank of a tensor is min(r, rows, cols). A column of P that is all zeros is left
// zero when eps = 0 (no division by zero). The random draw is the sum of four uniforms, centred
// and scaled to unit variance (close to Gaussian; PowerSGD needs only a full-rank start).
//
// encode/decode are the single-rank form: payload [uncompressed values][P][Q] of the local M;
// decode adds P·Qᵀ and the uncompressed values of each payload. Before startStep the payload is
// the raw values.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compression/codec_base.h"
#include "compression/codec_registry.h"

namespace braid::detail {
namespace {

struct Plan {
  std::vector<TensorShape> shapes;
  std::vector<size_t> offset;  // element offset of each tensor in the bucket
  std::vector<int> rank;       // effective rank; 0 = uncompressed
  std::vector<size_t> pOff, qOff;
  size_t uncompressed = 0, pSize = 0, qSize = 0;
  size_t numUncompressed = 0;
};

class PowerSgdCodec final : public CodecBase {
 public:
  explicit PowerSgdCodec(const CodecOptions& options)
      : CodecBase(options), ef_(options.errorFeedback.value_or(true)) {}

  CodecInfo info() const override { return {"powersgd", WireCollective::kAllReduce, ef_, false}; }

  Status allReduce(Communicator& comm, BucketId bucket, float* data, size_t count,
                   const std::vector<TensorShape>& shapes) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "bucket"));
    BRAID_RETURN_IF_ERROR(buildPlan(count, shapes, &plan_));
    BucketState& st = state(bucket);
    const uint64_t step = stepFor(st.calls);
    st.calls++;
    const bool avg = options_.average;
    const int p = comm.size();
    if (step < options_.startStep) {
      BRAID_RETURN_IF_ERROR(comm.allReduce(data, data, count, DataType::kFloat32,
                                           avg ? ReduceOp::kAvg : ReduceOp::kSum));
      countCall(count, count * sizeof(float), 1);
      stats_.uncompressed++;
      return Status::ok();
    }
    const Plan& pl = plan_;
    float* m = data;
    if (ef_) {
      std::vector<float>& r = residualFor(st, count);
      k_.axpy(r.data(), 1.0f, data, count);
      m = r.data();
    }
    int collectives = 0;
    // 2. Uncompressed tensors, in one all-reduce.
    if (pl.uncompressed > 0) {
      unc_.resize(pl.uncompressed);
      packUncompressed(pl, m, unc_.data());
      BRAID_RETURN_IF_ERROR(comm.allReduce(unc_.data(), unc_.data(), unc_.size(),
                                           DataType::kFloat32,
                                           avg ? ReduceOp::kAvg : ReduceOp::kSum));
      unpackUncompressed(pl, unc_.data(), data);
      if (ef_) zeroUncompressed(pl, m);
      collectives++;
    }
    if (pl.pSize > 0) {
      prepareQ(st, pl, bucket, step);
      // 4. P = M·Q, all-reduced.
      p_.assign(pl.pSize, 0.0f);
      computeP(pl, m, st.q.data(), p_.data());
      BRAID_RETURN_IF_ERROR(
          comm.allReduce(p_.data(), p_.data(), p_.size(), DataType::kFloat32, ReduceOp::kSum));
      // 5.–6. Orthogonalize P, Q = Mᵀ·P, all-reduced.
      orthogonalizeAll(pl, p_.data(), /*ofP=*/true);
      computeQ(pl, m, p_.data(), st.q.data());
      BRAID_RETURN_IF_ERROR(comm.allReduce(st.q.data(), st.q.data(), st.q.size(),
                                           DataType::kFloat32, ReduceOp::kSum));
      if (avg) scaleInPlace(st.q.data(), st.q.size(), 1.0f / static_cast<float>(p));
      // 7. x = P·Qᵀ; e = M − average approximation.
      reconstruct(pl, p_.data(), st.q.data(), data, /*add=*/false);
      if (ef_) subtractApproximation(pl, m, data, avg ? 1.0f : 1.0f / static_cast<float>(p));
      collectives += 2;
    }
    countCall(count, (pl.uncompressed + pl.pSize + pl.qSize) * sizeof(float), collectives);
    stats_.uncompressed += pl.numUncompressed;
    return Status::ok();
  }

  size_t maxEncodedBytes(size_t count, const std::vector<TensorShape>&) const override {
    // Before startStep (or with nothing worth compressing) the payload is the raw values.
    return count * sizeof(float);
  }

  Result<size_t> encode(BucketId bucket, const float* data, size_t count,
                        const std::vector<TensorShape>& shapes, float scale, void* wire,
                        size_t capacity) override {
    BRAID_RETURN_IF_ERROR(checkBuffer(data, count, "input"));
    if (capacity < count * sizeof(float)) {
      return invalidArgument("codec powersgd: wire buffer too small");
    }
    BRAID_RETURN_IF_ERROR(buildPlan(count, shapes, &plan_));
    const Plan& pl = plan_;
    BucketState& st = state(bucket);
    const uint64_t step = stepFor(st.calls);
    st.calls++;
    float* out = static_cast<float*>(wire);
    if (step < options_.startStep || pl.pSize == 0) {
      k_.scaleCopy(out, scale, data, count);
      if (ef_ && step >= options_.startStep) {
        // Nothing compressed: the residual (all uncompressed tensors) is sent and cleared.
        std::vector<float>& r = residualFor(st, count);
        for (size_t i = 0; i < count; ++i) out[i] += r[i];
        std::fill(r.begin(), r.end(), 0.0f);
      }
      return count * sizeof(float);
    }
    float* m = compensatedInput(st, data, count, scale, ef_);
    float* unc = out;
    float* pw = out + pl.uncompressed;
    float* qw = pw + pl.pSize;
    packUncompressed(pl, m, unc);
    prepareQ(st, pl, bucket, step);
    std::fill(pw, pw + pl.pSize, 0.0f);
    computeP(pl, m, st.q.data(), pw);
    orthogonalizeAll(pl, pw, /*ofP=*/true);
    computeQ(pl, m, pw, st.q.data());
    std::memcpy(qw, st.q.data(), pl.qSize * sizeof(float));
    if (ef_) {
      approx_.resize(count);
      reconstruct(pl, pw, qw, approx_.data(), /*add=*/false);
      zeroUncompressed(pl, m);
      subtractApproximation(pl, m, approx_.data(), 1.0f);
    }
    return (pl.uncompressed + pl.pSize + pl.qSize) * sizeof(float);
  }

  Status decode(const void* wire, size_t bytes, int n, float* out, size_t count,
                const std::vector<TensorShape>& shapes) override {
    BRAID_RETURN_IF_ERROR(buildPlan(count, shapes, &plan_));
    const Plan& pl = plan_;
    const size_t compressed = (pl.uncompressed + pl.pSize + pl.qSize) * sizeof(float);
    const bool raw = bytes == count * sizeof(float);
    if (n < 1 || (!raw && bytes != compressed)) {
      return invalidArgument("codec powersgd: payload of " + std::to_string(bytes) +
                             " bytes matches neither the raw (" +
                             std::to_string(count * sizeof(float)) + ") nor the compressed (" +
                             std::to_string(compressed) + ") form of this bucket");
    }
    std::fill(out, out + count, 0.0f);
    for (int r = 0; r < n; ++r) {
      const float* in = reinterpret_cast<const float*>(static_cast<const unsigned char*>(wire) +
                                                       bytes * static_cast<size_t>(r));
      if (raw) {
        for (size_t i = 0; i < count; ++i) out[i] += in[i];
        continue;
      }
      const float* pw = in + pl.uncompressed;
      reconstruct(pl, pw, pw + pl.pSize, out, /*add=*/true);
      size_t u = 0;
      for (size_t t = 0; t < pl.shapes.size(); ++t) {
        if (pl.rank[t] != 0) continue;
        float* o = out + pl.offset[t];
        for (size_t i = 0; i < pl.shapes[t].count(); ++i) o[i] += in[u + i];
        u += pl.shapes[t].count();
      }
    }
    return Status::ok();
  }

 private:
  Status buildPlan(size_t count, const std::vector<TensorShape>& shapes, Plan* pl) const {
    pl->shapes.clear();
    if (shapes.empty()) {
      const size_t cols = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(count))));
      const size_t rows = cols == 0 ? 0 : count / cols;
      if (rows * cols > 0) pl->shapes.push_back({rows, cols});
      if (count > rows * cols) pl->shapes.push_back({count - rows * cols, 1});
    } else {
      size_t sum = 0;
      for (const TensorShape& s : shapes) sum += s.count();
      if (sum != count) {
        return invalidArgument("codec powersgd: the bucket's tensor shapes hold " +
                               std::to_string(sum) + " elements, the bucket " +
                               std::to_string(count));
      }
      pl->shapes = shapes;
    }
    const size_t nt = pl->shapes.size();
    pl->offset.assign(nt, 0);
    pl->rank.assign(nt, 0);
    pl->pOff.assign(nt, 0);
    pl->qOff.assign(nt, 0);
    pl->uncompressed = pl->pSize = pl->qSize = pl->numUncompressed = 0;
    size_t off = 0;
    for (size_t t = 0; t < nt; ++t) {
      const TensorShape& s = pl->shapes[t];
      pl->offset[t] = off;
      off += s.count();
      const size_t r = std::min<size_t>({static_cast<size_t>(options_.powerSgdRank), s.rows,
                                         s.cols});
      const double dense = static_cast<double>(s.rows) * static_cast<double>(s.cols);
      const double low = static_cast<double>(s.rows + s.cols) * static_cast<double>(r) *
                         options_.minCompressionRate;
      if (s.rows > 1 && s.cols > 1 && low < dense) {
        pl->rank[t] = static_cast<int>(r);
        pl->pOff[t] = pl->pSize;
        pl->qOff[t] = pl->qSize;
        pl->pSize += s.rows * r;
        pl->qSize += s.cols * r;
      } else {
        pl->uncompressed += s.count();
        pl->numUncompressed++;
      }
    }
    return Status::ok();
  }

  void packUncompressed(const Plan& pl, const float* m, float* u) const {
    for (size_t t = 0; t < pl.shapes.size(); ++t) {
      if (pl.rank[t] != 0) continue;
      const size_t n = pl.shapes[t].count();
      std::memcpy(u, m + pl.offset[t], n * sizeof(float));
      u += n;
    }
  }
  void unpackUncompressed(const Plan& pl, const float* u, float* x) const {
    for (size_t t = 0; t < pl.shapes.size(); ++t) {
      if (pl.rank[t] != 0) continue;
      const size_t n = pl.shapes[t].count();
      std::memcpy(x + pl.offset[t], u, n * sizeof(float));
      u += n;
    }
  }
  void zeroUncompressed(const Plan& pl, float* m) const {
    for (size_t t = 0; t < pl.shapes.size(); ++t) {
      if (pl.rank[t] == 0) std::fill(m + pl.offset[t], m + pl.offset[t] + pl.shapes[t].count(), 0.0f);
    }
  }

  // Q for this step: the warm one when the layout is unchanged, else a fresh orthogonal draw.
  void prepareQ(BucketState& st, const Plan& pl, BucketId bucket, uint64_t step) {
    const bool sameLayout = st.q.size() == pl.qSize && st.qShapes.size() == pl.shapes.size() &&
                            std::equal(st.qShapes.begin(), st.qShapes.end(), pl.shapes.begin(),
                                       [](const TensorShape& a, const TensorShape& b) {
                                         return a.rows == b.rows && a.cols == b.cols;
                                       });
    if (options_.warmStart && sameLayout) return;
    st.q.resize(pl.qSize);
    st.qShapes = pl.shapes;
    // Rank-independent key: every rank draws the same Q.
    const uint32_t key = streamKey(bucket, options_.warmStart ? 0 : step, 0);
    for (size_t i = 0; i < pl.qSize; ++i) {
      const uint32_t j = static_cast<uint32_t>(4 * i);
      const float s = codecUniform(key, j) + codecUniform(key, j + 1) +
                      codecUniform(key, j + 2) + codecUniform(key, j + 3);
      st.q[i] = (s - 2.0f) * 1.7320508f;  // Irwin-Hall(4): mean 2, variance 1/3
    }
    orthogonalizeAll(pl, st.q.data(), /*ofP=*/false);
  }

  // Pᵀ[j][a] = M[a,:]·Qᵀ[j,:].
  void computeP(const Plan& pl, const float* m, const float* q, float* pOut) const {
    for (size_t t = 0; t < pl.shapes.size(); ++t) {
      const int r = pl.rank[t];
      if (r == 0) continue;
      const size_t rows = pl.shapes[t].rows, cols = pl.shapes[t].cols;
      const float* mt = m + pl.offset[t];
      const float* qt = q + pl.qOff[t];
      float* pt = pOut + pl.pOff[t];
      for (size_t a = 0; a < rows; ++a) {
        for (int j = 0; j < r; ++j) pt[j * rows + a] = k_.dot(mt + a * cols, qt + j * cols, cols);
      }
    }
  }

  // Qᵀ[j,:] = Σ_a Pᵀ[j][a]·M[a,:].
  void computeQ(const Plan& pl, const float* m, const float* pIn, float* q) const {
    for (size_t t = 0; t < pl.shapes.size(); ++t) {
      const int r = pl.rank[t];
      if (r == 0) continue;
      const size_t rows = pl.shapes[t].rows, cols = pl.shapes[t].cols;
      const float* mt = m + pl.offset[t];
      const float* pt = pIn + pl.pOff[t];
      float* qt = q + pl.qOff[t];
      std::fill(qt, qt + static_cast<size_t>(r) * cols, 0.0f);
      for (size_t a = 0; a < rows; ++a) {
        for (int j = 0; j < r; ++j) k_.axpy(qt + j * cols, pt[j * rows + a], mt + a * cols, cols);
      }
    }
  }

  // x[a,:] (+)= Σ_j Pᵀ[j][a]·Qᵀ[j,:] for the compressed tensors.
  void reconstruct(const Plan& pl, const float* pIn, const float* q, float* x, bool add) const {
    for (size_t t = 0; t < pl.shapes.size(); ++t) {
      const int r = pl.rank[t];
      if (r == 0) continue;
      const size_t rows = pl.shapes[t].rows, cols = pl.shapes[t].cols;
      const float* pt = pIn + pl.pOff[t];
      const float* qt = q + pl.qOff[t];
      float* xt = x + pl.offset[t];
      for (size_t a = 0; a < rows; ++a) {
        float* row = xt + a * cols;
        if (!add) std::fill(row, row + cols, 0.0f);
        for (int j = 0; j < r; ++j) k_.axpy(row, pt[j * rows + a], qt + j * cols, cols);
      }
    }
  }

  // m −= x·f on the compressed tensors.
  void subtractApproximation(const Plan& pl, float* m, const float* x, float f) const {
    for (size_t t = 0; t < pl.shapes.size(); ++t) {
      if (pl.rank[t] == 0) continue;
      k_.axpy(m + pl.offset[t], -f, x + pl.offset[t], pl.shapes[t].count());
    }
  }

  // Modified Gram-Schmidt on the r contiguous columns of each compressed tensor's P (length
  // rows) or Q (length cols).
  void orthogonalizeAll(const Plan& pl, float* buf, bool ofP) const {
    const float eps = options_.orthogonalizationEpsilon;
    for (size_t t = 0; t < pl.shapes.size(); ++t) {
      const int r = pl.rank[t];
      if (r == 0) continue;
      const size_t len = ofP ? pl.shapes[t].rows : pl.shapes[t].cols;
      float* base = buf + (ofP ? pl.pOff[t] : pl.qOff[t]);
      for (int j = 0; j < r; ++j) {
        float* v = base + static_cast<size_t>(j) * len;
        for (int i = 0; i < j; ++i) {
          const float* u = base + static_cast<size_t>(i) * len;
          k_.axpy(v, -k_.dot(u, v, len), u, len);
        }
        const float denom = std::sqrt(k_.dot(v, v, len)) + eps;
        if (denom > 0.0f) scaleInPlace(v, len, 1.0f / denom);
      }
    }
  }

  bool ef_;
  Plan plan_;
  std::vector<float> unc_, p_, approx_;
};

}  // namespace

std::unique_ptr<Codec> createPowerSgdCodec(const CodecOptions& options) {
  return std::make_unique<PowerSgdCodec>(options);
}

}  // namespace braid::detail
