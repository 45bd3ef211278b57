/* mpi-perf: braid-perf's sweeps with MPI's collectives, the baselines that bench/compare_peers.sh
 * sets braid against. Same flags (-b -e -f -n -w -c -o -d -r -J; dtypes float, double, int32;
 * ops sum, prod, min, max), same columns, same JSON keys, algo "mpi-<impl>". -C picks the
 * collective; the size column and the busbw factor are braid-perf's (and nccl-tests') for it:
 *
 *   -C all_reduce      MPI_Allreduce             S = each rank's vector          busbw: 2(n-1)/n
 *   -C reduce_scatter  MPI_Reduce_scatter_block  S = the whole vector, n blocks  (n-1)/n
 *   -C all_gather      MPI_Allgather             S = the whole vector, n blocks  (n-1)/n
 *   -C broadcast       MPI_Bcast                 S = the message                 1
 *
 * Blocks hold count/n elements (count = S / element size), as in braid-perf. In place:
 * all_reduce and all_gather pass MPI_IN_PLACE (all_gather's input is the rank's block of the
 * output); reduce_scatter passes MPI_IN_PLACE with the whole input in the output buffer, whose
 * first block then holds the result; MPI_Bcast has one buffer, so both placements run the same
 * call. Built once per MPI (mpicc.mpich, mpicc.openmpi) by bench/perf/CMakeLists.txt.
 *
 *   mpiexec.mpich -n 2 ./mpi-perf-mpich -C reduce_scatter -b 8 -e 1M -f 4
 *   mpiexec.openmpi --allow-run-as-root --oversubscribe -n 2 ./mpi-perf-openmpi ...
 *
 * Time per size = max over ranks of each rank's average call time; algbw = bytes / time. The
 * check uses small integers, so every result is exact. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "size_arg.h"

#ifndef BRAID_PERF_MPI_FLAGS
#define BRAID_PERF_MPI_FLAGS ""
#endif

enum { kPeriodPerRank = 61 };

typedef enum { kAllReduce, kReduceScatter, kAllGather, kBroadcast } Collective;
static const char* const kCollNames[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
static const char* const kCollCalls[] = {"MPI_Allreduce", "MPI_Reduce_scatter_block",
                                         "MPI_Allgather", "MPI_Bcast"};
static const char* const kBusFormula[] = {"2(n-1)/n", "(n-1)/n", "(n-1)/n", "1"};

static int reduces(Collective c) { return c == kAllReduce || c == kReduceScatter; }

typedef struct {
  size_t minBytes, maxBytes, stepBytes;
  double stepFactor;
  int iters, warmup, check;
  const char* dtypeName;
  MPI_Datatype dtype;
  size_t elemSize;
  const char* opName;
  MPI_Op op;
  const char* jsonPath;
  Collective coll;
  int root;
} Options;

static int gRank = 0;
static int gSize = 1;

static void usage(const char* prog) {
  if (gRank != 0) return;
  printf(
      "Usage: %s [-C COLL] [-b MIN] [-e MAX] [-f F | -i STEP] [-n N] [-w N] [-c N] [-o OP] "
      "[-d TYPE] [-r ROOT] [-J FILE]\n"
      "  -C      all_reduce (default) | reduce_scatter | all_gather | broadcast; the size is\n"
      "          braid-perf's: all_reduce each rank's vector, reduce_scatter and all_gather the\n"
      "          whole vector (n blocks), broadcast the message\n"
      "  -b/-e   smallest/largest message (default 8 / 128M; K M G suffixes, x1024)\n"
      "  -f      size factor (default 2); -i adds STEP bytes instead\n"
      "  -n/-w   timed/warm-up iterations per size (default 20 / 5)\n"
      "  -c      checked calls per size and placement (default 1; 0 = none)\n"
      "  -o      sum|prod|min|max (default sum; ignored without a reduction)\n"
      "  -d      float|double|int32 (default float)\n"
      "  -r      broadcast's root (default 0; ignored by the others)\n"
      "  -J      one JSON object per line per size and placement (braid-perf's keys)\n",
      prog);
}

static int parseSize(const char* s, size_t* out) { return baselineParseSize(s, out); }

/* Returns 0 to run, 1 for help, 2 for a usage error. */
static int parseOptions(int argc, char** argv, Options* o) {
  int c;
  opterr = 0;
  while ((c = getopt(argc, argv, "C:b:e:f:i:n:w:c:o:d:r:J:h")) != -1) {
    switch (c) {
      case 'b':
        if (parseSize(optarg, &o->minBytes)) goto bad;
        break;
      case 'e':
        if (parseSize(optarg, &o->maxBytes)) goto bad;
        break;
      case 'i':
        if (parseSize(optarg, &o->stepBytes)) goto bad;
        break;
      case 'f':
        o->stepFactor = atof(optarg);
        if (!(o->stepFactor > 1.0)) goto bad;
        break;
      case 'n':
        o->iters = atoi(optarg);
        if (o->iters < 1) goto bad;
        break;
      case 'w':
        o->warmup = atoi(optarg);
        if (o->warmup < 0) goto bad;
        break;
      case 'c':
        o->check = atoi(optarg);
        if (o->check < 0) goto bad;
        break;
      case 'J':
        o->jsonPath = optarg;
        break;
      case 'C': {
        int found = -1;
        for (int k = 0; k < 4; ++k) {
          if (!strcmp(optarg, kCollNames[k])) found = k;
        }
        if (found < 0) goto bad;
        o->coll = (Collective)found;
        break;
      }
      case 'r':
        o->root = atoi(optarg);
        if (o->root < 0) goto bad;
        break;
      case 'o':
        if (!strcmp(optarg, "sum"))
          o->op = MPI_SUM;
        else if (!strcmp(optarg, "prod"))
          o->op = MPI_PROD;
        else if (!strcmp(optarg, "min"))
          o->op = MPI_MIN;
        else if (!strcmp(optarg, "max"))
          o->op = MPI_MAX;
        else
          goto bad;
        o->opName = optarg;
        break;
      case 'd':
        if (!strcmp(optarg, "float") || !strcmp(optarg, "f32") || !strcmp(optarg, "fp32")) {
          o->dtype = MPI_FLOAT;
          o->elemSize = 4;
          o->dtypeName = "float";
        } else if (!strcmp(optarg, "double") || !strcmp(optarg, "f64") || !strcmp(optarg, "fp64")) {
          o->dtype = MPI_DOUBLE;
          o->elemSize = 8;
          o->dtypeName = "double";
        } else if (!strcmp(optarg, "int32") || !strcmp(optarg, "i32")) {
          o->dtype = MPI_INT32_T;
          o->elemSize = 4;
          o->dtypeName = "int32";
        } else {
          goto bad;
        }
        break;
      case 'h':
        usage(argv[0]);
        return 1;
      default:
        goto bad;
    }
  }
  if (optind < argc || o->minBytes > o->maxBytes) goto bad_noopt;
  if (o->root >= gSize) {
    if (gRank == 0) fprintf(stderr, "%s: -r %d is not a rank of %d\n", argv[0], o->root, gSize);
    return 2;
  }
  return 0;
bad:
  if (gRank == 0) {
    fprintf(stderr,
            "%s: bad option -%c %s (see -h; dtypes float|double|int32, ops sum|prod|min|max, "
            "collectives all_reduce|reduce_scatter|all_gather|broadcast)\n",
            argv[0], optopt ? optopt : c, optarg ? optarg : "");
  }
  return 2;
bad_noopt:
  if (gRank == 0) fprintf(stderr, "%s: bad arguments (see -h)\n", argv[0]);
  return 2;
}

