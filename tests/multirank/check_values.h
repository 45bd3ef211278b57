// Deterministic test values and an independent reference for the multi-rank checks. Values are
// small multiples of 1/4 (floats) or small integers, so sums over up to 64 ranks are exact in
// every type; products use {1, 2, -1} (and 1/2 for floats) so they stay exact too. Integer
// results wrap exactly as two's complement arithmetic in the element type does.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "braid/types.h"
#include "core/reduce.h"

namespace braid::test {

/// The value rank r contributes at element i (salt varies it between cases).
inline double testValue(DataType t, ReduceOp op, int r, size_t i, uint32_t salt) {
  uint64_t h = (static_cast<uint64_t>(r) * 1315423911u) ^ (i * 2654435761u) ^ (salt * 97u);
  h ^= h >> 13;
  const bool isUnsigned = t == DataType::kUint8 || t == DataType::kUint32 || t == DataType::kUint64;
  if (op == ReduceOp::kProd) {
    static const double kSigned[4] = {1, 2, -1, 1};
    static const double kFloat[4] = {1, 2, -1, 0.5};
    static const double kUnsigned[4] = {1, 2, 1, 1};
    if (isFloatingPoint(t)) return kFloat[h & 3];
    return isUnsigned ? kUnsigned[h & 3] : kSigned[h & 3];
  }
  int k = static_cast<int>(h % 9);  // 0..8
  if (isFloatingPoint(t)) return (k - 4) / 4.0;
  return isUnsigned ? k : k - 4;
}

/// Stores v (exactly representable, or wrapped for integers) at element i of buf.
inline void storeValue(DataType t, void* buf, size_t i, double v) {
  switch (t) {
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case DataType::kUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(static_cast<int64_t>(v)); break;
    case DataType::kUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(static_cast<int64_t>(v)); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case DataType::kUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(static_cast<int64_t>(v)); break;
    case DataType::kFloat16: static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(buf)[i] = floatToBfloat16(static_cast<float>(v)); break;
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; break;
  }
}

inline double loadValue(DataType t, const void* buf, size_t i) {
  switch (t) {
    case DataType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DataType::kUint8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kUint32: return static_cast<const uint32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case DataType::kFloat16: return halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBFloat16: return bfloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
  }
  return 0;
}

/// Wraps an exact integer result to what the element type holds.
inline double wrapTo(DataType t, double v) {
  int64_t x = static_cast<int64_t>(v);
  switch (t) {
    case DataType::kInt8: return static_cast<int8_t>(x);
    case DataType::kUint8: return static_cast<uint8_t>(x);
    case DataType::kInt32: return static_cast<int32_t>(x);
    case DataType::kUint32: return static_cast<uint32_t>(x);
    case DataType::kUint64: return static_cast<double>(static_cast<uint64_t>(x));
    default: return v;
  }
}

/// The reduction of element i over ranks 0..p-1 (contributions from testValue at index src).
inline double expectedReduce(DataType t, ReduceOp op, int p, size_t src, uint32_t salt) {
  double acc = testValue(t, op, 0, src, salt);
  for (int r = 1; r < p; ++r) {
    double v = testValue(t, op, r, src, salt);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
    }
  }
  if (!isFloatingPoint(t)) {
    // Products of up to 64 factors of ±2 exceed 2^53 only past 53 ranks; sums stay tiny.
    acc = wrapTo(t, acc);
    if (op == ReduceOp::kAvg) acc = std::trunc(acc / p);
    return wrapTo(t, acc);
  }
  if (op == ReduceOp::kAvg) acc /= p;
  return acc;
}

/// Documented bound: exact for everything but avg of floats, which is within a few units in the
/// last place of the type (one rounding of the division, plus f16/bf16 storage).
inline bool closeEnough(DataType t, ReduceOp op, double got, double want) {
  if (got == want) return true;
  if (op != ReduceOp::kAvg || !isFloatingPoint(t)) return false;
  double eps = t == DataType::kBFloat16 ? 1.0 / 128 : t == DataType::kFloat16 ? 1.0 / 1024
               : t == DataType::kFloat32 ? 1.2e-7 : 2.3e-16;
  return std::fabs(got - want) <= 2 * eps * std::max(1.0, std::fabs(want));
}

}  // namespace braid::test
