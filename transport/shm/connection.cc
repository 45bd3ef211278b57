#include "transport/shm/connection.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "core/clock.h"
#include "core/log.h"
#include "core/process.h"

namespace braid::transport::shm {
namespace {

/// Publish progress to the peer at least this often while streaming a large message.
constexpr uint64_t kMaxPublishBytes = 256 * 1024;
/// How often a stalled side asks whether its peer process still exists.
constexpr uint64_t kPeerCheckNs = 1000 * 1000;

/// Segments this process created and not yet unlinked, by name. A connect() from the same
/// process (ranks as threads) shares the creator's mapping instead of mapping the pages a second
/// time: one mapping less, and ThreadSanitizer then sees both sides' accesses at one address and
/// checks the ring's acquire/release protocol.
std::mutex& localSegmentsMutex() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<std::string, std::weak_ptr<Mapping>>& localSegments() {
  static auto* map = new std::unordered_map<std::string, std::weak_ptr<Mapping>>();  // leaked
  return *map;
}

}  // namespace

std::string rankText(int rank) { return rank < 0 ? std::string("?") : std::to_string(rank); }

std::string peerText(int pid, int rank) {
  return "peer process " + std::to_string(pid) + " (rank " + rankText(rank) + ")";
}

// ---------------------------------------------------------------------------------------------
// Segments

Mapping::~Mapping() { munmap(base_, bytes_); }

void Segment::unlink() {
  if (owner_ && !unlinked_) {
    shm_unlink(name_.c_str());
    std::lock_guard<std::mutex> lock(localSegmentsMutex());
    localSegments().erase(name_);
    unlinked_ = true;
  }
}

Result<std::unique_ptr<Segment>> createSegment(const std::string& name, uint64_t ringBytes,
                                               uint64_t secret, int rank) {
  const size_t bytes = kShmHeaderBytes + ringBytes;
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errnoError("shm: shm_open(" + name + ", O_CREAT)", errno);
  auto fail = [&](const std::string& what, int err) {
    close(fd);
    shm_unlink(name.c_str());
    return errnoError("shm: " + what + " of " + name + " (" + std::to_string(bytes) +
                          " bytes; is /dev/shm large enough? BRAID_SHM_RING_BYTES sets the ring)",
                      err);
  };
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) return fail("ftruncate", errno);
  // Reserve the pages now: a full /dev/shm then fails here instead of SIGBUS-ing a later memcpy.
  int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL) return fail("posix_fallocate", err);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail("mmap", errno);
  close(fd);
  auto mapping = std::make_shared<Mapping>(base, bytes);
  auto* h = new (base) ShmSegmentHeader();
  h->magic = kShmSegmentMagic;
  h->version = kShmLayoutVersion;
  h->creatorPid = static_cast<int32_t>(getpid());
  h->secret = secret;
  h->ringBytes = ringBytes;
  h->creatorRank = rank;
  h->claimed.store(0, std::memory_order_relaxed);
  h->connected.store(0, std::memory_order_relaxed);
  h->senderPid.store(0, std::memory_order_relaxed);
  h->senderRank.store(-1, std::memory_order_relaxed);
  h->sendClosed.store(0, std::memory_order_relaxed);
  h->recvClosed.store(0, std::memory_order_relaxed);
  h->failed.store(0, std::memory_order_relaxed);
  h->failMessageBytes.store(0, std::memory_order_relaxed);
  h->failRecvBytes.store(0, std::memory_order_relaxed);
  h->head.store(0, std::memory_order_relaxed);
  h->tail.store(0, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(localSegmentsMutex());
    localSegments()[name] = mapping;
  }
  return std::make_unique<Segment>(std::move(mapping), name, /*owner=*/true);
}

Result<std::shared_ptr<Mapping>> openSegment(const std::string& name, int creatorPid,
                                             const std::string& who) {
  if (creatorPid == getpid()) {  // not in a fork()ed child, which inherits the registry
    std::lock_guard<std::mutex> lock(localSegmentsMutex());
    auto it = localSegments().find(name);
    if (it != localSegments().end()) {
      if (std::shared_ptr<Mapping> m = it->second.lock()) return m;
    }
  }
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      return invalidArgument("shm: no segment " + name + " of " + who +
                             ": it was closed or already connected, or the handle comes from "
                             "another host (use tcp across hosts)");
    }
    return errnoError("shm: shm_open(" + name + ")", err);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return errnoError("shm: fstat(" + name + ")", err);
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < kShmHeaderBytes + kMinRingBytes) {
    close(fd);
    return invalidArgument("shm: segment " + name + " is too small (" + std::to_string(bytes) +
                           " bytes)");
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int mapErr = errno;
  close(fd);
  if (base == MAP_FAILED) return errnoError("shm: mmap(" + name + ")", mapErr);
  return std::make_shared<Mapping>(base, bytes);
}

// ---------------------------------------------------------------------------------------------
// ShmEndpoint

