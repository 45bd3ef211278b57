// The host-memory Communicator: setup (host grouping, connections, intra-host segment), argument
// checks, the order/fingerprint sequence, failure propagation and the asynchronous queue. The
// algorithms themselves live one per file (allreduce/*.cc, broadcast.cc, ...).
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "collectives/comm_impl.h"
#include "collectives/selector/calibration.h"
#include "core/affinity.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/params.h"
#include "topology/detect.h"
#include "topology/sysfs.h"
#include "transport/bootstrap/bootstrap.h"

namespace braid {

namespace {

std::string readFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// Host identity: BRAID_HOST_ID, else hostname + boot id + network namespace, so that emulated
// hosts in separate network namespaces of one machine count as different hosts.
std::string detectHostId(const std::string& configured) {
  if (!configured.empty()) return configured;
  std::string env = paramString("BRAID_HOST_ID");
  if (!env.empty()) return env;
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof(host) - 1);
  std::string id = host;
  id += "/" + readFirstLine("/proc/sys/kernel/random/boot_id");
  struct stat st;
  if (stat("/proc/self/ns/net", &st) == 0) id += "/netns:" + std::to_string(st.st_ino);
  return id;
}

// This host as the topology layer sees it, for the selector's probe and its cache fingerprint:
// NICs from sysfs (or the BRAID_TOPO_FILE when one is given), cores, last-level cache.
detail::HostView localHostView() {
  detail::HostView v;
  const std::string method = paramString("BRAID_TOPO_FILE").empty() ? "sysfs" : "auto";
  auto topo = topo::detectTopology(method);
  if (topo.isOk()) {
    if (const topo::Host* h = topo::localHost(*topo)) {
      std::vector<std::string> names;
      for (const topo::Nic& n : h->nics) {
        if (n.kind == topo::NicKind::kLoopback) continue;
        names.push_back(n.name + ":" + std::to_string(n.speedMbps));
      }
      std::sort(names.begin(), names.end());
      for (const std::string& n : names) v.nics += n + ",";
    }
  }
  v.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  v.llcBytes = topo::lastLevelCacheBytes();
  return v;
}

std::atomic<int> gCommCounter{0};

std::vector<uint8_t> toBytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string fromBytes(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Work

class Communicator::Impl::WorkItem : public Work {
 public:
  WorkItem(Impl* impl, Collective c, std::function<Status()> fn)
      : impl_(impl), collective_(c), fn_(std::move(fn)) {}
  /// An item that is done already (an operation issued after releaseResources).
  explicit WorkItem(Status s)
      : impl_(nullptr), collective_(Collective::kBarrier), done_(true), status_(s) {}
  bool test() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  Status wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    return status_;
  }
  // Not done in time: the communicator is failed (the item's own waits and its peers' end), and
  // the item gets a second to stop; impl_ is alive while an item is not done (the destructor
  // runs every queued item first).
  Status wait(int64_t timeoutMs) override {
    if (timeoutMs <= 0) return wait();
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(timeoutMs), [this] { return done_; })) {
      return status_;
    }
    lock.unlock();
    const Status late = timeoutError(
        "rank " + std::to_string(impl_->rank_) + ": Work.wait(" + std::to_string(timeoutMs) +
        " ms): the " + collectiveName(collective_) +
        " did not complete in time; the communicator is failed (shrink or recreate it)");
    impl_->recordFailure(late, true);
    lock.lock();
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; });
    return late;
  }
  /// The operation's body (the worker, holding execMu_); complete() then publishes its status.
  Status runBody() {
    Status s = fn_();
    fn_ = nullptr;
    return s;
  }
  void complete(const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    done_ = true;
    cv_.notify_all();
  }

 private:
  Impl* impl_;
  Collective collective_;
  std::function<Status()> fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

// ---------------------------------------------------------------------------------------------
// Setup

Result<std::unique_ptr<Communicator>> Communicator::create(CommOptions options) {
  std::unique_ptr<Impl> impl(new Impl());
  BRAID_RETURN_IF_ERROR(impl->init(std::move(options)));
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Result<std::unique_ptr<Communicator>> Communicator::createFromEnvironment() {
  const int64_t timeoutMs = timeoutMsFromEnvironment();
  BRAID_ASSIGN_OR_RETURN(BootstrapInfo info,
                         bootstrapFromEnvironment(Deadline::afterMs(timeoutMs), timeoutMs));
  CommOptions options;
  options.timeoutMs = timeoutMs;
  options.rank = info.rank;
  options.size = info.size;
  options.store = std::shared_ptr<Store>(std::move(info.store));
  return create(std::move(options));
}

// split: every rank contributes (color, key) through an all-gather of the parent; the ranks of
// one color, ordered by (key, parent rank), create a communicator of their own over the parent's
// store under a prefix derived from the parent's and the split's sequence, with the parent's job
// secret, host identity and transport.
Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
  if (color < -1) {
    return invalidArgument("split: color must be >= 0, or -1 for no communicator; got " +
                           std::to_string(color));
  }
  const int n = impl_->size_;
  std::vector<int64_t> mine = {color, key};
  std::vector<int64_t> all(static_cast<size_t>(2 * n));
  BRAID_RETURN_IF_ERROR(allGather(mine.data(), all.data(), 2, DataType::kInt64));
  const int seq = impl_->splits_++;
  if (color < 0) return std::unique_ptr<Communicator>();
  std::vector<std::pair<int64_t, int>> members;  // (key, parent rank) of this color
  for (int r = 0; r < n; ++r) {
    if (all[2 * r] == color) members.push_back({all[2 * r + 1], r});
  }
  std::sort(members.begin(), members.end());
  CommOptions options = impl_->options_;
  options.size = static_cast<int>(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == impl_->rank_) options.rank = static_cast<int>(i);
  }
  std::unique_ptr<Impl> child(new Impl());
  child->splitPrefix_ = impl_->childPrefix("s" + std::to_string(seq) + "." + std::to_string(color));
  child->inheritedModel_ = impl_->selector()->costModel().model();
  Status s = child->init(std::move(options));
  setLogRank(impl_->rank_);  // init set the child's rank as the log prefix
  if (!s.isOk()) {
    return s.withContext("split(color " + std::to_string(color) + ") of rank " +
                         std::to_string(impl_->rank_));
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(child)));
}

namespace {

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return "[" + s + "]";
}

}  // namespace

