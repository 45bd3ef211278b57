// Test harness for the NCCL plugins: loads a built .so the way NCCL does (dlopen RTLD_NOW |
// RTLD_LOCAL, dlsym of the versioned table), runs peers in forked processes, and bounds every
// wait. Header-only; used by the plugin tests.
#pragma once

#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "plugin/nccl_abi.h"

namespace braid::plugin::testing {

inline constexpr int kWaitMs = 20000;

/// Polls f() until it returns true or the deadline passes; false on timeout.
inline bool spinUntil(const std::function<bool()>& f, int ms = kWaitMs) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!f()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

inline int countOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

/// A dlopen'ed plugin library.
class Library {
 public:
  explicit Library(const char* path) {
    handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) error_ = dlerror();
  }
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  bool ok() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  template <typename T>
  const T* symbol(const char* name) const {
    return handle_ == nullptr ? nullptr : static_cast<const T*>(dlsym(handle_, name));
  }

 private:
  void* handle_ = nullptr;
  std::string error_;
};

/// Runs body in a child process; the child exits 0 when body recorded no gtest failure.
inline pid_t runChild(const std::function<void()>& body) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60);  // a stuck child dies even if the parent is gone
    body();
    fflush(stdout);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  return pid;
}

/// Exit code of the child, or -1 when it had to be killed after ms.
inline int waitChild(pid_t pid, int ms = kWaitMs) {
  int status = 0;
  const bool done = spinUntil(
      [&] {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == 0) usleep(1000);
        return r == pid;
      },
      ms);
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// A one-way pipe for handles and small notes between parent and child.
class Pipe {
 public:
  Pipe() {
    if (pipe(fds_) != 0) fds_[0] = fds_[1] = -1;
  }
  ~Pipe() {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  bool write(const void* data, size_t size) {
    return ::write(fds_[1], data, size) == static_cast<ssize_t>(size);
  }
  /// Reads exactly size bytes within ms.
  bool read(void* data, size_t size, int ms = kWaitMs) {
    size_t got = 0;
    auto* p = static_cast<char*>(data);
    return spinUntil(
               [&] {
                 pollfd pfd{fds_[0], POLLIN, 0};
                 if (poll(&pfd, 1, 10) > 0) {
                   ssize_t n = ::read(fds_[0], p + got, size - got);
                   if (n <= 0) return true;  // EOF: fail below
                   got += static_cast<size_t>(n);
                 }
                 return got == size;
               },
               ms) &&
           got == size;
  }

 private:
  int fds_[2];
};

}  // namespace braid::plugin::testing
