// Conformance suite for the point-to-point Transport interface, instantiated for every backend
// (loopback, shm, tcp, ucx). A backend that is not built (its factory still returns the placeholder
// "not built yet" error) is skipped. Every wait is bounded by a Deadline and fails on expiry.
#include "transport/transport.h"
#include "tests/unit/transport/request_helpers.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/params.h"

namespace braid::transport {
namespace {

using test_util::postRecv;
using test_util::postSend;
using test_util::waitRequest;

constexpr uint64_t kSecret = 0x5ec2e7c0ffee1234ull;
constexpr uint64_t kOtherSecret = 0x0badc0de0badc0deull;
/// Generous: sanitizer builds copy 64 MiB messages several times slower.
constexpr int64_t kWaitMs = 60000;
/// How soon a dead peer must be reported.
constexpr int64_t kPeerDeathMs = 2000;
constexpr size_t kMiB = 1024 * 1024;

static_assert(sizeof(Handle) == kHandleSize, "a handle is exactly 128 bytes");

bool isPlaceholder(const Status& s) {
  return s.message().find("not built yet") != std::string::npos;
}

Meta makeMeta(uint64_t i) { return Meta{{i, ~i, 0x6d657461ull, i * 2654435761ull}}; }

bool sameMeta(const Meta& a, const Meta& b) { return std::memcmp(&a, &b, sizeof(Meta)) == 0; }

/// Fills p with bytes derived from seed (8 bytes at a time: 64 MiB must be quick).
void fillPattern(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::memcpy(p + i, &x, 8);
  }
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  for (; i < n; ++i) p[i] = static_cast<uint8_t>(x >> (8 * (i % 8)));
}

/// Index of the first byte that differs from fillPattern(seed), or n.
size_t checkPattern(const uint8_t* p, size_t n, uint64_t seed) {
  std::vector<uint8_t> want(n);
  fillPattern(want.data(), n, seed);
  if (n == 0 || std::memcmp(p, want.data(), n) == 0) return n;
  size_t i = 0;
  while (p[i] == want[i]) ++i;
  return i;
}

std::vector<uint8_t> patternBuffer(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  fillPattern(v.data(), n, seed);
  return v;
}

Status sendOne(Transport* t, SendComm* c, const void* data, size_t n, const Meta& meta,
               const Deadline& deadline) {
  Request* r = nullptr;
  Status s = postSend(t, c, data, n, meta, &r, deadline);
  if (!s.isOk()) return s;
  size_t sent = 0;
  s = waitRequest(t, r, &sent, deadline);
  if (s.isOk() && sent != n) {
    return internalError("send reported " + std::to_string(sent) + " bytes, not " +
                         std::to_string(n));
  }
  return s;
}

Status recvOne(Transport* t, RecvComm* c, void* data, size_t n, Meta* meta, size_t* got,
               const Deadline& deadline) {
  Request* r = nullptr;
  Status s = postRecv(t, c, data, n, meta, &r, deadline);
  if (!s.isOk()) return s;
  return waitRequest(t, r, got, deadline);
}

/// Both ends of one connection.
struct Pair {
  std::unique_ptr<ListenComm> listen;
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
};

/// Accepts on listen until a RecvComm appears, in one thread with the sender: a zero-byte hello
/// is sent and received so that the connection is known to work in both halves.
Status finishPair(Transport* receiver, Transport* sender, Pair* p, const Deadline& deadline) {
  const Meta hello = makeMeta(0xfeed);
  Meta got{};
  Request* sreq = nullptr;
  Request* rreq = nullptr;
  bool sdone = false;
  bool rdone = false;
  Backoff backoff;
  while (!sdone || !rdone) {
    if (deadline.expired()) return timeoutError("connection was not established in time");
    if (!p->recv) {
      BRAID_RETURN_IF_ERROR(receiver->accept(p->listen.get(), &p->recv));
    }
    if (sreq == nullptr && !sdone) {
      BRAID_RETURN_IF_ERROR(sender->isend(p->send.get(), nullptr, 0, hello, &sreq));
    }
    if (sreq != nullptr && !sdone) {
      BRAID_RETURN_IF_ERROR(sender->test(sreq, &sdone, nullptr));
      if (sdone) sreq = nullptr;
    }
    if (p->recv && rreq == nullptr && !rdone) {
      BRAID_RETURN_IF_ERROR(receiver->irecv(p->recv.get(), nullptr, 0, &got, &rreq));
    }
    if (rreq != nullptr && !rdone) {
      size_t n = 1;
      BRAID_RETURN_IF_ERROR(receiver->test(rreq, &rdone, &n));
      if (rdone && n != 0) return internalError("hello arrived with a nonzero size");
      if (rdone) rreq = nullptr;
    }
    backoff.pause();
  }
  if (!sameMeta(got, hello)) return internalError("hello arrived with a different Meta");
  return Status::ok();
}

Status makePair(Transport* receiver, Transport* sender, Pair* p) {
  Handle handle;
  BRAID_RETURN_IF_ERROR(receiver->listen(&handle, &p->listen));
  BRAID_RETURN_IF_ERROR(sender->connect(handle, &p->send));
  if (!p->send) return internalError("connect succeeded without a SendComm");
  return finishPair(receiver, sender, p, Deadline::afterMs(kWaitMs));
}

/// Shared-memory segments process pid (default: this one) created that still have a name.
int countOwnShmSegments(pid_t pid = getpid()) {
  const std::string prefix = "braid-" + std::to_string(pid) + "-";
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) ++n;
    }
    closedir(d);
  }
  return n;
}