// subgroup: members only, so nothing goes through this communicator's connections. The members
// derive one prefix from the list itself and from how many subgroups of that list this rank made
// before ("<prefix>g<hash of the list>.<count>"), and create the new communicator there with
// this one's options and model. A member with another list waits under another prefix: the
// creation times out naming the members that never came.
Result<std::unique_ptr<Communicator>> Communicator::subgroup(const std::vector<int>& ranks,
                                                             int64_t timeoutMs) {
  Impl& p = *impl_;
  const std::string list = rankList(ranks);
  const std::string what = "rank " + std::to_string(p.rank_) + ": subgroup " + list;
  int mine = -1;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= p.size_) {
      return invalidArgument(what + ": rank " + std::to_string(ranks[i]) + " is outside [0, " +
                             std::to_string(p.size_) + ")");
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return invalidArgument(what + ": rank " + std::to_string(sorted[i]) + " is listed twice");
    }
    if (ranks[i] == p.rank_) mine = static_cast<int>(i);
  }
  if (mine < 0) {
    return invalidUsage(what + ": the caller is not listed (only the listed ranks call subgroup)");
  }
  if (timeoutMs < 0) return invalidArgument(what + ": timeoutMs is negative");
  const int seq = p.subgroups_[ranks]++;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(fnv1a64(ranks.data(), ranks.size() * sizeof(int))));
  CommOptions options = p.options_;
  options.size = static_cast<int>(ranks.size());
  options.rank = mine;
  options.timeoutMs = timeoutMs > 0 ? timeoutMs : p.timeoutMs();
  const std::string prefix = p.childPrefix("g" + std::string(hash) + "." + std::to_string(seq));
  // Every member checks in first, so that one that never comes (or came with another list, and
  // so another prefix) is named by its rank here rather than by a key of the rendezvous.
  Store& store = *p.options_.store;
  BRAID_RETURN_IF_ERROR(store.set(prefix + "joined/" + std::to_string(p.rank_), toBytes(list))
                            .withContext(what));
  const Deadline deadline = Deadline::afterMs(options.timeoutMs);
  std::vector<int> missing;
  for (int q : ranks) {
    if (q == p.rank_) continue;
    auto v = store.get(prefix + "joined/" + std::to_string(q),
                       deadline.expired() ? Deadline::afterMs(0) : deadline);
    if (v.isOk()) continue;
    if (v.status().code() != Code::kTimeout) return v.status().withContext(what);
    missing.push_back(q);
  }
  if (!missing.empty()) {
    return timeoutError(what + ": within " + std::to_string(options.timeoutMs) +
                        " ms rank(s) " + rankList(missing) +
                        " did not call subgroup with this list (parent ranks)");
  }
  std::unique_ptr<Impl> child(new Impl());
  child->splitPrefix_ = prefix;
  child->inheritedModel_ = p.selector()->costModel().model();
  Status s = child->init(std::move(options));
  setLogRank(p.rank_);  // init set the child's rank as the log prefix
  if (!s.isOk()) {
    return s.withContext(what + " (parent ranks)");
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(child)));
}

// shrink: the agreement goes through the store only, so that it works whatever state the
// connections are in. Under "<prefix>k<seq>/", every caller publishes its sorted excluded list,
// then reads the list of every rank that its own list keeps (an excluded rank is never waited
// for: it may be dead) and compares. The survivors, renumbered in old-rank order, then create
// the new communicator under "<prefix>k<seq>/c/" with this one's options.
Result<std::unique_ptr<Communicator>> Communicator::shrink(const std::vector<int>& excluded,
                                                           ShrinkMode mode) {
  Impl& p = *impl_;
  const std::string me = "rank " + std::to_string(p.rank_);
  if (mode != ShrinkMode::kDefault && mode != ShrinkMode::kAbort) {
    return invalidArgument("shrink: unknown mode " + std::to_string(static_cast<int>(mode)) +
                           "; valid: 0 (default), 1 (abort)");
  }
  std::vector<int> list = excluded;
  std::sort(list.begin(), list.end());
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] < 0 || list[i] >= p.size_) {
      return invalidArgument("shrink: excluded rank " + std::to_string(list[i]) +
                             " is outside [0, " + std::to_string(p.size_) + ")");
    }
    if (i > 0 && list[i] == list[i - 1]) {
      return invalidArgument("shrink: rank " + std::to_string(list[i]) + " is excluded twice");
    }
  }
  if (static_cast<int>(list.size()) >= p.size_) {
    return invalidArgument("shrink: excluding all " + std::to_string(p.size_) +
                           " ranks leaves no communicator");
  }
  if (mode == ShrinkMode::kAbort && p.health().isOk()) {
    p.recordFailure(remoteError(me + ": aborted by shrink (ShrinkMode::kAbort)"), true);
  }
  if (!p.health().isOk()) p.releaseResources();

  const int seq = p.shrinks_++;
  const std::string base = p.storePrefix() + "k" + std::to_string(seq) + "/";
  const std::string mine = rankList(list);
  const std::string what = "shrink #" + std::to_string(seq) + " excluding " + mine;
  BRAID_RETURN_IF_ERROR(
      p.options_.store->set(base + "excluded/" + std::to_string(p.rank_), toBytes(mine))
          .withContext(me + ": " + what));
  const Deadline deadline = Deadline::afterMs(p.timeoutMs());
  std::vector<int> survivors, missing;
  for (int q = 0; q < p.size_; ++q) {
    if (std::binary_search(list.begin(), list.end(), q)) continue;
    survivors.push_back(q);
    if (q == p.rank_) continue;
    // After the deadline each remaining rank gets one look (a zero wait), so that the error
    // names every rank that is missing, not only the first.
    auto v = p.options_.store->get(base + "excluded/" + std::to_string(q),
                                   deadline.expired() ? Deadline::afterMs(0) : deadline);
    if (!v.isOk()) {
      if (v.status().code() != Code::kTimeout) return v.status().withContext(me + ": " + what);
      missing.push_back(q);
      continue;
    }
    const std::string theirs = fromBytes(*v);
    if (theirs != mine) {
      return invalidUsage(me + ": " + what + ", but rank " + std::to_string(q) + " excludes " +
                          theirs + ": every rank that stays must pass the same excluded ranks");
    }
  }
  if (!missing.empty()) {
    return timeoutError(me + ": " + what + ": within " + std::to_string(p.timeoutMs()) +
                        " ms (the communicator's timeout) rank(s) " + rankList(missing) +
                        " did not call shrink; exclude them too if they are gone");
  }
  if (std::binary_search(list.begin(), list.end(), p.rank_)) return std::unique_ptr<Communicator>();

  CommOptions options = p.options_;
  options.size = static_cast<int>(survivors.size());
  options.rank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), p.rank_) - survivors.begin());
  options.timeoutMs = p.timeoutMs();
  std::unique_ptr<Impl> child(new Impl());
  child->splitPrefix_ = p.childPrefix("k" + std::to_string(seq));
  child->inheritedModel_ = p.selector()->costModel().model();
  // The log prefix stays the new rank (init sets it): after a shrink the new communicator is
  // the one a program goes on with.
  Status s = child->init(std::move(options));
  if (!s.isOk()) return s.withContext(me + ": " + what);
  return std::unique_ptr<Communicator>(new Communicator(std::move(child)));
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

