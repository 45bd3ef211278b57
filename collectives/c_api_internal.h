// What the C handle braidComm_t points to: shared by every C API file (collectives/c_api.cc,
// bucketing/c_api.cc) so that there is exactly one definition.
#pragma once

#include <memory>

#include "braid/braid.h"
#include "braid/comm.hpp"

struct braidComm {
  std::unique_ptr<braid::Communicator> comm;
};
