// Fuzz target: the topology file (BRAID_TOPO_FILE, topology/topology_file.cc). Oracle: no crash
// or sanitizer report; an accepted topology formats to text that parses back and formats the
// same (the file format's promise: parsing formatTopology gives the topology back).
#include "topology/topology_file.h"

#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = braid::topo::parseTopology(text, "fuzz");
  if (!t.isOk()) {
    BRAID_FUZZ_CHECK(!t.status().message().empty(), "an error without a message");
    return 0;
  }
  const std::string formatted = braid::topo::formatTopology(t.value());
  auto again = braid::topo::parseTopology(formatted, "formatted");
  BRAID_FUZZ_CHECK(again.isOk(), "formatted topology does not parse: " +
                                     (again.isOk() ? "" : again.status().message()) + "\n" +
                                     formatted);
  BRAID_FUZZ_CHECK(braid::topo::formatTopology(again.value()) == formatted,
                   "topology changes on a round trip:\n" + formatted);
  return 0;
}
