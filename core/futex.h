// Sleeping on a shared-memory word (Linux futex, not process-private, so it works across
// processes that map the same segment). Used where ranks may outnumber cores: a waiter that
// sleeps gives its core to the rank it is waiting for.
#pragma once

#include <atomic>
#include <cstdint>

namespace braid {

/// Sleeps while *word == expected, at most timeoutNs (spurious wake-ups possible).
void futexWait(const void* word, uint32_t expected, uint64_t timeoutNs);
/// Wakes every waiter sleeping on word.
void futexWakeAll(const void* word);

/// Online cores this process may run on.
int usableCores();

}  // namespace braid
