// The tuner plugin through its exported tables (standalone library and net library), on NCCL's
// real table shape: a contiguous float[7][3] passed as float** by a cast. v6 (NCCL 2.30.3+) adds
// getChunkSize and is driven like v5; PAT is priced for all-gather/reduce-scatter at one GPU per
// node.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/nccl_abi.h"
#include "plugin/tuner/model.h"

namespace braid::plugin::tuner {
namespace {

std::mutex gLogMu;
std::vector<std::pair<unsigned long, std::string>> gLog;

void captureLogger(abi::LogLevel, unsigned long subsys, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gLogMu);
  gLog.emplace_back(subsys, buf);
}

/// NCCL-like table: everything available except CollNet/NVLS/PAT (-1) and one filtered entry.
struct Table {
  float t[abi::kNumAlgorithms][abi::kNumProtocols];
  Table() {
    for (int a = 0; a < abi::kNumAlgorithms; ++a) {
      for (int p = 0; p < abi::kNumProtocols; ++p) {
        t[a][p] = (a == abi::kAlgoTree || a == abi::kAlgoRing) ? 10.0f + a * 3 + p : -1.0f;
      }
    }
    t[abi::kAlgoRing][abi::kProtoLL] = 5.0f;   // NCCL's favourite protocol for ring
    t[abi::kAlgoTree][abi::kProtoLL] = -1.0f;  // filtered (e.g. NCCL_PROTO)
  }
  float** arg() { return reinterpret_cast<float**>(t); }
};

class Loaded {
 public:
  Loaded(const char* path, const char* env = nullptr) {
    if (env != nullptr) putenv(const_cast<char*>(env));
    lib_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(lib_, nullptr) << dlerror();
  }
  ~Loaded() {
    if (lib_ != nullptr) dlclose(lib_);
  }
  template <typename T>
  const T* table(const char* name) {
    return lib_ ? static_cast<const T*>(dlsym(lib_, name)) : nullptr;
  }

 private:
  void* lib_ = nullptr;
};

/// Checks the invariants every call must keep; returns the index of the entry set to 0 or -1.
int checkInvariants(const Table& before, const Table& after) {
  int zeroed = -1;
  for (int a = 0; a < abi::kNumAlgorithms; ++a) {
    for (int p = 0; p < abi::kNumProtocols; ++p) {
      const float b = before.t[a][p], x = after.t[a][p];
      if (b < 0) {
        EXPECT_EQ(x, b) << "revived a -1 entry at " << a << "," << p;
      } else if (x != b) {
        EXPECT_EQ(x, 0.0f);
        EXPECT_EQ(zeroed, -1) << "more than one entry changed";
        zeroed = a * abi::kNumProtocols + p;
      }
    }
  }
  return zeroed;
}

class TunerPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"BRAID_TUNER", "BRAID_TUNER_FILE", "BRAID_TUNER_NET_LATENCY_NS",
                          "BRAID_TUNER_NET_GBITS", "BRAID_TUNER_CHANNEL_BYTES", "BRAID_TUNER_MODEL",
                          "BRAID_TUNING_FILE"}) {
      unsetenv(v);
    }
    gLog.clear();
  }
};

