// codec_bench: encode and decode throughput of every compression codec on one core, beside
// memcpy of the same f32 bytes (issue #6: casts should reach at least 0.5x memcpy).
//
// bytes_per_second counts the bucket's f32 bytes (4 per element) for every entry, so the numbers
// compare directly: "how fast does a bucket of this size go through the codec" against "how fast
// can one core copy it". Each codec runs through its public encode/decode (scale 1, one payload,
// error feedback as configured, bucket state warm after the first iteration); kernel/* entries
// run the bare cast kernels (no Codec call overhead). Sizes: 256 KiB (L2) and 8 MiB, 64 MiB
// (last-level cache or memory, depending on the CPU). Data: N(0, 1).
//
// Names: memcpy/<bytes>, encode/<spec>/<bytes>, decode/<spec>/<bytes>, kernel/<name>/<bytes>.
// Usual Google Benchmark flags apply, e.g. --benchmark_filter=fp16
// --benchmark_format=json --benchmark_out=codec.json. Run pinned (taskset -c 0) for one core.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/micro/micro_common.h"
#include "compression/codec.h"
#include "compression/kernels.h"

namespace braid {
namespace {

using bench::AlignedBuffer;
using bench::benchMemcpy;
using bench::sizeName;

constexpr size_t kSizes[] = {size_t{256} << 10, size_t{8} << 20, size_t{64} << 20};
const char* const kSpecs[] = {"fp16",      "bf16",         "fp16:dynamic=0", "int8",
                              "sign",      "topk:ratio=0.01", "powersgd:rank=4,start=0",
                              "none"};

void fillNormal(float* x, size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) x[i] = d(rng);
}

std::unique_ptr<Codec> makeCodec(const std::string& spec) {
  std::string name;
  CodecOptions o;
  if (!parseCodecSpec(spec, &name, &o).isOk()) std::abort();
  auto c = createCodec(name, o);
  if (!c.isOk()) std::abort();
  return std::move(c).value();
}

void benchEncode(benchmark::State& state, std::string spec, size_t bytes) {
  const size_t n = bytes / 4;
  auto codec = makeCodec(spec);
  AlignedBuffer x(bytes), wire(codec->maxEncodedBytes(n));
  fillNormal(reinterpret_cast<float*>(x.data), n);
  size_t out = 0;
  for (auto _ : state) {
    auto r = codec->encode(0, reinterpret_cast<float*>(x.data), n, {}, 1.0f, wire.data,
                           codec->maxEncodedBytes(n));
    if (!r.isOk()) state.SkipWithError(r.status().toString().c_str());
    out = r.isOk() ? *r : 0;
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.counters["ratio"] = out ? static_cast<double>(bytes) / static_cast<double>(out) : 0;
}

void benchDecode(benchmark::State& state, std::string spec, size_t bytes) {
  const size_t n = bytes / 4;
  auto codec = makeCodec(spec);
  AlignedBuffer x(bytes), wire(codec->maxEncodedBytes(n)), y(bytes);
  fillNormal(reinterpret_cast<float*>(x.data), n);
  auto r = codec->encode(0, reinterpret_cast<float*>(x.data), n, {}, 1.0f, wire.data,
                         codec->maxEncodedBytes(n));
  if (!r.isOk()) {
    state.SkipWithError(r.status().toString().c_str());
    return;
  }
  for (auto _ : state) {
    Status s = codec->decode(wire.data, *r, 1, reinterpret_cast<float*>(y.data), n);
    if (!s.isOk()) state.SkipWithError(s.toString().c_str());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

// The bare kernels: f32 → 16-bit and back.
void benchKernel(benchmark::State& state, int which, size_t bytes) {
  const size_t n = bytes / 4;
  const auto& k = detail::codecKernels();
  AlignedBuffer x(bytes), h(bytes / 2);
  fillNormal(reinterpret_cast<float*>(x.data), n);
  float* xf = reinterpret_cast<float*>(x.data);
  uint16_t* hw = reinterpret_cast<uint16_t*>(h.data);
  k.toHalf(hw, xf, n, 1.0f, 65504.0f);
  for (auto _ : state) {
    switch (which) {
      case 0: k.toHalf(hw, xf, n, 0.25f, 65504.0f); break;
      case 1: k.fromHalf(xf, hw, n, 1.0f); break;
      case 2: k.toBf16(hw, xf, n, 0.25f); break;
      case 3: k.fromBf16(xf, hw, n, 1.0f); break;
      default: benchmark::DoNotOptimize(k.maxAbs(xf, n)); break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void registerAll() {
  // max_abs is fp16's dynamic-scale pass (allReduce runs it before to_half).
  const char* const kKernels[] = {"to_half", "from_half", "to_bf16", "from_bf16", "max_abs"};
  for (size_t bytes : kSizes) {
    benchmark::RegisterBenchmark(("memcpy/" + sizeName(bytes)).c_str(), benchMemcpy, bytes);
    for (int k = 0; k < 5; ++k) {
      benchmark::RegisterBenchmark(
          ("kernel/" + std::string(kKernels[k]) + "/" + sizeName(bytes)).c_str(), benchKernel, k,
          bytes);
    }
    for (const char* spec : kSpecs) {
      benchmark::RegisterBenchmark(("encode/" + std::string(spec) + "/" + sizeName(bytes)).c_str(),
                                   benchEncode, std::string(spec), bytes);
      benchmark::RegisterBenchmark(("decode/" + std::string(spec) + "/" + sizeName(bytes)).c_str(),
                                   benchDecode, std::string(spec), bytes);
    }
  }
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  braid::bench::addBuildContext();
  benchmark::AddCustomContext("codec_isa", braid::detail::codecKernels().isa);
  benchmark::AddCustomContext("bytes_per_second", "the bucket's f32 bytes per second, one core");
  benchmark::AddCustomContext("codec_calls", "encode/decode through the Codec, scale 1, one payload");
  braid::registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
