#include "core/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace braid {
namespace {

TEST(ProcessGone, RunningProcessIsNotGone) {
  EXPECT_FALSE(processGone(getpid()));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  EXPECT_FALSE(processGone(child));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

// kill(pid, 0) succeeds for a zombie; a rank killed under a launcher that has not reaped it yet
// must still count as gone.
TEST(ProcessGone, UnreapedZombieIsGone) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  siginfo_t info{};
  // Wait for the exit without reaping (WNOWAIT leaves the zombie in place).
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(kill(child, 0), 0);
  EXPECT_TRUE(processGone(child));
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(processGone(child));  // reaped: no such process
}

TEST(ProcessGone, NoPidIsNeverGone) {
  EXPECT_FALSE(processGone(0));
  EXPECT_FALSE(processGone(-5));
}

}  // namespace
}  // namespace braid