Communicator::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stopping_ = true;
  }
  queueCv_.notify_all();
  if (worker_.joinable()) worker_.join();
  for (const auto& [p, window] : privateWindows_) munmap(p, window.second);
  // Rank 0 usually serves the rendezvous store: it stays until every rank has left (bounded), so
  // that peers can still read an abort record or finish their own teardown. Once all have left,
  // nobody reads this communicator's keys any more, and rank 0 erases them (a job that splits
  // and destroys communicators all day would otherwise grow the store by each one's keys).
  if (store_ && p2p_) {
    int64_t n = 1;
    if (size_ > 1) {
      auto left = store_->add(prefix_ + "left", 1);
      n = left.isOk() ? *left : 0;
      if (rank_ == 0 && left.isOk()) {
        Deadline deadline = Deadline::afterMs(aborted_.load() ? 2000 : std::min<int64_t>(timeoutMs_, 10000));
        while (n < size_ && !deadline.expired()) {
          usleep(1000);
          auto v = store_->add(prefix_ + "left", 0);
          if (!v.isOk()) break;
          n = *v;
        }
      }
    }
    if (rank_ == 0 && n >= size_) (void)store_->erasePrefix(prefix_);
  }
}

std::string Communicator::Impl::childPrefix(const std::string& tag) const {
  return prefix_.substr(0, prefix_.size() - 1) + "." + tag + "/";
}

std::string Communicator::Impl::prefixTag() const {
  const std::string root = "braid/";
  std::string tag = prefix_.compare(0, root.size(), root) == 0 ? prefix_.substr(root.size()) : prefix_;
  if (!tag.empty() && tag.back() == '/') tag.pop_back();
  std::replace(tag.begin(), tag.end(), '/', '.');
  return tag;
}

Status Communicator::Impl::init(CommOptions options) {
  if (options.size < 1) return invalidArgument("communicator size must be ≥ 1, got " + std::to_string(options.size));
  if (options.rank < 0 || options.rank >= options.size) {
    return invalidArgument("rank " + std::to_string(options.rank) + " is outside [0, " +
                           std::to_string(options.size) + ")");
  }
  if (!options.store) return invalidArgument("communicator needs a rendezvous store");
  rank_ = options.rank;
  size_ = options.size;
  store_ = options.store;
  secret_ = options.jobSecret;
  timeoutMs_ = options.timeoutMs > 0 ? options.timeoutMs : timeoutMsFromEnvironment();
  chunkBytes_ = static_cast<size_t>(std::max<int64_t>(4096, paramInt("BRAID_CHUNK_BYTES")));
  setLogRank(rank_);
  prefix_ = !splitPrefix_.empty()       ? splitPrefix_
            : !options.keyPrefix.empty() ? options.keyPrefix
                                         : "braid/c" + std::to_string(gCommCounter.fetch_add(1)) + "/";
  if (prefix_.back() != '/') prefix_ += '/';  // "pg3" and "pg30" are two communicators
  std::string transportName = options.transport.empty() ? paramString("BRAID_TRANSPORT") : options.transport;
  if (transportName != "auto" && transportName != "shm" && transportName != "tcp") {
    return invalidArgument("unknown transport '" + transportName + "'; valid: auto, shm, tcp");
  }
  BRAID_RETURN_IF_ERROR(parseAlgoOverrides(paramString("BRAID_ALGO")));
  Deadline deadline = Deadline::afterMs(timeoutMs_);
  if (secret_ == 0) {
    // No secret given (createFromEnvironment, a framework's own store): rank 0 makes one and
    // publishes it under this communicator's prefix, so that a store reused for several
    // communicators never hands a rank the previous one's.
    Result<uint64_t> secret = exchangeJobSecret(store_.get(), rank_, deadline, prefix_ + "secret");
    if (!secret.isOk()) {
      return secret.status().withContext("rank " + std::to_string(rank_) + " of " +
                                         std::to_string(size_));
    }
    secret_ = secret.value();
  }

  // Host grouping: every rank publishes its host identity.
  std::string hostId = detectHostId(options.hostId);
  options.hostId = hostId;
  options.transport = transportName;
  options_ = options;
  BRAID_RETURN_IF_ERROR(store_->set(prefix_ + "host/" + std::to_string(rank_), toBytes(hostId)));
  std::vector<std::string> hostIds(size_);
  for (int r = 0; r < size_; ++r) {
    BRAID_ASSIGN_OR_RETURN(auto v, store_->get(prefix_ + "host/" + std::to_string(r), deadline));
    hostIds[r] = fromBytes(v);
  }
  hostOf_.assign(size_, -1);
  std::vector<std::string> hosts;
  for (int r = 0; r < size_; ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), hostIds[r]);
    hostOf_[r] = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) hosts.push_back(hostIds[r]);
  }
  numHosts_ = static_cast<int>(hosts.size());
  // Host ids are "hostname/boot id/netns:N" (or BRAID_HOST_ID): ranks whose ids differ only in the
  // network namespace are emulated hosts sharing one machine's cores.
  {
    auto machineOf = [&](int r) { return hostIds[r].substr(0, hostIds[r].find("/netns:")); };
    std::map<std::string, int> ranksOn;
    for (int r = 0; r < size_; ++r) ++ranksOn[machineOf(r)];
    for (const auto& [machine, n] : ranksOn) ranksPerMachine_ = std::max(ranksPerMachine_, n);
    ranksOnMyMachine_ = ranksOn[machineOf(rank_)];
    int machineIndex = 0;  // among the ranks on this machine, in rank order
    for (int r = 0; r < rank_; ++r) machineIndex += machineOf(r) == machineOf(rank_) ? 1 : 0;
    chooseOwnThreadCpus(machineIndex, ranksOnMyMachine_);
  }
  for (int r = 0; r < size_; ++r) {
    if (hostOf_[r] == hostOf_[rank_]) {
      if (r == rank_) localRank_ = static_cast<int>(localRanks_.size());
      localRanks_.push_back(r);
    }
  }

  // Transports: shm between ranks of one host (unless tcp is forced), tcp otherwise.
  transport::TransportOptions topts;
  topts.jobSecret = secret_;
  topts.rank = rank_;
  topts.tcpAddress = options.tcpAddress;
  topts.timeoutMs = timeoutMs_;
  const bool useShm = transportName != "tcp" && localRanks_.size() > 1;
  const bool needTcp = transportName == "tcp" || numHosts_ > 1;
  if (transportName == "shm" && numHosts_ > 1) {
    return invalidArgument("BRAID_TRANSPORT=shm but the ranks span " + std::to_string(numHosts_) +
                           " hosts; use auto or tcp");
  }
  if (useShm) {
    BRAID_ASSIGN_OR_RETURN(shm_, transport::createTransport("shm", topts));
  }
  if (needTcp) {
    BRAID_ASSIGN_OR_RETURN(tcp_, transport::createTransport("tcp", topts));
  }
  links_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    links_[r].transport = (useShm && hostOf_[r] == hostOf_[rank_]) ? shm_.get() : tcp_.get();
  }
  BRAID_RETURN_IF_ERROR(connectAll(deadline));

  // Intra-host segment for the shm all-reduce and barrier.
  if (useShm) {
    // The store prefix names the communicator; a POSIX shm name may hold no further '/'.
    char name[128];
    snprintf(name, sizeof(name), "/braid-%016llx-%s-h%d", static_cast<unsigned long long>(secret_),
             prefixTag().c_str(), hostOf_[rank_]);
    BRAID_ASSIGN_OR_RETURN(
        segment_,
        detail::ShmSegment::create(
            name, store_.get(), prefix_ + "h" + std::to_string(hostOf_[rank_]) + "/", secret_,
            localRanks_, localRank_, static_cast<size_t>(paramInt("BRAID_SHM_SEGMENT_BYTES")),
            timeoutMs_, ranksOnMyMachine_));
    segment_->setStallHook([this](const std::vector<int>& peers) { publishWaitFor(peers); },
                           waitForLeadMs());
  }
  p2p_ = std::make_unique<detail::P2p>(rank_, size_, &links_, timeoutMs_,
                                       [this] { return checkAbort(); });
  p2p_->setStallHook([this](const std::vector<int>& peers) { publishWaitFor(peers); },
                     waitForLeadMs());
  BRAID_RETURN_IF_ERROR(setUpSelector(transportName, deadline));
  BRAID_RETURN_IF_ERROR(startTrace());
  BRAID_INFO("communicator ready: rank %d of %d, host %d of %d, local rank %d of %zu, transport %s",
             rank_, size_, hostOf_[rank_], numHosts_, localRank_, localRanks_.size(),
             transportName.c_str());
  return Status::ok();
}

