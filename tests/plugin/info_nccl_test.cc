#include "tools/info_nccl.h"

#include <gtest/gtest.h>
#include <stdlib.h>

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
  EXPECT_NE(out.find("NCCL 2.28 would bind ncclNetPlugin_v11"), std::string::npos) << out;
  EXPECT_NE(out.find("exported net versions: v11 v10 v9"), std::string::npos) << out;
  EXPECT_NE(out.find("device 0: lo"), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL 2.28 would bind ncclTunerPlugin_v5"), std::string::npos) << out;
  EXPECT_NE(out.find("net properties v11 112 B"), std::string::npos) << out;
  EXPECT_NE(out.find("no problems found"), std::string::npos) << out;
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
  EXPECT_NE(out.find("exports no ncclNetPlugin_v6..v11"), std::string::npos) << out;
  // No devices: init fails with a reason.
  setenv("BRAID_NET_IFNAME", "=no-such-if", 1);
  out = run({"nccl", "--net", BRAID_NET_PLUGIN_PATH, "--tuner", "none"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("PROBLEM: init returned 2"), std::string::npos) << out;
}

}  // namespace
