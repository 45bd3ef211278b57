// The ucx backend's setup half: handles, listen/connect/accept and the Transport entry points.
// The data path (tags, framing, refusals, errors) is in connection.h; contexts and workers in
// worker.h.
//
// listen() creates a worker and a UCP sockaddr listener on port 0 of the interface tcp would use
// (TransportOptions::tcpAddress, else BRAID_SOCKET_IFNAME), and writes a handle {magic, kind,
// version, job secret, random nonce, address, checksum}: 56 of the 128 bytes. connect()
// validates the handle (kInvalidArgument for a foreign, corrupted or other-job handle), creates a
// worker and a client endpoint to that address and returns; the endpoint first sends a hello
// {magic, job secret, nonce, connection id; stream 0 of 1} on UCP's stream API. accept()
// progresses the listener's worker, creates an endpoint for each connection request, reads each
// one's hello without blocking, refuses (closes and warns, naming the remote address) those with
// a wrong secret or nonce, garbage, or no hello within TransportOptions::timeoutMs (those checks
// are transport/handshake.h's, shared with tcp), and returns the first valid one as the
// RecvComm, which takes over the worker; the listener then closes (it serves exactly one
// connection).
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "core/params.h"
#include "transport/backends.h"
#include "transport/handshake.h"
#include "transport/socket.h"
#include "transport/ucx/connection.h"
#include "transport/ucx/worker.h"

namespace braid::transport {
namespace {

using ucx::Context;
using ucx::UcxConn;
using ucx::UcxRecvComm;
using ucx::UcxRequest;
using ucx::UcxSendComm;
using ucx::Worker;

struct UcxHandle {
  HandleHeader header;
  uint32_t checksum;  ///< FNV-1a of the handle with this field zero
  uint32_t reserved;
  SocketAddress::Packed address;
};
static_assert(sizeof(UcxHandle) <= kHandleSize, "ucx handle must fit kHandleSize");
static_assert(sizeof(UcxHandle) >= 48, "every byte the plugin's handle test flips is checked");

class UcxListenComm : public HandshakeListenComm {
 public:
  /// A connection whose hello has not been validated yet.
  struct Pending : PendingHello {
    using PendingHello::PendingHello;
    std::unique_ptr<UcxRecvComm> conn;  ///< the endpoint's error handler points at it
    ucp_ep_h ep = nullptr;
  };

  ~UcxListenComm() override {
    if (worker == nullptr) return;  // accepted: the RecvComm owns the worker
    for (ucp_conn_request_h r : requests) ucp_listener_reject(listener, r);
    if (listener != nullptr) ucp_listener_destroy(listener);
    for (Pending& p : pending) worker->closeEndpoint(p.ep, /*force=*/true);
    worker.reset();
  }

  static void onConnectionRequest(ucp_conn_request_h request, void* arg) {
    static_cast<UcxListenComm*>(arg)->requests.push_back(request);
  }

  std::unique_ptr<Worker> worker;
  ucp_listener_h listener = nullptr;
  std::vector<ucp_conn_request_h> requests;  ///< from the listener, not yet turned into endpoints
  std::vector<Pending> pending;
};

class UcxTransport : public Transport {
 public:
  explicit UcxTransport(const TransportOptions& options)
      : options_(options), handshake_(ucx::kUcxHandshake, options) {}

  const char* name() const override { return "ucx"; }

  Status listen(Handle* handle, std::unique_ptr<ListenComm>* listenComm) override {
    BRAID_ASSIGN_OR_RETURN(SocketAddress address, handshake_.listenAddress(handle, listenComm));
    BRAID_ASSIGN_OR_RETURN(std::shared_ptr<Context> context, context());
    auto lc = std::make_unique<UcxListenComm>();
    BRAID_ASSIGN_OR_RETURN(lc->worker, Worker::create(context));
    ucp_listener_params_t params{};
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = address.get();
    params.sockaddr.addrlen = address.length();
    params.conn_handler.cb = &UcxListenComm::onConnectionRequest;
    params.conn_handler.arg = lc.get();
    ucs_status_t st = ucp_listener_create(lc->worker->get(), &params, &lc->listener);
    if (st != UCS_OK) {
      return ucx::ucsError("ucx listen on " + address.hostString() + " (UCX transports " +
                               context->transports() + ")",
                           st);
    }
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    st = ucp_listener_query(lc->listener, &attr);
    if (st != UCS_OK) return ucx::ucsError("ucx listen: ucp_listener_query", st);
    SocketAddress bound =
        SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&attr.sockaddr),
                                    attr.sockaddr.ss_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                                        : sizeof(sockaddr_in));
    address.setPort(bound.port());
    BRAID_ASSIGN_OR_RETURN(lc->nonce, secureRandom64());
    lc->address = address.toString();

