// portable_sgemm: the GEMM of the WebAssembly build (no BLAS there) and of native builds without
// OpenBLAS on a CPU without AVX2, on the MR x 8 micro-kernel of kernels/gemm_kernel.h (4x8
// natively, 5x8 in the SIMD128 wasm module, 6x8 with relaxed SIMD); and packed_sgemm, the blocked
// loop (kernels/gemm_driver.h) that it shares with the native AVX-512 and AVX2 GEMMs
// (native/cpu/avx512_gemm.cpp, avx2_gemm.cpp), split across the engine's CPU workers.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "asyncnd/detail/backend.h"
#include "asyncnd/engine.h"
#include "kernels/gemm_driver.h"

namespace asyncnd {
namespace detail {
namespace {

namespace g = kernels::gemm;
using g::ceil_div;

// Block sizes, chosen from measurements at 1000x1000 (bench/notes/constants.md, "Portable GEMM"):
// in V8 on one thread several (KC, MC) pairs came within a few percent of each other; on two
// threads MC = 96 beat MC = 48, since each row block streams all of packed B from L3 and two
// threads share it. A 96 x 512 block of A is 192 KiB (L2); a 512 x 8 panel of B is 16 KiB (L1).
struct PortableTile {
  static constexpr std::int64_t kMr = g::kMr, kNr = g::kNr;
  static constexpr std::int64_t kKc = 512;            // depth of a packed block
  static constexpr std::int64_t kMc = 96 / kMr * kMr;  // rows of a packed block of A: 96, or 95 (kMr 5)
  static void pack_a(bool trans_a, const float* a, std::int64_t lda, std::int64_t i0,
                     std::int64_t mc, std::int64_t p0, std::int64_t kc, float alpha, float* out) {
    g::pack_a(trans_a, a, lda, i0, mc, p0, kc, alpha, out);
  }
  static void pack_b_panel(bool trans_b, const float* b, std::int64_t ldb, std::int64_t p0,
                           std::int64_t kc, std::int64_t j0, std::int64_t n, float* out) {
    g::pack_b_panel(trans_b, b, ldb, p0, kc, j0, n, out);
  }
  static void micro_kernel(std::int64_t kc, const float* pa, const float* pb, float* c,
                           std::int64_t ldc, std::int64_t mr, std::int64_t nr, g::Update mode,
                           float beta) {
    g::micro_kernel(kc, pa, pb, c, ldc, mr, nr, mode, beta);
  }
};
// Below this m * n * k, packing and threads cost more than they save: a direct loop.
constexpr std::int64_t kSmallMnk = 32 * 32 * 32;
// Flops a parallel chunk should at least carry, so a hand-off stays cheap
// (bench/notes/constants.md, "Hand-offs and grain sizes").
constexpr double kChunkFlops = 2e6;

// The buffer of packed B, kept from one GEMM for the next (one buffer, of at most kKeepFloats):
// a fresh 4 MB buffer per 1000^3 product cost its first touch of every page each time, about 5% of
// the AVX-512 GEMM's time (perf, bench/notes/gemm.md "Our own AVX-512 GEMM"). Concurrent GEMMs each
// take their own; the largest that fits the limit is the one kept.
class PackedB {
 public:
  static constexpr std::int64_t kKeepFloats = std::int64_t{4} << 20;  // 16 MiB

  static PackedB take(std::int64_t count) {
    {
      std::lock_guard<std::mutex> lock(kept_mutex());
      PackedB& kept = kept_buffer();
      if (kept.buf_ && kept.capacity_ >= count) return std::move(kept);
    }
    PackedB fresh;
    fresh.buf_ = g::aligned_floats(count);
    fresh.capacity_ = count;
    return fresh;
  }
  PackedB() = default;
  PackedB(PackedB&& other) noexcept
      : buf_(std::move(other.buf_)), capacity_(std::exchange(other.capacity_, 0)) {}
  PackedB& operator=(PackedB&&) = delete;
  ~PackedB() {
    if (!buf_ || capacity_ > kKeepFloats) return;
    std::lock_guard<std::mutex> lock(kept_mutex());
    PackedB& kept = kept_buffer();
    if (kept.capacity_ < capacity_) {
      kept.buf_ = std::move(buf_);
      kept.capacity_ = std::exchange(capacity_, 0);
    }
  }
  float* data() const { return buf_.get(); }

