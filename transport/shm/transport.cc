// shm: the same-host backend. One POSIX shared-memory segment per connection, created by the
// receiver's listen(), holding a single-producer single-consumer byte ring (ring.h).
//
//   listen()   shm_open(O_EXCL) a random name, reserve and map it, write the identity line; the
//              handle carries magic, kind, job secret, name and creator pid/rank.
//   connect()  map the name, check magic and that the segment's secret equals the handle's (and
//              the handle's equals ours), claim the segment, write our pid/rank, set connected,
//              shm_unlink the name (so that a listener killed before accept() leaks nothing).
//   accept()   once connected: hand the mapping to a RecvComm (and shm_unlink the name too).
//
// Messages are a 48-byte frame header {magic, size, Meta} followed by the payload, streamed
// through the ring in pieces as space allows: memcpy straight from the user's send buffer into
// the ring and from the ring into the user's receive buffer, publishing head/tail every
// kPublishBytes so that the peer works on a large message concurrently. isend/irecv queue a
// request from a preallocated pool (kMaxRequests per comm, FIFO) and try to progress; test()
// moves as many bytes as possible. No allocation and no lock per message.
//
// Failure: a receive smaller than the incoming message fails the receiver with kInvalidUsage and
// sets `failed` in the header, which fails the sender too. Destroying a comm sets its side's
// closed flag: the receiver reports kRemote once it has drained what was published before the
// close; the sender reports kRemote at once. When a side makes no progress it checks every ~1 ms
// whether the peer process still exists.
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
#include <random>
#include <string>
#include <unordered_map>

#include "core/clock.h"
#include "core/log.h"
#include "core/params.h"
#include "transport/backends.h"
#include "transport/shm/ring.h"

namespace braid::transport {
namespace {

using detail::kShmFrameBytes;
using detail::kShmFrameMagic;
using detail::kShmHeaderBytes;
using detail::kShmLayoutVersion;
using detail::kShmSegmentMagic;
using detail::ShmFrameHeader;
using detail::ShmSegmentHeader;

constexpr uint64_t kShmHandleMagic = 0x444e484d48534252ull;  // "RBSHMHND" little-endian
constexpr uint32_t kShmKind = 2;
constexpr size_t kShmNameBytes = 96;
constexpr char kShmNamePrefix[] = "/braid-";
constexpr int64_t kMinRingBytes = 4096;
constexpr int64_t kMaxRingBytes = int64_t{1} << 30;
/// Rings are whole pages so that the segment is too.
constexpr int64_t kRingRoundBytes = 4096;
/// Publish progress to the peer at least this often while streaming a large message.
constexpr uint64_t kMaxPublishBytes = 256 * 1024;
/// How often a stalled side asks whether its peer process still exists.
constexpr uint64_t kPeerCheckNs = 1000 * 1000;

struct ShmHandle {
  uint64_t magic;
  uint32_t kind;
  uint32_t version;
  uint64_t secret;
  int32_t creatorPid;
  int32_t creatorRank;
  char name[kShmNameBytes];
};
static_assert(sizeof(ShmHandle) <= kHandleSize, "shm handle must fit a Handle");

std::string rankText(int rank) { return rank < 0 ? std::string("?") : std::to_string(rank); }

std::string peerText(int pid, int rank) {
  return "peer process " + std::to_string(pid) + " (rank " + rankText(rank) + ")";
}

/// True when pid no longer runs: gone, or a zombie its parent has not reaped yet.
bool processGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) == -1) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // no /proc: kill() is all we know
  char buf[512];
  ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  if (n <= 0) return false;
  // "pid (comm) S ...": the state follows the last ')'.
  const char* paren = static_cast<const char*>(memrchr(buf, ')', static_cast<size_t>(n)));
  if (paren == nullptr || paren + 2 >= buf + n) return false;
  return paren[2] == 'Z' || paren[2] == 'X';
}

