// net_stream: the NCCL net plugin against plain TCP loopback, measured by the same program in the
// same run (issue #4's closing-note benchmark), once per transport under the plugin (--transports,
// default tcp,ucx; each in a fresh child process with BRAID_NET_TRANSPORT set, so that every
// plugin load reads its own configuration; a transport that is not built is reported as such).
//
//   1. stream:   --count messages of --bytes (default 64 MiB) from a child process to this one,
//                --window in flight, through libnccl-net-braid.so (dlopen, v11 table, NCCL's
//                call order) and through one plain blocking TCP socket; receiver-side GB/s.
//   2. pingpong: --iters 8-byte round trips through the plugin (busy-polling test(), as NCCL's
//                proxy does) and through a blocking TCP_NODELAY socket pair; median and mean µs.
//
// usage: net_stream [--plugin PATH] [--bytes N] [--count N] [--window N] [--iters N]
//                   [--transports tcp,ucx] [--rounds N] [--json]
// --rounds repeats the whole comparison (baseline, then every transport) and summarizes the
// median ratios: on a loaded machine one round says little.
// BRAID_NET_IFNAME defaults to lo here. Prints the machine, the build and every parameter.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "plugin/nccl_abi.h"

namespace {

namespace abi = braid::abi;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string plugin = BRAID_NET_PLUGIN_PATH;
  size_t bytes = 64u << 20;
  int count = 24;
  int window = 4;
  int iters = 20000;
  std::string transports = "tcp,ucx";
  int rounds = 1;
  bool json = false;
};

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "net_stream: %s\n", what);
  exit(1);
}

/// Bounded wait: gives up (exit 1) after 60 s.
template <typename F>
void spin(F f, const char* what) {
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (!f()) {
    if (Clock::now() > end) die(what);
  }
}

struct Pipe {
  int fd[2];
  Pipe() {
    if (pipe(fd) != 0) die("pipe");
  }
  void put(const void* p, size_t n) {
    if (write(fd[1], p, n) != static_cast<ssize_t>(n)) die("pipe write");
  }
  void get(void* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(fd[0], static_cast<char*>(p) + got, n - got);
      if (r <= 0) die("pipe read");
      got += static_cast<size_t>(r);
    }
  }
};

struct Plugin {
  void* lib = nullptr;
  const abi::NetV11* n = nullptr;
  void* ctx = nullptr;
  explicit Plugin(const std::string& path) {
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) die(dlerror());
    n = static_cast<const abi::NetV11*>(dlsym(lib, "ncclNetPlugin_v11"));
    if (n == nullptr || n->init(&ctx, 99, nullptr, nullptr, nullptr) != abi::kSuccess) {
      die("plugin init");
    }
    int ndev = 0;
    n->devices(&ndev);
  }
  ~Plugin() {
    n->finalize(ctx);
    dlclose(lib);
  }
  void* listen(Pipe& out) {
    char h[abi::kNetHandleMaxSize];
    void* lc = nullptr;
    if (n->listen(ctx, 0, h, &lc) != abi::kSuccess) die("listen");
    out.put(h, sizeof(h));
    return lc;
  }
  void* accept(void* lc) {
    void* rc = nullptr;
    spin([&] { return n->accept(lc, &rc, nullptr) != abi::kSuccess || rc != nullptr; }, "accept");
    n->closeListen(lc);
    if (rc == nullptr) die("accept failed");
    return rc;
  }
  void* connect(Pipe& in) {
    char h[abi::kNetHandleMaxSize];
    in.get(h, sizeof(h));
    void* sc = nullptr;
    spin([&] { return n->connect(ctx, 0, h, &sc, nullptr) != abi::kSuccess || sc != nullptr; },
         "connect");
    if (sc == nullptr) die("connect failed");
    return sc;
  }
  /// Connects to the peer's handle while accepting the peer on lc, in one loop as NCCL's proxy
  /// does (a ucx connection completes only while its listener's side calls accept).
  void connectAccept(Pipe& in, void* lc, void** sc, void** rc) {
    char h[abi::kNetHandleMaxSize];
    in.get(h, sizeof(h));
    *sc = *rc = nullptr;
    spin(
        [&] {
          if (*sc == nullptr && n->connect(ctx, 0, h, sc, nullptr) != abi::kSuccess) die("connect");
          if (*rc == nullptr && n->accept(lc, rc, nullptr) != abi::kSuccess) die("accept");
          return *sc != nullptr && *rc != nullptr;
        },
        "connect/accept");
    n->closeListen(lc);
  }
  void send(void* sc, void* data, size_t size, void** req) {
    *req = nullptr;
    spin([&] { return n->isend(sc, data, size, 0, nullptr, nullptr, req) != 0 || *req; }, "isend");
    if (*req == nullptr) die("isend failed");
  }
  void recv(void* rc, void* data, size_t size, void** req) {
    int tag = 0;
    *req = nullptr;
    spin([&] { return n->irecv(rc, 1, &data, &size, &tag, nullptr, nullptr, req) != 0 || *req; },
         "irecv");
    if (*req == nullptr) die("irecv failed");
  }
  void wait(void* req) {
    int done = 0;
    spin(
        [&] {
          if (n->test(req, &done, nullptr) != abi::kSuccess) die("test failed");
          return done != 0;
        },
        "test");
  }
};