Status Communicator::Impl::connectAll(Deadline deadline) {
  using transport::Handle;
  // Rank r listens once per peer q; slot q of r's handle table is what q connects to.
  std::vector<std::unique_ptr<transport::ListenComm>> listens(size_);
  std::vector<uint8_t> table(static_cast<size_t>(size_) * sizeof(Handle), 0);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    Handle h{};
    BRAID_RETURN_IF_ERROR(links_[q].transport->listen(&h, &listens[q]));
    std::memcpy(table.data() + static_cast<size_t>(q) * sizeof(Handle), &h, sizeof(Handle));
  }
  BRAID_RETURN_IF_ERROR(store_->set(prefix_ + "handles/" + std::to_string(rank_), table));
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    BRAID_ASSIGN_OR_RETURN(auto theirs, store_->get(prefix_ + "handles/" + std::to_string(q), deadline));
    if (theirs.size() != table.size()) return internalError("handle table of rank " + std::to_string(q) + " is malformed");
    Handle h;
    std::memcpy(&h, theirs.data() + static_cast<size_t>(rank_) * sizeof(Handle), sizeof(Handle));
    BRAID_RETURN_IF_ERROR(links_[q].transport->connect(h, &links_[q].send).withContext(
        "rank " + std::to_string(rank_) + ": connecting to rank " + std::to_string(q)));
  }
  // Accept every peer's connection while driving this rank's own connections forward: over a
  // real network neither side completes unless both keep progressing.
  Backoff backoff;
  int pending = size_ - 1;
  int sendsPending = size_ - 1;
  std::vector<uint8_t> sendReady(size_, 0);
  while (pending > 0 || sendsPending > 0) {
    bool progressed = false;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      if (!sendReady[q]) {
        bool ready = false;
        BRAID_RETURN_IF_ERROR(links_[q].transport->progressConnect(links_[q].send.get(), &ready)
                                  .withContext("rank " + std::to_string(rank_) +
                                               ": connecting to rank " + std::to_string(q)));
        if (ready) {
          sendReady[q] = 1;
          --sendsPending;
          progressed = true;
        }
      }
      if (links_[q].recv) continue;
      BRAID_RETURN_IF_ERROR(links_[q].transport->accept(listens[q].get(), &links_[q].recv));
      if (links_[q].recv) {
        --pending;
        progressed = true;
        listens[q].reset();
      }
    }
    if (progressed) {
      backoff.reset();
      continue;
    }
    if (deadline.expired()) {
      std::string missing, unreached;
      for (int q = 0; q < size_; ++q) {
        if (q != rank_ && !links_[q].recv) missing += (missing.empty() ? "" : ", ") + std::to_string(q);
        if (q != rank_ && !sendReady[q]) unreached += (unreached.empty() ? "" : ", ") + std::to_string(q);
      }
      return timeoutError("rank " + std::to_string(rank_) + ": within BRAID_TIMEOUT_MS=" +
                          std::to_string(timeoutMs_) + " ms, rank(s) [" + missing +
                          "] did not connect to this rank and this rank could not reach [" +
                          unreached + "]");
    }
    backoff.pause();
  }
  return Status::ok();
}

Status Communicator::Impl::parseAlgoOverrides(const std::string& spec) {
  // A bare name (all-reduce) or COLLECTIVE:NAME entries joined by ';'; the selector applies them.
  BRAID_ASSIGN_OR_RETURN(algoOverrides_, detail::parseAlgoOverrideSpec(spec));
  return Status::ok();
}

// The probe hook: calibrate (or read the cache), agree on rank 0's model, build the selector.
Result<std::shared_ptr<detail::Selector>> Communicator::Impl::buildSelector(
    const std::string& transportName, Deadline deadline, bool forceProbe,
    const std::string& keyPrefix, detail::PendingCache* pending) {
  detail::Placement placement;
  placement.hostOf = hostOf_;
  // Decided from what every rank knows alike (a rank alone on its host has no segment itself).
  placement.segment = transportName != "tcp" && static_cast<int>(hostOf_.size()) > numHosts_;
  placement.segmentHalfBytes =
      static_cast<size_t>(std::max<int64_t>(8192, paramInt("BRAID_SHM_SEGMENT_BYTES"))) / 2;
  placement.chunkBytes = chunkBytes_;
  placement.ranksPerMachine = ranksPerMachine_;
  // Agreed by every rank of the one host (the segment's algorithms run on one host only).
  if (placement.segment && numHosts_ == 1 && segment_) {
    placement.singleCopyMinBytes = segment_->singleCopyMinBytes();
    placement.singleCopyForced = segment_->singleCopyForced();
  }

  detail::ProbeContext ctx;
  ctx.rank = rank_;
  ctx.hostOf = hostOf_;
  ctx.store = store_.get();
  ctx.prefix = keyPrefix;
  ctx.segment = segment_.get();
  ctx.transport = transportName;
  ctx.segmentPlacement = placement.segment;
  ctx.host = localHostView();
  ctx.forceProbe = forceProbe;
  ctx.deadline = deadline;
  // The probe's own engine: its waits end within a few seconds whatever BRAID_TIMEOUT_MS says.
  detail::P2p probeNet(rank_, size_, &links_, std::min<int64_t>(timeoutMs_, 10000),
                       [this] { return checkAbort(); });
  ctx.p2p = &probeNet;
  detail::FabricModel model;
  if (inheritedModel_ && !forceProbe) {
    model = *inheritedModel_;
    model.callUs = 0;  // measured anew (setUpSelector)
  } else {
    BRAID_ASSIGN_OR_RETURN(model, detail::calibrateFabric(ctx, pending));
  }

  std::vector<detail::TuningRule> rules;
  const std::string file = paramString("BRAID_TUNING_FILE");
  if (!file.empty()) {
    BRAID_ASSIGN_OR_RETURN(rules, detail::readTuningFile(file));
  }
  auto selector = std::make_shared<detail::Selector>(model, placement, algoOverrides_,
                                                     std::move(rules), paramBool("BRAID_EXPLAIN"));
  // A forced algorithm that cannot run here is an error, not a silent fallback.
  for (int c = 0; c < detail::kSelectableCollectives; ++c) {
    const auto coll = static_cast<detail::SelCollective>(c);
    const detail::Algorithm* forced = algoOverrides_.row(coll);
    if (forced == nullptr) continue;
    const std::string why = selector->costModel().unavailableWhy(*forced);
    if (!why.empty()) {
      return invalidArgument("BRAID_ALGO='" + algoOverrides_.spec + "': " +
                             detail::selCollectiveName(coll) + " algorithm " + forced->name + " " +
                             why + " (ranks span " + std::to_string(numHosts_) + " host(s))");
    }
  }
  BRAID_INFO("selector: %s", model.describe().c_str());
  return selector;
}

