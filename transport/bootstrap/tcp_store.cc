// Placeholder.
#include "transport/bootstrap/bootstrap.h"
namespace braid {
Result<std::unique_ptr<Store>> createTcpStore(const std::string&, int, bool, Deadline) {
  return internalError("not built");
}
int tcpStorePort(Store*) { return -1; }
}  // namespace braid
