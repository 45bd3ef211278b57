// Fuzz target: the tuner plugin's rules file (BRAID_TUNER_FILE, plugin/tuner/model.cc). Oracle:
// no crash or sanitizer report; accepted rules have indices inside NCCL's tables.
#include <cstdint>
#include <string>

#include "plugin/nccl_abi.h"
#include "plugin/tuner/model.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto rules = braid::plugin::tuner::parseRules(text);
  if (!rules.isOk()) {
    BRAID_FUZZ_CHECK(!rules.status().message().empty(), "an error without a message");
    return 0;
  }
  for (const auto& r : rules.value()) {
    BRAID_FUZZ_CHECK(r.coll >= 0 && r.coll < 5, "collective index " + std::to_string(r.coll));
    BRAID_FUZZ_CHECK(r.algo >= 0 && r.algo < braid::abi::kNumAlgorithms, "algorithm index");
    BRAID_FUZZ_CHECK(r.proto >= -1 && r.proto < braid::abi::kNumProtocols, "protocol index");
    BRAID_FUZZ_CHECK(r.minBytes <= r.maxBytes, "empty byte range");
  }
  return 0;
}