/// Waits (bounded) for a child; kills it if it does not exit. Returns its exit code, or -signal.
int reapChild(pid_t pid, int64_t ms) {
  Deadline deadline = Deadline::afterMs(ms);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return -1000;
    if (deadline.expired()) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -2000;
    }
    usleep(1000);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -WTERMSIG(status);
}

/// In a forked child: dies with the parent, so a failed test leaves no stray process.
void childSetup() { prctl(PR_SET_PDEATHSIG, SIGKILL); }

/// Random-size traffic in two threads, every message checked (shared with the small-ring test).
void runStress(Transport* t, int count, size_t maxSize) {
  Pair p;
  ASSERT_TRUE(makePair(t, t, &p).isOk());
  Status sendStatus;
  Status recvStatus;
  auto sizeOf = [maxSize](int i) {
    uint64_t x = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    return i % 7 == 0 ? 0 : static_cast<size_t>(x % (maxSize + 1));
  };
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::thread sender([&] {
    constexpr int kWindow = 8;
    std::vector<std::vector<uint8_t>> bufs(kWindow);
    std::vector<Request*> reqs(kWindow, nullptr);
    for (int i = 0; i < count + kWindow && sendStatus.isOk(); ++i) {
      int slot = i % kWindow;
      if (reqs[slot] != nullptr) {
        sendStatus = waitRequest(t, reqs[slot], nullptr, deadline);
        reqs[slot] = nullptr;
      }
      if (i >= count || !sendStatus.isOk()) continue;
      bufs[slot] = patternBuffer(sizeOf(i), static_cast<uint64_t>(i));
      sendStatus = postSend(t, p.send.get(), bufs[slot].data(), bufs[slot].size(), makeMeta(i),
                            &reqs[slot], deadline);
    }
  });
  std::thread receiver([&] {
    std::vector<uint8_t> buf(maxSize);
    for (int i = 0; i < count && recvStatus.isOk(); ++i) {
      Meta meta{};
      size_t got = 0;
      recvStatus = recvOne(t, p.recv.get(), buf.data(), buf.size(), &meta, &got, deadline);
      if (!recvStatus.isOk()) break;
      if (got != sizeOf(i) || !sameMeta(meta, makeMeta(i)) ||
          checkPattern(buf.data(), got, static_cast<uint64_t>(i)) != got) {
        recvStatus = internalError("message " + std::to_string(i) + " arrived corrupted (size " +
                                   std::to_string(got) + ")");
      }
    }
  });
  sender.join();
  receiver.join();
  EXPECT_TRUE(sendStatus.isOk()) << sendStatus.toString();
  EXPECT_TRUE(recvStatus.isOk()) << recvStatus.toString();
}

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    shmSegmentsBefore_ = countOwnShmSegments();
    auto t = make(kSecret, 0);
    if (!t.isOk() && isPlaceholder(t.status())) {
      GTEST_SKIP() << GetParam() << " backend is not built yet: " << t.status().toString();
    }
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    transport_ = std::move(t).value();
    ASSERT_STREQ(transport_->name(), GetParam().c_str());
  }

  void TearDown() override {
    // Every segment must lose its name once accepted or closed.
    EXPECT_EQ(countOwnShmSegments(), shmSegmentsBefore_) << "shared-memory segments leaked";
  }

  Result<std::unique_ptr<Transport>> make(uint64_t secret, int rank) {
    TransportOptions options;
    options.jobSecret = secret;
    options.rank = rank;
    options.tcpAddress = "127.0.0.1";
    return createTransport(GetParam(), options);
  }

  bool crossProcess() const { return GetParam() != "loopback"; }

  Transport* t() { return transport_.get(); }

  std::unique_ptr<Transport> transport_;
  int shmSegmentsBefore_ = 0;
};

