// The parameter table and its cache.
//
// Every BRAID_* variable is listed here, once, with its type, default, choices and help, so that
// `braid-info params` and the documentation cannot drift from what the code reads. A value is
// parsed on first use and cached for the life of the process (set the environment before the
// first collective). A malformed value never stops a job: it logs one warning naming the variable,
// the bad text and the default used instead.
//
// Note that core/log.cc reads BRAID_DEBUG and BRAID_DEBUG_FILE from the environment itself (the
// parser here logs its warnings, so the logger cannot depend on it); both accept the same values.
#include "core/params.h"

#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/log.h"

namespace braid {
namespace {

// One cached value. `text` is the canonical text in effect (enum values spelled as in the
// choices list); the typed fields are derived from it when the slot is loaded.
struct Slot {
  bool loaded = false;
  std::string text;
  const char* source = "default";
  int64_t intValue = 0;
  bool boolValue = false;
};

struct Cache {
  std::mutex mu;
  std::vector<Slot> slots;
};

// Leaked on purpose: parameters may be read from static destructors and other threads at exit.
Cache& cache() {
  static Cache* c = [] {
    auto* p = new Cache;
    p->slots.resize(paramTable().size());
    return p;
  }();
  return *c;
}

const char* typeName(ParamType type) {
  switch (type) {
    case ParamType::kInt:
      return "integer";
    case ParamType::kBool:
      return "boolean";
    case ParamType::kString:
      return "string";
    case ParamType::kEnum:
      return "choice";
  }
  return "value";
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n' || s[e - 1] == '\r')) {
    --e;
  }
  return s.substr(b, e - b);
}

bool equalsIgnoreCase(const std::string& a, const char* b, size_t bLen) {
  if (a.size() != bLen) return false;
  for (size_t i = 0; i < bLen; ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Decimal integer with an optional binary suffix: k/K = 2^10, m/M = 2^20, g/G = 2^30.
bool parseInt(const std::string& raw, int64_t* out) {
  const std::string s = trim(raw);
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str()) return false;
  int64_t scale = 1;
  switch (*end) {
    case 'k':
    case 'K':
      scale = int64_t{1} << 10;
      ++end;
      break;
    case 'm':
    case 'M':
      scale = int64_t{1} << 20;
      ++end;
      break;
    case 'g':
    case 'G':
      scale = int64_t{1} << 30;
      ++end;
      break;
    default:
      break;
  }
  if (*end != '\0') return false;
  int64_t result;
  if (__builtin_mul_overflow(static_cast<int64_t>(v), scale, &result)) return false;
  *out = result;
  return true;
}

bool parseBool(const std::string& raw, bool* out) {
  const std::string s = trim(raw);
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue) {
    if (equalsIgnoreCase(s, t, std::strlen(t))) return *out = true, true;
  }
  for (const char* f : kFalse) {
    if (equalsIgnoreCase(s, f, std::strlen(f))) return *out = false, true;
  }
  return false;
}

// Case-insensitive match against "a|b|c"; *out gets the spelling from the choices list.
bool parseEnum(const char* choices, const std::string& raw, std::string* out) {
  const std::string s = trim(raw);
  const char* p = choices;
  while (true) {
    const char* bar = std::strchr(p, '|');
    const size_t len = bar ? static_cast<size_t>(bar - p) : std::strlen(p);
    if (equalsIgnoreCase(s, p, len)) {
      out->assign(p, len);
      return true;
    }
    if (bar == nullptr) return false;
    p = bar + 1;
  }
}

// Parses `text` as `def`'s type into `slot`. Returns false (slot untouched) when malformed.
bool parseInto(const ParamDef& def, const std::string& text, Slot* slot) {
  switch (def.type) {
    case ParamType::kInt: {
      int64_t v;
      if (!parseInt(text, &v)) return false;
      slot->intValue = v;
      slot->text = std::to_string(v);
      return true;
    }
    case ParamType::kBool: {
      bool v;
      if (!parseBool(text, &v)) return false;
      slot->boolValue = v;
      slot->text = v ? "1" : "0";
      return true;
    }
    case ParamType::kEnum:
      return parseEnum(def.choices, text, &slot->text);
    case ParamType::kString:
      slot->text = text;
      return true;
  }
  return false;
}

// Loads `slot` from `text` (source "env" or "test"); a malformed text warns and uses the default.
void load(const ParamDef& def, const std::string& text, const char* source, Slot* slot) {
  if (parseInto(def, text, slot)) {
    slot->source = source;
  } else {
    if (def.type == ParamType::kEnum) {
      BRAID_WARN("%s='%s' is not one of %s; using the default %s", def.name, text.c_str(),
                 def.choices, def.defaultValue);
    } else {
      BRAID_WARN("%s='%s' is not a valid %s; using the default %s", def.name, text.c_str(),
                 typeName(def.type), def.defaultValue);
    }
    const bool ok = parseInto(def, def.defaultValue, slot);
    assert(ok && "parameter table default does not parse");
    (void)ok;
    slot->source = "default";
  }
  slot->loaded = true;
}

// Returns the index of `name`, or -1 after reporting the misuse. A name that is not in the table,
// or a typed accessor used on a parameter of another type, is a programming error.
int findParam(const char* name, bool (*typeOk)(ParamType)) {
  const std::vector<ParamDef>& table = paramTable();
  for (size_t i = 0; i < table.size(); ++i) {
    if (std::strcmp(table[i].name, name) == 0) {
      if (typeOk != nullptr && !typeOk(table[i].type)) {
        BRAID_ERROR("parameter %s is a %s; read it with the matching accessor", name,
                    typeName(table[i].type));
        assert(false && "parameter read with the wrong accessor");
        return -1;
      }
      return static_cast<int>(i);
    }
  }
  BRAID_ERROR("unknown parameter %s; add it to the table in core/params.cc", name);
  assert(false && "unknown parameter name");
  return -1;
}

// Copies the (loaded) slot for index `idx` out under the lock.
Slot readSlot(int idx) {
  const ParamDef& def = paramTable()[static_cast<size_t>(idx)];
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  Slot& slot = c.slots[static_cast<size_t>(idx)];
  if (!slot.loaded) {
    // An empty variable counts as unset (a common way to "clear" a value in job scripts).
    const char* env = std::getenv(def.name);
    if (env != nullptr && env[0] != '\0') {
      load(def, env, "env", &slot);
    } else {
      load(def, def.defaultValue, "default", &slot);
    }
  }
  return slot;
}

}  // namespace

