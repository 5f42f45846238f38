// Built against the installed asyncnd by the install_consumer test: two arrays, one add, check.
#include <asyncnd/asyncnd.h>

#include <cstdio>
#include <vector>

int main() {
  using namespace asyncnd;
  NDArray x = nd::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  NDArray y = nd::full({2, 3}, 10.0f);
  std::vector<float> z = (x + y).to_vector();  // blocks until the queued add has run
  const std::vector<float> want{11, 12, 13, 14, 15, 16};
  if (z != want) {
    std::printf("consumer: FAILED: got");
    for (float v : z) std::printf(" %g", v);
    std::printf("\n");
    return 1;
  }
  std::printf("consumer: OK\n");
  return 0;
}