TEST_P(TransportTest, ListenFillsAHandleOfAtMost128Bytes) {
  Handle handle;
  std::memset(handle.bytes, 0xee, sizeof(handle.bytes));
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t()->listen(&handle, &listen).isOk());
  ASSERT_NE(listen, nullptr);
  bool changed = false;
  for (uint8_t b : handle.bytes) changed |= (b != 0xee);
  EXPECT_TRUE(changed);
  // Accept without a peer returns at once, with no comm.
  std::unique_ptr<RecvComm> recv;
  ASSERT_TRUE(t()->accept(listen.get(), &recv).isOk());
  EXPECT_EQ(recv, nullptr);
}

TEST_P(TransportTest, ConnectAndAcceptInTwoThreads) {
  std::mutex mu;
  std::condition_variable cv;
  bool haveHandle = false;
  Handle handle;
  Status recvStatus;
  Status sendStatus;
  const std::vector<uint8_t> payload = patternBuffer(4096 + 7, 42);
  Deadline deadline = Deadline::afterMs(kWaitMs);

  std::thread receiver([&] {
    std::unique_ptr<ListenComm> listen;
    Handle h;
    recvStatus = t()->listen(&h, &listen);
    {
      std::lock_guard<std::mutex> lock(mu);
      handle = h;
      haveHandle = true;
    }
    cv.notify_one();
    if (!recvStatus.isOk()) return;
    std::unique_ptr<RecvComm> recv;
    Backoff backoff;
    while (!recv) {
      recvStatus = t()->accept(listen.get(), &recv);
      if (!recvStatus.isOk()) return;
      if (!recv && deadline.expired()) {
        recvStatus = timeoutError("accept did not see the peer");
        return;
      }
      backoff.pause();
    }
    std::vector<uint8_t> buf(payload.size());
    Meta meta{};
    size_t got = 0;
    recvStatus = recvOne(t(), recv.get(), buf.data(), buf.size(), &meta, &got, deadline);
    if (recvStatus.isOk() &&
        (got != payload.size() || buf != payload || !sameMeta(meta, makeMeta(7)))) {
      recvStatus = internalError("message arrived corrupted");
    }
  });
  std::thread sender([&] {
    Handle h;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_until(lock,
                         std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs),
                         [&] { return haveHandle; })) {
        sendStatus = timeoutError("no handle from the receiver");
        return;
      }
      h = handle;
    }
    std::unique_ptr<SendComm> send;
    sendStatus = t()->connect(h, &send);
    if (!sendStatus.isOk()) return;
    sendStatus = sendOne(t(), send.get(), payload.data(), payload.size(), makeMeta(7), deadline);
  });
  receiver.join();
  sender.join();
  EXPECT_TRUE(recvStatus.isOk()) << recvStatus.toString();
  EXPECT_TRUE(sendStatus.isOk()) << sendStatus.toString();
}

TEST_P(TransportTest, ManyMessagesInFlightKeepFifoOrderAndMeta) {
  Pair p;
  ASSERT_TRUE(makePair(t(), t(), &p).isOk());
  constexpr int kCount = kMaxRequests;
  constexpr size_t kBuf = 1000;
  auto sizeOf = [](int i) { return static_cast<size_t>((i * 37) % static_cast<int>(kBuf)) + 1; };
  Deadline deadline = Deadline::afterMs(kWaitMs);
  Status sendStatus;
  Status recvStatus;
  int sendsPostedAtOnce = 0;
  int recvsPostedAtOnce = 0;

  std::thread receiver([&] {
    std::vector<std::vector<uint8_t>> bufs(kCount, std::vector<uint8_t>(kBuf));
    std::vector<Meta> metas(kCount);
    std::vector<Request*> reqs(kCount, nullptr);
    // Post as many as the transport takes without testing any.
    int posted = 0;
    while (posted < kCount) {
      recvStatus =
          t()->irecv(p.recv.get(), bufs[posted].data(), kBuf, &metas[posted], &reqs[posted]);
      if (!recvStatus.isOk() || reqs[posted] == nullptr) break;
      ++posted;
    }
    recvsPostedAtOnce = posted;
    if (!recvStatus.isOk()) return;
    // Complete newest first: a later request must still be matched after the earlier ones.
    for (int i = posted - 1; i >= 0 && recvStatus.isOk(); --i) {
      size_t got = 0;
      recvStatus = waitRequest(t(), reqs[i], &got, deadline);
      if (recvStatus.isOk() && (got != sizeOf(i) || !sameMeta(metas[i], makeMeta(i)) ||
                                checkPattern(bufs[i].data(), got, i) != got)) {
        recvStatus = internalError("message " + std::to_string(i) + " out of order or corrupt");
      }
    }
    for (int i = posted; i < kCount && recvStatus.isOk(); ++i) {
      size_t got = 0;
      recvStatus = recvOne(t(), p.recv.get(), bufs[i].data(), kBuf, &metas[i], &got, deadline);
      if (recvStatus.isOk() && (got != sizeOf(i) || !sameMeta(metas[i], makeMeta(i)) ||
                                checkPattern(bufs[i].data(), got, i) != got)) {
        recvStatus = internalError("message " + std::to_string(i) + " out of order or corrupt");
      }
    }
  });
  std::thread sender([&] {
    std::vector<std::vector<uint8_t>> bufs(kCount);
    std::vector<Request*> reqs(kCount, nullptr);
    for (int i = 0; i < kCount; ++i) bufs[i] = patternBuffer(sizeOf(i), i);
    int posted = 0;
    while (posted < kCount) {
      sendStatus = t()->isend(p.send.get(), bufs[posted].data(), bufs[posted].size(),
                              makeMeta(posted), &reqs[posted]);
      if (!sendStatus.isOk() || reqs[posted] == nullptr) break;
      ++posted;
    }
    sendsPostedAtOnce = posted;
    for (int i = 0; i < posted && sendStatus.isOk(); ++i) {
      sendStatus = waitRequest(t(), reqs[i], nullptr, deadline);
    }
    for (int i = posted; i < kCount && sendStatus.isOk(); ++i) {
      sendStatus =
          sendOne(t(), p.send.get(), bufs[i].data(), bufs[i].size(), makeMeta(i), deadline);
    }
  });
  receiver.join();
  sender.join();
  EXPECT_TRUE(sendStatus.isOk()) << sendStatus.toString();
  EXPECT_TRUE(recvStatus.isOk()) << recvStatus.toString();
  EXPECT_GE(sendsPostedAtOnce, 32);
  EXPECT_GE(recvsPostedAtOnce, 32);
}

