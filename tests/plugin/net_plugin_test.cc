// Drives the built libnccl-net-braid.so the way NCCL does (ABI doc §1.6, §8.4): dlopen, init
// per communicator, devices/getProperties, listen on the receiver, handle to the sender out of
// band, connect/accept loops, closeListen, regMr, isend/irecv/test, deregMr, close, finalize,
// dlclose. The peers are two processes over loopback; setup and data path run on different
// threads, as NCCL's proxy service and progress threads do. The transport under the plugin is
// BRAID_TEST_NET_TRANSPORT (tcp when unset); children are forked before the parent opens comms
// (a ucx child cannot use UCX forked while its parent holds UCX resources).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "tests/plugin/plugin_harness.h"

namespace braid::plugin::testing {
namespace {

using abi::NetV11;

constexpr uint64_t kCommId = 0x1234abcdull;

/// One loaded library with its v11 table and a ctx.
struct Net {
  std::unique_ptr<Library> lib;
  const NetV11* n = nullptr;
  void* ctx = nullptr;

  explicit Net(uint64_t commId = kCommId) {
    lib = std::make_unique<Library>(BRAID_NET_PLUGIN_PATH);
    EXPECT_TRUE(lib->ok()) << lib->error();
    n = lib->symbol<NetV11>("ncclNetPlugin_v11");
    EXPECT_NE(n, nullptr);
    if (n == nullptr) return;
    EXPECT_EQ(n->init(&ctx, commId, nullptr, nullptr, nullptr), abi::kSuccess);
    int ndev = 0;
    EXPECT_EQ(n->devices(&ndev), abi::kSuccess);
    EXPECT_GE(ndev, 1);
  }
  ~Net() {
    if (n != nullptr) {
      EXPECT_EQ(n->finalize(ctx), abi::kSuccess);
    }
  }
};

/// Loops connect/accept in one thread (both are non-blocking) until both comms exist (v11 or
/// v12 table: the same slots).
template <typename Table = NetV11>
bool connectPair(const Table* n, void* sendCtx, void* recvCtx, void** sc, void** rc) {
  char handle[abi::kNetHandleMaxSize] = {};
  void* lc = nullptr;
  if (n->listen(recvCtx, 0, handle, &lc) != abi::kSuccess || lc == nullptr) return false;
  *sc = *rc = nullptr;
  abi::NetDeviceHandle* devComm = nullptr;
  bool ok = spinUntil([&] {
    if (*sc == nullptr && n->connect(sendCtx, 0, handle, sc, &devComm) != abi::kSuccess) {
      return true;
    }
    if (*rc == nullptr && n->accept(lc, rc, &devComm) != abi::kSuccess) return true;
    return *sc != nullptr && *rc != nullptr;
  });
  EXPECT_EQ(n->closeListen(lc), abi::kSuccess);
  return ok && *sc != nullptr && *rc != nullptr;
}

/// Waits for one request; returns the test() result (kSuccess with *done, or the error).
template <typename Table = NetV11>
abi::Result waitRequest(const Table* n, void* req, int* sizes, int ms = kWaitMs) {
  abi::Result res = abi::kSuccess;
  int done = 0;
  bool finished = spinUntil(
      [&] {
        res = n->test(req, &done, sizes);
        return res != abi::kSuccess || done;
      },
      ms);
  return finished ? res : abi::kInProgress;  // kInProgress here = timed out
}

uint8_t patternByte(int msg, size_t i) { return static_cast<uint8_t>(msg * 131 + i * 7 + 1); }

size_t messageSize(int i) {
  static const size_t kSizes[] = {0, 1, 7, 4096, 65537, 300000, (1 << 20) + 3, 4 << 20};
  return kSizes[i % (sizeof(kSizes) / sizeof(kSizes[0]))];
}

class NetPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("BRAID_NET_IFNAME", "lo", 1);
    setenv("BRAID_TIMEOUT_MS", "20000", 1);
    unsetenv("BRAID_NET_MAX_RECVS");
    // CTest runs this suite once per transport (net_plugin_test: tcp, net_plugin_ucx_test: ucx).
    const char* transport = getenv("BRAID_TEST_NET_TRANSPORT");
    if (transport != nullptr) {
      setenv("BRAID_NET_TRANSPORT", transport, 1);
    } else {
      unsetenv("BRAID_NET_TRANSPORT");
    }
  }
};

