// Copies into memory that another process reads next (shared segments, shm rings).
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid {

/// Copies with non-temporal stores above a small size: the data goes to memory instead of staying
/// dirty in this core's cache. On the AMD EPYC VMs braid was first measured on, a peer core
/// reading lines that are dirty in another core's cache runs at ~2 GB/s, while reading them from
/// L3/memory runs at ~9 GB/s, so this is 3–4× faster for everything a peer consumes. (That ~2
/// GB/s was very likely glibc's `rep movsb` between buffers at different offsets in a cache
/// line, which copyBytes below avoids: on a later EPYC VM a peer's freshly written lines copied
/// at 29–41 GB/s with an aligned memcpy or a vector loop, and the calibration, copying with
/// copyBytes, chose plain stores.) Copies below
/// 16 KiB use memcpy, where the cache-to-cache hand-off is cheaper than a trip to memory. On
/// machines where the peers read dirty lines fast (an Intel Xeon VM with 2 MiB of L2 per core:
/// plain stores 1.1–2× faster at 64 KiB–16 MiB), setStreamToShared(false) makes every copy plain;
/// the calibration probe measures both and chooses (FabricModel::streamShared), and the job's
/// own large same-host calls revise the choice as they run (collectives/shared_stores.h: on the
/// EPYC VM it flips with where the hypervisor puts the vCPUs).
void copyToShared(void* dst, const void* src, size_t bytes);
/// Whether copyToShared and copyToSharedAndLocal stream (non-temporal stores) from
/// kCopyStreamMinBytes up; process-wide, true until set. A property of the machine: every
/// communicator of a process sets the same value.
void setStreamToShared(bool stream);
bool streamToShared();
/// copyToShared with the kind of stores given, whatever setStreamToShared says (the calibration
/// probe times both).
void copyToSharedAs(bool stream, void* dst, const void* src, size_t bytes);
/// memcpy, except where glibc's (2.36) would be slow: from kCopyLoopMinBytes up, when dst and src
/// lie at different offsets within a cache line (a malloc'd buffer, 16 bytes into its page,
/// against a page-aligned segment), glibc copies 2 KiB-512 KiB with `rep movsb`, which on the
/// 2-core EPYC VM ran at 1.9 GB/s where a 16-byte vector loop ran at 29-33 GB/s (a peer's
/// freshly written lines, 64-384 KiB; aligned, both ran at 35-41 GB/s). Such pairs take the
/// loop. Every copy between a caller's buffer and shared memory should use this.
void copyBytes(void* dst, const void* src, size_t bytes);
/// Whether [a, a + aBytes) and [b, b + bBytes) share a byte (empty ranges share none).
inline bool rangesOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}
inline constexpr size_t kCopyLoopMinBytes = 2048;
/// Below this size copyToShared is a plain memcpy.
inline constexpr size_t kCopyStreamMinBytes = 16384;
/// copyToShared(shared, src, bytes) and memcpy(local, src, bytes) in one pass over src (each
/// source line read once), as a broadcast's root and an all-gather's rank do out of place: on
/// the 2-core VM (2 ranks, 1–4 MiB) 15–25% faster than the two copies one after the other.
/// With plain stores too (from kCopyLoopMinBytes up, copyBytes' loop storing twice): on the
/// 2-core EPYC VM, 2 ranks, all-gather 7–15% and broadcast 0–40% faster at 256 KiB–64 MiB than
/// two copyBytes. local may equal src (then only the shared copy is made).
void copyToSharedAndLocal(void* shared, void* local, const void* src, size_t bytes);

}  // namespace braid
