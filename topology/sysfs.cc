#include "topology/sysfs.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace braid::topo {
namespace {

// First line of a file without its newline; "" when unreadable (sysfs reads may fail with
// EINVAL, e.g. the speed of a link that is down).
std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) {
    line.pop_back();
  }
  return line;
}

bool readInt(const std::string& path, int64_t* out, int base = 10) {
  const std::string text = readLine(path);
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, base);
  if (errno != 0 || end == text.c_str()) return false;
  *out = v;
  return true;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

// Basename of a symlink's target ("" when not a link).
std::string linkBase(const std::string& path) {
  char buf[PATH_MAX];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  const char* slash = std::strrchr(buf, '/');
  return slash ? slash + 1 : buf;
}

bool isHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// "0000:3b:00.0"
bool isPciAddress(const std::string& s) {
  if (s.size() != 12) return false;
  static const char kPattern[] = "hhhh:hh:hh.h";
  for (size_t i = 0; i < s.size(); ++i) {
    if (kPattern[i] == 'h' ? !isHex(s[i]) : s[i] != kPattern[i]) return false;
  }
  return true;
}

// PCI addresses along a resolved sysfs device path, root first.
std::vector<std::string> pciComponents(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(path);
  std::string part;
  while (std::getline(in, part, '/')) {
    if (isPciAddress(part)) out.push_back(part);
  }
  return out;
}

// The PCI address a sysfs device path belongs to: its last PCI component ("" when virtual).
std::string pciOf(const std::string& devicePath) {
  const std::string real = realPath(devicePath);
  if (real.empty()) return "";
  const std::vector<std::string> parts = pciComponents(real);
  return parts.empty() ? "" : parts.back();
}

int numaOf(const std::string& devicePath) {
  int64_t v = -1;
  if (!readInt(devicePath + "/numa_node", &v)) return -1;
  return v < 0 ? -1 : static_cast<int>(v);
}

// The driver of an interface through the ethtool ioctl (works for virtual devices such as veth,
// which have no device/driver link in sysfs).
std::string ethtoolDriver(const std::string& ifname) {
  if (ifname.size() >= IFNAMSIZ) return "";
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  ethtool_drvinfo info;
  std::memset(&info, 0, sizeof(info));
  info.cmd = ETHTOOL_GDRVINFO;
  ifreq req;
  std::memset(&req, 0, sizeof(req));
  std::memcpy(req.ifr_name, ifname.c_str(), ifname.size());
  req.ifr_data = reinterpret_cast<char*>(&info);
  std::string driver;
  if (ioctl(fd, SIOCETHTOOL, &req) == 0) driver = info.driver;
  close(fd);
  return driver;
}

int prefixLength(const sockaddr* mask) {
  int bits = 0;
  if (mask == nullptr) return 0;
  if (mask->sa_family == AF_INET) {
    uint32_t m = ntohl(reinterpret_cast<const sockaddr_in*>(mask)->sin_addr.s_addr);
    while (m & 0x80000000u) {
      ++bits;
      m <<= 1;
    }
  } else if (mask->sa_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(mask);
    for (int i = 0; i < 16; ++i) {
      uint8_t b = a->sin6_addr.s6_addr[i];
      while (b & 0x80) {
        ++bits;
        b = static_cast<uint8_t>(b << 1);
      }
      if (a->sin6_addr.s6_addr[i] != 0xff) break;
    }
  }
  return bits;
}

// interface name -> "addr/prefix" list, IPv4 first.
std::map<std::string, std::vector<std::string>> liveAddresses() {
  std::map<std::string, std::vector<std::string>> v4, v6;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return v4;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {0};
    if (a->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof(text));
      v4[a->ifa_name].push_back(std::string(text) + "/" +
                                std::to_string(prefixLength(a->ifa_netmask)));
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr, text,
                sizeof(text));
      v6[a->ifa_name].push_back(std::string(text) + "/" +
                                std::to_string(prefixLength(a->ifa_netmask)));
    }
  }
  freeifaddrs(list);
  for (auto& [name, addrs] : v6) {
    auto& dst = v4[name];
    dst.insert(dst.end(), addrs.begin(), addrs.end());
  }
  return v4;
}

