// The TCP store server keeps serving a real job while foreign connections abuse it (the limits in
// transport/bootstrap/tcp_store.h): this process serves the store, as rank 0 would, and opens
// idle connections, a slow-loris client writing one byte a second, a client announcing a huge
// value, and one sending garbage; then three forked ranks, each with its own client connection,
// create a communicator through the store, split it, all-reduce on both, within their deadline.
// A second test fills the connection table with idle foreign connections and checks that a real
// client still gets in (the oldest foreign one is evicted).
//
// Forked children report through their exit code (0 = ok, else the step that failed).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "braid/comm.hpp"
#include "core/clock.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/tcp_store.h"
#include "transport/socket.h"

namespace braid {
namespace {

using transport::Fd;
using transport::SocketAddress;

constexpr int kRanks = 3;
constexpr int64_t kJobTimeoutMs = 15000;

/// The store protocol's request header (tcp_store.cc), for abusive clients.
struct RawRequest {
  uint32_t magic = 0x54535442;
  uint32_t op = 2;  // set
  uint32_t keyLength = 0;
  uint32_t reserved = 0;
  uint64_t valueLength = 0;
  int64_t arg = 0;
};

Fd rawConnect(int port) {
  auto fd = transport::connectTo(SocketAddress::loopback(AF_INET, port), Deadline::afterMs(5000));
  return fd.isOk() ? std::move(fd.value()) : Fd();
}

bool sendRaw(const Fd& fd, const void* data, size_t n) {
  return ::send(fd.get(), data, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

/// True when the server closed fd within ms (a read gives EOF or a reset).
bool closedWithin(const Fd& fd, int ms) {
  const uint64_t until = nowNs() + static_cast<uint64_t>(ms) * 1000000;
  while (nowNs() < until) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      char buf[256];
      ssize_t n = ::recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
  }
  return false;
}

/// One rank of the job: its own client connection, create, split, all-reduce on both.
int runRank(int rank, int port) {
  auto store = createTcpStore("127.0.0.1", port, false, Deadline::afterMs(kJobTimeoutMs));
  if (!store.isOk()) return 10;
  CommOptions o;
  o.rank = rank;
  o.size = kRanks;
  o.store = std::shared_ptr<Store>(std::move(store.value()));
  o.timeoutMs = kJobTimeoutMs;
  auto comm = Communicator::create(o);
  if (!comm.isOk()) return 11;
  auto half = (*comm)->split(rank % 2, rank);
  if (!half.isOk() || *half == nullptr) return 12;
  float v = 1.0f;
  if (!(*half)->allReduce(&v, &v, 1, DataType::kFloat32, ReduceOp::kSum).isOk()) return 13;
  if (v != static_cast<float>((*half)->size())) return 14;
  float w = static_cast<float>(rank);
  if (!(*comm)->allReduce(&w, &w, 1, DataType::kFloat32, ReduceOp::kSum).isOk()) return 15;
  if (w != 3.0f) return 16;
  return 0;
}

/// Forks the ranks; while they run, writes one byte a second to slowLoris; returns their exit
/// codes (-1: still running at the deadline, killed).
std::vector<int> runJob(int port, const Fd* slowLoris) {
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(runRank(r, port));
    pids.push_back(pid);
  }
  std::vector<int> codes(kRanks, -1);
  int running = kRanks;
  const uint64_t until = nowNs() + static_cast<uint64_t>(kJobTimeoutMs + 10000) * 1000000;
  uint64_t nextByte = nowNs();
  static const RawRequest loris;  // a set, one byte at a time, never finished
  size_t lorisSent = 0;
  while (running > 0 && nowNs() < until) {
    if (slowLoris != nullptr && nowNs() >= nextByte && lorisSent < sizeof(loris)) {
      (void)sendRaw(*slowLoris, reinterpret_cast<const char*>(&loris) + lorisSent++, 1);
      nextByte = nowNs() + 1000000000ull;
    }
    for (int r = 0; r < kRanks; ++r) {
      int st;
      if (codes[r] != -1 || waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      --running;
    }
    usleep(20000);
  }
  for (int r = 0; r < kRanks; ++r) {
    if (codes[r] != -1) continue;
    kill(pids[r], SIGKILL);
    waitpid(pids[r], nullptr, 0);
  }
  return codes;
}

bool fdsAllow(size_t n) {
  rlimit l{};
  return getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur >= n;
}

TEST(StoreAbuseTest, JobCreatesAndSplitsWhileForeignClientsAbuseTheStore) {
  constexpr int kIdle = 200;
  if (!fdsAllow(2 * kIdle + 256)) GTEST_SKIP() << "needs " << 2 * kIdle + 256 << " descriptors";
  auto server = createTcpStore("127.0.0.1", 0, true, Deadline::afterMs(5000));
  ASSERT_TRUE(server.isOk()) << server.status().toString();
  const int port = tcpStorePort(server->get());

  std::vector<Fd> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(rawConnect(port));
    ASSERT_TRUE(idle.back().valid()) << "idle connection " << i;
  }
  Fd slowLoris = rawConnect(port);
  // A huge length prefix: refused at once, the connection closed, nothing allocated.
  Fd huge = rawConnect(port);
  RawRequest h;
  h.valueLength = uint64_t{1} << 62;
  ASSERT_TRUE(sendRaw(huge, &h, sizeof(h)));
  // The largest value allowed, announced and never sent: held at no cost until its deadline.
  Fd announced = rawConnect(port);
  RawRequest a;
  a.valueLength = kStoreMaxValueBytes;
  a.keyLength = 1;
  ASSERT_TRUE(sendRaw(announced, &a, sizeof(a)));
  Fd garbage = rawConnect(port);
  const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(sendRaw(garbage, http, sizeof(http)));
  EXPECT_TRUE(closedWithin(huge, 2000)) << "a huge length prefix must close its connection";
  EXPECT_TRUE(closedWithin(garbage, 2000)) << "garbage must close its connection";

  const uint64_t t0 = nowNs();
  std::vector<int> codes = runJob(port, &slowLoris);
  const double seconds = static_cast<double>(nowNs() - t0) * 1e-9;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(codes[r], 0) << "rank " << r << " (-1: still running after the deadline)";
  }
  EXPECT_LT(seconds, kJobTimeoutMs / 1000.0) << "the job took " << seconds << " s";