ShmEndpoint::ShmEndpoint(std::unique_ptr<Segment> segment, int rank)
    : segment_(std::move(segment)),
      header_(segment_->header()),
      ring_(segment_->ring()),
      ringBytes_(header_->ringBytes),
      publishBytes_(std::max<uint64_t>(std::min(kMaxPublishBytes, ringBytes_ / 4), 1)),
      rank_(rank),
      selfPid_(static_cast<int>(getpid())) {
  for (int i = 0; i < kMaxRequests; ++i) {
    pool_[i].owner = this;
    free_[i] = kMaxRequests - 1 - i;
  }
  freeCount_ = kMaxRequests;
}

void ShmEndpoint::failAll(Status s) {
  if (failure_.isOk()) {
    BRAID_INFO("%s", s.toString().c_str());  // the caller decides whether it is an error
    failure_ = std::move(s);
  }
  while (fifoCount_ > 0) {
    front().state = ReqState::kError;
    fifoHead_ = (fifoHead_ + 1) % kMaxRequests;
    --fifoCount_;
  }
}

bool ShmEndpoint::peerGoneCheck(int peerPid) {
  if (peerPid == selfPid_) return false;  // same process (threads): nothing to learn
  uint64_t now = nowNs();
  if (now - lastPeerCheckNs_ < kPeerCheckNs) return false;
  lastPeerCheckNs_ = now;
  return processGone(peerPid);
}

// ---------------------------------------------------------------------------------------------
// ShmSendComm

ShmSendComm::ShmSendComm(std::unique_ptr<Segment> segment, int rank)
    : ShmEndpoint(std::move(segment), rank),
      peerPid_(header_->creatorPid),
      peerRank_(header_->creatorRank) {
  head_ = header_->head.load(std::memory_order_relaxed);
  published_ = head_;
  cachedTail_ = header_->tail.load(std::memory_order_acquire);
}

ShmSendComm::~ShmSendComm() {
  // Everything written is published already (progress() publishes before returning), so the
  // receiver may drain it after seeing the flag.
  header_->sendClosed.store(1, std::memory_order_release);
}

Status ShmSendComm::post(const void* data, size_t size, const Meta& meta, Request** request) {
  *request = nullptr;
  if (!failure_.isOk()) return failure_;
  checkFlags();
  if (!failure_.isOk()) return failure_;
  ShmRequest* r = acquire();
  if (r == nullptr) return Status::ok();  // kMaxRequests in flight: call again later
  r->isSend = true;
  r->sendData = static_cast<const uint8_t*>(data);
  r->size = size;
  r->frame.magic = kShmFrameMagic;
  r->frame.reserved = 0;
  r->frame.size = size;
  r->frame.meta = meta;
  enqueue(r);
  progress();
  *request = reinterpret_cast<Request*>(r);
  return Status::ok();
}

void ShmSendComm::progress() {
  if (fifoCount_ == 0 || !failure_.isOk()) return;
  if (checkFlags()) return;
  bool movedAny = false;
  while (fifoCount_ > 0) {
    ShmRequest& r = front();
    const uint64_t total = kShmFrameBytes + r.size;
    while (r.moved < total) {
      uint64_t space = ringBytes_ - (head_ - cachedTail_);
      if (space == 0) {
        cachedTail_ = header_->tail.load(std::memory_order_acquire);
        space = ringBytes_ - (head_ - cachedTail_);
        if (space == 0) break;
      }
      const uint8_t* src;
      uint64_t n;
      if (r.moved < kShmFrameBytes) {
        src = reinterpret_cast<const uint8_t*>(&r.frame) + r.moved;
        n = kShmFrameBytes - r.moved;
      } else {
        src = r.sendData + (r.moved - kShmFrameBytes);
        n = std::min(total - r.moved, publishBytes_);
      }
      n = std::min(n, space);
      ringCopyIn(ring_, ringBytes_, head_, src, n);
      head_ += n;
      r.moved += n;
      movedAny = true;
      if (head_ - published_ >= publishBytes_) publish();
    }
    if (r.moved < total) break;  // ring full
    completeFront();
  }
  publish();
  if (!movedAny && fifoCount_ > 0 && peerGoneCheck(peerPid_)) {
    failAll(remoteError("shm: " + peerText(peerPid_, peerRank_) + " exited (rank " +
                        rankText(rank_) + " was sending to it)"));
  }
}

