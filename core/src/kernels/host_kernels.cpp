// The CPU's kernels (host_kernels.h): one switch over the KernelCall's kind, then one over its
// function (derived from the op table), down to the templated loops of elementwise.h and reduce.h,
// which the compiler specialises per functor and vectorises (SIMD for the functors of
// simd_ops.h). Work is split across the CPU workers in pieces fixed by the shape alone, so results
// never depend on the number of workers.
#include "kernels/host_kernels.h"

#include <cstring>
#include <string>
#include <vector>

#include "asyncnd/engine.h"
#include "asyncnd/error.h"
#include "kernels/device_map.h"
#include "kernels/elementwise.h"
#include "kernels/functors.h"
#include "kernels/reduce.h"

namespace asyncnd {
namespace kernels {
namespace {

using detail::KernelCall;
using detail::MapForm;
using Kind = KernelCall::Kind;

constexpr std::int64_t kGrainCheap = kGrain;
constexpr std::int64_t kGrainHeavy = kGrain / 4;
static_assert(kChunkHelperMinWork == 16 * kGrain, "engine.h states it in kGrain's chunks");

// fn(begin, end) over [0, n): inline when small (no hand-off), else split across the CPU workers,
// and the chunk helpers when `work` is Engine::parallel_for's kChunkHelperMinWork or more. `work`
// is in elements of a cheap map; 0 counts each grain as kGrain of them, so a heavy map's elements
// count 4 times, and a task of grain 1 counts kGrain (a reduction whose tasks hold more passes
// what it reads). fn must not throw.
template <class F>
void parallel(std::int64_t n, std::int64_t grain, F&& fn, std::int64_t work = 0) {
  if (n <= 0) return;
  if (n <= grain) {
    fn(std::int64_t{0}, n);
    return;
  }
  if (work <= 0) work = n * (grain < kGrain ? kGrain / grain : 1);
  engine().parallel_for(n, grain, fn, work);
}

// The dispatch functions are inlined into run_host_kernel: one frame from the call to the loop.
#if defined(__GNUC__)
#define ASYNCND_DISPATCH inline __attribute__((always_inline))
#else
#define ASYNCND_DISPATCH inline
#endif

[[noreturn]] void bad_call(const char* what) {
  throw Error(std::string("cpu kernels: ") + what + " (no op describes this call)");
}

// ---- maps -----------------------------------------------------------------------------------

template <class F>
ASYNCND_DISPATCH void run_unary_fn(const KernelCall& c, F f, std::int64_t grain) {
  float* out = c.out;
  const float* a = c.a;
  if (c.kind == Kind::kMapStrided) {
    const StridedView plan = c.strided.plan;
    if (c.strided.map.form != MapForm::kUnary) bad_call("a unary function in a binary form");
    parallel(c.n, grain, [&](std::int64_t s, std::int64_t e) { unary_strided(plan, a, out, s, e, f); });
    return;
  }
  if (c.map.form != MapForm::kUnary) bad_call("a unary function in a binary form");
  parallel(c.n, grain, [=](std::int64_t s, std::int64_t e) { unary_contig(a, out, s, e, f); });
}

template <class F>
ASYNCND_DISPATCH void run_binary_fn(const KernelCall& c, F f, std::int64_t grain) {
  float* out = c.out;
  const float* a = c.a;
  const float* b = c.b;
  if (c.kind == Kind::kMapStrided) {
    const StridedView plan = c.strided.plan;
    if (c.strided.map.form != MapForm::kBinary) bad_call("a strided map not in the binary form");
    parallel(c.n, grain,
             [&](std::int64_t s, std::int64_t e) { binary_strided(plan, a, b, out, s, e, f); });
    return;
  }
  switch (c.map.form) {
    case MapForm::kUnary: bad_call("a binary function in the unary form");
    case MapForm::kBinary:
      parallel(c.n, grain, [=](std::int64_t s, std::int64_t e) { binary_contig(a, b, out, s, e, f); });
      return;
    case MapForm::kScalarRight: {
      const BindRight<F> g{f, c.map.scalar};
      parallel(c.n, grain, [=](std::int64_t s, std::int64_t e) { unary_contig(a, out, s, e, g); });
      return;
    }
    case MapForm::kScalarLeft: {
      const BindLeft<F> g{f, c.map.scalar};
      parallel(c.n, grain, [=](std::int64_t s, std::int64_t e) { unary_contig(a, out, s, e, g); });
      return;
    }
    case MapForm::kOneRight: {  // b has one element, read now that its writer has finished
      const BindRight<F> g{f, b[0]};
      parallel(c.n, grain, [=](std::int64_t s, std::int64_t e) { unary_contig(a, out, s, e, g); });
      return;
    }
    case MapForm::kOneLeft: {
      const BindLeft<F> g{f, a[0]};
      parallel(c.n, grain, [=](std::int64_t s, std::int64_t e) { unary_contig(b, out, s, e, g); });
      return;
    }
  }
}

ASYNCND_DISPATCH void run_map(const KernelCall& c) {
  const KernelCall::Map& m = c.kind == Kind::kMap ? c.map : c.strided.map;
  // The binary forms pass Map::scalar to a functor with a parameter; the scalar forms bind it.
  const bool binary_form = m.form == MapForm::kBinary || m.form == MapForm::kOneRight ||
                           m.form == MapForm::kOneLeft;
  const float param = binary_form ? m.scalar : 0.0f;
  switch (m.fn) {
#define ASYNCND_RUN_BINARY(Name, Functor, Cost) \
  case detail::MapFn::k##Name:                  \
    return run_binary_fn(c, make_fn<Functor>(param), kGrain##Cost);
    ASYNCND_BINARY_FNS(ASYNCND_RUN_BINARY)
#undef ASYNCND_RUN_BINARY
#define ASYNCND_RUN_UNARY(Name, Functor, Cost) \
  case detail::MapFn::k##Name:                 \
    return run_unary_fn(c, Functor{}, kGrain##Cost);
    ASYNCND_UNARY_FNS(ASYNCND_RUN_UNARY)
#undef ASYNCND_RUN_UNARY
  }
}

// ---- reductions ------------------------------------------------------------------------------

// Elements per partial result of a long row; fixed, so the summation order never depends on
// the number of workers.
constexpr std::int64_t kBlock = 32768;
// Output columns reduced together when the reduced axis is not the last one.
constexpr std::int64_t kTile = 1024;

template <class A, detail::ReduceFn Fn>
void run_reduce(const KernelCall& c) {
  using T = typename A::T;
  const float* x = c.a;
  float* out = c.out;
  const std::int64_t outer = c.reduce.outer, n = c.reduce.len, inner = c.reduce.inner;
  const auto finish = [n](T v) { return reduce_finish(Fn, v, n); };
  const std::int64_t read = outer * n * inner;  // the elements read: parallel's work
  if (inner == 1) {
    const std::int64_t nb = n > kBlock ? (n + kBlock - 1) / kBlock : 1;
    if (nb == 1) {
      const std::int64_t grain = n >= kGrain ? 1 : kGrain / (n > 0 ? n : 1);
      parallel(outer, grain, [=](std::int64_t o0, std::int64_t o1) {
        for (std::int64_t o = o0; o < o1; ++o) out[o] = finish(reduce_row<A>(x + o * n, n));
      }, read);
      return;
    }
    // Long rows: one partial per block, computed in parallel, merged in block order.
    std::vector<T> partial(static_cast<std::size_t>(outer * nb));
    T* pp = partial.data();
    parallel(outer * nb, 1, [=](std::int64_t t0, std::int64_t t1) {
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t o = t / nb, b = t % nb;
        const std::int64_t len = (b + 1 == nb) ? n - b * kBlock : kBlock;
        pp[t] = reduce_row<A>(x + o * n + b * kBlock, len);
      }
    }, read);
    for (std::int64_t o = 0; o < outer; ++o) {
      T acc = pp[o * nb];
      for (std::int64_t b = 1; b < nb; ++b) acc = A::merge(acc, pp[o * nb + b]);
      out[o] = finish(acc);
    }
    return;
  }
  // Reduced axis in the middle: each task owns a tile of output columns of one outer index.
  const std::int64_t tiles = (inner + kTile - 1) / kTile;
  const std::int64_t work = n * (inner < kTile ? inner : kTile);  // elements per task
  const std::int64_t grain = work >= kGrain ? 1 : kGrain / (work > 0 ? work : 1);
  parallel(outer * tiles, grain, [=](std::int64_t t0, std::int64_t t1) {
    T acc[kTile];
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t o = t / tiles, i0 = (t % tiles) * kTile;
      const std::int64_t i1 = i0 + kTile < inner ? i0 + kTile : inner;
      reduce_cols<A>(x + o * n * inner, n, inner, i0, i1, acc);
      float* dst = out + o * inner;
      for (std::int64_t i = i0; i < i1; ++i) dst[i] = finish(acc[i - i0]);
    }
  }, read);
}

void run_reduce(const KernelCall& c) {
  switch (c.reduce.fn) {
#define ASYNCND_RUN_REDUCE(Name, Acc) \
  case detail::ReduceFn::k##Name:     \
    return run_reduce<Acc, detail::ReduceFn::k##Name>(c);
    ASYNCND_REDUCE_FNS(ASYNCND_RUN_REDUCE)
#undef ASYNCND_RUN_REDUCE
  }
}

// ---- the rest ------------------------------------------------------------------------------

void copy_range(const float* src, float* dst, std::int64_t n) {
  parallel(n, kGrain, [=](std::int64_t b, std::int64_t e) {
    std::memcpy(dst + b, src + b, static_cast<std::size_t>(e - b) * sizeof(float));
  });
}

}  // namespace

void run_host_kernel(const KernelCall& c) {
  float* out = c.out;
  switch (c.kind) {
    case Kind::kFill: {
      const float v = c.fill.value;
      parallel(c.n, kGrain, [=](std::int64_t b, std::int64_t e) { fill(out, b, e, v); });
      return;
    }
    case Kind::kArange: {
      const double s0 = c.arange.start, st = c.arange.step;
      parallel(c.n, kGrain, [=](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) out[i] = static_cast<float>(s0 + static_cast<double>(i) * st);
      });
      return;
    }
    case Kind::kMap:
    case Kind::kMapStrided: return run_map(c);
    case Kind::kReduce: return run_reduce(c);
    case Kind::kRandom: {
      const KernelCall::Random r = c.random;
      parallel(c.n, kGrain, [=](std::int64_t s, std::int64_t e) {
        random_fill(r.key, r.stream, r.dist, r.a, r.b, out, s, e);
      });
      return;
    }
    case Kind::kTranspose2d: {
      const float* a = c.a;
      const std::int64_t rows = c.transpose.rows, cols = c.transpose.cols;
      // Split by output rows (input columns), each holding `rows` elements.
      const std::int64_t grain = rows >= kGrain ? 1 : kGrain / rows;
      parallel(cols, grain, [=](std::int64_t c0, std::int64_t c1) {
        transpose2d(a, out, rows, cols, c0, c1);
      });
      return;
    }
    case Kind::kCopy: return copy_range(c.a, out, c.n);
    case Kind::kGemm: bad_call("GEMM is the CPU backend's (Backend::launch)");
  }
}

}  // namespace kernels
}  // namespace asyncnd
