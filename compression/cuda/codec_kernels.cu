// CUDA codec kernels; see codec_kernels.h. Simple grid-stride and block-per-chunk kernels: the
// point is the same arithmetic as the CPU (for bit-identical payloads), not peak throughput.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "compression/cuda/codec_kernels.h"
#include "compression/kernels.h"

namespace braid::cuda {
namespace {

constexpr int kThreads = 256;

cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }

unsigned blocksFor(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  if (b > 65535u * 8u) b = 65535u * 8u;
  return static_cast<unsigned>(b == 0 ? 1 : b);
}

int launched() { return static_cast<int>(cudaGetLastError()); }

using detail::codecUniform;

__device__ inline float magnitudeDev(float v) {
  const float a = fabsf(v);
  return a != a ? INFINITY : a;
}
// NaN-propagating max of magnitudes.
__device__ inline float maxNan(float a, float b) { return ((a < b) | (b != b)) ? b : a; }

__global__ void toHalfKernel(uint16_t* d, const float* s, size_t n, float scale, float limit) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    float v = s[i] * scale;
    const float a = fabsf(v);
    if (a > limit && a < INFINITY) v = copysignf(limit, v);
    d[i] = __half_as_ushort(__float2half_rn(v));
  }
}

__global__ void fromHalfKernel(float* d, const uint16_t* s, size_t n, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    d[i] = __half2float(__ushort_as_half(s[i])) * scale;
  }
}

// The CPU's bf16 rounding, bit for bit (round to nearest even, NaN forced quiet).
__global__ void toBf16Kernel(uint16_t* d, const float* s, size_t n, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint32_t x = __float_as_uint(s[i] * scale);
    const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    d[i] = static_cast<uint16_t>((x & 0x7FFFFFFFu) > 0x7F800000u ? ((x >> 16) | 0x40u) : rounded);
  }
}

__global__ void fromBf16Kernel(float* d, const uint16_t* s, size_t n, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    d[i] = __uint_as_float(static_cast<uint32_t>(s[i]) << 16) * scale;
  }
}

// One block per chunk: block max, then quantize.
__global__ void quantizeKernel(int8_t* q, float* scales, const float* x, size_t n, size_t chunk,
                               uint32_t key) {
  __shared__ float red[kThreads];
  const size_t first = blockIdx.x * chunk;
  const size_t len = min(chunk, n - first);
  float m = 0.0f;
  for (size_t i = threadIdx.x; i < len; i += blockDim.x) m = maxNan(m, fabsf(x[first + i]));
  red[threadIdx.x] = m;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) red[threadIdx.x] = maxNan(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  m = red[0];
  const bool finite = isfinite(m);
  const float inv = (m > 0.0f && finite) ? 127.0f / m : 0.0f;
  if (threadIdx.x == 0) scales[blockIdx.x] = finite ? m / 127.0f : NAN;
  for (size_t i = threadIdx.x; i < len; i += blockDim.x) {
    if (!finite) {
      q[first + i] = 0;
      continue;
    }
    const float t = x[first + i] * inv;
    const float v = floorf(t + codecUniform(key, static_cast<uint32_t>(first + i)));
    const float c = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
    q[first + i] = static_cast<int8_t>(static_cast<int32_t>(c));
  }
}

__global__ void addInt8Kernel(float* out, const int8_t* q, const float* scales, size_t n,
                              size_t chunk) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] += static_cast<float>(q[i]) * scales[i / chunk];
  }
}

// One block per chunk: mean |x|, then one byte of sign bits per thread step.
__global__ void packSignsKernel(uint8_t* bits, float* scales, const float* x, size_t n,
                                size_t chunk) {
  __shared__ float red[kThreads];
  const size_t first = blockIdx.x * chunk;
  const size_t len = min(chunk, n - first);
  float s = 0.0f;
  for (size_t i = threadIdx.x; i < len; i += blockDim.x) s += fabsf(x[first + i]);
  red[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float mean = red[0] / static_cast<float>(len);
    scales[blockIdx.x] = isfinite(mean) ? mean : NAN;
  }
  for (size_t b = threadIdx.x; b < (len + 7) / 8; b += blockDim.x) {
    uint32_t v = 0;
    for (uint32_t l = 0; l < 8 && b * 8 + l < len; ++l) {
      v |= ((__float_as_uint(x[first + b * 8 + l]) >> 31) ^ 1u) << l;
    }
    bits[first / 8 + b] = static_cast<uint8_t>(v);
  }
}

__global__ void addSignsKernel(float* out, const uint8_t* bits, const float* scales, size_t n,
                               size_t chunk) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float s = scales[i / chunk];
    out[i] += ((bits[i / 8] >> (i % 8)) & 1u) ? s : -s;
  }
}

__global__ void sampleKernel(float* sample, const float* x, size_t ns, size_t stride) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < ns;
       i += size_t{gridDim.x} * blockDim.x) {
    sample[i] = magnitudeDev(x[i * stride]);
  }
}

__global__ void countKernel(unsigned long long* count, const float* x, size_t n, float thr) {
  __shared__ unsigned int red[kThreads];
  unsigned int c = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    c += magnitudeDev(x[i]) >= thr;
  }
  red[threadIdx.x] = c;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0 && red[0] > 0) atomicAdd(count, static_cast<unsigned long long>(red[0]));
}

__global__ void compactKernel(uint32_t* idx, float* val, unsigned long long* count,
                              const float* x, size_t n, float thr, size_t cap) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    if (magnitudeDev(x[i]) >= thr) {
      const unsigned long long slot = atomicAdd(count, 1ull);
      if (slot < cap) {
        idx[slot] = static_cast<uint32_t>(i);
        val[slot] = x[i];
      }
    }
  }
}

