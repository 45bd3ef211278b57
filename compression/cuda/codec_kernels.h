// CUDA kernels of the codecs (built when BRAID_WITH_CUDA): the same element math as the CPU
// kernels (compression/kernels.h), on device memory. Every pointer is a device pointer; every
// call is asynchronous on `stream` (a cudaStream_t; nullptr = the default stream) and returns a
// cudaError_t as int (0 = cudaSuccess) from the launch. Built with --fmad=false: the casts, int8
// (same counter-based random stream) and sign bits are bit-identical to the CPU kernels;
// reductions (sign's scale, PowerSGD's products) differ only in summation order.
// tests/gpu/codec_check.cu compares each against the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::cuda {

/// dst = f16(src·scale), finite |src·scale| > limit saturated to ±limit.
int toHalf(uint16_t* dst, const float* src, size_t n, float scale, float limit, void* stream);
int fromHalf(float* dst, const uint16_t* src, size_t n, float scale, void* stream);
int toBf16(uint16_t* dst, const float* src, size_t n, float scale, void* stream);
int fromBf16(float* dst, const uint16_t* src, size_t n, float scale, void* stream);

/// int8 payload of x (n elements, chunks of `chunk`): scales[j] = max|x_chunk|/127 (NaN for a
/// non-finite chunk), q = floor(x/s + u(key, i)). One block per chunk.
int quantizeInt8(int8_t* q, float* scales, const float* x, size_t n, size_t chunk, uint32_t key,
                 void* stream);
/// out[i] += q[i]·scales[i / chunk].
int addInt8(float* out, const int8_t* q, const float* scales, size_t n, size_t chunk,
            void* stream);

/// sign payload (chunk a multiple of 8): scales[j] = mean |x_chunk|, bit i = x_i non-negative.
int packSigns(uint8_t* bits, float* scales, const float* x, size_t n, size_t chunk, void* stream);
/// out[i] += bit_i ? s : −s, s = scales[i / chunk].
int addSigns(float* out, const uint8_t* bits, const float* scales, size_t n, size_t chunk,
             void* stream);

/// top-k threshold selection: sample[i] = |x[i·stride]| (NaN as +Inf) for i < ns;
/// *count = #{i : |x_i| ≥ thr}; compact writes the indices and values reaching thr (unordered,
/// at most cap; *count still counts all).
int sampleMagnitudes(float* sample, const float* x, size_t ns, size_t stride, void* stream);
int countAtLeast(unsigned long long* count, const float* x, size_t n, float thr, void* stream);
int compactAtLeast(uint32_t* idx, float* val, unsigned long long* count, const float* x, size_t n,
                   float thr, size_t cap, void* stream);

/// PowerSGD products for one rows × cols matrix M (row major) and rank r, with P and Q stored
/// transposed (column j contiguous): Pᵀ[j][a] = M[a,:]·Qᵀ[j,:]; Qᵀ[j][b] = Σ_a Pᵀ[j][a]·M[a][b];
/// M̂[a][b] = Σ_j Pᵀ[j][a]·Qᵀ[j][b].
int powerSgdP(float* pT, const float* m, const float* qT, size_t rows, size_t cols, int r,
              void* stream);
int powerSgdQ(float* qT, const float* m, const float* pT, size_t rows, size_t cols, int r,
              void* stream);
int powerSgdReconstruct(float* m, const float* pT, const float* qT, size_t rows, size_t cols,
                        int r, void* stream);

}  // namespace braid::cuda
