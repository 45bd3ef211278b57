// Placeholder.
#include "transport/bootstrap/bootstrap.h"
namespace braid {
Result<BootstrapInfo> bootstrapFromEnvironment(Deadline) { return internalError("not built"); }
Result<uint64_t> exchangeJobSecret(Store*, int, Deadline) { return internalError("not built"); }
}  // namespace braid
