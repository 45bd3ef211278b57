// The point-to-point interface every backend implements, shaped like NCCL's net API so that
// plugin/net/ can export it directly:
//
//   receiver: listen(&handle, &listen)  -> handle travels to the sender out of band (the Store)
//   sender:   connect(handle, &send)    -> never blocks; the SendComm becomes usable later
//   receiver: accept(listen, &recv)     -> never blocks; *recv stays null until a peer arrived
//   isend/irecv post one message each, matched in FIFO order per connection; test() progresses
//   and reports completion and the received size. A receive buffer may be larger than the sent
//   message; a sent message larger than the posted receive is an error on both sides.
//
// Every message also carries a 32-byte Meta block that the transport delivers untouched (the
// communicator puts its sequence number and collective fingerprint there; the NCCL plugin its
// tag). Backends detect dead peers themselves (socket EOF, shm peer pid gone) and report kRemote
// naming the peer; the caller owns deadlines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "braid/status.h"
#include "core/params.h"

namespace braid::transport {

inline constexpr size_t kHandleSize = 128;

/// Opaque connect information created by listen(); at most 128 bytes, position independent.
struct Handle {
  alignas(8) uint8_t bytes[kHandleSize];
};

/// Opaque per-message metadata delivered with the message.
struct Meta {
  uint64_t words[4];
};

/// Backend-owned request; valid from a successful isend/irecv until test() reports done (or the
/// connection is destroyed).
class Request;

class ListenComm {
 public:
  virtual ~ListenComm() = default;
};
class SendComm {
 public:
  virtual ~SendComm() = default;
};
class RecvComm {
 public:
  virtual ~RecvComm() = default;
};

struct TransportOptions {
  /// Per-job secret from the bootstrap. Handles carry it and connections present it; a
  /// connection that does not present the listener's secret is refused.
  uint64_t jobSecret = 0;
  /// Used in log and error messages only.
  int rank = -1;
  /// tcp: the local IPv4/IPv6 address to listen on and to put into handles. Empty: the interface
  /// chosen by BRAID_SOCKET_IFNAME, else the first non-loopback interface that is up, else
  /// 127.0.0.1.
  std::string tcpAddress;
  /// Deadline of the listener's wait for a connecting peer's hello, in ms (the owner's
  /// BRAID_TIMEOUT_MS, handed down; see timeoutMsFromEnvironment).
  int64_t timeoutMs = kDefaultTimeoutMs;
};

/// Requests that may be in flight per connection (NCCL asks for at least 32).
inline constexpr int kMaxRequests = 64;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;

  /// Creates an endpoint that accepts exactly one connection; fills *handle.
  virtual Status listen(Handle* handle, std::unique_ptr<ListenComm>* listenComm) = 0;
  /// Starts connecting to the listener described by handle. Returns at once; *sendComm is set at
  /// once, and isend on it returns a null request until the connection is established.
  /// Malformed or foreign handles give kInvalidArgument.
  virtual Status connect(const Handle& handle, std::unique_ptr<SendComm>* sendComm) = 0;
  /// Progresses the establishment that connect() started, without sending anything; *ready is
  /// set once the connection is usable. Callers that wait for their peers to accept() must keep
  /// calling this (or isend) meanwhile: a connection over a real network does not complete inside
  /// connect(). Backends whose connect() completes at once keep the default.
  virtual Status progressConnect(SendComm* sendComm, bool* ready) {
    (void)sendComm;
    *ready = true;
    return Status::ok();
  }
  /// Non-blocking: sets *recvComm once a peer has connected (and presented the right secret),
  /// leaves it null otherwise.
  virtual Status accept(ListenComm* listenComm, std::unique_ptr<RecvComm>* recvComm) = 0;

  /// Posts a send. *request is null when the connection cannot take it yet (not connected, too
  /// many requests in flight): call again later. data must stay valid until completion.
  virtual Status isend(SendComm* comm, const void* data, size_t size, const Meta& meta,
                       Request** request) = 0;
  /// Posts a receive of at most size bytes; meta (may be null) is filled on completion.
  virtual Status irecv(RecvComm* comm, void* data, size_t size, Meta* meta, Request** request) = 0;
  /// Progresses the connection of request; *done set when complete (the request is then freed),
  /// *size (may be null) = bytes actually sent/received. An error frees the request too.
  virtual Status test(Request* request, bool* done, size_t* size) = 0;
};

/// Backends by name: "loopback", "shm", "tcp" (and "ucx" when built). Explicit registration, no
/// static initializers. kInvalidArgument for an unknown name, listing the known ones.
Result<std::unique_ptr<Transport>> createTransport(const std::string& name,
                                                   const TransportOptions& options);

}  // namespace braid::transport
