// Fuzz target: the tcp backend's receive path (frame headers, striping, EOF, refusals;
// transport/tcp/connection.cc), fed over socket pairs with the peer's bytes already written and
// its side closed. Input: byte 0 picks 1 or 2 streams and the stripe threshold, byte 1 the number
// of posted receives (1..4), bytes 2..5 their sizes (x 16), byte 6 how the rest is split between
// stream 0 and stream 1. Oracle: no crash or sanitizer report; progress ends (every receive
// completes or the connection breaks with an error) within a bounded number of rounds; a
// completed receive never holds more than was posted.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transport/tcp/connection.h"

using braid::transport::Fd;
using braid::transport::Meta;
using braid::transport::detail::TcpRecvComm;
using braid::transport::detail::TcpRequest;

namespace {

bool writeAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 7) return 0;
  const int nstreams = 1 + (data[0] & 1);
  const size_t stripeMin = size_t{64} << ((data[0] >> 1) & 3);
  const int receives = 1 + (data[1] & 3);
  size_t capacity[4];
  for (int i = 0; i < 4; ++i) capacity[i] = size_t{data[2 + i]} * 16;
  const uint8_t* rest = data + 7;
  const size_t restSize = size - 7;
  const size_t first = nstreams == 1 ? restSize : restSize * data[6] / 255;

  std::vector<Fd> ours;
  for (int s = 0; s < nstreams; ++s) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
    const uint8_t* p = s == 0 ? rest : rest + first;
    const size_t n = s == 0 ? first : restSize - first;
    const bool written = writeAll(sv[1], p, n);
    ::close(sv[1]);  // the peer is gone once its bytes are in
    ours.emplace_back(sv[0]);
    if (!written) return 0;
  }
  TcpRecvComm conn(nstreams, stripeMin, "fuzz-peer", std::move(ours));
  std::vector<std::vector<char>> buffers(static_cast<size_t>(receives));
  std::vector<TcpRequest*> posted;
  Meta meta[4];
  for (int i = 0; i < receives; ++i) {
    buffers[static_cast<size_t>(i)].resize(capacity[i]);
    TcpRequest* r = conn.postRecv(buffers[static_cast<size_t>(i)].data(), capacity[i], &meta[i]);
    BRAID_FUZZ_CHECK(r != nullptr, "the request ring refused a receive");
    posted.push_back(r);
  }
  for (int round = 0;; ++round) {
    BRAID_FUZZ_CHECK(round < 10000, "progress does not end on a closed peer");
    conn.progress();
    size_t done = 0;
    for (size_t i = 0; i < posted.size(); ++i) {
      if (!conn.complete(posted[i])) break;
      BRAID_FUZZ_CHECK(posted[i]->size <= capacity[i], "a receive got more than was posted");
      ++done;
    }
    if (done == posted.size()) break;
    if (!conn.broken().isOk()) {
      BRAID_FUZZ_CHECK(!conn.broken().message().empty(), "an error without a message");
      break;
    }
  }
  return 0;
}