void exerciseV5(const char* path) {
  Loaded lib(path);
  auto* t = lib.table<abi::TunerV5>("ncclTunerPlugin_v5");
  ASSERT_NE(t, nullptr);
  EXPECT_STREQ(t->name, "braid");
  abi::TunerConstantsV5 constants;
  std::memset(&constants, 0, sizeof(constants));
  constants.baseLatencies[1][2] = 4.4;
  abi::NvlDomainInfoV5 nvl{4, 8, 8};
  void* ctx = nullptr;
  ASSERT_EQ(t->init(&ctx, 1, 32, 4, captureLogger, &nvl, &constants), abi::kSuccess);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(constants.baseLatencies[1][2], 4.4) << "constants left alone";

  // Small all-reduce on 4 nodes: the model prefers tree (fewer latency steps); tree/LL is
  // filtered, so the cheapest remaining tree protocol is chosen, and few channels.
  Table before, after;
  int channels = 0;
  ASSERT_EQ(t->getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, after.arg(), abi::kNumAlgorithms,
                           abi::kNumProtocols, 0, &channels),
            abi::kSuccess);
  EXPECT_EQ(checkInvariants(before, after), abi::kAlgoTree * 3 + abi::kProtoLL128);
  EXPECT_EQ(channels, 1);

  // Large all-reduce: ring, with NCCL's cheapest ring protocol, channels left to NCCL.
  Table large;
  channels = 0;
  ASSERT_EQ(t->getCollInfo(ctx, abi::kFuncAllReduce, 256u << 20, 1, large.arg(),
                           abi::kNumAlgorithms, abi::kNumProtocols, 0, &channels),
            abi::kSuccess);
  EXPECT_EQ(checkInvariants(Table(), large), abi::kAlgoRing * 3 + abi::kProtoLL);
  EXPECT_EQ(channels, 0);

  // No opinion: other collectives, and a table where tree and ring are both filtered out.
  Table other;
  channels = 0;
  ASSERT_EQ(t->getCollInfo(ctx, abi::kFuncAllGather, 4096, 1, other.arg(), abi::kNumAlgorithms,
                           abi::kNumProtocols, 0, &channels),
            abi::kSuccess);
  EXPECT_EQ(checkInvariants(Table(), other), -1);
  EXPECT_EQ(channels, 0);
  Table filtered;
  for (int p = 0; p < 3; ++p) filtered.t[abi::kAlgoTree][p] = filtered.t[abi::kAlgoRing][p] = -1;
  Table filteredBefore = filtered;
  ASSERT_EQ(t->getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, filtered.arg(), abi::kNumAlgorithms,
                           abi::kNumProtocols, 0, &channels),
            abi::kSuccess);
  EXPECT_EQ(checkInvariants(filteredBefore, filtered), -1);
  EXPECT_EQ(t->getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, nullptr, abi::kNumAlgorithms,
                           abi::kNumProtocols, 0, &channels),
            abi::kSuccess);
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);

  // One node: no opinion.
  ASSERT_EQ(t->init(&ctx, 1, 8, 1, captureLogger, &nvl, &constants), abi::kSuccess);
  Table single;
  channels = 0;
  ASSERT_EQ(t->getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, single.arg(), abi::kNumAlgorithms,
                           abi::kNumProtocols, 0, &channels),
            abi::kSuccess);
  EXPECT_EQ(checkInvariants(Table(), single), -1);
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);

  bool sawDecision = false;
  for (auto& [subsys, line] : gLog) {
    if ((subsys & abi::kSubsysTuning) &&
        line.find("allreduce 4096 bytes on 4 nodes: tree/ll128") != std::string::npos) {
      sawDecision = true;
    }
  }
  EXPECT_TRUE(sawDecision) << "decisions are logged through NCCL's logger under TUNING";
}

TEST_F(TunerPluginTest, StandaloneLibraryV5) { exerciseV5(BRAID_TUNER_PLUGIN_PATH); }
TEST_F(TunerPluginTest, NetLibraryCarriesTheTunerToo) { exerciseV5(BRAID_NET_PLUGIN_PATH); }

/// A table as NCCL fills it at one GPU per node for all-gather/reduce-scatter: ring with every
/// protocol, PAT with SIMPLE only, the rest -1.
struct GatherTable : Table {
  GatherTable() {
    for (int p = 0; p < abi::kNumProtocols; ++p) t[abi::kAlgoTree][p] = -1.0f;
    t[abi::kAlgoPat][abi::kProtoSimple] = 40.0f;
  }
};

