#include "plugin/net/devices.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "transport/tcp/socket.h"

namespace braid::plugin {
namespace {

std::string readSysfs(const std::string& name, const char* attr) {
  std::ifstream in("/sys/class/net/" + name + "/" + attr);
  std::string line;
  if (!in || !std::getline(in, line)) return std::string();
  return line;
}

std::string pciPathOf(const std::string& name) {
  const std::string link = "/sys/class/net/" + name + "/device";
  char resolved[PATH_MAX];
  if (::realpath(link.c_str(), resolved) == nullptr) return std::string();
  std::string path(resolved);
  // Virtual devices (veth, bridges, lo) have no device link; platform devices are not PCI.
  return path.find("/pci") == std::string::npos ? std::string() : path;
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t guidOf(const std::string& name) {
  unsigned mac[6];
  const std::string text = readSysfs(name, "address");
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4],
                  &mac[5]) == 6) {
    uint64_t g = 0;
    for (unsigned b : mac) g = (g << 8) | (b & 0xff);
    if (g != 0) return g;
  }
  return fnv1a64(name);  // lo and tunnels have an all-zero or no MAC
}

int speedOf(const std::string& name) {
  const std::string text = readSysfs(name, "speed");
  const long v = text.empty() ? -1 : std::strtol(text.c_str(), nullptr, 10);
  // Unknown (virtual NICs report -1 or fail the read): NCCL's own default for "no idea".
  return v > 0 && v < INT_MAX ? static_cast<int>(v) : 10000;
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
  for (size_t i = 0; i < selected.size(); ++i) {
    NetDevice& d = selected[i];
    d.pciPath = pciPathOf(d.name);
    d.guid = guidOf(d.name);
    d.speedMbps = speedOf(d.name);
    for (size_t j = 0; j < i; ++j) {
      if (selected[j].guid == d.guid) d.guid ^= fnv1a64(d.name) | 1;  // equal guid = shared port
    }
  }
  return selected;
}

}  // namespace braid::plugin
