#include "braid/types.h"

#include <algorithm>
#include <cctype>

namespace braid {
namespace {

struct TypeInfo {
  const char* name;
  size_t size;
  const char* aliases[4];
};

constexpr TypeInfo kTypes[kNumDataTypes] = {
    {"int8", 1, {"i8", "char", nullptr, nullptr}},
    {"uint8", 1, {"u8", nullptr, nullptr, nullptr}},
    {"int32", 4, {"i32", "int", nullptr, nullptr}},
    {"uint32", 4, {"u32", nullptr, nullptr, nullptr}},
    {"int64", 8, {"i64", nullptr, nullptr, nullptr}},
    {"uint64", 8, {"u64", nullptr, nullptr, nullptr}},
    {"half", 2, {"f16", "fp16", "float16", nullptr}},
    {"float", 4, {"f32", "fp32", "float32", nullptr}},
    {"double", 8, {"f64", "fp64", "float64", nullptr}},
    {"bfloat16", 2, {"bf16", nullptr, nullptr, nullptr}},
};

constexpr const char* kOps[kNumReduceOps] = {"sum", "prod", "max", "min", "avg"};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

bool isValid(DataType type) {
  int t = static_cast<int>(type);
  return t >= 0 && t < kNumDataTypes;
}

bool isValid(ReduceOp op) {
  int o = static_cast<int>(op);
  return o >= 0 && o < kNumReduceOps;
}

size_t dataTypeSize(DataType type) { return isValid(type) ? kTypes[static_cast<int>(type)].size : 0; }

const char* dataTypeName(DataType type) {
  return isValid(type) ? kTypes[static_cast<int>(type)].name : "invalid";
}

const char* reduceOpName(ReduceOp op) { return isValid(op) ? kOps[static_cast<int>(op)] : "invalid"; }

bool isFloatingPoint(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBFloat16;
}

Result<DataType> parseDataType(const std::string& name) {
  std::string n = lower(name);
  std::string valid;
  for (int t = 0; t < kNumDataTypes; ++t) {
    if (n == kTypes[t].name) return static_cast<DataType>(t);
    for (const char* alias : kTypes[t].aliases) {
      if (alias != nullptr && n == alias) return static_cast<DataType>(t);
    }
    valid += (t ? ", " : "") + std::string(kTypes[t].name);
  }
  return invalidArgument("unknown data type '" + name + "'; valid: " + valid);
}

Result<ReduceOp> parseReduceOp(const std::string& name) {
  std::string n = lower(name);
  for (int o = 0; o < kNumReduceOps; ++o) {
    if (n == kOps[o]) return static_cast<ReduceOp>(o);
  }
  return invalidArgument("unknown reduction op '" + name + "'; valid: sum, prod, max, min, avg");
}

}  // namespace braid
