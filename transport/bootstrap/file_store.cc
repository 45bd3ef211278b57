// FileStore: a directory shared by every rank (tests, or a shared file system). One file per key;
// set writes a temporary file and renames it over the key (atomic on POSIX), get polls for the
// file with back-off until the deadline, add serializes through flock on a per-key lock file.
// Integer keys hold decimal text, as in the TCP store.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/params.h"
#include "transport/bootstrap/bootstrap.h"

namespace braid {
namespace {

/// Keys may hold any byte; file names get [A-Za-z0-9_-] as is and %XX for everything else (so a
/// key never starts with '.', the prefix of temporary and lock files).
std::string encodeKey(const std::string& key) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

void sleepMs(int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  nanosleep(&ts, nullptr);
}

class FileStore : public Store {
 public:
  FileStore(std::string directory, int64_t timeoutMs)
      : dir_(std::move(directory)), timeoutMs_(timeoutMs > 0 ? timeoutMs : kDefaultTimeoutMs) {}

  Status set(const std::string& key, const std::vector<uint8_t>& value) override {
    BRAID_RETURN_IF_ERROR(checkKey(key));
    return writeAtomically(pathOf(key), value);
  }

  Result<std::vector<uint8_t>> get(const std::string& key, Deadline deadline) override {
    BRAID_RETURN_IF_ERROR(checkKey(key));
    std::string path = pathOf(key);
    int64_t sleep = 1;
    for (;;) {
      std::vector<uint8_t> value;
      int err = readFile(path, &value);
      if (err == 0) return value;
      if (err != ENOENT) return errnoError("file store: reading " + path, err);
      if (deadline.expired()) {
        return timeoutError("file store " + dir_ + ": key '" + key +
                            "' did not appear before the deadline (has every rank started, with "
                            "the same BRAID_FILE_STORE?)");
      }
      sleepMs(std::min<int64_t>(sleep, std::max<int64_t>(1, deadline.remainingMs())));
      sleep = std::min<int64_t>(sleep * 2, 50);
    }
  }

  Result<int64_t> add(const std::string& key, int64_t delta) override {
    BRAID_RETURN_IF_ERROR(checkKey(key));
    std::string path = pathOf(key);
    std::string lockPath = dir_ + "/.lock." + encodeKey(key);
    int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return errnoError("file store: opening lock file " + lockPath, errno);
    // flock is released when fd closes, also when the holder dies; poll it with a deadline so that
    // a wedged holder gives an error instead of a hang.
    Deadline deadline = Deadline::afterMs(timeoutMs_);
    int64_t sleep = 1;
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        ::close(fd);
        return errnoError("file store: locking " + lockPath, err);
      }
      if (deadline.expired()) {
        ::close(fd);
        return timeoutError("file store: lock " + lockPath + " held by another process for " +
                            std::to_string(timeoutMs_) + " ms");
      }
      sleepMs(sleep);
      sleep = std::min<int64_t>(sleep * 2, 20);
    }
    Result<int64_t> result = addLocked(key, path, delta);
    ::close(fd);  // releases the lock
    return result;
  }

  /// Removes the key files and lock files of the keys under prefix (the encoding keeps prefixes).
  Status erasePrefix(const std::string& prefix) override {
    BRAID_RETURN_IF_ERROR(checkKey(prefix));
    const std::string key = encodeKey(prefix);
    const std::string lock = ".lock." + key;
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return errnoError("file store: listing " + dir_, errno);
    Status status;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.compare(0, key.size(), key) != 0 && name.compare(0, lock.size(), lock) != 0) continue;
      if (::unlink((dir_ + "/" + name).c_str()) != 0 && errno != ENOENT && status.isOk()) {
        status = errnoError("file store: removing " + dir_ + "/" + name, errno);
      }
    }
    ::closedir(d);
    return status;
  }

 private:
  static Status checkKey(const std::string& key) {
    if (key.empty()) return invalidArgument("file store: empty key");
    return Status::ok();
  }

  std::string pathOf(const std::string& key) const { return dir_ + "/" + encodeKey(key); }

  Result<int64_t> addLocked(const std::string& key, const std::string& path, int64_t delta) {
    std::vector<uint8_t> current;
    int64_t value = 0;
    int err = readFile(path, &current);
    if (err == 0) {
      std::string text(current.begin(), current.end());
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || errno != 0 || *end != '\0') {
        return invalidUsage("file store: key '" + key + "' holds '" + text +
                            "', not an integer; add() needs an integer key");
      }
      value = v;
    } else if (err != ENOENT) {
      return errnoError("file store: reading " + path, err);
    }
    value += delta;
    std::string text = std::to_string(value);
    BRAID_RETURN_IF_ERROR(writeAtomically(path, std::vector<uint8_t>(text.begin(), text.end())));
    return value;
  }

  /// 0, or the errno of the failure (ENOENT: no such key yet).
  static int readFile(const std::string& path, std::vector<uint8_t>* out) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    out->clear();
    uint8_t buf[4096];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        out->insert(out->end(), buf, buf + n);
      } else if (n == 0) {
        break;
      } else if (errno != EINTR) {
        int err = errno;
        ::close(fd);
        return err == ENOENT ? EIO : err;
      }
    }
    ::close(fd);
    return 0;
  }

  Status writeAtomically(const std::string& path, const std::vector<uint8_t>& value) {
    static std::atomic<uint64_t> counter{0};
    std::string tmp =
        dir_ + "/.tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return errnoError("file store: creating " + tmp, errno);
    size_t done = 0;
    while (done < value.size()) {
      ssize_t n = ::write(fd, value.data() + done, value.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        return errnoError("file store: writing " + tmp, err);
      }
      done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return errnoError("file store: closing " + tmp, err);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return errnoError("file store: renaming " + tmp + " to " + path, err);
    }
    return Status::ok();
  }

  std::string dir_;
  int64_t timeoutMs_;  ///< bounds taking a key's lock
};

}  // namespace

Result<std::unique_ptr<Store>> createFileStore(const std::string& directory, int64_t timeoutMs) {
  if (directory.empty()) return invalidArgument("file store: empty directory name");
  // Create the directory (and missing parents); several ranks may race here, so EEXIST is fine.
  for (size_t pos = 1; pos <= directory.size(); ++pos) {
    if (pos == directory.size() || directory[pos] == '/') {
      std::string prefix = directory.substr(0, pos);
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        return errnoError("file store: creating directory " + prefix, errno);
      }
    }
  }
  struct stat st;
  if (::stat(directory.c_str(), &st) != 0) {
    return errnoError("file store: " + directory, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    return invalidArgument("file store: " + directory + " exists and is not a directory");
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return errnoError("file store: directory " + directory + " is not writable", errno);
  }
  return std::unique_ptr<Store>(std::make_unique<FileStore>(directory, timeoutMs));
}

}  // namespace braid
