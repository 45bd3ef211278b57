// The self-checking start of the network transports' connection handles (tcp, ucx): a magic
// and kind naming the transport that made it, a protocol version, and a checksum over the whole
// handle. Each transport's handle struct has the fields magic, kind, version and checksum.
#pragma once

#include <cstdint>
#include <string>

#include "braid/status.h"
#include "core/hash.h"

namespace braid::transport {

/// FNV-1a of the handle with its checksum field zero.
template <class H>
uint32_t handleChecksum(H h) {
  h.checksum = 0;
  return fnv1a32(&h, sizeof(h));
}

/// kInvalidArgument, in the words of `name` ("tcp", "ucx"), when h was not made by that
/// transport's listen(), speaks another protocol version, or was corrupted.
template <class H>
Status checkHandleHeader(const H& h, uint32_t magic, uint16_t kind, uint16_t version,
                         const std::string& name) {
  if (h.magic != magic || h.kind != kind) {
    return invalidArgument(name + " connect: the handle was not made by a " + name +
                           " listen() (wrong magic; another transport's handle, or garbage?)");
  }
  if (h.version != version) {
    return invalidArgument(name + " connect: handle of protocol version " +
                           std::to_string(h.version) + ", this build speaks " +
                           std::to_string(version) + " (mixed braid versions?)");
  }
  if (h.checksum != handleChecksum(h)) {
    return invalidArgument(name + " connect: the handle is corrupted (checksum mismatch)");
  }
  return Status::ok();
}

}  // namespace braid::transport