namespace {

// How far a model's predictions (8-byte calls, and the segment's 8 KiB one) may stray from the
// live calls before it is re-probed. A
// fresh model on the 2-core VM predicts them within 0.7-1.4x (2-8 ranks, shm and tcp, the call
// overhead included); the poisoned caches seen there were 18x and 38x too slow. A cached model
// may also be stale the other way (the fabric got slower): 8x, as the call overhead (up to 3x
// the transfer terms over tcp with ranks outnumbering cores) is measured anew by every job.
constexpr double kTooSlowFactor = 4;
constexpr double kTooFastFactor = 8;

// Why the model is implausible against the live calls, or "" when it is not.
std::string implausible(const std::string& source,
                        const std::vector<Communicator::Impl::CallCheck>& checks) {
  char buf[200];
  for (const Communicator::Impl::CallCheck& c : checks) {
    if (c.measuredUs <= 0 || c.predictedUs <= 0) continue;
    const char* fmt = nullptr;
    double ratio = 0;
    if (c.predictedUs > kTooSlowFactor * c.measuredUs) {
      fmt = "predicts %.2f us for the %zu-byte %s all-reduce, %.0fx the %.2f us it takes";
      ratio = c.predictedUs / c.measuredUs;
    } else if (source == "cache" && c.measuredUs > kTooFastFactor * c.predictedUs) {
      fmt = "predicts %.2f us for the %zu-byte %s all-reduce, 1/%.0f of the %.2f us it takes";
      ratio = c.measuredUs / c.predictedUs;
    }
    if (fmt != nullptr) {
      std::snprintf(buf, sizeof(buf), fmt, c.predictedUs, c.bytes, c.algorithm.c_str(), ratio,
                    c.measuredUs);
      return buf;
    }
  }
  return "";
}

}  // namespace

Result<std::shared_ptr<detail::Selector>> Communicator::Impl::probeAndCheck(
    const std::string& keyPrefix, Deadline deadline, detail::PendingCache* pending,
    std::string* why) {
  *pending = detail::PendingCache{};
  BRAID_ASSIGN_OR_RETURN(std::shared_ptr<detail::Selector> sel,
                         buildSelector(options_.transport, deadline, true, keyPrefix, pending));
  std::vector<CallCheck> checks;
  BRAID_RETURN_IF_ERROR(measureCallOverhead(*sel, &checks)
                            .withContext("timing the collective call after re-probing"));
  *why = implausible(sel->costModel().model().source, checks);
  return sel;
}

// A fresh probe that fails the check is used by this job and not cached: probing again on the
// same busy machine would only cost the time (and two probes in a row outran a 5 s creation
// deadline under ctest -j2). A cached model that fails it is re-probed once: it came from
// another moment, and would mislead every job until repaired; that costs one probe, as a cache
// miss does. (No other thread sees this communicator yet: the first selector is installed and
// then given its call overhead; a re-probe's is timed first, then installed.)
Status Communicator::Impl::setUpSelector(const std::string& transportName, Deadline deadline) {
  detail::PendingCache pending;
  BRAID_ASSIGN_OR_RETURN(std::shared_ptr<detail::Selector> sel,
                         buildSelector(transportName, deadline, false, prefix_, &pending));
  installSelector(sel);
  if (inheritedModel_) {
    // The parent's model passed the checks below when the parent was created; a child with
    // fewer ranks per core has a call overhead of its own.
    BRAID_RETURN_IF_ERROR(measureCallOverhead(*sel).withContext("timing the collective call"));
    startLiveChecks(*sel);
    return Status::ok();
  }
  std::vector<CallCheck> checks;
  BRAID_RETURN_IF_ERROR(
      measureCallOverhead(*sel, &checks).withContext("timing the collective call"));
  std::string source = sel->costModel().model().source;
  std::string why = implausible(source, checks);
  // Every rank holds the same gathered times, model and deadline budget: all decide alike.
  const bool reprobe = !why.empty() && source == "cache";
  if (!why.empty() && !reprobe && rank_ == 0) {
    BRAID_WARN("calibration: the probed model %s (a busy machine?): used by this job, not cached",
               why.c_str());
  }
  if (reprobe) {
    const uint64_t t0 = nowNs();
    if (rank_ == 0) BRAID_WARN("calibration: the cached model %s; re-probing", why.c_str());
    BRAID_ASSIGN_OR_RETURN(sel, probeAndCheck(prefix_ + "reprobe/", deadline, &pending, &why));
    installSelector(sel);  // used by this job either way
    if (rank_ == 0) {
      BRAID_WARN("calibration: re-probed in %.0f ms; %s", static_cast<double>(nowNs() - t0) / 1e6,
                 why.empty() ? "the new model agrees with the live calls"
                             : ("still implausible (" + why + "): used by this job, not cached")
                                   .c_str());
    }
  }
  // Only a model that agrees with the live calls is cached (rank 0 alone writes); the call
  // overhead is measured by every job anew (measureCallOverhead), never cached.
  if (why.empty()) writeCache(pending, *sel);
  startLiveChecks(*sel);
  return Status::ok();
}

void Communicator::Impl::startLiveChecks(const detail::Selector& sel) {
  // The built-in defaults (BRAID_CALIBRATION=off) are meant as they are.
  const int64_t interval = paramInt("BRAID_RETUNE_INTERVAL");
  liveInterval_ = size_ > 1 && interval > 0 && sel.costModel().model().source != "default"
                      ? static_cast<uint64_t>(interval)
                      : 0;
  nextVoteSeq_ = seq_ + liveInterval_;
}