 private:
  static std::mutex& kept_mutex() {
    static std::mutex* m = new std::mutex;  // leaked: GEMMs may run while statics are destroyed
    return *m;
  }
  static PackedB& kept_buffer() {
    static PackedB* kept = new PackedB;
    return *kept;
  }
  g::AlignedFloats buf_;
  std::int64_t capacity_ = 0;
};

float a_at(bool trans_a, const float* a, std::int64_t lda, std::int64_t i, std::int64_t p) {
  return trans_a ? a[p * lda + i] : a[i * lda + p];
}
float b_at(bool trans_b, const float* b, std::int64_t ldb, std::int64_t p, std::int64_t j) {
  return trans_b ? b[j * ldb + p] : b[p * ldb + j];
}

// C = beta * C; beta == 0 overwrites (NaNs in C do not survive).
void scale_c(std::int64_t m, std::int64_t n, float beta, float* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (beta == 0.0f) {
      std::fill(ci, ci + n, 0.0f);
    } else if (beta != 1.0f) {
      for (std::int64_t j = 0; j < n; ++j) ci[j] *= beta;
    }
  }
}

// Small products: one dot product per element of C, no packing, no threads.
void small_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                float beta, float* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t p = 0; p < k; ++p)
        acc += a_at(trans_a, a, lda, i, p) * b_at(trans_b, b, ldb, p, j);
      float& cij = c[i * ldc + j];
      cij = beta == 0.0f ? alpha * acc : alpha * acc + beta * cij;
    }
  }
}

// Thin products (m < kMr rows, op(B) = B), columns [j0, j1): each row of C is a sum of scaled rows
// of B, accumulated in place (in the reference's order), so B streams past once per row of C
// instead of being packed for fewer rows than a micro-tile has.
void thin_gemm(bool trans_a, std::int64_t m, std::int64_t k, float alpha, const float* a,
               std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc, std::int64_t j0, std::int64_t j1) {
  using simd::f32x4;
  for (std::int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    scale_c(1, j1 - j0, beta, ci + j0, ldc);
    for (std::int64_t p = 0; p < k; ++p) {
      const float s = alpha * a_at(trans_a, a, lda, i, p);
      const f32x4 vs = simd::splat(s);
      const float* bp = b + p * ldb;
      std::int64_t j = j0;
      for (; j + 8 <= j1; j += 8) {
        simd::store(ci + j, simd::load(ci + j) + vs * simd::load(bp + j));
        simd::store(ci + j + 4, simd::load(ci + j + 4) + vs * simd::load(bp + j + 4));
      }
      for (; j < j1; ++j) ci[j] += s * bp[j];
    }
  }
}

// Natively on x86-64 with GCC and glibc, the block loop (with the micro-kernel inlined) is also
// compiled for AVX2 and picked at load time (ifunc): the same 128-bit vector code, but with
// three-operand instructions and broadcasts from memory, as V8 emits for SIMD128 (faster:
// bench/notes/constants.md, "Portable GEMM"). No FMA (not in the "avx2" target, and -std=c++17 does
// not contract), so both versions compute bit-identical results. Not under ThreadSanitizer or
// AddressSanitizer: the loader runs ifunc resolvers before the sanitizer's runtime starts (the TSan
// build crashed).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define ASYNCND_GEMM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ASYNCND_GEMM_CLONES
#endif

ASYNCND_GEMM_CLONES
void run_portable_block(const g::Problem& pr, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                        std::int64_t j1) {
  g::run_block_body<PortableTile>(pr, i0, i1, j0, j1);
}

}  // namespace
}  // namespace detail

