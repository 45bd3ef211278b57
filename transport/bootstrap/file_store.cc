// Placeholder.
#include "transport/bootstrap/bootstrap.h"
namespace braid {
Result<std::unique_ptr<Store>> createFileStore(const std::string&) { return internalError("not built"); }
}  // namespace braid