TEST_F(NetPluginTest, PropertiesFollowTheContract) {
  Net net;
  ASSERT_NE(net.n, nullptr);
  EXPECT_STREQ(net.n->name, "braid");
  EXPECT_EQ(net.n->regMrDmaBuf, nullptr);
  EXPECT_NE(net.n->finalize, nullptr);
  abi::NetPropertiesV11 p;
  ASSERT_EQ(net.n->getProperties(0, &p), abi::kSuccess);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.ptrSupport, abi::kPtrHost);
  EXPECT_EQ(p.netDeviceType, abi::kNetDeviceHost);
  EXPECT_EQ(p.netDeviceVersion, 0);
  EXPECT_EQ(p.maxRecvs, 1);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.vProps.devs[0], 0);
  EXPECT_GT(p.maxP2pBytes, 0u);
  EXPECT_LE(p.maxP2pBytes, abi::kMaxNetSizeBytes);
  EXPECT_LE(p.maxP2pBytes, static_cast<size_t>(INT32_MAX));  // test() reports int sizes
  EXPECT_GT(p.speed, 0);
  EXPECT_GE(p.maxComms, 1024);
  EXPECT_EQ(p.maxMultiRequestSize, 1);
  EXPECT_NE(net.n->getProperties(99, &p), abi::kSuccess);
  // Thread-safe and cheap: called from several threads at once.
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        abi::NetPropertiesV11 q;
        if (net.n->getProperties(0, &q) != abi::kSuccess || q.guid != p.guid) ++bad;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// The properties NCCL sees come from topology/: a BRAID_TOPO_FILE states a speed and latency
// that sysfs cannot (lo reports neither).
TEST_F(NetPluginTest, PropertiesComeFromTheTopology) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  char path[] = "/tmp/braid-net-topo-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = std::string("braid-topology 1\nhost name=") + host +
                     "\nnic name=lo kind=loopback speed_mbps=123000 addr=127.0.0.1/8 up=1\n"
                     "link from=host:" + host + " to=nic:lo kind=net gbps=123 latency_us=7.5\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  setenv("BRAID_TOPO_FILE", path, 1);
  {
    Net net;
    ASSERT_NE(net.n, nullptr);
    abi::NetPropertiesV11 p;
    ASSERT_EQ(net.n->getProperties(0, &p), abi::kSuccess);
    EXPECT_STREQ(p.name, "lo");
    EXPECT_EQ(p.speed, 123000);
    EXPECT_FLOAT_EQ(p.latency, 7.5f);
  }
  unsetenv("BRAID_TOPO_FILE");
  unlink(path);
  // Without the file, lo has no speed in sysfs: NCCL's "unknown" 10 Gb/s, latency 0.
  Net net;
  ASSERT_NE(net.n, nullptr);
  abi::NetPropertiesV11 p;
  ASSERT_EQ(net.n->getProperties(0, &p), abi::kSuccess);
  EXPECT_EQ(p.speed, 10000);
  EXPECT_EQ(p.latency, 0.0f);
}

TEST_F(NetPluginTest, FinalizeToleratesFailedInit) {
  setenv("BRAID_NET_IFNAME", "=no-such-interface0", 1);
  Library lib(BRAID_NET_PLUGIN_PATH);
  ASSERT_TRUE(lib.ok()) << lib.error();
  auto* n = lib.symbol<NetV11>("ncclNetPlugin_v11");
  ASSERT_NE(n, nullptr);
  void* ctx = reinterpret_cast<void*>(0xdead);
  EXPECT_EQ(n->init(&ctx, kCommId, nullptr, nullptr, nullptr), abi::kSystemError);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(n->finalize(ctx), abi::kSuccess);
  EXPECT_EQ(n->finalize(nullptr), abi::kSuccess);
  int ndev = 0;
  EXPECT_NE(n->devices(&ndev), abi::kSuccess);
}

TEST_F(NetPluginTest, RepeatedInitFinalizeAndReloadLeakNothing) {
  int fdsAfterFirst = -1;
  for (int cycle = 0; cycle < 6; ++cycle) {
    Library lib(BRAID_NET_PLUGIN_PATH);
    ASSERT_TRUE(lib.ok()) << lib.error();
    auto* n = lib.symbol<NetV11>("ncclNetPlugin_v11");
    ASSERT_NE(n, nullptr);
    for (int rep = 0; rep < 3; ++rep) {
      void* a = nullptr;
      void* b = nullptr;
      ASSERT_EQ(n->init(&a, kCommId, nullptr, nullptr, nullptr), abi::kSuccess);
      ASSERT_EQ(n->init(&b, kCommId, nullptr, nullptr, nullptr), abi::kSuccess);
      void* sc = nullptr;
      void* rc = nullptr;
      ASSERT_TRUE(connectPair(n, a, b, &sc, &rc));
      char out[64] = "hello", in[128] = {};
      void* sreq = nullptr;
      void* rreq = nullptr;
      void* data[1] = {in};
      size_t sizes[1] = {sizeof(in)};
      int tags[1] = {0};
      void* mh[1] = {nullptr};
      ASSERT_TRUE(spinUntil([&] {
        if (sreq == nullptr) n->isend(sc, out, sizeof(out), 0, nullptr, nullptr, &sreq);
        if (rreq == nullptr) n->irecv(rc, 1, data, sizes, tags, mh, nullptr, &rreq);
        return sreq != nullptr && rreq != nullptr;
      }));
      int got = -1;
      EXPECT_EQ(waitRequest(n, sreq, nullptr), abi::kSuccess);
      EXPECT_EQ(waitRequest(n, rreq, &got), abi::kSuccess);
      EXPECT_EQ(got, static_cast<int>(sizeof(out)));
      EXPECT_STREQ(in, "hello");
      EXPECT_EQ(n->closeSend(sc), abi::kSuccess);
      EXPECT_EQ(n->closeRecv(rc), abi::kSuccess);
      EXPECT_EQ(n->finalize(a), abi::kSuccess);
      EXPECT_EQ(n->finalize(b), abi::kSuccess);
    }
    if (cycle == 0) fdsAfterFirst = countOpenFds();
  }
  EXPECT_EQ(countOpenFds(), fdsAfterFirst) << "file descriptors leaked across reloads";
}

