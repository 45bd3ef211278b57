// Whether another process of the job still runs (for waits on a peer that shares memory and has
// no socket whose closing would tell).
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/status.h"

namespace braid {

/// True when pid no longer runs: gone, or a zombie its parent has not reaped yet (kill(pid, 0)
/// alone still succeeds for a zombie, so a rank killed under a launcher that reaps late would
/// look alive until the timeout). False for pid <= 0 and where /proc cannot say.
bool processGone(int pid);

/// Copies `bytes` from address `remote` of process pid into dst (process_vm_readv, Linux's
/// cross-memory attach: one copy between two private buffers, no shared mapping), looping over
/// partial transfers. Needs ptrace access to pid (same user; with Yama's ptrace_scope 1 only a
/// parent or a process that allowed us with PR_SET_PTRACER); errors name errno and what.
Status readProcessMemory(int pid, void* dst, uint64_t remote, size_t bytes, const char* what);
/// The same towards pid: src's bytes to address `remote` of process pid (process_vm_writev).
Status writeProcessMemory(int pid, uint64_t remote, const void* src, size_t bytes,
                          const char* what);

}  // namespace braid
