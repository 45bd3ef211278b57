#include "core/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <string>

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

namespace {

// One loop for both directions: a transfer may stop short (at a page the kernel could not pin
// in time, or past the first iovec), so go on from where it stopped.
template <bool kRead>
Status transfer(int pid, uint64_t remote, uint8_t* local, size_t bytes, const char* what) {
  size_t done = 0;
  while (done < bytes) {
    struct iovec l = {local + done, bytes - done};
    struct iovec r = {reinterpret_cast<void*>(remote + done), bytes - done};
    const ssize_t n = kRead ? process_vm_readv(pid, &l, 1, &r, 1, 0)
                            : process_vm_writev(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EFAULT;
      return errnoError(std::string(kRead ? "process_vm_readv" : "process_vm_writev") + " of " +
                            std::to_string(bytes - done) + " bytes " + (kRead ? "from" : "to") +
                            " pid " + std::to_string(pid) + " (" + what + ")",
                        err);
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

}  // namespace

Status readProcessMemory(int pid, void* dst, uint64_t remote, size_t bytes, const char* what) {
  return transfer<true>(pid, remote, static_cast<uint8_t*>(dst), bytes, what);
}

Status writeProcessMemory(int pid, uint64_t remote, const void* src, size_t bytes,
                          const char* what) {
  return transfer<false>(pid, remote, static_cast<uint8_t*>(const_cast<void*>(src)), bytes, what);
}

}  // namespace braid