TEST_P(TransportTest, SizesFromZeroToLargerThanTheShmRing) {
  Pair p;
  ASSERT_TRUE(makePair(t(), t(), &p).isOk());
  const std::vector<size_t> sizes = {0, 1, 4095, kMiB + 3, 64 * kMiB, 3};
  Deadline deadline = Deadline::afterMs(kWaitMs);
  Status sendStatus;
  Status recvStatus;
  std::thread receiver([&] {
    std::vector<uint8_t> buf;
    for (size_t i = 0; i < sizes.size() && recvStatus.isOk(); ++i) {
      buf.assign(sizes[i], 0);
      Meta meta{};
      size_t got = 12345;
      recvStatus = recvOne(t(), p.recv.get(), sizes[i] ? buf.data() : nullptr, sizes[i], &meta,
                           &got, deadline);
      if (!recvStatus.isOk()) break;
      size_t bad = checkPattern(buf.data(), got, 100 + i);
      if (got != sizes[i] || bad != got || !sameMeta(meta, makeMeta(i))) {
        recvStatus =
            internalError("size " + std::to_string(sizes[i]) + ": got " + std::to_string(got) +
                          " bytes, first bad byte " + std::to_string(bad));
      }
    }
  });
  std::thread sender([&] {
    for (size_t i = 0; i < sizes.size() && sendStatus.isOk(); ++i) {
      std::vector<uint8_t> buf = patternBuffer(sizes[i], 100 + i);
      sendStatus = sendOne(t(), p.send.get(), sizes[i] ? buf.data() : nullptr, sizes[i],
                           makeMeta(i), deadline);
    }
  });
  receiver.join();
  sender.join();
  EXPECT_TRUE(sendStatus.isOk()) << sendStatus.toString();
  EXPECT_TRUE(recvStatus.isOk()) << recvStatus.toString();
}

