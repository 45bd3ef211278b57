#include "topology/topology_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/params.h"
#include "topology/detect.h"

namespace braid::topo {
namespace {

// A topology that uses every record and key, with values that need quoting.
Topology sample() {
  Topology t;
  Host a;
  a.name = "node-a";
  a.id = "node-a/0b1c/netns:4026531840";
  a.sockets = {{0, "AMD EPYC 9654 \"Genoa\" 96-Core"}, {1, ""}};
  a.numaNodes = {{0, {0, 1, 2, 3, 8}, int64_t{64} << 30}, {1, {4, 5, 6, 7}, -1}};
  a.cores = {{0, 0, 0, {0, 8}}, {1, 0, 0, {1}}, {0, 1, 1, {4, 5}}, {7, 1, -1, {}}};
  a.pci = {{"0000:3a:00.0", "", 0x060400, 0x1000, 0xc030, 0},
           {"0000:3b:00.0", "0000:3a:00.0", 0x020000, 0x15b3, 0x1021, 0},
           {"0000:3c:00.0", "0000:3a:00.0", 0x030200, 0x10de, 0x2330, -1}};
  Nic eth;
  eth.name = "eth0";
  eth.kind = NicKind::kEthernet;
  eth.speedMbps = 200000;
  eth.pciPath = "0000:3b:00.0";
  eth.addresses = {"198.18.0.1/24", "fd00::1/64"};
  eth.mac = "02:fc:00:00:00:01";
  eth.mtu = 9000;
  eth.up = true;
  eth.numa = 0;
  eth.driver = "mlx5_core";
  Nic lo;
  lo.name = "lo";
  lo.kind = NicKind::kLoopback;
  lo.addresses = {"127.0.0.1/8"};
  Nic ib;
  ib.name = "mlx5_0:1";
  ib.kind = NicKind::kInfiniband;
  ib.speedMbps = 400000;
  a.nics = {eth, lo, ib};
  a.gpus = {{0, "NVIDIA H100 80GB HBM3", "0000:3c:00.0", "GPU-1234", 0}};
  a.links = {{"gpu:0", "nic:eth0", "pci", 256, 0.7}, {"nic:eth0", "network", "net", 200, -1}};
  Host b;
  b.name = "node b";  // a space: quoted
  t.hosts = {a, b};
  t.links = {{"host:node-a", "host:node b", "net", 0.1234567890123, 12.5}};
  return t;
}

void expectSameLink(const Link& x, const Link& y) {
  EXPECT_EQ(x.from, y.from);
  EXPECT_EQ(x.to, y.to);
  EXPECT_EQ(x.kind, y.kind);
  EXPECT_EQ(x.bandwidthGbps, y.bandwidthGbps);
  EXPECT_EQ(x.latencyUs, y.latencyUs);
}

void expectSame(const Topology& x, const Topology& y) {
  ASSERT_EQ(x.hosts.size(), y.hosts.size());
  for (size_t h = 0; h < x.hosts.size(); ++h) {
    const Host& a = x.hosts[h];
    const Host& b = y.hosts[h];
    SCOPED_TRACE("host " + a.name);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.id, b.id);
    ASSERT_EQ(a.sockets.size(), b.sockets.size());
    for (size_t i = 0; i < a.sockets.size(); ++i) {
      EXPECT_EQ(a.sockets[i].id, b.sockets[i].id);
      EXPECT_EQ(a.sockets[i].model, b.sockets[i].model);
    }
    ASSERT_EQ(a.numaNodes.size(), b.numaNodes.size());
    for (size_t i = 0; i < a.numaNodes.size(); ++i) {
      EXPECT_EQ(a.numaNodes[i].id, b.numaNodes[i].id);
      EXPECT_EQ(a.numaNodes[i].cpus, b.numaNodes[i].cpus);
      EXPECT_EQ(a.numaNodes[i].memoryBytes, b.numaNodes[i].memoryBytes);
    }
    ASSERT_EQ(a.cores.size(), b.cores.size());
    for (size_t i = 0; i < a.cores.size(); ++i) {
      EXPECT_EQ(a.cores[i].id, b.cores[i].id);
      EXPECT_EQ(a.cores[i].socket, b.cores[i].socket);
      EXPECT_EQ(a.cores[i].numa, b.cores[i].numa);
      EXPECT_EQ(a.cores[i].cpus, b.cores[i].cpus);
    }
    ASSERT_EQ(a.pci.size(), b.pci.size());
    for (size_t i = 0; i < a.pci.size(); ++i) {
      EXPECT_EQ(a.pci[i].address, b.pci[i].address);
      EXPECT_EQ(a.pci[i].parent, b.pci[i].parent);
      EXPECT_EQ(a.pci[i].classCode, b.pci[i].classCode);
      EXPECT_EQ(a.pci[i].vendor, b.pci[i].vendor);
      EXPECT_EQ(a.pci[i].device, b.pci[i].device);
      EXPECT_EQ(a.pci[i].numa, b.pci[i].numa);
    }
    ASSERT_EQ(a.nics.size(), b.nics.size());
    for (size_t i = 0; i < a.nics.size(); ++i) {
      SCOPED_TRACE("nic " + a.nics[i].name);
      EXPECT_EQ(a.nics[i].name, b.nics[i].name);
      EXPECT_EQ(a.nics[i].kind, b.nics[i].kind);
      EXPECT_EQ(a.nics[i].speedMbps, b.nics[i].speedMbps);
      EXPECT_EQ(a.nics[i].pciPath, b.nics[i].pciPath);
      EXPECT_EQ(a.nics[i].addresses, b.nics[i].addresses);
      EXPECT_EQ(a.nics[i].mac, b.nics[i].mac);
      EXPECT_EQ(a.nics[i].mtu, b.nics[i].mtu);
      EXPECT_EQ(a.nics[i].up, b.nics[i].up);
      EXPECT_EQ(a.nics[i].numa, b.nics[i].numa);
      EXPECT_EQ(a.nics[i].driver, b.nics[i].driver);
    }
    ASSERT_EQ(a.gpus.size(), b.gpus.size());
    for (size_t i = 0; i < a.gpus.size(); ++i) {
      EXPECT_EQ(a.gpus[i].index, b.gpus[i].index);
      EXPECT_EQ(a.gpus[i].name, b.gpus[i].name);
      EXPECT_EQ(a.gpus[i].pciPath, b.gpus[i].pciPath);
      EXPECT_EQ(a.gpus[i].uuid, b.gpus[i].uuid);
      EXPECT_EQ(a.gpus[i].numa, b.gpus[i].numa);
    }
    ASSERT_EQ(a.links.size(), b.links.size());
    for (size_t i = 0; i < a.links.size(); ++i) expectSameLink(a.links[i], b.links[i]);
  }
  ASSERT_EQ(x.links.size(), y.links.size());
  for (size_t i = 0; i < x.links.size(); ++i) expectSameLink(x.links[i], y.links[i]);
}

std::string tempPath(const char* name) {
  const char* dir = getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/braid-topo-test-" + std::to_string(getpid()) +
         "-" + name;
}

TEST(TopologyFile, FormatThenParseGivesTheSameTopology) {
  const Topology t = sample();
  const std::string text = formatTopology(t);
  Result<Topology> back = parseTopology(text, "sample.topo");
  ASSERT_TRUE(back.isOk()) << back.status().toString() << "\n" << text;
  expectSame(t, back.value());
  EXPECT_EQ(back->source, "file:sample.topo");
  EXPECT_EQ(formatTopology(back.value()), text) << "formatting is deterministic";
}

TEST(TopologyFile, WriteThenReadAFile) {
  const std::string path = tempPath("rt.topo");
  const Topology t = sample();
  ASSERT_TRUE(writeTopologyFile(t, path).isOk());
  Result<Topology> back = readTopologyFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  expectSame(t, back.value());
}

TEST(TopologyFile, TheDetectedTopologyRoundTrips) {
  Result<Topology> t = detectTopology("auto");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  Result<Topology> back = parseTopology(formatTopology(t.value()), "detected");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  expectSame(t.value(), back.value());
}

TEST(TopologyFile, CommentsBlankLinesAndHandWrittenFiles) {
  const char* text =
      "# a cluster node, written by hand\n"
      "\n"
      "braid-topology 1   # version\n"
      "host name=n1\n"
      "  nic name=ib0 kind=infiniband speed_mbps=0x30d40 up=yes  # 200 Gb/s\n"
      "  numa id=0 cpus=0-3,2\n"
      "fabric-link from=host:n1 to=host:n2 gbps=100 latency_us=2\n";
  Result<Topology> t = parseTopology(text, "hand.topo");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  ASSERT_EQ(t->hosts.size(), 1u);
  ASSERT_EQ(t->hosts[0].nics.size(), 1u);
  EXPECT_EQ(t->hosts[0].nics[0].speedMbps, 200000);
  EXPECT_TRUE(t->hosts[0].nics[0].up);
  EXPECT_EQ(t->hosts[0].numaNodes[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(t->links.size(), 1u);
  EXPECT_EQ(t->links[0].bandwidthGbps, 100);
}

struct Malformed {
  const char* text;
  int line;
  const char* says;
};

TEST(TopologyFile, MalformedFilesNameTheFileAndLine) {
  const Malformed cases[] = {
      {"", 1, "empty topology file"},
      {"# only a comment\n", 1, "empty topology file"},
      {"host name=a\n", 1, "expected the header"},
      {"braid-topology 2\n", 1, "unsupported topology file version '2'"},
      {"braid-topology 1\nnic name=eth0\n", 2, "before the first 'host'"},
      {"braid-topology 1\nhost name=a\nbogus x=1\n", 3, "unknown record 'bogus'"},
      {"braid-topology 1\nhost id=a\n", 2, "missing required key 'name'"},
      {"braid-topology 1\nhost name=\"\"\n", 2, "'name' is empty"},
      {"braid-topology 1\nhost name=a\n\n# c\nnic name=e speed=100\n", 5, "unknown key 'speed'"},
      {"braid-topology 1\nhost name=a\nnic name=e speed_mbps=fast\n", 3,
       "'speed_mbps=fast' is not an integer"},
      {"braid-topology 1\nhost name=a\nnic name=e kind=wifi\n", 3, "unknown kind 'wifi'"},
      {"braid-topology 1\nhost name=a\nnic name=e mtu=1 mtu=2\n", 3, "'mtu' appears twice"},
      {"braid-topology 1\nhost name=a\nnic name=e up=maybe\n", 3, "'up=maybe' is not 0 or 1"},
      {"braid-topology 1\nhost name=a\nnic name=e\nnic name=e\n", 4, "appears twice in host"},
      {"braid-topology 1\nhost name=a\nnuma id=0 cpus=3-1\n", 3, "not a CPU list"},
      {"braid-topology 1\nhost name=a\nsocket id=0 model=\"open\n", 3, "unterminated quoted"},
      {"braid-topology 1\nhost name=a\nsocket id\n", 3, "not of the form key=value"},
      {"braid-topology 1\nhost name=a\nsocket id=x\n", 3, "'id=x' is not an integer"},
      {"braid-topology 1\nhost name=a\npci addr=0000:00:01.0 class=0x1000000\n", 3,
       "not an integer in range"},
      {"braid-topology 1\nhost name=a\nlink from=a\n", 3, "missing required key 'to'"},
      {"braid-topology 1\nhost name=a\nlink from=a to=b gbps=-3\n", 3, "not a non-negative"},
      {"braid-topology 1\nhost name=a\nhost name=a\n", 3, "host 'a' appears twice"},
  };
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.text);
    Result<Topology> t = parseTopology(c.text, "bad.topo");
    ASSERT_FALSE(t.isOk());
    EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
    const std::string prefix = "bad.topo:" + std::to_string(c.line) + ": ";
    EXPECT_EQ(t.status().message().rfind(prefix, 0), 0u) << t.status().message();
    EXPECT_NE(t.status().message().find(c.says), std::string::npos) << t.status().message();
  }
}

TEST(TopologyFile, MalformedFileOnDiskNamesItsPath) {
  const std::string path = tempPath("bad.topo");
  {
    std::ofstream out(path);
    out << "braid-topology 1\nhost name=a\nnic name=eth0 speed_mbps=1O0\n";
  }
  Result<Topology> t = readTopologyFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(t.isOk());
  EXPECT_NE(t.status().message().find(path + ":3: nic: 'speed_mbps=1O0'"), std::string::npos)
      << t.status().message();
}

TEST(TopologyFile, MissingFileIsASystemErrorNamingThePath) {
  Result<Topology> t = readTopologyFile("/nonexistent/braid.topo");
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().code(), Code::kSystem);
  EXPECT_NE(t.status().message().find("/nonexistent/braid.topo"), std::string::npos);
}