/// getCollInfo through the v6 table; the entry set to 0 (algo * 3 + proto) or -1.
int pickV6(const abi::TunerV6* t, void* ctx, abi::Func coll, size_t bytes, Table* table,
           int* channels) {
  const Table before = *table;
  *channels = 0;
  EXPECT_EQ(t->getCollInfo(ctx, coll, bytes, 1, table->arg(), abi::kNumAlgorithms,
                           abi::kNumProtocols, 0, channels),
            abi::kSuccess);
  return checkInvariants(before, *table);
}

void exerciseV6(const char* path) {
  Loaded lib(path);
  auto* t = lib.table<abi::TunerV6>("ncclTunerPlugin_v6");
  ASSERT_NE(t, nullptr);
  EXPECT_STREQ(t->name, "braid");
  ASSERT_NE(t->getChunkSize, nullptr);
  abi::TunerConstantsV6 constants;
  std::memset(&constants, 0, sizeof(constants));
  abi::NvlDomainInfoV6 nvl{8, 1, 1};
  void* ctx = nullptr;
  // 8 nodes of one GPU: NCCL's PAT placement. Default link: alpha 8 us, 12500 B/us; W 4 MiB.
  ASSERT_EQ(t->init(&ctx, 1, 8, 8, captureLogger, &nvl, &constants), abi::kSuccess);
  ASSERT_NE(ctx, nullptr);
  int channels = 0;
  // 1 MiB: 32 blocks fit W, so PAT takes log2 8 = 3 steps against the ring's 7; 4 channels.
  GatherTable ag;
  EXPECT_EQ(pickV6(t, ctx, abi::kFuncAllGather, 1 << 20, &ag, &channels),
            abi::kAlgoPat * 3 + abi::kProtoSimple);
  EXPECT_EQ(channels, 4);
  // Reduce-scatter at the edge: 16 MiB = p·W/2 still aggregates two blocks (4 steps)...
  GatherTable rs;
  EXPECT_EQ(pickV6(t, ctx, abi::kFuncReduceScatter, 16u << 20, &rs, &channels),
            abi::kAlgoPat * 3 + abi::kProtoSimple);
  EXPECT_EQ(channels, 0);
  // ...one byte more and a block no longer pairs up: p - 1 steps, a tie, and the ring wins
  // with NCCL's cheapest ring protocol.
  GatherTable rsBig;
  EXPECT_EQ(pickV6(t, ctx, abi::kFuncReduceScatter, (16u << 20) + 8, &rsBig, &channels),
            abi::kAlgoRing * 3 + abi::kProtoLL);
  // PAT filtered by NCCL (NCCL_ALGO): never revived, the ring is chosen instead.
  GatherTable noPat;
  noPat.t[abi::kAlgoPat][abi::kProtoSimple] = -1.0f;
  EXPECT_EQ(pickV6(t, ctx, abi::kFuncAllGather, 1 << 20, &noPat, &channels),
            abi::kAlgoRing * 3 + abi::kProtoLL);
  // All-reduce is still ring/tree, and broadcast has no opinion.
  Table ar;
  EXPECT_EQ(pickV6(t, ctx, abi::kFuncAllReduce, 4096, &ar, &channels),
            abi::kAlgoTree * 3 + abi::kProtoLL128);
  GatherTable bc;
  EXPECT_EQ(pickV6(t, ctx, abi::kFuncBroadcast, 4096, &bc, &channels), -1);

  // getChunkSize: NCCL's tree/SIMPLE all-reduce chunk is left as is on 8 nodes at 4 MiB
  // (c* = sqrt(n·α·B/5) = 289 KB > 128 KiB) and lowered when NCCL's is larger.
  size_t chunk = 131072;
  EXPECT_EQ(t->getChunkSize(ctx, abi::kFuncAllReduce, 4u << 20, abi::kAlgoTree, abi::kProtoSimple,
                            1, &chunk),
            abi::kSuccess);
  EXPECT_EQ(chunk, 131072u);
  chunk = 1u << 20;
  EXPECT_EQ(t->getChunkSize(ctx, abi::kFuncAllReduce, 4u << 20, abi::kAlgoTree, abi::kProtoSimple,
                            1, &chunk),
            abi::kSuccess);
  EXPECT_EQ(chunk, 289280u);  // floor(sqrt(4 MiB · 8 · 12500 / 5) / 512) · 512
  // Ring, PAT and the LL protocols keep NCCL's chunk.
  for (int algo : {abi::kAlgoRing, abi::kAlgoPat}) {
    chunk = 1u << 20;
    EXPECT_EQ(
        t->getChunkSize(ctx, abi::kFuncAllGather, 4u << 20, algo, abi::kProtoSimple, 1, &chunk),
        abi::kSuccess);
    EXPECT_EQ(chunk, 1u << 20) << algo;
  }
  chunk = 1u << 20;
  EXPECT_EQ(
      t->getChunkSize(ctx, abi::kFuncAllReduce, 4u << 20, abi::kAlgoTree, abi::kProtoLL, 1, &chunk),
      abi::kSuccess);
  EXPECT_EQ(chunk, 1u << 20);
  // Bad arguments: nothing to answer into is an error; values outside NCCL's tables leave
  // NCCL's chunk and succeed.
  EXPECT_EQ(t->getChunkSize(ctx, abi::kFuncAllReduce, 4u << 20, abi::kAlgoTree, abi::kProtoSimple,
                            1, nullptr),
            abi::kInvalidArgument);
  const struct {
    int algo, proto, channels;
    size_t bytes;
  } kBad[] = {{7, abi::kProtoSimple, 1, 4u << 20},
              {-1, abi::kProtoSimple, 1, 4u << 20},
              {abi::kAlgoTree, 3, 1, 4u << 20},
              {abi::kAlgoTree, -1, 1, 4u << 20},
              {abi::kAlgoTree, abi::kProtoSimple, 0, 4u << 20},
              {abi::kAlgoTree, abi::kProtoSimple, 1, 0}};
  for (const auto& b : kBad) {
    chunk = 1u << 20;
    EXPECT_EQ(
        t->getChunkSize(ctx, abi::kFuncAllReduce, b.bytes, b.algo, b.proto, b.channels, &chunk),
        abi::kSuccess)
        << b.algo << "," << b.proto;
    EXPECT_EQ(chunk, 1u << 20) << b.algo << "," << b.proto;
  }
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);

  // 64 nodes: a deeper tree (D = 12) wants shorter chunks: sqrt(4 MiB · 8 · 12500 / 11).
  ASSERT_EQ(t->init(&ctx, 1, 64, 64, captureLogger, &nvl, &constants), abi::kSuccess);
  chunk = 1u << 20;
  EXPECT_EQ(t->getChunkSize(ctx, abi::kFuncAllReduce, 4u << 20, abi::kAlgoTree, abi::kProtoSimple,
                            1, &chunk),
            abi::kSuccess);
  EXPECT_EQ(chunk, 195072u);
  chunk = 1u << 20;
  EXPECT_EQ(
      t->getChunkSize(ctx, abi::kFuncAllReduce, 100, abi::kAlgoTree, abi::kProtoSimple, 1, &chunk),
      abi::kSuccess);
  EXPECT_EQ(chunk, 512u) << "never below SIMPLE's grain";
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);

  // Several GPUs per node (16 ranks on 8 nodes): NCCL offers no PAT there; no opinion on
  // all-gather. One node: no chunk opinion either.
  ASSERT_EQ(t->init(&ctx, 1, 16, 8, captureLogger, &nvl, &constants), abi::kSuccess);
  GatherTable multi;
  EXPECT_EQ(pickV6(t, ctx, abi::kFuncAllGather, 1 << 20, &multi, &channels), -1);
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);
  ASSERT_EQ(t->init(&ctx, 1, 8, 1, captureLogger, &nvl, &constants), abi::kSuccess);
  chunk = 1u << 20;
  EXPECT_EQ(t->getChunkSize(ctx, abi::kFuncAllReduce, 4u << 20, abi::kAlgoTree, abi::kProtoSimple,
                            1, &chunk),
            abi::kSuccess);
  EXPECT_EQ(chunk, 1u << 20);
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);

  bool sawPat = false;
  for (auto& [subsys, line] : gLog) {
    sawPat |= (subsys & abi::kSubsysTuning) &&
              line.find("allgather 1048576 bytes on 8 nodes: pat/simple") != std::string::npos;
  }
  EXPECT_TRUE(sawPat) << "PAT decisions are logged under TUNING";
}

