// The topology model: what a host is made of (sockets, NUMA nodes, cores, the PCI tree, NICs,
// GPUs) and the links between parts, with bandwidth and latency. Plain data with no I/O: the
// detectors (sysfs.h, hwloc.h, topology_file.h) fill it, the communicator and the selector read
// it, and the topology file writes it back out. Values a detector could not learn are left at
// their "unknown" defaults (-1 or empty) rather than guessed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/text.h"

namespace braid::topo {

/// A processor package.
struct Socket {
  int id = -1;        ///< physical package id
  std::string model;  ///< CPU model name ("" unknown)
};

/// A NUMA node: the CPUs close to one memory controller.
struct NumaNode {
  int id = -1;
  std::vector<int> cpus;     ///< logical CPU ids, ascending
  int64_t memoryBytes = -1;  ///< -1 unknown
};

/// A physical core and its hardware threads.
struct Core {
  int id = -1;            ///< core id within its socket (as /proc/cpuinfo "core id")
  int socket = -1;        ///< Socket::id
  int numa = -1;          ///< NumaNode::id (-1 unknown)
  std::vector<int> cpus;  ///< logical CPU ids of its hardware threads, ascending
};

/// A PCI function. The tree is given by `parent` (the upstream bridge's address, "" for a
/// function directly below a host bridge / root complex).
struct PciDevice {
  std::string address;     ///< "0000:3b:00.0"
  std::string parent;      ///< "0000:3a:00.0" or ""
  uint32_t classCode = 0;  ///< 24-bit class code, e.g. 0x020000 (Ethernet), 0x030200 (3D)
  uint16_t vendor = 0;
  uint16_t device = 0;
  int numa = -1;
};

/// Kinds of network interface.
enum class NicKind { kUnknown, kLoopback, kEthernet, kInfiniband, kVeth, kBridge, kVirtual };
const char* nicKindName(NicKind kind);
/// Parses a nicKindName; false for an unknown name.
bool parseNicKind(const std::string& name, NicKind* out);

/// A network interface (a netdev, or an RDMA port named "mlx5_0:1").
struct Nic {
  std::string name;
  NicKind kind = NicKind::kUnknown;
  int64_t speedMbps = -1;              ///< link speed in Mbit/s, -1 unknown
  std::string pciPath;                 ///< PCI address of the device ("" for virtual interfaces)
  std::vector<std::string> addresses;  ///< "198.18.0.1/24", "fd00::1/64"
  std::string mac;                     ///< "aa:bb:cc:dd:ee:ff" ("" unknown)
  int mtu = -1;
  bool up = false;  ///< operationally up (carrier), or ACTIVE for an RDMA port
  int numa = -1;
  std::string driver;  ///< kernel driver ("virtio_net", "veth", "mlx5_core"; "" unknown)
};

/// A GPU.
struct Gpu {
  int index = -1;    ///< order of discovery (PCI address order)
  std::string name;  ///< model name ("" unknown)
  std::string pciPath;
  std::string uuid;  ///< "" unknown
  int numa = -1;
};

/// A link between two named endpoints with its bandwidth and latency. Endpoint names:
/// "host:<name>", "socket:<id>", "numa:<id>", "nic:<name>", "gpu:<index>", "pci:<address>".
struct Link {
  std::string from;
  std::string to;
  std::string kind;           ///< "pci", "nvlink", "net", "memory", "smp", or another word
  double bandwidthGbps = -1;  ///< Gbit/s, -1 unknown
  double latencyUs = -1;      ///< microseconds, -1 unknown
};

/// One machine.
struct Host {
  std::string name;  ///< hostname
  std::string id;    ///< host identity as the communicator uses it ("" unknown)
  std::vector<Socket> sockets;
  std::vector<NumaNode> numaNodes;
  std::vector<Core> cores;
  std::vector<PciDevice> pci;
  std::vector<Nic> nics;
  std::vector<Gpu> gpus;
  std::vector<Link> links;

  int numCpus() const;
  const Nic* findNic(const std::string& name) const;
  const PciDevice* findPci(const std::string& address) const;
};

/// A set of hosts, and the links between them (endpoints "host:<name>").
struct Topology {
  std::vector<Host> hosts;
  std::vector<Link> links;
  /// Where it came from: "sysfs", "hwloc", "file:<path>" (not written to files).
  std::string source;

  const Host* findHost(const std::string& name) const;
};

/// NCCL-style PCI distance between two PCI functions of one host: 0 = same device, 1 = one
/// switch between them (PIX), 2 = several switches (PXB), 3 = through the host bridge (PHB),
/// 4 = different root complexes / NUMA nodes (SYS); -1 when either is not in host.pci.
int pciDistance(const Host& host, const std::string& a, const std::string& b);

/// Human-readable multi-line summary (what `braid-info topo` prints).
std::string describe(const Topology& topology);

/// "0-3,8,10-11" for a sorted list (core/text.h); parseCpuList reads it back (false when
/// malformed).
using braid::formatCpuList;
bool parseCpuList(const std::string& text, std::vector<int>* out);

}  // namespace braid::topo
