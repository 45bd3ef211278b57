#include "core/trace.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>

#include "core/clock.h"
#include "core/log.h"

namespace braid::detail {
namespace {

std::atomic<Tracer*> gActive{nullptr};

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) q += c;
  }
  return q + "\"";
}

}  // namespace

Tracer::Tracer(const std::string& pattern, int rank, int size)
    : path_(expandFilePattern(pattern, static_cast<int>(getpid()), rank)),
      rank_(rank),
      size_(size) {
  setZero();
  gActive.store(this, std::memory_order_release);
}

Tracer::~Tracer() {
  Tracer* self = this;
  gActive.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
  Status s = close();
  if (!s.isOk()) BRAID_WARN("BRAID_TRACE_FILE: %s", s.toString().c_str());
}

Tracer* Tracer::active() { return gActive.load(std::memory_order_acquire); }

void Tracer::setZero() {
  std::lock_guard<std::mutex> lock(mu_);
  zeroNs_ = nowNs();
  zeroWallUs_ = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
}

void Tracer::complete(const std::string& name, const char* category, Lane lane, uint64_t startNs,
                      uint64_t endNs, const std::string& args) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  events_.push_back({name, category, lane, startNs, endNs < startNs ? startNs : endNs, args});
}

Status Tracer::close() {
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Status::ok();
    closed_ = true;
    events.swap(events_);
  }
  const std::string tmp = path_ + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return systemError("cannot write " + tmp);
  std::fprintf(f,
               "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"braid\",\"rank\":%d,"
               "\"size\":%d,\"zero_wall_us\":%lld},\"traceEvents\":[\n",
               rank_, size_, static_cast<long long>(zeroWallUs_));
  std::fprintf(f,
               "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"name\":\"rank %d\"}},\n"
               "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"sort_index\":%d}}",
               rank_, rank_, rank_, rank_);
  const char* lanes[] = {"collectives", "waits", "buckets"};
  for (int l = 0; l < 3; ++l) {
    std::fprintf(f,
                 ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                 "\"args\":{\"name\":\"%s\"}}",
                 rank_, l, lanes[l]);
  }
  for (const Event& e : events) {
    const double ts = (static_cast<double>(e.startNs) - static_cast<double>(zeroNs_)) * 1e-3;
    const double dur = static_cast<double>(e.endNs - e.startNs) * 1e-3;
    std::fprintf(f,
                 ",\n{\"name\":%s,\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,"
                 "\"tid\":%d,\"args\":{\"rank\":%d%s%s}}",
                 quoted(e.name).c_str(), e.category, ts, dur, rank_, static_cast<int>(e.lane),
                 rank_, e.args.empty() ? "" : ",", e.args.c_str());
  }
  std::fprintf(f, "\n]}\n");
  const bool ok = std::fflush(f) == 0;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return systemError("cannot write " + path_);
  }
  return Status::ok();
}

}  // namespace braid::detail
