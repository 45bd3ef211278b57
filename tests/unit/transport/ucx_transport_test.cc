// ucx-specific behaviour: hello validation against raw UCP clients (garbage, wrong nonce, wrong
// secret), the transport restriction (BRAID_UCX_TLS, UCX_TLS), the handle layout, and that a
// process without open comms holds no UCX resources (so it may fork). The generic behaviour every
// backend shares is in transport_test.cc (instantiated for "ucx" there).
#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <ucp/api/ucp.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/params.h"
#include "tests/unit/transport/request_helpers.h"
#include "transport/socket.h"
#include "transport/transport.h"
#include "transport/ucx/connection.h"

namespace braid::transport {
namespace {

using test_util::postRecv;
using test_util::postSend;
using test_util::waitRequest;

constexpr uint64_t kSecret = 0x2468ace013579bdfull;

int countThreads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

/// The handle layout of transport/ucx/transport.cc, mirrored (a change there must be mirrored).
struct UcxHandleView {
  uint32_t magic;
  uint16_t kind;
  uint16_t version;
  uint64_t jobSecret;
  uint64_t nonce;
  uint32_t checksum;
  uint32_t reserved;
  SocketAddress::Packed address;
};

/// A raw UCP client: connects to a listener's address and sends whatever bytes it is told on the
/// stream API, as a foreign or buggy peer would.
class RawClient {
 public:
  explicit RawClient(const SocketAddress& address) {
    ucp_config_t* config = nullptr;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return;
    ucp_config_modify(config, "TLS", "tcp,sm,self");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM;
    ucs_status_t st = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (st != UCS_OK) return;
    ucp_worker_params_t wp{};
    if (ucp_worker_create(context_, &wp, &worker_) != UCS_OK) return;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = address.get();
    ep.sockaddr.addrlen = address.length();
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t) { *static_cast<bool*>(arg) = true; };
    ep.err_handler.arg = &failed_;
    if (ucp_ep_create(worker_, &ep, &ep_) != UCS_OK) ep_ = nullptr;
  }
  ~RawClient() {
    for (void* r : pending_) ucp_request_free(r);
    if (ep_ != nullptr) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(ep_, &p);
      if (UCS_PTR_IS_PTR(r)) {
        Deadline d = Deadline::afterMs(2000);
        while (ucp_request_check_status(r) == UCS_INPROGRESS && !d.expired()) progress();
        ucp_request_free(r);
      }
    }
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
  }
  bool ok() const { return ep_ != nullptr; }
  bool failed() const { return failed_; }
  void progress() { ucp_worker_progress(worker_); }
  void send(const void* data, size_t size) {
    bytes_.assign(static_cast<const char*>(data), static_cast<const char*>(data) + size);
    ucp_request_param_t p{};
    ucs_status_ptr_t r = ucp_stream_send_nbx(ep_, bytes_.data(), bytes_.size(), &p);
    if (UCS_PTR_IS_PTR(r)) pending_.push_back(r);
  }

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;
  std::vector<char> bytes_;
  std::vector<void*> pending_;
};

class UcxTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = make(kSecret);
    if (!t.isOk() && t.status().message().find("not built yet") != std::string::npos) {
      GTEST_SKIP() << t.status().toString();
    }
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    transport_ = std::move(t).value();
  }
  static Result<std::unique_ptr<Transport>> make(uint64_t secret) {
    TransportOptions options;
    options.jobSecret = secret;
    options.tcpAddress = "127.0.0.1";
    options.timeoutMs = 1500;  // the hello deadline of the refusal test
    return createTransport("ucx", options);
  }

  /// Drives accept() for ms; the RecvComm, if one came.
  std::unique_ptr<RecvComm> acceptFor(ListenComm* listen, int64_t ms, RawClient* client) {
    Deadline deadline = Deadline::afterMs(ms);
    std::unique_ptr<RecvComm> recv;
    while (!recv && !deadline.expired()) {
      Status s = transport_->accept(listen, &recv);
      EXPECT_TRUE(s.isOk()) << s.toString();
      if (client != nullptr) client->progress();
    }
    return recv;
  }

  std::unique_ptr<Transport> transport_;
};

TEST_F(UcxTransportTest, HandleCarriesTheListenAddressAndFitsTheLimit) {
  Handle h;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(transport_->listen(&h, &listen).isOk());
  UcxHandleView v;
  std::memcpy(&v, h.bytes, sizeof(v));
  EXPECT_EQ(v.magic, 0x58435542u);
  EXPECT_EQ(v.jobSecret, kSecret);
  EXPECT_NE(v.nonce, 0u);
  Result<SocketAddress> a = SocketAddress::unpack(v.address);
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(a.value().hostString(), "127.0.0.1");
  EXPECT_GT(a.value().port(), 0);
  static_assert(sizeof(UcxHandleView) <= kHandleSize);
}