// The main two-process stream: 256 messages of mixed sizes, 32 in flight per direction, receive
// buffers larger than the sends, the 0x1 hint on every receive, sizes=NULL on some tests, setup
// (listen/accept/regMr) and data path on different threads.
TEST_F(NetPluginTest, TwoProcessesManyConcurrentRequests) {
  constexpr int kMessages = 256;
  constexpr int kWindow = 32;
  constexpr size_t kSlack = 100;
  Pipe toChild;
  pid_t child = runChild([&] {
    Net net;
    char handle[abi::kNetHandleMaxSize];
    ASSERT_TRUE(toChild.read(handle, sizeof(handle)));
    void* sc = nullptr;
    std::thread setup([&] {
      abi::NetDeviceHandle* dh = nullptr;
      ASSERT_TRUE(spinUntil([&] {
        EXPECT_EQ(net.n->connect(net.ctx, 0, handle, &sc, &dh), abi::kSuccess);
        return sc != nullptr;
      }));
    });
    setup.join();
    ASSERT_NE(sc, nullptr);
    std::vector<std::vector<uint8_t>> bufs(kWindow);
    void* mh = nullptr;
    std::vector<uint8_t> big(8 << 20);
    ASSERT_EQ(net.n->regMr(sc, big.data(), big.size(), abi::kPtrHost, &mh), abi::kSuccess);
    std::thread data([&] {
      std::vector<void*> reqs(kWindow, nullptr);
      for (int i = 0; i < kMessages + kWindow; ++i) {
        const int slot = i % kWindow;
        if (i >= kWindow) {
          int size = -1;
          ASSERT_EQ(waitRequest(net.n, reqs[slot], &size), abi::kSuccess) << "send " << i - kWindow;
          ASSERT_EQ(size, static_cast<int>(messageSize(i - kWindow)));
        }
        if (i >= kMessages) continue;
        bufs[slot].resize(messageSize(i));
        for (size_t b = 0; b < bufs[slot].size(); ++b) bufs[slot][b] = patternByte(i, b);
        reqs[slot] = nullptr;
        ASSERT_TRUE(spinUntil([&] {
          EXPECT_EQ(
              net.n->isend(sc, bufs[slot].data(), bufs[slot].size(), 7, mh, nullptr, &reqs[slot]),
              abi::kSuccess);
          return reqs[slot] != nullptr;
        }));
      }
    });
    data.join();
    EXPECT_EQ(net.n->deregMr(sc, mh), abi::kSuccess);
    EXPECT_EQ(net.n->closeSend(sc), abi::kSuccess);
  });

  Net net;
  void* rc = nullptr;
  void* mh = nullptr;
  std::vector<uint8_t> region(kWindow * ((4 << 20) + kSlack));
  std::thread setup([&] {
    char handle[abi::kNetHandleMaxSize];
    void* lc = nullptr;
    ASSERT_EQ(net.n->listen(net.ctx, 0, handle, &lc), abi::kSuccess);
    ASSERT_TRUE(toChild.write(handle, sizeof(handle)));
    abi::NetDeviceHandle* dh = nullptr;
    ASSERT_TRUE(spinUntil([&] {
      EXPECT_EQ(net.n->accept(lc, &rc, &dh), abi::kSuccess);
      return rc != nullptr;
    }));
    EXPECT_EQ(net.n->closeListen(lc), abi::kSuccess);
    ASSERT_EQ(net.n->regMr(rc, region.data(), region.size(), abi::kPtrHost, &mh), abi::kSuccess);
  });
  setup.join();
  ASSERT_NE(rc, nullptr);
  std::thread data([&] {
    std::vector<void*> reqs(kWindow, nullptr);
    for (int i = 0; i < kMessages + kWindow; ++i) {
      const int slot = i % kWindow;
      uint8_t* buf = region.data() + slot * ((4 << 20) + kSlack);
      if (i >= kWindow) {
        const int m = i - kWindow;
        int size = -1;
        int* sizesOut = m % 5 == 4 ? nullptr : &size;  // NULL sizes accepted
        ASSERT_EQ(waitRequest(net.n, reqs[slot], sizesOut), abi::kSuccess) << "recv " << m;
        if (sizesOut != nullptr) {
          ASSERT_EQ(size, static_cast<int>(messageSize(m)));
        }
        for (size_t b = 0; b < messageSize(m); ++b) {
          ASSERT_EQ(buf[b], patternByte(m, b)) << "message " << m << " byte " << b;
        }
      }
      if (i >= kMessages) continue;
      void* dataPtr[1] = {buf};
      size_t sizes[1] = {messageSize(i) + kSlack};  // larger than the send
      int tags[1] = {7};
      void* mhs[1] = {mh};
      ASSERT_TRUE(spinUntil([&] {
        reqs[slot] = abi::kOptionalRecvCompletion;  // NCCL's LL/LL128 hint
        EXPECT_EQ(net.n->irecv(rc, 1, dataPtr, sizes, tags, mhs, nullptr, &reqs[slot]),
                  abi::kSuccess);
        EXPECT_NE(reqs[slot], abi::kOptionalRecvCompletion) << "0x1 must never be returned";
        return reqs[slot] != nullptr && reqs[slot] != abi::kOptionalRecvCompletion;
      }));
    }
  });
  data.join();
  void* flushReq = reinterpret_cast<void*>(0x99);
  EXPECT_EQ(net.n->iflush(rc, 1, nullptr, nullptr, nullptr, &flushReq), abi::kSuccess);
  EXPECT_EQ(flushReq, nullptr);
  EXPECT_EQ(net.n->deregMr(rc, mh), abi::kSuccess);
  EXPECT_EQ(net.n->closeRecv(rc), abi::kSuccess);
  EXPECT_EQ(waitChild(child), 0);
}