TEST(TopologyFile, BraidTopoFileInjectsATopology) {
  const std::string path = tempPath("inject.topo");
  ASSERT_TRUE(writeTopologyFile(sample(), path).isOk());
  setParamForTesting("BRAID_TOPO_FILE", path);
  Result<Topology> t = detectTopology("auto");
  Result<Topology> f = detectTopology("file");
  // A malformed injected file is an error (no silent fallback to detection).
  {
    std::ofstream out(path);
    out << "braid-topology 1\nhost\n";
  }
  Result<Topology> bad = detectTopology("auto");
  setParamForTesting("BRAID_TOPO_FILE", "");
  std::remove(path.c_str());
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  ASSERT_TRUE(f.isOk()) << f.status().toString();
  EXPECT_EQ(t->source, "file:" + path);
  expectSame(sample(), t.value());
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("BRAID_TOPO_FILE: " + path + ":2:"), std::string::npos)
      << bad.status().message();
}

TEST(TopologyFile, FileSourceWithoutTheParameterIsAnError) {
  setParamForTesting("BRAID_TOPO_FILE", "");
  unsetenv("BRAID_TOPO_FILE");
  Result<Topology> t = detectTopology("file");
  ASSERT_FALSE(t.isOk());
  EXPECT_NE(t.status().message().find("BRAID_TOPO_FILE"), std::string::npos);
  EXPECT_FALSE(detectTopology("magic").isOk());
}

}  // namespace
}  // namespace braid::topo