// ---- plain TCP baseline --------------------------------------------------------------------

int tcpListen(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 1) != 0) {
    die("tcp listen");
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int tcpConnect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) die("tcp connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

void writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) die("tcp write");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void readAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) die("tcp read");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

pid_t child(const std::function<void()>& body) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(300);
    body();
    _exit(0);
  }
  return pid;
}

void reap(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) die("child failed");
}

double pluginStream(const Options& o) {
  Pipe h;
  pid_t pid = child([&] {
    Plugin p(o.plugin);
    void* sc = p.connect(h);
    std::vector<char> buf(o.bytes, 1);
    std::vector<void*> reqs(static_cast<size_t>(o.window), nullptr);
    for (int i = 0; i < o.count; ++i) {
      void*& r = reqs[static_cast<size_t>(i % o.window)];
      if (r != nullptr) p.wait(r);
      p.send(sc, buf.data(), buf.size(), &r);
    }
    for (void* r : reqs) {
      if (r != nullptr) p.wait(r);
    }
    p.n->closeSend(sc);
  });
  Plugin p(o.plugin);
  void* rc = p.accept(p.listen(h));
  std::vector<std::vector<char>> bufs(static_cast<size_t>(o.window), std::vector<char>(o.bytes));
  std::vector<void*> reqs(static_cast<size_t>(o.window), nullptr);
  Clock::time_point start;
  for (int i = 0; i < o.count + o.window; ++i) {
    const size_t slot = static_cast<size_t>(i % o.window);
    if (reqs[slot] != nullptr) {
      p.wait(reqs[slot]);
      if (i == o.window) start = Clock::now();  // first message in: skip connection warm-up
    }
    if (i < o.count) p.recv(rc, bufs[slot].data(), o.bytes, &reqs[slot]);
  }
  const double s = seconds(start, Clock::now());
  p.n->closeRecv(rc);
  reap(pid);
  return static_cast<double>(o.bytes) * (o.count - 1) / s / 1e9;
}

double tcpStream(const Options& o) {
  int port = 0;
  int lfd = tcpListen(&port);
  pid_t pid = child([&] {
    int fd = tcpConnect(port);
    std::vector<char> buf(o.bytes, 1);
    for (int i = 0; i < o.count; ++i) writeAll(fd, buf.data(), buf.size());
    close(fd);
  });
  int fd = accept(lfd, nullptr, nullptr);
  std::vector<char> buf(o.bytes);
  readAll(fd, buf.data(), buf.size());
  const auto start = Clock::now();
  for (int i = 1; i < o.count; ++i) readAll(fd, buf.data(), buf.size());
  const double s = seconds(start, Clock::now());
  close(fd);
  close(lfd);
  reap(pid);
  return static_cast<double>(o.bytes) * (o.count - 1) / s / 1e9;
}

struct Latency {
  double medianUs, meanUs;
};

Latency summarize(std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  return {us[us.size() / 2], sum / static_cast<double>(us.size())};
}

