// Fuzz target: what a tcp listener and connector decode from their peers (transport/handshake.cc,
// transport/handle.h, transport/tcp/): the connection handle a connect() reads, and the hello a
// listener reads. Byte 0: bit 0 repairs the handle's header and checksum (so that the decoder
// behind them, the job check and the packed address, is reached), bit 1 also gives it this job's
// secret; bits 2..7 cut the hello into pieces of that size. Then sizeof(TcpHandle) bytes of handle
// and the hello bytes. Oracle: no crash or sanitizer report; a handle with a repaired checksum
// passes the header check; another job's handle never dials; a
// refused hello has a reason; a hello is decided once complete.
#include "transport/handshake.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "tests/fuzz/fuzz_check.h"
#include "transport/tcp/connection.h"

using namespace braid::transport;
using detail::kTcpHandshake;
using detail::TcpHandle;

namespace {
constexpr uint64_t kSecret = 0x0123456789abcdefull;
constexpr uint64_t kNonce = 0xfedcba9876543210ull;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + sizeof(TcpHandle)) return 0;
  TransportOptions options;
  options.jobSecret = kSecret;
  options.timeoutMs = 1000;
  const Handshake hs(kTcpHandshake, options);

  // The handle.
  TcpHandle h;
  std::memcpy(&h, data + 1, sizeof(h));
  Handle handle;
  std::memset(handle.bytes, 0, kHandleSize);
  if (data[0] & 1) {
    const uint64_t secret = (data[0] & 2) ? kSecret : h.header.jobSecret;
    h.header = hs.handleHeader(h.header.nonce);
    h.header.jobSecret = secret;
    writeHandle(&h, &handle);
  } else {
    std::memcpy(handle.bytes, &h, sizeof(h));
  }
  std::unique_ptr<SendComm> sendComm;
  TcpHandle read;
  braid::Status s = hs.readHandle(handle, &sendComm, &read);
  if (data[0] & 1) BRAID_FUZZ_CHECK(s.isOk(), "a repaired handle was refused: " + s.message());
  if (s.isOk()) {
    auto dial = hs.dial(read.header, read.address, read.nstreams);
    if (dial.isOk()) {
      BRAID_FUZZ_CHECK(read.header.jobSecret == kSecret, "another job's handle was accepted");
      BRAID_FUZZ_CHECK(dial->hello.nonce == read.header.nonce, "the hello lost the nonce");
    } else {
      BRAID_FUZZ_CHECK(!dial.status().message().empty(), "an error without a message");
    }
  }

  // The hello, fed in pieces as a listener's non-blocking reads would.
  const uint8_t* hello = data + 1 + sizeof(TcpHandle);
  size_t left = size - 1 - sizeof(TcpHandle);
  const size_t piece = 1 + (data[0] >> 2);
  PendingHello p(/*startNs=*/1);
  uint64_t now = 1;
  HelloState state = HelloState::kIncomplete;
  while (state == HelloState::kIncomplete && left > 0) {
    const size_t took = p.take(hello, std::min(piece, left));
    hello += took;
    left -= took;
    std::string why;
    state = hs.check(p, kNonce, now, &why);
    if (state == HelloState::kRefused) BRAID_FUZZ_CHECK(!why.empty(), "refused without a reason");
    if (p.complete()) BRAID_FUZZ_CHECK(state != HelloState::kIncomplete, "complete but undecided");
    if (took == 0) break;
    now += 1000000;
  }
  return 0;
}
