// tcp-specific behaviour: striping over several streams, hello validation against raw sockets,
// malformed handles, dead peers, many requests in flight, socket utilities. The generic
// behaviour every backend shares is in transport_test.cc.
//
// The raw-socket tests speak the wire format on purpose (the handle layout of
// transport/tcp/transport.cc and the hello of transport/tcp/connection.h, mirrored below); a
// change there must be mirrored here.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/params.h"
#include "transport/socket.h"
#include "transport/transport.h"
#include "tests/unit/transport/request_helpers.h"

namespace braid::transport {
namespace {

using test_util::postRecv;
using test_util::postSend;
using test_util::waitRequest;

constexpr uint64_t kSecret = 0x1234abcd5678ef01ull;
constexpr uint64_t kOtherSecret = 0x0fedcba987654321ull;
constexpr int64_t kWaitMs = 60000;
constexpr int64_t kPeerDeathMs = 2000;
constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kStripeMin = 262144;  // BRAID_TCP_STRIPE_MIN default

// Wire layouts (mirrors of transport/tcp/transport.cc and connection.h).
struct WireHandle {
  uint32_t magic;
  uint16_t kind;
  uint16_t version;
  uint64_t jobSecret;
  uint64_t nonce;
  uint64_t stripeMin;
  uint32_t nstreams;
  uint32_t checksum;
  SocketAddress::Packed address;
};
struct WireHello {
  uint32_t magic;
  uint16_t version;
  uint16_t streamIndex;
  uint32_t nstreams;
  uint32_t reserved;
  uint64_t jobSecret;
  uint64_t nonce;
  uint64_t connectionId;
};
constexpr uint32_t kHelloMagic = 0x4c485442;

WireHandle decode(const Handle& h) {
  WireHandle w;
  std::memcpy(&w, h.bytes, sizeof(w));
  return w;
}

Meta makeMeta(uint64_t i) {
  return Meta{{i, ~i, 0x7463702d6d657461ull, i * 0x9e3779b97f4a7c15ull}};
}
bool sameMeta(const Meta& a, const Meta& b) { return std::memcmp(&a, &b, sizeof(Meta)) == 0; }

void fillPattern(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 7;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::memcpy(p + i, &x, 8);
  }
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  for (; i < n; ++i) p[i] = static_cast<uint8_t>(x >> (8 * (i % 8)));
}

std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  fillPattern(v.data(), n, seed);
  return v;
}

bool matches(const uint8_t* p, size_t n, uint64_t seed) {
  std::vector<uint8_t> want = pattern(n, seed);
  return n == 0 || std::memcmp(p, want.data(), n) == 0;
}

std::unique_ptr<Transport> makeTransport(uint64_t secret = kSecret,
                                         const std::string& address = "127.0.0.1",
                                         int64_t timeoutMs = kDefaultTimeoutMs) {
  TransportOptions options;
  options.jobSecret = secret;
  options.rank = 0;
  options.tcpAddress = address;
  options.timeoutMs = timeoutMs;
  auto t = createTransport("tcp", options);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? std::move(t).value() : nullptr;
}

struct Pair {
  std::unique_ptr<ListenComm> listen;
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  Handle handle;
};

/// Listens, connects and accepts (the hellos are progressed by a zero-byte message).
Status makePair(Transport* t, Pair* p) {
  BRAID_RETURN_IF_ERROR(t->listen(&p->handle, &p->listen));
  BRAID_RETURN_IF_ERROR(t->connect(p->handle, &p->send));
  Deadline deadline = Deadline::afterMs(kWaitMs);
  Request* s = nullptr;
  Backoff backoff;
  while (!p->recv || s == nullptr) {
    if (deadline.expired()) return timeoutError("pair was not established");
    if (s == nullptr) BRAID_RETURN_IF_ERROR(t->isend(p->send.get(), nullptr, 0, Meta{}, &s));
    if (!p->recv) BRAID_RETURN_IF_ERROR(t->accept(p->listen.get(), &p->recv));
    backoff.pause();
  }
  Request* r = nullptr;
  BRAID_RETURN_IF_ERROR(postRecv(t, p->recv.get(), nullptr, 0, nullptr, &r, deadline));
  BRAID_RETURN_IF_ERROR(waitRequest(t, s, nullptr, deadline));
  return waitRequest(t, r, nullptr, deadline);
}