TEST_F(TunerPluginTest, StandaloneLibraryV6) { exerciseV6(BRAID_TUNER_PLUGIN_PATH); }
TEST_F(TunerPluginTest, NetLibraryCarriesTunerV6) { exerciseV6(BRAID_NET_PLUGIN_PATH); }

TEST_F(TunerPluginTest, V6OffLeavesEverythingToNccl) {
  setenv("BRAID_TUNER", "off", 1);
  Loaded lib(BRAID_TUNER_PLUGIN_PATH);
  auto* t = lib.table<abi::TunerV6>("ncclTunerPlugin_v6");
  ASSERT_NE(t, nullptr);
  void* ctx = reinterpret_cast<void*>(0x5);
  ASSERT_EQ(t->init(&ctx, 1, 8, 8, captureLogger, nullptr, nullptr), abi::kSuccess);
  EXPECT_EQ(ctx, nullptr);
  GatherTable g;
  int channels = 0;
  EXPECT_EQ(pickV6(t, ctx, abi::kFuncAllGather, 1 << 20, &g, &channels), -1);
  size_t chunk = 1u << 20;
  EXPECT_EQ(t->getChunkSize(ctx, abi::kFuncAllReduce, 4u << 20, abi::kAlgoTree, abi::kProtoSimple,
                            1, &chunk),
            abi::kSuccess);
  EXPECT_EQ(chunk, 1u << 20);
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);
}