void Communicator::Impl::writeCache(const detail::PendingCache& pending,
                                    const detail::Selector& sel) {
  if (pending.path.empty()) return;
  detail::FabricModel m = sel.costModel().model();
  m.callUs = 0;
  Status w = detail::writeCachedModel(pending.path, pending.fingerprint, m);
  if (!w.isOk()) BRAID_WARN("calibration cache not written: %s", w.toString().c_str());
}

// ---------------------------------------------------------------------------------------------
// Closed-loop tuning
//
// A model can be right when the communicator is made and wrong later (the machine got busier or
// quieter), or wrong in a way the checks above cannot see (a cache whose bandwidths a probe
// on a busy machine measured). So the all-reduces of the job itself are held against their
// predictions: every BRAID_RETUNE_INTERVAL collectives, each rank takes the median and the 10th
// percentile of measured / predicted time over its latest kLiveWindow all-reduces, and one
// 2-element all-reduce (MAX) gives every rank the largest median and the smallest 10th
// percentile of any rank, so all decide alike. The model predicts too slowly when even the
// largest median is under 1/kTooSlowFactor; too fast when even the smallest 10th percentile is
// over kTooFastFactor (a rank that arrives early waits for the others inside the collective,
// which inflates its times; the 10th percentile of the quickest rank is the collective itself).
// Then every rank re-probes at that same point of the stream - a probe in the background would
// share the cores and links with the job's own collectives and measure them - times the new model
// as at creation, and installs it (and caches it) when it agrees with the live calls, else keeps
// the old one and stops checking; rank 0 logs one line saying why and what came of it. Each
// re-probe doubles the interval, and after kMaxReprobes the checks stop: a machine whose speed
// swings back and forth does not pay for a probe every few thousand calls.

namespace {

constexpr size_t kLiveWindow = 64;
constexpr size_t kLiveMinSamples = 16;
constexpr int kMaxReprobes = 4;
// Reading the clock once more costs 20-40 ns: every all-reduce predicted to take at least this
// long is timed (under 1%), and one in kSmallSampling of the quicker ones (liveTimeFromUs counts
// every collective, runChoice reads the clock).
constexpr double kTimeEveryCallUs = 5;
constexpr uint32_t kSmallSampling = 16;

}  // namespace

double Communicator::Impl::liveTimeFromUs(bool collective) {
  if (tracer_ && collective && !inRetune_) return 0;  // every traced collective has its times
  if (liveInterval_ == 0 || inRetune_ || !collective) return HUGE_VAL;
  return ++liveSkipped_ % kSmallSampling == 0 ? 0 : kTimeEveryCallUs;
}

void Communicator::Impl::recordLive(const detail::CollArgs& a) {
  if (liveInterval_ == 0 || inRetune_ || a.fp.collective != Collective::kAllReduce ||
      a.predictedUs <= 0 || a.startNs == 0) {
    return;
  }
  const float ratio =
      static_cast<float>(static_cast<double>(nowNs() - a.startNs) / 1000.0 / a.predictedUs);
  if (liveRatios_.size() < kLiveWindow) {
    liveRatios_.push_back(ratio);
  } else {
    liveRatios_[liveNext_] = ratio;
  }
  liveNext_ = (liveNext_ + 1) % kLiveWindow;
}