Latency pluginPingPong(const Options& o) {
  Pipe toChild, toParent;
  pid_t pid = child([&] {
    Plugin p(o.plugin);
    void* lc = p.listen(toParent);
    void* sc = nullptr;
    void* rc = nullptr;
    p.connectAccept(toChild, lc, &sc, &rc);
    uint64_t v = 0;
    for (int i = 0; i < o.iters + 100; ++i) {
      void* r = nullptr;
      p.recv(rc, &v, sizeof(v), &r);
      p.wait(r);
      p.send(sc, &v, sizeof(v), &r);
      p.wait(r);
    }
    p.n->closeSend(sc);
    p.n->closeRecv(rc);
  });
  Plugin p(o.plugin);
  void* lc = p.listen(toChild);
  void* sc = nullptr;
  void* rc = nullptr;
  p.connectAccept(toParent, lc, &sc, &rc);
  std::vector<double> us;
  uint64_t v = 42, back = 0;
  for (int i = 0; i < o.iters + 100; ++i) {
    const auto t0 = Clock::now();
    void* rr = nullptr;
    void* sr = nullptr;
    p.recv(rc, &back, sizeof(back), &rr);
    p.send(sc, &v, sizeof(v), &sr);
    p.wait(sr);
    p.wait(rr);
    if (i >= 100) us.push_back(seconds(t0, Clock::now()) * 1e6);
  }
  p.n->closeSend(sc);
  p.n->closeRecv(rc);
  reap(pid);
  return summarize(us);
}

Latency tcpPingPong(const Options& o) {
  int port = 0;
  int lfd = tcpListen(&port);
  pid_t pid = child([&] {
    int fd = tcpConnect(port);
    char b[8];
    for (int i = 0; i < o.iters + 100; ++i) {
      readAll(fd, b, 8);
      writeAll(fd, b, 8);
    }
    close(fd);
  });
  int fd = accept(lfd, nullptr, nullptr);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<double> us;
  char b[8] = {};
  for (int i = 0; i < o.iters + 100; ++i) {
    const auto t0 = Clock::now();
    writeAll(fd, b, 8);
    readAll(fd, b, 8);
    if (i >= 100) us.push_back(seconds(t0, Clock::now()) * 1e6);
  }
  close(fd);
  close(lfd);
  reap(pid);
  return summarize(us);
}

struct PluginResult {
  double gbps = 0;
  Latency lat{0, 0};
};

