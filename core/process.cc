#include "core/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>

namespace braid {

bool processGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) == -1) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // no /proc: kill() is all we know
  char buf[512];
  ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  if (n <= 0) return false;
  // "pid (comm) S ...": the state follows the last ')'.
  const char* paren = static_cast<const char*>(memrchr(buf, ')', static_cast<size_t>(n)));
  if (paren == nullptr || paren + 2 >= buf + n) return false;
  return paren[2] == 'Z' || paren[2] == 'X';
}

}  // namespace braid
