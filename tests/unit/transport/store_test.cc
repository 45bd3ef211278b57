// Stores and bootstrap: the file and TCP stores from one and from several (forked) processes,
// deadlines, and bootstrapFromEnvironment with torchrun-style and file variables, including the
// errors for bad variables.
//
// Forked children never run gtest assertions; they report through their exit code (0 = ok, any
// other value names the step that failed). Parameters are changed in the children only
// (setParamForTesting), environment variables with setenv in the children, or in the parent for
// tests that do not fork, restored afterwards.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/params.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/launchers.h"
#include "transport/socket.h"
#include "transport/transport.h"

namespace braid {
namespace {

constexpr int64_t kWaitMs = 30000;

std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}
std::string text(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

/// A fresh directory under TMPDIR (or /tmp), removed at destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/braid-store-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* made = mkdtemp(buf.data());
    path_ = made ? made : "";
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::string cmd = "rm -rf '" + path_ + "'";
      int rc = system(cmd.c_str());
      (void)rc;
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A port that was free a moment ago (bind port 0, read it, close).
int freePort() {
  transport::SocketAddress bound;
  auto fd = transport::listenOn(transport::SocketAddress::loopback(AF_INET, 0),
                                transport::ListenOptions(), &bound);
  return fd.isOk() ? bound.port() : -1;
}

/// Runs body(i) in `n` forked children; returns their exit codes (-signal when killed).
std::vector<int> runChildren(int n, const std::function<int(int)>& body) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      _exit(body(i));
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  Deadline deadline = Deadline::afterMs(2 * kWaitMs);
  for (pid_t pid : pids) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) != pid) {
      if (deadline.expired()) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      usleep(1000);
    }
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  }
  return codes;
}

void expectAllZero(const std::vector<int>& codes) {
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0) << "child " << i;
}

/// Sets environment variables for the scope (parent-side tests), restoring the old values.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value) {
        setenv(name, value, 1);
      } else {
        unsetenv(name);
      }
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// In a child: clears every launcher variable, then sets `vars`.
void setLaunchEnv(const std::map<std::string, std::string>& vars) {
  // Every variable a launcher row reads, so that a run under srun or mpirun sees only `vars`.
  for (const std::string& name : launcherVariableNames()) unsetenv(name.c_str());
  unsetenv("BRAID_FILE_STORE");
  for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  setParamForTesting("BRAID_FILE_STORE", "");
  setParamForTesting("BRAID_BOOTSTRAP", "");
}

// ---------------------------------------------------------------------------------------------
// The Store contract, for both implementations

enum class Kind { kFile, kTcp };

class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() == Kind::kFile) {
      ASSERT_FALSE(dir_.path().empty());
      auto s = createFileStore(dir_.path() + "/store");
      ASSERT_TRUE(s.isOk()) << s.status().toString();
      store_ = std::move(s.value());
    } else {
      auto s = createTcpStore("127.0.0.1", 0, /*isServer=*/true, Deadline::afterMs(kWaitMs));
      ASSERT_TRUE(s.isOk()) << s.status().toString();
      store_ = std::move(s.value());
      port_ = tcpStorePort(store_.get());
      ASSERT_GT(port_, 0);
    }
  }

  /// Another handle on the same store (in this process or a child).
  Result<std::unique_ptr<Store>> open() {
    if (GetParam() == Kind::kFile) return createFileStore(dir_.path() + "/store");
    return createTcpStore("127.0.0.1", port_, /*isServer=*/false, Deadline::afterMs(kWaitMs));
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  int port_ = -1;
};