namespace kernels {
namespace gemm {

Runner engine_runner() {
  Runner r;
  r.threads = std::max(1, engine().num_workers());
  r.parallel_for = [](std::int64_t n, std::int64_t grain,
                      const std::function<void(std::int64_t, std::int64_t)>& fn) {
    engine().parallel_for(n, grain, fn);
  };
  return r;
}

void packed_sgemm(const TileLoop& tile, const Runner& runner, bool trans_a, bool trans_b,
                  std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                  std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                  std::int64_t ldc) {
  using namespace detail;
  const std::int64_t kMr = tile.mr, kNr = tile.nr, kKc = tile.kc;
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <= kSmallMnk) {
    small_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  auto parallel_for = [&runner](std::int64_t count, std::int64_t grain,
                                const std::function<void(std::int64_t, std::int64_t)>& fn) {
    if (runner.parallel_for != nullptr) {
      runner.parallel_for(count, grain, fn);
    } else {
      fn(0, count);
    }
  };
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const std::int64_t max_tasks = 4 * std::max(1, runner.threads);
  const auto by_work = static_cast<std::int64_t>(std::max(1.0, flops / kChunkFlops));
  if (m < tile.thin_rows && !trans_b) {
    const std::int64_t blocks = ceil_div(n, 8);  // tasks own whole 8-column blocks
    const std::int64_t tasks = std::min({blocks, max_tasks, by_work});
    parallel_for(tasks, 1, [=](std::int64_t t0, std::int64_t t1) {
      const std::int64_t j0 = t0 * blocks / tasks * 8;
      const std::int64_t j1 = std::min(n, t1 * blocks / tasks * 8);
      thin_gemm(trans_a, m, k, alpha, a, lda, b, ldb, beta, c, ldc, j0, j1);
    });
    return;
  }
  const std::int64_t npanels = ceil_div(n, kNr);
  PackedB packed_b = PackedB::take(k * npanels * kNr);
  float* pb = packed_b.data();

  // Pack op(B): each chunk packs whole panels, all k-blocks.
  const std::int64_t pack_grain = std::max<std::int64_t>(1, 32768 / (k * kNr));
  const PackBPanel pack_b_panel = tile.pack_b_panel;
  parallel_for(npanels, pack_grain, [=](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t p0 = 0; p0 < k; p0 += kKc) {
      const std::int64_t kc = std::min(kKc, k - p0);
      float* slab = pb + p0 * npanels * kNr;
      for (std::int64_t j = j0; j < j1; ++j)
        pack_b_panel(trans_b, b, ldb, p0, kc, j * kNr, n, slab + j * kc * kNr);
    }
  });

  const Problem pr{trans_a, m, n, k, alpha, a, lda, pb, npanels, beta, c, ldc};
  const std::int64_t mpanels = ceil_div(m, kMr);
  // Split the longer side of C, measured in micro-tiles (a row panel carries half the flops of a
  // column panel): every task then has enough rows or columns to keep the micro-kernel busy.
  // As many tasks as parallel_for makes chunks (4 per worker), but none under kChunkFlops, each a
  // whole number of panels (below: their sizes).
  const bool by_rows = 2 * mpanels >= npanels;
  const std::int64_t panels = by_rows ? mpanels : npanels;
  const std::int64_t tasks = std::min({panels, max_tasks, by_work});
  // Task sizes shrink linearly (guided scheduling): task t carries a share proportional to
  // tasks - t, so the first are twice the equal share and the last a small one. Workers take tasks
  // in order, so the last to finish ends with a short one. With equal tasks, a worker slower than
  // the other (another process on its core, a Web Worker compiled later, the browser's own
  // threads) was still in a full task while the other sat idle: traced in V8 with 2 workers at
  // 1000x1000, the idle tail was 2-9 ms of 35-45 ms on a loaded machine and 1.5 ms of 27 on a
  // quieter one; with shrinking tasks 0.2-3 ms and 0.7 ms
  // (bench/notes/wasm.md, "Two threads in V8").
  const std::int64_t weight_sum = tasks * (tasks + 1) / 2;
  auto task_begin = [panels, tasks, weight_sum](std::int64_t t) {  // panels before task t
    return panels * (t * (2 * tasks - t + 1) / 2) / weight_sum;
  };
  const RunBlock run_block = tile.run_block;
  parallel_for(tasks, 1, [&pr, by_rows, task_begin, run_block, kMr](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t p0 = task_begin(t), p1 = task_begin(t + 1);
      if (by_rows) {
        run_block(pr, p0 * kMr, std::min(p1 * kMr, pr.m), 0, pr.npanels);
      } else {
        run_block(pr, 0, pr.m, p0, p1);
      }
    }
  });
}


}  // namespace gemm
}  // namespace kernels

namespace detail {

void portable_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, std::int64_t lda, const float* b,
                    std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  static constexpr g::TileLoop kTile = g::tile_loop<PortableTile>(run_portable_block);
  g::packed_sgemm(kTile, g::engine_runner(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                  c, ldc);
}

}  // namespace detail
}  // namespace asyncnd
