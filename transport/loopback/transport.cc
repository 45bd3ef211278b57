// loopback: an in-process backend for unit tests and single-process runs.
//
// A handle names a listener in a process-wide registry (by a process-unique id) and carries the
// job secret. connect() finds the listener, checks the secret and creates the connection at once;
// accept() picks it up. Both ends of a connection share one Conn: two FIFO queues (posted sends,
// posted receives) under a mutex. Whichever side progresses pairs the queue heads and copies the
// payload straight from the sender's buffer into the receiver's, so a send completes exactly when
// its data has been delivered. Not a hot path: correctness and thread safety over speed.
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "transport/backends.h"

namespace braid::transport {
namespace {

constexpr uint64_t kLoopbackMagic = 0x4b424c4449415242ull;  // "BRAIDLBK" little-endian
constexpr uint32_t kLoopbackKind = 1;

struct LoopbackHandle {
  uint64_t magic;
  uint32_t kind;
  int32_t pid;
  uint64_t secret;
  uint64_t id;
};
static_assert(sizeof(LoopbackHandle) <= kHandleSize, "loopback handle must fit a Handle");

enum class ReqState : uint8_t { kFree, kPending, kDone, kError };

struct Conn;

/// One posted send or receive. Lives in its comm's fixed pool.
struct LoopRequest {
  Conn* conn = nullptr;
  bool isSend = false;
  ReqState state = ReqState::kFree;
  const void* sendData = nullptr;
  void* recvData = nullptr;
  size_t size = 0;  // send: message size; recv: capacity, then received size
  Meta meta{};      // send: meta to deliver
  Meta* metaOut = nullptr;
  Status error;
};

/// A fixed-capacity FIFO of request pointers.
class RequestQueue {
 public:
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == kMaxRequests; }
  LoopRequest* front() const { return slots_[head_]; }
  void push(LoopRequest* r) {
    slots_[(head_ + count_) % kMaxRequests] = r;
    ++count_;
  }
  LoopRequest* pop() {
    LoopRequest* r = slots_[head_];
    head_ = (head_ + 1) % kMaxRequests;
    --count_;
    return r;
  }

 private:
  LoopRequest* slots_[kMaxRequests] = {};
  int head_ = 0;
  int count_ = 0;
};

/// State shared by the two ends of one connection.
struct Conn {
  std::mutex mu;
  RequestQueue sends;  // posted, not yet matched
  RequestQueue recvs;
  bool sendClosed = false;
  bool recvClosed = false;
  Status failure;  // set once the connection is broken (truncation)
  int listenRank = -1;
  int connectRank = -1;

  static void finish(LoopRequest* r, const Status& s) {
    r->state = s.isOk() ? ReqState::kDone : ReqState::kError;
    r->error = s;
  }

  void failAll(RequestQueue& q, const Status& s) {
    while (!q.empty()) finish(q.pop(), s);
  }

  /// Matches queue heads and resolves what can no longer complete. Caller holds mu.
  void progressLocked() {
    while (failure.isOk() && !sends.empty() && !recvs.empty()) {
      LoopRequest* s = sends.pop();
      LoopRequest* r = recvs.pop();
      if (s->size > r->size) {
        failure = invalidUsage("loopback: message of " + std::to_string(s->size) +
                               " bytes exceeds the posted receive of " + std::to_string(r->size) +
                               " bytes (sender rank " + std::to_string(connectRank) +
                               ", receiver rank " + std::to_string(listenRank) + ")");
        finish(s, failure);
        finish(r, failure);
        break;
      }
      if (s->size > 0) std::memcpy(r->recvData, s->sendData, s->size);
      r->size = s->size;
      if (r->metaOut) *r->metaOut = s->meta;
      finish(s, Status::ok());
      finish(r, Status::ok());
    }
    if (!failure.isOk()) {
      failAll(sends, failure);
      failAll(recvs, failure);
      return;
    }
    if (recvClosed) {
      failAll(sends, remoteError("loopback: receiver (rank " + std::to_string(listenRank) +
                                 ") closed the connection"));
    }
    if (sendClosed && sends.empty()) {
      failAll(recvs, remoteError("loopback: sender (rank " + std::to_string(connectRank) +
                                 ") closed the connection"));
    }
  }
};

/// Fixed pool of requests owned by one end.
class RequestPool {
 public:
  LoopRequest* acquire() {
    for (LoopRequest& r : slots_) {
      if (r.state == ReqState::kFree) return &r;
    }
    return nullptr;
  }