/* Rank r's value at pattern position j: the same small integers braid-perf uses. */
static double patternValue(const Options* o, int r, size_t j) {
  const long long mix = (long long)(7 * j) + 13LL * r + (long long)j * r;
  if (o->op == MPI_SUM) return (double)(mix % 5 - 2);
  if (o->op == MPI_PROD) {
    double v = 1;
    if ((size_t)r == j % (size_t)gSize) v = 2;
    if (gSize > 1 && (size_t)r == (3 * j + 1) % (size_t)gSize) v = 2;
    if ((j + 2 * (size_t)r) % 3 == 0) v = -v;
    return v;
  }
  return (double)(mix % 9 - 4);
}

static void encode(const Options* o, double v, unsigned char* out) {
  if (o->dtype == MPI_FLOAT) {
    float f = (float)v;
    memcpy(out, &f, 4);
  } else if (o->dtype == MPI_DOUBLE) {
    memcpy(out, &v, 8);
  } else {
    int32_t i = (int32_t)v;
    memcpy(out, &i, 4);
  }
}

/* Writes count elements of the periodic table to dst, starting at element `phase` of it. */
static void fillPeriodic(void* dst, const unsigned char* table, size_t period, size_t es,
                         size_t count, size_t phase) {
  unsigned char* out = (unsigned char*)dst;
  phase %= period;
  while (count > 0) {
    size_t n = period - phase;
    if (n > count) n = count;
    memcpy(out, table + phase * es, n * es);
    out += n * es;
    count -= n;
    phase = 0;
  }
}