Status Communicator::Impl::retune() {
  struct Guard {
    bool& flag;
    explicit Guard(bool& f) : flag(f) { flag = true; }
    ~Guard() { flag = false; }
  } guard(inRetune_);
  const uint64_t votedAt = seq_;
  nextVoteSeq_ = seq_ + liveInterval_;
  // Too few samples (a job of other collectives): a vote that cannot trigger either way.
  double stats[2] = {1, -1};
  if (liveRatios_.size() >= kLiveMinSamples) {
    std::vector<float> r = liveRatios_;
    std::sort(r.begin(), r.end());
    stats[0] = r[r.size() / 2];
    stats[1] = -static_cast<double>(r[r.size() / 10]);
  }
  BRAID_ASSIGN_OR_RETURN(Op vote, allReduceOp(stats, stats, 2, DataType::kFloat64, ReduceOp::kMax));
  BRAID_RETURN_IF_ERROR(execute(vote.fp, true, vote));
  const double largestMedian = stats[0], smallestP10 = -stats[1];
  char why[200];
  if (largestMedian < 1 / kTooSlowFactor) {
    std::snprintf(why, sizeof(why),
                  "live all-reduces took %.2gx the model's predictions (median of up to the "
                  "latest %zu on the slowest rank)",
                  largestMedian, kLiveWindow);
  } else if (smallestP10 > kTooFastFactor) {
    std::snprintf(why, sizeof(why),
                  "live all-reduces took %.3gx the model's predictions (10th percentile of up "
                  "to the latest %zu on the quickest rank)",
                  smallestP10, kLiveWindow);
  } else {
    return Status::ok();
  }
  // A re-probe: every rank is here, at the same collective.
  const uint64_t t0 = nowNs();
  ++reprobes_;
  liveInterval_ = reprobes_ < kMaxReprobes ? 2 * liveInterval_ : 0;
  liveRatios_.clear();
  liveNext_ = 0;
  detail::PendingCache pending;
  std::string still;
  BRAID_ASSIGN_OR_RETURN(std::shared_ptr<detail::Selector> sel,
                         probeAndCheck(prefix_ + "retune" + std::to_string(reprobes_) + "/",
                                       Deadline::afterMs(timeoutMs_), &pending, &still));
  if (still.empty()) {
    installSelector(sel);
    writeCache(pending, *sel);
  } else {
    // The probe cannot do better on this machine now (4 ranks on 2 cores: a hand-off measured
    // out of step with the scheduler): more re-probes would only cost the job their time.
    liveInterval_ = 0;
  }
  nextVoteSeq_ = seq_ + liveInterval_;
  if (rank_ == 0) {
    BRAID_WARN("calibration: %s at collective #%llu; re-probed in %.0f ms: %s%s", why,
               static_cast<unsigned long long>(votedAt), static_cast<double>(nowNs() - t0) / 1e6,
               still.empty()
                   ? (pending.path.empty()
                          ? "the new model agrees with the live calls, in effect now"
                          : "the new model agrees with the live calls, in effect now and cached")
                   : ("the new model " + still + " as well: kept the old one").c_str(),
               liveInterval_ == 0 ? " (no more checks in this job)" : "");
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Failure handling

Status Communicator::Impl::checkAbort() {
  if (aborted_.load(std::memory_order_acquire)) return health();
  if (segment_) {
    BRAID_RETURN_IF_ERROR(segment_->abortStatus());
    BRAID_RETURN_IF_ERROR(segment_->checkAnnouncements());
  }
  uint64_t now = nowNs();
  if (now < nextStoreCheckNs_) return Status::ok();
  nextStoreCheckNs_ = now + 500000000ull;
  BRAID_RETURN_IF_ERROR(storeAbortStatus(Deadline::afterMs(0)));
  return checkStalledOrder();
}

// Ranks that called different collectives can wait on each other with nothing in flight (a tree
// reduce on one side, a tree broadcast on the other: each waits to receive), so no message can
// carry the mismatch, and it would end as a timeout. A collective still running after a second
// therefore publishes what it is in the store ("cur/<rank>": sequence, packed fingerprint,
// count), and compares it with the peers it waits for: the same sequence number with a different
// collective is the caller's error, reported as such.
Status Communicator::Impl::checkStalledOrder() {
  if (curSeq_ == 0 || !p2p_) return Status::ok();
  // The collective's start as this check first saw it (execute reads no clock): a stall shows
  // one to two checks (0.5-1 s) later than a second after the call.
  const uint64_t now = nowNs();
  if (curSinceNs_ == 0) curSinceNs_ = now;
  if (now - curSinceNs_ < 1000000000ull) return Status::ok();
  if (!curPublished_) {
    const std::string mine = std::to_string(curSeq_) + " " +
                             std::to_string(detail::packFingerprint(curFp_)) + " " +
                             std::to_string(curFp_.count);
    (void)store_->set(prefix_ + "cur/" + std::to_string(rank_), toBytes(mine));
    curPublished_ = true;
  }
  for (int q : p2p_->pendingPeers()) {
    auto v = store_->get(prefix_ + "cur/" + std::to_string(q), Deadline::afterMs(0));
    if (!v.isOk()) continue;
    unsigned long long seq = 0, word = 0, count = 0;
    if (std::sscanf(fromBytes(*v).c_str(), "%llu %llu %llu", &seq, &word, &count) != 3 ||
        seq != curSeq_) {
      continue;  // unreadable, or another collective of theirs (an older record)
    }
    const detail::Fingerprint theirs = detail::unpackFingerprint(word, count);
    if (theirs != curFp_) {
      return detail::collectiveMismatch(rank_, curSeq_, curFp_, q, seq, theirs);
    }
  }
  return Status::ok();
}

// The abort record in the store is "<code>|<message>", written by the first rank that failed.
Status Communicator::Impl::storeAbortStatus(Deadline deadline) {
  auto v = store_->get(prefix_ + "abort", deadline);
  if (v.isOk()) {
    std::string text = fromBytes(*v);
    size_t bar = text.find('|');
    int code = bar == std::string::npos ? static_cast<int>(Code::kRemote) : atoi(text.c_str());
    if (code <= 0 || code > static_cast<int>(Code::kTimeout)) code = static_cast<int>(Code::kRemote);
    return Status(static_cast<Code>(code), "rank " + std::to_string(rank_) +
                                               ": the communicator was aborted: " +
                                               (bar == std::string::npos ? text : text.substr(bar + 1)));
  }
  if (v.status().code() != Code::kTimeout) {
    return remoteError("rank " + std::to_string(rank_) +
                       ": lost the rendezvous store (rank 0 exited?): " + v.status().message());
  }
  return Status::ok();
}

// Every rank that times out publishes whom it was waiting for; after a short grace period the
// chain is followed to the ranks that wait for nobody: those stalled (or are not calling the
// collective), and the error names them instead of an innocent neighbour that was itself waiting.
// When every rank on the chain is waiting (a cycle: nobody stalled, messages are just not
// arriving, as when a link between hosts is down), the error names the waits that cross hosts,
// the suspect links, with both ends.
// The record goes out waitForLeadMs() before the timeout (P2p's stall hook), so that the ranks
// that stalled up to that long after this one have published theirs when it reads the chain.
int64_t Communicator::Impl::waitForLeadMs() const { return std::min<int64_t>(1000, timeoutMs_ / 2); }

void Communicator::Impl::publishWaitFor(const std::vector<int>& peers) {
  std::string mine;
  for (int peer : peers) mine += std::to_string(peer) + ",";
  (void)store_->set(prefix_ + "waitfor/" + std::to_string(rank_), toBytes(mine));
  waitForPublishedNs_ = nowNs();
}

Status Communicator::Impl::explainTimeout(const Status& s, const std::vector<int>& stalled) {
  const uint64_t sincePublishedNs = nowNs() - waitForPublishedNs_;
  publishWaitFor(stalled);  // the peers owed now (the stall hook's record may be older)
  const uint64_t leadNs = static_cast<uint64_t>(waitForLeadMs()) * 1000000ull;
  if (sincePublishedNs < leadNs) usleep(static_cast<useconds_t>((leadNs - sincePublishedNs) / 1000));
  std::vector<int> frontier = stalled;
  std::vector<uint8_t> visited(size_, 0);
  visited[rank_] = 1;
  std::string chain, culprits, links;
  auto crossHost = [&](int a, int b) {
    if (hostOf_[a] == hostOf_[b]) return;
    links += (links.empty() ? "" : ", ") + std::string("rank ") + std::to_string(a) + " (host " +
             std::to_string(hostOf_[a]) + ") -> rank " + std::to_string(b) + " (host " +
             std::to_string(hostOf_[b]) + ")";
  };
  for (int peer : stalled) crossHost(rank_, peer);
  while (!frontier.empty()) {
    int q = frontier.back();
    frontier.pop_back();
    if (q < 0 || q >= size_ || visited[q]) continue;
    visited[q] = 1;
    auto v = store_->get(prefix_ + "waitfor/" + std::to_string(q), Deadline::afterMs(0));
    if (!v.isOk()) {
      culprits += (culprits.empty() ? "" : ", ") + std::to_string(q);
      continue;
    }
    std::string list = fromBytes(*v);
    chain += "; rank " + std::to_string(q) + " was itself waiting for rank(s) " + list.substr(0, list.size() - 1);
    size_t start = 0;
    while (start < list.size()) {
      size_t comma = list.find(',', start);
      int next = atoi(list.substr(start, comma - start).c_str());
      crossHost(q, next);
      frontier.push_back(next);
      start = comma == std::string::npos ? list.size() : comma + 1;
    }
  }
  if (chain.empty()) return s;
  if (!culprits.empty()) {
    return timeoutError(s.message() + chain + "; stalled or not calling the collective: rank " +
                        culprits);
  }
  if (links.empty()) return timeoutError(s.message() + chain + "; every rank is waiting");
  return timeoutError(s.message() + chain +
                      "; every rank is waiting and none stalled: messages between hosts are not "
                      "arriving (a link down?); suspect waits across hosts: " + links);
}

void Communicator::Impl::recordFailure(const Status& s, bool notifyPeers) {
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    if (!firstError_.isOk()) return;
    firstError_ = s;
  }
  aborted_.store(true, std::memory_order_release);
  BRAID_WARN("communicator failed: %s", s.toString().c_str());
  // The store record first: peers that see the abort word or an abort frame read it for the cause.
  if (notifyPeers) {
    (void)store_->set(prefix_ + "abort",
                      toBytes(std::to_string(static_cast<int>(s.code())) + "|" + s.message()));
  }
  std::lock_guard<std::mutex> lock(errorMu_);
  if (segment_) segment_->raiseAbort(static_cast<int>(s.code()), rank_);
}

void Communicator::Impl::releaseResources() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    if (released_) return;
    released_ = true;
    stopping_ = true;
  }
  queueCv_.notify_all();
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> exec(execMu_);
  p2p_.reset();
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    segment_.reset();
  }
  links_.clear();
  shm_.reset();
  tcp_.reset();
}