// maxRecvs = 4: each irecv groups 4 buffers with tags; sends land by tag in the oldest grouped
// receive, whatever the order of the tags in the receive.
TEST_F(NetPluginTest, GroupedReceivesMatchByTag) {
  setenv("BRAID_NET_MAX_RECVS", "4", 1);
  constexpr int kRounds = 24;
  constexpr int kWindow = 8;
  auto sizeOf = [](int round, int tag) { return static_cast<size_t>(1000 * tag + round * 37 + 1); };
  Pipe toChild;
  pid_t child = runChild([&] {
    Net net;
    char handle[abi::kNetHandleMaxSize];
    ASSERT_TRUE(toChild.read(handle, sizeof(handle)));
    void* sc = nullptr;
    ASSERT_TRUE(spinUntil([&] {
      EXPECT_EQ(net.n->connect(net.ctx, 0, handle, &sc, nullptr), abi::kSuccess);
      return sc != nullptr;
    }));
    std::vector<std::vector<uint8_t>> bufs(kRounds * 4);
    std::vector<void*> reqs;
    for (int r = 0; r < kRounds; ++r) {
      for (int tag = 0; tag < 4; ++tag) {
        std::vector<uint8_t>& b = bufs[r * 4 + tag];
        b.assign(sizeOf(r, tag), static_cast<uint8_t>(r * 4 + tag));
        void* req = nullptr;
        ASSERT_TRUE(spinUntil([&] {
          EXPECT_EQ(net.n->isend(sc, b.data(), b.size(), tag, nullptr, nullptr, &req),
                    abi::kSuccess);
          return req != nullptr;
        }));
        reqs.push_back(req);
        if (reqs.size() >= 32) {
          ASSERT_EQ(waitRequest(net.n, reqs.front(), nullptr), abi::kSuccess);
          reqs.erase(reqs.begin());
        }
      }
    }
    for (void* req : reqs) ASSERT_EQ(waitRequest(net.n, req, nullptr), abi::kSuccess);
    EXPECT_EQ(net.n->closeSend(sc), abi::kSuccess);
  });

  Net net;
  abi::NetPropertiesV11 p;
  ASSERT_EQ(net.n->getProperties(0, &p), abi::kSuccess);
  ASSERT_EQ(p.maxRecvs, 4);
  char handle[abi::kNetHandleMaxSize];
  void* lc = nullptr;
  ASSERT_EQ(net.n->listen(net.ctx, 0, handle, &lc), abi::kSuccess);
  ASSERT_TRUE(toChild.write(handle, sizeof(handle)));
  void* rc = nullptr;
  ASSERT_TRUE(spinUntil([&] {
    EXPECT_EQ(net.n->accept(lc, &rc, nullptr), abi::kSuccess);
    return rc != nullptr;
  }));
  net.n->closeListen(lc);
  const int kOrder[4] = {2, 0, 3, 1};
  std::vector<std::vector<uint8_t>> bufs(kWindow * 4, std::vector<uint8_t>(5000));
  std::vector<void*> reqs(kWindow, nullptr);
  for (int i = 0; i < kRounds + kWindow; ++i) {
    const int slot = i % kWindow;
    if (i >= kWindow) {
      const int r = i - kWindow;
      int sizes[4] = {-1, -1, -1, -1};
      ASSERT_EQ(waitRequest(net.n, reqs[slot], sizes), abi::kSuccess) << "round " << r;
      for (int k = 0; k < 4; ++k) {
        const int tag = kOrder[k];
        ASSERT_EQ(sizes[k], static_cast<int>(sizeOf(r, tag))) << "round " << r << " tag " << tag;
        EXPECT_EQ(bufs[slot * 4 + k][0], static_cast<uint8_t>(r * 4 + tag));
        EXPECT_EQ(bufs[slot * 4 + k][sizes[k] - 1], static_cast<uint8_t>(r * 4 + tag));
      }
    }
    if (i >= kRounds) continue;
    void* data[4];
    size_t sizes[4];
    int tags[4];
    void* mhs[4] = {};
    for (int k = 0; k < 4; ++k) {
      data[k] = bufs[slot * 4 + k].data();
      sizes[k] = bufs[slot * 4 + k].size();
      tags[k] = kOrder[k];
    }
    reqs[slot] = nullptr;
    ASSERT_TRUE(spinUntil([&] {
      EXPECT_EQ(net.n->irecv(rc, 4, data, sizes, tags, mhs, nullptr, &reqs[slot]), abi::kSuccess);
      return reqs[slot] != nullptr;
    }));
  }
  EXPECT_EQ(net.n->closeRecv(rc), abi::kSuccess);
  EXPECT_EQ(waitChild(child), 0);
}