TEST_P(TransportTest, ReceiveBufferLargerThanMessageReportsRealSize) {
  Pair p;
  ASSERT_TRUE(makePair(t(), t(), &p).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  for (size_t n : {size_t{100}, size_t{4095}, size_t{0}, size_t{70000}}) {
    std::vector<uint8_t> out = patternBuffer(n, n);
    std::vector<uint8_t> in(n + 9000, 0xcd);
    Request* sreq = nullptr;
    Request* rreq = nullptr;
    Meta meta{};
    ASSERT_TRUE(postRecv(t(), p.recv.get(), in.data(), in.size(), &meta, &rreq, deadline).isOk());
    ASSERT_TRUE(postSend(t(), p.send.get(), out.data(), n, makeMeta(n), &sreq, deadline).isOk());
    bool sdone = false;
    bool rdone = false;
    size_t got = 0;
    while (!sdone || !rdone) {
      ASSERT_FALSE(deadline.expired());
      if (!sdone) {
        ASSERT_TRUE(t()->test(sreq, &sdone, nullptr).isOk());
      }
      if (!rdone) {
        ASSERT_TRUE(t()->test(rreq, &rdone, &got).isOk());
      }
    }
    EXPECT_EQ(got, n);
    EXPECT_TRUE(sameMeta(meta, makeMeta(n)));
    EXPECT_EQ(checkPattern(in.data(), n, n), n);
    for (size_t i = n; i < in.size(); ++i) ASSERT_EQ(in[i], 0xcd) << "byte " << i << " written";
  }
}

/// Sends `sendBytes` into a `recvBytes` receive; both sides must finish (no hang).
void expectTruncationFails(Transport* t, size_t sendBytes, size_t recvBytes, bool senderMustFail) {
  Pair p;
  ASSERT_TRUE(makePair(t, t, &p).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::vector<uint8_t> out = patternBuffer(sendBytes, 1);
  std::vector<uint8_t> in(recvBytes);
  Request* sreq = nullptr;
  Request* rreq = nullptr;
  ASSERT_TRUE(
      postSend(t, p.send.get(), out.data(), out.size(), makeMeta(1), &sreq, deadline).isOk());
  ASSERT_TRUE(postRecv(t, p.recv.get(), in.data(), in.size(), nullptr, &rreq, deadline).isOk());
  bool sfinished = false;
  bool rfinished = false;
  Status sendStatus;
  Status recvStatus;
  Backoff backoff;
  while (!sfinished || !rfinished) {
    ASSERT_FALSE(deadline.expired())
        << "send finished " << sfinished << ", recv finished " << rfinished;
    bool done = false;
    if (!sfinished) {
      sendStatus = t->test(sreq, &done, nullptr);
      sfinished = done || !sendStatus.isOk();
    }
    if (!rfinished) {
      recvStatus = t->test(rreq, &done, nullptr);
      rfinished = done || !recvStatus.isOk();
    }
    backoff.pause();
  }
  EXPECT_EQ(recvStatus.code(), Code::kInvalidUsage) << recvStatus.toString();
  EXPECT_NE(recvStatus.message().find(std::to_string(sendBytes)), std::string::npos)
      << recvStatus.toString();
  if (senderMustFail && sendStatus.isOk()) {
    // The send may have completed into a buffer the refusal did not reach in time (tcp socket
    // buffers); then the sender must learn of it on its next message.
    Request* again = nullptr;
    sendStatus = t->isend(p.send.get(), out.data(), out.size(), makeMeta(2), &again);
    if (sendStatus.isOk() && again != nullptr) {
      sendStatus = waitRequest(t, again, nullptr, deadline);
    }
    EXPECT_FALSE(sendStatus.isOk()) << "the sender must learn that its message was refused";
    EXPECT_NE(sendStatus.code(), Code::kTimeout) << sendStatus.toString();
  }
}

TEST_P(TransportTest, MessageLargerThanReceiveFailsWithoutHanging) {
  expectTruncationFails(t(), 1000, 100, /*senderMustFail=*/false);
}

TEST_P(TransportTest, LargeMessageLargerThanReceiveFailsBothSides) {
  expectTruncationFails(t(), 16 * kMiB, kMiB, /*senderMustFail=*/true);
}

TEST_P(TransportTest, ClosingTheSenderFailsPendingReceivesAfterDeliveringSentData) {
  Pair p;
  ASSERT_TRUE(makePair(t(), t(), &p).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  constexpr int kRecvs = 4;
  std::vector<std::vector<uint8_t>> in(kRecvs, std::vector<uint8_t>(kMiB));
  std::vector<Request*> rreqs(kRecvs, nullptr);
  for (int i = 0; i < kRecvs; ++i) {
    ASSERT_TRUE(
        postRecv(t(), p.recv.get(), in[i].data(), kMiB, nullptr, &rreqs[i], deadline).isOk());
  }
  std::vector<uint8_t> out = patternBuffer(1000, 5);
  ASSERT_TRUE(sendOne(t(), p.send.get(), out.data(), out.size(), makeMeta(5), deadline).isOk());
  p.send.reset();
  size_t got = 0;
  Status first = waitRequest(t(), rreqs[0], &got, deadline);
  ASSERT_TRUE(first.isOk()) << "data sent before the close was lost: " << first.toString();
  EXPECT_EQ(got, out.size());
  EXPECT_EQ(checkPattern(in[0].data(), got, 5), got);
  for (int i = 1; i < kRecvs; ++i) {
    Status s = waitRequest(t(), rreqs[i], nullptr, deadline);
    EXPECT_EQ(s.code(), Code::kRemote) << s.toString();
  }
}

TEST_P(TransportTest, ClosingTheSenderMidMessageFailsTheReceive) {
  Pair p;
  ASSERT_TRUE(makePair(t(), t(), &p).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::vector<uint8_t> out = patternBuffer(64 * kMiB, 6);
  Request* sreq = nullptr;
  ASSERT_TRUE(
      postSend(t(), p.send.get(), out.data(), out.size(), makeMeta(6), &sreq, deadline).isOk());
  bool done = false;
  for (int i = 0; i < 10 && !done; ++i) ASSERT_TRUE(t()->test(sreq, &done, nullptr).isOk());
  ASSERT_FALSE(done) << "64 MiB cannot have been sent with nobody receiving";
  p.send.reset();
  std::vector<uint8_t> in(64 * kMiB);
  Status s = recvOne(t(), p.recv.get(), in.data(), in.size(), nullptr, nullptr, deadline);
  EXPECT_EQ(s.code(), Code::kRemote) << s.toString();
}

TEST_P(TransportTest, ClosingTheReceiverFailsPendingSends) {
  Pair p;
  ASSERT_TRUE(makePair(t(), t(), &p).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::vector<uint8_t> out = patternBuffer(64 * kMiB, 8);
  Request* sreq = nullptr;
  ASSERT_TRUE(
      postSend(t(), p.send.get(), out.data(), out.size(), makeMeta(8), &sreq, deadline).isOk());
  bool done = false;
  for (int i = 0; i < 10 && !done; ++i) ASSERT_TRUE(t()->test(sreq, &done, nullptr).isOk());
  ASSERT_FALSE(done);
  p.recv.reset();
  Status s = waitRequest(t(), sreq, nullptr, deadline);
  EXPECT_EQ(s.code(), Code::kRemote) << s.toString();
  // Later sends fail too (at isend, or when tested).
  Request* again = nullptr;
  Status post = t()->isend(p.send.get(), out.data(), out.size(), makeMeta(9), &again);
  if (post.isOk() && again != nullptr) post = waitRequest(t(), again, nullptr, deadline);
  EXPECT_FALSE(post.isOk());
}

TEST_P(TransportTest, ClosingTheListenerBeforeAcceptFailsTheSender) {
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t()->listen(&handle, &listen).isOk());
  std::unique_ptr<SendComm> send;
  ASSERT_TRUE(t()->connect(handle, &send).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::vector<uint8_t> out = patternBuffer(64 * kMiB, 8);
  Request* sreq = nullptr;
  Status s = t()->isend(send.get(), out.data(), out.size(), makeMeta(8), &sreq);
  ASSERT_TRUE(s.isOk()) << s.toString();
  listen.reset();
  Backoff backoff;
  while (s.isOk() && sreq == nullptr && !deadline.expired()) {
    s = t()->isend(send.get(), out.data(), out.size(), makeMeta(8), &sreq);
    backoff.pause();
  }
  if (s.isOk()) s = waitRequest(t(), sreq, nullptr, deadline);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.code(), Code::kTimeout) << s.toString();
}

/// `from` connects to `listener`'s handle: either connect() rejects the handle at once
/// (kInvalidArgument), or the listener must never produce a RecvComm for it while `from` keeps
/// trying to send.
void expectRefused(Transport* listener, Transport* from, const Handle& handle, ListenComm* listen,
                   const char* what) {
  std::unique_ptr<SendComm> send;
  Status s = from->connect(handle, &send);
  if (!s.isOk()) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.toString();
    return;
  }
  Deadline deadline = Deadline::afterMs(500);
  Request* sreq = nullptr;
  while (!deadline.expired()) {
    std::unique_ptr<RecvComm> recv;
    Status a = listener->accept(listen, &recv);
    ASSERT_EQ(recv, nullptr) << "a connection with " << what << " was accepted";
    if (sreq == nullptr && send) {
      Status i = from->isend(send.get(), nullptr, 0, makeMeta(1), &sreq);
      if (!i.isOk()) send.reset();
    }
    if (!a.isOk()) break;
    usleep(1000);
  }
}

TEST_P(TransportTest, ConnectionFromAnotherJobIsRefused) {
  auto other = make(kOtherSecret, 1);
  ASSERT_TRUE(other.isOk()) << other.status().toString();
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t()->listen(&handle, &listen).isOk());
  expectRefused(t(), other.value().get(), handle, listen.get(), "the wrong job secret");
}

TEST_P(TransportTest, HandleWithTamperedSecretIsRefused) {
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t()->listen(&handle, &listen).isOk());
  // The attacker rewrites the secret carried by the handle to its own.
  size_t at = kHandleSize;
  for (size_t i = 0; i + sizeof(kSecret) <= kHandleSize; ++i) {
    if (std::memcmp(handle.bytes + i, &kSecret, sizeof(kSecret)) == 0) at = i;
  }
  if (at == kHandleSize) GTEST_SKIP() << "this backend's handle does not carry the secret";
  std::memcpy(handle.bytes + at, &kOtherSecret, sizeof(kOtherSecret));
  auto other = make(kOtherSecret, 1);
  ASSERT_TRUE(other.isOk());
  expectRefused(t(), other.value().get(), handle, listen.get(), "a tampered secret");
}

TEST_P(TransportTest, GarbageHandleIsInvalidArgument) {
  std::vector<Handle> handles(3);
  std::memset(handles[0].bytes, 0, kHandleSize);
  std::memset(handles[1].bytes, 0xff, kHandleSize);
  std::mt19937_64 rng(12345);
  for (uint8_t& b : handles[2].bytes) b = static_cast<uint8_t>(rng());
  for (const Handle& h : handles) {
    std::unique_ptr<SendComm> send;
    Status s = t()->connect(h, &send);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.toString();
  }
  // A handle of another backend is foreign too.
  for (const char* other : {"loopback", "shm", "tcp", "ucx"}) {
    if (GetParam() == other) continue;
    TransportOptions options;
    options.jobSecret = kSecret;
    options.tcpAddress = "127.0.0.1";
    auto o = createTransport(other, options);
    if (!o.isOk()) continue;
    Handle h;
    std::unique_ptr<ListenComm> listen;
    ASSERT_TRUE(o.value()->listen(&h, &listen).isOk());
    std::unique_ptr<SendComm> send;
    Status s = t()->connect(h, &send);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << other << " handle: " << s.toString();
  }
}

TEST_P(TransportTest, RandomSizesInTwoThreads) { runStress(t(), 3000, 20000); }

/// Child: connects with a fresh transport and sends sizes[i] with seed 100 + i, then closes.
int childSender(const std::string& backend, const Handle& handle,
                const std::vector<size_t>& sizes) {
  TransportOptions options;
  options.jobSecret = kSecret;
  options.rank = 1;
  options.tcpAddress = "127.0.0.1";
  auto t = createTransport(backend, options);
  if (!t.isOk()) return 2;
  std::unique_ptr<SendComm> send;
  if (!t.value()->connect(handle, &send).isOk()) return 3;
  Deadline deadline = Deadline::afterMs(kWaitMs);
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<uint8_t> buf = patternBuffer(sizes[i], 100 + i);
    if (!sendOne(t.value().get(), send.get(), buf.data(), buf.size(), makeMeta(i), deadline)
             .isOk()) {
      return 4;
    }
  }
  return 0;
}