bool ShmSendComm::checkFlags() {
  const uint32_t failed = header_->failed.load(std::memory_order_acquire);
  if (failed == kShmFailTooLarge) {
    failAll(invalidUsage("shm: message of " +
                         std::to_string(header_->failMessageBytes.load(std::memory_order_relaxed)) +
                         " bytes exceeds the posted receive of " +
                         std::to_string(header_->failRecvBytes.load(std::memory_order_relaxed)) +
                         " bytes on the receiver, " + peerText(peerPid_, peerRank_) +
                         "; the connection is closed"));
    return true;
  }
  if (failed != kShmFailNone) {
    failAll(internalError("shm: " + peerText(peerPid_, peerRank_) +
                          " found a corrupt frame in the ring and closed the connection"));
    return true;
  }
  if (header_->recvClosed.load(std::memory_order_acquire) != 0) {
    failAll(remoteError("shm: " + peerText(peerPid_, peerRank_) + " closed the connection (rank " +
                        rankText(rank_) + " was sending to it)"));
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// ShmRecvComm

ShmRecvComm::ShmRecvComm(std::unique_ptr<Segment> segment, int rank)
    : ShmEndpoint(std::move(segment), rank),
      peerPid_(header_->senderPid.load(std::memory_order_acquire)),
      peerRank_(header_->senderRank.load(std::memory_order_acquire)) {
  tail_ = header_->tail.load(std::memory_order_relaxed);
  published_ = tail_;
  cachedHead_ = header_->head.load(std::memory_order_acquire);
}

ShmRecvComm::~ShmRecvComm() { header_->recvClosed.store(1, std::memory_order_release); }

Status ShmRecvComm::post(void* data, size_t size, Meta* meta, Request** request) {
  *request = nullptr;
  if (!failure_.isOk()) return failure_;
  ShmRequest* r = acquire();
  if (r == nullptr) return Status::ok();
  r->isSend = false;
  r->recvData = static_cast<uint8_t*>(data);
  r->capacity = size;
  r->metaOut = meta;
  enqueue(r);
  progress();
  *request = reinterpret_cast<Request*>(r);
  return Status::ok();
}

void ShmRecvComm::progress() {
  if (fifoCount_ == 0 || !failure_.isOk()) return;
  bool movedAny = drain();
  if (movedAny || fifoCount_ == 0 || !failure_.isOk()) return;
  // Stalled. A closed or dead sender is reported only once everything it published is read.
  bool closed = header_->sendClosed.load(std::memory_order_acquire) != 0;
  bool gone = !closed && peerGoneCheck(peerPid_);
  if (!closed && !gone) return;
  if (drain() || fifoCount_ == 0 || !failure_.isOk()) return;
  if (header_->head.load(std::memory_order_acquire) != tail_) return;  // more came meanwhile
  failAll(remoteError("shm: " + peerText(peerPid_, peerRank_) +
                      (closed ? " closed the connection" : " exited") + " (rank " +
                      rankText(rank_) + " was receiving from it)"));
}

bool ShmRecvComm::drain() {
  bool movedAny = false;
  while (fifoCount_ > 0) {
    ShmRequest& r = front();
    bool haveHeader = r.moved >= kShmFrameBytes;
    while (!haveHeader || r.moved < kShmFrameBytes + r.size) {
      uint64_t avail = cachedHead_ - tail_;
      if (avail == 0) {
        cachedHead_ = header_->head.load(std::memory_order_acquire);
        avail = cachedHead_ - tail_;
        if (avail == 0) break;
      }
      if (!haveHeader) {
        uint64_t n = std::min(avail, kShmFrameBytes - r.moved);
        ringCopyOut(ring_, ringBytes_, tail_, reinterpret_cast<uint8_t*>(&r.frame) + r.moved, n);
        tail_ += n;
        r.moved += n;
        movedAny = true;
        if (r.moved < kShmFrameBytes) continue;
        haveHeader = true;
        if (!acceptFrame(r)) return true;
        continue;
      }
      uint64_t n = std::min({avail, kShmFrameBytes + r.size - r.moved, publishBytes_});
      ringCopyOut(ring_, ringBytes_, tail_, r.recvData + (r.moved - kShmFrameBytes), n);
      tail_ += n;
      r.moved += n;
      movedAny = true;
      if (tail_ - published_ >= publishBytes_) publish();
    }
    if (!haveHeader || r.moved < kShmFrameBytes + r.size) break;  // ring empty
    if (r.metaOut) *r.metaOut = r.frame.meta;
    completeFront();
  }
  publish();
  return movedAny;
}

bool ShmRecvComm::acceptFrame(ShmRequest& r) {
  if (r.frame.magic != kShmFrameMagic) {
    failAll(internalError("shm: corrupt frame header in the ring from " +
                          peerText(peerPid_, peerRank_) + " (rank " + rankText(rank_) + ")"));
    header_->failed.store(kShmFailCorrupt, std::memory_order_release);
    return false;
  }
  if (r.frame.size > r.capacity) {
    header_->failMessageBytes.store(r.frame.size, std::memory_order_relaxed);
    header_->failRecvBytes.store(r.capacity, std::memory_order_relaxed);
    header_->failed.store(kShmFailTooLarge, std::memory_order_release);
    failAll(invalidUsage("shm: message of " + std::to_string(r.frame.size) +
                         " bytes exceeds the posted receive of " + std::to_string(r.capacity) +
                         " bytes (rank " + rankText(rank_) + " receiving from " +
                         peerText(peerPid_, peerRank_) + "); the connection is closed"));
    return false;
  }
  r.size = r.frame.size;
  return true;
}

}  // namespace braid::transport::shm
