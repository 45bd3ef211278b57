#include "transport/ucx/worker.h"

#include <cstdlib>

#include "core/clock.h"
#include "core/log.h"
#include "core/params.h"

namespace braid::transport::ucx {
namespace {

/// How long a destructor waits for UCX to finish closing endpoints.
constexpr int64_t kCloseWaitMs = 1000;

}  // namespace

Status ucsError(const std::string& what, ucs_status_t status) {
  std::string message = what + ": " + ucs_status_string(status);
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CANCELED:
    case UCS_ERR_IO_ERROR:
      return remoteError(message + " (peer process exited or unreachable?)");
    default:
      return systemError(message);
  }
}

Result<std::shared_ptr<Context>> Context::create(const std::string& netDevice) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucsError("ucx: reading the UCX configuration", st);
  std::string tls;
  if (const char* env = std::getenv("UCX_TLS"); env != nullptr && env[0] != '\0') {
    tls = std::string(env) + " (from UCX_TLS)";
  } else {
    tls = paramString("BRAID_UCX_TLS");
    st = ucp_config_modify(config, "TLS", tls.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return ucsError("ucx: BRAID_UCX_TLS='" + tls + "' is not a valid UCX transport list", st);
    }
  }
  if (const char* env = std::getenv("UCX_NET_DEVICES"); env != nullptr && env[0] != '\0') {
    tls += " on " + std::string(env) + " (from UCX_NET_DEVICES)";
  } else if (!netDevice.empty()) {
    st = ucp_config_modify(config, "NET_DEVICES", netDevice.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return ucsError("ucx: restricting UCX to interface " + netDevice, st);
    }
    tls += " on " + netDevice;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM;
  params.mt_workers_shared = 1;  // workers are created from several threads
  auto context = std::shared_ptr<Context>(new Context());
  st = ucp_init(&params, config, &context->context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    return ucsError("ucx: ucp_init with transports " + tls +
                        " (set BRAID_UCX_TLS or UCX_TLS to transports this machine has)",
                    st);
  }
  context->tls_ = std::move(tls);
  return context;
}

Context::~Context() {
  if (context_ != nullptr) ucp_cleanup(context_);
}

Result<std::unique_ptr<Worker>> Worker::create(std::shared_ptr<Context> context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  std::unique_ptr<Worker> w(new Worker());
  ucs_status_t st = ucp_worker_create(context->get(), &params, &w->worker_);
  if (st != UCS_OK) return ucsError("ucx: ucp_worker_create", st);
  w->context_ = std::move(context);
  return w;
}

Worker::~Worker() {
  if (worker_ == nullptr) return;
  Deadline deadline = Deadline::afterMs(kCloseWaitMs);
  while (!closing_.empty() && !deadline.expired()) {
    ucp_worker_progress(worker_);
    reapCloses();
  }
  for (void* r : closing_) ucp_request_free(r);
  ucp_worker_destroy(worker_);
}

void Worker::progress() {
  for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) {
  }
  if (!closing_.empty()) reapCloses();
}

void Worker::closeEndpoint(ucp_ep_h ep, bool force) {
  if (ep == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &param);
  if (UCS_PTR_IS_PTR(r)) closing_.push_back(r);
}

void Worker::reapCloses() {
  for (size_t i = 0; i < closing_.size();) {
    if (ucp_request_check_status(closing_[i]) != UCS_INPROGRESS) {
      ucp_request_free(closing_[i]);
      closing_[i] = closing_.back();
      closing_.pop_back();
    } else {
      ++i;
    }
  }
}

}  // namespace braid::transport::ucx
