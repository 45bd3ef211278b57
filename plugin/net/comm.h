// Internal types of the net plugin: context, listen/send/recv comms, requests. See net.h for the
// model; net.cc holds setup (init, listen, connect, accept), data_path.cc the requests.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "braid/status.h"
#include "plugin/net/net.h"
#include "transport/transport.h"

namespace braid::plugin::net::detail {

inline constexpr uint32_t kContextMagic = 0x43544e42;  // "BNTC"
inline constexpr uint32_t kListenMagic = 0x4c544e42;   // "BNTL"
inline constexpr uint32_t kSendMagic = 0x53544e42;     // "BNTS"
inline constexpr uint32_t kRecvMagic = 0x52544e42;     // "BNTR"
inline constexpr uint32_t kRequestMagic = 0x51544e42;  // "BNTQ"
inline constexpr uint32_t kRegionMagic = 0x4d544e42;   // "BNTM"

/// First message on every connection: Meta words {kHelloMagic, kProtocolVersion, maxRecvs, pid}.
inline constexpr uint64_t kHelloMagic = 0x314c4c4548544e42ull;   // "BNTHELL1"
inline constexpr uint64_t kHeaderMagic = 0x3152444854544e42ull;  // "BNTTHDR1"
inline constexpr uint64_t kProtocolVersion = 1;

using HandleKey = std::array<uint8_t, transport::kHandleSize>;

class SendCommImpl;

struct Context {
  uint32_t magic = kContextMagic;
  uint64_t secret = 0;
  std::mutex mu;  ///< guards the members below (several service threads may share a ctx)
  std::vector<std::shared_ptr<transport::Transport>> transports;  ///< per device, lazily
  /// Connects whose comm NCCL has not received yet, by handle (NCCL re-calls with the same one).
  std::map<HandleKey, std::unique_ptr<SendCommImpl>> pending;

  Result<std::shared_ptr<transport::Transport>> transportFor(int dev);
};

struct MemRegion {
  uint32_t magic = kRegionMagic;
  const char* base = nullptr;
  size_t size = 0;
};

enum class Dir : uint8_t { kSend, kRecv };

/// A request as NCCL sees it (void*). Lives in its comm's ring.
struct Request {
  uint32_t magic = 0;
  bool inUse = false;
  class CommBase* comm = nullptr;
  uint64_t seq = 0;
  int n = 1;
  /// Transport messages posted so far. Send: 1 (or 2 with a header); receive: the number of
  /// buffers whose payload receive is posted.
  int posted = 0;
  bool fullyPosted = false;
  // Per buffer (send: only [0]).
  void* data[kMaxGroupedRecvs];
  size_t capacity[kMaxGroupedRecvs];
  int tags[kMaxGroupedRecvs];
  size_t bytes[kMaxGroupedRecvs];
  bool filled[kMaxGroupedRecvs];
  transport::Request* payload[kMaxGroupedRecvs];
  bool payloadDone[kMaxGroupedRecvs];
  // Grouped mode: the header message (send: posted first; receive: the current arrival's).
  transport::Request* header = nullptr;
  bool headerPosted = false;
  bool headerDone = false;
  transport::Meta headerMeta{};
};

class CommBase {
 public:
  CommBase(uint32_t magic, Dir dir, std::shared_ptr<transport::Transport> tp, int maxRecvs);
  virtual ~CommBase() = default;

  uint32_t magic;
  const Dir dir;
  const bool grouped;  ///< maxRecvs > 1: header + payload per send
  std::shared_ptr<transport::Transport> tp;
  Status broken;

  /// A free ring slot for a new request, or null when the ring is full.
  Request* take();
  void release(Request* r);
  /// Posts transport messages of requests in FIFO order as far as the transport takes them.
  void pump();
  /// Advances r; true when done (sizes filled), false when pending. Errors break the comm.
  Status testRequest(Request* r, bool* done);

 protected:
  virtual Status postSend(const void* data, size_t size, const transport::Meta& meta,
                          transport::Request** req) = 0;
  virtual Status postRecv(void* data, size_t size, transport::Meta* meta,
                          transport::Request** req) = 0;

 private:
  /// Posts what it can of r; true when r needs no more posting.
  bool advance(Request* r);
  /// Tests one transport request in place (null once done); false on error (comm broken).
  bool poll(transport::Request** tr, bool* done, size_t* size);
  /// When the transport is full: completes transport requests of older posted requests so that
  /// their slots come back even if NCCL tests a younger request first.
  void reap();
  void fail(Status s);

  std::vector<Request> ring_;
  uint64_t next_ = 0;  ///< sequence of the next request
  uint64_t pump_ = 0;  ///< first request not fully posted
};

class SendCommImpl : public CommBase {
 public:
  SendCommImpl(std::shared_ptr<transport::Transport> tp, int maxRecvs,
               std::unique_ptr<transport::SendComm> tc)
      : CommBase(kSendMagic, Dir::kSend, std::move(tp), maxRecvs), tc(std::move(tc)) {}

  std::unique_ptr<transport::SendComm> tc;
  transport::Request* hello = nullptr;
  bool helloPosted = false;
  uint64_t startNs = 0;

 protected:
  Status postSend(const void* data, size_t size, const transport::Meta& meta,
                  transport::Request** req) override {
    return tp->isend(tc.get(), data, size, meta, req);
  }
  Status postRecv(void*, size_t, transport::Meta*, transport::Request**) override {
    return internalError("net plugin: receive posted on a send comm");
  }
};

class RecvCommImpl : public CommBase {
 public:
  RecvCommImpl(std::shared_ptr<transport::Transport> tp, int maxRecvs,
               std::unique_ptr<transport::RecvComm> tc)
      : CommBase(kRecvMagic, Dir::kRecv, std::move(tp), maxRecvs), tc(std::move(tc)) {}

  std::unique_ptr<transport::RecvComm> tc;

 protected:
  Status postSend(const void*, size_t, const transport::Meta&, transport::Request**) override {
    return internalError("net plugin: send posted on a receive comm");
  }
  Status postRecv(void* data, size_t size, transport::Meta* meta,
                  transport::Request** req) override {
    return tp->irecv(tc.get(), data, size, meta, req);
  }
};

struct ListenCommImpl {
  uint32_t magic = kListenMagic;
  int dev = 0;
  int maxRecvs = 1;
  std::shared_ptr<transport::Transport> tp;
  std::unique_ptr<transport::ListenComm> tl;
  /// Accepted by the transport, waiting for the plugin hello.
  std::unique_ptr<transport::RecvComm> accepted;
  transport::Request* hello = nullptr;
  transport::Meta helloMeta{};
  uint64_t acceptedNs = 0;
};

}  // namespace braid::plugin::net::detail