void Communicator::Impl::fail(const Status& s, bool publish) {
  recordFailure(s, publish);
  // Tell the peers this rank's transports can reach, then stop talking.
  if (p2p_) p2p_->sendAbort(static_cast<int>(s.code()), rank_, 100);
}

Status Communicator::Impl::health() const {
  std::lock_guard<std::mutex> lock(errorMu_);
  return firstError_;
}

// ---------------------------------------------------------------------------------------------
// Running operations

namespace {
thread_local const Communicator::Impl* tExecuting = nullptr;
}  // namespace

Communicator::Impl::ExecutingHere::ExecutingHere(const Impl* impl) : outer_(tExecuting) {
  tExecuting = impl;
}
Communicator::Impl::ExecutingHere::~ExecutingHere() { tExecuting = outer_; }
const Communicator::Impl* Communicator::Impl::ExecutingHere::current() { return tExecuting; }

Status Communicator::Impl::execute(const detail::Fingerprint& fp, bool collective, Body body) {
  // Caller holds execMu_ (inline) or is the worker.
  if (aborted_.load(std::memory_order_acquire)) return health();
  const ExecutingHere here(this);
  if (collective && retuneDue()) {
    Status s = retune();
    if (!s.isOk()) {
      s = s.withContext("closed-loop tuning (BRAID_RETUNE_INTERVAL)");
      fail(s, true);
      return s;
    }
  }
  detail::CollArgs a;
  a.p2p = p2p_.get();
  a.shm = (segment_ && numHosts_ == 1) ? segment_.get() : nullptr;
  a.scratch = &scratch_;
  a.outerScratch = &outerScratch_;
  a.seq = collective ? ++seq_ : 0;
  a.fp = fp;
  a.type = fp.type;
  a.op = fp.op;
  a.reduce = getReduceFn(fp.type, fp.op == ReduceOp::kAvg ? ReduceOp::kSum : fp.op);
  a.elemSize = dataTypeSize(fp.type);
  a.chunkBytes = chunkBytes_;
  a.rank = rank_;
  a.size = size_;
  a.hostOf = &hostOf_;
  a.hostShm = segment_.get();
  a.shmPlan = shmPlan_;
  if (segment_ && collective) segment_->announce(a.seq, fp);
  a.timeFromUs = liveTimeFromUs(collective);
  curSeq_ = a.seq;
  curFp_ = fp;
  curSinceNs_ = 0;  // checkStalledOrder's first look sets it: no clock read on every call
  curPublished_ = false;
  // A local peer that already failed the communicator (a Work.wait timeout, an abort) may have
  // left everything this collective needs in the segment; it must fail here, not complete.
  Status s = segment_ ? segment_->abortStatus() : Status::ok();
  if (s.isOk()) s = body(a);
  curSeq_ = 0;
  if (s.isOk() && collective) recordLive(a);
  if (tracer_ && collective && !inRetune_) {
    traceCollective(a, a.startNs != 0 ? a.startNs : nowNs(), s);  // 0: a body without a row
  }
  bool publish = true;
  // A timeout in the host's segment (a local rank never arrived) or in a point-to-point wait.
  const std::vector<int> noPeers;
  const std::vector<int>& stalled = !s.isOk() && segment_ && !segment_->stalledPeers().empty()
                                        ? segment_->stalledPeers()
                                        : (p2p_ ? p2p_->stalledPeers() : noPeers);
  if (!s.isOk() && s.code() == Code::kTimeout && !stalled.empty()) {
    s = explainTimeout(s, stalled);
  }
  if (!s.isOk() && s.code() == Code::kRemote) {
    // A peer aborted: report the original cause (and its code) when it is on record; it is
    // already published, so do not publish it again.
    Status cause = storeAbortStatus(Deadline::afterMs(300));
    if (!cause.isOk()) {
      s = cause;
      publish = false;
    }
  }
  if (!s.isOk()) fail(s, publish);
  return s;
}

Status Communicator::Impl::run(const detail::Fingerprint& fp, bool collective, Body body) {
  // Inside an operation of this communicator (closed-loop tuning's own collectives): it holds
  // the right to execute already.
  if (ExecutingHere::current() == this) return execute(fp, collective, body);
  if (workerStarted_.load(std::memory_order_acquire)) {
    std::unique_lock<std::mutex> queued(queueMu_);
    if (active_ > 0 || released_) {
      queued.unlock();
      // Keep issue order with earlier asynchronous operations.
      return enqueue(fp.collective, [&] { return execute(fp, collective, body); })->wait();
    }
    // Every earlier asynchronous operation has finished: run here, as before the worker
    // started, without the two thread hand-offs through the worker (a Bucketer's step ends in
    // blocking calls on its engine thread). execMu_ is taken before queueMu_ is released, so an
    // operation enqueued after this check runs after this one.
    std::lock_guard<std::mutex> lock(execMu_);
    queued.unlock();
    return execute(fp, collective, body);
  }
  std::lock_guard<std::mutex> lock(execMu_);
  return execute(fp, collective, body);
}

std::shared_ptr<Work> Communicator::Impl::enqueue(Collective c, std::function<Status()> fn) {
  auto item = std::make_shared<WorkItem>(this, c, std::move(fn));
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    // Released by shrink: the communicator is failed and has no thread left to run anything.
    if (released_) return std::make_shared<WorkItem>(health());
    if (!worker_.joinable()) {
      worker_ = std::thread([this] { workerLoop(); });
      workerStarted_.store(true, std::memory_order_release);
    }
    queue_.push_back(item);
    ++active_;
  }
  queueCv_.notify_one();
  return item;
}

void Communicator::Impl::workerLoop() {
  placeOwnThread("braid-worker");
  for (;;) {
    std::shared_ptr<WorkItem> item;
    {
      std::unique_lock<std::mutex> lock(queueMu_);
      queueCv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    Status s;
    {
      std::lock_guard<std::mutex> lock(execMu_);
      s = item->runBody();
    }
    {
      std::lock_guard<std::mutex> lock(queueMu_);
      --active_;
    }
    // After active_ drops: a waiter that issues a blocking call next finds nothing active.
    item->complete(s);
  }
}

Result<std::shared_ptr<Work>> Communicator::Impl::runAsync(
    const detail::Fingerprint& fp, std::function<Status(const detail::CollArgs&)> body) {
  return enqueue(fp.collective,
                 [this, fp, body = std::move(body)] { return execute(fp, true, body); });
}

}  // namespace braid