TEST_F(NetPluginTest, SendLargerThanReceiveIsAnErrorOnBothSides) {
  Pipe toChild;
  Pipe toParent;
  pid_t child = runChild([&] {
    Net net;
    char handle[abi::kNetHandleMaxSize];
    ASSERT_TRUE(toChild.read(handle, sizeof(handle)));
    void* sc = nullptr;
    ASSERT_TRUE(spinUntil([&] {
      EXPECT_EQ(net.n->connect(net.ctx, 0, handle, &sc, nullptr), abi::kSuccess);
      return sc != nullptr;
    }));
    std::vector<uint8_t> big(1 << 20, 1);
    // The first send may complete into socket buffers before the receiver refuses it; the
    // refusal must then surface on a later operation, never as a hang.
    abi::Result res = abi::kSuccess;
    bool failed = spinUntil([&] {
      void* req = nullptr;
      res = net.n->isend(sc, big.data(), big.size(), 0, nullptr, nullptr, &req);
      if (res != abi::kSuccess) return true;
      if (req == nullptr) return false;
      res = waitRequest(net.n, req, nullptr);
      return res != abi::kSuccess;
    });
    EXPECT_TRUE(failed) << "the sender never saw the refusal";
    EXPECT_TRUE(res == abi::kInvalidUsage || res == abi::kRemoteError) << res;
    char note = 1;
    toParent.write(&note, 1);
    net.n->closeSend(sc);
  });
  Net net;
  char handle[abi::kNetHandleMaxSize];
  void* lc = nullptr;
  ASSERT_EQ(net.n->listen(net.ctx, 0, handle, &lc), abi::kSuccess);
  ASSERT_TRUE(toChild.write(handle, sizeof(handle)));
  void* rc = nullptr;
  ASSERT_TRUE(spinUntil([&] {
    EXPECT_EQ(net.n->accept(lc, &rc, nullptr), abi::kSuccess);
    return rc != nullptr;
  }));
  net.n->closeListen(lc);
  std::vector<uint8_t> small(1024);
  void* data[1] = {small.data()};
  size_t sizes[1] = {small.size()};
  int tags[1] = {0};
  void* req = nullptr;
  ASSERT_EQ(net.n->irecv(rc, 1, data, sizes, tags, nullptr, nullptr, &req), abi::kSuccess);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(waitRequest(net.n, req, nullptr), abi::kInvalidUsage);
  char note = 0;
  EXPECT_TRUE(toParent.read(&note, 1));
  net.n->closeRecv(rc);
  EXPECT_EQ(waitChild(child), 0);
}

TEST_F(NetPluginTest, CloseWithRequestsInFlightAndPeerExit) {
  Pipe toChild;
  pid_t child = runChild([&] {
    Net net;
    char handle[abi::kNetHandleMaxSize];
    ASSERT_TRUE(toChild.read(handle, sizeof(handle)));
    void* sc = nullptr;
    ASSERT_TRUE(spinUntil([&] {
      EXPECT_EQ(net.n->connect(net.ctx, 0, handle, &sc, nullptr), abi::kSuccess);
      return sc != nullptr;
    }));
    std::vector<uint8_t> buf(256 << 10, 3);
    for (int i = 0; i < 32; ++i) {
      void* req = nullptr;
      ASSERT_EQ(net.n->isend(sc, buf.data(), buf.size(), 0, nullptr, nullptr, &req), abi::kSuccess);
    }
    EXPECT_EQ(net.n->closeSend(sc), abi::kSuccess);  // 32 requests never tested
  });
  Net net;
  char handle[abi::kNetHandleMaxSize];
  void* lc = nullptr;
  ASSERT_EQ(net.n->listen(net.ctx, 0, handle, &lc), abi::kSuccess);
  ASSERT_TRUE(toChild.write(handle, sizeof(handle)));
  void* rc = nullptr;
  ASSERT_TRUE(spinUntil([&] {
    EXPECT_EQ(net.n->accept(lc, &rc, nullptr), abi::kSuccess);
    return rc != nullptr;
  }));
  net.n->closeListen(lc);
  EXPECT_EQ(waitChild(child), 0);
  // The peer is gone: receives beyond what it sent fail (kRemoteError) instead of hanging.
  std::vector<uint8_t> buf(256 << 10);
  void* data[1] = {buf.data()};
  size_t sizes[1] = {buf.size()};
  int tags[1] = {0};
  abi::Result last = abi::kSuccess;
  for (int i = 0; i < 40 && last == abi::kSuccess; ++i) {
    void* req = nullptr;
    last = net.n->irecv(rc, 1, data, sizes, tags, nullptr, nullptr, &req);
    if (last == abi::kSuccess && req != nullptr) last = waitRequest(net.n, req, nullptr);
  }
  EXPECT_EQ(last, abi::kRemoteError);
  // And a receive comm with requests still posted closes cleanly.
  void* sc2 = nullptr;
  void* rc2 = nullptr;
  ASSERT_TRUE(connectPair(net.n, net.ctx, net.ctx, &sc2, &rc2));
  for (int i = 0; i < 16; ++i) {
    void* req = nullptr;
    EXPECT_EQ(net.n->irecv(rc2, 1, data, sizes, tags, nullptr, nullptr, &req), abi::kSuccess);
    EXPECT_NE(req, nullptr);
  }
  EXPECT_EQ(net.n->closeRecv(rc2), abi::kSuccess);
  EXPECT_EQ(net.n->closeSend(sc2), abi::kSuccess);
  EXPECT_EQ(net.n->closeRecv(rc), abi::kSuccess);
}