/* Elements of buf that differ from the periodic table read from element `phase` on. */
static size_t countWrong(const void* buf, const unsigned char* table, size_t period, size_t es,
                         size_t count, size_t phase) {
  const unsigned char* in = (const unsigned char*)buf;
  size_t wrong = 0;
  phase %= period;
  while (count > 0) {
    size_t n = period - phase;
    if (n > count) n = count;
    const unsigned char* t = table + phase * es;
    if (memcmp(in, t, n * es) != 0) {
      for (size_t k = 0; k < n; ++k) wrong += memcmp(in + k * es, t + k * es, es) != 0;
    }
    in += n * es;
    count -= n;
    phase = 0;
  }
  return wrong;
}

static void timeText(double us, char* buf, size_t len) {
  if (us >= 10000.0)
    snprintf(buf, len, "%7.0f", us);
  else if (us >= 100.0)
    snprintf(buf, len, "%7.1f", us);
  else
    snprintf(buf, len, "%7.2f", us);
}

static void jsonEscape(const char* in, char* out, size_t len) {
  size_t k = 0;
  for (; *in && k + 7 < len; ++in) {
    unsigned char ch = (unsigned char)*in;
    if (ch == '"' || ch == '\\') {
      out[k++] = '\\';
      out[k++] = (char)ch;
    } else if (ch < 0x20) {
      k += (size_t)snprintf(out + k, len - k, "\\u%04x", ch);
    } else
      out[k++] = (char)ch;
  }
  out[k] = '\0';
}

/* One call of the collective at one size and placement. */
typedef struct {
  Collective coll;
  int inPlace;
  size_t count, block;
  unsigned char *send, *recv;
  MPI_Datatype dtype;
  MPI_Op op;
  int root;
} Call;

static void poison(void* buf, size_t bytes) { memset(buf, 0xA5, bytes); }

/* Fills the input with this rank's pattern and poisons the output. */
static void prepare(const Call* c, const unsigned char* mine, size_t period, size_t es, int rank) {
  switch (c->coll) {
    case kAllReduce:
    case kReduceScatter:
      fillPeriodic(c->inPlace ? c->recv : c->send, mine, period, es, c->count, 0);
      if (!c->inPlace) poison(c->recv, (c->coll == kAllReduce ? c->count : c->block) * es);
      break;
    case kAllGather: {
      /* Rank q contributes block q of its pattern; in place, from its block of the output. */
      poison(c->recv, c->count * es);
      unsigned char* in = c->inPlace ? c->recv + (size_t)rank * c->block * es : c->send;
      fillPeriodic(in, mine, period, es, c->block, (size_t)rank * c->block);
      break;
    }
    case kBroadcast:
      poison(c->recv, c->count * es);
      if (rank == c->root) fillPeriodic(c->recv, mine, period, es, c->count, 0);
      break;
  }
}