/// One mmap of a segment; unmapped when the last user lets go.
class Mapping {
 public:
  Mapping(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ~Mapping() { munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  void* base_;
  size_t bytes_;
};

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

/// One side's view of a connection segment.
class Segment {
 public:
  Segment(std::shared_ptr<Mapping> mapping, std::string name, bool owner)
      : mapping_(std::move(mapping)), name_(std::move(name)), owner_(owner) {}
  ~Segment() { unlink(); }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  ShmSegmentHeader* header() const { return static_cast<ShmSegmentHeader*>(mapping_->base()); }
  uint8_t* ring() const { return static_cast<uint8_t*>(mapping_->base()) + kShmHeaderBytes; }
  size_t bytes() const { return mapping_->bytes(); }
  const std::string& name() const { return name_; }

  /// Removes the name (creator only, once): the mapping stays valid for both sides.
  void unlink() {
    if (owner_ && !unlinked_) {
      shm_unlink(name_.c_str());
      std::lock_guard<std::mutex> lock(localSegmentsMutex());
      localSegments().erase(name_);
      unlinked_ = true;
    }
  }

 private:
  std::shared_ptr<Mapping> mapping_;
  std::string name_;
  bool owner_;
  bool unlinked_ = false;
};

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

/// Maps the segment a handle names: the creator's mapping when it lives in this process.
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

enum class ReqState : uint8_t { kFree, kPending, kDone, kError };

class ShmEndpoint;

/// One posted send or receive; lives in its endpoint's pool.
struct ShmRequest {
  ShmEndpoint* owner = nullptr;
  bool isSend = false;
  ReqState state = ReqState::kFree;
  const uint8_t* sendData = nullptr;
  uint8_t* recvData = nullptr;
  Meta* metaOut = nullptr;
  uint64_t capacity = 0;  // receive: bytes posted
  uint64_t size = 0;      // send: message size; receive: size once the frame header is in
  uint64_t moved = 0;     // bytes of the frame (header + payload) copied so far
  ShmFrameHeader frame{};
};

/// What SendComm and RecvComm share: the mapping, the request pool and FIFO, the failure state.
class ShmEndpoint {
 public:
  ShmEndpoint(std::unique_ptr<Segment> segment, int rank)
      : segment_(std::move(segment)),
        header_(segment_->header()),
        ring_(segment_->ring()),
        ringBytes_(header_->ringBytes),
        publishBytes_(std::max<uint64_t>(std::min(kMaxPublishBytes, ringBytes_ / 4), 1)),
        rank_(rank) {
    for (int i = 0; i < kMaxRequests; ++i) {
      pool_[i].owner = this;
      free_[i] = kMaxRequests - 1 - i;
    }
    freeCount_ = kMaxRequests;
  }
  virtual ~ShmEndpoint() = default;

  /// A free request, or null when kMaxRequests are in flight.
  ShmRequest* acquire() {
    if (freeCount_ == 0) return nullptr;
    ShmRequest* r = &pool_[free_[--freeCount_]];
    r->state = ReqState::kPending;
    r->moved = 0;
    r->size = 0;
    return r;
  }
  void enqueue(ShmRequest* r) {
    fifo_[(fifoHead_ + fifoCount_) % kMaxRequests] = static_cast<int>(r - pool_);
    ++fifoCount_;
  }
  void release(ShmRequest* r) {
    r->state = ReqState::kFree;
    free_[freeCount_++] = static_cast<int>(r - pool_);
  }
  ShmRequest& front() { return pool_[fifo_[fifoHead_]]; }
  void completeFront() {
    front().state = ReqState::kDone;
    fifoHead_ = (fifoHead_ + 1) % kMaxRequests;
    --fifoCount_;
  }
  /// Breaks the connection: every queued request fails with s, later posts return s.
  void failAll(Status s) {
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
  const Status& failure() const { return failure_; }

  /// Rate-limited liveness check of the peer, for a side that made no progress.
  bool peerGoneCheck(int peerPid) {
    if (peerPid == selfPid_) return false;  // same process (threads): nothing to learn
    uint64_t now = nowNs();
    if (now - lastPeerCheckNs_ < kPeerCheckNs) return false;
    lastPeerCheckNs_ = now;
    return processGone(peerPid);
  }

 protected:
  std::unique_ptr<Segment> segment_;
  ShmSegmentHeader* header_;
  uint8_t* ring_;
  const uint64_t ringBytes_;
  const uint64_t publishBytes_;
  const int rank_;
  const int selfPid_ = static_cast<int>(getpid());
  uint64_t lastPeerCheckNs_ = 0;
  Status failure_;
  int fifoHead_ = 0;
  int fifoCount_ = 0;
  int freeCount_ = 0;
  int fifo_[kMaxRequests];
  int free_[kMaxRequests];
  ShmRequest pool_[kMaxRequests];
};

class ShmSendComm final : public SendComm, public ShmEndpoint {
 public:
  ShmSendComm(std::unique_ptr<Segment> segment, int rank)
      : ShmEndpoint(std::move(segment), rank),
        peerPid_(header_->creatorPid),
        peerRank_(header_->creatorRank) {
    head_ = header_->head.load(std::memory_order_relaxed);
    published_ = head_;
    cachedTail_ = header_->tail.load(std::memory_order_acquire);
  }
  ~ShmSendComm() override {
    // Everything written is published already (progress() publishes before returning), so the
    // receiver may drain it after seeing the flag.
    header_->sendClosed.store(1, std::memory_order_release);
  }

  Status post(const void* data, size_t size, const Meta& meta, Request** request) {
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

  void progress() {
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
        detail::ringCopyIn(ring_, ringBytes_, head_, src, n);
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

 private:
  void publish() {
    if (head_ != published_) {
      header_->head.store(head_, std::memory_order_release);
      published_ = head_;
    }
  }

  /// Fails the comm when the receiver closed or rejected a message; returns true if so.
  bool checkFlags() {
    const uint32_t failed = header_->failed.load(std::memory_order_acquire);
    if (failed == detail::kShmFailTooLarge) {
      failAll(
          invalidUsage("shm: message of " +
                       std::to_string(header_->failMessageBytes.load(std::memory_order_relaxed)) +
                       " bytes exceeds the posted receive of " +
                       std::to_string(header_->failRecvBytes.load(std::memory_order_relaxed)) +
                       " bytes on the receiver, " + peerText(peerPid_, peerRank_) +
                       "; the connection is closed"));
      return true;
    }
    if (failed != detail::kShmFailNone) {
      failAll(internalError("shm: " + peerText(peerPid_, peerRank_) +
                            " found a corrupt frame in the ring and closed the connection"));
      return true;
    }
    if (header_->recvClosed.load(std::memory_order_acquire) != 0) {
      failAll(remoteError("shm: " + peerText(peerPid_, peerRank_) +
                          " closed the connection (rank " + rankText(rank_) +
                          " was sending to it)"));
      return true;
    }
    return false;
  }

  const int peerPid_;
  const int peerRank_;
  uint64_t head_ = 0;       // bytes written
  uint64_t published_ = 0;  // head_ as last stored to the header
  uint64_t cachedTail_ = 0;
};

class ShmRecvComm final : public RecvComm, public ShmEndpoint {
 public:
  ShmRecvComm(std::unique_ptr<Segment> segment, int rank)
      : ShmEndpoint(std::move(segment), rank),
        peerPid_(header_->senderPid.load(std::memory_order_acquire)),
        peerRank_(header_->senderRank.load(std::memory_order_acquire)) {
    tail_ = header_->tail.load(std::memory_order_relaxed);
    published_ = tail_;
    cachedHead_ = header_->head.load(std::memory_order_acquire);
  }
  ~ShmRecvComm() override { header_->recvClosed.store(1, std::memory_order_release); }

  Status post(void* data, size_t size, Meta* meta, Request** request) {
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

  void progress() {
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

 private:
  /// Copies what the ring holds into the posted receives; true if any byte moved.
  bool drain() {
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
          detail::ringCopyOut(ring_, ringBytes_, tail_,
                              reinterpret_cast<uint8_t*>(&r.frame) + r.moved, n);
          tail_ += n;
          r.moved += n;
          movedAny = true;
          if (r.moved < kShmFrameBytes) continue;
          haveHeader = true;
          if (!acceptFrame(r)) return true;
          continue;
        }
        uint64_t n = std::min({avail, kShmFrameBytes + r.size - r.moved, publishBytes_});
        detail::ringCopyOut(ring_, ringBytes_, tail_, r.recvData + (r.moved - kShmFrameBytes), n);
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

  /// Checks a complete frame header against the posted receive; false (and the comm failed,
  /// the sender told) if it cannot be received.
  bool acceptFrame(ShmRequest& r) {
    if (r.frame.magic != kShmFrameMagic) {
      failAll(internalError("shm: corrupt frame header in the ring from " +
                            peerText(peerPid_, peerRank_) + " (rank " + rankText(rank_) + ")"));
      header_->failed.store(detail::kShmFailCorrupt, std::memory_order_release);
      return false;
    }
    if (r.frame.size > r.capacity) {
      header_->failMessageBytes.store(r.frame.size, std::memory_order_relaxed);
      header_->failRecvBytes.store(r.capacity, std::memory_order_relaxed);
      header_->failed.store(detail::kShmFailTooLarge, std::memory_order_release);
      failAll(invalidUsage("shm: message of " + std::to_string(r.frame.size) +
                           " bytes exceeds the posted receive of " + std::to_string(r.capacity) +
                           " bytes (rank " + rankText(rank_) + " receiving from " +
                           peerText(peerPid_, peerRank_) + "); the connection is closed"));
      return false;
    }
    r.size = r.frame.size;
    return true;
  }

  void publish() {
    if (tail_ != published_) {
      header_->tail.store(tail_, std::memory_order_release);
      published_ = tail_;
    }
  }

  const int peerPid_;
  const int peerRank_;
  uint64_t tail_ = 0;       // bytes consumed
  uint64_t published_ = 0;  // tail_ as last stored to the header
  uint64_t cachedHead_ = 0;
};

class ShmListenComm final : public ListenComm {
 public:
  explicit ShmListenComm(std::unique_ptr<Segment> segment) : segment_(std::move(segment)) {}
  ~ShmListenComm() override {
    // Never accepted: a sender that connected must fail instead of waiting for a reader.
    if (segment_) segment_->header()->recvClosed.store(1, std::memory_order_release);
  }
  std::unique_ptr<Segment> segment_;  // moves to the RecvComm on accept
};

class ShmTransport final : public Transport {
 public:
  ShmTransport(const TransportOptions& options, uint64_t ringBytes)
      : options_(options), ringBytes_(ringBytes) {}

  const char* name() const override { return "shm"; }

  Status listen(Handle* handle, std::unique_ptr<ListenComm>* listenComm) override {
    static std::atomic<uint64_t> counter{0};
    std::random_device rd;
    uint64_t salt = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    char name[kShmNameBytes];
    std::snprintf(name, sizeof(name), "%s%d-%llu-%016llx", kShmNamePrefix,
                  static_cast<int>(getpid()),
                  static_cast<unsigned long long>(counter.fetch_add(1, std::memory_order_relaxed)),
                  static_cast<unsigned long long>(salt));
    BRAID_ASSIGN_OR_RETURN(std::unique_ptr<Segment> segment,
                           createSegment(name, ringBytes_, options_.jobSecret, options_.rank));
    ShmHandle h{};
    h.magic = kShmHandleMagic;
    h.kind = kShmKind;
    h.version = kShmLayoutVersion;
    h.secret = options_.jobSecret;
    h.creatorPid = static_cast<int32_t>(getpid());
    h.creatorRank = options_.rank;
    std::memcpy(h.name, name, sizeof(name));
    std::memset(handle->bytes, 0, kHandleSize);
    std::memcpy(handle->bytes, &h, sizeof(h));
    *listenComm = std::make_unique<ShmListenComm>(std::move(segment));
    return Status::ok();
  }

  Status connect(const Handle& handle, std::unique_ptr<SendComm>* sendComm) override {
    ShmHandle h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    if (h.magic != kShmHandleMagic || h.kind != kShmKind) {
      return invalidArgument("shm: connect handle is not an shm handle (bad magic)");
    }
    if (h.version != kShmLayoutVersion) {
      return invalidArgument("shm: handle has layout version " + std::to_string(h.version) +
                             ", this library speaks " + std::to_string(kShmLayoutVersion) +
                             "; all ranks must use the same braid build");
    }
    if (memchr(h.name, '\0', sizeof(h.name)) == nullptr ||
        std::strncmp(h.name, kShmNamePrefix, sizeof(kShmNamePrefix) - 1) != 0) {
      return invalidArgument("shm: connect handle holds a malformed segment name");
    }
    const std::string who = "listener " + peerText(h.creatorPid, h.creatorRank);
    if (h.secret != options_.jobSecret) {
      return invalidArgument("shm: connection to " + who +
                             " refused: the handle belongs to another job (job secret mismatch)");
    }
    BRAID_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> mapping,
                           openSegment(h.name, h.creatorPid, who));
    const size_t bytes = mapping->bytes();
    auto segment = std::make_unique<Segment>(std::move(mapping), h.name, /*owner=*/false);
    ShmSegmentHeader* sh = segment->header();
    if (sh->magic != kShmSegmentMagic || sh->version != kShmLayoutVersion ||
        sh->ringBytes + kShmHeaderBytes != bytes) {
      return invalidArgument(std::string("shm: segment ") + h.name +
                             " is not a braid shm segment of this version");
    }
    if (sh->secret != h.secret) {
      return invalidArgument("shm: connection to " + who +
                             " refused: the handle's job secret does not match the listener's");
    }
    uint32_t expected = 0;
    if (!sh->claimed.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      return invalidArgument("shm: " + who +
                             " already has a connection (a handle is good for one connect)");
    }
    sh->senderPid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
    sh->senderRank.store(options_.rank, std::memory_order_relaxed);
    sh->connected.store(1, std::memory_order_release);
    // The name has served its purpose: remove it now rather than at accept(), so that a listener
    // that dies after this point cannot leave it behind in /dev/shm. (accept() unlinks too.)
    shm_unlink(h.name);
    *sendComm = std::make_unique<ShmSendComm>(std::move(segment), options_.rank);
    return Status::ok();
  }

  Status accept(ListenComm* listenComm, std::unique_ptr<RecvComm>* recvComm) override {
    auto* lc = static_cast<ShmListenComm*>(listenComm);
    if (!lc->segment_) return invalidUsage("shm: accept on a listener that already accepted");
    if (lc->segment_->header()->connected.load(std::memory_order_acquire) == 0) {
      return Status::ok();
    }
    lc->segment_->unlink();  // the sender has mapped it; nobody else may
    *recvComm = std::make_unique<ShmRecvComm>(std::move(lc->segment_), options_.rank);
    return Status::ok();
  }

  Status isend(SendComm* comm, const void* data, size_t size, const Meta& meta,
               Request** request) override {
    if (size > 0 && data == nullptr) {
      *request = nullptr;
      return invalidArgument("shm: isend of null data");
    }
    return static_cast<ShmSendComm*>(comm)->post(data, size, meta, request);
  }

  Status irecv(RecvComm* comm, void* data, size_t size, Meta* meta, Request** request) override {
    if (size > 0 && data == nullptr) {
      *request = nullptr;
      return invalidArgument("shm: irecv into null buffer");
    }
    return static_cast<ShmRecvComm*>(comm)->post(data, size, meta, request);
  }

  Status test(Request* request, bool* done, size_t* size) override {
    *done = false;
    auto* r = reinterpret_cast<ShmRequest*>(request);
    if (r == nullptr) return invalidArgument("shm: test of a null request");
    if (r->state == ReqState::kPending) {
      if (r->isSend) {
        static_cast<ShmSendComm*>(r->owner)->progress();
      } else {
        static_cast<ShmRecvComm*>(r->owner)->progress();
      }
    }
    switch (r->state) {
      case ReqState::kPending:
        return Status::ok();
      case ReqState::kDone:
        *done = true;
        if (size) *size = r->size;
        r->owner->release(r);
        return Status::ok();
      case ReqState::kError: {
        Status s = r->owner->failure();
        r->owner->release(r);
        return s;
      }
      case ReqState::kFree:
        break;
    }
    return invalidUsage("shm: test of a request that is not in flight");
  }

 private:
  TransportOptions options_;
  uint64_t ringBytes_;
};

}  // namespace

Result<std::unique_ptr<Transport>> createShmTransport(const TransportOptions& options) {
  int64_t ringBytes = paramInt("BRAID_SHM_RING_BYTES");
  if (ringBytes < kMinRingBytes || ringBytes > kMaxRingBytes) {
    int64_t clamped = std::min(std::max(ringBytes, kMinRingBytes), kMaxRingBytes);
    BRAID_WARN("BRAID_SHM_RING_BYTES=%lld is outside [%lld, %lld]; using %lld",
               static_cast<long long>(ringBytes), static_cast<long long>(kMinRingBytes),
               static_cast<long long>(kMaxRingBytes), static_cast<long long>(clamped));
    ringBytes = clamped;
  }
  ringBytes = (ringBytes + kRingRoundBytes - 1) / kRingRoundBytes * kRingRoundBytes;
  return std::unique_ptr<Transport>(
      std::make_unique<ShmTransport>(options, static_cast<uint64_t>(ringBytes)));
}

}  // namespace braid::transport
