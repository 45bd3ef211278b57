// Fuzz target: the TCP store server's request handling (transport/bootstrap/tcp_store.cc) over
// simulated connections; the input is a script of connects, sends, closes, stalled readers and
// clock steps (see replayStoreServerScript in transport/bootstrap/tcp_store.h). Oracle: no crash
// or sanitizer report, and the replay's own checks: bounded buffering per connection and in
// connections, well-formed reply streams, and a new connection served at the end.
#include <cstdint>

#include "tests/fuzz/fuzz_check.h"
#include "transport/bootstrap/tcp_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::Status s = braid::detail::replayStoreServerScript(data, size);
  BRAID_FUZZ_CHECK(s.isOk(), s.message());
  return 0;
}
