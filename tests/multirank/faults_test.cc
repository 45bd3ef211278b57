// Fault scenarios with real processes: a rank killed mid-collective, mismatched counts and
// mismatched collective order, over shm (one host) and over tcp; and recovery (Recovery/*, its
// own CTest entry): the survivors of a killed rank shrink it away and run the matrix on the new
// communicator, a healthy rank dropped, mismatched excluded lists, a survivor that never calls
// shrink, and Work::wait(timeout). Each launch runs collectives_check --scenario ...; the check
// program asserts the outcome on every surviving rank (named rank, code, deadline) and exits 0
// only then.
#include <unistd.h>

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "transport/bootstrap/local_launch.h"

#ifndef BRAID_CHECK_BINARY
#error "BRAID_CHECK_BINARY must name the collectives_check executable"
#endif

namespace braid::launch {
namespace {

struct Case {
  const char* scenario;
  const char* transport;
  int ranks;
  const char* algo = "";  // BRAID_ALGO
};

class FaultTest : public ::testing::TestWithParam<Case> {};

TEST_P(FaultTest, EverySurvivorReportsTheFault) {
  const Case& c = GetParam();
  LaunchOptions options;
  options.ranks = c.ranks;
  options.argv = {BRAID_CHECK_BINARY, "--scenario", c.scenario};
  options.env = {{"BRAID_TRANSPORT", c.transport}, {"BRAID_TIMEOUT_MS", "5000"}};
  if (*c.algo != '\0') options.env.push_back({"BRAID_ALGO", c.algo});
  options.timeoutMs = 60000;
  auto result = launchLocalRanks(options);
  // The victim's fault stamp (collectives_check.cc), named after this launcher's pid.
  unlink(("/tmp/braid-fault-stamp-" + std::to_string(getpid())).c_str());
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  ASSERT_FALSE(result->timedOut) << "a rank hung";
  const std::string scenario = c.scenario;
  const int victim = scenario == "kill" || scenario == "stall" ? c.ranks - 1
                     : scenario == "shrink-kill"               ? std::min(2, c.ranks - 1)
                                                               : -1;
  for (int r = 0; r < c.ranks; ++r) {
    if (r == victim) {
      EXPECT_EQ(result->exitCodes[r], 128 + 9) << "the victim should have died by SIGKILL (its own, or its watchdog's after SIGSTOP)";
    } else {
      EXPECT_EQ(result->exitCodes[r], 0) << "rank " << r << " did not report the fault as expected";
    }
  }
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = std::string(info.param.scenario) + "_" + info.param.transport + "_" +
                     std::to_string(info.param.ranks);
  if (*info.param.algo != '\0') name += "_" + std::string(info.param.algo).substr(10);
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, FaultTest,
    ::testing::Values(Case{"kill", "auto", 4}, Case{"kill", "tcp", 4}, Case{"kill", "auto", 2},
                      Case{"stall", "auto", 3}, Case{"stall", "tcp", 4},
                      Case{"mismatch-count", "auto", 4}, Case{"mismatch-count", "tcp", 3},
                      Case{"mismatch-order", "auto", 4}, Case{"mismatch-order", "tcp", 5},
                      // Counts that differ in a broadcast big enough for the single copy.
                      Case{"mismatch-big", "auto", 3},
                      // A tree all-reduce against tree broadcasts: every rank waits to receive,
                      // nothing is in flight to carry the mismatch (found through the store).
                      Case{"mismatch-order", "tcp", 4, "allreduce:tree"},
                      // A receive of a p2p group expecting more than the matching send.
                      Case{"mismatch-p2p", "auto", 3}, Case{"mismatch-p2p", "tcp", 2},
                      // Rank 0's buffers in a shared window, the others' not: an all-reduce,
                      // and a reduce-scatter whose others run the ring, not the segment.
                      Case{"mismatch-windows", "auto", 3}, Case{"mismatch-windows-rs", "auto", 2}),
    caseName);

INSTANTIATE_TEST_SUITE_P(
    Recovery, FaultTest,
    ::testing::Values(Case{"shrink-kill", "auto", 4}, Case{"shrink-kill", "tcp", 4},
                      Case{"shrink-kill", "auto", 3}, Case{"shrink-healthy", "auto", 4},
                      Case{"shrink-healthy", "tcp", 5}, Case{"shrink-mismatch", "auto", 4},
                      Case{"shrink-mismatch", "tcp", 3}, Case{"shrink-silent", "auto", 4},
                      Case{"split-silent", "auto", 3}, Case{"subgroup-silent", "tcp", 3},
                      Case{"wait-timeout", "auto", 3},
                      Case{"wait-timeout", "tcp", 2}),
    caseName);

}  // namespace
}  // namespace braid::launch
