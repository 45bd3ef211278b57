// GPU check of the compression codecs' CUDA kernels against the CPU kernels (issue #6).
// Registered as CTest entry compression_gpu_check (label gpu; run by run_device_checks.sh via
// `ctest -L gpu`). Without a usable device it prints why and exits 77 (CTest: skipped).
//
// Bit-identical: f16/bf16 casts both ways (incl. saturation, Inf; NaN compared as NaN), int8
// payloads (same counter-based random stream, --fmad=false), sign bits. Within f32 summation
// order: sign scales (1e-5 relative), PowerSGD's P, Q and reconstruction (1e-4 relative to the
// row/column norms). Top-k: the count at a threshold and the selected index set equal the CPU's.
// Also prints the cast kernels' bandwidth on the device (a figure, not a pass criterion).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "compression/cuda/codec_kernels.h"
#include "compression/kernels.h"

namespace {

int failures = 0;

#define CHECK_CUDA(x)                                                                    \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)
#define CHECK_LAUNCH(x) CHECK_CUDA(static_cast<cudaError_t>(x))

void expect(bool ok, const char* what) {
  std::printf("%-48s %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) ++failures;
}

template <typename T>
T* toDevice(const std::vector<T>& h) {
  T* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(1, h.size()) * sizeof(T)));
  if (!h.empty()) CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<T> toHost(const T* d, size_t n) {
  std::vector<T> h(n);
  CHECK_CUDA(cudaDeviceSynchronize());
  if (n) CHECK_CUDA(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

bool sameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], 4) != 0) return false;
  }
  return true;
}