TEST_F(NetPluginTest, MalformedAndForeignHandlesAreRefused) {
  Net net;
  Net other(kCommId + 1);  // another communicator: another job secret
  ASSERT_NE(net.n, nullptr);
  char good[abi::kNetHandleMaxSize];
  void* lc = nullptr;
  ASSERT_EQ(net.n->listen(net.ctx, 0, good, &lc), abi::kSuccess);
  auto refused = [&](const char* h, void* ctx) {
    void* sc = reinterpret_cast<void*>(0x1);
    abi::Result r = net.n->connect(ctx, 0, const_cast<char*>(h), &sc, nullptr);
    return r != abi::kSuccess && sc == nullptr;
  };
  char h[abi::kNetHandleMaxSize];
  std::memset(h, 0, sizeof(h));
  EXPECT_TRUE(refused(h, net.ctx)) << "all zeros";
  std::mt19937 rng(1);
  for (int i = 0; i < 64; ++i) {
    for (char& c : h) c = static_cast<char>(rng());
    EXPECT_TRUE(refused(h, net.ctx)) << "random " << i;
  }
  for (int byte = 0; byte < 48; ++byte) {  // every byte of the header and address is checked
    std::memcpy(h, good, sizeof(h));
    h[byte] ^= 0x5a;
    EXPECT_TRUE(refused(h, net.ctx)) << "byte " << byte << " flipped";
  }
  // NCCL's own socket plugin puts a sockaddr first: family 2, port, address.
  std::memset(h, 0, sizeof(h));
  h[0] = 2;
  h[2] = 0x1f;
  h[4] = 127;
  h[7] = 1;
  EXPECT_TRUE(refused(h, net.ctx)) << "socket-plugin-like handle";
  EXPECT_TRUE(refused(good, other.ctx)) << "a handle of another communicator";
  void* none = nullptr;
  EXPECT_NE(net.n->connect(net.ctx, 5, good, &none, nullptr), abi::kSuccess) << "bad device";
  // The listener still accepts the real peer afterwards.
  void* sc = nullptr;
  void* rc = nullptr;
  ASSERT_TRUE(spinUntil([&] {
    if (sc == nullptr) {
      EXPECT_EQ(net.n->connect(net.ctx, 0, good, &sc, nullptr), abi::kSuccess);
    }
    if (rc == nullptr) {
      EXPECT_EQ(net.n->accept(lc, &rc, nullptr), abi::kSuccess);
    }
    return sc != nullptr && rc != nullptr;
  }));
  EXPECT_EQ(net.n->closeListen(lc), abi::kSuccess);
  EXPECT_EQ(net.n->closeSend(sc), abi::kSuccess);
  EXPECT_EQ(net.n->closeRecv(rc), abi::kSuccess);
  // Foreign objects given to the data path are refused, not dereferenced blindly.
  int done = 0;
  char junk[256] = {};
  EXPECT_NE(net.n->test(junk, &done, nullptr), abi::kSuccess);
  void* req = nullptr;
  EXPECT_NE(net.n->isend(junk, junk, 8, 0, nullptr, nullptr, &req), abi::kSuccess);
}