TEST_F(TunerPluginTest, RulesFileWinsButNeverRevives) {
  char path[] = "/tmp/braid-tuner-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string rules =
      "# forced choices\n"
      "allreduce,0,1024,tree,ll,0      # tree/LL is filtered in the test table: skipped\n"
      "allreduce,0,65536,ring,ll128,3\n"
      "allgather,0,-1,ring,*,-1,4\n";
  ASSERT_EQ(write(fd, rules.data(), rules.size()), static_cast<ssize_t>(rules.size()));
  close(fd);
  setenv("BRAID_TUNER_FILE", path, 1);
  Loaded lib(BRAID_TUNER_PLUGIN_PATH);
  auto* t = lib.table<abi::TunerV5>("ncclTunerPlugin_v5");
  ASSERT_NE(t, nullptr);
  void* ctx = nullptr;
  ASSERT_EQ(t->init(&ctx, 1, 16, 4, captureLogger, nullptr, nullptr), abi::kSuccess);
  Table a;
  int channels = 0;
  t->getCollInfo(ctx, abi::kFuncAllReduce, 512, 1, a.arg(), 7, 3, 0, &channels);
  EXPECT_EQ(checkInvariants(Table(), a), abi::kAlgoRing * 3 + abi::kProtoLL128);
  EXPECT_EQ(channels, 3);
  Table g;
  channels = 0;
  t->getCollInfo(ctx, abi::kFuncAllGather, 1 << 20, 1, g.arg(), 7, 3, 0, &channels);
  EXPECT_EQ(checkInvariants(Table(), g), abi::kAlgoRing * 3 + abi::kProtoLL);
  EXPECT_EQ(channels, 0);
  t->finalize(ctx);
  unlink(path);
}

