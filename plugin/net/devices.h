// The net plugin's devices: one per network interface that is up, selected by BRAID_NET_IFNAME
// with NCCL_SOCKET_IFNAME rules (prefixes, ^ to exclude, = for exact names). Without a spec,
// every non-loopback interface except docker*/virbr* bridges, else the loopback interface.
//
// TODO(#3): take the NICs (and their measured latency) from topology/ once it has landed; until
// then the facts come from getifaddrs and /sys/class/net.
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
  int speedMbps = 0;    ///< from /sys/class/net/<if>/speed; 10000 when unknown
  bool loopback = false;
};

/// Interfaces selected by `spec`; kSystem naming the spec and the interfaces seen when none is.
Result<std::vector<NetDevice>> discoverNetDevices(const std::string& spec);

}  // namespace braid::plugin
