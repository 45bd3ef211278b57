// Vectorized element-wise reduction kernels. dtype × op is dispatched once (getReduceFn), the
// returned function runs a tight loop with no per-element dispatch. f16 and bf16 are converted to
// f32, reduced, and rounded back to nearest-even once per call.
#pragma once

#include <cstddef>

#include "braid/types.h"

namespace braid {

/// dst[i] = op(a[i], b[i]) for i < count. dst may alias a or b (exactly, not partially).
/// kAvg reduces as kSum; divide once at the end with scaleForAvg.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

/// The kernel for (type, op); nullptr when either is out of range.
ReduceFn getReduceFn(DataType type, ReduceOp op);

/// Convenience: dst[i] = op(dst[i], src[i]).
void reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count);

/// Finishes an average over `n` contributions: buf[i] /= n. Integers divide with truncation
/// toward zero (as NCCL does); f16/bf16 go through f32.
void scaleForAvg(DataType type, void* buf, size_t count, int n);

/// True when this CPU (and its OS) runs the AVX2 + F16C + FMA kernels of core and compression.
bool cpuHasAvx2Kernels();

/// Conversions used by kernels, codecs and tests (round to nearest even; NaN and Inf kept).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

}  // namespace braid