// Raw peers that reach the listener but do not present a valid hello are refused; the real
// peer is accepted afterwards.
TEST_F(UcxTransportTest, ForeignHellosAreRefusedAndTheRealPeerStillConnects) {
  Handle h;
  std::unique_ptr<ListenComm> listen;
  ASSERT_TRUE(transport_->listen(&h, &listen).isOk());
  UcxHandleView v;
  std::memcpy(&v, h.bytes, sizeof(v));
  SocketAddress address = SocketAddress::unpack(v.address).value();

  Hello good{};
  good.magic = ucx::kUcxHandshake.helloMagic;
  good.version = ucx::kUcxHandshake.version;
  good.nstreams = 1;
  good.jobSecret = kSecret;
  good.nonce = v.nonce;
  good.connectionId = 77;
  struct Case {
    const char* what;
    Hello hello;
    size_t bytes;
  };
  Hello wrongNonce = good;
  wrongNonce.nonce ^= 1;
  Hello wrongSecret = good;
  wrongSecret.jobSecret ^= 0xff;
  Hello garbage;
  std::memset(&garbage, 0xa5, sizeof(garbage));
  const std::vector<Case> cases = {{"wrong nonce", wrongNonce, sizeof(Hello)},
                                   {"wrong secret", wrongSecret, sizeof(Hello)},
                                   {"garbage", garbage, sizeof(Hello)},
                                   {"silent (no hello)", good, 0}};
  for (const Case& c : cases) {
    RawClient client(address);
    ASSERT_TRUE(client.ok()) << c.what;
    if (c.bytes > 0) client.send(&c.hello, c.bytes);
    // Longer than the hello deadline for the silent peer, so that it is refused too.
    std::unique_ptr<RecvComm> recv = acceptFor(listen.get(), c.bytes > 0 ? 500 : 2000, &client);
    EXPECT_EQ(recv, nullptr) << "a connection with " << c.what << " was accepted";
  }
  std::unique_ptr<SendComm> send;
  ASSERT_TRUE(transport_->connect(h, &send).isOk());
  Deadline deadline = Deadline::afterMs(20000);
  std::unique_ptr<RecvComm> recv;
  Request* sreq = nullptr;
  const uint64_t value = 0x1122334455667788ull;
  while (!recv && !deadline.expired()) {
    ASSERT_TRUE(transport_->accept(listen.get(), &recv).isOk());
    bool ready = false;
    ASSERT_TRUE(transport_->progressConnect(send.get(), &ready).isOk());
    if (sreq == nullptr && ready) {
      ASSERT_TRUE(transport_->isend(send.get(), &value, sizeof(value), Meta{}, &sreq).isOk());
    }
  }
  ASSERT_NE(recv, nullptr);
  uint64_t got = 0;
  Request* rreq = nullptr;
  ASSERT_TRUE(postRecv(transport_.get(), recv.get(), &got, sizeof(got), nullptr, &rreq, deadline)
                  .isOk());
  size_t n = 0;
  ASSERT_TRUE(waitRequest(transport_.get(), rreq, &n, deadline).isOk());
  ASSERT_TRUE(waitRequest(transport_.get(), sreq, nullptr, deadline).isOk());
  EXPECT_EQ(n, sizeof(value));
  EXPECT_EQ(got, value);
}

TEST_F(UcxTransportTest, NoUcxResourcesWithoutOpenComms) {
  // UCX runs a thread per context; the transport holds one only while comms are open, so that a
  // process may fork (and its child use UCX) between jobs.
  const int before = countThreads();
  {
    Handle h;
    std::unique_ptr<ListenComm> listen;
    ASSERT_TRUE(transport_->listen(&h, &listen).isOk());
    EXPECT_GT(countThreads(), before);
  }
  EXPECT_EQ(countThreads(), before);
}

TEST_F(UcxTransportTest, BadTransportListIsNamedInTheError) {
  if (std::getenv("UCX_TLS") != nullptr) GTEST_SKIP() << "UCX_TLS is set; BRAID_UCX_TLS unused";
  setParamForTesting("BRAID_UCX_TLS", "no-such-transport");
  auto t = make(kSecret);
  ASSERT_TRUE(t.isOk());
  Handle h;
  std::unique_ptr<ListenComm> listen;
  Status s = t.value()->listen(&h, &listen);
  setParamForTesting("BRAID_UCX_TLS", "");
  if (s.isOk()) GTEST_SKIP() << "this UCX accepts unknown transport names";
  EXPECT_NE(s.message().find("no-such-transport"), std::string::npos) << s.toString();
}

}  // namespace
}  // namespace braid::transport
