// The sysfs detector: reads the local host from Linux's /sys and /proc, without any library.
//   NICs:   /sys/class/net/<if> (type, flags, operstate, speed, mtu, address, device -> PCI path,
//           driver) plus addresses from getifaddrs(); RDMA ports from
//           /sys/class/infiniband/<dev>/ports/<n> (rate, state, link_layer).
//   CPUs:   /proc/cpuinfo (processor, physical id, core id, model name).
//   NUMA:   /sys/devices/system/node/node<N>/{cpulist,meminfo}.
//   PCI:    /sys/bus/pci/devices/* (class, vendor, device, numa_node; the parent from the path).
//   GPUs:   NVIDIA and AMD display/3D functions among those; names from /proc/driver/nvidia.
// The roots are parameters so that tests can point the detector at a fabricated tree.
#pragma once

#include <cstddef>
#include <string>

#include "braid/status.h"
#include "topology/model.h"

namespace braid::topo {

struct SysfsOptions {
  std::string sysRoot = "/sys";
  std::string procRoot = "/proc";
  /// Read interface addresses with getifaddrs() and virtual-interface drivers with the ethtool
  /// ioctl. Only meaningful for the live system (tests with a fabricated tree turn it off).
  bool live = true;
};

/// Detects this host. Missing files leave fields unknown; only an unreadable root is an error.
Result<Host> detectSysfs(const SysfsOptions& options = SysfsOptions());

/// The size of cpu0's largest (last-level) cache, from
/// /sys/devices/system/cpu/cpu0/cache/index<N>/size; 0 when unknown.
size_t lastLevelCacheBytes(const std::string& sysRoot = "/sys");

}  // namespace braid::topo
