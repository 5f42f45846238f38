// custom_ops: schedule your own functions on the asyncnd engine.
//
// The engine does not look inside an op. It orders ops only by the variables (Var) each declares
// it reads and writes: ops that touch disjoint variables may run at the same time on different
// workers; a write waits for earlier reads and writes of its variable; a read waits for earlier
// writes. The result is always the same as running the ops one by one in push order.
//
// This example shows: new_var, push with reads/writes, independent ops overlapping, dependent ops
// running in order, wait_to_read, an op's error caught at the wait, and delete_var.
// In this repository it is built as build/example_custom_ops.
#include <asyncnd/asyncnd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace asyncnd;
using Clock = std::chrono::steady_clock;

static const Clock::time_point kStart = Clock::now();
static double ms_now() {
  return std::chrono::duration<double, std::milli>(Clock::now() - kStart).count();
}

// Stands for 150 ms of real work (a kernel, I/O, ...). Sleeping keeps the example's timing
// readable whatever the number of cores.
static void work(const char* what) {
  std::printf("  %7.1f ms  %s starts\n", ms_now(), what);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  std::printf("  %7.1f ms  %s ends\n", ms_now(), what);
}

int main() {
  // An engine of our own with two workers, so that independent ops can overlap even on a two-core
  // machine (the process-wide engine(), which arrays use, keeps a core for the frontend and so
  // has one worker there). Most programs just use engine().
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  std::printf("engine: %d CPU workers\n\n", eng.num_workers());

  // The data is ours; the engine only sees one variable per buffer. shared_ptr lets the ops
  // keep the buffers alive however long they stay queued.
  auto a = std::make_shared<std::vector<float>>(4, 0.0f);
  auto b = std::make_shared<std::vector<float>>(4, 0.0f);
  auto c = std::make_shared<std::vector<float>>(4, 0.0f);
  Var va = eng.new_var(), vb = eng.new_var(), vc = eng.new_var();

  // 1. Two independent ops (disjoint writes): with two or more workers they overlap, so both are
  //    done after about 150 ms, not 300.
  // 2. A dependent op: it reads a and b and writes c, so it starts only after both have finished.
  std::printf("push returns at once; the ops run on the workers:\n");
  double t0 = ms_now();
  PushOptions fill_a; fill_a.name = "fill_a";
  PushOptions fill_b; fill_b.name = "fill_b";
  PushOptions add_ab; add_ab.name = "c=a+b";
  eng.push([a] { work("fill_a"); for (float& v : *a) v = 1.0f; }, {}, {va}, fill_a);
  eng.push([b] { work("fill_b"); for (float& v : *b) v = 2.0f; }, {}, {vb}, fill_b);
  eng.push([a, b, c] {
             work("c=a+b ");
             for (std::size_t i = 0; i < c->size(); ++i) (*c)[i] = (*a)[i] + (*b)[i];
           },
           {va, vb}, {vc}, add_ab);
  std::printf("  %7.1f ms  three pushes returned (took %.3f ms)\n", ms_now(), ms_now() - t0);

  // wait_to_read(vc) blocks until every write to c pushed so far has finished.
  eng.wait_to_read(vc);
  std::printf("  %7.1f ms  wait_to_read(c) returned: c[0] = %g (expect 3)\n\n", ms_now(), (*c)[0]);

  // 3. Errors: an op that throws poisons the variables it writes; ops that depend on them are
  //    skipped and inherit the error; the next wait on an affected variable rethrows it. The
  //    engine itself keeps running.
  Var vd = eng.new_var(), ve = eng.new_var();
  PushOptions bad; bad.name = "load_file";
  PushOptions after; after.name = "use_file";
  eng.push([] { throw std::runtime_error("cannot open data.bin"); }, {}, {vd}, bad);
  eng.push([] { std::printf("  never printed: this op is skipped\n"); }, {vd}, {ve}, after);
  try {
    eng.wait_to_read(ve);
    std::printf("no error?\n");
  } catch (const std::exception& e) {
    std::printf("error caught at wait_to_read(e): %s\n", e.what());
  }
  // The error was rethrown once and cleared; new work on the same variables runs normally.
  int value = 0;
  eng.push([&value] { value = 42; }, {}, {ve});
  eng.wait_to_read(ve);
  std::printf("after the error, e's next op ran: value = %d\n\n", value);

  // 4. delete_var: deferred until every op already pushed that uses the variable has finished;
  //    on_delete is the place to free the data it guarded.
  PushOptions slow; slow.name = "slow_read_a";
  eng.push([a] { work("slow_read_a"); }, {va}, {vb}, slow);
  eng.delete_var(va, [] { std::printf("  %7.1f ms  a deleted (after its last use)\n", ms_now()); });
  std::printf("  %7.1f ms  delete_var(a) returned at once\n", ms_now());
  a.reset();  // our handle; the queued op still holds the buffer

  eng.waitall();  // everything pushed so far has finished
  std::printf("  %7.1f ms  waitall returned\n", ms_now());
  eng.delete_var(vb);
  eng.delete_var(vc);
  eng.delete_var(vd);
  eng.delete_var(ve);
  eng.waitall();
  return 0;
}