std::string writeTemp(const std::string& text) {
  char path[] = "/tmp/braid-tuner-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

/// The algorithm index the tuner picked for an all-reduce of `bytes` on 4 nodes (-1: none).
int pickOn4Nodes(size_t bytes) {
  Loaded lib(BRAID_TUNER_PLUGIN_PATH);
  auto* t = lib.table<abi::TunerV5>("ncclTunerPlugin_v5");
  if (t == nullptr) return -2;
  void* ctx = nullptr;
  if (t->init(&ctx, 1, 16, 4, captureLogger, nullptr, nullptr) != abi::kSuccess) return -2;
  Table table;
  int channels = 0;
  t->getCollInfo(ctx, abi::kFuncAllReduce, bytes, 1, table.arg(), 7, 3, 0, &channels);
  t->finalize(ctx);
  const int entry = checkInvariants(Table(), table);
  return entry < 0 ? -1 : entry / 3;
}

// braid's calibration (a calibration file's inter-host link) drives the model: a slow-latency
// fabric moves the tree/ring crossover up, so 4 MiB goes to tree instead of ring.
TEST_F(TunerPluginTest, CalibratedModelFromBraidCalibrationFile) {
  EXPECT_EQ(pickOn4Nodes(4u << 20), abi::kAlgoRing) << "the built-in 8 us / 100 Gbit/s link";
  const std::string path = writeTemp(
      "# braid calibration cache\nfingerprint test\nmodel intra_alpha_us=2 "
      "intra_beta_us_per_byte=0.00025 intra_beta_sym_us_per_byte=0.0005 "
      "intra_beta_sym_large_us_per_byte=0.0005 inter_alpha_us=1000 inter_beta_us_per_byte=8e-05 "
      "inter_beta_sym_us_per_byte=8e-05 inter_beta_sym_large_us_per_byte=8e-05 "
      "gamma_us_per_byte=0.000125 copy_us_per_byte=0.000125 sync_us=1 cores_per_host=2\n");
  setenv("BRAID_TUNER_MODEL", path.c_str(), 1);
  EXPECT_EQ(pickOn4Nodes(4u << 20), abi::kAlgoTree) << "alpha 1000 us from the file";
  setenv("BRAID_TUNER_MODEL", "/nonexistent/calibration", 1);
  EXPECT_EQ(pickOn4Nodes(4u << 20), abi::kAlgoRing) << "an unreadable file is ignored";
  unsetenv("BRAID_TUNER_MODEL");
  unlink(path.c_str());
}

// braid's own tuning file (docs/tuning-file.md): rules naming ring or tree apply; rules naming
// braid-only algorithms are skipped and the model decides.
TEST_F(TunerPluginTest, BraidTuningFileRulesMapOntoNccl) {
  EXPECT_EQ(pickOn4Nodes(4096), abi::kAlgoTree) << "the model alone: tree for small messages";
  const std::string path = writeTemp(
      "allreduce bytes=0-8K hosts=3 algo=tree     # another node count: no match\n"
      "allreduce bytes=0-8K hosts=4 algo=ring\n"
      "allreduce bytes=0-* algo=hierarchical       # braid-only: skipped\n");
  setenv("BRAID_TUNING_FILE", path.c_str(), 1);
  EXPECT_EQ(pickOn4Nodes(4096), abi::kAlgoRing) << "the file's second rule";
  EXPECT_EQ(pickOn4Nodes(16384), abi::kAlgoTree) << "the hierarchical rule is skipped";
  unsetenv("BRAID_TUNING_FILE");
  unlink(path.c_str());
}

TEST_F(TunerPluginTest, BadRulesFileAndOffStillSucceed) {
  setenv("BRAID_TUNER_FILE", "/nonexistent/rules", 1);
  {
    Loaded lib(BRAID_TUNER_PLUGIN_PATH);
    auto* t = lib.table<abi::TunerV5>("ncclTunerPlugin_v5");
    void* ctx = nullptr;
    ASSERT_EQ(t->init(&ctx, 1, 16, 4, captureLogger, nullptr, nullptr), abi::kSuccess);
    EXPECT_NE(ctx, nullptr) << "the model still runs";
    t->finalize(ctx);
  }
  unsetenv("BRAID_TUNER_FILE");
  setenv("BRAID_TUNER", "off", 1);
  Loaded lib(BRAID_TUNER_PLUGIN_PATH);
  auto* t = lib.table<abi::TunerV5>("ncclTunerPlugin_v5");
  void* ctx = reinterpret_cast<void*>(0x5);
  ASSERT_EQ(t->init(&ctx, 1, 16, 4, captureLogger, nullptr, nullptr), abi::kSuccess);
  EXPECT_EQ(ctx, nullptr);
  Table x;
  int channels = 0;
  EXPECT_EQ(t->getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, x.arg(), 7, 3, 0, &channels),
            abi::kSuccess);
  EXPECT_EQ(checkInvariants(Table(), x), -1);
  EXPECT_EQ(t->finalize(ctx), abi::kSuccess);
}

