#include "tools/info_nccl.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace {

std::string run(std::initializer_list<const char*> args, int* code) {
  std::vector<char*> argv;
  for (const char* a : args) argv.push_back(const_cast<char*>(a));
  ::testing::internal::CaptureStdout();
  *code = runInfoNccl(static_cast<int>(argv.size()), argv.data());
  return ::testing::internal::GetCapturedStdout();
}

TEST(InfoNcclTest, ReportsTheBuiltPlugins) {
  setenv("BRAID_NET_IFNAME", "lo", 1);
  int code = -1;
  std::string out =
      run({"nccl", "--net", BRAID_NET_PLUGIN_PATH, "--tuner", BRAID_TUNER_PLUGIN_PATH}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("exported net versions: v12 v11 v10 v9\n"), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL 2.28/2.29 would bind ncclNetPlugin_v11; NCCL 2.30.3+ would bind "
                     "ncclNetPlugin_v12"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("device 0: lo"), std::string::npos) << out;
  EXPECT_NE(out.find("railId -1, planeId -1"), std::string::npos) << out;
  EXPECT_NE(out.find("exported tuner versions: v6 v5 v4 v3 v2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL 2.28/2.29 would bind ncclTunerPlugin_v5; NCCL 2.30.3+ would bind "
                     "ncclTunerPlugin_v6"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("net properties v12 128 B, v11 112 B"), std::string::npos) << out;
  EXPECT_NE(out.find("tuner table v6 40 B"), std::string::npos) << out;
  // The tuner samples: getChunkSize lowers NCCL's 1 MiB tree chunk on 2 nodes (sqrt(4 MiB · 8
  // us · 12500 B/us) = 647,634 -> 647,168), PAT wins a 1 MiB all-gather on 8 single-GPU nodes
  // and the ring a 256 MiB one.
  EXPECT_NE(out.find("-> result 0, chunk 647168"), std::string::npos) << out;
  EXPECT_NE(out.find("allgather 1048576 B, 8 ranks on 8 nodes (ring, pat offered) -> result 0, "
                     "algo 6 proto 2"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("allgather 268435456 B, 8 ranks on 8 nodes (ring, pat offered) -> result "
                     "0, algo 1"),
            std::string::npos)
      << out;
  // When libnccl.so.2 loads here, the line for its version names what it binds.
  const size_t found = out.find("NCCL library: libnccl.so.2 version ");
  if (found != std::string::npos) {
    EXPECT_NE(out.find("(libnccl.so.2 here) would bind ncclNetPlugin_v1"), std::string::npos)
        << out;
  }
  EXPECT_NE(out.find("no problems found"), std::string::npos) << out;
}

// --nccl-log: the versions a real NCCL run reported binding.
TEST(InfoNcclTest, ReadsWhatNcclBoundFromItsLog) {
  setenv("BRAID_NET_IFNAME", "lo", 1);
  char path[] = "/tmp/braid-nccl-log-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string log =
      "host:1:1 [0] NCCL INFO NET/Plugin: Loaded collNet plugin braid (v12)\n"
      "host:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin braid (v12)\n"
      "host:1:1 [0] NCCL INFO Assigned NET plugin braid to comm\n"
      "host:1:1 [0] NCCL INFO Channel 00/02 : 0 1\n"
      "host:1:1 [0] NCCL INFO TUNER/Plugin: Using braid (v6)\n";
  ASSERT_EQ(write(fd, log.data(), log.size()), static_cast<ssize_t>(log.size()));
  close(fd);
  int code = -1;
  std::string out = run({"nccl", "--net", "none", "--tuner", "none", "--nccl-log", path}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("NCCL bound net v12: host:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("collNet plugin braid (v12)"), std::string::npos) << "CollNet is not the net";
  EXPECT_NE(out.find("NCCL bound tuner v6: "), std::string::npos) << out;
  EXPECT_NE(out.find("Assigned NET plugin braid"), std::string::npos) << out;
  EXPECT_EQ(out.find("Channel 00/02"), std::string::npos) << out;
  unlink(path);
  out = run({"nccl", "--net", "none", "--tuner", "none", "--nccl-log", "/nonexistent/log"}, &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("PROBLEM: cannot read /nonexistent/log"), std::string::npos) << out;
}

TEST(InfoNcclTest, HelpNamesEveryOption) {
  int code = -1;
  const std::string out = run({"nccl", "--help"}, &code);
  EXPECT_EQ(code, 0);
  for (const char* option : {"--net VALUE", "--tuner VALUE", "--nccl-log FILE", "--verbose",
                             "2.30.3+", "railId/planeId"}) {
    EXPECT_NE(out.find(option), std::string::npos) << option << "\n" << out;
  }
}

TEST(InfoNcclTest, ExplainsFailures) {
  setenv("BRAID_NET_IFNAME", "lo", 1);
  int code = -1;
  std::string out = run({"nccl", "--net", "nosuchplugin", "--tuner", "none"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("dlopen(\"libnccl-net-nosuchplugin.so\")"), std::string::npos) << out;
  EXPECT_NE(out.find("not found on the library search path"), std::string::npos) << out;
  EXPECT_NE(out.find("internal IB or Socket"), std::string::npos) << out;
  // A library that is not a plugin (the tuner library has no net symbols).
  out = run({"nccl", "--net", BRAID_TUNER_PLUGIN_PATH, "--tuner", "none"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("exports no ncclNetPlugin_v6..v12"), std::string::npos) << out;
  // No devices: init fails with a reason.
  setenv("BRAID_NET_IFNAME", "=no-such-if", 1);
  out = run({"nccl", "--net", BRAID_NET_PLUGIN_PATH, "--tuner", "none"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("PROBLEM: init returned 2"), std::string::npos) << out;
}

}  // namespace
