// The tuner's C-boundary functions shared by the version adapters: they never throw and always
// succeed (an error would fail NCCL's communicator creation or the collective, ABI doc §3);
// anything unexpected is logged and becomes "no opinion".
#pragma once

#include <cstddef>

#include "plugin/nccl_abi.h"

namespace braid::plugin::tuner {

abi::Result initContext(void** ctx, size_t nRanks, size_t nNodes, abi::Logger log) noexcept;
/// costTable: NCCL's contiguous float[numAlgo][numProto] passed as float** (a cast, not rows).
abi::Result collInfo(void* ctx, int collType, size_t nBytes, float** costTable, int numAlgo,
                     int numProto, int* nChannels) noexcept;
abi::Result finalizeContext(void* ctx) noexcept;

}  // namespace braid::plugin::tuner