/// Sends and receives each size in turn from one thread (both ends non-blocking).
void exchange(Transport* t, Pair* p, const std::vector<size_t>& sizes) {
  Deadline deadline = Deadline::afterMs(kWaitMs);
  for (size_t i = 0; i < sizes.size(); ++i) {
    size_t n = sizes[i];
    std::vector<uint8_t> out = pattern(n, i + 1);
    std::vector<uint8_t> in(n + 64, 0xab);
    Request* sreq = nullptr;
    Request* rreq = nullptr;
    Meta meta{};
    ASSERT_TRUE(postRecv(t, p->recv.get(), in.data(), in.size(), &meta, &rreq, deadline).isOk());
    ASSERT_TRUE(postSend(t, p->send.get(), out.data(), n, makeMeta(i), &sreq, deadline).isOk());
    bool sdone = false;
    bool rdone = false;
    size_t got = 0;
    size_t sent = 0;
    while (!sdone || !rdone) {
      ASSERT_FALSE(deadline.expired()) << "size " << n;
      if (!sdone) {
        ASSERT_TRUE(t->test(sreq, &sdone, &sent).isOk());
      }
      if (!rdone) {
        ASSERT_TRUE(t->test(rreq, &rdone, &got).isOk());
      }
    }
    ASSERT_EQ(sent, n);
    ASSERT_EQ(got, n) << "size " << n;
    ASSERT_TRUE(sameMeta(meta, makeMeta(i)));
    ASSERT_TRUE(matches(in.data(), n, i + 1)) << "size " << n << " arrived corrupted";
    for (size_t k = n; k < in.size(); ++k) ASSERT_EQ(in[k], 0xab) << "byte past the message";
  }
}

/// Bytes received by this process's TCP sockets whose local port is `port` (accepted streams),
/// one entry per socket.
std::vector<uint64_t> bytesReceivedOnPort(int port) {
  std::vector<uint64_t> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    int fd = atoi(e->d_name);
    if (fd <= 2) continue;
    SocketAddress local = localAddress(fd);
    if (local.port() != port) continue;
    tcp_info info;
    socklen_t len = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    if (info.tcpi_state != 1 /* TCP_ESTABLISHED */) continue;
    out.push_back(info.tcpi_bytes_received);
  }
  closedir(d);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Striping

class TcpStripingTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { setParamForTesting("BRAID_TCP_STREAMS", std::to_string(GetParam())); }
  void TearDown() override { setParamForTesting("BRAID_TCP_STREAMS", ""); }
};

