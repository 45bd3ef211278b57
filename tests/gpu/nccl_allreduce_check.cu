// A tiny NCCL all-reduce for tests/gpu/nccl_plugin_check.sh: RANK/NRANKS from argv, the unique id
// through a file (rank 0 writes it). Every rank sums (rank + 1) over 1M floats on GPU 0 and checks
// the result. Exit 0 on success; prints "nccl_allreduce_check: ok rank R of N".
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    cudaError_t e = (x);                                                                \
    if (e != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      return 2;                                                                         \
    }                                                                                   \
  } while (0)
#define CHECK_NCCL(x)                                                                   \
  do {                                                                                  \
    ncclResult_t r = (x);                                                               \
    if (r != ncclSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r)); \
      return 3;                                                                         \
    }                                                                                   \
  } while (0)

int main(int argc, char** argv) {
  const int rank = argc > 1 ? atoi(argv[1]) : 0;
  const int nranks = argc > 2 ? atoi(argv[2]) : 1;
  const char* idFile = argc > 3 ? argv[3] : "/tmp/braid-nccl-id";
  const size_t count = 1 << 20;
  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    FILE* f = fopen((std::string(idFile) + ".tmp").c_str(), "wb");
    if (!f || fwrite(&id, sizeof(id), 1, f) != 1) return 4;
    fclose(f);
    rename((std::string(idFile) + ".tmp").c_str(), idFile);
  } else {
    FILE* f = nullptr;
    for (int i = 0; i < 600 && f == nullptr; ++i) {  // 60 s
      f = fopen(idFile, "rb");
      if (!f) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!f || fread(&id, sizeof(id), 1, f) != 1) return 4;
    fclose(f);
  }
  CHECK_CUDA(cudaSetDevice(0));
  float* buf = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, count * sizeof(float)));
  std::vector<float> host(count, static_cast<float>(rank + 1));
  CHECK_CUDA(cudaMemcpy(buf, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  for (int it = 0; it < 3; ++it) {  // also a smaller size: the tuner sees several
    const size_t n = it == 0 ? 1024 : count;
    CHECK_CUDA(cudaMemcpy(buf, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<float> out(n);
    CHECK_CUDA(cudaMemcpy(out.data(), buf, n * sizeof(float), cudaMemcpyDeviceToHost));
    const float want = nranks * (nranks + 1) / 2.0f;
    for (size_t i = 0; i < n; ++i) {
      if (out[i] != want) {
        fprintf(stderr, "rank %d: element %zu is %f, want %f\n", rank, i, out[i], want);
        return 5;
      }
    }
  }
  CHECK_NCCL(ncclCommDestroy(comm));
  cudaFree(buf);
  printf("nccl_allreduce_check: ok rank %d of %d\n", rank, nranks);
  return 0;
}