 private:
  LoopRequest slots_[kMaxRequests];
};

struct Listener {
  uint64_t id = 0;
  uint64_t secret = 0;
  int rank = -1;
  std::shared_ptr<Conn> conn;  // set by connect(), taken by accept(); guarded by registryMutex
  bool connected = false;
};

std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<uint64_t, Listener*>& registry() {
  static auto* map = new std::unordered_map<uint64_t, Listener*>();  // never destroyed
  return *map;
}
std::atomic<uint64_t> nextId{1};

class LoopbackListenComm : public ListenComm {
 public:
  LoopbackListenComm() = default;
  ~LoopbackListenComm() override {
    std::lock_guard<std::mutex> lock(registryMutex());
    registry().erase(listener_.id);
    if (listener_.conn) {
      // Connected but never accepted: the sender must not wait forever.
      std::lock_guard<std::mutex> connLock(listener_.conn->mu);
      listener_.conn->recvClosed = true;
    }
  }
  Listener listener_;
};

class LoopbackSendComm : public SendComm {
 public:
  explicit LoopbackSendComm(std::shared_ptr<Conn> conn) : conn_(std::move(conn)) {}
  ~LoopbackSendComm() override { close(); }
  void close() {
    std::lock_guard<std::mutex> lock(conn_->mu);
    conn_->sendClosed = true;
    // Unmatched sends reference user buffers that may die with this comm: drop them.
    conn_->failAll(conn_->sends, remoteError("loopback: send comm destroyed"));
    conn_->progressLocked();
  }
  std::shared_ptr<Conn> conn_;
  RequestPool pool_;
};

class LoopbackRecvComm : public RecvComm {
 public:
  explicit LoopbackRecvComm(std::shared_ptr<Conn> conn) : conn_(std::move(conn)) {}
  ~LoopbackRecvComm() override {
    std::lock_guard<std::mutex> lock(conn_->mu);
    conn_->recvClosed = true;
    conn_->failAll(conn_->recvs, remoteError("loopback: recv comm destroyed"));
    conn_->progressLocked();
  }
  std::shared_ptr<Conn> conn_;
  RequestPool pool_;
};

class LoopbackTransport : public Transport {
 public:
  explicit LoopbackTransport(const TransportOptions& options) : options_(options) {}

  const char* name() const override { return "loopback"; }

  Status listen(Handle* handle, std::unique_ptr<ListenComm>* listenComm) override {
    auto comm = std::make_unique<LoopbackListenComm>();
    comm->listener_.id = nextId.fetch_add(1, std::memory_order_relaxed);
    comm->listener_.secret = options_.jobSecret;
    comm->listener_.rank = options_.rank;
    {
      std::lock_guard<std::mutex> lock(registryMutex());
      registry()[comm->listener_.id] = &comm->listener_;
    }
    LoopbackHandle h{};
    h.magic = kLoopbackMagic;
    h.kind = kLoopbackKind;
    h.pid = static_cast<int32_t>(getpid());
    h.secret = options_.jobSecret;
    h.id = comm->listener_.id;
    std::memset(handle->bytes, 0, kHandleSize);
    std::memcpy(handle->bytes, &h, sizeof(h));
    *listenComm = std::move(comm);
    return Status::ok();
  }

  Status connect(const Handle& handle, std::unique_ptr<SendComm>* sendComm) override {
    LoopbackHandle h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    if (h.magic != kLoopbackMagic || h.kind != kLoopbackKind) {
      return invalidArgument("loopback: connect handle is not a loopback handle (bad magic)");
    }
    if (h.pid != static_cast<int32_t>(getpid())) {
      return invalidArgument("loopback: handle comes from process " + std::to_string(h.pid) +
                             "; the loopback transport only connects within one process");
    }
    if (h.secret != options_.jobSecret) {
      return invalidArgument(
          "loopback: connection refused: handle belongs to another job "
          "(job secret mismatch)");
    }
    std::lock_guard<std::mutex> lock(registryMutex());
    auto it = registry().find(h.id);
    if (it == registry().end()) {
      return invalidArgument("loopback: no listener " + std::to_string(h.id) +
                             " (closed, or the handle is stale)");
    }
    Listener* l = it->second;
    if (l->secret != h.secret) {
      return invalidArgument(
          "loopback: connection refused: job secret does not match the "
          "listener's");
    }
    if (l->connected) {
      return invalidArgument("loopback: listener " + std::to_string(h.id) +
                             " already has a connection (a handle is good for one connect)");
    }
    auto conn = std::make_shared<Conn>();
    conn->listenRank = l->rank;
    conn->connectRank = options_.rank;
    l->conn = conn;
    l->connected = true;
    *sendComm = std::make_unique<LoopbackSendComm>(std::move(conn));
    return Status::ok();
  }