TEST_P(StoreTest, SetGetAddInOneProcess) {
  ASSERT_TRUE(store_->set("a", bytes("hello")).isOk());
  auto v = store_->get("a", Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(text(v.value()), "hello");
  // Overwrite, empty values, keys with odd characters, binary values.
  ASSERT_TRUE(store_->set("a", bytes("")).isOk());
  EXPECT_EQ(text(store_->get("a", Deadline::afterMs(kWaitMs)).value()), "");
  std::vector<uint8_t> binary = {0, 1, 2, 255, 0, 10};
  ASSERT_TRUE(store_->set("comm/0/../rank 3:handle", binary).isOk());
  EXPECT_EQ(store_->get("comm/0/../rank 3:handle", Deadline::afterMs(kWaitMs)).value(), binary);
  // add: missing = 0, returns the new value, negative deltas, readable through get.
  EXPECT_EQ(store_->add("n", 5).value(), 5);
  EXPECT_EQ(store_->add("n", -2).value(), 3);
  EXPECT_EQ(text(store_->get("n", Deadline::afterMs(kWaitMs)).value()), "3");
  EXPECT_EQ(store_->add("a", 1).status().code(), Code::kInvalidUsage);  // "" is no integer
  ASSERT_TRUE(store_->set("word", bytes("abc")).isOk());
  EXPECT_EQ(store_->add("word", 1).status().code(), Code::kInvalidUsage);
  EXPECT_EQ(store_->set("", bytes("x")).code(), Code::kInvalidArgument);
}

TEST_P(StoreTest, ErasePrefixRemovesExactlyTheKeysUnderIt) {
  ASSERT_TRUE(store_->set("braid/c0/host/0", bytes("h")).isOk());
  ASSERT_TRUE(store_->set("braid/c0/handles/1", bytes("x")).isOk());
  ASSERT_EQ(store_->add("braid/c0/left", 2).value(), 2);
  ASSERT_TRUE(store_->set("braid/c0.s1.0/host/0", bytes("child")).isOk());  // a child, beside
  ASSERT_TRUE(store_->set("braid/c01/host/0", bytes("c01")).isOk());
  ASSERT_TRUE(store_->set("braid/c", bytes("short")).isOk());
  ASSERT_TRUE(store_->erasePrefix("braid/c0/").isOk());
  for (const char* gone : {"braid/c0/host/0", "braid/c0/handles/1", "braid/c0/left"}) {
    EXPECT_EQ(store_->get(gone, Deadline::afterMs(0)).status().code(), Code::kTimeout) << gone;
  }
  EXPECT_EQ(text(store_->get("braid/c0.s1.0/host/0", Deadline::afterMs(kWaitMs)).value()), "child");
  EXPECT_EQ(text(store_->get("braid/c01/host/0", Deadline::afterMs(kWaitMs)).value()), "c01");
  EXPECT_EQ(text(store_->get("braid/c", Deadline::afterMs(kWaitMs)).value()), "short");
  // An erased counter starts again from 0; erasing nothing is fine; an empty prefix is refused.
  EXPECT_EQ(store_->add("braid/c0/left", 1).value(), 1);
  EXPECT_TRUE(store_->erasePrefix("nothing/").isOk());
  EXPECT_EQ(store_->erasePrefix("").code(), Code::kInvalidArgument);
  if (GetParam() == Kind::kFile) {
    // Nothing of the erased keys is left on disk, lock files included.
    ASSERT_TRUE(store_->erasePrefix("braid/c0/").isOk());
    size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path() + "/store")) {
      EXPECT_EQ(e.path().filename().string().find("c0%2F"), std::string::npos) << e.path();
      ++files;
    }
    EXPECT_EQ(files, 3u);  // the three keys kept (set makes no lock file)
  }
}

TEST_P(StoreTest, GetOfAMissingKeyTimesOutAtTheDeadline) {
  for (int64_t ms : {0, 150, 400}) {
    uint64_t start = nowNs();
    auto v = store_->get("never", Deadline::afterMs(ms));
    double elapsed = static_cast<double>(nowNs() - start) * 1e-6;
    EXPECT_EQ(v.status().code(), Code::kTimeout) << v.status().toString();
    EXPECT_NE(v.status().message().find("never"), std::string::npos) << v.status().toString();
    EXPECT_GE(elapsed, static_cast<double>(ms) - 5) << ms;
    EXPECT_LT(elapsed, static_cast<double>(ms) + 500) << ms;
  }
  // The store still works afterwards.
  ASSERT_TRUE(store_->set("late", bytes("x")).isOk());
  EXPECT_TRUE(store_->get("late", Deadline::afterMs(kWaitMs)).isOk());
}

TEST_P(StoreTest, GetWaitsForAKeySetLater) {
  auto other = open();
  ASSERT_TRUE(other.isOk()) << other.status().toString();
  std::thread setter([&] {
    usleep(100000);
    EXPECT_TRUE(other.value()->set("later", bytes("v")).isOk());
  });
  uint64_t start = nowNs();
  auto v = store_->get("later", Deadline::afterMs(kWaitMs));
  setter.join();
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(text(v.value()), "v");
  EXPECT_GE(nowNs() - start, 90000000u);
}