// v10 and v9 share the implementation: one round trip through each table.
template <typename Table>
void legacyRoundTrip(const char* symbol) {
  Library lib(BRAID_NET_PLUGIN_PATH);
  ASSERT_TRUE(lib.ok()) << lib.error();
  auto* n = lib.symbol<Table>(symbol);
  ASSERT_NE(n, nullptr) << symbol;
  if constexpr (std::is_same_v<Table, abi::NetV10>) {
    ASSERT_EQ(n->init(nullptr, nullptr), abi::kSuccess);
  } else {
    ASSERT_EQ(n->init(nullptr), abi::kSuccess);
  }
  int ndev = 0;
  ASSERT_EQ(n->devices(&ndev), abi::kSuccess);
  ASSERT_GE(ndev, 1);
  abi::NetPropertiesV10 props[2];
  std::memset(props, 0x77, sizeof(props));
  ASSERT_EQ(n->getProperties(0, &props[0]), abi::kSuccess);
  EXPECT_STREQ(props[0].name, "lo");
  EXPECT_EQ(props[0].maxCollBytes, props[0].maxP2pBytes);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(&props[1])[0], 0x77) << "wrote past 104 bytes";
  char handle[abi::kNetHandleMaxSize];
  void* lc = nullptr;
  ASSERT_EQ(n->listen(0, handle, &lc), abi::kSuccess);
  void* sc = nullptr;
  void* rc = nullptr;
  ASSERT_TRUE(spinUntil([&] {
    if (sc == nullptr) {
      if constexpr (std::is_same_v<Table, abi::NetV10>) {
        abi::NetCommConfig cfg{-1};
        EXPECT_EQ(n->connect(0, &cfg, handle, &sc, nullptr), abi::kSuccess);
      } else {
        EXPECT_EQ(n->connect(0, handle, &sc, nullptr), abi::kSuccess);
      }
    }
    if (rc == nullptr) {
      EXPECT_EQ(n->accept(lc, &rc, nullptr), abi::kSuccess);
    }
    return sc != nullptr && rc != nullptr;
  }));
  n->closeListen(lc);
  uint64_t out = 0x0123456789abcdefull, in = 0;
  void* data[1] = {&in};
  size_t sizes[1] = {sizeof(in)};
  int tags[1] = {0};
  void* sreq = nullptr;
  void* rreq = nullptr;
  if constexpr (std::is_same_v<Table, abi::NetV10>) {
    ASSERT_EQ(n->irecv(rc, 1, data, sizes, tags, nullptr, nullptr, &rreq), abi::kSuccess);
  } else {
    ASSERT_EQ(n->irecv(rc, 1, data, sizes, tags, nullptr, &rreq), abi::kSuccess);
  }
  ASSERT_TRUE(spinUntil([&] {
    if constexpr (std::is_same_v<Table, abi::NetV10>) {
      EXPECT_EQ(n->isend(sc, &out, sizeof(out), 0, nullptr, nullptr, &sreq), abi::kSuccess);
    } else {
      EXPECT_EQ(n->isend(sc, &out, sizeof(out), 0, nullptr, &sreq), abi::kSuccess);
    }
    return sreq != nullptr;
  }));
  int done = 0;
  int got = 0;
  ASSERT_TRUE(spinUntil([&] { return n->test(sreq, &done, nullptr) == abi::kSuccess && done; }));
  ASSERT_TRUE(spinUntil([&] { return n->test(rreq, &done, &got) == abi::kSuccess && done; }));
  EXPECT_EQ(got, 8);
  EXPECT_EQ(in, out);
  EXPECT_EQ(n->closeSend(sc), abi::kSuccess);
  EXPECT_EQ(n->closeRecv(rc), abi::kSuccess);
}

TEST_F(NetPluginTest, V10AdapterRoundTrip) { legacyRoundTrip<abi::NetV10>("ncclNetPlugin_v10"); }
TEST_F(NetPluginTest, V9AdapterRoundTrip) { legacyRoundTrip<abi::NetV9>("ncclNetPlugin_v9"); }

