// The installed C++ API from a consumer's point of view: a communicator from the launcher's
// environment, all-reduce and all-gather checked against the values every rank can compute, the
// Bucketer over three parameters, and the error value of a bad argument. Prints one line per rank
// and exits non-zero on any mismatch.
#include <braid/bucketer.hpp>
#include <braid/comm.hpp>

#include <cstdio>
#include <memory>
#include <vector>

namespace {

int fail(int rank, const char* what, const braid::Status& s) {
  std::fprintf(stderr, "cxx_consumer rank %d: %s: %s\n", rank, what, s.toString().c_str());
  return 1;
}

}  // namespace

int main() {
  auto created = braid::Communicator::createFromEnvironment();
  if (!created.isOk()) return fail(-1, "createFromEnvironment", created.status());
  std::unique_ptr<braid::Communicator> comm = std::move(created.value());
  const int rank = comm->rank();
  const int size = comm->size();

  // All-reduce (sum) of 1023 floats: element i is rank + i on each rank.
  const size_t n = 1023;
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(rank + i);
  braid::Status s =
      comm->allReduce(v.data(), v.data(), n, braid::DataType::kFloat32, braid::ReduceOp::kSum);
  if (!s.isOk()) return fail(rank, "allReduce", s);
  for (size_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(size * (size - 1) / 2 + size * i);
    if (v[i] != want) {
      std::fprintf(stderr, "cxx_consumer rank %d: allReduce[%zu] = %g, want %g\n", rank, i, v[i],
                   want);
      return 1;
    }
  }

  // All-gather of one int64 per rank.
  std::vector<int64_t> gathered(size);
  const int64_t mine = 100 + rank;
  s = comm->allGather(&mine, gathered.data(), 1, braid::DataType::kInt64);
  if (!s.isOk()) return fail(rank, "allGather", s);
  for (int r = 0; r < size; ++r) {
    if (gathered[r] != 100 + r) {
      std::fprintf(stderr, "cxx_consumer rank %d: allGather[%d] = %lld\n", rank, r,
                   static_cast<long long>(gathered[r]));
      return 1;
    }
  }

  // A bad argument is a value, and the communicator stays usable.
  s = comm->broadcast(v.data(), v.data(), n, braid::DataType::kFloat32, size + 5);
  if (s.code() != braid::Code::kInvalidArgument) return fail(rank, "broadcast(bad root)", s);

  // The Bucketer: three parameters, one step, averaged.
  braid::BucketerOptions options;
  options.sizing = braid::BucketSizing::kFixed;
  options.bucketCapBytes = 4096;
  options.firstBucketCapBytes = 1024;
  auto bucketer = braid::Bucketer::create(comm.get(), options);
  if (!bucketer.isOk()) return fail(rank, "Bucketer::create", bucketer.status());
  const size_t counts[3] = {7, 300, 1200};
  std::vector<std::vector<float>> grads(3);
  for (uint32_t id = 0; id < 3; ++id) {
    s = (*bucketer)->registerParam(id, counts[id], braid::DataType::kFloat32);
    if (!s.isOk()) return fail(rank, "registerParam", s);
    grads[id].assign(counts[id], static_cast<float>(rank + 1) * (id + 1));
  }
  if (!(s = (*bucketer)->finalize()).isOk()) return fail(rank, "finalize", s);
  if (!(s = (*bucketer)->beginStep()).isOk()) return fail(rank, "beginStep", s);
  for (int id = 2; id >= 0; --id) {
    s = (*bucketer)->markReady(id, grads[id].data());
    if (!s.isOk()) return fail(rank, "markReady", s);
  }
  auto metrics = (*bucketer)->finishStep();
  if (!metrics.isOk()) return fail(rank, "finishStep", metrics.status());
  for (uint32_t id = 0; id < 3; ++id) {
    // mean over ranks of (r + 1) * (id + 1) = (size + 1) / 2 * (id + 1)
    const float want = (size + 1) / 2.0f * (id + 1);
    for (float g : grads[id]) {
      if (g != want) {
        std::fprintf(stderr, "cxx_consumer rank %d: bucketed gradient %u = %g, want %g\n", rank,
                     id, g, want);
        return 1;
      }
    }
  }
  std::printf("cxx_consumer rank %d of %d: ok (%zu buckets, %.3f ms step)\n", rank, size,
              (*bucketer)->bucketCount(), metrics->stepMs);
  return 0;
}
