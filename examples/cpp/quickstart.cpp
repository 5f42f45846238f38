// quickstart: the first cells of the chapter "Asynchronous Computation", in C++.
//
// Every operation on an NDArray only queues work and returns at once; the engine's worker threads
// compute it. The program waits only where it needs the values: printing, to_vector(), item(),
// wait_to_read() and nd::waitall().
//
// Build: link asyncnd::asyncnd (find_package(asyncnd CONFIG REQUIRED)); in this repository it is
// built as build/example_quickstart.
#include <asyncnd/asyncnd.h>

#include <chrono>
#include <iostream>

using namespace asyncnd;

static double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int main() {
  try {
    // z = x * y + 2: three ops are queued; printing z is what makes the program wait for them.
    NDArray x = nd::ones({1, 2});
    NDArray y = nd::ones({1, 2});
    NDArray z = x * y + 2;
    std::cout << "z = " << z << "\n";  // [[3, 3]]

    // A bigger job: the time to queue it is tiny, the time to finish it is the real work.
    NDArray a = nd::random_uniform({2000, 2000});
    a.wait_to_read();  // time only the dot and the sum below, not making `a`

    auto t0 = std::chrono::steady_clock::now();
    NDArray s = nd::dot(a, a).sum();  // queued: returns before the product is computed
    double queued = seconds_since(t0);
    std::cout << "sum = " << s << "\n";  // printing blocks until s is ready
    double finished = seconds_since(t0);

    std::cout << "dot + sum queued after   " << queued * 1e3 << " ms\n"
              << "dot + sum finished after " << finished * 1e3 << " ms\n";

    // The same value as a plain float: item() blocks too (s is already computed here).
    float total = s.item();
    std::cout << "s.item() = " << total << "\n";

    nd::waitall();  // good practice before exit: rethrows any error an op raised
  } catch (const Error& e) {
    std::cerr << "asyncnd error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
