// One "host" of the net plugin's two-host test: run once per host by scripts/fabric.sh
// (`run --hosts 2 --per-host`), each copy in its own network namespace, so that the plugin's
// connections cross a real (virtual) link instead of loopback.
//
// Each host dlopens libnccl-net-braid.so, inits a context with the same commId, listens on device
// 0 (BRAID_NET_IFNAME, fab0 by default here) and publishes its handle in the shared store
// directory (BRAID_FILE_STORE, set by fabric.sh); it then connects to the other host's handle and
// accepts the other host's connection in one non-blocking loop, as NCCL's proxy does. Both hosts
// then send and receive kMessages messages of mixed sizes (up to 4 MiB, receive buffers larger
// than the sends, 8 in flight), check every byte, exchange 200 8-byte ping-pongs, close and
// finalize. Exit 0 on success; the first failure is printed and exits 1.
//
// usage: net_fabric_peer PLUGIN.so   (the transport is BRAID_NET_TRANSPORT: tcp or ucx)
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/nccl_abi.h"

namespace {

namespace abi = braid::abi;
using Clock = std::chrono::steady_clock;

constexpr int kMessages = 48;
constexpr int kWindow = 8;
constexpr int kPings = 200;
constexpr size_t kSlack = 64;
constexpr uint64_t kCommId = 0xfab0fab0ull;

int host = 0;

[[noreturn]] void fail(const std::string& what) {
  fprintf(stderr, "net_fabric_peer host %d: FAIL: %s\n", host, what.c_str());
  exit(1);
}

void check(abi::Result r, const char* what) {
  if (r != abi::kSuccess) fail(std::string(what) + " returned " + std::to_string(r));
}

/// Bounded wait (30 s).
template <typename F>
void spin(F f, const char* what) {
  const auto end = Clock::now() + std::chrono::seconds(30);
  while (!f()) {
    if (Clock::now() > end) fail(std::string("timed out: ") + what);
  }
}

size_t sizeOf(int i) {
  static const size_t kSizes[] = {0, 1, 8, 4095, 65536, 300001, (1 << 20) + 5, 4 << 20};
  return kSizes[i % 8];
}

uint8_t byteOf(int from, int i, size_t b) {
  return static_cast<uint8_t>(from * 59 + i * 31 + b * 13 + 7);
}

std::string storePath(const std::string& dir, int h) {
  return dir + "/net_fabric_peer.handle." + std::to_string(h);
}

void publish(const std::string& dir, const char* handle) {
  const std::string tmp = storePath(dir, host) + ".tmp";
  FILE* f = fopen(tmp.c_str(), "wb");
  if (f == nullptr || fwrite(handle, 1, abi::kNetHandleMaxSize, f) != abi::kNetHandleMaxSize) {
    fail("cannot write " + tmp);
  }
  fclose(f);
  if (rename(tmp.c_str(), storePath(dir, host).c_str()) != 0) fail("cannot publish the handle");
}

void fetch(const std::string& dir, int h, char* handle) {
  const std::string path = storePath(dir, h);
  spin(
      [&] {
        FILE* f = fopen(path.c_str(), "rb");
        if (f == nullptr) {
          usleep(1000);
          return false;
        }
        size_t n = fread(handle, 1, abi::kNetHandleMaxSize, f);
        fclose(f);
        return n == abi::kNetHandleMaxSize;
      },
      "the other host's handle");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: net_fabric_peer PLUGIN.so\n");
    return 2;
  }
  const char* hostEnv = getenv("FABRIC_HOST");
  const char* storeEnv = getenv("BRAID_FILE_STORE");
  if (hostEnv == nullptr || storeEnv == nullptr) {
    fprintf(stderr, "net_fabric_peer: run me with scripts/fabric.sh run --per-host --store file\n");
    return 2;
  }
  host = atoi(hostEnv);
  const int other = host == 1 ? 2 : 1;
  if (getenv("BRAID_NET_IFNAME") == nullptr) setenv("BRAID_NET_IFNAME", "fab0", 1);
  const char* transport = getenv("BRAID_NET_TRANSPORT");

  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) fail(dlerror());
  auto* n = static_cast<const abi::NetV11*>(dlsym(lib, "ncclNetPlugin_v11"));
  if (n == nullptr) fail("no ncclNetPlugin_v11");
  void* ctx = nullptr;
  check(n->init(&ctx, kCommId, nullptr, nullptr, nullptr), "init");
  int ndev = 0;
  check(n->devices(&ndev), "devices");
  if (ndev < 1) fail("no device");
  abi::NetPropertiesV11 props;
  check(n->getProperties(0, &props), "getProperties");

  char mine[abi::kNetHandleMaxSize];
  char theirs[abi::kNetHandleMaxSize];
  void* lc = nullptr;
  check(n->listen(ctx, 0, mine, &lc), "listen");
  publish(storeEnv, mine);
  fetch(storeEnv, other, theirs);
  void* sc = nullptr;
  void* rc = nullptr;
  spin(
      [&] {
        if (sc == nullptr) check(n->connect(ctx, 0, theirs, &sc, nullptr), "connect");
        if (rc == nullptr) check(n->accept(lc, &rc, nullptr), "accept");
        return sc != nullptr && rc != nullptr;
      },
      "connect/accept");
  check(n->closeListen(lc), "closeListen");

  // Both directions at once, kWindow in flight each way.
  std::vector<std::vector<uint8_t>> out(kWindow), in(kWindow);
  std::vector<void*> sreq(kWindow, nullptr), rreq(kWindow, nullptr);
  std::vector<int> sIndex(kWindow, -1), rIndex(kWindow, -1);
  int nextSend = 0, nextRecv = 0, sent = 0, received = 0;
  spin(
      [&] {
        for (int s = 0; s < kWindow; ++s) {
          if (sreq[s] == nullptr && nextSend < kMessages) {
            out[s].resize(sizeOf(nextSend));
            for (size_t b = 0; b < out[s].size(); ++b) out[s][b] = byteOf(host, nextSend, b);
            check(n->isend(sc, out[s].data(), out[s].size(), 0, nullptr, nullptr, &sreq[s]),
                  "isend");
            if (sreq[s] != nullptr) sIndex[s] = nextSend++;
          }
          if (rreq[s] == nullptr && nextRecv < kMessages) {
            in[s].assign(sizeOf(nextRecv) + kSlack, 0);
            void* data[1] = {in[s].data()};
            size_t sizes[1] = {in[s].size()};
            int tags[1] = {0};
            check(n->irecv(rc, 1, data, sizes, tags, nullptr, nullptr, &rreq[s]), "irecv");
            if (rreq[s] != nullptr) rIndex[s] = nextRecv++;
          }
          int done = 0;
          int size = -1;
          if (sreq[s] != nullptr) {
            check(n->test(sreq[s], &done, &size), "test(send)");
            if (done) {
              sreq[s] = nullptr;
              ++sent;
            }
          }
          if (rreq[s] != nullptr) {
            check(n->test(rreq[s], &done, &size), "test(recv)");
            if (done) {
              const int i = rIndex[s];
              if (size != static_cast<int>(sizeOf(i))) {
                fail("message " + std::to_string(i) + " has " + std::to_string(size) + " bytes");
              }
              for (size_t b = 0; b < sizeOf(i); ++b) {
                if (in[s][b] != byteOf(other, i, b)) {
                  fail("message " + std::to_string(i) + " byte " + std::to_string(b));
                }
              }
              rreq[s] = nullptr;
              ++received;
            }
          }
        }
        return sent == kMessages && received == kMessages;
      },
      "the message exchange");

  // Ping-pong: host 1 sends, host 2 echoes.
  std::vector<double> us;
  auto send8 = [&](uint64_t* x) {
    void* s = nullptr;
    spin([&] { return check(n->isend(sc, x, 8, 0, nullptr, nullptr, &s), "isend"), s != nullptr; },
         "ping isend");
    int done = 0;
    spin([&] { return check(n->test(s, &done, nullptr), "test"), done != 0; }, "ping send");
  };
  auto recv8 = [&](uint64_t* x) {
    void* data[1] = {x};
    size_t sizes[1] = {sizeof(*x)};
    int tags[1] = {0};
    void* r = nullptr;
    spin([&] {
      return check(n->irecv(rc, 1, data, sizes, tags, nullptr, nullptr, &r), "irecv"), r != nullptr;
    }, "ping irecv");
    int done = 0;
    spin([&] { return check(n->test(r, &done, nullptr), "test"), done != 0; }, "ping recv");
  };
  for (int i = 0; i < kPings; ++i) {
    const auto t0 = Clock::now();
    uint64_t v = static_cast<uint64_t>(i);
    if (host == 1) {
      send8(&v);
      recv8(&v);
      if (v != static_cast<uint64_t>(i) + 1000) {
        fail("ping " + std::to_string(i) + " came back as " + std::to_string(v));
      }
    } else {
      recv8(&v);
      v += 1000;
      send8(&v);
    }
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  printf("net_fabric_peer host %d: %s over %s (%d Mb/s): %d messages each way verified, 8-byte "
         "round trip median %.1f us\n",
         host, transport ? transport : "tcp", props.name, props.speed, kMessages,
         us[us.size() / 2]);
  check(n->closeSend(sc), "closeSend");
  check(n->closeRecv(rc), "closeRecv");
  check(n->finalize(ctx), "finalize");
  dlclose(lib);
  return 0;
}
