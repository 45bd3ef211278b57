#include "transport/bootstrap/local_launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "core/clock.h"

namespace braid::launch {
namespace {

// A port the kernel considers free right now (bind to 0, read it back, close).
Result<int> pickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return errnoError("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    close(fd);
    return errnoError("bind to pick a free port", err);
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace

std::string selfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

Result<LaunchResult> launchLocalRanks(const LaunchOptions& options) {
  if (options.ranks < 1) return invalidArgument("--ranks must be ≥ 1");
  if (options.argv.empty()) return invalidArgument("no program to launch");
  std::string storeDir;
  int port = 0;
  if (options.fileStore) {
    char tmpl[] = "/tmp/braid-store-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return errnoError("mkdtemp", errno);
    storeDir = tmpl;
  } else {
    BRAID_ASSIGN_OR_RETURN(port, pickFreePort());
  }
  std::vector<pid_t> pids(options.ranks, -1);
  for (int r = 0; r < options.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) return errnoError("fork", errno);
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(options.ranks).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(options.ranks).c_str(), 1);
      // These ranks are a world of their own: an outer launcher's marks (this launcher run by
      // srun or mpirun) would otherwise be compared with theirs (transport/bootstrap/launchers.h).
      for (const char* outer :
           {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "GROUP_RANK"}) {
        unsetenv(outer);
      }
      if (options.fileStore) {
        setenv("BRAID_FILE_STORE", storeDir.c_str(), 1);
        unsetenv("MASTER_ADDR");
      } else {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        unsetenv("BRAID_FILE_STORE");
      }
      for (const auto& kv : options.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
      std::vector<std::string> args;
      if (static_cast<size_t>(r) < options.wrappers.size()) args = options.wrappers[r];
      args.insert(args.end(), options.argv.begin(), options.argv.end());
      std::vector<char*> cargv;
      for (auto& a : args) cargv.push_back(const_cast<char*>(a.c_str()));
      cargv.push_back(nullptr);
      execvp(cargv[0], cargv.data());
      fprintf(stderr, "braid launch: cannot run %s: %s\n", cargv[0], strerror(errno));
      _exit(127);
    }
    pids[r] = pid;
  }
  LaunchResult result;
  result.exitCodes.assign(options.ranks, -1);
  int remaining = options.ranks;
  Deadline deadline = options.timeoutMs > 0 ? Deadline::afterMs(options.timeoutMs) : Deadline::never();
  while (remaining > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < options.ranks; ++r) {
        if (pids[r] != pid) continue;
        result.exitCodes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[r] = -1;
        --remaining;
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (deadline.expired()) {
      result.timedOut = true;
      for (pid_t p : pids) {
        if (p > 0) kill(p, SIGKILL);
      }
      deadline = Deadline::never();
      continue;
    }
    usleep(2000);
  }
  if (!storeDir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(storeDir, ec);
  }
  return result;
}

}  // namespace braid::launch
