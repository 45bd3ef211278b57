// Whether another process of the job still runs (for waits on a peer that shares memory and has
// no socket whose closing would tell).
#pragma once

namespace braid {

/// True when pid no longer runs: gone, or a zombie its parent has not reaped yet (kill(pid, 0)
/// alone still succeeds for a zombie, so a rank killed under a launcher that reaps late would
/// look alive until the timeout). False for pid <= 0 and where /proc cannot say.
bool processGone(int pid);

}  // namespace braid
