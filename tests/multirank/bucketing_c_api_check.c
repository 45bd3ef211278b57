/* The Bucketer's C API (include/braid/bucketer.h), compiled as C. Run under braid-run: every rank
 * registers three parameters, runs an accumulation step and a communicating step, and checks the
 * summed result (each rank contributes 1 + rank per micro-step). Exits 0 when all checks pass. */
#include <stdio.h>
#include <string.h>

#include "braid/braid.h"
#include "braid/bucketer.h"

#define CHECK(call)                                                                  \
  do {                                                                               \
    braidResult_t r_ = (call);                                                       \
    if (r_ != braidSuccess) {                                                        \
      fprintf(stderr, "FAIL %s: %s (%s)\n", #call, braidGetErrorString(r_),          \
              braidBucketerGetLastError());                                          \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(void) {
  braidComm_t comm;
  int rank, size, i, step;
  float g[3][100];
  braidBucketerConfig_t cfg;
  braidBucketer_t b;
  braidStepMetrics_t m;
  CHECK(braidCommInitFromEnv(&comm));
  CHECK(braidCommUserRank(comm, &rank));
  CHECK(braidCommCount(comm, &size));
  CHECK(braidBucketerConfigInit(&cfg));
  cfg.average = 0;
  cfg.bucketCapBytes = 512;
  cfg.firstBucketCapBytes = 512;
  cfg.sizing = braidBucketSizingFixed;
  CHECK(braidBucketerCreate(comm, &cfg, &b));
  for (i = 0; i < 3; ++i) CHECK(braidBucketerRegister(b, (uint32_t)i, 100, braidFloat32, "w"));
  CHECK(braidBucketerFinalize(b));
  for (step = 0; step < 2; ++step) {
    CHECK(braidBucketerBeginStep(b, step == 0));
    for (i = 2; i >= 0; --i) {
      int j;
      for (j = 0; j < 100; ++j) g[i][j] = (float)(1 + rank);
      CHECK(braidBucketerMarkReady(b, (uint32_t)i, g[i]));
    }
    CHECK(braidBucketerFinishStep(b, &m));
  }
  {
    const float want = (float)(size * (size + 1)); /* two micro-steps of sum(1 + r) */
    for (i = 0; i < 3; ++i) {
      if (g[i][0] != want || g[i][99] != want) {
        fprintf(stderr, "FAIL rank %d: param %d = %g, expected %g\n", rank, i, g[i][0], want);
        return 1;
      }
    }
  }
  if (m.communicated != 1 || m.bytes != 1200 || m.buckets < 2) {
    fprintf(stderr, "FAIL rank %d: metrics communicated=%d bytes=%llu buckets=%u\n", rank,
            m.communicated, (unsigned long long)m.bytes, m.buckets);
    return 1;
  }
  if (braidBucketerMarkReady(b, 99, g[0]) != braidInvalidUsage &&
      braidBucketerGetLastError()[0] == '\0') {
    fprintf(stderr, "FAIL: markReady outside a step was accepted\n");
    return 1;
  }
  CHECK(braidBucketerDestroy(b));
  CHECK(braidCommDestroy(comm));
  if (rank == 0) printf("# bucketing C API: ok\n");
  return 0;
}
