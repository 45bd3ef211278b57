// Small text helpers shared by the parsers of braid's own file formats (tuning files, the NCCL
// tuner's rules, topology files) and its log lines.
#pragma once

#include <string>
#include <vector>

namespace braid {

/// `s` without leading and trailing blanks (space, tab, CR, LF).
inline std::string trimBlanks(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

/// CPU numbers in ascending order as a Linux CPU list, runs collapsed: {0,1,2,3,8} -> "0-3,8".
inline std::string formatCpuList(const std::vector<int>& cpus) {
  std::string out;
  size_t i = 0;
  while (i < cpus.size()) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace braid