// One thread per (a, j).
__global__ void powerSgdPKernel(float* pT, const float* m, const float* qT, size_t rows,
                                size_t cols, int r) {
  const size_t t = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (t >= rows * static_cast<size_t>(r)) return;
  const size_t a = t % rows, j = t / rows;
  float s = 0.0f;
  for (size_t b = 0; b < cols; ++b) s += m[a * cols + b] * qT[j * cols + b];
  pT[j * rows + a] = s;
}

// One thread per (j, b): coalesced along b.
__global__ void powerSgdQKernel(float* qT, const float* m, const float* pT, size_t rows,
                                size_t cols, int r) {
  const size_t t = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (t >= cols * static_cast<size_t>(r)) return;
  const size_t b = t % cols, j = t / cols;
  float s = 0.0f;
  for (size_t a = 0; a < rows; ++a) s += pT[j * rows + a] * m[a * cols + b];
  qT[j * cols + b] = s;
}

__global__ void powerSgdReconstructKernel(float* m, const float* pT, const float* qT, size_t rows,
                                          size_t cols, int r) {
  for (size_t t = blockIdx.x * size_t{blockDim.x} + threadIdx.x; t < rows * cols;
       t += size_t{gridDim.x} * blockDim.x) {
    const size_t a = t / cols, b = t % cols;
    float s = 0.0f;
    for (int j = 0; j < r; ++j) s += pT[j * rows + a] * qT[j * cols + b];
    m[t] = s;
  }
}

}  // namespace

int toHalf(uint16_t* dst, const float* src, size_t n, float scale, float limit, void* stream) {
  toHalfKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(dst, src, n, scale, limit);
  return launched();
}
int fromHalf(float* dst, const uint16_t* src, size_t n, float scale, void* stream) {
  fromHalfKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(dst, src, n, scale);
  return launched();
}
int toBf16(uint16_t* dst, const float* src, size_t n, float scale, void* stream) {
  toBf16Kernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(dst, src, n, scale);
  return launched();
}
int fromBf16(float* dst, const uint16_t* src, size_t n, float scale, void* stream) {
  fromBf16Kernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(dst, src, n, scale);
  return launched();
}
int quantizeInt8(int8_t* q, float* scales, const float* x, size_t n, size_t chunk, uint32_t key,
                 void* stream) {
  if (n == 0) return 0;
  const size_t chunks = (n + chunk - 1) / chunk;
  quantizeKernel<<<static_cast<unsigned>(chunks), kThreads, 0, asStream(stream)>>>(q, scales, x, n,
                                                                                   chunk, key);
  return launched();
}
int addInt8(float* out, const int8_t* q, const float* scales, size_t n, size_t chunk,
            void* stream) {
  addInt8Kernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(out, q, scales, n, chunk);
  return launched();
}
int packSigns(uint8_t* bits, float* scales, const float* x, size_t n, size_t chunk, void* stream) {
  if (n == 0) return 0;
  const size_t chunks = (n + chunk - 1) / chunk;
  packSignsKernel<<<static_cast<unsigned>(chunks), kThreads, 0, asStream(stream)>>>(bits, scales, x,
                                                                                    n, chunk);
  return launched();
}
int addSigns(float* out, const uint8_t* bits, const float* scales, size_t n, size_t chunk,
             void* stream) {
  addSignsKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(out, bits, scales, n, chunk);
  return launched();
}
int sampleMagnitudes(float* sample, const float* x, size_t ns, size_t stride, void* stream) {
  sampleKernel<<<blocksFor(ns), kThreads, 0, asStream(stream)>>>(sample, x, ns, stride);
  return launched();
}
int countAtLeast(unsigned long long* count, const float* x, size_t n, float thr, void* stream) {
  cudaMemsetAsync(count, 0, sizeof(*count), asStream(stream));
  countKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(count, x, n, thr);
  return launched();
}
int compactAtLeast(uint32_t* idx, float* val, unsigned long long* count, const float* x, size_t n,
                   float thr, size_t cap, void* stream) {
  cudaMemsetAsync(count, 0, sizeof(*count), asStream(stream));
  compactKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(idx, val, count, x, n, thr, cap);
  return launched();
}
int powerSgdP(float* pT, const float* m, const float* qT, size_t rows, size_t cols, int r,
              void* stream) {
  const size_t t = rows * static_cast<size_t>(r);
  powerSgdPKernel<<<static_cast<unsigned>((t + kThreads - 1) / kThreads + (t == 0)), kThreads, 0,
                    asStream(stream)>>>(pT, m, qT, rows, cols, r);
  return launched();
}
int powerSgdQ(float* qT, const float* m, const float* pT, size_t rows, size_t cols, int r,
              void* stream) {
  const size_t t = cols * static_cast<size_t>(r);
  powerSgdQKernel<<<static_cast<unsigned>((t + kThreads - 1) / kThreads + (t == 0)), kThreads, 0,
                    asStream(stream)>>>(qT, m, pT, rows, cols, r);
  return launched();
}
int powerSgdReconstruct(float* m, const float* pT, const float* qT, size_t rows, size_t cols,
                        int r, void* stream) {
  powerSgdReconstructKernel<<<blocksFor(rows * cols), kThreads, 0, asStream(stream)>>>(m, pT, qT,
                                                                                       rows, cols, r);
  return launched();
}

}  // namespace braid::cuda
