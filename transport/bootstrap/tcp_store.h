// What the TCP store server (tcp_store.cc) lets one connection make it hold or do, and its
// request handling without sockets or threads, for the fuzz target (tests/fuzz/store_server.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/status.h"

namespace braid {

/// A request's key and value; a header announcing more closes the connection.
inline constexpr uint32_t kStoreMaxKeyBytes = 64 << 10;
inline constexpr uint64_t kStoreMaxValueBytes = 1ull << 30;
/// A connection must complete its first request this soon after connecting, and every later one
/// this soon after its first byte; else the server closes it.
inline constexpr int64_t kStoreFirstRequestMs = 10000;
inline constexpr int64_t kStoreRequestMs = 60000;
/// Open connections at most: this, or the process's descriptor limit (RLIMIT_NOFILE) less 64
/// when that is lower (storeConnectionLimit). At the limit a new connection evicts the oldest
/// one that has not completed a request yet, or is closed itself when every open one has (a job
/// of more ranks than the limit needs a higher `ulimit -n` on rank 0).
inline constexpr size_t kStoreMaxConnections = 65536;

/// The connection limit a server started now would keep (see kStoreMaxConnections).
size_t storeConnectionLimit();

namespace detail {

/// Runs the store server's request handling over simulated connections driven by `script`, a
/// sequence of commands (each one byte, some followed by an argument byte):
///   0x00-0x7f  connection c = byte & 7 sends the next n bytes (n = the argument byte)
///   0x80-0x87  connection c connects (closing the one in its slot first)
///   0x88-0x8f  connection c closes
///   0x90-0x97  connection c stops / starts reading its replies
///   0x98-0xff  the clock advances by (argument byte) x 250 ms
/// and checks, after every command, that each connection's buffered input stays within one
/// request plus one read, at most the limit (here 6, below the 8 slots) are open, and that every
/// reply stream is
/// a sequence of well-formed replies; at the end, that a new connection is still served (ping,
/// set, get). kInternal names the first violation.
Status replayStoreServerScript(const uint8_t* script, size_t size);

}  // namespace detail
}  // namespace braid