// v12 (NCCL 2.30.3+): v11's table, 128-byte properties with railId/planeId. braid's topology has
// no rails or planes, so both are -1; everything else is what v11 reports, at v12's offsets.
TEST_F(NetPluginTest, V12PropertiesAndRoundTrip) {
  static_assert(sizeof(abi::NetPropertiesV12) == 128 && sizeof(abi::NetV12) == 176);
  Library lib(BRAID_NET_PLUGIN_PATH);
  ASSERT_TRUE(lib.ok()) << lib.error();
  auto* n = lib.symbol<abi::NetV12>("ncclNetPlugin_v12");
  auto* n11 = lib.symbol<abi::NetV11>("ncclNetPlugin_v11");
  ASSERT_NE(n, nullptr);
  ASSERT_NE(n11, nullptr);
  EXPECT_NE(static_cast<const void*>(n), static_cast<const void*>(n11));
  EXPECT_STREQ(n->name, "braid");
  EXPECT_NE(n->finalize, nullptr);
  EXPECT_EQ(n->regMrDmaBuf, nullptr);
  EXPECT_EQ(n->makeVDevice, nullptr);
  EXPECT_EQ(n->setNetAttr, nullptr);
  void* ctx = nullptr;
  abi::NetCommConfig cfg{-1};
  ASSERT_EQ(n->init(&ctx, kCommId, &cfg, nullptr, nullptr), abi::kSuccess);
  int ndev = 0;
  ASSERT_EQ(n->devices(&ndev), abi::kSuccess);
  ASSERT_EQ(ndev, 1);  // BRAID_NET_IFNAME=lo
  abi::NetPropertiesV12 props[2];
  std::memset(props, 0x77, sizeof(props));
  ASSERT_EQ(n->getProperties(0, &props[0]), abi::kSuccess);
  const abi::NetPropertiesV12& p = props[0];
  EXPECT_EQ(reinterpret_cast<unsigned char*>(&props[1])[0], 0x77) << "wrote past 128 bytes";
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.railId, -1);
  EXPECT_EQ(p.planeId, -1);
  EXPECT_EQ(p.ptrSupport, abi::kPtrHost);
  EXPECT_EQ(p.netDeviceType, abi::kNetDeviceHost);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.vProps.devs[0], 0);
  for (int i = 1; i < abi::kNetMaxDevsPerNicV12; ++i) EXPECT_EQ(p.vProps.devs[i], 0) << i;
  EXPECT_EQ(p.maxMultiRequestSize, 1);
  EXPECT_EQ(p.maxRecvs, 1);
  // The same device as v11 reports, member for member, at the moved offsets.
  abi::NetPropertiesV11 q;
  ASSERT_EQ(n11->getProperties(0, &q), abi::kSuccess);
  EXPECT_EQ(p.name, q.name);
  EXPECT_EQ(p.guid, q.guid);
  EXPECT_EQ(p.speed, q.speed);
  EXPECT_EQ(p.maxComms, q.maxComms);
  EXPECT_EQ(p.maxP2pBytes, q.maxP2pBytes);
  EXPECT_EQ(p.maxCollBytes, q.maxCollBytes);
  EXPECT_GT(p.maxP2pBytes, 0u);
  EXPECT_LE(p.maxP2pBytes, abi::kMaxNetSizeBytes);
  // Raw offsets, as NCCL 2.30 reads them.
  const auto* raw = reinterpret_cast<const unsigned char*>(&p);
  size_t p2p = 0;
  int16_t rail = 0, plane = 0;
  std::memcpy(&p2p, raw + 104, sizeof(p2p));
  std::memcpy(&rail, raw + 124, sizeof(rail));
  std::memcpy(&plane, raw + 126, sizeof(plane));
  EXPECT_EQ(p2p, q.maxP2pBytes);
  EXPECT_EQ(rail, -1);
  EXPECT_EQ(plane, -1);
  EXPECT_NE(n->getProperties(1, &props[0]), abi::kSuccess);
  EXPECT_EQ(n->getProperties(0, nullptr), abi::kInvalidArgument);

  // One message through the v12 table.
  void* sc = nullptr;
  void* rc = nullptr;
  ASSERT_TRUE(connectPair(n, ctx, ctx, &sc, &rc));
  uint64_t out = 0x1122334455667788ull, in = 0;
  void* data[1] = {&in};
  size_t sizes[1] = {sizeof(in)};
  int tags[1] = {0};
  void* rreq = nullptr;
  void* sreq = nullptr;
  ASSERT_EQ(n->irecv(rc, 1, data, sizes, tags, nullptr, nullptr, &rreq), abi::kSuccess);
  ASSERT_TRUE(spinUntil([&] {
    EXPECT_EQ(n->isend(sc, &out, sizeof(out), 0, nullptr, nullptr, &sreq), abi::kSuccess);
    return sreq != nullptr;
  }));
  int got = 0;
  EXPECT_EQ(waitRequest(n, sreq, nullptr), abi::kSuccess);
  EXPECT_EQ(waitRequest(n, rreq, &got), abi::kSuccess);
  EXPECT_EQ(got, 8);
  EXPECT_EQ(in, out);
  EXPECT_EQ(n->closeSend(sc), abi::kSuccess);
  EXPECT_EQ(n->closeRecv(rc), abi::kSuccess);
  EXPECT_EQ(n->finalize(ctx), abi::kSuccess);
}

TEST_F(NetPluginTest, ShmTransportUnderThePlugin) {
  setenv("BRAID_NET_TRANSPORT", "shm", 1);
  Net net;
  void* sc = nullptr;
  void* rc = nullptr;
  ASSERT_TRUE(connectPair(net.n, net.ctx, net.ctx, &sc, &rc));
  std::vector<uint8_t> out(3 << 20, 9), in((3 << 20) + 5);
  void* data[1] = {in.data()};
  size_t sizes[1] = {in.size()};
  int tags[1] = {0};
  void* rreq = nullptr;
  void* sreq = nullptr;
  ASSERT_EQ(net.n->irecv(rc, 1, data, sizes, tags, nullptr, nullptr, &rreq), abi::kSuccess);
  ASSERT_EQ(net.n->isend(sc, out.data(), out.size(), 0, nullptr, nullptr, &sreq), abi::kSuccess);
  ASSERT_NE(sreq, nullptr);
  int got = 0;
  int done = 0;
  ASSERT_TRUE(spinUntil([&] {
    if (sreq != nullptr && net.n->test(sreq, &done, nullptr) == abi::kSuccess && done) {
      sreq = nullptr;
    }
    return net.n->test(rreq, &done, &got) == abi::kSuccess && done;
  }));
  EXPECT_EQ(got, static_cast<int>(out.size()));
  EXPECT_EQ(in[out.size() - 1], 9);
  EXPECT_EQ(net.n->closeSend(sc), abi::kSuccess);
  EXPECT_EQ(net.n->closeRecv(rc), abi::kSuccess);
}

}  // namespace
}  // namespace braid::plugin::testing