TEST_F(TunerPluginTest, OlderAdapters) {
  Loaded lib(BRAID_TUNER_PLUGIN_PATH);
  auto* v4 = lib.table<abi::TunerV4>("ncclTunerPlugin_v4");
  auto* v3 = lib.table<abi::TunerV3>("ncclTunerPlugin_v3");
  auto* v2 = lib.table<abi::TunerV2>("ncclTunerPlugin_v2");
  ASSERT_TRUE(v4 && v3 && v2);
  void* ctx = nullptr;
  ASSERT_EQ(v4->init(32, 4, captureLogger, &ctx), abi::kSuccess);
  Table a;
  int ch = 0;
  v4->getCollInfo(ctx, abi::kFuncAllReduce, 256u << 20, 1, a.arg(), 7, 3, 0, &ch);
  EXPECT_EQ(checkInvariants(Table(), a), abi::kAlgoRing * 3 + abi::kProtoLL);
  v4->destroy(ctx);
  ASSERT_EQ(v3->init(32, 4, captureLogger, &ctx), abi::kSuccess);
  Table b;
  v3->getCollInfo(ctx, abi::kFuncAllReduce, 4096, 1, b.arg(), 7, 3, &ch);
  EXPECT_EQ(checkInvariants(Table(), b), abi::kAlgoTree * 3 + abi::kProtoLL128);
  v3->destroy(ctx);
  ASSERT_EQ(v2->init(32, 4, captureLogger, &ctx), abi::kSuccess);
  int algo = -1, proto = -1;
  ch = 0;
  v2->getCollInfo(ctx, abi::kFuncAllReduce, 256u << 20, 0, 0, 1, &algo, &proto, &ch);
  EXPECT_EQ(algo, abi::kAlgoRing);
  EXPECT_EQ(proto, abi::kProtoSimple);
  algo = proto = -1;
  v2->getCollInfo(ctx, abi::kFuncBroadcast, 4096, 0, 0, 1, &algo, &proto, &ch);
  EXPECT_EQ(algo, -1) << "no opinion leaves the outputs alone";
  v2->destroy(ctx);
}

TEST(TunerModelTest, CrossoverFollowsAlphaBeta) {
  ModelParams p;
  p.latencyUs = 8;
  p.bytesPerUs = 12500;
  Tuner t16(128, 16, p, {});
  // Crossover n* = p * alpha * B * ((p-1) - log2 p) / ... : tree below, ring above.
  EXPECT_LT(t16.treeUs(1 << 20), t16.ringUs(1 << 20));
  EXPECT_GT(t16.treeUs(64u << 20), t16.ringUs(64u << 20));
  Tuner t2(16, 2, p, {});
  EXPECT_LE(t2.ringUs(8), t2.treeUs(8)) << "two nodes: ring is never worse";
}

