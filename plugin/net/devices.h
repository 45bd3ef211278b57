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
  std::string name;     ///< interface name; unique
  std::string address;  ///< numeric address the tcp transport listens on
  std::string pciPath;  ///< resolved /sys/devices/... of the PCI function; empty = virtual
  uint64_t guid = 0;    ///< from the MAC address (or the name), unique per device
  int speedMbps = 0;    ///< from the topology; 10000 (NCCL's "unknown") when it has none
  double latencyUs = 0;  ///< a topology link naming "nic:<name>"; 0 (NCCL's default) when none
  bool loopback = false;
};

/// Interfaces selected by `spec`; kSystem naming the spec and the interfaces seen when none is.
Result<std::vector<NetDevice>> discoverNetDevices(const std::string& spec);

}  // namespace braid::plugin
