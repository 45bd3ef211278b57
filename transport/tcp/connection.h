// The data path of the tcp backend: one connection = nstreams non-blocking TCP sockets, progressed
// only by the caller's isend/irecv/test (no helper threads). Internal to transport/tcp/.
//
// Framing. Each message is a 48-byte frame header {magic, size, Meta} on stream 0 followed by the
// payload. A message of at least the stripe threshold (the listener's BRAID_TCP_STRIPE_MIN,
// carried in the handle so that both sides agree) is cut into nstreams contiguous parts of equal
// size (rounded up to 4 KiB), part s on stream s; a smaller one travels whole on stream 0. The
// receiver computes the same split from the header. Every stream keeps FIFO order: stream s works
// through the posted requests in order, skipping those that have no part on it. A request is
// complete when every stream has passed it, so completions form a prefix of the posted sequence.
//
// Cost. A small message is one sendmsg (header and payload gathered; several queued messages in
// one call) and usually one recv into a 64 KiB staging buffer on the receiver; a striped message
// is one header plus nstreams parallel socket transfers, read directly into the user's buffer.
// Requests live in a fixed ring of kMaxRequests per connection: no allocation per message.
//
// Errors. EOF/ECONNRESET give kRemote naming the peer; on the receiver only once every message
// that arrived before the close has been delivered. A message larger than the posted receive
// gives kInvalidUsage on the receiver, which then sends a small error record back on stream 0 and
// closes the connection; the sender reports kInvalidUsage (or kRemote when the record was lost)
// on its next operation that touches the sockets. Any error breaks the connection for good.
//
// A connection is used by one thread at a time; different connections are independent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"
#include "transport/handshake.h"
#include "transport/message.h"
#include "transport/socket.h"
#include "transport/transport.h"

namespace braid::transport::detail {

/// Handles "BTCP" of kind "tc", hellos "BTHL" (transport/handshake.h), protocol version 1.
inline constexpr HandshakeProtocol kTcpHandshake = {"tcp", 0x50435442, 0x7463, 1, 0x4c485442};
/// Frames "BTFR", refusal records "BTER", requests "BTRQ" (transport/message.h).
inline constexpr MessageMagics kTcpMagics = {0x52465442, 0x52455442, 0x51525442};
inline constexpr int kMaxStreams = 16;
inline constexpr int kSocketBufferBytes = 4 << 20;

/// What listen() writes into the Handle and connect() reads back (the fuzz target of the handle
/// decoder builds them too).
struct TcpHandle {
  HandleHeader header;
  uint64_t stripeMin;
  uint32_t nstreams;
  uint32_t checksum;  ///< FNV-1a of the handle with this field zero
  SocketAddress::Packed address;
};
static_assert(sizeof(TcpHandle) <= kHandleSize, "tcp handle must fit kHandleSize");

Status closedError(const std::string& peer);

class TcpConn;

/// What the caller sees as a Request*.
struct TcpRequest : RequestSlot {
  bool striped = false;
  TcpConn* conn = nullptr;
  FrameHeader header;  ///< send: the frame header; receive: the received one
};

struct Stream {
  Fd fd;
  uint64_t seq = 0;   ///< the request this stream works on
  size_t offset = 0;  ///< bytes of that request's portion done (stream 0 counts the header)
  Status stall;       ///< receive side: why this stream stopped at seq
  // Connection setup (send side).
  bool connected = false;
  size_t helloSent = 0;
  Hello hello;
};

/// State and progress shared by both directions.
class TcpConn {
 public:
  TcpConn(bool isSend, int nstreams, size_t stripeMin, std::string peer);

  bool isSend() const { return isSend_; }
  const Status& broken() const { return broken_; }
  /// Send side: false until every stream is connected and has sent its hello.
  bool ready() const { return established_; }
  bool complete(const TcpRequest* r) const { return r->seq < completed_; }

  /// Takes the next slot of the ring, or null when it is still owned by the caller.
  TcpRequest* post(const void* data, size_t size);
  void release(TcpRequest* r);

  /// Moves every stream as far as the sockets allow without blocking.
  void progress();

 protected:
  TcpRequest& slot(uint64_t seq) { return requests_[seq % kMaxRequests]; }

  /// Breaks the connection: keeps the first error, closes the sockets so the peer notices.
  void fail(Status status);
  /// Send side: a failed send or connect.
  void failErrno(const char* what, int err);
  /// A sender whose socket broke looks for the receiver's error record on stream 0.
  Status peerRefusalOr(Status fallback);

  // Receive side: a stream that hits EOF, an error or a refused header stops ("stalls") at its
  // request while the other streams finish the earlier ones, so data sent before the peer closed
  // is still delivered. Once the oldest incomplete request is one a stream stalled at, nothing
  // more can complete and the connection breaks with that stream's error.
  void stall(int s, Status status);
  void stallErrno(int s, int err);
  void breakIfStalled();

  void sendStream0();
  void sendStream(int s);
  bool fillStaging();
  bool acceptHeader(TcpRequest& r);
  void recvStream0();
  void recvStream(int s);

  const bool isSend_;
  bool established_ = true;
  const int nstreams_;
  const size_t stripeMin_;
  const std::string peer_;
  Status broken_;
  std::array<Stream, kMaxStreams> streams_;
  std::array<TcpRequest, kMaxRequests> requests_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t headersKnown_ = 0;  ///< receive: requests whose frame header has been read
  // Receive side, stream 0.
  std::vector<char> staging_;
  size_t stageBegin_ = 0;
  size_t stageEnd_ = 0;
  char rxHeader_[kHeaderBytes];
  RefusalRecord refusal_{};  ///< sent back before breaking, when a header was refused
};

class TcpSendComm : public SendComm, public TcpConn {
 public:
  TcpSendComm(int nstreams, size_t stripeMin, std::string peer);

  /// Starts the non-blocking connects; every stream will send `hello` with its index.
  Status start(const SocketAddress& address, const Hello& hello);
  /// Finishes the connects and sends the hellos; never blocks.
  void progressConnect();
  TcpRequest* postSend(const void* data, size_t size, const Meta& meta);
};

class TcpRecvComm : public RecvComm, public TcpConn {
 public:
  /// fds: the accepted sockets, indexed by stream.
  TcpRecvComm(int nstreams, size_t stripeMin, std::string peer, std::vector<Fd> fds);

  TcpRequest* postRecv(void* data, size_t size, Meta* meta);
};

}  // namespace braid::transport::detail
