/* The installed C API from a plain C program, built with nothing but
 *   cc c_consumer.c $(pkg-config --cflags --libs braid)      (that is: -I... -L... -lbraid)
 * A communicator from the launcher's environment, an int32 all-reduce and a broadcast checked
 * against what every rank can compute, the C Bucketer for one step, and an error code. */
#include <braid/braid.h>
#include <braid/bucketer.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    braidResult_t r_ = (call);                                                       \
    if (r_ != braidSuccess) {                                                        \
      fprintf(stderr, "c_consumer: %s failed: %s (%s)\n", #call, braidGetErrorString(r_), \
              braidGetLastError(comm));                                              \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(void) {
  braidComm_t comm = NULL;
  int version = 0, rank = -1, size = 0;
  CHECK(braidGetVersion(&version));
  CHECK(braidCommInitFromEnv(&comm));
  CHECK(braidCommUserRank(comm, &rank));
  CHECK(braidCommCount(comm, &size));

  enum { N = 1021 };
  int* v = malloc(N * sizeof(int));
  for (int i = 0; i < N; ++i) v[i] = rank * 1000 + i;
  CHECK(braidAllReduce(v, v, N, braidInt32, braidSum, comm));
  for (int i = 0; i < N; ++i) {
    const int want = 1000 * size * (size - 1) / 2 + size * i;
    if (v[i] != want) {
      fprintf(stderr, "c_consumer rank %d: allreduce[%d] = %d, want %d\n", rank, i, v[i], want);
      return 1;
    }
  }
  double root_value = rank == size - 1 ? 42.5 : -1.0;
  CHECK(braidBroadcast(&root_value, &root_value, 1, braidFloat64, size - 1, comm));
  if (root_value != 42.5) {
    fprintf(stderr, "c_consumer rank %d: broadcast gave %g\n", rank, root_value);
    return 1;
  }
  /* An invalid root is an error code, not a crash; the communicator stays usable. */
  if (braidBroadcast(v, v, N, braidInt32, size + 3, comm) != braidInvalidArgument) {
    fprintf(stderr, "c_consumer rank %d: a bad root was not braidInvalidArgument\n", rank);
    return 1;
  }

  braidBucketerConfig_t cfg;
  braidBucketer_t bucketer = NULL;
  CHECK(braidBucketerConfigInit(&cfg));
  cfg.average = 0;
  CHECK(braidBucketerCreate(comm, &cfg, &bucketer));
  float grad[5] = {1, 2, 3, 4, 5};
  CHECK(braidBucketerRegister(bucketer, 0, 5, braidFloat32, "w"));
  CHECK(braidBucketerFinalize(bucketer));
  CHECK(braidBucketerBeginStep(bucketer, 0));
  CHECK(braidBucketerMarkReady(bucketer, 0, grad));
  braidStepMetrics_t metrics;
  CHECK(braidBucketerFinishStep(bucketer, &metrics));
  for (int i = 0; i < 5; ++i) {
    if (grad[i] != (float)(size * (i + 1))) {
      fprintf(stderr, "c_consumer rank %d: bucketed sum[%d] = %g\n", rank, i, grad[i]);
      return 1;
    }
  }
  CHECK(braidBucketerDestroy(bucketer));
  CHECK(braidCommDestroy(comm));
  free(v);
  printf("c_consumer rank %d of %d: ok (braid %d)\n", rank, size, version);
  return 0;
}
