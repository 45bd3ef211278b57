// braid-perf's verifiable data: the Pattern tables (harness.h) and the fill, check and poison
// helpers every collective's benchmark uses. The element encodings are written here, independent
// of braid's own conversions, so that those are checked too.
#include <algorithm>
#include <cstring>

#include "bench/perf/harness.h"

namespace braid::perf {
namespace {

constexpr size_t kPatternPeriodPerRank = 61;  // prime, so blocks of 2^k elements never align
constexpr unsigned char kPoisonByte = 0xA5;   // -91 / 165 / -2.9e-16: no verifiable value

uint16_t floatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // subnormal half (or zero)
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = absx >> 23;
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // mant x 2^(exp-150) in units of 2^-24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((absx - 0x38000000u) >> 13);
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

uint16_t floatToBfloat16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

template <typename T>
void store(uint8_t* out, T value) {
  std::memcpy(out, &value, sizeof(T));
}

// v is a small integer (never negative for the unsigned types), so every cast is exact.
void encode(DataType type, double v, uint8_t* out) {
  switch (type) {
    case DataType::kInt8:
      return store(out, static_cast<int8_t>(v));
    case DataType::kUint8:
      return store(out, static_cast<uint8_t>(v));
    case DataType::kInt32:
      return store(out, static_cast<int32_t>(v));
    case DataType::kUint32:
      return store(out, static_cast<uint32_t>(v));
    case DataType::kInt64:
      return store(out, static_cast<int64_t>(v));
    case DataType::kUint64:
      return store(out, static_cast<uint64_t>(v));
    case DataType::kFloat16:
      return store(out, floatToHalfBits(static_cast<float>(v)));
    case DataType::kBFloat16:
      return store(out, floatToBfloat16Bits(static_cast<float>(v)));
    case DataType::kFloat32:
      return store(out, static_cast<float>(v));
    case DataType::kFloat64:
      return store(out, v);
  }
}

bool isUnsigned(DataType type) {
  return type == DataType::kUint8 || type == DataType::kUint32 || type == DataType::kUint64;
}

// Largest integer magnitude up to which every integer is representable (and, for the integer
// types, no overflow happens).
double exactLimit(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return 127;
    case DataType::kUint8:
      return 255;
    case DataType::kInt32:
      return 2147483647.0;
    case DataType::kUint32:
      return 4294967295.0;
    case DataType::kFloat16:
      return 2048;
    case DataType::kBFloat16:
      return 256;
    case DataType::kFloat32:
      return 16777216.0;
    default:
      return 9007199254740992.0;  // int64, uint64, double: 2^53 (computed in double)
  }
}

// Rank r's value at table position j, for n ranks. See Pattern's comment for why these values.
double patternValue(ReduceOp op, bool unsignedType, int n, int r, size_t j) {
  const int64_t mix = static_cast<int64_t>(7 * j) + 13 * r + static_cast<int64_t>(j) * r;
  const size_t un = static_cast<size_t>(n);
  const size_t ur = static_cast<size_t>(r);
  switch (op) {
    case ReduceOp::kSum:
      return unsignedType ? static_cast<double>(mix % 3) : static_cast<double>(mix % 5 - 2);
    case ReduceOp::kProd: {
      double v = 1;
      if (ur == j % un) v = 2;
      if (n > 1 && ur == (3 * j + 1) % un) v = 2;
      if (!unsignedType && (j + 2 * ur) % 3 == 0) v = -v;
      return v;
    }
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return unsignedType ? static_cast<double>(mix % 9) : static_cast<double>(mix % 9 - 4);
    case ReduceOp::kAvg: {
      // base + d with the d's of all ranks summing to 0: the sum is n × base, the average base.
      double v = 1 + static_cast<double>((j / un + j) % 3);
      if (n > 1 && ur == j % un) v += 1;
      if (n > 1 && ur == (j + 1) % un) v -= 1;
      return v;
    }
  }
  return 0;
}

}  // namespace

