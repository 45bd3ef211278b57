// What the micro-benchmarks share: aligned buffers, the memcpy baseline every kernel is read
// against, size names, and the machine/build context printed with every run. Each program
// defines BRAID_BUILD_TYPE, BRAID_COMPILER and BRAID_SANITIZE_FLAGS (bench/micro/CMakeLists.txt).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace braid::bench {

/// 64-byte aligned, with 64 bytes of slack past the end (for kernels that read whole vectors).
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes)
      : data(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64))) {}
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  unsigned char* data;
};

/// memcpy of `bytes` between two distinct aligned buffers.
inline void benchMemcpy(benchmark::State& state, size_t bytes) {
  AlignedBuffer a(bytes), d(bytes);
  std::memset(a.data, 1, bytes);
  std::memset(d.data, 0, bytes);
  for (auto _ : state) {
    std::memcpy(d.data, a.data, bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

inline std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

/// "4KiB", "8MiB".
inline std::string sizeName(size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + "MiB"
                             : std::to_string(bytes >> 10) + "KiB";
}

/// cpu_model, build_type, compiler and sanitize in the benchmark's context block.
inline void addBuildContext() {
  benchmark::AddCustomContext("cpu_model", cpuModel());
  benchmark::AddCustomContext("build_type", BRAID_BUILD_TYPE);
  benchmark::AddCustomContext("compiler", BRAID_COMPILER);
  benchmark::AddCustomContext("sanitize", BRAID_SANITIZE_FLAGS[0] ? BRAID_SANITIZE_FLAGS : "none");
}

}  // namespace braid::bench