TEST_P(TcpStripingTest, SizesAroundTheStripeThresholdAnd64MiB) {
  auto t = makeTransport();
  ASSERT_NE(t, nullptr);
  Pair p;
  ASSERT_TRUE(makePair(t.get(), &p).isOk());
  const int streams = GetParam();
  std::vector<size_t> sizes = {0,
                               1,
                               47,
                               4095,
                               kStripeMin - 1,
                               kStripeMin,
                               kStripeMin + 1,
                               kStripeMin + 4096 * static_cast<size_t>(streams) - 1,
                               1000003,
                               4 * kMiB + 7,
                               64 * kMiB};
  exchange(t.get(), &p, sizes);
  // With several streams the 64 MiB message went over all of them in near-equal parts.
  std::vector<uint64_t> received = bytesReceivedOnPort(decode(p.handle).address.port);
  ASSERT_EQ(received.size(), static_cast<size_t>(streams));
  for (uint64_t bytes : received) {
    EXPECT_GE(bytes, 64 * kMiB / static_cast<size_t>(streams) - 4096) << streams << " streams";
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, TcpStripingTest, ::testing::Values(1, 2, 3, 4, 16));

TEST(TcpTransportTest, StripeThresholdComesFromTheListener) {
  // Listener and connector disagree on BRAID_TCP_STRIPE_MIN: the handle decides.
  setParamForTesting("BRAID_TCP_STRIPE_MIN", "4096");
  auto listener = makeTransport();
  setParamForTesting("BRAID_TCP_STRIPE_MIN", "");
  auto connector = makeTransport();
  ASSERT_TRUE(listener && connector);
  Pair p;
  ASSERT_TRUE(listener->listen(&p.handle, &p.listen).isOk());
  ASSERT_TRUE(connector->connect(p.handle, &p.send).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  for (size_t n : {size_t{5000}, size_t{100000}, size_t{3 * kMiB}}) {
    std::vector<uint8_t> out = pattern(n, n);
    std::vector<uint8_t> in(n);
    Request* s = nullptr;
    Request* r = nullptr;
    while (!p.recv) {
      ASSERT_FALSE(deadline.expired());
      if (s == nullptr) {
        ASSERT_TRUE(connector->isend(p.send.get(), out.data(), n, Meta{}, &s).isOk());
      }
      ASSERT_TRUE(listener->accept(p.listen.get(), &p.recv).isOk());
    }
    if (s == nullptr) {
      ASSERT_TRUE(
          postSend(connector.get(), p.send.get(), out.data(), n, Meta{}, &s, deadline).isOk());
    }
    ASSERT_TRUE(postRecv(listener.get(), p.recv.get(), in.data(), n, nullptr, &r, deadline).isOk());
    bool sdone = false;
    bool rdone = false;
    while (!sdone || !rdone) {
      ASSERT_FALSE(deadline.expired());
      if (!sdone) {
        ASSERT_TRUE(connector->test(s, &sdone, nullptr).isOk());
      }
      if (!rdone) {
        ASSERT_TRUE(listener->test(r, &rdone, nullptr).isOk());
      }
    }
    ASSERT_TRUE(matches(in.data(), n, n)) << n;
  }
}

// ---------------------------------------------------------------------------------------------
// Many requests in flight

TEST(TcpTransportTest, SixtyFourRequestsInFlightCompleteInOrderWhateverOrderTheyAreTested) {
  auto t = makeTransport();
  ASSERT_NE(t, nullptr);
  Pair p;
  ASSERT_TRUE(makePair(t.get(), &p).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  constexpr int kCount = kMaxRequests;
  static_assert(kCount >= 32, "NCCL asks for at least 32 requests in flight");
  auto sizeOf = [](int i) -> size_t {
    return i % 9 == 0 ? 0 : i % 5 == 0 ? kStripeMin + 12345 * static_cast<size_t>(i) : 97 * i;
  };
  std::vector<std::vector<uint8_t>> out(kCount);
  std::vector<std::vector<uint8_t>> in(kCount);
  std::vector<Meta> metas(kCount);
  std::vector<Request*> sreqs(kCount, nullptr);
  std::vector<Request*> rreqs(kCount, nullptr);
  for (int i = 0; i < kCount; ++i) {
    in[i].assign(sizeOf(i) + 1, 0);
    Status s = t->irecv(p.recv.get(), in[i].data(), in[i].size(), &metas[i], &rreqs[i]);
    ASSERT_TRUE(s.isOk()) << s.toString();
    ASSERT_NE(rreqs[i], nullptr) << "receive " << i << " of " << kCount << " refused";
  }
  for (int i = 0; i < kCount; ++i) {
    out[i] = pattern(sizeOf(i), static_cast<uint64_t>(i));
    Status s = t->isend(p.send.get(), out[i].data(), out[i].size(), makeMeta(i), &sreqs[i]);
    ASSERT_TRUE(s.isOk()) << s.toString();
    ASSERT_NE(sreqs[i], nullptr) << "send " << i << " of " << kCount << " refused";
  }
  // The ring is full: one more of each is "not now", not an error.
  Request* extra = nullptr;
  uint8_t byte = 0;
  ASSERT_TRUE(t->isend(p.send.get(), &byte, 1, Meta{}, &extra).isOk());
  EXPECT_EQ(extra, nullptr);
  ASSERT_TRUE(t->irecv(p.recv.get(), &byte, 1, nullptr, &extra).isOk());
  EXPECT_EQ(extra, nullptr);
  // Testing only the last request of each side must move all of them (progress is per comm).
  size_t got = 0;
  ASSERT_TRUE(waitRequest(t.get(), sreqs[kCount - 1], nullptr, deadline).isOk());
  ASSERT_TRUE(waitRequest(t.get(), rreqs[kCount - 1], &got, deadline).isOk());
  EXPECT_EQ(got, sizeOf(kCount - 1));
  for (int i = kCount - 2; i >= 0; --i) {
    bool done = false;
    ASSERT_TRUE(t->test(sreqs[i], &done, nullptr).isOk());
    EXPECT_TRUE(done) << "send " << i << " not done although a later one is";
    ASSERT_TRUE(t->test(rreqs[i], &done, &got).isOk());
    EXPECT_TRUE(done) << "receive " << i << " not done although a later one is";
    EXPECT_EQ(got, sizeOf(i));
    EXPECT_TRUE(sameMeta(metas[i], makeMeta(i)));
    EXPECT_TRUE(matches(in[i].data(), sizeOf(i), static_cast<uint64_t>(i))) << "message " << i;
  }
  // Slots are free again.
  ASSERT_TRUE(t->isend(p.send.get(), &byte, 1, Meta{}, &extra).isOk());
  EXPECT_NE(extra, nullptr);
}

TEST(TcpTransportTest, ReceiveSmallerThanMessageIsInvalidUsageOnBothSides) {
  auto t = makeTransport();
  ASSERT_NE(t, nullptr);
  Pair p;
  ASSERT_TRUE(makePair(t.get(), &p).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::vector<uint8_t> out = pattern(8 * kMiB, 1);
  std::vector<uint8_t> in(kMiB);
  Request* s = nullptr;
  Request* r = nullptr;
  ASSERT_TRUE(postSend(t.get(), p.send.get(), out.data(), out.size(), Meta{}, &s, deadline).isOk());
  ASSERT_TRUE(postRecv(t.get(), p.recv.get(), in.data(), in.size(), nullptr, &r, deadline).isOk());
  Status rs = waitRequest(t.get(), r, nullptr, deadline);
  EXPECT_EQ(rs.code(), Code::kInvalidUsage) << rs.toString();
  EXPECT_NE(rs.message().find("8388608"), std::string::npos) << rs.toString();
  // The send may have completed into the socket buffers before the refusal; then the sender
  // learns of it on its next message, from the error record the receiver sent back.
  Status ss = waitRequest(t.get(), s, nullptr, deadline);
  if (ss.isOk()) {
    ss = postSend(t.get(), p.send.get(), out.data(), out.size(), Meta{}, &s, deadline);
    if (ss.isOk()) ss = waitRequest(t.get(), s, nullptr, deadline);
  }
  EXPECT_EQ(ss.code(), Code::kInvalidUsage) << ss.toString();
  // The connection stays broken.
  Request* again = nullptr;
  EXPECT_FALSE(t->irecv(p.recv.get(), in.data(), in.size(), nullptr, &again).isOk());
}

TEST(TcpTransportTest, ClosedSenderStillDeliversStripedMessagesSentBeforeTheClose) {
  auto t = makeTransport();
  ASSERT_NE(t, nullptr);
  Pair p;
  ASSERT_TRUE(makePair(t.get(), &p).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::vector<uint8_t> big = pattern(6 * kMiB + 5, 11);
  std::vector<uint8_t> small = pattern(300, 12);
  Request* s = nullptr;
  ASSERT_TRUE(
      postSend(t.get(), p.send.get(), big.data(), big.size(), makeMeta(1), &s, deadline).isOk());
  // Sends what fits in the socket buffers before the receiver posts anything; then closes only
  // after both messages have been handed to the kernel.
  ASSERT_TRUE(waitRequest(t.get(), s, nullptr, deadline).isOk());
  ASSERT_TRUE(postSend(t.get(), p.send.get(), small.data(), small.size(), makeMeta(2), &s, deadline)
                  .isOk());
  ASSERT_TRUE(waitRequest(t.get(), s, nullptr, deadline).isOk());
  p.send.reset();
  std::vector<uint8_t> in(8 * kMiB);
  Request* r[3] = {nullptr, nullptr, nullptr};
  for (Request*& req : r) {
    ASSERT_TRUE(
        postRecv(t.get(), p.recv.get(), in.data(), in.size(), nullptr, &req, deadline).isOk());
  }
  size_t got = 0;
  // The third receive is tested first: it fails only after the first two completed.
  Status third = waitRequest(t.get(), r[2], nullptr, deadline);
  EXPECT_EQ(third.code(), Code::kRemote) << third.toString();
  ASSERT_TRUE(waitRequest(t.get(), r[0], &got, deadline).isOk());
  EXPECT_EQ(got, big.size());
  ASSERT_TRUE(waitRequest(t.get(), r[1], &got, deadline).isOk());
  EXPECT_EQ(got, small.size());
  EXPECT_TRUE(matches(in.data(), small.size(), 12));
}

// ---------------------------------------------------------------------------------------------
// Handles

TEST(TcpTransportTest, ForeignAndGarbageHandlesAreInvalidArgument) {
  auto t = makeTransport();
  ASSERT_NE(t, nullptr);
  Handle good;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t->listen(&good, &listen).isOk());
  std::vector<Handle> bad(6, good);
  std::memset(bad[0].bytes, 0, kHandleSize);
  std::mt19937_64 rng(7);
  for (uint8_t& b : bad[1].bytes) b = static_cast<uint8_t>(rng());
  bad[2].bytes[0] ^= 1;   // magic
  bad[3].bytes[40] ^= 1;  // address family (checksum no longer matches)
  bad[4].bytes[6] ^= 1;   // version
  bad[5].bytes[12] ^= 1;  // job secret
  for (size_t i = 0; i < bad.size(); ++i) {
    std::unique_ptr<SendComm> send;
    Status s = t->connect(bad[i], &send);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "handle " << i << ": " << s.toString();
    EXPECT_EQ(send, nullptr);
  }
  // A well-formed handle of another job.
  auto other = makeTransport(kOtherSecret);
  std::unique_ptr<SendComm> send;
  Status s = other->connect(good, &send);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.toString();
  EXPECT_NE(s.message().find("another job"), std::string::npos) << s.toString();
}

TEST(TcpTransportTest, BadListenAddressIsInvalidArgument) {
  auto t = makeTransport(kSecret, "not-an-address");
  ASSERT_NE(t, nullptr);
  Handle h;
  std::unique_ptr<ListenComm> listen;
  Status s = t->listen(&h, &listen);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.toString();
}

TEST(TcpTransportTest, IPv6Loopback) {
  auto t = makeTransport(kSecret, "::1");
  ASSERT_NE(t, nullptr);
  Pair p;
  Status s = t->listen(&p.handle, &p.listen);
  if (!s.isOk()) GTEST_SKIP() << "no IPv6 loopback here: " << s.toString();
  p.listen.reset();
  ASSERT_TRUE(makePair(t.get(), &p).isOk());
  exchange(t.get(), &p, {0, 100, 3 * kMiB});
}

// ---------------------------------------------------------------------------------------------
// Hello validation against raw sockets

/// Connects a plain socket to the listener of `h`.
Fd rawConnect(const Handle& h) {
  auto address = SocketAddress::unpack(decode(h).address);
  EXPECT_TRUE(address.isOk());
  auto fd = connectTo(address.value(), Deadline::afterMs(kWaitMs));
  EXPECT_TRUE(fd.isOk()) << fd.status().toString();
  return fd.isOk() ? std::move(fd.value()) : Fd();
}

WireHello helloFor(const Handle& h, uint16_t stream) {
  WireHandle w = decode(h);
  WireHello hello;
  std::memset(&hello, 0, sizeof(hello));
  hello.magic = kHelloMagic;
  hello.version = w.version;
  hello.streamIndex = stream;
  hello.nstreams = w.nstreams;
  hello.jobSecret = w.jobSecret;
  hello.nonce = w.nonce;
  hello.connectionId = 42;
  return hello;
}

/// True once the listener has closed `fd` (EOF or reset).
bool closedByPeer(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/// Calls accept until every raw socket was closed by the listener; no comm may appear.
void expectRefused(Transport* t, ListenComm* listen, const std::vector<int>& fds, int64_t ms) {
  Deadline deadline = Deadline::afterMs(ms);
  std::vector<bool> closed(fds.size(), false);
  size_t remaining = fds.size();
  while (remaining > 0) {
    ASSERT_FALSE(deadline.expired()) << remaining << " bad connection(s) not refused";
    std::unique_ptr<RecvComm> recv;
    ASSERT_TRUE(t->accept(listen, &recv).isOk());
    ASSERT_EQ(recv, nullptr) << "a bad connection was accepted";
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!closed[i] && closedByPeer(fds[i])) {
        closed[i] = true;
        --remaining;
      }
    }
    usleep(1000);
  }
}

void sendRaw(int fd, const void* data, size_t n) {
  ASSERT_TRUE(writeAll(fd, data, n, Deadline::afterMs(kWaitMs), "listener").isOk());
}

TEST(TcpTransportTest, BadHellosAreRefusedAndTheRightPeerIsAcceptedAfterwards) {
  // A short hello timeout so that the silent socket is refused quickly.
  auto t = makeTransport(kSecret, "127.0.0.1", /*timeoutMs=*/500);
  ASSERT_NE(t, nullptr);
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t->listen(&handle, &listen).isOk());

  std::vector<Fd> raws;
  // Wrong job secret.
  raws.push_back(rawConnect(handle));
  WireHello wrongSecret = helloFor(handle, 0);
  wrongSecret.jobSecret = kOtherSecret;
  sendRaw(raws.back().get(), &wrongSecret, sizeof(wrongSecret));
  // Wrong nonce (a handle of another listener).
  raws.push_back(rawConnect(handle));
  WireHello wrongNonce = helloFor(handle, 0);
  wrongNonce.nonce ^= 0x5555;
  sendRaw(raws.back().get(), &wrongNonce, sizeof(wrongNonce));
  // Garbage.
  raws.push_back(rawConnect(handle));
  const char garbage[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  sendRaw(raws.back().get(), garbage, sizeof(garbage));
  // Out-of-range stream index.
  raws.push_back(rawConnect(handle));
  WireHello badStream = helloFor(handle, 200);
  sendRaw(raws.back().get(), &badStream, sizeof(badStream));
  // Half a hello, then silence.
  raws.push_back(rawConnect(handle));
  WireHello half = helloFor(handle, 0);
  sendRaw(raws.back().get(), &half, sizeof(half) / 2);
  // Nothing at all.
  raws.push_back(rawConnect(handle));

  std::vector<int> fds;
  for (const Fd& f : raws) fds.push_back(f.get());
  expectRefused(t.get(), listen.get(), fds, 10000);

  // The right peer still gets in, and data flows.
  std::unique_ptr<SendComm> send;
  ASSERT_TRUE(t->connect(handle, &send).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::unique_ptr<RecvComm> recv;
  Request* s = nullptr;
  std::vector<uint8_t> out = pattern(kMiB, 9);
  while (!recv) {
    ASSERT_FALSE(deadline.expired());
    if (s == nullptr) {
      ASSERT_TRUE(t->isend(send.get(), out.data(), out.size(), Meta{}, &s).isOk());
    }
    ASSERT_TRUE(t->accept(listen.get(), &recv).isOk());
  }
  if (s == nullptr) {
    ASSERT_TRUE(postSend(t.get(), send.get(), out.data(), out.size(), Meta{}, &s, deadline).isOk());
  }
  std::vector<uint8_t> in(kMiB);
  Request* r = nullptr;
  ASSERT_TRUE(postRecv(t.get(), recv.get(), in.data(), in.size(), nullptr, &r, deadline).isOk());
  ASSERT_TRUE(waitRequest(t.get(), s, nullptr, deadline).isOk());
  ASSERT_TRUE(waitRequest(t.get(), r, nullptr, deadline).isOk());
  EXPECT_TRUE(matches(in.data(), in.size(), 9));
}

TEST(TcpTransportTest, CorrectHellosFromARawPeerAreAccepted) {
  // The mirror layouts above are right: a raw peer presenting correct hellos gets a RecvComm.
  auto t = makeTransport();
  ASSERT_NE(t, nullptr);
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t->listen(&handle, &listen).isOk());
  std::vector<Fd> raws;
  for (uint16_t s = 0; s < decode(handle).nstreams; ++s) {
    raws.push_back(rawConnect(handle));
    WireHello hello = helloFor(handle, s);
    sendRaw(raws.back().get(), &hello, sizeof(hello));
  }
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::unique_ptr<RecvComm> recv;
  while (!recv) {
    ASSERT_FALSE(deadline.expired());
    ASSERT_TRUE(t->accept(listen.get(), &recv).isOk());
  }
  // Accepting again is a usage error: a listener serves one connection.
  std::unique_ptr<RecvComm> second;
  EXPECT_EQ(t->accept(listen.get(), &second).code(), Code::kInvalidUsage);
}

// ---------------------------------------------------------------------------------------------
// Dead peers

void childSetup() { prctl(PR_SET_PDEATHSIG, SIGKILL); }

int reap(pid_t pid) {
  int status = 0;
  Deadline deadline = Deadline::afterMs(kWaitMs);
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (deadline.expired()) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1000;
    }
    usleep(1000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

TEST(TcpTransportTest, KilledReceiverGivesRemoteErrorWithinTwoSeconds) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    childSetup();
    close(fds[0]);
    auto t = makeTransport();
    Handle handle;
    std::unique_ptr<ListenComm> listen;
    if (!t || !t->listen(&handle, &listen).isOk()) _exit(2);
    if (write(fds[1], &handle, sizeof(handle)) != sizeof(handle)) _exit(3);
    Deadline deadline = Deadline::afterMs(kWaitMs);
    std::unique_ptr<RecvComm> recv;
    while (!recv && !deadline.expired()) {
      if (!t->accept(listen.get(), &recv).isOk()) _exit(4);
    }
    // Receives one message, then stops reading: the sender fills the socket buffers.
    std::vector<uint8_t> buf(16 * kMiB);
    Request* r = nullptr;
    if (!recv ||
        !postRecv(t.get(), recv.get(), buf.data(), buf.size(), nullptr, &r, deadline).isOk() ||
        !waitRequest(t.get(), r, nullptr, deadline).isOk()) {
      _exit(5);
    }
    pause();
    _exit(0);
  }
  close(fds[1]);
  Handle handle;
  pollfd pfd{fds[0], POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, static_cast<int>(kWaitMs)), 1);
  ASSERT_EQ(read(fds[0], &handle, sizeof(handle)), static_cast<ssize_t>(sizeof(handle)));
  close(fds[0]);
  auto t = makeTransport();
  std::unique_ptr<SendComm> send;
  ASSERT_TRUE(t->connect(handle, &send).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::vector<uint8_t> out = pattern(16 * kMiB, 3);
  Request* s = nullptr;
  ASSERT_TRUE(postSend(t.get(), send.get(), out.data(), out.size(), Meta{}, &s, deadline).isOk());
  ASSERT_TRUE(waitRequest(t.get(), s, nullptr, deadline).isOk());
  // A second message lands in the socket buffers or stalls there; then the receiver dies and
  // every further send must fail.
  ASSERT_TRUE(postSend(t.get(), send.get(), out.data(), out.size(), Meta{}, &s, deadline).isOk());
  bool done = false;
  for (int i = 0; i < 100 && !done; ++i) ASSERT_TRUE(t->test(s, &done, nullptr).isOk());
  uint64_t killedAt = nowNs();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  Deadline death = Deadline::afterMs(kPeerDeathMs);
  Status st = done ? Status::ok() : waitRequest(t.get(), s, nullptr, death);
  while (st.isOk()) {
    st = postSend(t.get(), send.get(), out.data(), out.size(), Meta{}, &s, death);
    if (st.isOk()) st = waitRequest(t.get(), s, nullptr, death);
  }
  EXPECT_EQ(st.code(), Code::kRemote) << st.toString();
  EXPECT_NE(st.message().find("closed (peer process exited?)"), std::string::npos) << st.toString();
  EXPECT_LT(nowNs() - killedAt, static_cast<uint64_t>(kPeerDeathMs) * 1000000);
  EXPECT_EQ(reap(pid), -SIGKILL);
}

TEST(TcpTransportTest, KilledSenderGivesRemoteErrorWithinTwoSeconds) {
  auto t = makeTransport();
  ASSERT_NE(t, nullptr);
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t->listen(&handle, &listen).isOk());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    childSetup();
    auto ct = makeTransport();
    std::unique_ptr<SendComm> send;
    if (!ct || !ct->connect(handle, &send).isOk()) _exit(2);
    // Sends one striped message, then half of another, then waits to be killed.
    std::vector<uint8_t> out = pattern(4 * kMiB, 5);
    Deadline deadline = Deadline::afterMs(kWaitMs);
    Request* s = nullptr;
    if (!postSend(ct.get(), send.get(), out.data(), out.size(), Meta{}, &s, deadline).isOk() ||
        !waitRequest(ct.get(), s, nullptr, deadline).isOk()) {
      _exit(3);
    }
    if (!postSend(ct.get(), send.get(), out.data(), out.size(), Meta{}, &s, deadline).isOk()) {
      _exit(4);
    }
    for (;;) {
      bool done = false;
      if (!ct->test(s, &done, nullptr).isOk()) _exit(5);
      if (done) break;
    }
    pause();
    _exit(0);
  }
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::unique_ptr<RecvComm> recv;
  while (!recv) {
    ASSERT_FALSE(deadline.expired());
    ASSERT_TRUE(t->accept(listen.get(), &recv).isOk());
  }
  std::vector<uint8_t> in(4 * kMiB);
  Request* r = nullptr;
  ASSERT_TRUE(postRecv(t.get(), recv.get(), in.data(), in.size(), nullptr, &r, deadline).isOk());
  ASSERT_TRUE(waitRequest(t.get(), r, nullptr, deadline).isOk());
  EXPECT_TRUE(matches(in.data(), in.size(), 5));
  ASSERT_TRUE(postRecv(t.get(), recv.get(), in.data(), in.size(), nullptr, &r, deadline).isOk());
  ASSERT_TRUE(waitRequest(t.get(), r, nullptr, deadline).isOk());
  // The third receive waits for a message that never comes; the sender dies.
  ASSERT_TRUE(postRecv(t.get(), recv.get(), in.data(), in.size(), nullptr, &r, deadline).isOk());
  bool done = false;
  ASSERT_TRUE(t->test(r, &done, nullptr).isOk());
  ASSERT_FALSE(done);
  uint64_t killedAt = nowNs();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  Status st = waitRequest(t.get(), r, nullptr, Deadline::afterMs(kPeerDeathMs));
  EXPECT_EQ(st.code(), Code::kRemote) << st.toString();
  EXPECT_LT(nowNs() - killedAt, static_cast<uint64_t>(kPeerDeathMs) * 1000000);
  EXPECT_EQ(reap(pid), -SIGKILL);
}