// PAT's price (model.h): steps (⌈p/R⌉ - 1 + ⌈log2 R⌉), the ring's bandwidth term.
TEST(TunerModelTest, PatPrice) {
  ModelParams p;
  p.latencyUs = 10;
  p.bytesPerUs = 1000;
  p.patBufferBytes = 1 << 20;
  Tuner t8(8, 8, p, {});
  const double bw = 7.0 / 8 * (1 << 20) / 1000;  // (p-1)/p · n/B at n = 1 MiB
  EXPECT_DOUBLE_EQ(t8.ringGatherUs(1 << 20), 70 + bw);
  EXPECT_DOUBLE_EQ(t8.patUs(1 << 20), 30 + bw) << "8 blocks fit W: R = 8, log2 8 steps";
  EXPECT_DOUBLE_EQ(t8.patUs(4u << 20), 40 + 4 * bw) << "2 blocks: R = 2, 4 - 1 + 1 steps";
  EXPECT_DOUBLE_EQ(t8.patUs(8u << 20), 70 + 8 * bw) << "1 block: R = 1, the ring's 7 steps";
  EXPECT_DOUBLE_EQ(t8.patUs(0), 30) << "no data: Bruck's log2 p steps";
  Tuner t5(5, 5, p, {});  // not a power of two: 2^⌈log2 5⌉ = 8 bounds R
  EXPECT_DOUBLE_EQ(t5.patUs(1024), 30 + 4.0 / 5 * 1024 / 1000);
  EXPECT_DOUBLE_EQ(t5.ringGatherUs(1024), 40 + 4.0 / 5 * 1024 / 1000);
  Tuner t3(3, 3, p, {});
  EXPECT_DOUBLE_EQ(t3.patUs(1024), t3.ringGatherUs(1024)) << "p = 3: log2 steps = p - 1";
  Tuner t1(1, 1, p, {});
  EXPECT_EQ(t1.patUs(1024), 0);
}

TEST(TunerModelTest, ChunkSizeOnlyLowersTreeSimple) {
  ModelParams p;  // 8 us, 12500 B/us
  Tuner t(4, 4, p, {});
  // D = 4 edges: c* = sqrt(n · 8 · 12500 / 3); n = 1 MiB -> 186,955 -> 186,880.
  EXPECT_EQ(
      t.chunkSize(abi::kFuncAllReduce, 1 << 20, abi::kAlgoTree, abi::kProtoSimple, 1, 1u << 20),
      186880u);
  EXPECT_EQ(t.chunkSize(abi::kFuncAllReduce, 1 << 20, abi::kAlgoTree, abi::kProtoSimple, 1, 65536),
            65536u);
  EXPECT_EQ(
      t.chunkSize(abi::kFuncAllReduce, 1 << 20, abi::kAlgoRing, abi::kProtoSimple, 1, 1u << 20),
      1u << 20);
  EXPECT_EQ(
      t.chunkSize(abi::kFuncAllReduce, 1 << 20, abi::kAlgoTree, abi::kProtoLL128, 1, 1u << 20),
      1u << 20);
  EXPECT_EQ(
      t.chunkSize(abi::kFuncReduceScatter, 1 << 20, abi::kAlgoTree, abi::kProtoSimple, 1, 1u << 20),
      1u << 20);
}

TEST(TunerModelTest, RulesParserNamesTheBadLine) {
  auto ok = parseRules("allreduce,0,100,ring,simple,2,4,32\n# c\n\nbroadcast,5,5,tree,*,-1\n");
  ASSERT_TRUE(ok.isOk()) << ok.status().toString();
  ASSERT_EQ(ok.value().size(), 2u);
  EXPECT_EQ(ok.value()[0].nRanks, 32);
  EXPECT_EQ(ok.value()[1].proto, -1);
  for (const char* bad :
       {"allreduce,0,100,ring\n", "allreduc,0,1,ring,ll,0\n", "allreduce,0,1,rings,ll,0\n",
        "allreduce,0,1,ring,l,0\n", "allreduce,x,1,ring,ll,0\n", "allreduce,5,1,ring,ll,0\n"}) {
    auto r = parseRules(std::string("# header\n") + bad);
    EXPECT_FALSE(r.isOk()) << bad;
    EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().toString();
  }
}

}  // namespace
}  // namespace braid::plugin::tuner
