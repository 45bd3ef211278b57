// What the network backends' connections (tcp, ucx) share about a message: the frame header
// that precedes it on the wire, the record a receiver sends back when it refuses one (a posted
// receive smaller than the message) and both sides' errors for that, and the slot of the fixed
// request ring (kMaxRequests per connection: no allocation per message) that tracks it from
// isend/irecv until test() reports it done. The magics are each backend's own (MessageMagics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/status.h"
#include "transport/transport.h"

namespace braid::transport {

/// The magics of one backend's messages: its own, so that no frame, refusal record or request of
/// one backend passes another's checks.
struct MessageMagics {
  uint32_t frame;    ///< FrameHeader::magic
  uint32_t refusal;  ///< RefusalRecord::magic
  uint32_t request;  ///< RequestSlot::magic while the caller owns the request
};

/// Precedes every message.
struct FrameHeader {
  uint32_t magic;
  uint32_t reserved;
  uint64_t size;
  Meta meta;
};
inline constexpr size_t kHeaderBytes = sizeof(FrameHeader);
static_assert(kHeaderBytes == 48, "frame header layout");

/// Sent back by a receiver that refuses a message (posted receive too small).
struct RefusalRecord {
  uint32_t magic;
  uint32_t code;
  uint64_t messageSize;
  uint64_t postedSize;
};

/// The record refusing a message of messageSize bytes into a posted receive of postedSize.
RefusalRecord refusalRecord(uint32_t magic, uint64_t messageSize, uint64_t postedSize);
/// The receiver's error for that message from peer.
Status messageTooLarge(const std::string& peer, uint64_t messageSize, uint64_t postedSize);
/// The sender's error once peer's refusal record has arrived.
Status refusedByPeer(const std::string& peer, const RefusalRecord& record);

/// A posted message, as the request ring and test() see it; a backend's request derives from it.
struct RequestSlot {
  uint32_t magic = 0;  ///< the backend's request magic while owned by the caller
  bool inUse = false;
  uint64_t seq = 0;
  char* data = nullptr;
  size_t size = 0;      ///< send: message size; receive: received size once the header is in
  size_t capacity = 0;  ///< receive: posted size
  Meta* metaOut = nullptr;

  /// Takes the slot for message seq of size bytes at data (a send's data is only read); false
  /// while it is still in use.
  bool claim(uint32_t requestMagic, uint64_t sequence, const void* buffer, size_t bytes) {
    if (inUse) return false;
    inUse = true;
    magic = requestMagic;
    seq = sequence;
    data = static_cast<char*>(const_cast<void*>(buffer));
    size = bytes;
    capacity = bytes;
    metaOut = nullptr;
    return true;
  }
};

/// isend/irecv's arguments, in the words of backend `name` and its `call`: kInvalidArgument for a
/// null comm or request, or null data of a nonempty message; else *request = nullptr.
Status checkPost(const char* name, const char* call, const void* comm, const void* data,
                 size_t size, Request** request);
/// test()'s arguments: kInvalidUsage when r is not a live request of this backend (null, done is
/// null, or r already completed or went with its connection); else *done = false.
Status checkTest(const char* name, const RequestSlot* r, uint32_t requestMagic, bool* done);

/// test()'s answer for request r of connection c, once c has progressed: done, with its size and
/// the slot released; c's error, the slot released too; or not yet.
template <class Conn, class Req>
Status finishTest(Conn* c, Req* r, bool* done, size_t* size) {
  if (c->complete(r)) {
    *done = true;
    if (size != nullptr) *size = r->size;
    c->release(r);
    return Status::ok();
  }
  if (!c->broken().isOk()) {
    Status s = c->broken();
    c->release(r);
    return s;
  }
  return Status::ok();
}

}  // namespace braid::transport
