#include "plugin/net/devices.h"

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "core/hash.h"
#include "topology/detect.h"
#include "transport/socket.h"

namespace braid::plugin {
namespace {

/// The resolved sysfs path behind `link` when it is a PCI function; empty otherwise (virtual
/// devices such as veth, bridges and lo have no device link; platform devices are not PCI).
std::string pciSysfsPath(const std::string& link) {
  char resolved[PATH_MAX];
  if (::realpath(link.c_str(), resolved) == nullptr) return std::string();
  std::string path(resolved);
  return path.find("/pci") == std::string::npos ? std::string() : path;
}

std::string pciPathOf(const std::string& name) {
  return pciSysfsPath("/sys/class/net/" + name + "/device");
}

/// The sysfs path NCCL expects for a PCI address from the topology ("0000:3b:00.0"); empty when
/// this machine has no such function (an injected topology describing another machine).
std::string pciPathOfAddress(const std::string& address) {
  return address.empty() ? std::string() : pciSysfsPath("/sys/bus/pci/devices/" + address);
}

uint64_t guidOf(const std::string& name, const std::string& mac) {
  unsigned b[6];
  if (std::sscanf(mac.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) ==
      6) {
    uint64_t g = 0;
    for (unsigned v : b) g = (g << 8) | (v & 0xff);
    if (g != 0) return g;
  }
  return fnv1a64(name);  // lo and tunnels have an all-zero or no MAC
}

/// The latency of the first link of the topology that names this NIC as an endpoint.
double latencyOf(const topo::Topology& t, const topo::Host* host, const std::string& name) {
  const std::string endpoint = "nic:" + name;
  auto scan = [&](const std::vector<topo::Link>& links) -> double {
    for (const topo::Link& l : links) {
      if ((l.from == endpoint || l.to == endpoint) && l.latencyUs > 0) return l.latencyUs;
    }
    return 0;
  };
  double us = host != nullptr ? scan(host->links) : 0;
  return us > 0 ? us : scan(t.links);
}

bool isBridgeName(const std::string& name) {
  return name.rfind("docker", 0) == 0 || name.rfind("virbr", 0) == 0;
}

}  // namespace

Result<std::vector<NetDevice>> discoverNetDevices(const std::string& spec) {
  const std::vector<transport::InterfaceAddress> all = transport::listInterfaces();
  std::vector<NetDevice> selected;
  std::vector<NetDevice> loopbacks;
  std::string seen;
  for (const transport::InterfaceAddress& ia : all) {
    bool known = false;
    for (const NetDevice& d : selected) known |= d.name == ia.name;
    for (const NetDevice& d : loopbacks) known |= d.name == ia.name;
    if (seen.find(" " + ia.name + " ") == std::string::npos) seen += " " + ia.name + " ";
    if (known) continue;  // first address of an interface (IPv4 before IPv6) wins
    NetDevice d;
    d.name = ia.name;
    d.address = ia.address.hostString();
    d.loopback = ia.loopback;
    if (!spec.empty()) {
      if (!transport::interfaceMatches(ia.name, spec)) continue;
      selected.push_back(d);
    } else if (ia.loopback) {
      loopbacks.push_back(d);
    } else if (!isBridgeName(ia.name)) {
      selected.push_back(d);
    }
  }
  if (selected.empty() && spec.empty()) selected = loopbacks;
  if (selected.empty()) {
    return systemError("net plugin: no network interface matches BRAID_NET_IFNAME='" + spec +
                       "' (interfaces that are up:" + seen +
                       "); set BRAID_NET_IFNAME to one of them");
  }
  // The facts about each interface come from topology/ (hwloc, sysfs, or BRAID_TOPO_FILE); an
  // interface the topology does not list (it failed, or a file describes another machine) keeps
  // the defaults: no PCI path, a guid from its name, NCCL's 10 Gb/s "unknown" speed.
  Result<topo::Topology> topology = topo::detectTopology();
  const topo::Host* host = topology.isOk() ? topo::localHost(topology.value()) : nullptr;
  for (size_t i = 0; i < selected.size(); ++i) {
    NetDevice& d = selected[i];
    const topo::Nic* nic = host != nullptr ? host->findNic(d.name) : nullptr;
    d.pciPath = nic != nullptr ? pciPathOfAddress(nic->pciPath) : std::string();
    if (d.pciPath.empty()) d.pciPath = pciPathOf(d.name);
    d.guid = guidOf(d.name, nic != nullptr ? nic->mac : std::string());
    d.speedMbps = nic != nullptr && nic->speedMbps > 0 && nic->speedMbps < INT_MAX
                      ? static_cast<int>(nic->speedMbps)
                      : 10000;
    d.latencyUs = nic != nullptr ? latencyOf(topology.value(), host, d.name) : 0;
    for (size_t j = 0; j < i; ++j) {
      if (selected[j].guid == d.guid) d.guid ^= fnv1a64(d.name) | 1;  // equal guid = shared port
    }
  }
  return selected;
}

}  // namespace braid::plugin
