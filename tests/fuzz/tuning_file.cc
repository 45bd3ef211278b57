// Fuzz target: the tuning file (BRAID_TUNING_FILE, collectives/selector/rules.cc). Oracle: no
// crash or sanitizer report; every rule parsed from the input prints (formatRule) as a line that
// parses back to the same line; lookups on the rules work.
#include <cstdint>
#include <string>

#include "collectives/selector/rules.h"
#include "tests/fuzz/fuzz_check.h"

using namespace braid::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto rules = parseTuningRules(text, "fuzz");
  if (!rules.isOk()) {
    BRAID_FUZZ_CHECK(!rules.status().message().empty(), "an error without a message");
    return 0;
  }
  for (const TuningRule& r : rules.value()) {
    const std::string line = formatRule(r);
    auto again = parseTuningRules(line, "formatted");
    BRAID_FUZZ_CHECK(again.isOk() && again->size() == 1,
                     "formatted rule does not parse: '" + line +
                         "': " + (again.isOk() ? "" : again.status().message()));
    BRAID_FUZZ_CHECK(formatRule(again->front()) == line, "rule changes on a round trip: " + line);
    (void)matchRule(rules.value(), r.collective, r.bytes.lo, static_cast<int>(r.ranks.lo & 0xffff),
                    static_cast<int>(r.hosts.lo & 0xffff));
  }
  return 0;
}
