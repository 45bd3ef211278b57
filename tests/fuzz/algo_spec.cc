// Fuzz target: BRAID_ALGO (parseAlgoOverrideSpec, collectives/selector/rules.cc) and codec specs
// (BRAID_COMPRESSION style "name:key=value,...", parseCodecSpec in compression/). The first byte
// picks the parser. Oracle: no crash or sanitizer report; errors carry a message; an accepted
// BRAID_ALGO names only algorithms of the table; an accepted codec spec creates its codec.
#include <cstdint>
#include <string>

#include "collectives/selector/rules.h"
#include "compression/codec.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto o = braid::detail::parseAlgoOverrideSpec(text);
    if (!o.isOk()) {
      BRAID_FUZZ_CHECK(!o.status().message().empty(), "an error without a message");
      return 0;
    }
    for (int c = 0; c < braid::detail::kSelectableCollectives; ++c) {
      const auto coll = static_cast<braid::detail::SelCollective>(c);
      const std::string name = o->get(coll);
      if (!name.empty()) {
        BRAID_FUZZ_CHECK(braid::detail::canonicalAlgorithm(coll, name).isOk(),
                         "forced algorithm '" + name + "' is not in the table");
      }
    }
    return 0;
  }
  std::string name;
  braid::CodecOptions options;
  braid::Status s = braid::parseCodecSpec(text, &name, &options);
  if (!s.isOk()) {
    BRAID_FUZZ_CHECK(!s.message().empty(), "an error without a message");
    return 0;
  }
  auto codec = braid::createCodec(name, options);
  if (!codec.isOk()) BRAID_FUZZ_CHECK(!codec.status().message().empty(), "no message");
  return 0;
}