// Half/bf16 bit patterns equal, any NaN equal to any NaN.
bool same16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, bool half) {
  for (size_t i = 0; i < a.size(); ++i) {
    const uint16_t expMask = half ? 0x7C00 : 0x7F80, manMask = half ? 0x03FF : 0x007F;
    const bool nanA = (a[i] & expMask) == expMask && (a[i] & manMask);
    const bool nanB = (b[i] & expMask) == expMask && (b[i] & manMask);
    if (nanA && nanB) continue;
    if (a[i] != b[i]) {
      std::printf("  first difference at %zu: cpu %04x gpu %04x\n", i, a[i], b[i]);
      return false;
    }
  }
  return true;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("codec_check: SKIPPED: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("codec_check on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  const auto& k = braid::detail::codecKernels();
  std::printf("cpu kernels: %s\n", k.isa);

  const size_t n = (size_t{1} << 20) + 13;  // odd tail everywhere
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  x[1] = 1e9f;
  x[2] = -INFINITY;
  x[3] = NAN;
  x[4] = 1e-9f;
  x[5] = -0.0f;
  float* dx = toDevice(x);

  // Casts.
  {
    std::vector<uint16_t> cpu(n);
    uint16_t* dh = nullptr;
    CHECK_CUDA(cudaMalloc(&dh, n * 2));
    k.toHalf(cpu.data(), x.data(), n, 0.25f, 8000.0f);
    CHECK_LAUNCH(braid::cuda::toHalf(dh, dx, n, 0.25f, 8000.0f, nullptr));
    expect(same16(cpu, toHost(dh, n), true), "f32 -> f16 (scale, saturation, Inf, NaN)");
    std::vector<float> back(n);
    k.fromHalf(back.data(), cpu.data(), n, 3.0f);
    float* df = nullptr;
    CHECK_CUDA(cudaMalloc(&df, n * 4));
    CHECK_LAUNCH(braid::cuda::fromHalf(df, dh, n, 3.0f, nullptr));
    expect(sameFloats(back, toHost(df, n)), "f16 -> f32");
    k.toBf16(cpu.data(), x.data(), n, 0.25f);
    CHECK_LAUNCH(braid::cuda::toBf16(dh, dx, n, 0.25f, nullptr));
    expect(same16(cpu, toHost(dh, n), false), "f32 -> bf16");
    k.fromBf16(back.data(), cpu.data(), n, 3.0f);
    CHECK_LAUNCH(braid::cuda::fromBf16(df, dh, n, 3.0f, nullptr));
    expect(sameFloats(back, toHost(df, n)), "bf16 -> f32");

    // Bandwidth of the casts on the device (256 MiB of f32).
    const size_t big = size_t{64} << 20;
    float* bx = nullptr;
    uint16_t* bh = nullptr;
    CHECK_CUDA(cudaMalloc(&bx, big * 4));
    CHECK_CUDA(cudaMalloc(&bh, big * 2));
    CHECK_CUDA(cudaMemset(bx, 0, big * 4));
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    for (int which = 0; which < 3; ++which) {
      for (int rep = 0; rep < 2; ++rep) {  // first rep warms up
        CHECK_CUDA(cudaEventRecord(a));
        for (int it = 0; it < 10; ++it) {
          if (which == 0) CHECK_LAUNCH(braid::cuda::toHalf(bh, bx, big, 0.5f, 65504.0f, nullptr));
          if (which == 1) CHECK_LAUNCH(braid::cuda::fromHalf(bx, bh, big, 2.0f, nullptr));
          if (which == 2) CHECK_CUDA(cudaMemcpyAsync(bh, bx, big * 2, cudaMemcpyDeviceToDevice));
        }
        CHECK_CUDA(cudaEventRecord(b));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        // Memory traffic: cast reads 4 and writes 2 bytes per element; the copy moves 2n bytes
        // each way (the same 6n would be 3n copied: report f32 bytes of the bucket per second).
        const double gbps = 10.0 * big * 4 / (ms * 1e-3) / 1e9;
        if (rep == 1) {
          const char* names[] = {"f32->f16 kernel", "f16->f32 kernel", "memcpy D2D 2n bytes"};
          std::printf("  bandwidth %-22s %8.1f GB/s of f32 bucket (%6.3f ms per 256 MiB)\n",
                      names[which], which == 2 ? 10.0 * big * 2 / (ms * 1e-3) / 1e9 : gbps,
                      ms / 10);
        }
      }
    }
    CHECK_CUDA(cudaFree(bx));
    CHECK_CUDA(cudaFree(bh));
    CHECK_CUDA(cudaFree(dh));
    CHECK_CUDA(cudaFree(df));
  }

  // int8 and sign payloads (finite data: the CPU codec handles non-finite chunks the same way,
  // checked separately below for int8's scale).
  std::vector<float> y(x);
  y[1] = 5.0f;
  y[2] = -4.0f;
  y[3] = 0.5f;
  float* dy = toDevice(y);
  {
    const size_t chunk = 1024, chunks = (n + chunk - 1) / chunk;
    const uint32_t key = 0xC0FFEEu;
    std::vector<int8_t> q(n);
    std::vector<float> s(chunks);
    for (size_t j = 0; j < chunks; ++j) {
      const size_t first = j * chunk, len = std::min(chunk, n - first);
      const float m = k.maxAbs(y.data() + first, len);
      s[j] = m / 127.0f;
      k.quantizeInt8(q.data() + first, y.data() + first, len, m > 0 ? 127.0f / m : 0.0f, key,
                     static_cast<uint32_t>(first));
    }
    int8_t* dq = nullptr;
    float* ds = nullptr;
    CHECK_CUDA(cudaMalloc(&dq, n));
    CHECK_CUDA(cudaMalloc(&ds, chunks * 4));
    CHECK_LAUNCH(braid::cuda::quantizeInt8(dq, ds, dy, n, chunk, key, nullptr));
    expect(toHost(dq, n) == q, "int8 values (stochastic rounding stream)");
    expect(sameFloats(toHost(ds, chunks), s), "int8 scales");
    std::vector<float> out(n, 1.0f);
    for (size_t j = 0; j < chunks; ++j) {
      const size_t first = j * chunk;
      k.addInt8(out.data() + first, q.data() + first, std::min(chunk, n - first), s[j]);
    }
    float* dout = toDevice(std::vector<float>(n, 1.0f));
    CHECK_LAUNCH(braid::cuda::addInt8(dout, dq, ds, n, chunk, nullptr));
    expect(sameFloats(toHost(dout, n), out), "int8 decode (add)");

    // sign
    std::vector<uint8_t> bits((n + 7) / 8, 0);
    std::vector<float> ss(chunks);
    for (size_t j = 0; j < chunks; ++j) {
      const size_t first = j * chunk, len = std::min(chunk, n - first);
      ss[j] = k.absSum(y.data() + first, len) / static_cast<float>(len);
      const size_t body = len / 8 * 8;
      k.packSigns(bits.data() + first / 8, y.data() + first, body);
      uint32_t tail = 0;
      for (size_t i = body; i < len; ++i) tail |= (!std::signbit(y[first + i]) ? 1u : 0u) << (i - body);
      if (body < len) bits[(first + body) / 8] = static_cast<uint8_t>(tail);
    }
    uint8_t* db = nullptr;
    CHECK_CUDA(cudaMalloc(&db, bits.size()));
    CHECK_LAUNCH(braid::cuda::packSigns(db, ds, dy, n, chunk, nullptr));
    expect(toHost(db, bits.size()) == bits, "sign bits");
    const auto gs = toHost(ds, chunks);
    bool close = true;
    for (size_t j = 0; j < chunks; ++j) close &= std::fabs(gs[j] - ss[j]) <= 1e-5f * ss[j];
    expect(close, "sign scales (mean |x|, 1e-5 relative)");
    CHECK_CUDA(cudaMemcpy(ds, ss.data(), chunks * 4, cudaMemcpyHostToDevice));
    std::vector<float> so(n, 0.5f);
    for (size_t j = 0; j < chunks; ++j) {
      const size_t first = j * chunk, len = std::min(chunk, n - first), body = len / 8 * 8;
      k.addSigns(so.data() + first, bits.data() + first / 8, body, ss[j]);
      for (size_t i = body; i < len; ++i) {
        so[first + i] += ((bits[(first + body) / 8] >> (i - body)) & 1u) ? ss[j] : -ss[j];
      }
    }
    float* dso = toDevice(std::vector<float>(n, 0.5f));
    CHECK_LAUNCH(braid::cuda::addSigns(dso, db, ds, n, chunk, nullptr));
    expect(sameFloats(toHost(dso, n), so), "sign decode (add)");
    CHECK_CUDA(cudaFree(dq));
    CHECK_CUDA(cudaFree(ds));
    CHECK_CUDA(cudaFree(db));
    CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(dso));
  }

  // Top-k threshold selection: sampled threshold, count and compaction.
  {
    const size_t stride = 100, ns = n / stride;
    float* dsample = nullptr;
    CHECK_CUDA(cudaMalloc(&dsample, ns * 4));
    CHECK_LAUNCH(braid::cuda::sampleMagnitudes(dsample, dy, ns, stride, nullptr));
    auto sample = toHost(dsample, ns);
    bool sameSample = true;
    for (size_t i = 0; i < ns; ++i) sameSample &= sample[i] == std::fabs(y[i * stride]);
    expect(sameSample, "top-k sample of magnitudes");
    const size_t ks = ns / 100;
    std::nth_element(sample.begin(), sample.begin() + (ns - ks), sample.end());
    const float thr = sample[ns - ks];
    size_t cpuCount = 0;
    std::vector<uint32_t> cpuIdx;
    for (size_t i = 0; i < n; ++i) {
      if (std::fabs(y[i]) >= thr) {
        ++cpuCount;
        cpuIdx.push_back(static_cast<uint32_t>(i));
      }
    }
    unsigned long long* dcount = nullptr;
    CHECK_CUDA(cudaMalloc(&dcount, sizeof(unsigned long long)));
    CHECK_LAUNCH(braid::cuda::countAtLeast(dcount, dy, n, thr, nullptr));
    expect(toHost(dcount, 1)[0] == cpuCount, "top-k count at the sampled threshold");
    uint32_t* didx = nullptr;
    float* dval = nullptr;
    CHECK_CUDA(cudaMalloc(&didx, (cpuCount + 1) * 4));
    CHECK_CUDA(cudaMalloc(&dval, (cpuCount + 1) * 4));
    CHECK_LAUNCH(braid::cuda::compactAtLeast(didx, dval, dcount, dy, n, thr, cpuCount + 1, nullptr));
    auto gidx = toHost(didx, cpuCount);
    auto gval = toHost(dval, cpuCount);
    bool valuesMatch = true;
    for (size_t j = 0; j < cpuCount; ++j) valuesMatch &= gval[j] == y[gidx[j]];
    std::sort(gidx.begin(), gidx.end());
    expect(gidx == cpuIdx && valuesMatch, "top-k compaction (index set and values)");
    std::printf("  threshold %.4f selects %zu of %zu (target ~%zu)\n", thr, cpuCount, n, n / 100);
    CHECK_CUDA(cudaFree(dsample));
    CHECK_CUDA(cudaFree(dcount));
    CHECK_CUDA(cudaFree(didx));
    CHECK_CUDA(cudaFree(dval));
  }

  // PowerSGD products, rank 4, 300 × 257.
  {
    const size_t rows = 300, cols = 257;
    const int r = 4;
    std::vector<float> m(rows * cols), qT(cols * r), pT(rows * r, 0.0f), q2(cols * r, 0.0f),
        rec(rows * cols, 0.0f);
    for (float& v : m) v = nd(rng);
    for (float& v : qT) v = nd(rng);
    for (size_t a = 0; a < rows; ++a) {
      for (int j = 0; j < r; ++j) pT[j * rows + a] = k.dot(&m[a * cols], &qT[j * cols], cols);
    }
    for (size_t a = 0; a < rows; ++a) {
      for (int j = 0; j < r; ++j) k.axpy(&q2[j * cols], pT[j * rows + a], &m[a * cols], cols);
    }
    for (size_t a = 0; a < rows; ++a) {
      for (int j = 0; j < r; ++j) k.axpy(&rec[a * cols], pT[j * rows + a], &q2[j * cols], cols);
    }
    float* dm = toDevice(m);
    float* dq = toDevice(qT);
    float* dp = toDevice(std::vector<float>(rows * r));
    float* dq2 = toDevice(std::vector<float>(cols * r));
    float* drec = toDevice(std::vector<float>(rows * cols));
    CHECK_LAUNCH(braid::cuda::powerSgdP(dp, dm, dq, rows, cols, r, nullptr));
    auto gp = toHost(dp, rows * r);
    // Q and the reconstruction from the CPU's P and Q, so each product is compared on its own.
    CHECK_CUDA(cudaMemcpy(dp, pT.data(), pT.size() * 4, cudaMemcpyHostToDevice));
    CHECK_LAUNCH(braid::cuda::powerSgdQ(dq2, dm, dp, rows, cols, r, nullptr));
    auto gq = toHost(dq2, cols * r);
    CHECK_CUDA(cudaMemcpy(dq2, q2.data(), q2.size() * 4, cudaMemcpyHostToDevice));
    CHECK_LAUNCH(braid::cuda::powerSgdReconstruct(drec, dp, dq2, rows, cols, r, nullptr));
    auto grec = toHost(drec, rows * cols);
    auto relClose = [](const std::vector<float>& a, const std::vector<float>& b) {
      double na = 0, d = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        na += static_cast<double>(a[i]) * a[i];
        d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
      }
      return d <= 1e-4 * std::sqrt(na / std::max<size_t>(1, a.size())) * 10;
    };
    expect(relClose(pT, gp), "powersgd P = M Q");
    expect(relClose(q2, gq), "powersgd Q = M^T P");
    expect(relClose(rec, grec), "powersgd M^ = P Q^T");
    for (float* p : {dm, dq, dp, dq2, drec}) CHECK_CUDA(cudaFree(p));
  }

  CHECK_CUDA(cudaFree(dx));
  CHECK_CUDA(cudaFree(dy));
  std::printf("codec_check: %s (%d mismatches)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
