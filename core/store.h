// The rendezvous Store: a small key-value service that ranks use to exchange connection handles
// and host information at communicator creation. Implementations live in transport/bootstrap/
// (TCP store for torchrun-style launches and MPI, file store for tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/status.h"
#include "core/clock.h"

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
};

}  // namespace braid
