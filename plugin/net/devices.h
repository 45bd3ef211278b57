// The net plugin's devices: one per network interface that is up, selected by BRAID_NET_IFNAME
// with NCCL_SOCKET_IFNAME rules (prefixes, ^ to exclude, = for exact names). Without a spec,
// every non-loopback interface except docker*/virbr* bridges, else the loopback interface.
// Which interfaces are up and their addresses come from getifaddrs (the tcp transport listens
// there); the facts NCCL is given (PCI path, guid, speed, latency) come from topology/, so a
// BRAID_TOPO_FILE can state them where sysfs cannot (virtual NICs report no speed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid::plugin {

struct NetDevice {
  std::string name;      ///< interface name; unique
  std::string address;   ///< numeric address the tcp transport listens on
  std::string pciPath;   ///< resolved /sys/devices/... of the PCI function; empty = virtual
  uint64_t guid = 0;     ///< from the MAC address (or the name), unique per device
  int speedMbps = 0;     ///< from the topology; 10000 (NCCL's "unknown") when it has none
  double latencyUs = 0;  ///< a topology link naming "nic:<name>"; 0 (NCCL's default) when none
  bool loopback = false;
  /// Net v12's rail and network plane. braid's topology has no notion of either: it knows each
  /// NIC's PCI place, speed and addresses, not which leaf switch (rail) or which separate fabric
  /// (plane) the port is cabled to, and an interface's index says nothing about that across
  /// hosts (interfaces are listed in getifaddrs order, filtered per host). A made-up rail would
  /// be worse than none: NCCL's search never joins NICs of different known planes and, with
  /// cross-NIC off, trusts equal rails. So both stay -1 ("unknown", what NCCL's own Socket
  /// transport reports) until topology/ learns them.
  int16_t railId = -1;
  int16_t planeId = -1;
};

/// Interfaces selected by `spec`; kSystem naming the spec and the interfaces seen when none is.
Result<std::vector<NetDevice>> discoverNetDevices(const std::string& spec);

}  // namespace braid::plugin
