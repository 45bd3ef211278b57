// Small text helpers shared by the parsers of braid's own file formats (tuning files, the NCCL
// tuner's rules).
#pragma once

#include <string>

namespace braid {

/// `s` without leading and trailing blanks (space, tab, CR, LF).
inline std::string trimBlanks(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace braid
