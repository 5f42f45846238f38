// The JavaScript API's C++ side (see glue.h): the handle table, the error protocol, and the
// non-blocking read that notifies the JavaScript thread.
#include "glue.h"
#include "glue_internal.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include <emscripten/em_asm.h>
#include <emscripten/heap.h>

#include "asyncnd/asyncnd.h"
#include "asyncnd/detail/backend.h"
#include "asyncnd/detail/op_table.h"

namespace asyncnd {
namespace wasm {
namespace {

// Only the JavaScript thread touches these (glue.h).
// The stored message: a fixed buffer, so that storing it needs no memory. Once the heap is full
// a std::string could not be made, and the bad_alloc escaped to JavaScript as a bare number.
char g_error[4096];
bool g_has_error = false;
std::vector<NDArray> g_slots;
std::vector<int> g_free;
int g_live = 0;

// The op codes JavaScript passes: an op's index in its list of the op table
// (asyncnd/detail/op_table.h). op_table() gives JavaScript the names in that order.
using UnaryFn = NDArray (*)(const NDArray&);
using BinaryFn = NDArray (*)(const NDArray&, const NDArray&);
using ScalarRightFn = NDArray (*)(const NDArray&, float);
using ScalarLeftFn = NDArray (*)(float, const NDArray&);
using ReduceAxisFn = NDArray (*)(const NDArray&, int, bool);

const UnaryFn kUnary[] = {
#define ASYNCND_JS_UNARY(name, Name) [](const NDArray& a) { return nd::name(a); },
    ASYNCND_UNARY_OPS(ASYNCND_JS_UNARY)
#undef ASYNCND_JS_UNARY
};
const BinaryFn kBinary[] = {
#define ASYNCND_JS_BINARY(name, Name) [](const NDArray& a, const NDArray& b) { return nd::name(a, b); },
    ASYNCND_BINARY_OPS(ASYNCND_JS_BINARY)
#undef ASYNCND_JS_BINARY
};
const ScalarRightFn kScalarRight[] = {
#define ASYNCND_JS_RIGHT(name, Name) [](const NDArray& a, float s) { return nd::name(a, s); },
    ASYNCND_BINARY_OPS(ASYNCND_JS_RIGHT)
#undef ASYNCND_JS_RIGHT
};
const ScalarLeftFn kScalarLeft[] = {
#define ASYNCND_JS_LEFT(name, Name) [](float s, const NDArray& a) { return nd::name(s, a); },
    ASYNCND_BINARY_OPS(ASYNCND_JS_LEFT)
#undef ASYNCND_JS_LEFT
};
const UnaryFn kReduceAll[] = {
#define ASYNCND_JS_REDUCE(name, Name) [](const NDArray& a) { return nd::name(a); },
    ASYNCND_REDUCE_OPS(ASYNCND_JS_REDUCE)
#undef ASYNCND_JS_REDUCE
};
// nd::<name>(a, axis, keepdims) where the reduction has an axis form, else null (norm).
template <class F>
ReduceAxisFn axis_form(F f) {
  if constexpr (std::is_invocable_v<F, const NDArray&, int, bool>) {
    return f;  // a captureless generic lambda converts to the function pointer
  } else {
    (void)f;
    return nullptr;
  }
}
const ReduceAxisFn kReduceAxis[] = {
#define ASYNCND_JS_REDUCE_AXIS(name, Name) \
  axis_form([](const auto& a, int axis, bool keep) -> decltype(nd::name(a, axis, keep)) { return nd::name(a, axis, keep); }),
    ASYNCND_REDUCE_OPS(ASYNCND_JS_REDUCE_AXIS)
#undef ASYNCND_JS_REDUCE_AXIS
};

// The entry of `table` for `code`, or "<op>: unknown op code N".
template <class T, std::size_t N>
T entry(const T (&table)[N], int code, const char* op) {
  if (code < 0 || static_cast<std::size_t>(code) >= N)
    throw Error(std::string(op) + ": unknown op code " + std::to_string(code));
  return table[code];
}

}  // namespace

void store_error(const char* message) noexcept {
  const std::size_t n = std::strlen(message);
  if (n < sizeof g_error) {
    std::memcpy(g_error, message, n + 1);
  } else {  // never in practice (messages name shapes of at most 64 dimensions); cut, and say so
    static const char kCut[] = " ... (message cut)";
    const std::size_t keep = sizeof g_error - sizeof kCut;
    std::memcpy(g_error, message, keep);
    std::memcpy(g_error + keep, kCut, sizeof kCut);
  }
  g_has_error = true;
}

int put(NDArray a) {
  int h;
  if (!g_free.empty()) {
    h = g_free.back();
    g_free.pop_back();
    g_slots[static_cast<std::size_t>(h)] = std::move(a);
  } else {
    // release() must not allocate: it runs in delete() and in the FinalizationRegistry's
    // callbacks, also once the heap is full (where a throw escaped as a bare number and ended
    // Node). So the free list has room for every slot before a slot is added.
    if (g_free.capacity() < g_slots.size() + 1) g_free.reserve(2 * g_slots.size() + 16);
    h = static_cast<int>(g_slots.size());
    g_slots.push_back(std::move(a));
  }
  ++g_live;
  return h;
}

const NDArray& get(int h) {
  if (h < 0 || static_cast<std::size_t>(h) >= g_slots.size() ||
      !g_slots[static_cast<std::size_t>(h)].defined()) {
    throw Error("asyncnd: array handle " + std::to_string(h) + " is not live (deleted?)");
  }
  return g_slots[static_cast<std::size_t>(h)];
}

Shape to_shape(const val& v, const char* op, bool allow_minus_one) {
  if (!v.isArray()) throw Error(std::string(op) + ": shape must be an array of integers");
  const unsigned n = v["length"].as<unsigned>();
  Shape s;
  s.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    const val d = v[i];
    const double x = d.isNumber() ? d.as<double>() : std::nan("");
    // Whole numbers a double holds exactly (2^53 - 1 at most), so the cast below is defined.
    const bool ok = std::isfinite(x) && x == std::floor(x) && x <= 9007199254740991.0 &&
                    (x >= 0 || (allow_minus_one && x == -1));
    if (!ok) {
      // String(), not d.toString(): undefined and null have no toString (index.cjs checks shapes
      // first; this is the second line for callers of the raw module).
      throw Error(std::string(op) + ": bad dimension " + val::global("String")(d).as<std::string>() +
                  " at index " + std::to_string(i) + " of the shape");
    }
    s.push_back(static_cast<std::int64_t>(x));
  }
  return s;
}

int init(int threads) {
  return guarded(
      [&] {
        if (threads < 1) throw Error("load: threads must be at least 1, got " + std::to_string(threads));
        // Read by EngineOptions::from_env when the engine starts, just below.
        ::setenv("ASYNCND_CPU_WORKERS", std::to_string(threads).c_str(), 1);
        return engine().num_workers();
      },
      -1);
}

std::string backend_name() {
  return guarded([] { return detail::backend_for(Device::cpu()).name(); }, std::string());
}

int num_workers() {
  return guarded([] { return engine().num_workers(); }, -1);
}

emscripten::val take_error() {
  // A view of the buffer (UTF-8), which JavaScript decodes at once: no C++ string, which the full
  // heap may refuse. The view stays valid until the next store_error.
  g_has_error = false;
  return emscripten::val(emscripten::typed_memory_view(
      std::strlen(g_error), reinterpret_cast<const unsigned char*>(g_error)));
}

bool has_error() { return g_has_error; }

int retain(int h) {
  return make([&] { return get(h); });
}

void release(int h) {
  if (h < 0 || static_cast<std::size_t>(h) >= g_slots.size()) return;
  NDArray& slot = g_slots[static_cast<std::size_t>(h)];
  if (!slot.defined()) return;
  slot = NDArray();  // the storage goes once every op queued on it has finished
  g_free.push_back(h);
  --g_live;
}

int live_handles() { return g_live; }

int zeros(val shape) {
  return make([&] { return nd::zeros(to_shape(shape, "zeros")); });
}
int ones(val shape) {
  return make([&] { return nd::ones(to_shape(shape, "ones")); });
}
int full(val shape, float value) {
  return make([&] { return nd::full(to_shape(shape, "full"), value); });
}
int arange(double start, double stop, double step) {
  return make([&] {
    return nd::arange(start, stop, step);
  });
}

int from_array(val data, val shape) {
  return make([&] {
    Shape s = to_shape(shape, "fromArray");
    std::vector<float> values = emscripten::convertJSArrayToNumberVector<float>(data);
    return nd::from_vector(std::move(values), std::move(s));
  });
}

int random_uniform(val shape, float lo, float hi) {
  return make([&] { return nd::random_uniform(to_shape(shape, "random.uniform"), lo, hi); });
}
int random_normal(val shape, float mean, float stddev) {
  return make([&] { return nd::random_normal(to_shape(shape, "random.normal"), mean, stddev); });
}

int seed(double s) {
  return guarded(
      [&] {
        if (!(s >= 0) || s != std::floor(s) || s > 9007199254740991.0) {
          throw Error("seed: expected a non-negative integer up to 2^53-1, got " + std::to_string(s));
        }
        nd::seed(static_cast<std::uint64_t>(s));
        return 0;
      },
      -1);
}

int unary(int code, int h) {
  return make([&] { return entry(kUnary, code, "unary")(get(h)); });
}

int binary(int code, int a, int b) {
  return make([&] { return entry(kBinary, code, "binary")(get(a), get(b)); });
}

int scalar(int code, int h, float s) {
  return make([&] { return entry(kScalarRight, code, "scalar")(get(h), s); });
}

int scalar_left(int code, float s, int h) {
  return make([&] { return entry(kScalarLeft, code, "scalar")(s, get(h)); });
}

int dot(int a, int b) {
  return make([&] { return nd::dot(get(a), get(b)); });
}
int transpose(int h) {
  return make([&] { return nd::transpose(get(h)); });
}
int reshape(int h, val shape) {
  return make([&] { return nd::reshape(get(h), to_shape(shape, "reshape", true)); });
}

int broadcast_to(int h, val shape) {
  return make([&] { return nd::broadcast_to(get(h), to_shape(shape, "broadcastTo")); });
}
int copy_to(int h) {
  return make([&] { return nd::copy_to(get(h), Device::cpu()); });
}

int reduce_all(int code, int h) {
  return make([&] { return entry(kReduceAll, code, "reduce")(get(h)); });
}

int reduce(int code, int h, int axis, bool keepdims) {
  return make([&] {
    const ReduceAxisFn f = entry(kReduceAxis, code, "reduce");
    if (!f) {
      throw Error(std::string(detail::kOpNames[detail::kUnaryOpCount + detail::kBinaryOpCount + code]) +
                  ": has no axis form (it reduces over every element)");
    }
    return f(get(h), axis, keepdims);
  });
}

val op_table() {
  const auto names = [](std::size_t first, std::size_t count) {
    val a = val::array();
    for (std::size_t i = 0; i < count; ++i) a.call<void>("push", std::string(detail::kOpNames[first + i]));
    return a;
  };
  constexpr std::size_t kU = detail::kUnaryOpCount, kB = detail::kBinaryOpCount;
  constexpr std::size_t kR = detail::kReduceOpCount, kO = detail::kOtherOpCount;
  val t = val::object();
  t.set("unary", names(0, kU));
  t.set("binary", names(kU, kB));
  t.set("reduce", names(kU + kB, kR));
  t.set("other", names(kU + kB + kR, kO));
  val axis = val::array();
  for (ReduceAxisFn f : kReduceAxis) axis.call<void>("push", f != nullptr);
  t.set("reduceHasAxis", axis);
  return t;
}

val shape(int h) {
  return guarded(
      [&] {
        val out = val::array();
        for (std::int64_t d : get(h).shape()) out.call<void>("push", static_cast<double>(d));
        return out;
      },
      val::null());
}

double size(int h) {
  return guarded([&] { return static_cast<double>(get(h).size()); }, -1.0);
}

int wait_to_read(int h) {
  return guarded(
      [&] {
        get(h).wait_to_read();
        return 0;
      },
      -1);
}

int waitall() {
  return guarded(
      [] {
        nd::waitall();
        return 0;
      },
      -1);
}

double read_ptr(int h) {
  return guarded(
      [&] {
        const NDArray& a = get(h);
        a.wait_to_read();
        return static_cast<double>(reinterpret_cast<std::uintptr_t>(a.unsafe_data()));
      },
      -1.0);
}

double item(int h) {
  return guarded([&] { return static_cast<double>(get(h).item()); },
                 std::numeric_limits<double>::quiet_NaN());
}

std::string to_string(int h) {
  return guarded(
      [&] {
        std::ostringstream os;
        os << get(h);
        return os.str();
      },
      std::string());
}

int request_read(int h, int token) {
  return guarded(
      [&] {
        const NDArray& a = get(h);
        // An empty op that reads a and writes a private variable; deleting that variable runs
        // the callback once the op has finished, or been skipped because a's writer failed
        // (skipped ops still complete, and a deletion always runs), so the JS side always hears
        // back and then reads the error, if any, with a wait that no longer blocks.
        Engine& eng = engine();
        // The answer is posted with MAIN_THREAD_ASYNC_EM_ASM, which mallocs its call record on
        // the worker and, where the heap was full, wrote through the null it got: the read was
        // never answered and data() hung (2 runs of 30 of test/heap_full.test.js under load). A
        // block taken here, where failing is a clean error, is freed just before the post, so
        // that the record finds room in a full heap.
        constexpr std::size_t kPostRoom = 512;  // an em_queued_call is about 130 bytes
        void* room = std::malloc(kPostRoom);
        if (!room) throw std::bad_alloc();
        try {
          Var sink = eng.new_var();
          PushOptions opts;
          opts.name = "data";
          eng.push([] {}, {a.var()}, {sink}, opts);
          eng.delete_var(std::move(sink), [token, room] {
            std::free(room);
            // On a worker: posted to the JS thread's event loop. On the JS thread itself (the
            // read was already complete): runs now; the JS side settles the promise in a
            // microtask.
            MAIN_THREAD_ASYNC_EM_ASM({ Module["_asyncndReadDone"]($0); }, token);
          });
        } catch (...) {
          std::free(room);  // (once delete_var has taken the callback, it no longer throws)
          throw;
        }
        return 0;
      },
      -1);
}

val stats() {
  return guarded(
      [] {
        EngineStats s = engine().stats();
        val o = val::object();
        o.set("pushed", static_cast<double>(s.pushed));
        o.set("finished", static_cast<double>(s.finished));
        o.set("pending", static_cast<double>(s.pending));
        o.set("inflightBytes", static_cast<double>(s.inflight_bytes));
        o.set("liveVars", static_cast<double>(s.live_vars));
        o.set("maxInflightOps", static_cast<double>(s.max_inflight_ops));
        o.set("maxInflightBytes", static_cast<double>(s.max_inflight_bytes));
        o.set("maxInflightBytesSource", std::string(bound_source_name(s.max_inflight_bytes_source)));
        o.set("pushWaits", static_cast<double>(s.push_waits));
        o.set("bytesInUse", static_cast<double>(s.bytes_in_use));
        o.set("bytesPeak", static_cast<double>(s.bytes_peak));
        o.set("liveArrays", g_live);
        o.set("liveNnObjects", nn_live_objects());
        // The WebAssembly memory's size: it grows on demand and never shrinks.
        o.set("heapBytes", static_cast<double>(emscripten_get_heap_size()));
        o.set("workers", engine().num_workers());
        o.set("pacing", std::string(pacing_name(engine().pacing())));
        val devices = val::array();
        for (const DeviceStats& d : s.devices) {
          val dv = val::object();
          dv.set("device", d.device.str());
          dv.set("bytesInUse", static_cast<double>(d.bytes_in_use));
          dv.set("bytesPeak", static_cast<double>(d.bytes_peak));
          devices.call<void>("push", dv);
        }
        o.set("devices", devices);
        return o;
      },
      val::null());
}

int set_max_inflight(double ops, double bytes) {
  return guarded(
      [&] {
        if (!(ops >= 0) || !(bytes >= 0) || ops != std::floor(ops) || bytes != std::floor(bytes)) {
          throw Error("setMaxInflight: ops and bytes must be non-negative integers, got ops=" +
                      std::to_string(ops) + " bytes=" + std::to_string(bytes));
        }
        // A size here is 32 bits (wasm32): a larger bound would wrap, so it is an error.
        constexpr double kMax = static_cast<double>(std::numeric_limits<std::size_t>::max());
        if (ops > kMax || bytes > kMax) {
          throw Error("setMaxInflight: ops and bytes must be at most " + std::to_string(
                          std::numeric_limits<std::size_t>::max()) + " (0: no bound), got ops=" +
                      std::to_string(ops) + " bytes=" + std::to_string(bytes));
        }
        engine().set_max_inflight(static_cast<std::size_t>(ops), static_cast<std::size_t>(bytes));
        return 0;
      },
      -1);
}

int reset_max_inflight() {
  return guarded(
      [] {
        engine().reset_max_inflight();
        return 0;
      },
      -1);
}

int set_env(std::string name, std::string value) {
  // Only the engine's own variables: the module's environment is not the process's.
  if (name.rfind("ASYNCND_", 0) != 0) return -1;
  return ::setenv(name.c_str(), value.c_str(), 1);
}

int reset_peak() {
  return guarded(
      [] {
        engine().reset_peak_bytes();
        return 0;
      },
      -1);
}

int profiler_start() {
  return guarded(
      [] {
        engine().start_profiling();
        return 0;
      },
      -1);
}

namespace {
std::string g_trace;  // the last trace, until JavaScript has copied it out
}  // namespace

val profiler_stop() {
  profiler_trace_release();
  if (guarded(
          [] {
            g_trace = engine().stop_profiling();
            return 0;
          },
          -1) < 0) {
    return val::null();
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(g_trace.data());
  return val(emscripten::typed_memory_view(g_trace.size(), bytes));
}

void profiler_trace_release() { std::string().swap(g_trace); }

val profiler_events() {
  return guarded(
      [] {
        val out = val::array();
        for (const ProfileEvent& e : engine().profile_events()) {
          val o = val::object();
          o.set("name", e.name);
          o.set("device", e.device.str());
          o.set("worker", e.worker);
          o.set("pushUs", e.push_us);
          o.set("startUs", e.start_us);
          o.set("endUs", e.end_us);
          val reads = val::array(), writes = val::array();
          for (auto id : e.reads) reads.call<void>("push", static_cast<double>(id));
          for (auto id : e.writes) writes.call<void>("push", static_cast<double>(id));
          o.set("reads", reads);
          o.set("writes", writes);
          o.set("failed", e.failed);
          o.set("skipped", e.skipped);
          out.call<void>("push", o);
        }
        return out;
      },
      val::null());
}

}  // namespace wasm
}  // namespace asyncnd