TEST_P(StoreTest, SetGetAddFromSeveralProcesses) {
  for (int n : {1, 2, 3, 5, 8}) {
    const int kAdds = 25;
    std::string prefix = "round" + std::to_string(n) + "/";
    std::vector<int> codes = runChildren(n, [&](int rank) {
      auto s = open();
      if (!s.isOk()) return 10;
      Store* st = s.value().get();
      for (int i = 0; i < kAdds; ++i) {
        if (!st->add(prefix + "counter", 1).isOk()) return 11;
      }
      if (!st->set(prefix + "key/" + std::to_string(rank), bytes("value" + std::to_string(rank)))
               .isOk()) {
        return 12;
      }
      for (int peer = 0; peer < n; ++peer) {
        auto v = st->get(prefix + "key/" + std::to_string(peer), Deadline::afterMs(kWaitMs));
        if (!v.isOk()) return 13;
        if (text(v.value()) != "value" + std::to_string(peer)) return 14;
      }
      // Everyone reached this point: a barrier on add.
      auto arrived = st->add(prefix + "arrived", 1);
      if (!arrived.isOk()) return 15;
      return 0;
    });
    expectAllZero(codes);
    EXPECT_EQ(store_->add(prefix + "counter", 0).value(), n * kAdds) << n << " processes";
    EXPECT_EQ(store_->add(prefix + "arrived", 0).value(), n);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoreTest, ::testing::Values(Kind::kFile, Kind::kTcp),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return info.param == Kind::kFile ? "file" : "tcp";
                         });

// ---------------------------------------------------------------------------------------------
// TCP store specifics

