#include "core/log.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace braid {
namespace {

std::string shortHostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Each test gets a private temporary directory and a logger reset to the environment it sets.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/braid_log_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    unsetenv("BRAID_DEBUG");
    unsetenv("BRAID_DEBUG_FILE");
    setLogRank(-1);
    resetLogForTesting();
  }
  void TearDown() override {
    unsetenv("BRAID_DEBUG");
    unsetenv("BRAID_DEBUG_FILE");
    setLogRank(-1);
    resetLogForTesting();
    std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  // Sets the environment and makes the logger re-read it.
  static void configure(const char* level, const std::string& file) {
    if (level != nullptr) setenv("BRAID_DEBUG", level, 1);
    if (!file.empty()) setenv("BRAID_DEBUG_FILE", file.c_str(), 1);
    resetLogForTesting();
  }
  std::string prefix(const char* rank, const char* level) const {
    return shortHostName() + ":" + std::to_string(getpid()) + ":" + rank + " braid " + level + " ";
  }

  std::string dir_;
};

TEST_F(LogTest, PrefixFormatOnStderr) {
  ::testing::internal::CaptureStderr();
  BRAID_WARN("hello %d", 42);
  setLogRank(5);
  BRAID_ERROR("bad %s", "thing");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            prefix("-", "WARN") + "hello 42\n" + prefix("5", "ERROR") + "bad thing\n");
}

TEST_F(LogTest, DefaultLevelIsWarn) {
  EXPECT_TRUE(logEnabled(LogLevel::kError));
  EXPECT_TRUE(logEnabled(LogLevel::kWarn));
  EXPECT_FALSE(logEnabled(LogLevel::kInfo));
  EXPECT_FALSE(logEnabled(LogLevel::kTrace));
  ::testing::internal::CaptureStderr();
  BRAID_INFO("not shown");
  BRAID_TRACE("not shown");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(LogTest, LevelsFromEnvironmentCaseInsensitive) {
  configure("info", "");
  EXPECT_TRUE(logEnabled(LogLevel::kInfo));
  EXPECT_FALSE(logEnabled(LogLevel::kTrace));
  ::testing::internal::CaptureStderr();
  BRAID_INFO("shown");
  BRAID_TRACE("hidden");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), prefix("-", "INFO") + "shown\n");

  configure("TRACE", "");
  EXPECT_TRUE(logEnabled(LogLevel::kTrace));
  ::testing::internal::CaptureStderr();
  BRAID_TRACE("where %s", "am I");
  const std::string err = ::testing::internal::GetCapturedStderr();
  // TRACE lines also say where they come from.
  EXPECT_EQ(err.rfind(prefix("-", "TRACE") + "log_test.cc:", 0), 0u) << err;
  EXPECT_NE(err.find(" where am I\n"), std::string::npos) << err;
}

TEST_F(LogTest, ErrorAlwaysPrinted) {
  configure("WARN", "");
  ::testing::internal::CaptureStderr();
  BRAID_ERROR("e");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), prefix("-", "ERROR") + "e\n");
}

TEST_F(LogTest, InvalidLevelWarnsAndUsesWarn) {
  ::testing::internal::CaptureStderr();
  configure("verbose", "");
  EXPECT_FALSE(logEnabled(LogLevel::kInfo));
  EXPECT_TRUE(logEnabled(LogLevel::kWarn));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            prefix("-", "WARN") +
                "BRAID_DEBUG='verbose' is not one of WARN|INFO|TRACE; using the default WARN\n");
}

TEST_F(LogTest, OneNewlinePerLineAndLongMessagesIntact) {
  ::testing::internal::CaptureStderr();
  BRAID_WARN("ends with newline\n");
  BRAID_WARN("%s", "");
  const std::string big(5000, 'x');
  BRAID_WARN("%s|end", big.c_str());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, prefix("-", "WARN") + "ends with newline\n" + prefix("-", "WARN") + "\n" +
                     prefix("-", "WARN") + big + "|end\n");
}

TEST_F(LogTest, FileWithSubstitutionsAppends) {
  const std::string pattern = dir_ + "/log.%h.%p.%r";
  const std::string path = dir_ + "/log." + shortHostName() + "." + std::to_string(getpid()) + ".3";
  {
    std::ofstream pre(path);
    pre << "existing line\n";
  }
  setLogRank(3);
  configure(nullptr, pattern);
  ::testing::internal::CaptureStderr();
  BRAID_WARN("first");
  BRAID_ERROR("second");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "lines go to the file only";
  EXPECT_EQ(readFile(path), "existing line\n" + prefix("3", "WARN") + "first\n" +
                                prefix("3", "ERROR") + "second\n");
}