void detectNetdevs(const SysfsOptions& o, Host* host) {
  const std::string base = o.sysRoot + "/class/net/";
  std::map<std::string, std::vector<std::string>> addrs;
  if (o.live) addrs = liveAddresses();
  for (const std::string& name : listDir(base)) {
    const std::string dir = base + name;
    if (!exists(dir + "/type")) continue;  // bonding_masters and other plain files
    Nic nic;
    nic.name = name;
    int64_t type = -1, flags = 0, v = -1;
    readInt(dir + "/type", &type);
    readInt(dir + "/flags", &flags, 16);
    const std::string oper = readLine(dir + "/operstate");
    nic.up = oper == "up" || (oper == "unknown" && (flags & IFF_UP) != 0);
    if (readInt(dir + "/mtu", &v)) nic.mtu = static_cast<int>(v);
    if (readInt(dir + "/speed", &v) && v > 0) nic.speedMbps = v;
    nic.mac = readLine(dir + "/address");
    const bool hasDevice = exists(dir + "/device");
    if (hasDevice) {
      nic.pciPath = pciOf(dir + "/device");
      nic.driver = linkBase(dir + "/device/driver");
      nic.numa = numaOf(dir + "/device");
    } else if (o.live) {
      nic.driver = ethtoolDriver(name);
    }
    if (type == 772) {
      nic.kind = NicKind::kLoopback;
    } else if (type == 32) {
      nic.kind = NicKind::kInfiniband;  // IPoIB
    } else if (exists(dir + "/bridge")) {
      nic.kind = NicKind::kBridge;
    } else if (nic.driver == "veth") {
      nic.kind = NicKind::kVeth;
    } else if (!hasDevice) {
      nic.kind = NicKind::kVirtual;
    } else if (type == 1) {
      nic.kind = NicKind::kEthernet;
    }
    auto it = addrs.find(name);
    if (it != addrs.end()) nic.addresses = it->second;
    host->nics.push_back(std::move(nic));
  }
}

// "100 Gb/sec (4X EDR)" -> 100000 Mbit/s.
int64_t parseRate(const std::string& rate) {
  char* end = nullptr;
  const double gbps = std::strtod(rate.c_str(), &end);
  if (end == rate.c_str() || gbps <= 0) return -1;
  return static_cast<int64_t>(gbps * 1000 + 0.5);
}

void detectRdma(const SysfsOptions& o, Host* host) {
  const std::string base = o.sysRoot + "/class/infiniband/";
  for (const std::string& dev : listDir(base)) {
    const std::string dir = base + dev;
    for (const std::string& port : listDir(dir + "/ports")) {
      const std::string pdir = dir + "/ports/" + port;
      Nic nic;
      nic.name = dev + ":" + port;
      nic.kind = NicKind::kInfiniband;
      nic.speedMbps = parseRate(readLine(pdir + "/rate"));
      const std::string state = readLine(pdir + "/state");  // "4: ACTIVE"
      nic.up = state.find("ACTIVE") != std::string::npos;
      nic.pciPath = pciOf(dir + "/device");
      nic.numa = numaOf(dir + "/device");
      nic.driver = linkBase(dir + "/device/driver");
      host->nics.push_back(std::move(nic));
    }
  }
}

void detectCpus(const SysfsOptions& o, Host* host) {
  std::ifstream in(o.procRoot + "/cpuinfo");
  std::string line;
  struct Proc {
    int cpu = -1, socket = -1, core = -1;
    std::string model;
  };
  std::vector<Proc> procs;
  Proc cur;
  auto flush = [&] {
    if (cur.cpu >= 0) procs.push_back(cur);
    cur = Proc();
  };
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) flush();
      continue;
    }
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(colon + 1);
    const size_t b = value.find_first_not_of(" \t");
    value = b == std::string::npos ? "" : value.substr(b);
    if (key == "processor") {
      if (cur.cpu >= 0) flush();
      cur.cpu = std::atoi(value.c_str());
    } else if (key == "physical id") {
      cur.socket = std::atoi(value.c_str());
    } else if (key == "core id") {
      cur.core = std::atoi(value.c_str());
    } else if (key == "model name") {
      cur.model = value;
    }
  }
  flush();
  for (Proc& p : procs) {
    // Architectures without these lines: fall back to the per-CPU topology files.
    const std::string topoDir =
        o.sysRoot + "/devices/system/cpu/cpu" + std::to_string(p.cpu) + "/topology/";
    int64_t v;
    if (p.socket < 0) p.socket = readInt(topoDir + "physical_package_id", &v) ? int(v) : 0;
    if (p.core < 0) p.core = readInt(topoDir + "core_id", &v) ? int(v) : p.cpu;
    if (std::none_of(host->sockets.begin(), host->sockets.end(),
                     [&](const Socket& s) { return s.id == p.socket; })) {
      host->sockets.push_back(Socket{p.socket, p.model});
    }
    auto it = std::find_if(host->cores.begin(), host->cores.end(),
                           [&](const Core& c) { return c.socket == p.socket && c.id == p.core; });
    if (it == host->cores.end()) {
      Core c;
      c.id = p.core;
      c.socket = p.socket;
      host->cores.push_back(c);
      it = host->cores.end() - 1;
    }
    it->cpus.push_back(p.cpu);
  }
  std::sort(host->sockets.begin(), host->sockets.end(),
            [](const Socket& a, const Socket& b) { return a.id < b.id; });
  for (Core& c : host->cores) std::sort(c.cpus.begin(), c.cpus.end());
}

