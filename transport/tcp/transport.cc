// Placeholder until the tcp backend lands.
#include "transport/backends.h"

namespace braid::transport {

Result<std::unique_ptr<Transport>> createTcpTransport(const TransportOptions&) {
  return internalError("tcp transport not built yet");
}

}  // namespace braid::transport