TEST_F(LogTest, RankKnownLaterMovesToTheRanksFile) {
  configure(nullptr, dir_ + "/rank%r.log");
  BRAID_WARN("before init");
  setLogRank(2);
  BRAID_WARN("after init");
  EXPECT_EQ(readFile(dir_ + "/rank-.log"), prefix("-", "WARN") + "before init\n");
  EXPECT_EQ(readFile(dir_ + "/rank2.log"), prefix("2", "WARN") + "after init\n");
}

TEST_F(LogTest, PercentEscapes) {
  configure(nullptr, dir_ + "/a%%b%q");
  BRAID_WARN("x");
  EXPECT_EQ(readFile(dir_ + "/a%b%q"), prefix("-", "WARN") + "x\n");
}

TEST_F(LogTest, UnopenableFileFallsBackToStderr) {
  configure(nullptr, dir_ + "/missing/dir/log");
  ::testing::internal::CaptureStderr();
  BRAID_WARN("still visible");
  BRAID_WARN("again");
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::vector<std::string> lines = splitLines(err);
  ASSERT_EQ(lines.size(), 3u) << err;
  EXPECT_NE(lines[0].find("cannot open BRAID_DEBUG_FILE"), std::string::npos) << err;
  EXPECT_EQ(lines[1], prefix("-", "WARN") + "still visible");
  EXPECT_EQ(lines[2], prefix("-", "WARN") + "again");
}

// Lines of the form "<host>:<pid>:<rank> braid WARN w<writer> l<index> <payload of x>" must all
// arrive whole. (Parsed by hand: std::regex recurses per character on long lines.)
void expectWholeLines(const std::string& text, int writers, int perWriter, size_t payload) {
  std::vector<std::vector<bool>> seen(writers, std::vector<bool>(perWriter, false));
  int count = 0;
  for (const std::string& line : splitLines(text)) {
    const size_t tag = line.find(" braid WARN w");
    ASSERT_NE(tag, std::string::npos) << "torn line: " << line.substr(0, 200);
    ASSERT_EQ(line.find(" braid ", tag + 1), std::string::npos) << "two lines merged";
    int w = -1, l = -1, used = 0;
    ASSERT_EQ(std::sscanf(line.c_str() + tag, " braid WARN w%d l%d %n", &w, &l, &used), 2) << line;
    ASSERT_TRUE(w >= 0 && w < writers && l >= 0 && l < perWriter) << line.substr(0, 200);
    const std::string rest = line.substr(tag + static_cast<size_t>(used));
    EXPECT_EQ(rest, std::string(payload, 'x')) << "payload damaged in line " << l;
    EXPECT_FALSE(seen[w][l]) << "duplicate line";
    seen[w][l] = true;
    ++count;
  }
  EXPECT_EQ(count, writers * perWriter);
}

TEST_F(LogTest, ConcurrentThreadsNeverTearLines) {
  configure(nullptr, dir_ + "/threads.log");
  constexpr int kThreads = 8, kLines = 300;
  const std::string payload(300, 'x');
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &payload] {
      for (int i = 0; i < kLines; ++i) BRAID_WARN("w%d l%d %s", t, i, payload.c_str());
    });
  }
  for (std::thread& t : threads) t.join();
  expectWholeLines(readFile(dir_ + "/threads.log"), kThreads, kLines, payload.size());
}

TEST_F(LogTest, ConcurrentProcessesNeverTearLines) {
  // No %p in the name: every process appends to the same file, each opening it itself (the
  // parent has not logged yet, so the children inherit no descriptor).
  configure(nullptr, dir_ + "/procs.log");
  constexpr int kProcs = 4, kLines = 300;
  const std::string payload(2000, 'x');  // longer than the stack buffer
  std::vector<pid_t> children;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setLogRank(p);
      for (int i = 0; i < kLines; ++i) BRAID_WARN("w%d l%d %s", p, i, payload.c_str());
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  expectWholeLines(readFile(dir_ + "/procs.log"), kProcs, kLines, payload.size());
}

TEST_F(LogTest, ForkedChildWithPidPatternGetsItsOwnFile) {
  configure(nullptr, dir_ + "/pid.%p.log");
  BRAID_WARN("parent");  // opens the parent's file before the fork
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    BRAID_WARN("child");
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(readFile(dir_ + "/pid." + std::to_string(getpid()) + ".log"),
            prefix("-", "WARN") + "parent\n");
  const std::string child = readFile(dir_ + "/pid." + std::to_string(pid) + ".log");
  EXPECT_NE(child.find(":" + std::to_string(pid) + ":- braid WARN child\n"), std::string::npos)
      << child;
}

}  // namespace
}  // namespace braid