/// Carries the listener's handle from the parent to a child forked before the parent listened
/// (ucx: a child forked while the parent has UCX resources cannot use UCX).
class HandlePipe {
 public:
  HandlePipe() {
    if (pipe(fds_) != 0) fds_[0] = fds_[1] = -1;
  }
  ~HandlePipe() {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  void send(const Handle& h) {
    ASSERT_EQ(write(fds_[1], &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
  }
  /// In the child: the handle, or garbage (which connect() refuses) when none came in time.
  Handle receive() {
    Handle h;
    std::memset(&h, 0, sizeof(h));
    pollfd pfd{fds_[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(kWaitMs)) == 1) {
      if (read(fds_[0], &h, sizeof(h)) != static_cast<ssize_t>(sizeof(h))) {
        std::memset(&h, 0, sizeof(h));
      }
    }
    return h;
  }

 private:
  int fds_[2];
};

TEST_P(TransportTest, CrossProcessWithFork) {
  if (!crossProcess()) GTEST_SKIP() << "loopback connects within one process only";
  std::vector<size_t> sizes = {0, 1, 4095, kMiB + 3, 64 * kMiB};
  for (int i = 0; i < 200; ++i) sizes.push_back(static_cast<size_t>(i * 97 % 5000));
  HandlePipe pipe;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    childSetup();
    _exit(childSender(GetParam(), pipe.receive(), sizes));
  }
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t()->listen(&handle, &listen).isOk());
  pipe.send(handle);
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::unique_ptr<RecvComm> recv;
  Backoff backoff;
  while (!recv && !deadline.expired()) {
    ASSERT_TRUE(t()->accept(listen.get(), &recv).isOk());
    backoff.pause();
  }
  ASSERT_NE(recv, nullptr) << "the child never connected";
  std::vector<uint8_t> buf(64 * kMiB);
  for (size_t i = 0; i < sizes.size(); ++i) {
    Meta meta{};
    size_t got = 0;
    Status s = recvOne(t(), recv.get(), buf.data(), buf.size(), &meta, &got, deadline);
    ASSERT_TRUE(s.isOk()) << "message " << i << ": " << s.toString();
    ASSERT_EQ(got, sizes[i]);
    ASSERT_TRUE(sameMeta(meta, makeMeta(i)));
    ASSERT_EQ(checkPattern(buf.data(), got, 100 + i), got) << "message " << i;
  }
  EXPECT_EQ(reapChild(pid, kWaitMs), 0);
}

TEST_P(TransportTest, KilledSenderIsReportedAsRemoteWithinTwoSeconds) {
  if (!crossProcess()) GTEST_SKIP() << "loopback connects within one process only";
  HandlePipe pipe;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    childSetup();
    // Streams 1 MiB messages until killed.
    std::vector<size_t> sizes(100000, kMiB);
    _exit(childSender(GetParam(), pipe.receive(), sizes));
  }
  Handle handle;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(t()->listen(&handle, &listen).isOk());
  pipe.send(handle);
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::unique_ptr<RecvComm> recv;
  Backoff backoff;
  while (!recv && !deadline.expired()) {
    ASSERT_TRUE(t()->accept(listen.get(), &recv).isOk());
    backoff.pause();
  }
  ASSERT_NE(recv, nullptr) << "the child never connected";
  std::vector<uint8_t> buf(kMiB);
  for (int i = 0; i < 3; ++i) {
    size_t got = 0;
    Status s = recvOne(t(), recv.get(), buf.data(), buf.size(), nullptr, &got, deadline);
    ASSERT_TRUE(s.isOk()) << s.toString();
    ASSERT_EQ(checkPattern(buf.data(), got, 100 + i), got);
  }
  // Killed mid-stream and not reaped yet: a zombie must count as gone.
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  Deadline death = Deadline::afterMs(kPeerDeathMs);
  Status s;
  while (s.isOk()) {
    Request* r = nullptr;
    s = postRecv(t(), recv.get(), buf.data(), buf.size(), nullptr, &r, death);
    if (s.isOk()) s = waitRequest(t(), r, nullptr, death);
  }
  EXPECT_EQ(s.code(), Code::kRemote) << s.toString();
  EXPECT_EQ(reapChild(pid, kWaitMs), -SIGKILL);
}

