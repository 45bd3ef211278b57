// The data path of the shm backend: one connection = one POSIX shared-memory segment holding a
// single-producer single-consumer byte ring (ring.h), progressed only by the caller's
// isend/irecv/test (no helper threads). Internal to transport/shm/.
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
//
// A connection is used by one thread at a time; different connections are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "braid/status.h"
#include "transport/shm/ring.h"
#include "transport/transport.h"

namespace braid::transport::shm {

/// The smallest ring (BRAID_SHM_RING_BYTES is clamped to it); a smaller segment is not ours.
inline constexpr int64_t kMinRingBytes = 4096;

std::string rankText(int rank);
/// "peer process <pid> (rank <rank>)", for messages.
std::string peerText(int pid, int rank);

/// One mmap of a segment; unmapped when the last user lets go.
class Mapping {
 public:
  Mapping(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  void* base_;
  size_t bytes_;
};

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
  void unlink();

 private:
  std::shared_ptr<Mapping> mapping_;
  std::string name_;
  bool owner_;
  bool unlinked_ = false;
};

/// Creates, reserves and maps segment `name` with a ring of ringBytes, and writes its identity.
Result<std::unique_ptr<Segment>> createSegment(const std::string& name, uint64_t ringBytes,
                                               uint64_t secret, int rank);
/// Maps the segment a handle names: the creator's mapping when it lives in this process. `who`
/// names the listener in errors.
Result<std::shared_ptr<Mapping>> openSegment(const std::string& name, int creatorPid,
                                             const std::string& who);

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
  ShmEndpoint(std::unique_ptr<Segment> segment, int rank);
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
  void failAll(Status s);
  const Status& failure() const { return failure_; }

  /// Rate-limited liveness check of the peer, for a side that made no progress.
  bool peerGoneCheck(int peerPid);

 protected:
  std::unique_ptr<Segment> segment_;
  ShmSegmentHeader* header_;
  uint8_t* ring_;
  const uint64_t ringBytes_;
  const uint64_t publishBytes_;
  const int rank_;
  const int selfPid_;
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
  ShmSendComm(std::unique_ptr<Segment> segment, int rank);
  ~ShmSendComm() override;

  Status post(const void* data, size_t size, const Meta& meta, Request** request);
  void progress();

 private:
  void publish() {
    if (head_ != published_) {
      header_->head.store(head_, std::memory_order_release);
      published_ = head_;
    }
  }

  /// Fails the comm when the receiver closed or rejected a message; returns true if so.
  bool checkFlags();

  const int peerPid_;
  const int peerRank_;
  uint64_t head_ = 0;       // bytes written
  uint64_t published_ = 0;  // head_ as last stored to the header
  uint64_t cachedTail_ = 0;
};

class ShmRecvComm final : public RecvComm, public ShmEndpoint {
 public:
  ShmRecvComm(std::unique_ptr<Segment> segment, int rank);
  ~ShmRecvComm() override;

  Status post(void* data, size_t size, Meta* meta, Request** request);
  void progress();

 private:
  /// Copies what the ring holds into the posted receives; true if any byte moved.
  bool drain();
  /// Checks a complete frame header against the posted receive; false (and the comm failed,
  /// the sender told) if it cannot be received.
  bool acceptFrame(ShmRequest& r);

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

}  // namespace braid::transport::shm