TEST(TcpTransportTest, ConnectToAClosedListenerFailsWithRemote) {
  auto t = makeTransport();
  ASSERT_NE(t, nullptr);
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t->listen(&handle, &listen).isOk());
  listen.reset();
  std::unique_ptr<SendComm> send;
  Status s = t->connect(handle, &send);
  Deadline deadline = Deadline::afterMs(kWaitMs);
  Request* r = nullptr;
  uint8_t byte = 1;
  while (s.isOk()) {
    ASSERT_FALSE(deadline.expired());
    s = t->isend(send.get(), &byte, 1, Meta{}, &r);
    if (s.isOk() && r != nullptr) s = waitRequest(t.get(), r, nullptr, deadline);
  }
  EXPECT_EQ(s.code(), Code::kRemote) << s.toString();
}

// ---------------------------------------------------------------------------------------------
// Socket utilities

TEST(TcpSocketTest, InterfaceSpecsFollowNcclSocketIfname) {
  EXPECT_TRUE(interfaceMatches("eth0", ""));
  EXPECT_TRUE(interfaceMatches("eth0", "eth"));
  EXPECT_TRUE(interfaceMatches("eth0", "ib,eth"));
  EXPECT_FALSE(interfaceMatches("eth0", "ib"));
  EXPECT_FALSE(interfaceMatches("eth0", "^eth"));
  EXPECT_TRUE(interfaceMatches("ib0", "^eth,lo"));
  EXPECT_FALSE(interfaceMatches("lo", "^eth,lo"));
  EXPECT_TRUE(interfaceMatches("eth0", "=eth0"));
  EXPECT_FALSE(interfaceMatches("eth01", "=eth0"));
  EXPECT_FALSE(interfaceMatches("eth0", "=eth"));
  EXPECT_FALSE(interfaceMatches("eth0", "^=eth0"));
  EXPECT_TRUE(interfaceMatches("eth01", "^=eth0"));
}

