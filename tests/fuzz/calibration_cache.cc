// Fuzz target: the calibration cache file (BRAID_CALIBRATION_CACHE, parseCachedModel in
// collectives/selector/calibration.cc, the model line by FabricModel::parse). The fingerprint
// expected is the input's own first "fingerprint " line, so that the model line gets parsed.
// Oracle: no crash or sanitizer report; an accepted model serializes to a line that parses back
// to the same line.
#include <cstdint>
#include <sstream>
#include <string>

#include "collectives/selector/calibration.h"
#include "tests/fuzz/fuzz_check.h"

using braid::detail::FabricModel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string fingerprint;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("fingerprint ", 0) == 0) fingerprint = line.substr(12);
  }
  auto m = braid::detail::parseCachedModel(text, fingerprint, "fuzz");
  if (!m.isOk()) {
    BRAID_FUZZ_CHECK(!m.status().message().empty(), "an error without a message");
    return 0;
  }
  const std::string line = m->serialize();
  auto again = FabricModel::parse(line);
  BRAID_FUZZ_CHECK(again.isOk(), "serialized model does not parse: " + line);
  BRAID_FUZZ_CHECK(again->serialize() == line, "model changes on a round trip: " + line);
  (void)m->describe();
  return 0;
}
