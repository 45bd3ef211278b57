// The launcher table (transport/bootstrap/launchers.h): Slurm hostlists and task counts, the
// Slurm port rule, the recognition order, agreeing, nested and conflicting launchers, a
// WORLD_SIZE that counts nodes (Kubeflow), and bootstrapFromEnvironment for one rank of each
// TCP launcher. Each launcher is emulated by exporting its variables in this process (setenv),
// restored after every test; the parameter cache is reset with setParamForTesting.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/params.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/launchers.h"

namespace braid {
namespace {

const char* const kParams[] = {"BRAID_BOOTSTRAP", "BRAID_STORE_PORT", "BRAID_FILE_STORE"};

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

/// Every launcher variable and the three bootstrap parameters start unset and are restored.
class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> names = launcherVariableNames();
    names.insert(names.end(), std::begin(kParams), std::end(kParams));
    for (const std::string& name : names) {
      const char* v = getenv(name.c_str());
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name.c_str());
    }
    resetParams();
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
    saved_.clear();
    resetParams();
  }
  static void resetParams() {
    for (const char* p : kParams) setParamForTesting(p, "");
  }

  /// Detection with exactly `vars` exported (launcher variables and BRAID_* parameters).
  LaunchChoice detect(const std::map<std::string, std::string>& vars) {
    set(vars);
    return detectLaunch(LaunchEnvironment::fromProcess(), LaunchSettings::fromParams());
  }
  void set(const std::map<std::string, std::string>& vars) {
    for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
    resetParams();
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string chosenName(const LaunchChoice& c) { return c.row() ? c.row()->def->name : "(none)"; }

void expectError(const LaunchChoice& c, std::initializer_list<const char*> needles) {
  EXPECT_EQ(c.status.code(), Code::kInvalidArgument) << c.status.toString();
  EXPECT_EQ(c.row(), nullptr);
  for (const char* n : needles) {
    EXPECT_NE(c.status.message().find(n), std::string::npos)
        << "the error should mention '" << n << "': " << c.status.message();
  }
}

// ---------------------------------------------------------------------------------------------
// Slurm lists

std::vector<std::string> hosts(const std::string& text) {
  Result<std::vector<std::string>> r = expandSlurmHostlist(text, "SLURM_JOB_NODELIST");
  EXPECT_TRUE(r.isOk()) << text << ": " << r.status().toString();
  return r.isOk() ? r.value() : std::vector<std::string>{};
}

TEST(SlurmHostlist, Expands) {
  using V = std::vector<std::string>;
  EXPECT_EQ(hosts("localhost"), V({"localhost"}));
  EXPECT_EQ(hosts("a,b"), V({"a", "b"}));
  EXPECT_EQ(hosts("node[01-04,07]"), V({"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(hosts("node[08-10]"), V({"node08", "node09", "node10"}));
  EXPECT_EQ(hosts("node[8-10]"), V({"node8", "node9", "node10"}));
  EXPECT_EQ(hosts("node[001-002]"), V({"node001", "node002"}));
  EXPECT_EQ(hosts("pre[1-3]suf"), V({"pre1suf", "pre2suf", "pre3suf"}));
  EXPECT_EQ(hosts("rack[1-2]-n[3-4]"), V({"rack1-n3", "rack1-n4", "rack2-n3", "rack2-n4"}));
  EXPECT_EQ(hosts("localhost,node[02-04]"), V({"localhost", "node02", "node03", "node04"}));
  EXPECT_EQ(hosts("a[1,3],b,c[5-6]x"), V({"a1", "a3", "b", "c5x", "c6x"}));
  EXPECT_EQ(hosts("[1-2]"), V({"1", "2"}));
  EXPECT_EQ(hosts("gpu-a100-[7]"), V({"gpu-a100-7"}));
}

TEST(SlurmHostlist, MalformedListsNameTheVariableAndText) {
  for (const char* text :
       {"node[01-", "node[3-1]", "node[]", "node[a-b]", "node]", "node[[1]]", "node[1-2", "a,,b",
        "a,", ",a", "node[1,]", "node[-3]", "node[1-]", "node[1-2-3]", "", "node [1-2]",
        "node[1234567890]", "node[1-999999999]"}) {
    Result<std::vector<std::string>> r = expandSlurmHostlist(text, "SLURM_JOB_NODELIST");
    ASSERT_FALSE(r.isOk()) << "'" << text << "' expanded to " << r.value().size() << " hosts";
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("SLURM_JOB_NODELIST='" + std::string(text) + "'"),
              std::string::npos)
        << r.status().message();
  }
}

TEST(SlurmHostlist, TaskCounts) {
  auto counts = [](const std::string& text) {
    Result<std::vector<int>> r = expandSlurmTaskCounts(text, "SLURM_STEP_TASKS_PER_NODE");
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? r.value() : std::vector<int>{};
  };
  EXPECT_EQ(counts("4"), std::vector<int>({4}));
  EXPECT_EQ(counts("2(x3),1"), std::vector<int>({2, 2, 2, 1}));
  EXPECT_EQ(counts("1,3(x2)"), std::vector<int>({1, 3, 3}));
  for (const char* bad : {"", "x", "2(x)", "2(x3", "2x3", "2(y3)", "2(x0)", "2,,3"}) {
    Result<std::vector<int>> r = expandSlurmTaskCounts(bad, "SLURM_STEP_TASKS_PER_NODE");
    EXPECT_FALSE(r.isOk()) << "'" << bad << "'";
    if (!r.isOk()) {
      EXPECT_NE(r.status().message().find("SLURM_STEP_TASKS_PER_NODE"), std::string::npos);
    }
  }
}

TEST(SlurmPort, DerivedFromTheJobId) {
  EXPECT_EQ(slurmDerivedPort("0").value(), 20000);
  EXPECT_EQ(slurmDerivedPort("12345").value(), 20000 + 12345 % 9000);
  EXPECT_EQ(slurmDerivedPort("8999").value(), 28999);
  EXPECT_EQ(slurmDerivedPort("9000").value(), 20000);
  // Every job id lands in the documented range: unprivileged, below torch's 29500 and below the
  // kernel's ephemeral ports.
  for (long id : {1L, 4242L, 999999L, 4294967295L}) {
    const int port = slurmDerivedPort(std::to_string(id)).value();
    EXPECT_GE(port, 20000);
    EXPECT_LT(port, 29000);
  }
  EXPECT_FALSE(slurmDerivedPort("12a").isOk());
  EXPECT_FALSE(slurmDerivedPort("-1").isOk());
}

// ---------------------------------------------------------------------------------------------
// Each row alone

const std::map<std::string, std::string> kSlurm = {{"SLURM_PROCID", "1"},
                                                   {"SLURM_NTASKS", "4"},
                                                   {"SLURM_LOCALID", "1"},
                                                   {"SLURM_NODEID", "0"},
                                                   {"SLURM_STEP_TASKS_PER_NODE", "4"},
                                                   {"SLURM_JOB_NODELIST", "localhost,node[02-04]"},
                                                   {"SLURM_JOB_ID", "12345"}};

std::map<std::string, std::string> with(std::map<std::string, std::string> base,
                                        const std::map<std::string, std::string>& more) {
  for (const auto& [k, v] : more) base[k] = v;
  return base;
}

TEST_F(LauncherTest, TableIsInRecognitionOrder) {
  std::vector<std::string> names;
  for (const LauncherDef& d : launcherTable()) names.push_back(d.name);
  EXPECT_EQ(names,
            std::vector<std::string>({"file", "torchrun", "slurm", "ompi", "pmi", "pmix", "mpi"}));
  LaunchChoice c = detect({});
  ASSERT_EQ(c.rows.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(c.rows[i].def->name, names[i]);
    EXPECT_FALSE(c.rows[i].present) << names[i];
  }
}

TEST_F(LauncherTest, NothingSetNamesEveryWay) {
  LaunchChoice c = detect({});
  expectError(c, {"MASTER_ADDR", "WORLD_SIZE", "BRAID_FILE_STORE", "SLURM_PROCID",
                  "OMPI_COMM_WORLD_RANK", "PMI_RANK"});
  EXPECT_FALSE(launchedAsRank(c));
  EXPECT_FALSE(launchedAsRank(detect({{"BRAID_FILE_STORE", "/tmp/x"}})));
}

TEST_F(LauncherTest, Slurm) {
  LaunchChoice c = detect(kSlurm);
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "slurm");
  EXPECT_TRUE(launchedAsRank(c));
  const LaunchRow& r = *c.row();
  EXPECT_EQ(r.identity.rank, 1);
  EXPECT_EQ(r.identity.size, 4);
  EXPECT_EQ(r.identity.localRank, 1);
  EXPECT_EQ(r.identity.localSize, 4);
  EXPECT_EQ(r.identity.node, 0);
  EXPECT_EQ(r.store.kind, StoreKind::kTcp);
  EXPECT_EQ(r.store.host, "localhost");
  EXPECT_EQ(r.store.port, 20000 + 12345 % 9000);
  EXPECT_NE(r.store.origin.find("SLURM_JOB_ID"), std::string::npos) << r.store.origin;
  EXPECT_NE(c.summary().find("localhost:23345"), std::string::npos) << c.summary();
}

TEST_F(LauncherTest, SlurmLocalSizeFromTheStepList) {
  LaunchChoice c = detect(with(kSlurm, {{"SLURM_NODEID", "2"},
                                        {"SLURM_PROCID", "5"},
                                        {"SLURM_NTASKS", "7"},
                                        {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}}));
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(c.row()->identity.localSize, 2);
  set({{"SLURM_NODEID", "3"}, {"SLURM_PROCID", "6"}});
  c = detectLaunch(LaunchEnvironment::fromProcess(), LaunchSettings::fromParams());
  EXPECT_EQ(c.row()->identity.localSize, 1);
}

TEST_F(LauncherTest, SlurmPortRule) {
  // The step's list wins over the job's; MASTER_ADDR over both.
  LaunchChoice c = detect(with(kSlurm, {{"SLURM_STEP_NODELIST", "gpu[07-08]"}}));
  EXPECT_EQ(c.row()->store.host, "gpu07");
  c = detect({{"MASTER_ADDR", "10.1.2.3"}});
  EXPECT_EQ(c.row()->store.host, "10.1.2.3");
  EXPECT_EQ(c.row()->store.port, 23345);
  // MASTER_PORT over the derived port; BRAID_STORE_PORT over MASTER_PORT.
  c = detect({{"MASTER_PORT", "30001"}});
  EXPECT_EQ(c.row()->store.port, 30001);
  c = detect({{"BRAID_STORE_PORT", "30002"}});
  EXPECT_EQ(c.row()->store.port, 30002);
  EXPECT_NE(c.row()->store.origin.find("BRAID_STORE_PORT"), std::string::npos);
  // SLURM_JOBID (the old name) also works.
  unsetenv("MASTER_PORT");
  unsetenv("BRAID_STORE_PORT");
  unsetenv("SLURM_JOB_ID");
  c = detect({{"SLURM_JOBID", "9001"}});
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(c.row()->store.port, 20001);
  unsetenv("SLURM_JOBID");
  expectError(detect({}), {"SLURM_JOB_ID", "MASTER_PORT", "BRAID_STORE_PORT"});
  expectError(detect({{"MASTER_PORT", "70000"}}), {"MASTER_PORT"});
}

TEST_F(LauncherTest, SlurmMalformed) {
  expectError(detect(with(kSlurm, {{"SLURM_JOB_NODELIST", "node[01-"}})),
              {"SLURM_JOB_NODELIST", "node[01-"});
  expectError(detect({{"SLURM_JOB_NODELIST", "node[3-1]"}}), {"SLURM_JOB_NODELIST", "node[3-1]"});
  expectError(detect({{"SLURM_PROCID", "4"}}), {"SLURM_PROCID", "SLURM_NTASKS"});
  expectError(detect({{"SLURM_PROCID", "x"}}), {"SLURM_PROCID"});
  unsetenv("SLURM_NTASKS");
  expectError(detect({{"SLURM_PROCID", "0"}}), {"SLURM_NTASKS"});
  // SLURM_NPROCS (the old name) also works.
  LaunchChoice c = detect({{"SLURM_NPROCS", "4"}, {"SLURM_JOB_NODELIST", "localhost"}});
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(c.row()->identity.size, 4);
  expectError(detect({{"SLURM_STEP_TASKS_PER_NODE", "2(x"}}), {"SLURM_STEP_TASKS_PER_NODE"});
}

TEST_F(LauncherTest, SlurmRankZeroMustBeOnTheFirstNode) {
  expectError(detect(with(kSlurm, {{"SLURM_PROCID", "0"}, {"SLURM_NODEID", "1"}})),
              {"SLURM_NODEID=1", "MASTER_ADDR"});
  LaunchChoice c = detect({{"MASTER_ADDR", "node02"}});
  EXPECT_TRUE(c.status.isOk()) << c.status.toString();
}

TEST_F(LauncherTest, OpenMpiAndPmiVariables) {
  LaunchSettings noMpi;
  const std::map<std::string, std::string> ompi = {{"OMPI_COMM_WORLD_RANK", "2"},
                                                   {"OMPI_COMM_WORLD_SIZE", "3"},
                                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}};
  set(ompi);
  LaunchChoice c = detectLaunch(LaunchEnvironment::fromProcess(), noMpi);
  expectError(c, {"MASTER_ADDR", "MASTER_PORT", "mpirun -x", "built with MPI"});
  EXPECT_TRUE(launchedAsRank(c));
  // A braid built with MPI uses MPI when there is no address, as under mpiexec before.
  LaunchSettings mpi;
  mpi.mpiBuild = true;
  c = detectLaunch(LaunchEnvironment::fromProcess(), mpi);
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "mpi");
  EXPECT_EQ(c.row()->store.kind, StoreKind::kMpi);
  EXPECT_EQ(c.row()->identity.size, 3);
  // With an address: the TCP store, with or without MPI.
  set({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29400"}});
  for (const LaunchSettings& s : {noMpi, mpi}) {
    c = detectLaunch(LaunchEnvironment::fromProcess(), s);
    ASSERT_TRUE(c.status.isOk()) << c.status.toString();
    EXPECT_EQ(chosenName(c), "ompi");
    EXPECT_EQ(c.row()->identity.rank, 2);
    EXPECT_EQ(c.row()->identity.localSize, 3);
    EXPECT_EQ(c.row()->store.port, 29400);
  }
  unsetenv("MASTER_PORT");
  expectError(detectLaunch(LaunchEnvironment::fromProcess(), noMpi), {"MASTER_PORT"});
  for (const auto& kv : ompi) unsetenv(kv.first.c_str());

  set({{"PMI_RANK", "1"},
       {"PMI_SIZE", "2"},
       {"MPI_LOCALRANKID", "1"},
       {"MPI_LOCALNRANKS", "2"},
       {"MASTER_PORT", "29401"}});
  c = detect({});
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "pmi");
  EXPECT_EQ(c.row()->identity.rank, 1);
  EXPECT_EQ(c.row()->identity.localRank, 1);
  EXPECT_EQ(c.row()->identity.localSize, 2);
  expectError(detect({{"PMI_SIZE", "1"}}), {"PMI_RANK=1", "0..0"});
}

TEST_F(LauncherTest, PmixAloneHasNoWorldSize) {
  LaunchSettings noMpi;
  set({{"PMIX_RANK", "3"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29400"}});
  LaunchChoice c = detectLaunch(LaunchEnvironment::fromProcess(), noMpi);
  expectError(c, {"PMIX_RANK=3", "world size"});
  EXPECT_TRUE(launchedAsRank(c));
  LaunchSettings mpi;
  mpi.mpiBuild = true;
  unsetenv("MASTER_ADDR");
  c = detectLaunch(LaunchEnvironment::fromProcess(), mpi);
  EXPECT_EQ(chosenName(c), "mpi") << c.status.toString();
}

// ---------------------------------------------------------------------------------------------
// Several launchers at once

TEST_F(LauncherTest, AgreeingLaunchersUseTheFirst) {
  const std::map<std::string, std::string> all = with(kSlurm, {{"RANK", "1"},
                                                               {"WORLD_SIZE", "4"},
                                                               {"MASTER_ADDR", "127.0.0.1"},
                                                               {"MASTER_PORT", "29400"},
                                                               {"OMPI_COMM_WORLD_RANK", "1"},
                                                               {"OMPI_COMM_WORLD_SIZE", "4"},
                                                               {"PMI_RANK", "1"},
                                                               {"PMI_SIZE", "4"},
                                                               {"PMIX_RANK", "1"}});
  LaunchChoice c = detect(all);
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "torchrun");
  for (const char* n : {"slurm agrees", "ompi agrees", "pmi agrees"}) {
    EXPECT_NE(c.reason.find(n), std::string::npos) << c.reason;
  }
  for (const LaunchRow& r : c.rows) {
    if (std::string(r.def->name) != "file" && std::string(r.def->name) != "mpi") {
      EXPECT_TRUE(r.present) << r.def->name;
    }
  }
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  EXPECT_EQ(chosenName(detect({})), "slurm");
  for (const auto& kv : kSlurm) unsetenv(kv.first.c_str());
  EXPECT_EQ(chosenName(detect({})), "ompi");
  unsetenv("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(chosenName(detect({})), "pmi");
  // Agreeing rows lend their store: RANK/WORLD_SIZE copied from Slurm's, without MASTER_ADDR.
  TearDown();
  SetUp();
  c = detect(with(kSlurm, {{"RANK", "1"}, {"WORLD_SIZE", "4"}}));
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "slurm");
  EXPECT_NE(c.reason.find("the store from slurm (torchrun has none: MASTER_ADDR is not set"),
            std::string::npos)
      << c.reason;
  // The file store comes first and reads the torchrun row's RANK and WORLD_SIZE.
  TearDown();
  SetUp();
  c = detect({{"BRAID_FILE_STORE", "/tmp/x"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(chosenName(c), "file") << c.status.toString();
}

TEST_F(LauncherTest, ConflictsNameBothVariables) {
  // Stale torchrun variables under srun.
  LaunchChoice c = detect(with(kSlurm, {{"RANK", "2"},
                                        {"WORLD_SIZE", "4"},
                                        {"MASTER_ADDR", "127.0.0.1"},
                                        {"MASTER_PORT", "29400"}}));
  expectError(c, {"RANK=2", "WORLD_SIZE=4", "SLURM_PROCID=1", "SLURM_NTASKS=4",
                  "BRAID_BOOTSTRAP=torchrun", "BRAID_BOOTSTRAP=slurm"});
  // An explicit choice uses that row and compares nothing.
  set({{"BRAID_BOOTSTRAP", "slurm"}});
  c = detectLaunch(LaunchEnvironment::fromProcess(), LaunchSettings::fromParams());
  EXPECT_EQ(chosenName(c), "slurm") << c.status.toString();
  EXPECT_EQ(c.row()->identity.rank, 1);
  set({{"BRAID_BOOTSTRAP", "env"}});
  c = detectLaunch(LaunchEnvironment::fromProcess(), LaunchSettings::fromParams());
  EXPECT_EQ(chosenName(c), "torchrun") << c.status.toString();
  EXPECT_EQ(c.row()->identity.rank, 2);
  TearDown();
  SetUp();

  // Sizes that disagree, without a sign of nesting.
  expectError(detect(with(kSlurm, {{"RANK", "1"}, {"WORLD_SIZE", "8"}})),
              {"WORLD_SIZE=8", "SLURM_NTASKS=4"});
  TearDown();
  SetUp();
  // Two MPI launchers' variables.
  expectError(detect({{"OMPI_COMM_WORLD_RANK", "0"},
                      {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"PMI_RANK", "1"},
                      {"PMI_SIZE", "2"},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", "29400"}}),
              {"OMPI_COMM_WORLD_RANK=0", "PMI_RANK=1"});
}

TEST_F(LauncherTest, NestedLaunchersUseTheInnerOne) {
  // srun --ntasks-per-node=1 torchrun --nproc-per-node=4: Slurm counts nodes, torchrun processes.
  const std::map<std::string, std::string> outer = {{"SLURM_PROCID", "1"},
                                                    {"SLURM_NTASKS", "2"},
                                                    {"SLURM_LOCALID", "0"},
                                                    {"SLURM_NODEID", "1"},
                                                    {"SLURM_STEP_TASKS_PER_NODE", "1"},
                                                    {"SLURM_JOB_NODELIST", "n[1-2]"},
                                                    {"SLURM_JOB_ID", "7"}};
  LaunchChoice c = detect(with(outer, {{"RANK", "5"},
                                       {"WORLD_SIZE", "8"},
                                       {"LOCAL_RANK", "1"},
                                       {"LOCAL_WORLD_SIZE", "4"},
                                       {"GROUP_RANK", "1"},
                                       {"MASTER_ADDR", "n1"},
                                       {"MASTER_PORT", "29400"}}));
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "torchrun");
  EXPECT_EQ(c.row()->identity.node, 1);
  EXPECT_NE(c.reason.find("slurm is an outer launcher"), std::string::npos) << c.reason;
  // Without a local size for the inner launcher there is no sign of nesting.
  unsetenv("LOCAL_WORLD_SIZE");
  unsetenv("GROUP_RANK");
  expectError(detect({}), {"RANK=5", "SLURM_PROCID=1"});
  TearDown();
  SetUp();

  // mpirun's daemons started by srun: Open MPI is inside Slurm, though Slurm comes first.
  c = detect(with(outer, {{"OMPI_COMM_WORLD_RANK", "6"},
                          {"OMPI_COMM_WORLD_SIZE", "8"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                          {"MASTER_ADDR", "n1"},
                          {"MASTER_PORT", "29400"}}));
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "ompi");
  EXPECT_EQ(c.row()->identity.rank, 6);
  TearDown();
  SetUp();

  // A real torchrun started this process: its rendezvous numbers the nodes, not Slurm.
  c = detect({{"SLURM_PROCID", "1"},
              {"SLURM_NTASKS", "4"},
              {"SLURM_JOB_NODELIST", "n[1-4]"},
              {"RANK", "3"},
              {"WORLD_SIZE", "4"},
              {"LOCAL_RANK", "0"},
              {"LOCAL_WORLD_SIZE", "1"},
              {"GROUP_RANK", "3"},
              {"TORCHELASTIC_RUN_ID", "abc"},
              {"MASTER_ADDR", "n1"},
              {"MASTER_PORT", "29400"}});
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "torchrun");
  EXPECT_EQ(c.row()->store.port, 29401);  // next to torch's own store
}

TEST_F(LauncherTest, WorldSizeCountingNodes) {
  const std::map<std::string, std::string> base = {{"MASTER_ADDR", "127.0.0.1"},
                                                   {"MASTER_PORT", "29400"}};
  // Kubeflow's PyTorchJob without torchrun: WORLD_SIZE = pods, a local launcher's LOCAL_*.
  expectError(detect(with(base, {{"WORLD_SIZE", "2"},
                                 {"RANK", "1"},
                                 {"LOCAL_RANK", "3"},
                                 {"LOCAL_WORLD_SIZE", "4"},
                                 {"PET_NNODES", "2"},
                                 {"PET_NPROC_PER_NODE", "4"}})),
              {"PET_NNODES=2", "WORLD_SIZE=2", "Kubeflow", "torchrun"});
  unsetenv("LOCAL_WORLD_SIZE");
  expectError(detect({}), {"PET_NNODES=2", "Kubeflow"});  // PET_NPROC_PER_NODE with LOCAL_RANK
  TearDown();
  SetUp();
  expectError(detect(with(base, {{"WORLD_SIZE", "2"}, {"RANK", "5"}, {"LOCAL_WORLD_SIZE", "4"}})),
              {"RANK=5", "WORLD_SIZE=2", "Kubeflow"});
  TearDown();
  SetUp();
  expectError(detect(with(base, {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}})),
              {"LOCAL_WORLD_SIZE=4", "WORLD_SIZE=2", "Kubeflow"});
  TearDown();
  SetUp();
  const std::map<std::string, std::string> byNode = with(base, {{"WORLD_SIZE", "8"},
                                                                {"RANK", "1"},
                                                                {"GROUP_RANK", "1"},
                                                                {"LOCAL_RANK", "2"},
                                                                {"LOCAL_WORLD_SIZE", "4"}});
  expectError(detect(byNode), {"GROUP_RANK=1", "RANK=1", "= 6", "Kubeflow"});
  // torchrun numbers its workers itself: not checked there.
  LaunchChoice c = detect({{"TORCHELASTIC_RUN_ID", "x"}});
  EXPECT_TRUE(c.status.isOk()) << c.status.toString();
  TearDown();
  SetUp();

  // What torchrun inside a PyTorchJob gives its workers: process counts. Fine.
  c = detect(with(base, {{"WORLD_SIZE", "8"},
                         {"RANK", "6"},
                         {"GROUP_RANK", "1"},
                         {"LOCAL_RANK", "2"},
                         {"LOCAL_WORLD_SIZE", "4"},
                         {"PET_NNODES", "2"},
                         {"PET_NPROC_PER_NODE", "4"}}));
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(c.row()->identity.localSize, 4);
  EXPECT_EQ(c.row()->identity.node, 1);
  // One process per pod (no local launcher): WORLD_SIZE = pods is right.
  TearDown();
  SetUp();
  c = detect(
      with(base,
           {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"PET_NNODES", "2"}, {"PET_NPROC_PER_NODE", "4"}}));
  EXPECT_TRUE(c.status.isOk()) << c.status.toString();
}

TEST_F(LauncherTest, TorchrunKeepsItsMessages) {
  // braid-run's variables.
  LaunchChoice c = detect({{"RANK", "1"},
                           {"WORLD_SIZE", "2"},
                           {"LOCAL_RANK", "1"},
                           {"LOCAL_WORLD_SIZE", "2"},
                           {"MASTER_ADDR", "127.0.0.1"},
                           {"MASTER_PORT", "29400"}});
  ASSERT_TRUE(c.status.isOk()) << c.status.toString();
  EXPECT_EQ(chosenName(c), "torchrun");
  EXPECT_EQ(c.row()->store.port, 29400);
  expectError(detect({{"RANK", "2"}}),
              {"RANK=2 is out of range 0..1", "(RANK must be below WORLD_SIZE=2)"});
  unsetenv("MASTER_ADDR");
  expectError(detect({{"RANK", "1"}}), {"MASTER_ADDR is not set"});
  // MASTER_ADDR alone is no launcher.
  TearDown();
  SetUp();
  expectError(detect({{"MASTER_ADDR", "127.0.0.1"}}), {"MASTER_ADDR is set", "WORLD_SIZE"});
}

// ---------------------------------------------------------------------------------------------
// bootstrapFromEnvironment, one rank of each TCP launcher

TEST_F(LauncherTest, BootstrapOneRankOfEachLauncher) {
  const int port = freePort();
  ASSERT_GT(port, 0);
  const std::map<std::string, std::map<std::string, std::string>> launches = {
      {"slurm",
       {{"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "1"},
        {"SLURM_JOB_NODELIST", "localhost,node[2-3]"},
        {"MASTER_PORT", std::to_string(port)}}},
      {"ompi",
       {{"OMPI_COMM_WORLD_RANK", "0"},
        {"OMPI_COMM_WORLD_SIZE", "1"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(port)}}},
      {"pmi",
       {{"PMI_RANK", "0"},
        {"PMI_SIZE", "1"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"BRAID_STORE_PORT", std::to_string(port)}}},
  };
  for (const auto& [name, vars] : launches) {
    SCOPED_TRACE(name);
    TearDown();
    SetUp();
    set(vars);
    Result<BootstrapInfo> info = bootstrapFromEnvironment(Deadline::afterMs(5000));
    ASSERT_TRUE(info.isOk()) << info.status().toString();
    EXPECT_EQ(info->method, name);
    EXPECT_EQ(info->rank, 0);
    EXPECT_EQ(info->size, 1);
    EXPECT_TRUE(info->store != nullptr);
    EXPECT_NE(info->launch.find(std::to_string(port)), std::string::npos) << info->launch;
  }
  // A conflict fails at once, before any socket.
  TearDown();
  SetUp();
  set({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}});
  Result<BootstrapInfo> info = bootstrapFromEnvironment(Deadline::afterMs(5000));
  EXPECT_EQ(info.status().code(), Code::kInvalidArgument);
  EXPECT_NE(info.status().message().find("SLURM_PROCID=0"), std::string::npos);
}

}  // namespace
}  // namespace braid
