#include "core/copy.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace braid {

namespace {
std::atomic<bool> gStream{true};

// Measured on the 2-core EPYC VM with 2 ranks (shm all-reduce, SCHED_FIFO to cut noise): below
// 16 KiB a plain copy wins (the peer pulls a few dirty lines from this core's cache faster than
// from memory: 8 KiB 1.3 us vs 2.1 us); from 16 KiB up streaming wins, by 3-4x at 64 KiB-2 MiB.
// (Those plain copies were glibc's memcpy, very likely slowed by the misalignment copyBytes
// avoids; see copy.h.)

#if defined(__x86_64__)
template <bool kStream>
inline void store(__m128i* d, __m128i v) {
  if (kStream) {
    _mm_stream_si128(d, v);
  } else {
    _mm_store_si128(d, v);
  }
}

// Copies bytes (at least kCopyStreamMinBytes, or kCopyLoopMinBytes plainly) from src to shared,
// streamed (non-temporal stores) with kStream; with kLocal, also stores each 16-byte block
// plainly to local from the same load.
template <bool kStream, bool kLocal>
void loopCopy(void* shared, void* local, const void* src, size_t bytes) {
  const size_t head = (16 - reinterpret_cast<uintptr_t>(shared) % 16) % 16;
  std::memcpy(shared, src, head);
  if (kLocal) std::memcpy(local, src, head);
  auto* d = reinterpret_cast<__m128i*>(static_cast<uint8_t*>(shared) + head);
  auto* l = reinterpret_cast<__m128i*>(static_cast<uint8_t*>(local) + head);
  const auto* s = reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(src) + head);
  const size_t n = (bytes - head) / 16;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128i a = _mm_loadu_si128(s + i), b = _mm_loadu_si128(s + i + 1);
    __m128i c = _mm_loadu_si128(s + i + 2), e = _mm_loadu_si128(s + i + 3);
    store<kStream>(d + i, a);
    store<kStream>(d + i + 1, b);
    store<kStream>(d + i + 2, c);
    store<kStream>(d + i + 3, e);
    if (kLocal) {
      _mm_storeu_si128(l + i, a);
      _mm_storeu_si128(l + i + 1, b);
      _mm_storeu_si128(l + i + 2, c);
      _mm_storeu_si128(l + i + 3, e);
    }
  }
  for (; i < n; ++i) {
    const __m128i a = _mm_loadu_si128(s + i);
    store<kStream>(d + i, a);
    if (kLocal) _mm_storeu_si128(l + i, a);
  }
  // Non-temporal stores are weakly ordered: fence before the caller publishes a flag.
  if (kStream) _mm_sfence();
  const size_t done = head + n * 16;
  std::memcpy(static_cast<uint8_t*>(shared) + done, static_cast<const uint8_t*>(src) + done,
              bytes - done);
  if (kLocal) {
    std::memcpy(static_cast<uint8_t*>(local) + done, static_cast<const uint8_t*>(src) + done,
                bytes - done);
  }
}
#endif

}  // namespace

void setStreamToShared(bool stream) { gStream.store(stream, std::memory_order_relaxed); }
bool streamToShared() { return gStream.load(std::memory_order_relaxed); }

void copyToSharedAs(bool stream, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;  // src may be null then (memcpy's arguments must not be)
#if defined(__x86_64__)
  if (stream && bytes >= kCopyStreamMinBytes) {
    return loopCopy<true, false>(dst, nullptr, src, bytes);
  }
#else
  (void)stream;
#endif
  copyBytes(dst, src, bytes);
}

void copyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;  // src may be null then
#if defined(__x86_64__)
  if (bytes >= kCopyLoopMinBytes &&
      (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) % 64 != 0) {
    return loopCopy<false, false>(dst, nullptr, src, bytes);
  }
#endif
  std::memcpy(dst, src, bytes);
}

void copyToShared(void* dst, const void* src, size_t bytes) {
  copyToSharedAs(streamToShared(), dst, src, bytes);
}

void copyToSharedAndLocal(void* shared, void* local, const void* src, size_t bytes) {
  if (bytes == 0) return;  // the pointers may be null then
  if (local == src) return copyToShared(shared, src, bytes);
#if defined(__x86_64__)
  if (bytes >= kCopyStreamMinBytes && streamToShared()) {
    return loopCopy<true, true>(shared, local, src, bytes);
  }
  if (bytes >= kCopyLoopMinBytes) return loopCopy<false, true>(shared, local, src, bytes);
#endif
  copyBytes(shared, src, bytes);
  copyBytes(local, src, bytes);
}

}  // namespace braid
