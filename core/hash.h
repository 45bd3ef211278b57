// FNV-1a: a small, stable hash (the same value in every process and build) for checksums of
// connection handles, cache fingerprints and parameter identities. Not for untrusted input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid {

inline constexpr uint64_t kFnv64Offset = 1469598103934665603ull;

/// 64-bit FNV-1a of `size` bytes, continuing from `h` (pass a previous result to hash several
/// pieces as one).
inline uint64_t fnv1a64(const void* data, size_t size, uint64_t h = kFnv64Offset) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
inline uint64_t fnv1a64(const std::string& s) { return fnv1a64(s.data(), s.size()); }

/// 32-bit FNV-1a.
inline uint32_t fnv1a32(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

}  // namespace braid
