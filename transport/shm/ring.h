// The layout of one shm connection's segment: a header of cache lines followed by a
// single-producer single-consumer byte ring.
//
//   line 0  identity, written once by the creator (receiver) before the handle leaves the process
//   line 1  control flags: connect, close, failure; written a handful of times per connection
//   line 2  head: total bytes the sender has published (written by the sender only)
//   line 3  tail: total bytes the receiver has consumed (written by the receiver only)
//   page 1  ring data, ringBytes long
//
// head and tail are monotonic 64-bit byte counters (they never wrap in practice); position in the
// ring is counter % ringBytes, free space is ringBytes - (head - tail). Each side publishes its
// counter with a release store after copying and reads the other's with an acquire load, and
// caches the other's last value so that it touches the peer's line only when it runs out of room
// (sender) or data (receiver). Each counter sits alone on its line so the two sides never
// false-share.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/copy.h"

#include "transport/transport.h"

namespace braid::transport::shm {

inline constexpr size_t kShmCacheLine = 64;
inline constexpr uint64_t kShmSegmentMagic = 0x4745534449415242ull;  // "BRAIDSEG" little-endian
inline constexpr uint32_t kShmLayoutVersion = 1;
/// The ring data starts one page into the segment.
inline constexpr size_t kShmHeaderBytes = 4096;

struct alignas(kShmCacheLine) ShmSegmentHeader {
  // Line 0: identity (immutable once published).
  uint64_t magic;
  uint32_t version;
  int32_t creatorPid;
  uint64_t secret;
  uint64_t ringBytes;
  int32_t creatorRank;

  // Line 1: control.
  alignas(kShmCacheLine) std::atomic<uint32_t> claimed;  // a sender took this segment
  std::atomic<uint32_t> connected;                       // senderPid/senderRank are valid
  std::atomic<int32_t> senderPid;
  std::atomic<int32_t> senderRank;
  std::atomic<uint32_t> sendClosed;  // the SendComm was destroyed (after its last publish)
  std::atomic<uint32_t> recvClosed;  // the RecvComm (or an unaccepted ListenComm) was destroyed
  std::atomic<uint32_t> failed;      // the receiver broke the connection: a ShmFailure value
  std::atomic<uint64_t> failMessageBytes;
  std::atomic<uint64_t> failRecvBytes;

  // Lines 2 and 3: the ring counters.
  alignas(kShmCacheLine) std::atomic<uint64_t> head;
  alignas(kShmCacheLine) std::atomic<uint64_t> tail;
};
static_assert(sizeof(ShmSegmentHeader) <= kShmHeaderBytes, "segment header must fit its page");
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "cross-process atomics must be lock-free");
static_assert(offsetof(ShmSegmentHeader, tail) - offsetof(ShmSegmentHeader, head) >= kShmCacheLine,
              "head and tail must live on separate cache lines");

/// Why the receiver set `failed`.
enum ShmFailure : uint32_t {
  kShmFailNone = 0,
  kShmFailTooLarge = 1,  ///< a message larger than its posted receive (sizes in the header)
  kShmFailCorrupt = 2,   ///< a frame header without its magic: layout or memory corruption
};

/// What precedes every message in the ring.
struct ShmFrameHeader {
  uint32_t magic;
  uint32_t reserved;
  uint64_t size;
  Meta meta;
};
inline constexpr uint32_t kShmFrameMagic = 0x4d415246;  // "FRAM"
inline constexpr uint64_t kShmFrameBytes = sizeof(ShmFrameHeader);
static_assert(kShmFrameBytes == 48, "frame header layout is part of the wire format");

/// Copies n bytes into the ring at stream position pos (wrapping at the end). Streaming stores
/// (core/copy.h): the receiver on another core reads this next.
inline void ringCopyIn(uint8_t* ring, uint64_t ringBytes, uint64_t pos, const void* src, size_t n) {
  const size_t off = static_cast<size_t>(pos % ringBytes);
  const size_t first = std::min<size_t>(n, ringBytes - off);
  copyToShared(ring + off, src, first);
  if (n > first) copyToShared(ring, static_cast<const uint8_t*>(src) + first, n - first);
}

/// Copies n bytes out of the ring at stream position pos (wrapping at the end).
inline void ringCopyOut(const uint8_t* ring, uint64_t ringBytes, uint64_t pos, void* dst,
                        size_t n) {
  const size_t off = static_cast<size_t>(pos % ringBytes);
  const size_t first = std::min<size_t>(n, ringBytes - off);
  std::memcpy(dst, ring + off, first);
  if (n > first) std::memcpy(static_cast<uint8_t*>(dst) + first, ring, n - first);
}

}  // namespace braid::transport::shm