TEST(TcpStoreTest, ClientRetriesUntilTheServerStarts) {
  int port = freePort();
  ASSERT_GT(port, 0);
  std::thread server([&] {
    usleep(300000);
    auto s = createTcpStore("127.0.0.1", port, /*isServer=*/true, Deadline::afterMs(kWaitMs));
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    EXPECT_TRUE(s.value()->set("k", bytes("v")).isOk());
    usleep(300000);
  });
  auto client = createTcpStore("127.0.0.1", port, /*isServer=*/false, Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(client.isOk()) << client.status().toString();
  auto v = client.value()->get("k", Deadline::afterMs(kWaitMs));
  server.join();
  ASSERT_TRUE(v.isOk()) << v.status().toString();
}

TEST(TcpStoreTest, ClientWithoutServerTimesOutAtTheDeadline) {
  int port = freePort();
  uint64_t start = nowNs();
  auto client = createTcpStore("127.0.0.1", port, /*isServer=*/false, Deadline::afterMs(300));
  double ms = static_cast<double>(nowNs() - start) * 1e-6;
  EXPECT_EQ(client.status().code(), Code::kTimeout) << client.status().toString();
  EXPECT_NE(client.status().message().find(std::to_string(port)), std::string::npos);
  EXPECT_GE(ms, 290.0);
  EXPECT_LT(ms, 2000.0);
}

TEST(TcpStoreTest, ServerShutdownWakesAWaitingClient) {
  auto server = createTcpStore("127.0.0.1", 0, /*isServer=*/true, Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(server.isOk());
  int port = tcpStorePort(server.value().get());
  auto client = createTcpStore("127.0.0.1", port, /*isServer=*/false, Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(client.isOk());
  std::thread stopper([&] {
    usleep(200000);
    server.value().reset();  // joins the server thread
  });
  uint64_t start = nowNs();
  auto v = client.value()->get("never", Deadline::afterMs(kWaitMs));
  stopper.join();
  EXPECT_EQ(v.status().code(), Code::kRemote) << v.status().toString();
  EXPECT_LT(nowNs() - start, 5000000000u) << "the client hung on a dead server";
}

TEST(TcpStoreTest, ServerThatIsNotABraidStoreIsReportedNotHung) {
  transport::SocketAddress bound;
  auto listener = transport::listenOn(transport::SocketAddress::loopback(AF_INET, 0),
                                      transport::ListenOptions(), &bound);
  ASSERT_TRUE(listener.isOk());
  std::thread impostor([&] {
    // Accepts and answers garbage, like some other service on the port would.
    for (int i = 0; i < 100; ++i) {
      int fd = accept(listener.value().get(), nullptr, nullptr);
      if (fd >= 0) {
        const char reply[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
        ssize_t n = write(fd, reply, sizeof(reply));
        (void)n;
        usleep(100000);
        close(fd);
        return;
      }
      usleep(10000);
    }
  });
  auto client =
      createTcpStore("127.0.0.1", bound.port(), /*isServer=*/false, Deadline::afterMs(3000));
  impostor.join();
  EXPECT_FALSE(client.isOk());
  EXPECT_NE(client.status().code(), Code::kTimeout) << client.status().toString();
}

TEST(TcpStoreTest, SecondServerOnTheSamePortIsAClearError) {
  auto first = createTcpStore("127.0.0.1", 0, /*isServer=*/true, Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(first.isOk());
  int port = tcpStorePort(first.value().get());
  auto second = createTcpStore("127.0.0.1", port, /*isServer=*/true, Deadline::afterMs(1000));
  ASSERT_FALSE(second.isOk());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos)
      << second.status().toString();
}

TEST(FileStoreTest, PathThatIsAFileIsInvalidArgument) {
  TempDir dir;
  std::string file = dir.path() + "/plain";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  EXPECT_EQ(createFileStore(file).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(createFileStore("").isOk());
}

TEST(JobSecretTest, RankZeroPublishesOthersWaitWithADeadline) {
  auto store = createTcpStore("127.0.0.1", 0, /*isServer=*/true, Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(store.isOk());
  auto early = exchangeJobSecret(store.value().get(), 1, Deadline::afterMs(100));
  EXPECT_EQ(early.status().code(), Code::kTimeout) << early.status().toString();
  auto zero = exchangeJobSecret(store.value().get(), 0, Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(zero.isOk());
  EXPECT_NE(zero.value(), 0u);
  auto one = exchangeJobSecret(store.value().get(), 1, Deadline::afterMs(kWaitMs));
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(one.value(), zero.value());
}

// ---------------------------------------------------------------------------------------------
// bootstrapFromEnvironment

/// Child body after bootstrap: checks what it got, then every rank listens with the tcp transport
/// and sends 1 MiB around a ring through handles exchanged in the store. Returns 0 when all is
/// well.
int checkBootstrapAndRing(int rank, int size, int localRank, const char* method) {
  auto info = bootstrapFromEnvironment(Deadline::afterMs(kWaitMs));
  if (!info.isOk()) {
    fprintf(stderr, "rank %d: %s\n", rank, info.status().toString().c_str());
    return 20;
  }
  if (info->rank != rank || info->size != size || info->localRank != localRank) return 21;
  if (info->method != method || !info->store) return 22;
  Store* store = info->store.get();
  // The secret, exchanged through the bootstrap's store as Communicator::create does: every rank
  // gets the same one.
  auto secret = exchangeJobSecret(store, rank, Deadline::afterMs(kWaitMs));
  if (!secret.isOk() || secret.value() == 0) return 22;
  std::vector<uint8_t> mine(8);
  std::memcpy(mine.data(), &secret.value(), 8);
  if (!store->set("test/secret/" + std::to_string(rank), mine).isOk()) return 23;
  for (int peer = 0; peer < size; ++peer) {
    auto v = store->get("test/secret/" + std::to_string(peer), Deadline::afterMs(kWaitMs));
    if (!v.isOk() || v.value() != mine) return 24;
  }
  // A ring over the tcp transport, keyed by the bootstrap's secret.
  transport::TransportOptions options;
  options.jobSecret = secret.value();
  options.rank = rank;
  options.tcpAddress = "127.0.0.1";
  auto t = transport::createTransport("tcp", options);
  if (!t.isOk()) return 25;
  transport::Handle handle;
  std::unique_ptr<transport::ListenComm> listen;
  if (!t.value()->listen(&handle, &listen).isOk()) return 26;
  if (!store
           ->set("test/handle/" + std::to_string(rank),
                 std::vector<uint8_t>(handle.bytes, handle.bytes + sizeof(handle.bytes)))
           .isOk()) {
    return 27;
  }
  auto next =
      store->get("test/handle/" + std::to_string((rank + 1) % size), Deadline::afterMs(kWaitMs));
  if (!next.isOk() || next.value().size() != sizeof(handle.bytes)) return 28;
  transport::Handle nextHandle;
  std::memcpy(nextHandle.bytes, next.value().data(), sizeof(nextHandle.bytes));
  std::unique_ptr<transport::SendComm> send;
  if (!t.value()->connect(nextHandle, &send).isOk()) return 29;
  constexpr size_t kBytes = 1 << 20;
  std::vector<uint8_t> out(kBytes, static_cast<uint8_t>(rank));
  std::vector<uint8_t> in(kBytes, 0xff);
  std::unique_ptr<transport::RecvComm> recv;
  transport::Request* s = nullptr;
  transport::Request* r = nullptr;
  bool sdone = false;
  bool rdone = false;
  Deadline deadline = Deadline::afterMs(kWaitMs);
  Backoff backoff;
  while (!sdone || !rdone) {
    if (deadline.expired()) return 30;
    if (!recv && !t.value()->accept(listen.get(), &recv).isOk()) return 31;
    if (s == nullptr &&
        !t.value()->isend(send.get(), out.data(), kBytes, transport::Meta{}, &s).isOk()) {
      return 32;
    }
    if (recv && r == nullptr &&
        !t.value()->irecv(recv.get(), in.data(), kBytes, nullptr, &r).isOk()) {
      return 33;
    }
    if (s != nullptr && !sdone && !t.value()->test(s, &sdone, nullptr).isOk()) return 34;
    if (r != nullptr && !rdone && !t.value()->test(r, &rdone, nullptr).isOk()) return 35;
    backoff.pause();
  }
  uint8_t prev = static_cast<uint8_t>((rank + size - 1) % size);
  for (uint8_t b : in) {
    if (b != prev) return 36;
  }
  // Nobody leaves before everyone is done, and rank 0 (which serves a TCP store) leaves last.
  if (!store->add("test/done", 1).isOk()) return 37;
  auto waitFor = [&](const char* key, int64_t count) {
    for (;;) {
      auto v = store->add(key, 0);
      if (!v.isOk()) return false;
      if (v.value() == count) return true;
      if (deadline.expired()) return false;
      usleep(1000);
    }
  };
  if (!waitFor("test/done", size)) return 38;
  if (rank != 0) return store->add("test/left", 1).isOk() ? 0 : 39;
  return waitFor("test/left", size - 1) ? 0 : 40;
}

TEST(BootstrapTest, TorchrunVariablesWithForkedRanks) {
  for (int size : {1, 2, 3, 4}) {
    int port = freePort();
    ASSERT_GT(port, 0);
    std::vector<int> codes = runChildren(size, [&](int rank) {
      setLaunchEnv({{"RANK", std::to_string(rank)},
                    {"WORLD_SIZE", std::to_string(size)},
                    {"LOCAL_RANK", std::to_string(rank)},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(port)}});
      return checkBootstrapAndRing(rank, size, rank, "torchrun");
    });
    expectAllZero(codes);
  }
}

TEST(BootstrapTest, ExplicitEnvMethodWithoutLocalRank) {
  int port = freePort();
  std::vector<int> codes = runChildren(2, [&](int rank) {
    setLaunchEnv({{"RANK", std::to_string(rank)},
                  {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", std::to_string(port)},
                  {"BRAID_BOOTSTRAP", "env"}});
    return checkBootstrapAndRing(rank, 2, -1, "torchrun");
  });
  expectAllZero(codes);
}

TEST(BootstrapTest, FileStoreWithForkedRanks) {
  for (int size : {1, 3, 5}) {
    TempDir dir;
    std::vector<int> codes = runChildren(size, [&](int rank) {
      setLaunchEnv({{"RANK", std::to_string(rank)},
                    {"WORLD_SIZE", std::to_string(size)},
                    {"BRAID_FILE_STORE", dir.path()}});
      return checkBootstrapAndRing(rank, size, -1, "file");
    });
    expectAllZero(codes);
  }
}

/// bootstrapFromEnvironment in this process with exactly `vars` set; returns its status.
Status bootstrapWith(const std::map<std::string, std::string>& vars) {
  ScopedEnv clear({{"RANK", nullptr},
                   {"WORLD_SIZE", nullptr},
                   {"LOCAL_RANK", nullptr},
                   {"MASTER_ADDR", nullptr},
                   {"MASTER_PORT", nullptr},
                   {"PMI_RANK", nullptr},
                   {"OMPI_COMM_WORLD_RANK", nullptr},
                   {"PMIX_RANK", nullptr},
                   {"SLURM_PROCID", nullptr},
                   {"LOCAL_WORLD_SIZE", nullptr},
                   {"GROUP_RANK", nullptr},
                   {"TORCHELASTIC_RUN_ID", nullptr},
                   {"BRAID_FILE_STORE", nullptr},
                   {"BRAID_BOOTSTRAP", nullptr}});
  for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  setParamForTesting("BRAID_FILE_STORE", "");
  setParamForTesting("BRAID_BOOTSTRAP", "");
  auto info = bootstrapFromEnvironment(Deadline::afterMs(2000));
  for (const auto& [name, value] : vars) unsetenv(name.c_str());
  setParamForTesting("BRAID_FILE_STORE", "");
  setParamForTesting("BRAID_BOOTSTRAP", "");
  return info.status();
}

void expectBadVariable(const std::map<std::string, std::string>& vars, const std::string& name) {
  Status s = bootstrapWith(vars);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.toString();
  EXPECT_NE(s.message().find(name), std::string::npos)
      << "the error should name " << name << ": " << s.toString();
}

TEST(BootstrapTest, BadVariablesGiveClearErrors) {
  const std::map<std::string, std::string> good = {
      {"RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& name, const char* value) {
    std::map<std::string, std::string> v = good;
    if (value == nullptr) {
      v.erase(name);
    } else {
      v[name] = value;
    }
    return v;
  };
  expectBadVariable(with("RANK", nullptr), "RANK");
  expectBadVariable(with("RANK", "abc"), "RANK");
  expectBadVariable(with("RANK", "-1"), "RANK");
  expectBadVariable(with("RANK", "4"), "RANK");
  expectBadVariable(with("RANK", "1x"), "RANK");
  expectBadVariable(with("WORLD_SIZE", nullptr), "WORLD_SIZE");
  expectBadVariable(with("WORLD_SIZE", "0"), "WORLD_SIZE");
  expectBadVariable(with("WORLD_SIZE", "four"), "WORLD_SIZE");
  expectBadVariable(with("MASTER_PORT", nullptr), "MASTER_PORT");
  expectBadVariable(with("MASTER_PORT", "0"), "MASTER_PORT");
  expectBadVariable(with("MASTER_PORT", "70000"), "MASTER_PORT");
  expectBadVariable(with("MASTER_PORT", "http"), "MASTER_PORT");
  expectBadVariable(with("LOCAL_RANK", "x"), "LOCAL_RANK");
  // MASTER_ADDR present but other variables missing: the torchrun method names what is missing.
  expectBadVariable({{"MASTER_ADDR", "127.0.0.1"}}, "WORLD_SIZE");
  // File method.
  expectBadVariable({{"BRAID_FILE_STORE", "/tmp/x"}, {"WORLD_SIZE", "2"}}, "RANK");
  expectBadVariable({{"BRAID_BOOTSTRAP", "file"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}},
                    "BRAID_FILE_STORE");
  // Nothing at all.
  Status none = bootstrapWith({});
  EXPECT_EQ(none.code(), Code::kInvalidArgument);
  EXPECT_NE(none.message().find("MASTER_ADDR"), std::string::npos) << none.toString();
  EXPECT_NE(none.message().find("BRAID_FILE_STORE"), std::string::npos) << none.toString();
}

TEST(BootstrapTest, NonZeroRankWithoutServerTimesOut) {
  int port = freePort();
  uint64_t start = nowNs();
  Status s = bootstrapWith({{"RANK", "1"},
                            {"WORLD_SIZE", "2"},
                            {"MASTER_ADDR", "127.0.0.1"},
                            {"MASTER_PORT", std::to_string(port)}});
  EXPECT_EQ(s.code(), Code::kTimeout) << s.toString();
  EXPECT_NE(s.message().find("MASTER_PORT=" + std::to_string(port)), std::string::npos)
      << s.toString();
  EXPECT_LT(nowNs() - start, 5000000000u);
}

}  // namespace
}  // namespace braid
