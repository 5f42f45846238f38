// The backend interface: storage, and launch/synchronize for the kernels of one device kind. Every
// op reaches a backend as a KernelCall (kernel_call.h); docs/architecture.md says how to add a
// backend.
// For backend implementers (native/, wasm/); not part of <asyncnd/asyncnd.h>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "asyncnd/detail/kernel_call.h"
#include "asyncnd/device.h"
#include "asyncnd/engine.h"

namespace asyncnd {
namespace detail {

// One backend serves every device of one kind. All functions may be called from any thread;
// kernels run on the engine worker that runs the op.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind kind() const = 0;
  // Human-readable, e.g. "cpu (OpenBLAS 0.3.21, Haswell)". Printed by benchmarks.
  virtual std::string name() const = 0;
  // Devices present; 0 when the hardware or driver is missing.
  virtual int device_count() const = 0;
  // (optional) Why device_count() is 0. Default: empty.
  virtual std::string unavailable_reason() const { return {}; }

  // Storage. alloc throws asyncnd::Error on failure; free accepts nullptr.
  virtual void* alloc(int device_id, std::size_t bytes) = 0;
  virtual void free(int device_id, void* p, std::size_t bytes) noexcept = 0;

  // Runs or queues one op's kernel (kernel_call.h) on device `device_id`. Called on the engine
  // worker that runs the op, inside an op that reads the call's inputs and writes its output.
  //  - A host-addressable backend (the CPU) runs the call to completion on the calling thread,
  //    which may split it with Engine::parallel_for. `done` is empty and ignored: the op finishes
  //    when launch returns, or fails with what launch throws.
  //  - Any other backend queues the call on the device and calls done.done() once later ops of
  //    this device may use the output (which can be before the device has finished: see
  //    synchronize), or done.fail(message); it may hand `done` to another thread. Throws
  //    asyncnd::Error for a failure at launch (the op then fails with that message).
  // Pointers in `call` beyond its arrays (a strided plan) are valid until launch returns.
  //  - Such a backend may also hold accepted calls back, to start several small ones at once (the
  //    CUDA backend's held small calls, while worker_has_more_ops() says more will come, unless
  //    ASYNCND_CUDA_BATCH=0), if it starts them by itself before anything can observe them (its
  //    synchronize, a copy that reads their output, a call it does not hold) and at its flush.
  //    Their ops have completed by then, so held calls that fail to start fail their outputs'
  //    later readers and the next synchronize(id, nullptr).
  virtual void launch(int device_id, const KernelCall& call, Completion done) = 0;

  // (optional) Starts the calls held back on device `device_id` (see launch). The engine calls it
  // when the device's worker finds no more ops to run (and the naive engine after each op), so
  // that held calls never wait for the program's next push. A failure to start them is reported
  // to their outputs' readers and by the next synchronize(id, nullptr). Default: nothing held.
  virtual void flush(int device_id) noexcept { (void)device_id; }

  // Whether the CPU may read and write this backend's storage directly. True for the CPU
  // backends; a backend that says false gets its ops as Engine::push_async ops (see launch), and
  // arrays on its devices are read through a copy to the CPU.
  virtual bool host_addressable() const noexcept { return true; }

  // (optional) Blocks until device `device_id` has finished every queued write of the storage at
  // `p` (nullptr: all work queued on the device); throws asyncnd::Error with the device's error
  // text if that work failed. Called by the blocking reads (NDArray::wait_to_read, waitall) after
  // the engine's own wait. Default: nothing to wait for.
  virtual void synchronize(int device_id, const void* p);

