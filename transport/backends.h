// Factories of the transport backends (explicitly registered in registry.cc).
#pragma once

#include <memory>

#include "transport/transport.h"

namespace braid::transport {

Result<std::unique_ptr<Transport>> createLoopbackTransport(const TransportOptions& options);
Result<std::unique_ptr<Transport>> createShmTransport(const TransportOptions& options);
Result<std::unique_ptr<Transport>> createTcpTransport(const TransportOptions& options);
/// Only when built with UCX (BRAID_WITH_UCX); registry.cc reports it missing otherwise.
Result<std::unique_ptr<Transport>> createUcxTransport(const TransportOptions& options);

}  // namespace braid::transport
