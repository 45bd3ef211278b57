// The Bucketer's C API: a thin noexcept layer over braid::Bucketer; codes map one-to-one.
#include "braid/bucketer.h"

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "braid/bucketer.hpp"
#include "braid/comm.hpp"
#include "collectives/c_api_internal.h"


struct braidBucketer {
  std::unique_ptr<braid::Bucketer> impl;
};

namespace {

using braid::capi::badArg;
using braid::capi::guarded;
using braid::capi::toResult;

}  // namespace

extern "C" {

braidResult_t braidBucketerConfigInit(braidBucketerConfig_t* cfg) {
  if (cfg == nullptr) return badArg("config is null");
  *cfg = braidBucketerConfig_t{};
  cfg->sizing = braidBucketSizingDefault;
  cfg->average = 1;
  cfg->rebuildLayout = 1;
  cfg->maxInFlight = 2;
  return braidSuccess;
}

braidResult_t braidBucketerCreate(braidComm_t comm, const braidBucketerConfig_t* cfg,
                                  braidBucketer_t* bucketer) {
  return guarded([&] {
    if (bucketer == nullptr) return badArg("bucketer is null");
    if (comm == nullptr || !comm->comm) return badArg("communicator is null");
    braidBucketerConfig_t c;
    if (cfg != nullptr) {
      c = *cfg;
    } else {
      (void)braidBucketerConfigInit(&c);
    }
    braid::BucketerOptions o;
    o.sizing = static_cast<braid::BucketSizing>(c.sizing);
    o.bucketCapBytes = c.bucketCapBytes;
    o.firstBucketCapBytes = c.firstBucketCapBytes;
    o.reduction = c.average ? braid::GradReduction::kAverage : braid::GradReduction::kSum;
    o.zeroCopy = c.zeroCopy != 0;
    o.findUnused = c.findUnused != 0;
    o.rebuildLayout = c.rebuildLayout != 0;
    o.maxInFlight = c.maxInFlight;
    if (c.metricsFile != nullptr) o.metricsFile = c.metricsFile;
    if (c.codec != nullptr) o.codec = c.codec;
    o.codecMinBytes = c.codecMinBytes;
    auto r = braid::Bucketer::create(comm->comm.get(), o);
    if (!r.isOk()) return toResult(r.status());
    *bucketer = new braidBucketer{std::move(*r)};
    return braidSuccess;
  });
}

braidResult_t braidBucketerDestroy(braidBucketer_t bucketer) {
  return guarded([&] {
    delete bucketer;
    return braidSuccess;
  });
}

#define BRAID_C_CHECK_BUCKETER(b) \
  if ((b) == nullptr || !(b)->impl) return badArg("bucketer is null")

braidResult_t braidBucketerRegister(braidBucketer_t bucketer, uint32_t id, size_t count,
                                    braidDataType_t datatype, const char* name) {
  return guarded([&] {
    BRAID_C_CHECK_BUCKETER(bucketer);
    return toResult(bucketer->impl->registerParam(id, count, braid::capi::toType(datatype),
                                                  name == nullptr ? "" : name));
  });
}

braidResult_t braidBucketerRegisterShaped(braidBucketer_t bucketer, uint32_t id, int ndims,
                                          const size_t* dims, braidDataType_t datatype,
                                          const char* name) {
  return guarded([&] {
    BRAID_C_CHECK_BUCKETER(bucketer);
    if (ndims < 0 || (ndims > 0 && dims == nullptr)) return badArg("dims is null or ndims < 0");
    std::vector<size_t> shape(dims, dims + ndims);
    return toResult(bucketer->impl->registerParam(id, shape, braid::capi::toType(datatype),
                                                  name == nullptr ? "" : name));
  });
}

braidResult_t braidBucketerFinalize(braidBucketer_t bucketer) {
  return guarded([&] {
    BRAID_C_CHECK_BUCKETER(bucketer);
    return toResult(bucketer->impl->finalize());
  });
}

braidResult_t braidBucketerGradientBuffer(braidBucketer_t bucketer, uint32_t id, void** ptr) {
  return guarded([&] {
    BRAID_C_CHECK_BUCKETER(bucketer);
    if (ptr == nullptr) return badArg("ptr is null");
    auto r = bucketer->impl->gradientBuffer(id);
    if (!r.isOk()) return toResult(r.status());
    *ptr = *r;
    return braidSuccess;
  });
}

braidResult_t braidBucketerBeginStep(braidBucketer_t bucketer, int accumulate) {
  return guarded([&] {
    BRAID_C_CHECK_BUCKETER(bucketer);
    return toResult(bucketer->impl->beginStep(accumulate != 0));
  });
}

braidResult_t braidBucketerMarkReady(braidBucketer_t bucketer, uint32_t id, void* grad) {
  return guarded([&] {
    BRAID_C_CHECK_BUCKETER(bucketer);
    return toResult(bucketer->impl->markReady(id, grad));
  });
}

braidResult_t braidBucketerMarkUnused(braidBucketer_t bucketer, uint32_t id) {
  return guarded([&] {
    BRAID_C_CHECK_BUCKETER(bucketer);
    return toResult(bucketer->impl->markUnused(id));
  });
}

braidResult_t braidBucketerFinishStep(braidBucketer_t bucketer, braidStepMetrics_t* metrics) {
  return guarded([&] {
    BRAID_C_CHECK_BUCKETER(bucketer);
    auto r = bucketer->impl->finishStep();
    if (!r.isOk()) return toResult(r.status());
    if (metrics != nullptr) {
      const braid::StepMetrics& m = *r;
      metrics->step = m.step;
      metrics->communicated = m.communicated;
      metrics->rebuilt = m.rebuilt;
      metrics->stepMs = m.stepMs;
      metrics->computeMs = m.computeMs;
      metrics->commMs = m.commMs;
      metrics->exposedMs = m.exposedMs;
      metrics->eta = m.eta;
      metrics->overlap = m.overlap;
      metrics->bytes = m.bytes;
      metrics->buckets = static_cast<uint32_t>(m.buckets.size());
      metrics->maxSkewMs = m.maxSkewMs;
      metrics->slowestRank = m.slowestRank;
      metrics->wireBytes = m.wireBytes;
    }
    return braidSuccess;
  });
}

const char* braidBucketerGetLastError(void) { return braid::capi::lastError().c_str(); }

}  // extern "C"
