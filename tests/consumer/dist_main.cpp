// Built against the installed asyncnd::dist by the install_consumer test (when asyncnd was built
// with MPI), run as a single MPI process: one allreduce over one rank.
#include <asyncnd/asyncnd.h>
#include <asyncnd/dist.h>

#include <cstdio>

int main(int argc, char** argv) {
  using namespace asyncnd;
  dist::Guard mpi(argc, argv);
  NDArray a = nd::full({3}, 2.0f);
  dist::allreduce(a, dist::Reduce::kMean);
  if (dist::size() != 1 || a.to_vector()[0] != 2.0f) {
    std::printf("consumer_dist: FAILED\n");
    return 1;
  }
  std::printf("consumer_dist: OK\n");
  return 0;
}