  // (optional) Device-side time, for a backend whose ops run on the device after launch returns
  // (a GPU's streams), where the engine's own events show only the launch. The engine calls
  // set_device_timing(true) at Engine::start_profiling; from then on the backend records when
  // each launched call runs on the device. At Engine::stop_profiling the engine calls
  // set_device_timing(false), then take_device_spans(), which waits for the recorded work to
  // finish and hands the spans over (on the profiler's clock, profiler_clock_ns), once; the
  // engine adds them to the profile (ProfileEvent::lane). Default: nothing recorded.
  struct DeviceSpan {
    std::string name;   // what ran, e.g. "gemm", "copy cpu(0)->gpu(0)"
    Device device;
    std::string lane;   // the device queue, e.g. "compute stream"
    std::int64_t start_ns = 0, end_ns = 0;
  };
  virtual void set_device_timing(bool on) { (void)on; }
  virtual std::vector<DeviceSpan> take_device_spans() { return {}; }
};

// On an engine worker, inside an op: whether more ops are known to be waiting for this worker's
// device (later in the run of ops the worker took, or queued and not yet taken). A hint, read
// without locks; false on any other thread. Ops that wait for the running one are not counted.
bool worker_has_more_ops() noexcept;

// Backend::flush of the backend that serves `device`, if one does. A backend registered with
// register_backend is not unregistered while its flush runs.
void flush_device(Device device) noexcept;

// The backends that may hold work: the registered one (register_backend), if any, then the
// built-in ones. The profiler asks each for its device-side spans.
std::vector<Backend*> active_backends();

// Blocks until every device of every non-host-addressable backend has finished its queued work
// (Backend::synchronize(id, nullptr)); rethrows the first error. Called by Engine::waitall.
void synchronize_devices();

// The backends built into this product, one per device kind present in the build. Defined once
// per product (native/backends.cpp, wasm/): the only place with backend #ifs.
const std::vector<Backend*>& builtin_backends();

// The backend for `device`, or asyncnd::Error("<op>: no device gpu(0): <reason>") if the device
// does not exist. A registered backend (register_backend) is consulted before the built-in ones.
Backend& backend_for(Device device, const char* op = "device");

// Puts `backend` in front of the built-in backends for the devices it has (its kind, ids below its
// device_count()), or removes it again (nullptr): for a backend that lives outside the library,
// such as the tests' device emulated on the CPU (tests/emulated_device.h). One at a time. Call it
// while no array of those devices exists and no op of theirs is queued; the backend must outlive
// its use.
void register_backend(Backend* backend);

// (optional) The clock of the profiler's timestamps, in nanoseconds from any fixed origin. It must
// agree across every thread that runs or pushes ops, since events from different threads are
// drawn on one timeline. Default: std::chrono::steady_clock. A product sets it at most once, at
// startup and before profiling, where its threads' steady clocks disagree (wasm/: Emscripten
// 3.1.6 sets each browser thread's clock from another thread by a message, off by its delay).
using ClockNs = std::int64_t (*)();
void set_profiler_clock(ClockNs clock) noexcept;
// The profiler's clock now: the one set above, else steady_clock. Any thread.
std::int64_t profiler_clock_ns() noexcept;

// The memory limit from the texts of the cgroup files (v2 memory.max, v1 memory.limit_in_bytes;
// nullptr where a file is absent) and the physical memory in bytes (0 = unknown): the cgroup's
// limit when it is a number below physical memory ("max" and v1's "unlimited" are none), else
// physical memory. The first file that parses decides. Pure: program_memory_limit() (defined once
// per product, with builtin_backends) reads the files; tests give it texts.
MemoryLimit memory_limit_from(const char* cgroup_v2, const char* cgroup_v1,
                              std::uint64_t physical);

// The CPU quota, in CPUs, from the texts of the cgroup files (v2 cpu.max, "max 100000" or
// "<quota> <period>"; v1 cpu.cfs_quota_us and cpu.cfs_period_us; nullptr where a file is absent):
// quota / period, or 0 for none ("max", v1's -1, anything that does not parse). v2 decides when
// its file parses. Pure, like memory_limit_from: program_cpu_limit() reads the files.
double cpu_quota_from(const char* v2_cpu_max, const char* v1_quota, const char* v1_period);
// The directories holding the cgroup files of this process's group and of its ancestors, from the
// texts of /proc/self/mountinfo and /proc/self/cgroup. For each mount of the hierarchy (v2: type
// cgroup2, `v1_controller` nullptr; v1: type cgroup with `v1_controller` among its options), the
// group's directory under the mount point, then its ancestors' up to the mount point itself: a
// limit set on any of them applies (systemd sets CPUQuota= and MemoryMax= on a slice above the
// process's own group). A mount of a subtree (a container's, whose mount root is its group) maps
// the group's path below that root; a group outside the mounted subtree gives the mount point
// alone, whose files are then the container's own. Empty where the process is in no group of the
// hierarchy or it is not mounted. Pure, like the two above: program_cpu_limit() and
// program_memory_limit() read the files, wherever the hierarchies are mounted (/sys/fs/cgroup,
// /sys/fs/cgroup/unified on a hybrid system, /sys/fs/cgroup/cpu,cpuacct ...).
std::vector<std::string> cgroup_dirs_from(const std::string& mountinfo,
                                          const std::string& proc_cgroup,
                                          const char* v1_controller);
// The CpuLimit of `online` CPUs (at least 1 counted), an affinity mask of `affinity` CPUs (0 =
// unknown) and a quota of `quota` CPUs (0 = none; counted rounded up).
CpuLimit cpu_limit_from(int online, int affinity, double quota);

// Portable reference SGEMM (row-major C = alpha * op(A) * op(B) + beta * C, op(A) is [m,k], op(B)
// is [k,n]; lda/ldb/ldc are row strides: KernelCall::Gemm), in core/: the fallback when no BLAS
// is built, and the reference that tests compare against.
void reference_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                     float alpha, const float* a, std::int64_t lda, const float* b,
                     std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// Portable fast SGEMM (the contract of reference_sgemm), in core/: blocked and packed, on a 4x8
// SIMD micro-kernel (SSE natively, SIMD128 in WebAssembly). Splits the work across the CPU workers
// of the process-wide engine with Engine::parallel_for (serial in the naive engine or with one
// worker); returns when C is complete. Safe to call from several threads at once on different C.
// Allocates its packing buffers (about k * n floats) on the heap; throws std::bad_alloc if that
// fails. beta == 0 overwrites C without reading it.
void portable_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, std::int64_t lda, const float* b,
                    std::int64_t ldb, float beta, float* c, std::int64_t ldc);

}  // namespace detail
}  // namespace asyncnd