void detectNuma(const SysfsOptions& o, Host* host) {
  const std::string base = o.sysRoot + "/devices/system/node/";
  std::vector<NumaNode> nodes;
  for (const std::string& name : listDir(base)) {
    if (name.size() < 5 || name.compare(0, 4, "node") != 0) continue;
    if (name.find_first_not_of("0123456789", 4) != std::string::npos) continue;
    NumaNode node;
    node.id = std::atoi(name.c_str() + 4);
    parseCpuList(readLine(base + name + "/cpulist"), &node.cpus);
    std::ifstream in(base + name + "/meminfo");
    std::string line;
    while (std::getline(in, line)) {
      const size_t pos = line.find("MemTotal:");
      if (pos != std::string::npos) {
        node.memoryBytes = std::atoll(line.c_str() + pos + 9) * 1024;
        break;
      }
    }
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  host->numaNodes = std::move(nodes);
  for (Core& c : host->cores) {
    for (const NumaNode& n : host->numaNodes) {
      if (!c.cpus.empty() && std::binary_search(n.cpus.begin(), n.cpus.end(), c.cpus[0])) {
        c.numa = n.id;
      }
    }
  }
}

void detectPci(const SysfsOptions& o, Host* host) {
  const std::string base = o.sysRoot + "/bus/pci/devices/";
  for (const std::string& name : listDir(base)) {
    const std::string dir = base + name;
    PciDevice d;
    const std::vector<std::string> chain = pciComponents(realPath(dir));
    d.address = chain.empty() ? name : chain.back();
    if (chain.size() >= 2) d.parent = chain[chain.size() - 2];
    int64_t v = 0;
    if (readInt(dir + "/class", &v, 16)) d.classCode = static_cast<uint32_t>(v);
    if (readInt(dir + "/vendor", &v, 16)) d.vendor = static_cast<uint16_t>(v);
    if (readInt(dir + "/device", &v, 16)) d.device = static_cast<uint16_t>(v);
    d.numa = numaOf(dir);
    host->pci.push_back(d);
  }
}

void detectGpus(const SysfsOptions& o, Host* host) {
  for (const PciDevice& d : host->pci) {
    if ((d.classCode >> 16) != 0x03) continue;               // display controller
    if (d.vendor != 0x10de && d.vendor != 0x1002) continue;  // NVIDIA, AMD
    Gpu g;
    g.index = static_cast<int>(host->gpus.size());
    g.pciPath = d.address;
    g.numa = d.numa;
    std::ifstream in(o.procRoot + "/driver/nvidia/gpus/" + d.address + "/information");
    std::string line;
    while (std::getline(in, line)) {
      auto value = [&](const char* key) -> const char* {
        const size_t n = std::strlen(key);
        if (line.compare(0, n, key) != 0) return nullptr;
        const char* p = line.c_str() + n;
        while (*p == ' ' || *p == '\t') ++p;
        return p;
      };
      if (const char* v = value("Model:")) g.name = v;
      if (const char* v = value("GPU UUID:")) g.uuid = v;
    }
    host->gpus.push_back(std::move(g));
  }
}

}  // namespace

Result<Host> detectSysfs(const SysfsOptions& o) {
  if (!exists(o.sysRoot + "/class/net")) {
    return systemError("sysfs detector: " + o.sysRoot +
                       "/class/net is not readable (is /sys mounted?)");
  }
  Host host;
  host.name = readLine(o.procRoot + "/sys/kernel/hostname");
  if (host.name.empty() && o.live) {
    char buf[HOST_NAME_MAX + 1] = {};
    gethostname(buf, sizeof(buf) - 1);
    host.name = buf;
  }
  if (host.name.empty()) host.name = "localhost";
  detectCpus(o, &host);
  detectNuma(o, &host);
  detectPci(o, &host);
  detectGpus(o, &host);
  detectNetdevs(o, &host);
  detectRdma(o, &host);
  // Each NIC's link to the network, with the speed the kernel reports.
  for (const Nic& n : host.nics) {
    if (n.kind == NicKind::kLoopback || n.speedMbps <= 0) continue;
    Link l;
    l.from = "nic:" + n.name;
    l.to = "network";
    l.kind = "net";
    l.bandwidthGbps = static_cast<double>(n.speedMbps) / 1000.0;
    host.links.push_back(l);
  }
  return host;
}

size_t lastLevelCacheBytes(const std::string& sysRoot) {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f(sysRoot + "/devices/system/cpu/cpu0/cache/index" + std::to_string(i) +
                    "/size");
    if (!f) break;
    std::string text;
    f >> text;
    char* end = nullptr;
    size_t v = std::strtoull(text.c_str(), &end, 10);
    if (end == text.c_str()) continue;
    if (*end == 'K') v <<= 10;
    if (*end == 'M') v <<= 20;
    best = std::max(best, v);
  }
  return best;
}

}  // namespace braid::topo
