// shm: the same-host backend's setup half: handles, listen/connect/accept and the Transport entry
// points. One POSIX shared-memory segment per connection, created by the receiver's listen(),
// holding a single-producer single-consumer byte ring (ring.h); the data path (framing, progress,
// failures) is in connection.h.
//
//   listen()   shm_open(O_EXCL) a random name, reserve and map it, write the identity line; the
//              handle carries magic, kind, job secret, name and creator pid/rank.
//   connect()  map the name, check magic and that the segment's secret equals the handle's (and
//              the handle's equals ours), claim the segment, write our pid/rank, set connected,
//              shm_unlink the name (so that a listener killed before accept() leaks nothing).
//   accept()   once connected: hand the mapping to a RecvComm (and shm_unlink the name too).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "core/log.h"
#include "core/params.h"
#include "transport/backends.h"
#include "transport/shm/connection.h"
#include "transport/shm/ring.h"

namespace braid::transport {
namespace {

using shm::createSegment;
using shm::kMinRingBytes;
using shm::kShmHeaderBytes;
using shm::kShmLayoutVersion;
using shm::kShmSegmentMagic;
using shm::Mapping;
using shm::openSegment;
using shm::peerText;
using shm::ReqState;
using shm::Segment;
using shm::ShmRecvComm;
using shm::ShmRequest;
using shm::ShmSegmentHeader;
using shm::ShmSendComm;

constexpr uint64_t kShmHandleMagic = 0x444e484d48534252ull;  // "RBSHMHND" little-endian
constexpr uint32_t kShmKind = 2;
constexpr size_t kShmNameBytes = 96;
constexpr char kShmNamePrefix[] = "/braid-";
constexpr int64_t kMaxRingBytes = int64_t{1} << 30;
/// Rings are whole pages so that the segment is too.
constexpr int64_t kRingRoundBytes = 4096;

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
