// The rendezvous Store: a small key-value service that the ranks of a job share, used at
// communicator creation (connection handles, host identities, the job secret) and by split.
// braid serves its own (a TCP store for torchrun-style and Slurm launches, a file store for
// tests); a framework can hand it its own instead (CommOptions::store), as the Python bindings do
// with any torch.distributed store.
//
// Keys are plain strings; braid prefixes its keys per communicator. Implementations must be safe
// to call from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/deadline.h"
#include "braid/status.h"

namespace braid {

class Store {
 public:
  virtual ~Store() = default;
  /// Sets key to value (overwrites).
  virtual Status set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  /// Waits until key exists, then returns its value; kTimeout at the deadline.
  virtual Result<std::vector<uint8_t>> get(const std::string& key, Deadline deadline) = 0;
  /// Atomically adds delta to an integer key (missing = 0) and returns the new value.
  virtual Result<int64_t> add(const std::string& key, int64_t delta) = 0;
  /// Removes every key that starts with prefix. braid calls it once every rank has left a
  /// communicator, for the communicator's own prefix (a child's keys live beside its parent's,
  /// never under them). Optional: the default keeps the keys and returns ok, so a store without
  /// deletion still works, holding a few KiB more for every communicator a job creates.
  virtual Status erasePrefix(const std::string& prefix) {
    (void)prefix;
    return Status::ok();
  }
};

}  // namespace braid
