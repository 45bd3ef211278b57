// UCP context and worker ownership for the ucx backend. Internal to transport/ucx/.
//
// One ucp_context per Transport (shared by the comms it made), one ucp_worker per connection:
// a connection is used by one thread at a time and connections are independent (transport.h),
// so each worker runs in UCS_THREAD_MODE_SERIALIZED and no lock is taken on the data path. A
// listener's worker becomes its accepted RecvComm's worker.
//
// Transports. UCX's network transports are restricted to the interface braid chose (the one
// whose address goes into handles; UCX_NET_DEVICES overrides): left to itself UCX also wires
// loopback and other interfaces, which fails between hosts that share a kernel (network
// namespaces) and stripes over slower paths. Unless UCX_TLS is set, the context is restricted to BRAID_UCX_TLS (default
// "tcp,sm,self": sockets across hosts, shared memory and CMA within one; no RDMA hardware needed
// here; tcp must stay in the list: UCP's client/server wire-up needs it). Connection setup uses
// UCP's sockaddr client/server path (ucp_listener). Endpoints ask for peer-failure handling
// (UCP_ERR_HANDLING_MODE_PEER), so a dead peer fails the endpoint instead of aborting the process;
// UCX 1.13 then carries data over tcp lanes only (its shared-memory transports lack peer-failure
// support).
//
// Loading. braid_transport links libucp when UCX is found, so every library that contains it
// (libnccl-net-braid.so too, whatever BRAID_NET_TRANSPORT says) loads libucs, which installs
// UCX's fatal-signal handlers at load (UCX_HANDLE_ERRORS; set it to "none" to keep the
// application's), as UCX-linked NCCL net plugins generally do; libucs stays mapped after
// dlclose, so the handlers stay valid. TODO(#4): load this backend as a separate module only when
// "ucx" is chosen.
//
// Lifetime and fork. UCX runs a thread while a context exists, and a child forked meanwhile
// cannot use UCX (the thread and its epoll set stay with the parent). The transport therefore
// creates its context on the first listen/connect and every comm holds it: with no comm open, the
// process holds no UCX resources and may fork.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "braid/status.h"

namespace braid::transport::ucx {

/// Status for a failed UCX call: kRemote for errors that mean the peer is gone or unreachable,
/// kSystem otherwise. `what` says what failed and with whom.
Status ucsError(const std::string& what, ucs_status_t status);

class Context {
 public:
  /// netDevice: the interface UCX may use for network transports (UCX_NET_DEVICES), unless
  /// UCX_NET_DEVICES is set; empty = every interface.
  static Result<std::shared_ptr<Context>> create(const std::string& netDevice);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ucp_context_h get() const { return context_; }
  /// The transports and network devices UCX was restricted to, for messages.
  const std::string& transports() const { return tls_; }

 private:
  Context() = default;
  ucp_context_h context_ = nullptr;
  std::string tls_;
};

/// A worker plus the endpoints it is still closing. Destroying it finishes those closes (bounded)
/// and destroys the worker.
class Worker {
 public:
  static Result<std::unique_ptr<Worker>> create(std::shared_ptr<Context> context);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  ucp_worker_h get() const { return worker_; }
  /// ucp_worker_progress until it reports nothing more to do (bounded); reaps finished closes.
  void progress();
  /// Starts closing ep: flush (pending sends finish) or force (they are dropped). The close
  /// completes during later progress() calls or in the destructor.
  void closeEndpoint(ucp_ep_h ep, bool force);

 private:
  Worker() = default;
  void reapCloses();

  std::shared_ptr<Context> context_;
  ucp_worker_h worker_ = nullptr;
  std::vector<void*> closing_;  ///< close requests in flight
};

}  // namespace braid::transport::ucx
