// Fuzzing of connect-handle parsing through the loaded net plugin. The inputs are what an
// attacker or a corrupted bootstrap could hand to connect(): random blobs, and mutations (bit
// flips, byte overwrites, truncation, splices of two real handles) of valid handles. Oracle: no
// crash, no hang, and every handle that differs from a real one within the bytes the transport
// checks is refused with an error and a null comm. Handles that connect (mutations only in
// unchecked padding) are cleaned up by finalizing the context.
//
// Built as a randomized GoogleTest (fixed seeds; gcc has no libFuzzer). With clang the same
// entry point is a libFuzzer target:
//   clang++ -std=c++17 -fsanitize=fuzzer,address -DBRAID_LIBFUZZER -I. -o handle_fuzz
//     -DBRAID_NET_PLUGIN_PATH="\"$PWD/build/plugin/libnccl-net-braid.so\""
//     tests/plugin/net_handle_fuzz_test.cc -ldl   (one command line)
//   ./handle_fuzz -max_total_time=60
// (the plugin itself is not coverage-instrumented there, so mutations are blind inside it).
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <random>

#include "plugin/nccl_abi.h"

namespace {

using braid::abi::NetV11;

struct Fixture {
  void* lib = nullptr;
  const NetV11* n = nullptr;
  void* ctx = nullptr;
  void* lc = nullptr;
  char good[braid::abi::kNetHandleMaxSize] = {};
  char other[braid::abi::kNetHandleMaxSize] = {};
  void* lc2 = nullptr;

  bool open() {
    setenv("BRAID_NET_IFNAME", "lo", 1);
    setenv("BRAID_DEBUG_FILE", "/dev/null", 1);  // the transport warns about each refusal
    lib = dlopen(BRAID_NET_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    n = static_cast<const NetV11*>(dlsym(lib, "ncclNetPlugin_v11"));
    if (n == nullptr || n->init(&ctx, 77, nullptr, nullptr, nullptr) != 0) return false;
    return n->listen(ctx, 0, good, &lc) == 0 && n->listen(ctx, 0, other, &lc2) == 0;
  }
  /// Drops every connection attempt that got through (pending connects live in the ctx).
  void recycle() {
    n->finalize(ctx);
    ctx = nullptr;
    n->init(&ctx, 77, nullptr, nullptr, nullptr);
  }
  ~Fixture() {
    if (n != nullptr) {
      n->closeListen(lc);
      n->closeListen(lc2);
      n->finalize(ctx);
    }
    if (lib != nullptr) dlclose(lib);
  }
};

Fixture& fixture() {
  static Fixture* f = [] {
    auto* p = new Fixture;
    if (!p->open()) abort();
    return p;
  }();
  return *f;
}

/// Returns false when the oracle fails.
bool tryHandle(const uint8_t* data, size_t size) {
  Fixture& f = fixture();
  char h[braid::abi::kNetHandleMaxSize] = {};
  std::memcpy(h, data, size < sizeof(h) ? size : sizeof(h));
  void* sc = reinterpret_cast<void*>(0x1);
  const int r = f.n->connect(f.ctx, 0, h, &sc, nullptr);
  const bool sameChecked = std::memcmp(h, f.good, 64) == 0 || std::memcmp(h, f.other, 64) == 0;
  if (r != 0) return sc == nullptr;  // refused: comm left null
  if (!sameChecked) return false;    // accepted a handle that differs in checked bytes
  if (sc != nullptr) f.n->closeSend(sc);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!tryHandle(data, size)) abort();
  return 0;
}

#ifndef BRAID_LIBFUZZER
#include <gtest/gtest.h>

TEST(NetHandleFuzzTest, RandomBlobsAreRefused) {
  std::mt19937_64 rng(12345);
  uint8_t h[braid::abi::kNetHandleMaxSize];
  for (int i = 0; i < 20000; ++i) {
    for (uint8_t& b : h) b = static_cast<uint8_t>(rng());
    ASSERT_TRUE(tryHandle(h, sizeof(h))) << "iteration " << i;
  }
}

TEST(NetHandleFuzzTest, MutatedHandlesAreRefusedOrHarmless) {
  Fixture& f = fixture();
  std::mt19937_64 rng(777);
  uint8_t h[braid::abi::kNetHandleMaxSize];
  for (int i = 0; i < 20000; ++i) {
    std::memcpy(h, rng() % 2 ? f.good : f.other, sizeof(h));
    switch (rng() % 4) {
      case 0:  // bit flips
        for (int k = 0, m = 1 + static_cast<int>(rng() % 3); k < m; ++k) {
          h[rng() % sizeof(h)] ^= static_cast<uint8_t>(1u << (rng() % 8));
        }
        break;
      case 1:  // byte overwrites
        h[rng() % sizeof(h)] = static_cast<uint8_t>(rng());
        break;
      case 2: {  // truncation: zero the tail
        const size_t keep = rng() % sizeof(h);
        std::memset(h + keep, 0, sizeof(h) - keep);
        break;
      }
      default: {  // splice the other handle in
        const size_t at = rng() % sizeof(h);
        std::memcpy(h + at, (h[0] == f.good[0] ? f.other : f.good) + at, sizeof(h) - at);
        break;
      }
    }
    ASSERT_TRUE(tryHandle(h, sizeof(h))) << "iteration " << i;
    if (i % 500 == 499) f.recycle();
  }
}
#endif