  // Past kStoreFirstRequestMs the idle, slow-loris and announced connections are dropped...
  const int64_t left = kStoreFirstRequestMs + 2000 - static_cast<int64_t>(seconds * 1000);
  EXPECT_TRUE(closedWithin(slowLoris, static_cast<int>(std::max<int64_t>(left, 100))))
      << "a slow-loris client must be dropped " << kStoreFirstRequestMs << " ms after connecting";
  EXPECT_TRUE(closedWithin(announced, 1000));
  EXPECT_TRUE(closedWithin(idle.front(), 1000));
  // ... and the store still serves.
  ASSERT_TRUE((*server)->set("after", {1, 2, 3}).isOk());
  auto v = (*server)->get("after", Deadline::afterMs(2000));
  ASSERT_TRUE(v.isOk()) << v.status().toString();
}

TEST(StoreAbuseTest, AFullConnectionTableEvictsTheOldestForeignConnection) {
  // A table of a few hundred: the server's limit follows this process's descriptor limit, lowered
  // here (and restored), while a child holds the foreign connections under its own.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_cur < 1024) GTEST_SKIP() << "needs ulimit -n >= 1024";
  rlimit low = saved;
  low.rlim_cur = 448;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const size_t limit = storeConnectionLimit();
  auto server = createTcpStore("127.0.0.1", 0, true, Deadline::afterMs(5000));
  ASSERT_TRUE(server.isOk()) << server.status().toString();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);  // the server keeps the limit it started with
  EXPECT_EQ(limit, 448u - 64);
  const int port = tcpStorePort(server->get());
  const size_t foreign = limit + 16;
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  pid_t holder = fork();
  if (holder == 0) {
    // Opens the foreign connections; reports 'o' when the oldest was closed and the newest not.
    std::vector<Fd> fds;
    for (size_t i = 0; i < foreign; ++i) fds.push_back(rawConnect(port));
    const bool oldestGone = closedWithin(fds.front(), 3000);
    const bool newestOpen = !closedWithin(fds.back(), 200);
    const char verdict = oldestGone && newestOpen ? 'o' : oldestGone ? 'n' : 'x';
    (void)!write(ready[1], &verdict, 1);
    char c;
    (void)!read(release[0], &c, 1);  // hold the connections until the parent is done
    _exit(0);
  }
  char verdict = 0;
  ASSERT_EQ(read(ready[0], &verdict, 1), 1);
  EXPECT_NE(verdict, 'x') << "the oldest foreign connection stayed open at the limit";
  EXPECT_NE(verdict, 'n') << "the newest foreign connection was closed";
  // The table is full of foreign connections: a real client still connects and is served, and so
  // is the whole job.
  auto client = createTcpStore("127.0.0.1", port, false, Deadline::afterMs(5000));
  ASSERT_TRUE(client.isOk()) << client.status().toString();
  EXPECT_TRUE((*client)->set("k", {7}).isOk());
  std::vector<int> codes = runJob(port, nullptr);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  (void)!write(release[1], "x", 1);
  waitpid(holder, nullptr, 0);
}

}  // namespace
}  // namespace braid
