/* The C API, compiled as C: rank 0 makes a unique id, forks the other ranks (which inherit it),
 * and every rank initializes, all-reduces, broadcasts, exchanges a p2p group, checks error
 * handling, splits, shrinks (a healthy rank dropped, then the survivors of an aborted rank), and
 * destroys.
 * Exit status 0 only when every rank passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "braid/braid.h"

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "rank %d: FAIL %s: ", rank, #cond);   \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
      return 1;                                             \
    }                                                       \
  } while (0)

static int runRank(int rank, int nranks, braidUniqueId id) {
  braidComm_t comm = NULL;
  braidResult_t r = braidCommInitRank(&comm, nranks, id, rank);
  CHECK(r == braidSuccess, "init: %s (%s)", braidGetErrorString(r), braidGetLastError(NULL));
  int n = -1, me = -1;
  CHECK(braidCommCount(comm, &n) == braidSuccess && n == nranks, "count %d", n);
  CHECK(braidCommUserRank(comm, &me) == braidSuccess && me == rank, "rank %d", me);

  enum { kCount = 1000003 };
  float* buf = malloc(sizeof(float) * kCount);
  for (int i = 0; i < kCount; ++i) buf[i] = (float)(rank + 1) + (float)(i % 7);
  r = braidAllReduce(buf, buf, kCount, braidFloat32, braidSum, comm);
  CHECK(r == braidSuccess, "allreduce: %s", braidGetLastError(comm));
  for (int i = 0; i < kCount; ++i) {
    float want = (float)(nranks * (nranks + 1) / 2) + (float)(nranks * (i % 7));
    CHECK(buf[i] == want, "element %d = %g, expected %g", i, buf[i], want);
  }
  int value = rank == 1 ? 42 : 0;
  r = braidBroadcast(&value, &value, 1, braidInt32, 1 % nranks, comm);
  CHECK(r == braidSuccess && value == (nranks > 1 ? 42 : 0), "broadcast: %d", value);

  /* A point-to-point group around the ring, every rank sending before it receives, 4 MiB
   * (more than the transports buffer: sends run one after the other would wait on each
   * other). */
  if (nranks > 1) {
    int* out = malloc(sizeof(int) * kCount);
    int* in = malloc(sizeof(int) * kCount);
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (int i = 0; i < kCount; ++i) out[i] = rank * 7 + i, in[i] = -1;
    braidP2pOp_t ops[2] = {{1, out, kCount, braidInt32, next}, {0, in, kCount, braidInt32, prev}};
    r = braidSendRecvGroup(ops, 2, comm);
    CHECK(r == braidSuccess, "p2p group: %s", braidGetLastError(comm));
    for (int i = 0; i < kCount; ++i) {
      CHECK(in[i] == prev * 7 + i, "p2p element %d = %d, expected %d", i, in[i], prev * 7 + i);
    }
    ops[0].peer = rank;
    CHECK(braidSendRecvGroup(ops, 2, comm) == braidInvalidArgument, "p2p group to itself");
    CHECK(strstr(braidGetLastError(comm), "operation 0") != NULL, "message '%s'",
          braidGetLastError(comm));
    CHECK(braidSendRecvGroup(NULL, 1, comm) == braidInvalidArgument, "null ops");
    CHECK(braidSendRecvGroup(NULL, 0, comm) == braidSuccess, "empty group");
    free(out);
    free(in);
  }

  /* A shared window: the same all-reduce in place in it, then freed; a double free fails. */
  {
    float* win = NULL;
    r = braidCommAllocShared(comm, sizeof(float) * kCount, (void**)&win);
    CHECK(r == braidSuccess && win != NULL, "alloc shared: %s", braidGetLastError(comm));
    for (int i = 0; i < kCount; ++i) win[i] = (float)(rank + 1) + (float)(i % 7);
    r = braidAllReduce(win, win, kCount, braidFloat32, braidSum, comm);
    CHECK(r == braidSuccess, "allreduce in a window: %s", braidGetLastError(comm));
    for (int i = 0; i < kCount; ++i) {
      float want = (float)(nranks * (nranks + 1) / 2) + (float)(nranks * (i % 7));
      CHECK(win[i] == want, "window element %d = %g, expected %g", i, win[i], want);
    }
    /* The next rank's part through the query (c_api_test runs on one host: every part is
     * mapped here), once every rank has its result. */
    CHECK(braidBarrier(comm) == braidSuccess, "barrier: %s", braidGetLastError(comm));
    void* part = NULL;
    size_t partBytes = 0;
    r = braidCommSharedQuery(comm, win, (rank + 1) % nranks, &part, &partBytes);
    CHECK(r == braidSuccess && part != NULL && partBytes == sizeof(float) * kCount,
          "shared query: %d %s (%zu bytes)", (int)r, braidGetLastError(comm), partBytes);
    if (r == braidSuccess) {
      float want = (float)(nranks * (nranks + 1) / 2) + (float)(nranks * 3);
      CHECK(((const float*)part)[3] == want, "peer's element 3 = %g, expected %g",
            ((const float*)part)[3], want);
    }
    CHECK(braidCommSharedQuery(comm, win + 1, rank, &part, &partBytes) == braidInvalidArgument,
          "shared query of a non-window");
    CHECK(braidCommSharedQuery(comm, win, rank, NULL, &partBytes) == braidInvalidArgument,
          "shared query, null ptr");
    CHECK(braidBarrier(comm) == braidSuccess, "barrier: %s", braidGetLastError(comm));
    CHECK(braidCommFreeShared(comm, win) == braidSuccess, "free shared: %s",
          braidGetLastError(comm));
    CHECK(braidCommFreeShared(comm, win) == braidInvalidArgument, "double free shared");
    CHECK(braidCommAllocShared(comm, 16, NULL) == braidInvalidArgument, "null ptr");
  }

  /* Bad input: a clear error, and the communicator stays usable. */
  r = braidAllReduce(NULL, buf, 10, braidFloat32, braidSum, comm);
  CHECK(r == braidInvalidArgument, "null buffer gave %d", (int)r);
  CHECK(strstr(braidGetLastError(comm), "null") != NULL, "message '%s'", braidGetLastError(comm));
  r = braidAllReduce(buf, buf, 10, (braidDataType_t)77, braidSum, comm);
  CHECK(r == braidInvalidArgument, "bad dtype gave %d", (int)r);
  CHECK(braidAllReduce(buf, buf, 10, braidFloat32, braidMax, NULL) == braidInvalidArgument, "null comm");
  CHECK(braidBarrier(comm) == braidSuccess, "barrier: %s", braidGetLastError(comm));
  braidResult_t async = braidInternalError;
  CHECK(braidCommGetAsyncError(comm, &async) == braidSuccess && async == braidSuccess, "async error");
  CHECK(strcmp(braidGetErrorString(braidInvalidUsage), "invalid usage") == 0, "error string");
  /* Split: the last rank opts out; the others form one communicator in reverse rank order. */
  braidComm_t sub = NULL;
  const int color = rank == nranks - 1 && nranks > 1 ? BRAID_SPLIT_NOCOLOR : 0;
  r = braidCommSplit(comm, color, -rank, &sub);
  CHECK(r == braidSuccess, "split: %s", braidGetLastError(comm));
  if (color == BRAID_SPLIT_NOCOLOR) {
    CHECK(sub == NULL, "no color gave a communicator");
  } else {
    int subSize = -1, subRank = -1;
    const int members = nranks > 1 ? nranks - 1 : 1;
    CHECK(braidCommCount(sub, &subSize) == braidSuccess && subSize == members, "split size %d", subSize);
    CHECK(braidCommUserRank(sub, &subRank) == braidSuccess && subRank == members - 1 - rank,
          "split rank %d", subRank);
    int one = 1;
    CHECK(braidAllReduce(&one, &one, 1, braidInt32, braidSum, sub) == braidSuccess && one == members,
          "split allreduce gave %d", one);
    CHECK(braidCommDestroy(sub) == braidSuccess, "destroy split");
  }
  CHECK(braidCommSplit(comm, 0, 0, NULL) == braidInvalidArgument, "null newcomm");

  /* Subgroup: the ranks from 1 up, listed in descending order, made by them alone while rank 0
   * goes on to the barrier below; the argument checks fail without any communication. */
  braidComm_t group = NULL;
  int outsideRank = nranks;
  CHECK(braidCommSubgroup(comm, &rank, 0, &group) == braidInvalidArgument, "no ranks");
  CHECK(braidCommSubgroup(comm, NULL, 1, &group) == braidInvalidArgument, "null ranks");
  CHECK(braidCommSubgroup(comm, &rank, 1, NULL) == braidInvalidArgument, "null newcomm");
  CHECK(braidCommSubgroup(comm, &outsideRank, 1, &group) == braidInvalidArgument, "rank %d of %d",
        outsideRank, nranks);
  if (rank > 0) {
    int list[64];
    int n = 0;
    for (int q = nranks - 1; q >= 1 && n < 64; --q) list[n++] = q;
    r = braidCommSubgroup(comm, list, n, &group);
    CHECK(r == braidSuccess && group != NULL, "subgroup: %s", braidGetLastError(comm));
    int gSize = -1, gRank = -1, sum = rank;
    CHECK(braidCommCount(group, &gSize) == braidSuccess && gSize == n, "subgroup size %d", gSize);
    CHECK(braidCommUserRank(group, &gRank) == braidSuccess && gRank == nranks - 1 - rank,
          "subgroup rank %d", gRank);
    CHECK(braidAllReduce(&sum, &sum, 1, braidInt32, braidSum, group) == braidSuccess &&
              sum == nranks * (nranks - 1) / 2,
          "subgroup allreduce gave %d", sum);
    CHECK(braidCommDestroy(group) == braidSuccess, "destroy subgroup");
  }
  CHECK(braidBarrier(comm) == braidSuccess, "barrier after subgroup: %s", braidGetLastError(comm));

  /* Shrink's argument checks (nothing is sent: comm stays usable). */
  braidComm_t shrunk = NULL;
  int outside = nranks;
  CHECK(braidCommShrink(comm, &outside, 1, &shrunk, BRAID_SHRINK_DEFAULT) == braidInvalidArgument,
        "excluding rank %d of %d", outside, nranks);
  CHECK(braidCommShrink(comm, NULL, 1, &shrunk, BRAID_SHRINK_DEFAULT) == braidInvalidArgument,
        "null list");
  CHECK(braidCommShrink(comm, NULL, 0, NULL, BRAID_SHRINK_DEFAULT) == braidInvalidArgument,
        "null newcomm");
  CHECK(braidCommShrink(comm, NULL, 0, &shrunk, 7) == braidInvalidArgument, "bad flags");
  CHECK(braidBarrier(comm) == braidSuccess, "barrier after bad shrinks: %s",
        braidGetLastError(comm));
  if (nranks > 1) {
    /* A healthy shrink dropping rank 0, which calls too and gets NULL; comm stays usable. */
    int first = 0;
    r = braidCommShrink(comm, &first, 1, &shrunk, BRAID_SHRINK_DEFAULT);
    CHECK(r == braidSuccess, "shrink of a healthy rank: %s", braidGetLastError(comm));
    if (rank == 0) {
      CHECK(shrunk == NULL, "the excluded rank got a communicator");
    } else {
      int n2 = -1, r2 = -1, one = 1;
      CHECK(braidCommCount(shrunk, &n2) == braidSuccess && n2 == nranks - 1, "shrunk size %d", n2);
      CHECK(braidCommUserRank(shrunk, &r2) == braidSuccess && r2 == rank - 1, "shrunk rank %d", r2);
      CHECK(braidAllReduce(&one, &one, 1, braidInt32, braidSum, shrunk) == braidSuccess &&
                one == nranks - 1,
            "allreduce on the shrunk communicator gave %d", one);
      CHECK(braidCommDestroy(shrunk) == braidSuccess, "destroy shrunk");
    }
    CHECK(braidBarrier(comm) == braidSuccess, "barrier after shrink: %s", braidGetLastError(comm));

    /* Recovery: the last rank aborts; the others see comm fail, shrink it away (it is failed:
     * shrink releases it) and go on with the rest. */
    int last = nranks - 1;
    if (rank == last) {
      /* The others may still be finishing the barrier above (an abort is seen at once, through
       * the host's segment): give them time to leave it. */
      usleep(500000);
      CHECK(braidCommAbort(comm) == braidSuccess, "abort");
      free(buf);
      return 0;
    }
    r = braidBarrier(comm);
    CHECK(r != braidSuccess, "barrier succeeded although rank %d aborted", last);
    braidResult_t failed = braidSuccess;
    CHECK(braidCommGetAsyncError(comm, &failed) == braidSuccess && failed != braidSuccess,
          "comm not failed");
    r = braidCommShrink(comm, &last, 1, &shrunk, BRAID_SHRINK_DEFAULT);
    CHECK(r == braidSuccess && shrunk != NULL, "shrink of a failed comm: %s",
          braidGetLastError(comm));
    int n3 = -1, total = rank + 1;
    CHECK(braidCommCount(shrunk, &n3) == braidSuccess && n3 == nranks - 1, "size %d", n3);
    CHECK(braidAllReduce(&total, &total, 1, braidInt32, braidSum, shrunk) == braidSuccess &&
              total == (nranks - 1) * nranks / 2,
          "allreduce after recovery gave %d", total);
    CHECK(braidBarrier(comm) != braidSuccess, "the failed comm works again");
    CHECK(braidCommDestroy(shrunk) == braidSuccess, "destroy shrunk");
  }
  free(buf);
  CHECK(braidCommDestroy(comm) == braidSuccess, "destroy");
  return 0;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 3;
  int rank = 0;
  braidUniqueId id;
  memset(&id, 0, sizeof(id));
  braidComm_t none = NULL;
  CHECK(braidCommInitRank(&none, 2, id, 0) == braidInvalidArgument, "zero id must be rejected");
  CHECK(braidGetUniqueId(&id) == braidSuccess, "unique id: %s", braidGetLastError(NULL));
  for (int r = 1; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(runRank(r, nranks, id));
  }
  int failed = runRank(0, nranks, id);
  for (int r = 1; r < nranks; ++r) {
    int status = 0;
    wait(&status);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  printf("c_api_test: %d ranks: %s\n", nranks, failed ? "FAILED" : "passed");
  return failed;
}
