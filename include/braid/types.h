// Element types and reduction operators. Numeric values equal NCCL's ncclDataType_t and
// ncclRedOp_t so that the C API and the plugins convert by a cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/status.h"

namespace braid {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBFloat16 = 9,
};
inline constexpr int kNumDataTypes = 10;

enum class ReduceOp : int {
  kSum = 0,
  kProd = 1,
  kMax = 2,
  kMin = 3,
  kAvg = 4,
};
inline constexpr int kNumReduceOps = 5;

/// Bytes per element; 0 for an out-of-range value.
size_t dataTypeSize(DataType type);
/// Short names as in nccl-tests: "int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
/// "float", "double", "bfloat16".
const char* dataTypeName(DataType type);
/// "sum", "prod", "max", "min", "avg".
const char* reduceOpName(ReduceOp op);
/// Accepts the names above and the aliases f16, f32, f64, bf16, i8, u8, i32, u32, i64, u64,
/// fp16, fp32, fp64.
Result<DataType> parseDataType(const std::string& name);
Result<ReduceOp> parseReduceOp(const std::string& name);
bool isValid(DataType type);
bool isValid(ReduceOp op);
bool isFloatingPoint(DataType type);

}  // namespace braid
