// Placeholder until the shm backend lands.
#include "transport/backends.h"

namespace braid::transport {

Result<std::unique_ptr<Transport>> createShmTransport(const TransportOptions&) {
  return internalError("shm transport not built yet");
}

}  // namespace braid::transport
