#include "topology/sysfs.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "topology/hwloc.h"
#include "topology/model.h"

namespace braid::topo {
namespace {

// ---------------------------------------------------------------------------------------------
// A fabricated /sys and /proc: two sockets, two NUMA nodes, a NIC and a GPU behind one PCI
// switch, an RDMA port, a loopback and a virtual interface.

class FakeTree {
 public:
  FakeTree() {
    char tmpl[] = "/tmp/braid-fake-sysfs-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~FakeTree() {
    const std::string cmd = "rm -rf '" + root_ + "'";
    if (system(cmd.c_str()) != 0) fprintf(stderr, "could not remove %s\n", root_.c_str());
  }
  std::string sys() const { return root_ + "/sys"; }
  std::string proc() const { return root_ + "/proc"; }

  void file(const std::string& rel, const std::string& text) {
    mkdirs(dirOf(root_ + "/" + rel));
    std::ofstream(root_ + "/" + rel) << text;
  }
  void link(const std::string& rel, const std::string& target) {
    mkdirs(dirOf(root_ + "/" + rel));
    ASSERT_EQ(symlink(target.c_str(), (root_ + "/" + rel).c_str()), 0) << rel;
  }
  void dir(const std::string& rel) { mkdirs(root_ + "/" + rel); }

 private:
  static std::string dirOf(const std::string& p) { return p.substr(0, p.rfind('/')); }
  static void mkdirs(const std::string& p) {
    for (size_t i = 1; i <= p.size(); ++i) {
      if (i == p.size() || p[i] == '/') mkdir(p.substr(0, i).c_str(), 0755);
    }
  }
  std::string root_;
};

void buildFake(FakeTree& t) {
  const std::string sw = "sys/devices/pci0000:00/0000:00:01.0";     // root port
  const std::string nicDev = sw + "/0000:01:00.0";                  // NIC behind it
  const std::string gpuDev = sw + "/0000:01:00.1";                  // GPU behind it
  const std::string ibDev = "sys/devices/pci0000:80/0000:80:02.0";  // other root complex
  t.file(sw + "/class", "0x060400\n");
  t.file(sw + "/vendor", "0x1022\n");
  t.file(sw + "/device", "0x1483\n");
  t.file(sw + "/numa_node", "0\n");
  t.file(nicDev + "/class", "0x020000\n");
  t.file(nicDev + "/vendor", "0x8086\n");
  t.file(nicDev + "/device", "0x1592\n");
  t.file(nicDev + "/numa_node", "0\n");
  t.dir("sys/bus/pci/drivers/ice");
  t.link(nicDev + "/driver", "../../../bus/pci/drivers/ice");
  t.file(gpuDev + "/class", "0x030200\n");
  t.file(gpuDev + "/vendor", "0x10de\n");
  t.file(gpuDev + "/device", "0x2330\n");
  t.file(gpuDev + "/numa_node", "0\n");
  t.file(ibDev + "/class", "0x020700\n");
  t.file(ibDev + "/vendor", "0x15b3\n");
  t.file(ibDev + "/device", "0x101b\n");
  t.file(ibDev + "/numa_node", "1\n");
  for (const char* d : {"0000:00:01.0", "0000:01:00.0", "0000:01:00.1", "0000:80:02.0"}) {
    const std::string target = std::string(d) == "0000:80:02.0"
                                   ? "../../../devices/pci0000:80/0000:80:02.0"
                               : std::string(d) == "0000:00:01.0"
                                   ? "../../../devices/pci0000:00/0000:00:01.0"
                                   : std::string("../../../devices/pci0000:00/0000:00:01.0/") + d;
    t.link(std::string("sys/bus/pci/devices/") + d, target);
  }
  // eth0 on the NIC.
  const std::string eth = nicDev + "/net/eth0";
  t.file(eth + "/type", "1\n");
  t.file(eth + "/flags", "0x1003\n");
  t.file(eth + "/operstate", "up\n");
  t.file(eth + "/speed", "100000\n");
  t.file(eth + "/mtu", "9000\n");
  t.file(eth + "/address", "b4:96:91:00:00:01\n");
  t.link(eth + "/device", "../../../0000:01:00.0");
  t.link("sys/class/net/eth0", "../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/eth0");
  // lo, virtual.
  const std::string lo = "sys/devices/virtual/net/lo";
  t.file(lo + "/type", "772\n");
  t.file(lo + "/flags", "0x9\n");
  t.file(lo + "/operstate", "unknown\n");
  t.file(lo + "/mtu", "65536\n");
  t.file(lo + "/speed", "");  // reading it fails on a real system
  t.link("sys/class/net/lo", "../../devices/virtual/net/lo");
  // A down virtual interface.
  const std::string dummy = "sys/devices/virtual/net/dummy0";
  t.file(dummy + "/type", "1\n");
  t.file(dummy + "/flags", "0x1002\n");
  t.file(dummy + "/operstate", "down\n");
  t.link("sys/class/net/dummy0", "../../devices/virtual/net/dummy0");
  t.file("sys/class/net/bonding_masters", "\n");  // a plain file, not an interface
  // mlx5_0 port 1.
  t.file(ibDev + "/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)\n");
  t.file(ibDev + "/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  t.file(ibDev + "/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
  t.link(ibDev + "/infiniband/mlx5_0/device", "../../../0000:80:02.0");
  t.link("sys/class/infiniband/mlx5_0", "../../devices/pci0000:80/0000:80:02.0/infiniband/mlx5_0");
  // NUMA.
  t.file("sys/devices/system/node/node0/cpulist", "0-1,4-5\n");
  t.file("sys/devices/system/node/node0/meminfo", "Node 0 MemTotal:       1048576 kB\n");
  t.file("sys/devices/system/node/node1/cpulist", "2-3,6-7\n");
  t.file("sys/devices/system/node/node1/meminfo", "Node 1 MemTotal:       2097152 kB\n");
  t.file("sys/devices/system/node/online", "0-1\n");
  // 2 sockets x 2 cores x 2 threads.
  std::string cpuinfo;
  const int socketOf[] = {0, 0, 1, 1, 0, 0, 1, 1};
  const int coreOf[] = {0, 1, 0, 1, 0, 1, 0, 1};
  for (int c = 0; c < 8; ++c) {
    cpuinfo += "processor\t: " + std::to_string(c) + "\nvendor_id\t: X\nmodel name\t: Fake CPU " +
               std::to_string(socketOf[c]) + "\nphysical id\t: " + std::to_string(socketOf[c]) +
               "\ncore id\t\t: " + std::to_string(coreOf[c]) + "\n\n";
  }
  t.file("proc/cpuinfo", cpuinfo);
  t.file("proc/sys/kernel/hostname", "fakehost\n");
  t.file("proc/driver/nvidia/gpus/0000:01:00.1/information",
         "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-abcd\n");
}

TEST(SysfsDetector, ReadsAFabricatedTree) {
  FakeTree tree;
  buildFake(tree);
  SysfsOptions o;
  o.sysRoot = tree.sys();
  o.procRoot = tree.proc();
  o.live = false;
  Result<Host> r = detectSysfs(o);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const Host& h = r.value();
  EXPECT_EQ(h.name, "fakehost");
  ASSERT_EQ(h.sockets.size(), 2u);
  EXPECT_EQ(h.sockets[1].model, "Fake CPU 1");
  ASSERT_EQ(h.cores.size(), 4u);
  EXPECT_EQ(h.numCpus(), 8);
  for (const Core& c : h.cores) {
    EXPECT_EQ(c.cpus.size(), 2u);
    EXPECT_EQ(c.numa, c.socket) << "node i holds socket i's CPUs here";
  }
  ASSERT_EQ(h.numaNodes.size(), 2u);
  EXPECT_EQ(h.numaNodes[1].cpus, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(h.numaNodes[1].memoryBytes, int64_t{2} << 30);

  ASSERT_EQ(h.pci.size(), 4u);
  const PciDevice* nicPci = h.findPci("0000:01:00.0");
  ASSERT_NE(nicPci, nullptr);
  EXPECT_EQ(nicPci->parent, "0000:00:01.0");
  EXPECT_EQ(nicPci->classCode, 0x020000u);
  EXPECT_EQ(nicPci->vendor, 0x8086);

  const Nic* eth = h.findNic("eth0");
  ASSERT_NE(eth, nullptr);
  EXPECT_EQ(eth->kind, NicKind::kEthernet);
  EXPECT_EQ(eth->speedMbps, 100000);
  EXPECT_EQ(eth->pciPath, "0000:01:00.0");
  EXPECT_EQ(eth->driver, "ice");
  EXPECT_EQ(eth->mtu, 9000);
  EXPECT_EQ(eth->numa, 0);
  EXPECT_TRUE(eth->up);
  const Nic* lo = h.findNic("lo");
  ASSERT_NE(lo, nullptr);
  EXPECT_EQ(lo->kind, NicKind::kLoopback);
  EXPECT_TRUE(lo->up);
  EXPECT_EQ(lo->speedMbps, -1);
  const Nic* dummy = h.findNic("dummy0");
  ASSERT_NE(dummy, nullptr);
  EXPECT_EQ(dummy->kind, NicKind::kVirtual);
  EXPECT_FALSE(dummy->up);
  EXPECT_EQ(h.findNic("bonding_masters"), nullptr);
  const Nic* ib = h.findNic("mlx5_0:1");
  ASSERT_NE(ib, nullptr);
  EXPECT_EQ(ib->kind, NicKind::kInfiniband);
  EXPECT_EQ(ib->speedMbps, 200000);
  EXPECT_EQ(ib->pciPath, "0000:80:02.0");
  EXPECT_EQ(ib->numa, 1);
  EXPECT_TRUE(ib->up);

  ASSERT_EQ(h.gpus.size(), 1u);
  EXPECT_EQ(h.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h.gpus[0].uuid, "GPU-abcd");
  EXPECT_EQ(h.gpus[0].pciPath, "0000:01:00.1");

  // GPU and NIC share a switch (PIX); the RDMA NIC is on the other root complex (SYS).
  EXPECT_EQ(pciDistance(h, "0000:01:00.1", "0000:01:00.0"), 1);
  EXPECT_EQ(pciDistance(h, "0000:01:00.1", "0000:80:02.0"), 4);
  EXPECT_EQ(pciDistance(h, "0000:01:00.1", "0000:01:00.1"), 0);
  EXPECT_EQ(pciDistance(h, "0000:01:00.1", "0000:ff:00.0"), -1);
  // Links: one per NIC with a known speed.
  EXPECT_EQ(h.links.size(), 2u);
}

TEST(SysfsDetector, LastLevelCacheIsTheLargestCacheOfCpu0) {
  FakeTree t;
  const std::string cache = "sys/devices/system/cpu/cpu0/cache/index";
  t.file(cache + "0/size", "32K\n");
  t.file(cache + "1/size", "32K\n");
  t.file(cache + "2/size", "512K\n");
  t.file(cache + "3/size", "32768K\n");
  EXPECT_EQ(lastLevelCacheBytes(t.sys()), size_t{32} << 20);
  t.file(cache + "4/size", "64M\n");
  EXPECT_EQ(lastLevelCacheBytes(t.sys()), size_t{64} << 20);
  EXPECT_EQ(lastLevelCacheBytes("/nonexistent-sys"), 0u);
}

TEST(SysfsDetector, AMissingRootIsAnError) {
  SysfsOptions o;
  o.sysRoot = "/nonexistent-sys";
  o.live = false;
  Result<Host> r = detectSysfs(o);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("/nonexistent-sys/class/net"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// This machine.

std::vector<std::string> sysClassNet() {
  std::vector<std::string> names;
  FILE* p = popen("ls /sys/class/net", "r");
  if (p == nullptr) return names;
  char buf[256];
  while (fgets(buf, sizeof(buf), p)) {
    std::string n = buf;
    while (!n.empty() && n.back() == '\n') n.pop_back();
    struct stat st;
    if (stat(("/sys/class/net/" + n + "/type").c_str(), &st) == 0) names.push_back(n);
  }
  pclose(p);
  return names;
}

// Checks the live detector against /sys/class/net: every interface found, loopback typed and
// addressed, every veth typed as such (its driver comes from the ethtool ioctl). Returns the
// number of veths.
int checkLiveHost() {
  Result<Host> r = detectSysfs();
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  if (!r.isOk()) return -1;
  const Host& h = r.value();
  EXPECT_GE(h.numCpus(), 1);
  EXPECT_FALSE(h.sockets.empty());
  const Nic* lo = h.findNic("lo");
  EXPECT_NE(lo, nullptr) << "no loopback interface found";
  if (lo != nullptr) {
    EXPECT_EQ(lo->kind, NicKind::kLoopback);
    if (lo->up) {
      EXPECT_NE(std::find(lo->addresses.begin(), lo->addresses.end(), "127.0.0.1/8"),
                lo->addresses.end());
    }
  }
  int veths = 0;
  for (const std::string& name : sysClassNet()) {
    const Nic* n = h.findNic(name);
    EXPECT_NE(n, nullptr) << name << " is in /sys/class/net but was not detected";
    if (n != nullptr && n->driver == "veth") {
      EXPECT_EQ(n->kind, NicKind::kVeth) << name;
      ++veths;
    }
  }
  return veths;
}

TEST(SysfsDetector, FindsLoopbackAndEveryInterfaceOfThisMachine) { checkLiveHost(); }

// In a fresh network namespace with a veth pair and an address (run through `ip netns exec`,
// which also remounts /sys for that namespace), the detector sees both ends as veths.
TEST(SysfsDetector, FindsVethsInANetworkNamespace) {
  if (getenv("BRAID_TOPO_TEST_IN_NETNS") != nullptr) {
    EXPECT_EQ(checkLiveHost(), 2);
    Result<Host> r = detectSysfs();
    ASSERT_TRUE(r.isOk());
    const Nic* a = r->findNic("bt0");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->addresses.empty() ? "" : a->addresses[0], "198.18.255.1/30");
    EXPECT_TRUE(a->up);
    return;
  }
  if (geteuid() != 0 || system("command -v ip >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs root and iproute2 to create a network namespace";
  }
  const std::string ns = "braidtopo-" + std::to_string(getpid());
  if (system(("ip netns add " + ns + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "ip netns add is not permitted here";
  }
  const std::string setup = "ip -n " + ns + " link add bt0 type veth peer name bt1 && ip -n " + ns +
                            " addr add 198.18.255.1/30 dev bt0 && ip -n " + ns +
                            " link set bt0 up && ip -n " + ns + " link set bt1 up && ip -n " + ns +
                            " link set lo up";
  const int setupRc = system(setup.c_str());
  int rc = -1;
  if (setupRc == 0) {
    const std::string self = [] {
      char buf[4096];
      ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
      return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
    }();
    const std::string cmd = "BRAID_TOPO_TEST_IN_NETNS=1 timeout 60 ip netns exec " + ns + " '" +
                            self + "' --gtest_filter=SysfsDetector.FindsVethsInANetworkNamespace";
    rc = system(cmd.c_str());
  }
  const int delRc = system(("ip netns del " + ns).c_str());
  ASSERT_EQ(setupRc, 0) << "could not set up the veth pair in " << ns;
  EXPECT_EQ(delRc, 0) << "could not delete " << ns;
  ASSERT_TRUE(WIFEXITED(rc)) << "child died";
  EXPECT_EQ(WEXITSTATUS(rc), 0) << "the detector failed inside " << ns;
}

TEST(HwlocDetector, AgreesWithSysfsOnTheCpuCountWhenBuilt) {
  Result<Host> hw = detectHwloc();
  if (!hwlocAvailable()) {
    ASSERT_FALSE(hw.isOk());
    EXPECT_EQ(hw.status().code(), Code::kInvalidUsage);
    GTEST_SKIP() << "built without hwloc";
  }
  ASSERT_TRUE(hw.isOk()) << hw.status().toString();
  Result<Host> sys = detectSysfs();
  ASSERT_TRUE(sys.isOk());
  EXPECT_EQ(hw->numCpus(), sys->numCpus());
  EXPECT_FALSE(hw->cores.empty());
  EXPECT_FALSE(hw->numaNodes.empty());
}

// ---------------------------------------------------------------------------------------------
// Model helpers.

TEST(TopologyModel, CpuListsRoundTrip) {
  std::vector<int> cpus;
  ASSERT_TRUE(parseCpuList("0-3,8,10-11", &cpus));
  EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(formatCpuList(cpus), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_TRUE(parseCpuList("", &cpus));
  EXPECT_TRUE(cpus.empty());
  for (const char* bad : {"a", "1-", "3-1", "1,,2", ",", "1-2-3", "-1"}) {
    EXPECT_FALSE(parseCpuList(bad, &cpus)) << bad;
  }
}

TEST(TopologyModel, NicKindNamesRoundTrip) {
  for (NicKind k : {NicKind::kUnknown, NicKind::kLoopback, NicKind::kEthernet, NicKind::kInfiniband,
                    NicKind::kVeth, NicKind::kBridge, NicKind::kVirtual}) {
    NicKind back;
    ASSERT_TRUE(parseNicKind(nicKindName(k), &back));
    EXPECT_EQ(back, k);
  }
  NicKind k;
  EXPECT_FALSE(parseNicKind("wifi", &k));
}

}  // namespace
}  // namespace braid::topo
