#include "transport/message.h"

#include <string>

namespace braid::transport {

RefusalRecord refusalRecord(uint32_t magic, uint64_t messageSize, uint64_t postedSize) {
  return RefusalRecord{magic, static_cast<uint32_t>(Code::kInvalidUsage), messageSize, postedSize};
}

Status messageTooLarge(const std::string& peer, uint64_t messageSize, uint64_t postedSize) {
  return invalidUsage("message of " + std::to_string(messageSize) + " bytes from peer " + peer +
                      " is larger than the posted receive of " + std::to_string(postedSize) +
                      " bytes");
}

Status refusedByPeer(const std::string& peer, const RefusalRecord& record) {
  return invalidUsage("peer " + peer + " refused a message of " +
                      std::to_string(record.messageSize) + " bytes: its posted receive has " +
                      std::to_string(record.postedSize) +
                      " bytes (post receives at least as large as the matching sends)");
}

Status checkPost(const char* name, const char* call, const void* comm, const void* data,
                 size_t size, Request** request) {
  if (comm == nullptr || request == nullptr || (data == nullptr && size > 0)) {
    return invalidArgument(std::string(name) + " " + call + ": null comm, request or data");
  }
  *request = nullptr;
  return Status::ok();
}

Status checkTest(const char* name, const RequestSlot* r, uint32_t requestMagic, bool* done) {
  if (done == nullptr || r == nullptr || r->magic != requestMagic) {
    return invalidUsage(std::string(name) + " test: not a live " + name +
                        " request (already completed, or freed with its connection?)");
  }
  *done = false;
  return Status::ok();
}

}  // namespace braid::transport
