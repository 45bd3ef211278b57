/* braid C API for the Bucketer (include/braid/bucketer.hpp): gradient bucketing with
 * communication/compute overlap. Same conventions as braid.h: every function returns a
 * braidResult_t, never throws; braidBucketerGetLastError() gives the message of the last failed
 * call on this thread.
 *
 *   braidBucketerConfig_t cfg;  braidBucketerConfigInit(&cfg);
 *   braidBucketer_t b;          braidBucketerCreate(comm, &cfg, &b);
 *   braidBucketerRegister(b, id, count, braidFloat32, "fc.weight");  ... for every parameter
 *   braidBucketerFinalize(b);   (collective)
 *   per step: braidBucketerBeginStep(b, 0); braidBucketerMarkReady(b, id, grad) from any thread;
 *             braidBucketerFinishStep(b, &metrics);
 *   braidBucketerDestroy(b);    (before braidCommDestroy) */
#ifndef BRAID_BUCKETER_H_
#define BRAID_BUCKETER_H_

#include <stddef.h>
#include <stdint.h>

#include "braid/braid.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braidBucketer* braidBucketer_t;

typedef enum {
  braidBucketSizingDefault = 0, /* BRAID_BUCKET_CAP_MB (0 = auto) */
  braidBucketSizingFixed = 1,
  braidBucketSizingAuto = 2,
} braidBucketSizing_t;

typedef struct {
  braidBucketSizing_t sizing;
  size_t bucketCapBytes;      /* 0 = BRAID_BUCKET_CAP_MB */
  size_t firstBucketCapBytes; /* 0 = BRAID_FIRST_BUCKET_CAP_MB */
  int average;                /* 1 = average (default), 0 = sum */
  int zeroCopy;               /* gradients live in bucket storage */
  int findUnused;             /* unmarked parameters count as unused */
  int rebuildLayout;          /* rebuild once from the observed ready order (default 1) */
  int maxInFlight;            /* bounded launch window (default 2) */
  const char* metricsFile;    /* NULL = BRAID_METRICS_FILE; written by the engine thread after
                                 each finishStep, complete once the Bucketer is destroyed */
  const char* codec;          /* codec spec ("fp16", "powersgd:rank=4", ...); NULL = BRAID_CODEC */
  size_t codecMinBytes;       /* smaller buckets uncompressed; 0 = BRAID_CODEC_MIN_BYTES */
} braidBucketerConfig_t;

typedef struct {
  uint64_t step;
  int communicated;
  int rebuilt;
  double stepMs, computeMs, commMs, exposedMs, eta, overlap;
  uint64_t bytes;
  uint32_t buckets;
  double maxSkewMs;
  int slowestRank;
  uint64_t wireBytes; /* bytes handed to collectives (compressed payloads) */
} braidStepMetrics_t;

/** Fills cfg with the defaults. */
braidResult_t braidBucketerConfigInit(braidBucketerConfig_t* cfg);
/** comm must outlive the bucketer. cfg may be NULL (defaults). */
braidResult_t braidBucketerCreate(braidComm_t comm, const braidBucketerConfig_t* cfg,
                                  braidBucketer_t* bucketer);
braidResult_t braidBucketerDestroy(braidBucketer_t bucketer);
/** Same order on every rank; name may be NULL. */
braidResult_t braidBucketerRegister(braidBucketer_t bucketer, uint32_t id, size_t count,
                                    braidDataType_t datatype, const char* name);
/** The same with the tensor's shape (count = product of dims[0..ndims-1]); codecs that see
 *  matrices (PowerSGD) view it as dims[0] x the rest. */
braidResult_t braidBucketerRegisterShaped(braidBucketer_t bucketer, uint32_t id, int ndims,
                                          const size_t* dims, braidDataType_t datatype,
                                          const char* name);
/** Collective: checks registrations agree across ranks and builds the layout. */
braidResult_t braidBucketerFinalize(braidBucketer_t bucketer);
/** Zero-copy mode: where the gradient of id lives (changes at most once, at the rebuild). */
braidResult_t braidBucketerGradientBuffer(braidBucketer_t bucketer, uint32_t id, void** ptr);
braidResult_t braidBucketerBeginStep(braidBucketer_t bucketer, int accumulate);
/** Any thread, any order. Copy mode: grad stays alive and untouched until
 *  braidBucketerFinishStep returns (a gradient alone in its bucket is reduced in place). */
braidResult_t braidBucketerMarkReady(braidBucketer_t bucketer, uint32_t id, void* grad);
braidResult_t braidBucketerMarkUnused(braidBucketer_t bucketer, uint32_t id);
/** Waits for every bucket and writes results back; metrics may be NULL. */
braidResult_t braidBucketerFinishStep(braidBucketer_t bucketer, braidStepMetrics_t* metrics);
/** Message of the last failed braidBucketer* call on this thread ("" when none). */
const char* braidBucketerGetLastError(void);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_BUCKETER_H_ */