TEST_P(TransportTest, KilledReceiverIsReportedAsRemoteWithinTwoSeconds) {
  if (!crossProcess()) GTEST_SKIP() << "loopback connects within one process only";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    childSetup();
    close(fds[0]);
    TransportOptions options;
    options.jobSecret = kSecret;
    options.rank = 1;
    options.tcpAddress = "127.0.0.1";
    auto t = createTransport(GetParam(), options);
    if (!t.isOk()) _exit(2);
    Handle handle;
    std::unique_ptr<ListenComm> listen;
    if (!t.value()->listen(&handle, &listen).isOk()) _exit(3);
    if (write(fds[1], &handle, sizeof(handle)) != sizeof(handle)) _exit(4);
    Deadline deadline = Deadline::afterMs(kWaitMs);
    std::unique_ptr<RecvComm> recv;
    while (!recv && !deadline.expired()) {
      if (!t.value()->accept(listen.get(), &recv).isOk()) _exit(5);
      usleep(100);
    }
    if (!recv) _exit(6);
    std::vector<uint8_t> buf(kMiB);
    for (;;) {  // drains until killed
      if (!recvOne(t.value().get(), recv.get(), buf.data(), buf.size(), nullptr, nullptr, deadline)
               .isOk()) {
        _exit(7);
      }
    }
  }
  close(fds[1]);
  Handle handle;
  pollfd pfd{fds[0], POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, static_cast<int>(kWaitMs)), 1) << "no handle from the child";
  ASSERT_EQ(read(fds[0], &handle, sizeof(handle)), static_cast<ssize_t>(sizeof(handle)));
  close(fds[0]);
  std::unique_ptr<SendComm> send;
  ASSERT_TRUE(t()->connect(handle, &send).isOk());
  Deadline deadline = Deadline::afterMs(kWaitMs);
  std::vector<uint8_t> out = patternBuffer(kMiB, 3);
  for (int i = 0; i < 3; ++i) {
    Status s = sendOne(t(), send.get(), out.data(), out.size(), makeMeta(i), deadline);
    ASSERT_TRUE(s.isOk()) << s.toString();
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  Deadline death = Deadline::afterMs(kPeerDeathMs);
  Status s;
  while (s.isOk()) {
    s = sendOne(t(), send.get(), out.data(), out.size(), makeMeta(9), death);
  }
  EXPECT_EQ(s.code(), Code::kRemote) << s.toString();
  EXPECT_EQ(reapChild(pid, kWaitMs), -SIGKILL);
  // The child may have died before accept(): connect() must already have removed the name.
  EXPECT_EQ(countOwnShmSegments(pid), 0) << "the killed listener left its segment in /dev/shm";
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportTest,
                         ::testing::Values("loopback", "shm", "tcp", "ucx"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// shm with the smallest ring: frame headers and payloads wrap and split constantly.
TEST(ShmTransportTest, TinyRingWrapsFramesCorrectly) {
  setParamForTesting("BRAID_SHM_RING_BYTES", "4096");
  TransportOptions options;
  options.jobSecret = kSecret;
  auto t = createTransport("shm", options);
  setParamForTesting("BRAID_SHM_RING_BYTES", "");
  if (!t.isOk() && isPlaceholder(t.status())) GTEST_SKIP() << "shm not built yet";
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  runStress(t.value().get(), 3000, 10000);
  EXPECT_EQ(countOwnShmSegments(), 0);
}

}  // namespace
}  // namespace braid::transport
