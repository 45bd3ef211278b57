// Store clients against a silent peer: a TCP store server that is SIGSTOPped (alive, socket
// open, never answering), and a file store whose key lock is held by a SIGSTOPped process.
// Every client operation (set, get, add) must end in kTimeout within its bound + 2 s, with a
// message naming the store, instead of waiting for the peer to come back.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/clock.h"
#include "transport/bootstrap/bootstrap.h"

namespace braid {
namespace {

constexpr int64_t kBoundMs = 1500;

/// A forked child that runs setup() (whose int result it writes to the parent), then waits.
pid_t spawn(const std::function<int()>& setup, int* value) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(fds[0]);
    int v = setup();
    if (write(fds[1], &v, sizeof(v)) != sizeof(v)) _exit(3);
    for (;;) pause();
  }
  close(fds[1]);
  if (read(fds[0], value, sizeof(*value)) != sizeof(*value)) *value = -1;
  close(fds[0]);
  return pid;
}

/// SIGSTOPs the child and waits until it is stopped.
void stop(pid_t pid) {
  kill(pid, SIGSTOP);
  int status = 0;
  waitpid(pid, &status, WUNTRACED);
}

void reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

/// Runs op, expects kTimeout mentioning `needle` within kBoundMs + slackMs.
void expectTimeout(const char* what, const std::function<Status()>& op, const std::string& needle,
                   int64_t slackMs = 2000) {
  const uint64_t t0 = nowNs();
  Status s = op();
  const double ms = static_cast<double>(nowNs() - t0) / 1e6;
  EXPECT_EQ(s.code(), Code::kTimeout) << what << ": " << s.toString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << what << ": " << s.toString();
  EXPECT_LE(ms, kBoundMs + slackMs) << what << " took " << ms << " ms";
  EXPECT_GE(ms, kBoundMs - 50) << what << " gave up early: " << s.toString();
}

TEST(StoreDeadlineTest, StoppedTcpServerTimesOutEveryClientOperation) {
  int port = -1;
  pid_t server = spawn(
      [] {
        auto s = createTcpStore("127.0.0.1", 0, true, Deadline::afterMs(5000), kBoundMs);
        if (!s.isOk()) return -1;
        int p = tcpStorePort(s->get());
        static std::unique_ptr<Store> keep;  // serves until the child dies
        keep = std::move(s).value();
        return p;
      },
      &port);
  ASSERT_GT(port, 0);
  // One client per operation (a timed-out connection is unusable afterwards), all connected
  // while the server answers; then the server stops.
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < 3; ++i) {
    auto c = createTcpStore("127.0.0.1", port, false, Deadline::afterMs(5000), kBoundMs);
    if (!c.isOk()) {
      reap(server);
      FAIL() << c.status().toString();
    }
    clients.push_back(std::move(c).value());
  }
  stop(server);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  auto set = [&] { return clients[0]->set("k", {1, 2, 3}); };
  auto get = [&] { return clients[1]->get("k", Deadline::afterMs(kBoundMs)).status(); };
  auto add = [&] { return clients[2]->add("n", 1).status(); };
  expectTimeout("set", set, where);
  // get waits 2 s past its deadline for the server's own timeout answer (tcp_store.cc,
  // kReplyGraceMs), so that a slow but live server's answer is not mistaken for silence.
  expectTimeout("get", get, where, 3000);
  expectTimeout("add", add, where);
  reap(server);
}

TEST(StoreDeadlineTest, LockHeldByAStoppedProcessTimesOutAdd) {
  char tmpl[] = "/tmp/braid-store-deadline-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto store = createFileStore(dir, kBoundMs);
  ASSERT_TRUE(store.isOk()) << store.status().toString();
  ASSERT_TRUE((*store)->add("n", 1).isOk());
  int locked = -1;
  pid_t holder = spawn(
      [&] {
        int fd = ::open((dir + "/.lock.n").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        return fd >= 0 && ::flock(fd, LOCK_EX) == 0 ? 1 : 0;
      },
      &locked);
  ASSERT_EQ(locked, 1) << "the child could not take the key's lock";
  stop(holder);
  // (dir/.lock.<key> is file_store.cc's lock file: if that changes, add does not wait here.)
  auto add = [&] { return (*store)->add("n", 1).status(); };
  expectTimeout("add", add, "held by another process");
  reap(holder);
  EXPECT_TRUE((*store)->add("n", 1).isOk()) << "the lock is free again once its holder died";
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace braid
