// The self-checking start of the network transports' connection handles (tcp, ucx): a magic
// and kind naming the transport that made it, a protocol version, the job secret and the
// listener's nonce (HandleHeader), and a checksum over the whole handle. Each transport's handle
// struct starts with a HandleHeader named header and has a field checksum; the rest (addresses,
// streams) is its own.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "braid/status.h"
#include "core/hash.h"
#include "transport/transport.h"

namespace braid::transport {

/// The first 24 bytes of a tcp or ucx handle.
struct HandleHeader {
  uint32_t magic;
  uint16_t kind;
  uint16_t version;
  uint64_t jobSecret;
  uint64_t nonce;  ///< the listener's: its peers' hellos must repeat it
};
static_assert(sizeof(HandleHeader) == 24, "handle header layout");

/// FNV-1a of the handle with its checksum field zero.
template <class H>
uint32_t handleChecksum(H h) {
  h.checksum = 0;
  return fnv1a32(&h, sizeof(h));
}

/// Sets h's checksum and writes h to the start of out, the rest of out zero.
template <class H>
void writeHandle(H* h, Handle* out) {
  static_assert(sizeof(H) <= kHandleSize, "a handle must fit kHandleSize");
  h->checksum = handleChecksum(*h);
  std::memset(out->bytes, 0, kHandleSize);
  std::memcpy(out->bytes, h, sizeof(H));
}

/// kInvalidArgument, in the words of `name` ("tcp", "ucx"), when h was not made by that
/// transport's listen(), speaks another protocol version, or was corrupted.
template <class H>
Status checkHandleHeader(const H& h, uint32_t magic, uint16_t kind, uint16_t version,
                         const std::string& name) {
  if (h.header.magic != magic || h.header.kind != kind) {
    return invalidArgument(name + " connect: the handle was not made by a " + name +
                           " listen() (wrong magic; another transport's handle, or garbage?)");
  }
  if (h.header.version != version) {
    return invalidArgument(name + " connect: handle of protocol version " +
                           std::to_string(h.header.version) + ", this build speaks " +
                           std::to_string(version) + " (mixed braid versions?)");
  }
  if (h.checksum != handleChecksum(h)) {
    return invalidArgument(name + " connect: the handle is corrupted (checksum mismatch)");
  }
  return Status::ok();
}

}  // namespace braid::transport