  Status accept(ListenComm* listenComm, std::unique_ptr<RecvComm>* recvComm) override {
    auto* lc = static_cast<LoopbackListenComm*>(listenComm);
    std::lock_guard<std::mutex> lock(registryMutex());
    if (lc->listener_.conn) {
      *recvComm = std::make_unique<LoopbackRecvComm>(std::move(lc->listener_.conn));
      lc->listener_.conn.reset();
    }
    return Status::ok();
  }

  Status isend(SendComm* comm, const void* data, size_t size, const Meta& meta,
               Request** request) override {
    auto* sc = static_cast<LoopbackSendComm*>(comm);
    *request = nullptr;
    if (size > 0 && data == nullptr) return invalidArgument("loopback: isend of null data");
    Conn* conn = sc->conn_.get();
    std::lock_guard<std::mutex> lock(conn->mu);
    if (!conn->failure.isOk()) return conn->failure;
    if (conn->recvClosed) {
      return remoteError("loopback: receiver (rank " + std::to_string(conn->listenRank) +
                         ") closed the connection");
    }
    LoopRequest* r = sc->pool_.acquire();
    if (r == nullptr || conn->sends.full()) return Status::ok();
    r->conn = conn;
    r->isSend = true;
    r->state = ReqState::kPending;
    r->sendData = data;
    r->size = size;
    r->meta = meta;
    r->error = Status::ok();
    conn->sends.push(r);
    conn->progressLocked();
    *request = reinterpret_cast<Request*>(r);
    return Status::ok();
  }

  Status irecv(RecvComm* comm, void* data, size_t size, Meta* meta, Request** request) override {
    auto* rc = static_cast<LoopbackRecvComm*>(comm);
    *request = nullptr;
    if (size > 0 && data == nullptr) return invalidArgument("loopback: irecv into null buffer");
    Conn* conn = rc->conn_.get();
    std::lock_guard<std::mutex> lock(conn->mu);
    if (!conn->failure.isOk()) return conn->failure;
    LoopRequest* r = rc->pool_.acquire();
    if (r == nullptr || conn->recvs.full()) return Status::ok();
    r->conn = conn;
    r->isSend = false;
    r->state = ReqState::kPending;
    r->recvData = data;
    r->size = size;
    r->metaOut = meta;
    r->error = Status::ok();
    conn->recvs.push(r);
    conn->progressLocked();
    *request = reinterpret_cast<Request*>(r);
    return Status::ok();
  }

  Status test(Request* request, bool* done, size_t* size) override {
    auto* r = reinterpret_cast<LoopRequest*>(request);
    *done = false;
    if (r == nullptr) return invalidArgument("loopback: test of a null request");
    std::lock_guard<std::mutex> lock(r->conn->mu);
    if (r->state == ReqState::kPending) r->conn->progressLocked();
    switch (r->state) {
      case ReqState::kPending:
        return Status::ok();
      case ReqState::kDone:
        *done = true;
        if (size) *size = r->size;
        r->state = ReqState::kFree;
        return Status::ok();
      case ReqState::kError: {
        Status s = std::move(r->error);
        r->error = Status::ok();
        r->state = ReqState::kFree;
        return s;
      }
      case ReqState::kFree:
        break;
    }
    return invalidUsage("loopback: test of a request that is not in flight");
  }

 private:
  TransportOptions options_;
};

}  // namespace

Result<std::unique_ptr<Transport>> createLoopbackTransport(const TransportOptions& options) {
  return std::unique_ptr<Transport>(std::make_unique<LoopbackTransport>(options));
}

}  // namespace braid::transport