static void runCall(const Call* c) {
  void* in = c->inPlace ? MPI_IN_PLACE : (void*)c->send;
  switch (c->coll) {
    case kAllReduce:
      MPI_Allreduce(in, c->recv, (int)c->count, c->dtype, c->op, MPI_COMM_WORLD);
      break;
    case kReduceScatter:
      MPI_Reduce_scatter_block(in, c->recv, (int)c->block, c->dtype, c->op, MPI_COMM_WORLD);
      break;
    case kAllGather:
      MPI_Allgather(in, (int)c->block, c->dtype, c->recv, (int)c->block, c->dtype, MPI_COMM_WORLD);
      break;
    case kBroadcast:
      MPI_Bcast(c->recv, (int)c->count, c->dtype, c->root, MPI_COMM_WORLD);
      break;
  }
}

/* Wrong elements of this rank's output. */
static size_t checkCall(const Call* c, const unsigned char* tables, const unsigned char* expected,
                        size_t period, size_t es, int rank, int size) {
  switch (c->coll) {
    case kAllReduce:
      return countWrong(c->recv, expected, period, es, c->count, 0);
    case kReduceScatter: /* block `rank` of the reduction, at the start of recv either way */
      return countWrong(c->recv, expected, period, es, c->block, (size_t)rank * c->block);
    case kAllGather: {
      size_t wrong = 0;
      for (int q = 0; q < size; ++q) {
        const size_t first = (size_t)q * c->block;
        wrong += countWrong(c->recv + first * es, tables + (size_t)q * period * es, period, es,
                            c->block, first);
      }
      return wrong;
    }
    case kBroadcast:
      return countWrong(c->recv, tables + (size_t)c->root * period * es, period, es, c->count, 0);
  }
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  Options o = {8,     (size_t)128 << 20, 0,    2.0,        20, 5, 1, "float", MPI_FLOAT, 4,
               "sum", MPI_SUM,           NULL, kAllReduce, 0};
  int parsed = parseOptions(argc, argv, &o);
  if (parsed != 0) {
    MPI_Finalize();
    return parsed == 1 ? 0 : 2;
  }

  /* Hosts as MPI sees them: its shared-memory domains (on the emulated fabric, this says whether
   * MPI took the namespaces for separate hosts). */
  int hosts = 1;
  {
    MPI_Comm node;
    int nodeRank = 0, leader = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &nodeRank);
    leader = nodeRank == 0;
    MPI_Allreduce(&leader, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_free(&node);
  }

  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int vlen = 0;
  MPI_Get_library_version(version, &vlen);
  for (int i = 0; i < vlen; ++i) {
    if (version[i] == '\n' || version[i] == ',') {
      version[i] = '\0';
      break;
    }
  }
  const char* impl = strstr(version, "Open MPI")         ? "openmpi"
                     : strncmp(version, "MPICH", 5) == 0 ? "mpich"
                                                         : "other";
  char algo[32];
  snprintf(algo, sizeof(algo), "mpi-%s", impl);

  /* Size steps, rounded down to whole elements. */
  size_t maxCount = o.maxBytes / o.elemSize;
  if (maxCount == 0) maxCount = 1;
  void* sendbuf = NULL;
  void* recvbuf = NULL;
  if (posix_memalign(&sendbuf, 4096, maxCount * o.elemSize) ||
      posix_memalign(&recvbuf, 4096, maxCount * o.elemSize)) {
    fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", gRank, maxCount * o.elemSize);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(sendbuf, 0xA5, maxCount * o.elemSize);
  memset(recvbuf, 0xA5, maxCount * o.elemSize);

  const size_t period = (size_t)kPeriodPerRank * (size_t)gSize;
  /* Every rank's contribution (all_gather and broadcast check against the others') and the
   * reduction over all of them. */
  unsigned char* tables = malloc((size_t)gSize * period * o.elemSize);
  unsigned char* expected = malloc(period * o.elemSize);
  for (size_t j = 0; j < period; ++j) {
    double acc = 0;
    for (int r = 0; r < gSize; ++r) {
      double v = patternValue(&o, r, j);
      encode(&o, v, tables + ((size_t)r * period + j) * o.elemSize);
      if (r == 0)
        acc = v;
      else if (o.op == MPI_SUM)
        acc += v;
      else if (o.op == MPI_PROD)
        acc *= v;
      else if (o.op == MPI_MAX)
        acc = v > acc ? v : acc;
      else
        acc = v < acc ? v : acc;
    }
    encode(&o, acc, expected + j * o.elemSize);
  }

  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  char cpu[256] = "unknown";
  FILE* ci = fopen("/proc/cpuinfo", "r");
  if (ci) {
    char line[512];
    while (fgets(line, sizeof(line), ci)) {
      if (strncmp(line, "model name", 10) == 0) {
        char* colon = strchr(line, ':');
        if (colon) {
          snprintf(cpu, sizeof(cpu), "%s", colon + 2);
          cpu[strcspn(cpu, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(ci);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  struct utsname u;
  uname(&u);
  char compiler[128];
#if defined(__clang__)
  snprintf(compiler, sizeof(compiler), "clang %s", __clang_version__);
#else
  snprintf(compiler, sizeof(compiler), "gcc %s", __VERSION__);
#endif

  FILE* json = NULL;
  if (gRank == 0 && o.jsonPath) {
    json = fopen(o.jsonPath, "w");
    if (!json) fprintf(stderr, "cannot write %s\n", o.jsonPath);
  }
  char hostJ[512], cpuJ[512], compJ[256], verJ[512];
  jsonEscape(host, hostJ, sizeof(hostJ));
  jsonEscape(cpu, cpuJ, sizeof(cpuJ));
  jsonEscape(compiler, compJ, sizeof(compJ));
  jsonEscape(version, verJ, sizeof(verJ));

  const int aw = 21; /* the width braid-perf uses for its algo column */
  const Collective coll = o.coll;
  const char* opName = reduces(coll) ? o.opName : "none";
  const int root = coll == kBroadcast ? o.root : -1;
  if (gRank == 0) {
    printf("# mpi-perf %s: %s, nccl-tests conventions, busbw = algbw x %s\n", kCollNames[coll],
           kCollCalls[coll], kBusFormula[coll]);
    printf("# machine    : %s, %ld CPUs online (%d usable), host %s, %s %s\n", cpu,
           sysconf(_SC_NPROCESSORS_ONLN), CPU_COUNT(&set), host, u.sysname, u.release);
    printf("# build      : %s, flags \"%s\"\n", compiler, BRAID_PERF_MPI_FLAGS);
    printf("# mpi        : %s\n", version);
    printf("# ranks      : %d on %d host(s) (MPI's shared-memory domains)\n", gSize, hosts);
    printf("# parameters : -C %s -b %zu -e %zu ", kCollNames[coll], o.minBytes, o.maxBytes);
    if (o.stepBytes)
      printf("-i %zu", o.stepBytes);
    else
      printf("-f %g", o.stepFactor);
    printf(" -n %d -w %d -c %d -o %s -d %s -r %d -J %s\n#\n", o.iters, o.warmup, o.check, opName,
           o.dtypeName, root, o.jsonPath ? o.jsonPath : "(none)");
    printf("#%*s%*s\n", 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + aw + 34, "out-of-place", 38, "in-place");
    printf("#%11s  %12s  %8s  %6s  %*s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count",
           "type", "redop", aw, "algo", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong");
    printf("#%11s  %12s  %8s  %6s  %*s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
           "(elements)", "", "", aw, "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
    fflush(stdout);
  }

  const double n = (double)gSize;
  const double factor = coll == kAllReduce   ? 2.0 * (n - 1) / n
                        : coll == kBroadcast ? 1.0
                                             : (n - 1) / n;
  const size_t es = o.elemSize;
  const unsigned char* mine = tables + (size_t)gRank * period * es;
  double busSum = 0, wrongTotal = 0;
  int busRows = 0;
  size_t lastCount = (size_t)-1;
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    const size_t count = bytes / es;
    size_t next = o.stepBytes ? bytes + o.stepBytes : (size_t)((double)bytes * o.stepFactor);
    if (next <= bytes) next = bytes + 1;
    bytes = next;
    if (count == lastCount) continue;
    lastCount = count;
    const size_t nbytes = count * es;
    const size_t block = count / (size_t)gSize; /* reduce_scatter, all_gather */
    double timeUs[2], wrong[2];
    for (int p = 0; p < 2; ++p) {
      const int inPlace = p == 1;
      Call call = {coll, inPlace, count, block, sendbuf, recvbuf, o.dtype, o.op, o.root};
      prepare(&call, mine, period, es, gRank);
      for (int i = 0; i < o.warmup; ++i) runCall(&call);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < o.iters; ++i) runCall(&call);
      double local = (MPI_Wtime() - t0) * 1e6 / o.iters;
      double w = 0;
      for (int i = 0; i < o.check; ++i) {
        prepare(&call, mine, period, es, gRank);
        runCall(&call);
        w += (double)checkCall(&call, tables, expected, period, es, gRank, gSize);
      }
      MPI_Allreduce(&local, &timeUs[p], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(&w, &wrong[p], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      wrongTotal += wrong[p];
    }
    if (gRank != 0) continue;
    printf("%12zu  %12zu  %8s  %6s  %*s", nbytes, count, o.dtypeName, opName, aw, algo);
    for (int p = 0; p < 2; ++p) {
      const double algbw = timeUs[p] > 0 ? (double)nbytes / timeUs[p] / 1e3 : 0;
      const double busbw = algbw * factor;
      busSum += busbw;
      ++busRows;
      char t[32], wt[32];
      timeText(timeUs[p], t, sizeof(t));
      if (o.check > 0)
        snprintf(wt, sizeof(wt), "%.0f", wrong[p]);
      else
        snprintf(wt, sizeof(wt), "N/A");
      printf("  %s  %6.2f  %6.2f  %6s", t, algbw, busbw, wt);
      if (json) {
        fprintf(json,
                "{\"collective\":\"%s\",\"algo\":\"%s\",\"algo_chosen\":\"%s\","
                "\"ranks\":%d,\"hosts\":%d,\"bytes\":%zu,\"count\":%zu,\"dtype\":\"%s\","
                "\"op\":\"%s\",\"root\":%d,\"inplace\":%s,\"time_us\":%.3f,\"algbw_GBps\":%.6f,"
                "\"busbw_GBps\":%.6f,\"wrong\":%.0f,\"checked\":%s,\"iters\":%d,\"warmup\":%d,"
                "\"transport\":\"%s\",\"tool\":\"mpi-perf\",\"host\":\"%s\","
                "\"cpu\":\"%s\",\"cpus\":%ld,\"compiler\":\"%s\",\"build_type\":\"%s\","
                "\"mpi_version\":\"%s\"}\n",
                kCollNames[coll], algo, algo, gSize, hosts, nbytes, count, o.dtypeName, opName,
                root, p == 1 ? "true" : "false", timeUs[p], algbw, busbw, wrong[p],
                o.check > 0 ? "true" : "false", o.iters, o.warmup, impl, hostJ, cpuJ,
                sysconf(_SC_NPROCESSORS_ONLN), compJ, BRAID_PERF_MPI_FLAGS, verJ);
      }
    }
    printf("\n");
    fflush(stdout);
  }
  if (json) fclose(json);
  if (gRank == 0) {
    printf("# Out of bounds values : %.0f %s\n", wrongTotal, wrongTotal == 0 ? "OK" : "FAILED");
    printf("# Avg bus bandwidth    : %g\n#\n", busRows ? busSum / busRows : 0.0);
    fflush(stdout);
  }
  free(tables);
  free(expected);
  free(sendbuf);
  free(recvbuf);
  MPI_Finalize();
  return wrongTotal == 0 ? 0 : 1;
}
