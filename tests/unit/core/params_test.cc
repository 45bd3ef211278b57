#include "core/params.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"

namespace braid {
namespace detail {
// Test hooks defined in core/params.cc.
bool parseParamBool(const std::string& text, bool* out);
bool parseParamInt(const std::string& text, int64_t* out);
}  // namespace detail

namespace {

struct Expected {
  const char* name;
  ParamType type;
  const char* defaultValue;
  const char* choices;
};

// The table is part of the interface (documented, printed by braid-info): pin it.
const Expected kExpected[] = {
    {"BRAID_DEBUG", ParamType::kEnum, "WARN", "WARN|INFO|TRACE"},
    {"BRAID_DEBUG_FILE", ParamType::kString, "", ""},
    {"BRAID_TRACE_FILE", ParamType::kString, "", ""},
    {"BRAID_TIMEOUT_MS", ParamType::kInt, "300000", ""},
    {"BRAID_ALGO", ParamType::kString, "", ""},
    {"BRAID_TUNING_FILE", ParamType::kString, "", ""},
    {"BRAID_EXPLAIN", ParamType::kBool, "0", ""},
    {"BRAID_CALIBRATION", ParamType::kEnum, "auto", "auto|probe|off"},
    {"BRAID_CALIBRATION_CACHE", ParamType::kString, "", ""},
    {"BRAID_RETUNE_INTERVAL", ParamType::kInt, "1024", ""},
    {"BRAID_TRANSPORT", ParamType::kEnum, "auto", "auto|shm|tcp"},
    {"BRAID_BOOTSTRAP", ParamType::kEnum, "auto", "auto|env|torchrun|file|slurm|ompi|pmi|pmix|mpi"},
    {"BRAID_STORE_PORT", ParamType::kInt, "0", ""},
    {"BRAID_FILE_STORE", ParamType::kString, "", ""},
    {"BRAID_HOST_ID", ParamType::kString, "", ""},
    {"BRAID_TOPO_FILE", ParamType::kString, "", ""},
    {"BRAID_SOCKET_IFNAME", ParamType::kString, "", ""},
    {"BRAID_TCP_STREAMS", ParamType::kInt, "4", ""},
    {"BRAID_TCP_STRIPE_MIN", ParamType::kInt, "262144", ""},
    {"BRAID_UCX_TLS", ParamType::kString, "tcp,sm,self", ""},
    {"BRAID_SHM_RING_BYTES", ParamType::kInt, "4194304", ""},
    {"BRAID_CHUNK_BYTES", ParamType::kInt, "1048576", ""},
    {"BRAID_SHM_SEGMENT_BYTES", ParamType::kInt, "8388608", ""},
    {"BRAID_BIND_THREADS", ParamType::kEnum, "auto", "auto|off"},
    {"BRAID_SHM_STREAM", ParamType::kEnum, "auto", "auto|on|off"},
    {"BRAID_SHM_CMA", ParamType::kEnum, "auto", "auto|on|off"},
    {"BRAID_SHM_SPIN_US", ParamType::kInt, "1000", ""},
    {"BRAID_BUCKET_CAP_MB", ParamType::kInt, "25", ""},
    {"BRAID_FIRST_BUCKET_CAP_MB", ParamType::kInt, "1", ""},
    {"BRAID_BUCKET_PIECE_BYTES", ParamType::kInt, "0", ""},
    {"BRAID_CODEC", ParamType::kString, "none", ""},
    {"BRAID_CODEC_SCOPE", ParamType::kEnum, "all", "all|inter-host"},
    {"BRAID_CODEC_MIN_BYTES", ParamType::kInt, "0", ""},
    {"BRAID_METRICS_FILE", ParamType::kString, "", ""},
    {"BRAID_NET_IFNAME", ParamType::kString, "", ""},
    {"BRAID_NET_TRANSPORT", ParamType::kEnum, "tcp", "tcp|shm|ucx"},
    {"BRAID_NET_MAX_RECVS", ParamType::kInt, "1", ""},
    {"BRAID_TUNER", ParamType::kEnum, "model", "model|off"},
    {"BRAID_TUNER_FILE", ParamType::kString, "", ""},
    {"BRAID_TUNER_MODEL", ParamType::kString, "", ""},
    {"BRAID_TUNER_NET_LATENCY_NS", ParamType::kInt, "8000", ""},
    {"BRAID_TUNER_NET_GBITS", ParamType::kInt, "100", ""},
    {"BRAID_TUNER_CHANNEL_BYTES", ParamType::kInt, "262144", ""},
};

// Every test starts from an environment without BRAID_* values and an empty cache, and leaves
// it that way.
class ParamsTest : public ::testing::Test {
 protected:
  void SetUp() override { clearAll(); }
  void TearDown() override { clearAll(); }
  static void clearAll() {
    for (const ParamDef& def : paramTable()) {
      unsetenv(def.name);
      setParamForTesting(def.name, "");
    }
    resetLogForTesting();
  }
  // Forces `value` and returns (parsed int, captured stderr).
  static std::pair<int64_t, std::string> forceInt(const char* name, const std::string& value) {
    ::testing::internal::CaptureStderr();
    setParamForTesting(name, value);
    const int64_t v = paramInt(name);
    return {v, ::testing::internal::GetCapturedStderr()};
  }
};

TEST_F(ParamsTest, TableIsExactlyTheDocumentedSet) {
  const std::vector<ParamDef>& table = paramTable();
  ASSERT_EQ(table.size(), sizeof(kExpected) / sizeof(kExpected[0]));
  for (size_t i = 0; i < table.size(); ++i) {
    SCOPED_TRACE(kExpected[i].name);
    EXPECT_STREQ(table[i].name, kExpected[i].name);
    EXPECT_EQ(table[i].type, kExpected[i].type);
    EXPECT_STREQ(table[i].defaultValue, kExpected[i].defaultValue);
    EXPECT_STREQ(table[i].choices, kExpected[i].choices);
    ASSERT_NE(table[i].help, nullptr);
    EXPECT_GT(std::strlen(table[i].help), 20u) << "help text should say what the knob does";
    EXPECT_EQ(std::strchr(table[i].help, '\n'), nullptr) << "help is one line";
  }
}

TEST_F(ParamsTest, DefaultsParseAndReportTheirSource) {
  ::testing::internal::CaptureStderr();
  for (const ParamDef& def : paramTable()) {
    const char* source = nullptr;
    const std::string text = paramValueText(def.name, &source);
    EXPECT_STREQ(source, "default") << def.name;
    EXPECT_EQ(text, def.defaultValue) << def.name;
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "defaults must not warn";
  EXPECT_EQ(paramInt("BRAID_TIMEOUT_MS"), 300000);
  EXPECT_EQ(paramInt("BRAID_TCP_STREAMS"), 4);
  EXPECT_EQ(paramInt("BRAID_TCP_STRIPE_MIN"), 262144);
  EXPECT_EQ(paramInt("BRAID_SHM_RING_BYTES"), 4 << 20);
  EXPECT_EQ(paramInt("BRAID_CHUNK_BYTES"), 1 << 20);
  EXPECT_EQ(paramInt("BRAID_SHM_SEGMENT_BYTES"), 8 << 20);
  EXPECT_EQ(paramString("BRAID_TRANSPORT"), "auto");
  EXPECT_EQ(paramString("BRAID_DEBUG"), "WARN");
  EXPECT_EQ(paramString("BRAID_ALGO"), "");
}

TEST_F(ParamsTest, IntegerSuffixesArePowersOf1024) {
  EXPECT_EQ(forceInt("BRAID_CHUNK_BYTES", "4k").first, 4096);
  EXPECT_EQ(forceInt("BRAID_CHUNK_BYTES", "4K").first, 4096);
  EXPECT_EQ(forceInt("BRAID_CHUNK_BYTES", "2m").first, 2 << 20);
  EXPECT_EQ(forceInt("BRAID_CHUNK_BYTES", "2M").first, 2 << 20);
  EXPECT_EQ(forceInt("BRAID_CHUNK_BYTES", "3g").first, int64_t{3} << 30);
  EXPECT_EQ(forceInt("BRAID_CHUNK_BYTES", "3G").first, int64_t{3} << 30);
  EXPECT_EQ(forceInt("BRAID_CHUNK_BYTES", "12345").first, 12345);
  EXPECT_EQ(forceInt("BRAID_CHUNK_BYTES", " 64k ").first, 65536);  // surrounding blanks ok
  EXPECT_EQ(forceInt("BRAID_TIMEOUT_MS", "-1").first, -1);
  const char* source = nullptr;
  EXPECT_EQ(paramValueText("BRAID_TIMEOUT_MS", &source), "-1");
  EXPECT_STREQ(source, "test");
}

TEST_F(ParamsTest, MalformedIntegersWarnAndFallBack) {
  for (const char* bad : {"abc", "12q", "1kk", "k", "1.5m", "0x10", "99999999999g", "4 k"}) {
    SCOPED_TRACE(bad);
    auto [value, err] = forceInt("BRAID_TCP_STREAMS", bad);
    EXPECT_EQ(value, 4);
    EXPECT_NE(err.find("braid WARN"), std::string::npos) << err;
    EXPECT_NE(err.find("BRAID_TCP_STREAMS='" + std::string(bad) + "'"), std::string::npos) << err;
    EXPECT_NE(err.find("using the default 4"), std::string::npos) << err;
    const char* source = nullptr;
    paramValueText("BRAID_TCP_STREAMS", &source);
    EXPECT_STREQ(source, "default");
  }
}

TEST_F(ParamsTest, ValuesComeFromTheEnvironmentOnceAndAreCached) {
  setenv("BRAID_TCP_STREAMS", "8", 1);
  EXPECT_EQ(paramInt("BRAID_TCP_STREAMS"), 8);
  const char* source = nullptr;
  EXPECT_EQ(paramValueText("BRAID_TCP_STREAMS", &source), "8");
  EXPECT_STREQ(source, "env");
  setenv("BRAID_TCP_STREAMS", "16", 1);
  EXPECT_EQ(paramInt("BRAID_TCP_STREAMS"), 8) << "cached on first read";
  setParamForTesting("BRAID_TCP_STREAMS", "");  // forget: the next read sees the new value
  EXPECT_EQ(paramInt("BRAID_TCP_STREAMS"), 16);
  setenv("BRAID_SHM_RING_BYTES", "1m", 1);
  EXPECT_EQ(paramInt("BRAID_SHM_RING_BYTES"), 1 << 20);
  setenv("BRAID_HOST_ID", "node-7", 1);
  EXPECT_EQ(paramString("BRAID_HOST_ID"), "node-7");
  setenv("BRAID_ALGO", "", 1);  // empty counts as unset
  EXPECT_EQ(paramValueText("BRAID_ALGO", &source), "");
  EXPECT_STREQ(source, "default");
}

TEST_F(ParamsTest, MalformedEnvironmentValueWarnsOnce) {
  setenv("BRAID_TIMEOUT_MS", "soon", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(paramInt("BRAID_TIMEOUT_MS"), 300000);
  EXPECT_EQ(paramInt("BRAID_TIMEOUT_MS"), 300000);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const size_t first = err.find("BRAID_TIMEOUT_MS='soon'");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("BRAID_TIMEOUT_MS='soon'", first + 1), std::string::npos) << "warned twice";
}

TEST_F(ParamsTest, EnumsAreCaseInsensitiveAndCanonicalized) {
  setParamForTesting("BRAID_TRANSPORT", "SHM");
  EXPECT_EQ(paramString("BRAID_TRANSPORT"), "shm");
  setParamForTesting("BRAID_TRANSPORT", " Tcp ");
  EXPECT_EQ(paramString("BRAID_TRANSPORT"), "tcp");
  setParamForTesting("BRAID_DEBUG", "info");
  EXPECT_EQ(paramString("BRAID_DEBUG"), "INFO");
  setenv("BRAID_BOOTSTRAP", "File", 1);
  EXPECT_EQ(paramString("BRAID_BOOTSTRAP"), "file");

  ::testing::internal::CaptureStderr();
  setParamForTesting("BRAID_TRANSPORT", "infiniband");
  EXPECT_EQ(paramString("BRAID_TRANSPORT"), "auto");
  setParamForTesting("BRAID_TRANSPORT", "sh");  // a prefix is not a match
  EXPECT_EQ(paramString("BRAID_TRANSPORT"), "auto");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("BRAID_TRANSPORT='infiniband' is not one of auto|shm|tcp"), std::string::npos)
      << err;
  EXPECT_NE(err.find("BRAID_TRANSPORT='sh'"), std::string::npos) << err;
}

TEST_F(ParamsTest, StringsAreTakenVerbatim) {
  setParamForTesting("BRAID_ALGO", "allreduce:ring;broadcast:tree");
  EXPECT_EQ(paramString("BRAID_ALGO"), "allreduce:ring;broadcast:tree");
  setParamForTesting("BRAID_SOCKET_IFNAME", "^docker,lo");
  const char* source = nullptr;
  EXPECT_EQ(paramValueText("BRAID_SOCKET_IFNAME", &source), "^docker,lo");
  EXPECT_STREQ(source, "test");
  setParamForTesting("BRAID_SOCKET_IFNAME", "");
  EXPECT_EQ(paramValueText("BRAID_SOCKET_IFNAME", &source), "");
  EXPECT_STREQ(source, "default");
}

TEST_F(ParamsTest, IntegersReadAsText) {
  setParamForTesting("BRAID_CHUNK_BYTES", "512k");
  EXPECT_EQ(paramString("BRAID_CHUNK_BYTES"), "524288");
}

TEST(ParamParsersTest, Booleans) {
  bool v = false;
  for (const char* t : {"1", "true", "TRUE", "yes", "Yes", "on", "ON", " on "}) {
    v = false;
    EXPECT_TRUE(detail::parseParamBool(t, &v)) << t;
    EXPECT_TRUE(v) << t;
  }
  for (const char* f : {"0", "false", "False", "no", "NO", "off", "Off"}) {
    v = true;
    EXPECT_TRUE(detail::parseParamBool(f, &v)) << f;
    EXPECT_FALSE(v) << f;
  }
  for (const char* bad : {"", "2", "y", "n", "enable", "truee", "of"}) {
    EXPECT_FALSE(detail::parseParamBool(bad, &v)) << bad;
  }
}

TEST(ParamParsersTest, IntegerLimits) {
  int64_t v = 0;
  EXPECT_TRUE(detail::parseParamInt("9223372036854775807", &v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_FALSE(detail::parseParamInt("9223372036854775808", &v));
  EXPECT_TRUE(detail::parseParamInt("8589934591g", &v));   // (2^33 - 1) * 2^30 < 2^63
  EXPECT_FALSE(detail::parseParamInt("8589934592g", &v));  // 2^63 overflows
  EXPECT_TRUE(detail::parseParamInt("-2k", &v));
  EXPECT_EQ(v, -2048);
  EXPECT_FALSE(detail::parseParamInt("", &v));
  EXPECT_FALSE(detail::parseParamInt("   ", &v));
}

// BRAID_TIMEOUT_MS has one meaning for 0: the default. braid has no wait without a deadline,
// so 0 (or a negative or malformed value) cannot mean "forever"; every owner of a timeout reads
// it through timeoutMsFromEnvironment.
TEST_F(ParamsTest, TimeoutZeroOrLessMeansTheDefault) {
  EXPECT_EQ(timeoutMsFromEnvironment(), kDefaultTimeoutMs);  // unset
  setParamForTesting("BRAID_TIMEOUT_MS", "2500");
  EXPECT_EQ(timeoutMsFromEnvironment(), 2500);
  for (const char* v : {"0", "-1", "soon"}) {
    SCOPED_TRACE(v);
    setParamForTesting("BRAID_TIMEOUT_MS", v);
    EXPECT_EQ(timeoutMsFromEnvironment(), kDefaultTimeoutMs);
  }
  EXPECT_EQ(kDefaultTimeoutMs, 300000);
  for (const ParamDef& def : paramTable()) {
    if (std::string(def.name) == "BRAID_TIMEOUT_MS") {
      EXPECT_EQ(std::to_string(kDefaultTimeoutMs), def.defaultValue);
    }
  }
}

TEST_F(ParamsTest, ConcurrentFirstReadsAgree) {
  setenv("BRAID_TCP_STRIPE_MIN", "128k", 1);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        if (paramInt("BRAID_TCP_STRIPE_MIN") != 131072) ++wrong;
        if (paramString("BRAID_TRANSPORT") != "auto") ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

#ifndef NDEBUG
TEST(ParamsDeathTest, UnknownNameAbortsInDebugBuilds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)paramInt("BRAID_NO_SUCH_PARAM"), "unknown parameter BRAID_NO_SUCH_PARAM");
  EXPECT_DEATH((void)paramInt("BRAID_ALGO"), "read it with the matching accessor");
}
#endif

}  // namespace
}  // namespace braid
