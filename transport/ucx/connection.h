// The data path of the ucx backend: one connection = one UCP endpoint on the connection's own
// worker, progressed only by the caller's isend/irecv/test. Internal to transport/ucx/.
//
// Messages travel as UCP tagged messages. A tag is {kind:8, connection tag:32, sequence:24}: the
// connection tag is derived from the listener's nonce and the sender's random connection id (a
// stray endpoint on the listener's worker cannot match our receives), the sequence number makes
// matching exactly FIFO whatever UCP does with unexpected messages.
//
//   small (payload <= kInlineBytes): one kHeader message [48-byte header {magic, size, Meta} |
//       payload], copied into the request's staging slot on both sides (one eager send);
//   large: a 48-byte kHeader message, then the payload as a kData message straight from and into
//       the user's buffers (UCP's rendezvous: CMA within a host, zero-copy over tcp otherwise).
//
// The receiver posts the header receive when irecv is called and the payload receive once the
// header has arrived (so it knows the size: a message larger than the posted receive is refused
// before any payload moves). A refusal goes back to the sender as a kError message, which the
// sender keeps a receive posted for: the sender then fails with kInvalidUsage, the receiver too.
// The listener confirms an accepted connection with a kAccepted message; a sender closed before
// that confirmation waits for it (bounded), so that its hello is not lost with its endpoint.
// Endpoint errors (peer died, connection reset) break the connection with kRemote naming the
// peer; the receiver first delivers what had already arrived.
//
// Requests live in a fixed ring of kMaxRequests per connection with preallocated staging: no
// allocation per message beyond UCP's own request pool.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/status.h"
#include "transport/handshake.h"
#include "transport/message.h"
#include "transport/transport.h"
#include "transport/ucx/worker.h"

namespace braid::transport::ucx {

/// Handles "BUCX" of kind "uc", hellos "BUHL" (transport/handshake.h; sent on the stream API
/// before anything else), protocol version 2 (1 had a 32-byte hello).
inline constexpr HandshakeProtocol kUcxHandshake = {"ucx", 0x58435542, 0x7563, 2, 0x4c485542};
/// Frames "BUFR", refusal records "BUER", requests "BURQ" (transport/message.h).
inline constexpr MessageMagics kUcxMagics = {0x52465542, 0x52455542, 0x51525542};
/// Largest payload that travels inside the header message.
inline constexpr size_t kInlineBytes = 8192;

/// The 32-bit connection tag both ends derive from the listener nonce and the connection id.
uint32_t connectionTag(uint64_t nonce, uint64_t connectionId);

/// One UCP operation of a request.
struct Op {
  void* req = nullptr;  ///< UCP request while in flight
  bool active = false;  ///< posted and not yet reaped
  bool done = false;
  ucs_status_t status = UCS_OK;
  size_t length = 0;  ///< received bytes (receives)
};

class UcxConn;

/// What the caller sees as a Request*.
struct UcxRequest : RequestSlot {
  UcxConn* conn = nullptr;
  char* staging = nullptr;  ///< kHeaderBytes + kInlineBytes of the connection's staging
  bool headerSeen = false;  ///< receive: header parsed (payload posted or copied)
  Op header;
  Op payload;
};

class UcxConn {
 public:
  /// The endpoint is created by the caller with this object as its error handler's argument
  /// (onEndpointError), then handed over with attach().
  UcxConn(bool isSend, std::string peer);
  virtual ~UcxConn();
  UcxConn(const UcxConn&) = delete;
  UcxConn& operator=(const UcxConn&) = delete;

  /// Takes ownership of the worker (this connection's own) and endpoint. Send side: sends hello
  /// on the stream API and posts the receive of a refusal record.
  void attach(std::unique_ptr<Worker> worker, ucp_ep_h ep, uint32_t connTag,
              const Hello* hello = nullptr);
  Worker* worker() const { return worker_.get(); }

  bool isSend() const { return isSend_; }
  const Status& broken() const { return broken_; }
  const std::string& peer() const { return peer_; }

  UcxRequest* postSend(const void* data, size_t size, const Meta& meta);
  UcxRequest* postRecv(void* data, size_t size, Meta* meta);
  /// Progresses the worker and every request; true when r is complete (no error).
  bool complete(UcxRequest* r);
  void progress();
  void release(UcxRequest* r);

  /// The endpoint error handler.
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

 private:
  UcxRequest& slot(uint64_t seq) { return requests_[seq % kMaxRequests]; }
  UcxRequest* take(const void* data, size_t size);
  uint64_t tagOf(uint8_t kind, uint64_t seq) const;
  void sendOp(Op* op, const void* buf, size_t len, uint64_t tag);
  void recvOp(Op* op, void* buf, size_t len, uint64_t tag, uint64_t mask);
  /// Receive side: parses arrived headers, posts payloads, refuses oversized messages.
  void advanceReceives();
  bool opsDone(const UcxRequest& r) const;
  /// Breaks the connection for good (keeps the first error).
  void fail(Status status);
  void refuse(UcxRequest& r);
  void checkRefusal();

  const bool isSend_;
  const std::string peer_;
  uint32_t connTag_ = 0;
  std::unique_ptr<Worker> worker_;
  ucp_ep_h ep_ = nullptr;
  Status broken_;
  std::array<UcxRequest, kMaxRequests> requests_;
  std::vector<char> staging_;
  uint64_t posted_ = 0;
  uint64_t scanned_ = 0;  ///< receive: requests before this one have their header handled
  /// Sender: the receive of the peer's refusal record; receiver: the refusal record it sent.
  Op refusalOp_;
  RefusalRecord refusal_{};
  Hello hello_{};
  Op helloOp_;  ///< send side: the stream send of hello_
  /// The listener's confirmation that it accepted, carrying its pid (receiver: sends it; sender:
  /// receives it).
  uint64_t accepted_ = 0;
  Op acceptOp_;
};

class UcxSendComm : public SendComm, public UcxConn {
 public:
  explicit UcxSendComm(std::string peer) : UcxConn(true, std::move(peer)) {}
};

class UcxRecvComm : public RecvComm, public UcxConn {
 public:
  explicit UcxRecvComm(std::string peer) : UcxConn(false, std::move(peer)) {}
  uint64_t helloConnectionId = 0;  ///< from the peer's validated hello
};

}  // namespace braid::transport::ucx
