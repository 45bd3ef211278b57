#include "braid/types.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

TEST(TypesTest, NumberingMatchesNccl) {
  // ncclDataType_t and ncclRedOp_t values; the C API and plugins convert by a cast.
  EXPECT_EQ(static_cast<int>(DataType::kInt8), 0);
  EXPECT_EQ(static_cast<int>(DataType::kUint8), 1);
  EXPECT_EQ(static_cast<int>(DataType::kInt32), 2);
  EXPECT_EQ(static_cast<int>(DataType::kUint32), 3);
  EXPECT_EQ(static_cast<int>(DataType::kInt64), 4);
  EXPECT_EQ(static_cast<int>(DataType::kUint64), 5);
  EXPECT_EQ(static_cast<int>(DataType::kFloat16), 6);
  EXPECT_EQ(static_cast<int>(DataType::kFloat32), 7);
  EXPECT_EQ(static_cast<int>(DataType::kFloat64), 8);
  EXPECT_EQ(static_cast<int>(DataType::kBFloat16), 9);
  EXPECT_EQ(static_cast<int>(ReduceOp::kSum), 0);
  EXPECT_EQ(static_cast<int>(ReduceOp::kProd), 1);
  EXPECT_EQ(static_cast<int>(ReduceOp::kMax), 2);
  EXPECT_EQ(static_cast<int>(ReduceOp::kMin), 3);
  EXPECT_EQ(static_cast<int>(ReduceOp::kAvg), 4);
}

TEST(TypesTest, Sizes) {
  const size_t expected[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  for (int t = 0; t < kNumDataTypes; ++t) {
    EXPECT_EQ(dataTypeSize(static_cast<DataType>(t)), expected[t]) << t;
  }
  EXPECT_EQ(dataTypeSize(static_cast<DataType>(-1)), 0u);
  EXPECT_EQ(dataTypeSize(static_cast<DataType>(kNumDataTypes)), 0u);
}

TEST(TypesTest, NamesRoundTrip) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    Result<DataType> parsed = parseDataType(dataTypeName(type));
    ASSERT_TRUE(parsed.isOk()) << dataTypeName(type);
    EXPECT_EQ(parsed.value(), type);
  }
  for (int o = 0; o < kNumReduceOps; ++o) {
    const ReduceOp op = static_cast<ReduceOp>(o);
    Result<ReduceOp> parsed = parseReduceOp(reduceOpName(op));
    ASSERT_TRUE(parsed.isOk()) << reduceOpName(op);
    EXPECT_EQ(parsed.value(), op);
  }
  EXPECT_STREQ(dataTypeName(DataType::kFloat16), "half");
  EXPECT_STREQ(dataTypeName(DataType::kBFloat16), "bfloat16");
  EXPECT_STREQ(reduceOpName(ReduceOp::kAvg), "avg");
  EXPECT_STREQ(dataTypeName(static_cast<DataType>(42)), "invalid");
  EXPECT_STREQ(reduceOpName(static_cast<ReduceOp>(42)), "invalid");
}

TEST(TypesTest, Aliases) {
  struct Case {
    const char* text;
    DataType type;
  };
  const Case cases[] = {
      {"f16", DataType::kFloat16},   {"fp16", DataType::kFloat16},  {"f32", DataType::kFloat32},
      {"fp32", DataType::kFloat32},  {"f64", DataType::kFloat64},   {"fp64", DataType::kFloat64},
      {"bf16", DataType::kBFloat16}, {"i8", DataType::kInt8},       {"u8", DataType::kUint8},
      {"i32", DataType::kInt32},     {"u32", DataType::kUint32},    {"i64", DataType::kInt64},
      {"u64", DataType::kUint64},    {"FLOAT", DataType::kFloat32}, {"BF16", DataType::kBFloat16},
  };
  for (const Case& c : cases) {
    Result<DataType> parsed = parseDataType(c.text);
    ASSERT_TRUE(parsed.isOk()) << c.text;
    EXPECT_EQ(parsed.value(), c.type) << c.text;
  }
  EXPECT_TRUE(parseReduceOp("SUM").isOk());
}

TEST(TypesTest, UnknownNamesAreInvalidArguments) {
  Result<DataType> t = parseDataType("float8");
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_NE(t.status().message().find("float8"), std::string::npos);
  EXPECT_NE(t.status().message().find("bfloat16"), std::string::npos);  // lists the valid names
  Result<ReduceOp> o = parseReduceOp("xor");
  ASSERT_FALSE(o.isOk());
  EXPECT_EQ(o.status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(parseDataType("").isOk());
}

TEST(TypesTest, Validity) {
  EXPECT_TRUE(isValid(DataType::kInt8));
  EXPECT_TRUE(isValid(DataType::kBFloat16));
  EXPECT_FALSE(isValid(static_cast<DataType>(-1)));
  EXPECT_FALSE(isValid(static_cast<DataType>(10)));
  EXPECT_TRUE(isValid(ReduceOp::kAvg));
  EXPECT_FALSE(isValid(static_cast<ReduceOp>(5)));
}

TEST(TypesTest, FloatingPoint) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    const bool expected = type == DataType::kFloat16 || type == DataType::kFloat32 ||
                          type == DataType::kFloat64 || type == DataType::kBFloat16;
    EXPECT_EQ(isFloatingPoint(type), expected) << dataTypeName(type);
  }
}

}  // namespace
}  // namespace braid