/// Both plugin measurements over `transport`, in a fresh child process (the plugin reads its
/// configuration once per load, and UCX must not be initialized in a process that forks later).
bool pluginRun(const Options& o, const std::string& transport, PluginResult* out) {
  Pipe result;
  pid_t pid = child([&] {
    setenv("BRAID_NET_TRANSPORT", transport.c_str(), 1);
    PluginResult r;
    r.gbps = pluginStream(o);
    r.lat = pluginPingPong(o);
    result.put(&r, sizeof(r));
  });
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return false;
  result.get(out, sizeof(*out));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) die("missing value");
      return std::string(argv[++i]);
    };
    if (a == "--plugin")
      o.plugin = next();
    else if (a == "--bytes")
      o.bytes = std::stoull(next());
    else if (a == "--count")
      o.count = std::stoi(next());
    else if (a == "--window")
      o.window = std::stoi(next());
    else if (a == "--iters")
      o.iters = std::stoi(next());
    else if (a == "--transports")
      o.transports = next();
    else if (a == "--rounds")
      o.rounds = std::stoi(next());
    else if (a == "--json")
      o.json = true;
    else {
      printf(
          "usage: net_stream [--plugin PATH] [--bytes N] [--count N] [--window N] "
          "[--iters N] [--transports tcp,ucx] [--rounds N] [--json]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (o.count < 2 || o.window < 1 || o.iters < 1 || o.rounds < 1) {
    die("need --count >= 2, --window, --iters, --rounds >= 1");
  }
  setenv("BRAID_NET_IFNAME", getenv("BRAID_NET_IFNAME") ? getenv("BRAID_NET_IFNAME") : "lo", 1);
  signal(SIGPIPE, SIG_IGN);
  utsname u{};
  uname(&u);
  const char* streams = getenv("BRAID_TCP_STREAMS");
  const char* stripe = getenv("BRAID_TCP_STRIPE_MIN");
  printf("# machine %s %s %s, %u cpus; build %s %s\n", u.nodename, u.sysname, u.release,
         std::thread::hardware_concurrency(), __VERSION__,
#ifdef NDEBUG
         "NDEBUG"
#else
         "asserts"
#endif
  );
  const char* ucxTls = getenv("UCX_TLS");
  const char* braidTls = getenv("BRAID_UCX_TLS");
  printf("# plugin %s; BRAID_NET_IFNAME=%s BRAID_TCP_STREAMS=%s BRAID_TCP_STRIPE_MIN=%s\n",
         o.plugin.c_str(), getenv("BRAID_NET_IFNAME"), streams ? streams : "(default 4)",
         stripe ? stripe : "(default 256k)");
  printf("# transports %s; UCX_TLS=%s BRAID_UCX_TLS=%s\n", o.transports.c_str(),
         ucxTls ? ucxTls : "(unset)", braidTls ? braidTls : "(default tcp,sm,self)");
  printf("# stream: %d x %zu B, window %d; pingpong: %d x 8 B round trips; %d round(s)\n",
         o.count, o.bytes, o.window, o.iters, o.rounds);

  // Rounds alternate the baseline and every transport, so that a machine whose load drifts
  // (shared CI hosts) biases no one; the summary gives the median of each round's ratios.
  std::vector<std::string> transports;
  for (size_t at = 0; at <= o.transports.size();) {
    size_t comma = o.transports.find(',', at);
    if (comma == std::string::npos) comma = o.transports.size();
    if (comma > at) transports.push_back(o.transports.substr(at, comma - at));
    at = comma + 1;
  }
  std::vector<std::vector<double>> streamRatio(transports.size()), rttRatio(transports.size());
  for (int round = 1; round <= o.rounds; ++round) {
    const double tcp = tcpStream(o);
    const Latency tcpLat = tcpPingPong(o);
    printf("round %d plain-tcp   stream %7.2f GB/s   pingpong median %6.2f us mean %8.2f us\n",
           round, tcp, tcpLat.medianUs, tcpLat.meanUs);
    if (o.json) {
      printf("{\"bench\":\"net_stream\",\"round\":%d,\"transport\":\"plain-tcp\",\"bytes\":%zu,"
             "\"count\":%d,\"window\":%d,\"gbps\":%.3f,\"rtt_us\":%.3f}\n",
             round, o.bytes, o.count, o.window, tcp, tcpLat.medianUs);
    }
    fflush(stdout);
    for (size_t t = 0; t < transports.size(); ++t) {
      const std::string& transport = transports[t];
      PluginResult r;
      if (!pluginRun(o, transport, &r)) {
        printf("round %d plugin/%-4s not available (not built, or it failed; see above)\n", round,
               transport.c_str());
        continue;
      }
      streamRatio[t].push_back(r.gbps / tcp);
      rttRatio[t].push_back(r.lat.medianUs / tcpLat.medianUs);
      printf("round %d plugin/%-4s stream %7.2f GB/s (%.2f of plain tcp)   pingpong median %6.2f "
             "us mean %8.2f us (%.2fx plain tcp)\n",
             round, transport.c_str(), r.gbps, r.gbps / tcp, r.lat.medianUs, r.lat.meanUs,
             r.lat.medianUs / tcpLat.medianUs);
      if (o.json) {
        printf("{\"bench\":\"net_stream\",\"round\":%d,\"transport\":\"%s\",\"bytes\":%zu,"
               "\"count\":%d,\"window\":%d,\"gbps\":%.3f,\"rtt_us\":%.3f,"
               "\"stream_vs_tcp\":%.3f,\"rtt_vs_tcp\":%.3f}\n",
               round, transport.c_str(), o.bytes, o.count, o.window, r.gbps, r.lat.medianUs,
               r.gbps / tcp, r.lat.medianUs / tcpLat.medianUs);
      }
      fflush(stdout);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  for (size_t t = 0; t < transports.size(); ++t) {
    if (streamRatio[t].empty()) continue;
    printf("summary plugin/%-4s over %zu round(s): stream %.2f of plain tcp (target >= 0.90), "
           "8-byte round trip %.2fx plain tcp (target <= 1.20)\n",
           transports[t].c_str(), streamRatio[t].size(), median(streamRatio[t]),
           median(rttRatio[t]));
  }
  return 0;
}
