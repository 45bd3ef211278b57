// reduce_bench: throughput of the reduction kernels per dtype, op and message size, beside memcpy
// of the same number of bytes (the bound a reduction step of a ring all-reduce is compared with).
//
// Each kernel runs out of place, dst = op(a, b), on three distinct 64-byte aligned buffers, as
// in a ring step that combines a received chunk with the local one. bytes_per_second counts the
// message bytes (one buffer); the memory traffic is 3x that for a reduction and 2x for memcpy.
// Sizes: 4 KiB (L1), 256 KiB (L2), 8 MiB (last-level cache or memory, depending on the CPU).
//
// Names: reduce/<dtype>/<op>/<bytes> use the kernels getReduceFn picks on this CPU;
// portable/<dtype>/sum/<bytes> force the baseline-ISA kernels for comparison (only when the
// dispatch picked AVX2); memcpy/<bytes>. avg is not listed: it runs the sum kernel.
// Usual Google Benchmark flags apply, e.g. --benchmark_filter=float/sum
// --benchmark_format=json --benchmark_out=reduce.json.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/micro/micro_common.h"
#include "core/reduce.h"

namespace braid {
namespace detail {
// Defined in core/reduce.cc (test and benchmark hook).
enum class ReduceIsa : int { kPortable = 0, kAvx2 = 1 };
bool reduceIsaSupported(ReduceIsa isa);
ReduceFn getReduceFnForIsa(ReduceIsa isa, DataType type, ReduceOp op);
}  // namespace detail

namespace {

using bench::AlignedBuffer;
using bench::benchMemcpy;
using bench::sizeName;

constexpr size_t kSizes[] = {size_t{4} << 10, size_t{256} << 10, size_t{8} << 20};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin};

// Ordinary finite values near 1, so no kernel meets subnormals (slow on some CPUs) and products
// stay finite for a while; integers get a varied byte pattern.
void fill(DataType type, unsigned char* p, size_t count, int salt) {
  for (size_t i = 0; i < count; ++i) {
    const float v = 1.0f + static_cast<float>((i * 7 + static_cast<size_t>(salt)) % 13) / 64.0f;
    switch (type) {
      case DataType::kFloat16:
        reinterpret_cast<uint16_t*>(p)[i] = floatToHalf(v);
        break;
      case DataType::kBFloat16:
        reinterpret_cast<uint16_t*>(p)[i] = floatToBfloat16(v);
        break;
      case DataType::kFloat32:
        reinterpret_cast<float*>(p)[i] = v;
        break;
      case DataType::kFloat64:
        reinterpret_cast<double*>(p)[i] = v;
        break;
      default: {
        const size_t es = dataTypeSize(type);
        for (size_t b = 0; b < es; ++b) {
          p[i * es + b] =
              static_cast<unsigned char>((i * 31 + b * 7 + static_cast<size_t>(salt)) & 0xFF);
        }
      }
    }
  }
}

void benchReduce(benchmark::State& state, ReduceFn fn, DataType type, size_t bytes) {
  const size_t count = bytes / dataTypeSize(type);
  AlignedBuffer a(bytes), b(bytes), d(bytes);
  fill(type, a.data, count, 1);
  fill(type, b.data, count, 2);
  std::memset(d.data, 0, bytes);
  for (auto _ : state) {
    fn(d.data, a.data, b.data, count);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void registerAll() {
  const bool avx2 = detail::reduceIsaSupported(detail::ReduceIsa::kAvx2);
  for (size_t bytes : kSizes) {
    benchmark::RegisterBenchmark(("memcpy/" + sizeName(bytes)).c_str(), benchMemcpy, bytes);
    for (int t = 0; t < kNumDataTypes; ++t) {
      const DataType type = static_cast<DataType>(t);
      for (ReduceOp op : kOps) {
        const std::string name = std::string("reduce/") + dataTypeName(type) + "/" +
                                 reduceOpName(op) + "/" + sizeName(bytes);
        benchmark::RegisterBenchmark(name.c_str(), benchReduce, getReduceFn(type, op), type, bytes);
      }
      if (avx2) {
        const std::string name =
            std::string("portable/") + dataTypeName(type) + "/sum/" + sizeName(bytes);
        ReduceFn fn = detail::getReduceFnForIsa(detail::ReduceIsa::kPortable, type, ReduceOp::kSum);
        benchmark::RegisterBenchmark(name.c_str(), benchReduce, fn, type, bytes);
      }
    }
  }
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  using braid::detail::ReduceIsa;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  braid::bench::addBuildContext();
  benchmark::AddCustomContext("reduce_isa", braid::detail::reduceIsaSupported(ReduceIsa::kAvx2)
                                                ? "avx2+f16c+fma"
                                                : "portable");
  benchmark::AddCustomContext("layout", "dst = op(a, b), 3 distinct 64B-aligned buffers");
  benchmark::AddCustomContext("bytes_per_second", "message bytes (one buffer) per second");
  braid::registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