    UcxHandle h;
    std::memset(&h, 0, sizeof(h));
    h.header = handshake_.handleHeader(lc->nonce);
    h.address = address.pack();
    writeHandle(&h, handle);
    BRAID_INFO("ucx: listening on %s (transports %s)", lc->address.c_str(),
               context->transports().c_str());
    *listenComm = std::move(lc);
    return Status::ok();
  }

  Status connect(const Handle& handle, std::unique_ptr<SendComm>* sendComm) override {
    UcxHandle h;
    BRAID_RETURN_IF_ERROR(handshake_.readHandle(handle, sendComm, &h));
    BRAID_ASSIGN_OR_RETURN(Handshake::Dial dial, handshake_.dial(h.header, h.address, 1));
    BRAID_ASSIGN_OR_RETURN(std::shared_ptr<Context> context, context());
    BRAID_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, Worker::create(std::move(context)));

    auto comm = std::make_unique<UcxSendComm>(dial.address.toString());
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = dial.address.get();
    params.sockaddr.addrlen = dial.address.length();
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxConn::onEndpointError;
    params.err_handler.arg = static_cast<UcxConn*>(comm.get());
    ucp_ep_h ep = nullptr;
    ucs_status_t st = ucp_ep_create(worker->get(), &params, &ep);
    if (st != UCS_OK) {
      return ucx::ucsError("ucx connect to peer " + comm->peer(), st);
    }
    comm->attach(std::move(worker), ep, ucx::connectionTag(h.header.nonce, dial.hello.connectionId),
                 &dial.hello);
    comm->progress();
    *sendComm = std::move(comm);
    return Status::ok();
  }

  Status progressConnect(SendComm* comm, bool* ready) override {
    if (comm == nullptr || ready == nullptr) return invalidArgument("ucx progressConnect: null");
    auto* c = static_cast<UcxSendComm*>(comm);
    c->progress();
    // UCP queues sends until the endpoint is wired up: the connection is usable at once.
    *ready = true;
    return c->broken();
  }

  Status accept(ListenComm* listenComm, std::unique_ptr<RecvComm>* recvComm) override {
    BRAID_RETURN_IF_ERROR(handshake_.checkAccept(listenComm, recvComm));
    auto* lc = static_cast<UcxListenComm*>(listenComm);
    lc->worker->progress();
    createEndpoints(lc);
    readHellos(lc);
    for (size_t i = 0; i < lc->pending.size(); ++i) {
      UcxListenComm::Pending& p = lc->pending[i];
      if (!p.complete()) continue;
      std::unique_ptr<UcxRecvComm> conn = std::move(p.conn);
      ucp_ep_h ep = p.ep;
      lc->pending.erase(lc->pending.begin() + static_cast<std::ptrdiff_t>(i));
      // The listener is done: close whatever else is pending.
      for (ucp_conn_request_h r : lc->requests) ucp_listener_reject(lc->listener, r);
      lc->requests.clear();
      ucp_listener_destroy(lc->listener);
      lc->listener = nullptr;
      for (UcxListenComm::Pending& other : lc->pending) {
        lc->worker->closeEndpoint(other.ep, /*force=*/true);
      }
      lc->pending.clear();
      BRAID_INFO("ucx: accepted %s on %s", conn->peer().c_str(), lc->address.c_str());
      conn->attach(std::move(lc->worker), ep,
                   ucx::connectionTag(lc->nonce, conn->helloConnectionId));
      lc->accepted = true;
      conn->progress();
      *recvComm = std::move(conn);
      return Status::ok();
    }
    return Status::ok();
  }

  Status isend(SendComm* comm, const void* data, size_t size, const Meta& meta,
               Request** request) override {
    BRAID_RETURN_IF_ERROR(checkPost("ucx", "isend", comm, data, size, request));
    auto* c = static_cast<UcxSendComm*>(comm);
    c->progress();
    if (!c->broken().isOk()) return c->broken();
    UcxRequest* r = c->postSend(data, size, meta);
    if (r == nullptr) return Status::ok();
    *request = reinterpret_cast<Request*>(r);
    return Status::ok();
  }

  Status irecv(RecvComm* comm, void* data, size_t size, Meta* meta, Request** request) override {
    BRAID_RETURN_IF_ERROR(checkPost("ucx", "irecv", comm, data, size, request));
    auto* c = static_cast<UcxRecvComm*>(comm);
    // A peer that is gone may still have messages here to deliver (test() reports kRemote once
    // there are none); any other error ends the connection.
    if (!c->broken().isOk() && c->broken().code() != Code::kRemote) return c->broken();
    UcxRequest* r = c->postRecv(data, size, meta);
    if (r == nullptr) return Status::ok();
    *request = reinterpret_cast<Request*>(r);
    return Status::ok();
  }

  Status test(Request* request, bool* done, size_t* size) override {
    auto* r = reinterpret_cast<UcxRequest*>(request);
    BRAID_RETURN_IF_ERROR(checkTest("ucx", r, ucx::kUcxMagics.request, done));
    return finishTest(r->conn, r, done, size);
  }

 private:
  /// The UCP context, created on first use and destroyed with the last comm that uses it: UCX
  /// runs a thread while a context exists, and a process forked meanwhile cannot use UCX.
  Result<std::shared_ptr<Context>> context() {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Context> c = context_.lock();
    if (c == nullptr) {
      BRAID_ASSIGN_OR_RETURN(c, Context::create(interfaceName()));
      context_ = c;
    }
    return c;
  }

  /// The interface whose address listen() puts into handles (empty when none is found).
  std::string interfaceName() const {
    if (options_.tcpAddress.empty()) {
      Result<InterfaceAddress> chosen = selectInterface(paramString("BRAID_SOCKET_IFNAME"));
      return chosen.isOk() ? chosen.value().name : std::string();
    }
    Result<SocketAddress> wanted = SocketAddress::parseNumeric(options_.tcpAddress, 0);
    if (!wanted.isOk()) return std::string();
    for (const InterfaceAddress& i : listInterfaces()) {
      if (i.address.hostString() == wanted.value().hostString()) return i.name;
    }
    return std::string();
  }

  void refuse(UcxListenComm* lc, size_t i, const std::string& why) {
    UcxListenComm::Pending& p = lc->pending[i];
    handshake_.refused(p.conn->peer(), *lc, why);
    lc->worker->closeEndpoint(p.ep, /*force=*/true);
    lc->pending.erase(lc->pending.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void createEndpoints(UcxListenComm* lc) {
    for (ucp_conn_request_h request : lc->requests) {
      std::string peer = "<unknown>";
      ucp_conn_request_attr_t attr{};
      attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
      if (ucp_conn_request_query(request, &attr) == UCS_OK) {
        peer = SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&attr.client_address),
                                           attr.client_address.ss_family == AF_INET6
                                               ? sizeof(sockaddr_in6)
                                               : sizeof(sockaddr_in))
                   .toString();
      }
      if (handshake_.tooManyPending(peer, *lc, lc->pending.size())) {
        ucp_listener_reject(lc->listener, request);
        continue;
      }
      UcxListenComm::Pending p(nowNs());
      p.conn = std::make_unique<UcxRecvComm>(peer);
      ucp_ep_params_t params{};
      params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER;
      params.conn_request = request;
      params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      params.err_handler.cb = &UcxConn::onEndpointError;
      params.err_handler.arg = static_cast<UcxConn*>(p.conn.get());
      ucs_status_t st = ucp_ep_create(lc->worker->get(), &params, &p.ep);
      if (st != UCS_OK) {
        BRAID_WARN("ucx: could not accept the connection from %s on %s: %s", peer.c_str(),
                   lc->address.c_str(), ucs_status_string(st));
        continue;
      }
      lc->pending.push_back(std::move(p));
    }
    lc->requests.clear();
  }

  void readHellos(UcxListenComm* lc) {
    uint64_t now = nowNs();
    for (size_t i = 0; i < lc->pending.size();) {
      UcxListenComm::Pending& p = lc->pending[i];
      while (!p.complete()) {
        size_t length = 0;
        ucs_status_ptr_t data = ucp_stream_recv_data_nb(p.ep, &length);
        if (data == nullptr || UCS_PTR_IS_ERR(data)) break;
        // Bytes past the hello would be a protocol violation: they are dropped with the hello
        // check failing below only if the hello itself is wrong.
        p.take(data, length);
        ucp_stream_data_release(p.ep, data);
      }
      if (!p.conn->broken().isOk()) {
        refuse(lc, i, "closed before completing its hello (" + p.conn->broken().message() + ")");
        continue;
      }
      std::string why;
      const HelloState state = handshake_.check(p, lc->nonce, now, &why);
      if (state == HelloState::kRefused) {
        refuse(lc, i, why);
        continue;
      }
      if (state == HelloState::kValid) p.conn->helloConnectionId = p.hello().connectionId;
      ++i;
    }
  }

  TransportOptions options_;
  Handshake handshake_;
  std::mutex mu_;
  std::weak_ptr<Context> context_;
};

}  // namespace

Result<std::unique_ptr<Transport>> createUcxTransport(const TransportOptions& options) {
  return std::unique_ptr<Transport>(std::make_unique<UcxTransport>(options));
}

}  // namespace braid::transport