const std::vector<ParamDef>& paramTable() {
  static const std::vector<ParamDef> kTable = {
      {"BRAID_DEBUG", ParamType::kEnum, "WARN", "WARN|INFO|TRACE",
       "Log verbosity on stderr (or BRAID_DEBUG_FILE); ERROR lines are always printed"},
      {"BRAID_DEBUG_FILE", ParamType::kString, "", "",
       "Write log lines to this file instead of stderr, appending; %h = host, %p = pid, %r = rank"},
      {"BRAID_TRACE_FILE", ParamType::kString, "", "",
       "Write this rank's Chrome/Perfetto trace events (collectives, buckets, waits on peers) to "
       "this file when the communicator is destroyed; %r = rank, %p = pid, %h = host. Set it on "
       "every rank (creation aligns the ranks' clocks with two barriers); braid-trace merges "
       "and reports"},
      {"BRAID_TIMEOUT_MS", ParamType::kInt, "300000", "",
       "Deadline in milliseconds of every blocking wait (connect, rendezvous, progress) before it "
       "fails with a timeout error; 0 or less means the default (there is no wait without a "
       "deadline)"},
      {"BRAID_ALGO", ParamType::kString, "", "",
       "Force algorithms instead of the selector's choice, per collective as "
       "\"allreduce:ring;broadcast:tree\" (a bare name such as \"ring\" means all-reduce); "
       "unknown names are errors that list the valid ones"},
      {"BRAID_TUNING_FILE", ParamType::kString, "", "",
       "Algorithm rules that override the cost model (docs/tuning-file.md; braid-tune writes "
       "one): collective, size, ranks and hosts ranges -> algorithm and chunk; first match wins"},
      {"BRAID_EXPLAIN", ParamType::kBool, "0", "",
       "Log each distinct algorithm decision once: candidates, predicted times, winner and why "
       "(model, tuning file or override)"},
      {"BRAID_CALIBRATION", ParamType::kEnum, "auto", "auto|probe|off",
       "Alpha/beta of the links at communicator creation: auto = cached per fabric, else a short "
       "probe; probe = always probe (and refresh the cache); off = built-in defaults"},
      {"BRAID_CALIBRATION_CACHE", ParamType::kString, "", "",
       "Directory of the calibration cache (default $XDG_CACHE_HOME/braid or ~/.cache/braid); "
       "off = no cache"},
      {"BRAID_RETUNE_INTERVAL", ParamType::kInt, "1024", "",
       "Closed-loop tuning: every this many collectives the ranks compare their latest "
       "all-reduces with the model's predictions (one 16-byte all-reduce) and re-probe together "
       "when it is 4x too slow or 8x too fast (docs/tuning-file.md); 0 = off"},
      {"BRAID_TRANSPORT", ParamType::kEnum, "auto", "auto|shm|tcp",
       "Transport between ranks: auto = shared memory within a host and tcp across hosts; shm or "
       "tcp force one"},
      {"BRAID_BOOTSTRAP", ParamType::kEnum, "auto",
       "auto|env|torchrun|file|slurm|ompi|pmi|pmix|mpi",
       "How ranks find each other: auto detects the launcher (docs/launchers.md: file, torchrun, "
       "slurm, ompi, pmi, pmix, then mpi; launchers that disagree are an error); a launcher's "
       "name uses its variables alone (env = torchrun-style RANK/WORLD_SIZE/MASTER_ADDR)"},
      {"BRAID_STORE_PORT", ParamType::kInt, "0", "",
       "Port rank 0 serves braid's rendezvous store on, for every launcher with a TCP store; 0 = "
       "MASTER_PORT (MASTER_PORT + 1 under a real torchrun, TORCHELASTIC_RUN_ID set, whose own "
       "c10d store holds MASTER_PORT), under srun without MASTER_PORT 20000 + SLURM_JOB_ID % "
       "9000"},
      {"BRAID_FILE_STORE", ParamType::kString, "", "",
       "Directory on a shared file system used as the rendezvous key-value store (for tests and "
       "jobs without MPI)"},
      {"BRAID_HOST_ID", ParamType::kString, "", "",
       "Overrides this process's host identity (ranks with equal ids are treated as one host, e.g. "
       "to test tcp on one machine)"},
      {"BRAID_TOPO_FILE", ParamType::kString, "", "",
       "Read this host's topology from a topology file (docs/topology-file.md) instead of "
       "detecting it with hwloc/sysfs; write one with braid-info topo --write FILE"},
      {"BRAID_SOCKET_IFNAME", ParamType::kString, "", "",
       "Network interfaces for tcp, NCCL_SOCKET_IFNAME syntax: comma-separated prefixes, ^ to "
       "exclude, = for exact names"},
      {"BRAID_TCP_STREAMS", ParamType::kInt, "4", "",
       "Number of sockets per tcp connection; large messages are striped across them"},
      {"BRAID_TCP_STRIPE_MIN", ParamType::kInt, "262144", "",
       "Messages of at least this many bytes are striped across the tcp streams (k, m, g "
       "suffixes)"},
      {"BRAID_UCX_TLS", ParamType::kString, "tcp,sm,self", "",
       "UCX transports the ucx backend restricts UCX to when UCX_TLS is not set (UCX_TLS syntax; "
       "the default needs no RDMA hardware)"},
      {"BRAID_SHM_RING_BYTES", ParamType::kInt, "4194304", "",
       "Size in bytes of each shared-memory connection's ring buffer (suffixes k, m, g)"},
      {"BRAID_CHUNK_BYTES", ParamType::kInt, "1048576", "",
       "Pipelining chunk in bytes of the ring and tree algorithms, and the piece of the "
       "hierarchical all-reduce (at most a quarter segment slot; suffixes k, m, g)"},
      {"BRAID_SHM_SEGMENT_BYTES", ParamType::kInt, "8388608", "",
       "Per-rank slot size in bytes of the intra-host shared segment used by the shm all-reduce "
       "(suffixes k, m, g)"},
      {"BRAID_BIND_THREADS", ParamType::kEnum, "auto", "auto|off",
       "braid's own threads (a communicator's worker, a Bucketer's engine): auto = with at least "
       "as many CPUs in the process's affinity mask as ranks on the machine, each rank's threads "
       "keep to their own contiguous share of those CPUs; off = left to the scheduler"},
      {"BRAID_SHM_STREAM", ParamType::kEnum, "auto", "auto|on|off",
       "Copies of 16 KiB and more into shared memory (segments, shm rings): on = non-temporal "
       "stores (to memory, not left dirty in this core's cache), off = plain stores, auto = what "
       "the calibration probe measured faster on this machine (plain where peers read dirty "
       "lines fast), then, while the job runs, whichever its large same-host calls run quicker "
       "with (one in 16 tries the other kind; the faster kind changes when a VM's vCPUs move)"},
      {"BRAID_SHM_CMA", ParamType::kEnum, "auto", "auto|on|off",
       "Single copies on one host with process_vm_readv/writev, where the kernel allows it "
       "(checked at start-up): all-gather and broadcast read (a broadcast's root also writes) "
       "the peers' buffers in place, the all-reduce writes its reduced shards into the peers' "
       "outputs; auto = each single copy only where the calibration measured it quick enough "
       "against copies through the segment, on = wherever they can run, off = always copy "
       "through the shared segment"},
      {"BRAID_SHM_SPIN_US", ParamType::kInt, "1000", "",
       "How long a rank waiting on a peer in the intra-host segment spins before it sleeps on a "
       "futex, when the host's ranks do not outnumber its cores (ranks that do yield instead); "
       "a futex wake-up costs 20-90 us on the VMs braid is measured on; also bounds (at 200 us) "
       "how long Bucketer::finishStep polls its engine before it sleeps"},
      {"BRAID_BUCKET_CAP_MB", ParamType::kInt, "25", "",
       "Bucketer: largest gradient bucket in MiB (like DDP's bucket_cap_mb); 0 = size buckets "
       "automatically from the alpha-beta model and the observed gradient-ready timeline"},
      {"BRAID_FIRST_BUCKET_CAP_MB", ParamType::kInt, "1", "",
       "Bucketer: cap in MiB of the first bucket reduced in a step, kept small so that "
       "communication starts early in backward"},
      {"BRAID_BUCKET_PIECE_BYTES", ParamType::kInt, "0", "",
       "Bucketer: a bucket larger than this goes out as all-reduces of at most this many bytes, "
       "so that copying one piece back to the gradients overlaps the next piece's all-reduce, "
       "which pays where a core is free for the copy (suffixes k, m, g; 0 = one all-reduce per "
       "bucket)"},
      {"BRAID_CODEC", ParamType::kString, "none", "",
       "Bucketer: gradient compression of float32 buckets, a codec spec such as fp16, bf16, "
       "powersgd:rank=4, topk:ratio=0.01, int8, sign (keys: compression/codec.h); none = off"},
      {"BRAID_CODEC_SCOPE", ParamType::kEnum, "all", "all|inter-host",
       "Bucketer: all = BRAID_CODEC compresses the whole all-reduce; inter-host = buckets are "
       "summed uncompressed inside each host and only the hosts' first ranks exchange compressed "
       "data (nothing is compressed on one host)"},
      {"BRAID_CODEC_MIN_BYTES", ParamType::kInt, "0", "",
       "Bucketer: buckets smaller than this many bytes are not compressed with BRAID_CODEC "
       "(k, m, g suffixes)"},
      {"BRAID_METRICS_FILE", ParamType::kString, "", "",
       "Bucketer: append one JSON line of step metrics per step to this file and rewrite the "
       "Prometheus text file FILE.prom; %r = rank, %p = pid (other ranks add .rankN)"},
      {"BRAID_NET_IFNAME", ParamType::kString, "", "",
       "Network interfaces the NCCL net plugin offers as devices, NCCL_SOCKET_IFNAME syntax; empty "
       "= every non-loopback interface (docker/virbr bridges excluded), else loopback"},
      {"BRAID_NET_TRANSPORT", ParamType::kEnum, "tcp", "tcp|shm|ucx",
       "Transport under the NCCL net plugin: tcp (across hosts), ucx (UCP; when built with UCX), "
       "or shm (same host only, for tests); every rank must use the same"},
      {"BRAID_NET_MAX_RECVS", ParamType::kInt, "1", "",
       "maxRecvs the NCCL net plugin reports (1..8); above 1 NCCL may group receives and every "
       "send carries a small header; every rank must use the same"},
      {"BRAID_TUNER", ParamType::kEnum, "model", "model|off",
       "NCCL tuner plugin: model = a model of NCCL's ring, tree and PAT (and, for tuner v6, of "
       "the tree's chunk) priced with braid's calibrated link, BRAID_TUNER_FILE and "
       "BRAID_TUNING_FILE rules; off = no opinion, NCCL tunes"},
      {"BRAID_TUNER_FILE", ParamType::kString, "", "",
       "Rules for the NCCL tuner plugin, one per line: "
       "collective,minBytes,maxBytes,algorithm,protocol,channels[,nNodes[,nRanks]]"},
      {"BRAID_TUNER_MODEL", ParamType::kString, "", "",
       "A braid calibration file (its 'model' line: a braid job's calibration cache or braid-tune's "
       "output on the same fabric) whose inter-host link the NCCL tuner plugin uses; overrides "
       "BRAID_TUNER_NET_LATENCY_NS and BRAID_TUNER_NET_GBITS"},
      {"BRAID_TUNER_NET_LATENCY_NS", ParamType::kInt, "8000", "",
       "Per-step network latency (alpha) in nanoseconds in the NCCL tuner plugin's model"},
      {"BRAID_TUNER_NET_GBITS", ParamType::kInt, "100", "",
       "Per-node network bandwidth (1/beta) in Gbit/s in the NCCL tuner plugin's model"},
      {"BRAID_TUNER_CHANNEL_BYTES", ParamType::kInt, "262144", "",
       "NCCL tuner plugin: messages below 8x this size get one channel per this many bytes; 0 "
       "leaves the channel count to NCCL (suffixes k, m, g)"},
  };
  return kTable;
}

