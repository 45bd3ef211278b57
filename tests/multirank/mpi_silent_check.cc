// mpi-silent-check: under mpiexec -n N, rank 0 stays away from braid's MPI bootstrap for
// BRAID_TIMEOUT_MS + 2.5 s; every other rank's Communicator::createFromEnvironment must return
// kTimeout within BRAID_TIMEOUT_MS + 2 s, naming the MPI bootstrap collective it was in.
// Afterwards rank 0 posts the collective the others left pending (the bootstrap's first, an
// MPI_Iallgather of MPI_MAX_PROCESSOR_NAME chars) so that every rank can reach MPI_Finalize
// cleanly.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "braid/comm.hpp"
#include "core/clock.h"
#include "core/params.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t timeoutMs = braid::paramInt("BRAID_TIMEOUT_MS");
  int rc = 0;
  if (rank == 0) {
    usleep(static_cast<useconds_t>((timeoutMs + 2500) * 1000));
    std::vector<char> names(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
    std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, 0);
    // Non-blocking, as MPI matches a non-blocking collective only with non-blocking ones.
    MPI_Request request;
    MPI_Iallgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                   MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  } else {
    const uint64_t t0 = braid::nowNs();
    auto c = braid::Communicator::createFromEnvironment();
    const double ms = static_cast<double>(braid::nowNs() - t0) / 1e6;
    const braid::Status s = c.status();
    printf("rank %d: %.0f ms (limit %lld): %s\n", rank, ms,
           static_cast<long long>(timeoutMs + 2000), s.toString().c_str());
    if (s.code() != braid::Code::kTimeout ||
        s.message().find("MPI bootstrap, rank " + std::to_string(rank)) == std::string::npos ||
        s.message().find("MPI_Iallgather") == std::string::npos) {
      fprintf(stderr, "rank %d: FAIL expected a timeout of the MPI bootstrap naming its step\n",
              rank);
      rc = 1;
    }
    if (ms > static_cast<double>(timeoutMs + 2000)) {
      fprintf(stderr, "rank %d: FAIL too slow\n", rank);
      rc = 1;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // progresses the others' pending all-gather as rank 0 joins
  MPI_Finalize();
  return rc;
}