TEST(TcpSocketTest, InterfaceSelection) {
  auto lo = selectInterface("=lo");
  ASSERT_TRUE(lo.isOk()) << lo.status().toString();
  EXPECT_EQ(lo->name, "lo");
  EXPECT_TRUE(lo->address.isLoopback());
  auto none = selectInterface("=no-such-interface0");
  EXPECT_EQ(none.status().code(), Code::kInvalidArgument);
  EXPECT_NE(none.status().message().find("BRAID_SOCKET_IFNAME"), std::string::npos);
  auto def = selectInterface("");
  ASSERT_TRUE(def.isOk());
  bool anyNonLoopback = false;
  for (const InterfaceAddress& a : listInterfaces()) anyNonLoopback |= !a.loopback;
  EXPECT_EQ(def->loopback, !anyNonLoopback) << def->name;
}

TEST(TcpSocketTest, AddressesParseAndFormat) {
  auto v4 = SocketAddress::parseNumeric("127.0.0.1", 80);
  ASSERT_TRUE(v4.isOk());
  EXPECT_EQ(v4->toString(), "127.0.0.1:80");
  EXPECT_TRUE(v4->isLoopback());
  auto v6 = SocketAddress::parseNumeric("[::1]", 443);
  ASSERT_TRUE(v6.isOk());
  EXPECT_EQ(v6->toString(), "[::1]:443");
  auto hp = SocketAddress::parseHostPort("[fd00::2]:1234");
  ASSERT_TRUE(hp.isOk());
  EXPECT_EQ(hp->hostString(), "fd00::2");
  EXPECT_EQ(hp->port(), 1234);
  auto unpacked = SocketAddress::unpack(hp->pack());
  ASSERT_TRUE(unpacked.isOk());
  EXPECT_EQ(unpacked->toString(), "[fd00::2]:1234");
  EXPECT_FALSE(SocketAddress::parseNumeric("1.2.3", 1).isOk() &&
               SocketAddress::parseNumeric("1.2.3", 1)->hostString() != "1.2.0.3");
  EXPECT_FALSE(SocketAddress::parseNumeric("example", 1).isOk());
  EXPECT_FALSE(SocketAddress::parseHostPort("127.0.0.1").isOk());
  EXPECT_FALSE(SocketAddress::parseHostPort("127.0.0.1:99999").isOk());
  EXPECT_FALSE(SocketAddress::parseHostPort("::1:80").isOk());
}

TEST(TcpSocketTest, ReadAllTimesOutAtTheDeadline) {
  SocketAddress bound;
  auto server = listenOn(SocketAddress::loopback(AF_INET, 0), ListenOptions(), &bound);
  ASSERT_TRUE(server.isOk());
  auto client = connectTo(bound, Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(client.isOk());
  char buf[4];
  uint64_t start = nowNs();
  Status s = readAll(client->get(), buf, sizeof(buf), Deadline::afterMs(200), "server");
  uint64_t ms = (nowNs() - start) / 1000000;
  EXPECT_EQ(s.code(), Code::kTimeout) << s.toString();
  EXPECT_GE(ms, 190u);
  EXPECT_LT(ms, 2000u);
}

}  // namespace
}  // namespace braid::transport