int64_t paramInt(const char* name) {
  const int idx = findParam(name, [](ParamType t) { return t == ParamType::kInt; });
  return idx < 0 ? 0 : readSlot(idx).intValue;
}

bool paramBool(const char* name) {
  const int idx = findParam(name, [](ParamType t) { return t == ParamType::kBool; });
  return idx < 0 ? false : readSlot(idx).boolValue;
}

int64_t timeoutMsFromEnvironment() {
  const int64_t ms = paramInt("BRAID_TIMEOUT_MS");
  if (ms > 0) return ms;
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    BRAID_WARN("BRAID_TIMEOUT_MS=%lld: a wait without a deadline is not an option; using the "
               "default %lld ms",
               static_cast<long long>(ms), static_cast<long long>(kDefaultTimeoutMs));
  }
  return kDefaultTimeoutMs;
}

std::string paramString(const char* name) {
  // Any type reads as text (enums in their canonical spelling, integers in decimal).
  const int idx = findParam(name, nullptr);
  return idx < 0 ? std::string() : readSlot(idx).text;
}

std::string paramValueText(const char* name, const char** source) {
  const int idx = findParam(name, nullptr);
  if (idx < 0) {
    if (source != nullptr) *source = "unknown";
    return std::string();
  }
  Slot slot = readSlot(idx);
  if (source != nullptr) *source = slot.source;  // string literals: valid forever
  return slot.text;
}

void setParamForTesting(const char* name, const std::string& value) {
  const int idx = findParam(name, nullptr);
  if (idx < 0) return;
  const ParamDef& def = paramTable()[static_cast<size_t>(idx)];
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  Slot& slot = c.slots[static_cast<size_t>(idx)];
  if (value.empty()) {
    slot = Slot();  // re-read the environment on next use
  } else {
    load(def, value, "test", &slot);
  }
}

namespace detail {
// Test hooks (declared by tests/unit/core/params_test.cc): the table has no boolean parameter
// yet, so the boolean parser is tested directly.
bool parseParamBool(const std::string& text, bool* out) { return parseBool(text, out); }
bool parseParamInt(const std::string& text, int64_t* out) { return parseInt(text, out); }
}  // namespace detail

}  // namespace braid