Pattern::Pattern(DataType type, ReduceOp op, int ranks) {
  const int n = std::max(ranks, 1);
  period_ = kPatternPeriodPerRank * static_cast<size_t>(n);
  elemSize_ = dataTypeSize(type);
  const bool uns = isUnsigned(type);
  contributions_.assign(n, std::vector<uint8_t>(period_ * elemSize_));
  reduced_.assign(period_ * elemSize_, 0);
  for (size_t j = 0; j < period_; ++j) {
    double acc = 0;
    for (int r = 0; r < n; ++r) {
      const double v = patternValue(op, uns, n, r, j);
      encode(type, v, &contributions_[r][j * elemSize_]);
      if (r == 0) {
        acc = v;
      } else if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
        acc += v;
      } else if (op == ReduceOp::kProd) {
        acc *= v;
      } else if (op == ReduceOp::kMax) {
        acc = std::max(acc, v);
      } else {
        acc = std::min(acc, v);
      }
    }
    if (op == ReduceOp::kAvg) acc /= n;  // exact: the sum is n × base
    encode(type, acc, &reduced_[j * elemSize_]);
  }
  // Largest magnitude of any partial result, whatever the order of reduction.
  double bound = 0;
  switch (op) {
    case ReduceOp::kSum:
      bound = 2.0 * n;
      break;
    case ReduceOp::kProd:
      bound = 4;
      break;
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      bound = 8;
      break;
    case ReduceOp::kAvg:
      bound = 4.0 * n;
      break;
  }
  if (bound > exactLimit(type)) {
    limitation_ = std::string("pattern partial sums reach ") +
                  std::to_string(static_cast<long>(bound)) + ", beyond what " + dataTypeName(type) +
                  " holds exactly with " + std::to_string(n) +
                  " ranks: #wrong may count rounding, not bugs";
  }
}

const uint8_t* Pattern::contribution(int rank) const {
  return contributions_[static_cast<size_t>(rank) % contributions_.size()].data();
}

void fillPeriodic(void* dst, const uint8_t* table, size_t period, size_t elemSize, size_t count,
                  size_t phase) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  phase %= period;
  while (count > 0) {
    const size_t n = std::min(count, period - phase);
    std::memcpy(out, table + phase * elemSize, n * elemSize);
    out += n * elemSize;
    count -= n;
    phase = 0;
  }
}

size_t countMismatches(const void* buf, const uint8_t* table, size_t period, size_t elemSize,
                       size_t count, size_t phase) {
  const uint8_t* in = static_cast<const uint8_t*>(buf);
  size_t wrong = 0;
  phase %= period;
  while (count > 0) {
    const size_t n = std::min(count, period - phase);
    const uint8_t* ref = table + phase * elemSize;
    if (std::memcmp(in, ref, n * elemSize) != 0) {
      for (size_t k = 0; k < n; ++k) {
        wrong += std::memcmp(in + k * elemSize, ref + k * elemSize, elemSize) != 0 ? 1 : 0;
      }
    }
    in += n * elemSize;
    count -= n;
    phase = 0;
  }
  return wrong;
}

void poison(void* buf, size_t bytes) { std::memset(buf, kPoisonByte, bytes); }

size_t countUnpoisoned(const void* buf, size_t elemSize, size_t count) {
  const uint8_t poisoned[16] = {kPoisonByte, kPoisonByte, kPoisonByte, kPoisonByte,
                                kPoisonByte, kPoisonByte, kPoisonByte, kPoisonByte,
                                kPoisonByte, kPoisonByte, kPoisonByte, kPoisonByte,
                                kPoisonByte, kPoisonByte, kPoisonByte, kPoisonByte};
  return elemSize <= sizeof(poisoned) ? countMismatches(buf, poisoned, 1, elemSize, count) : count;
}

}  // namespace braid::perf
