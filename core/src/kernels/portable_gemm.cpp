// portable_sgemm: blocked, packed row-major SGEMM on the MR x 8 micro-kernel of
// kernels/gemm_kernel.h (4x8 natively, 5x8 in the SIMD128 wasm module, 6x8 with relaxed SIMD),
// split across the engine's CPU workers. The GEMM of the WebAssembly build (no BLAS there) and of
// native builds without OpenBLAS.
//
// Loop order (BLIS's): op(B) is packed once, whole, into 8-column panels (in parallel); then each
// parallel task owns a range of rows of C (or, when C is short and wide, a range of column
// panels). A task packs an MC x KC block of op(A) into MR-row panels and runs the micro-kernel over
// every panel of its columns; a KC x 8 panel of B stays in L1 while the MC / MR panels of A stream
// past it from L2. Two cheaper paths skip the packing: tiny products (a direct loop) and thin ones
// (fewer rows than a micro-tile: scaled rows of B added into C).
#include <algorithm>
#include <cstdint>
#include <memory>

#include "asyncnd/detail/backend.h"
#include "asyncnd/engine.h"
#include "kernels/gemm_kernel.h"

namespace asyncnd {
namespace detail {
namespace {

namespace g = kernels::gemm;
using g::kMr;
using g::kNr;

// Block sizes, chosen from measurements at 1000x1000 (bench/README.md, "Portable GEMM"): in V8 on
// one thread several (KC, MC) pairs came within a few percent of each other; on two threads
// MC = 96 beat MC = 48, since each row block streams all of packed B from L3 and two threads
// share it. A 96 x 512 block of A is 192 KiB (L2); a 512 x 8 panel of B is 16 KiB (L1).
constexpr std::int64_t kKc = 512;  // depth of a packed block
constexpr std::int64_t kMc = 96 / kMr * kMr;  // rows of a packed block of A: 96, or 95 (kMr 5)
static_assert(kMc % kMr == 0, "a packed block of A holds whole panels");
// Below this m * n * k, packing and threads cost more than they save: a direct loop.
constexpr std::int64_t kSmallMnk = 32 * 32 * 32;
// Flops a parallel chunk should at least carry, so a hand-off stays cheap (bench/README.md,
// "Hand-offs and grain sizes").
constexpr double kChunkFlops = 2e6;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

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

struct Problem {
  bool trans_a;
  std::int64_t m, n, k;
  float alpha;
  const float* a;
  std::int64_t lda;
  const float* packed_b;  // k-block at p0 starts at p0 * npanels * kNr; its panel j at j * kc * kNr
  std::int64_t npanels;
  float beta;
  float* c;
  std::int64_t ldc;
};

// Natively on x86-64 with GCC and glibc, the block loop (with the micro-kernel inlined) is also
// compiled for AVX2 and picked at load time (ifunc): the same 128-bit vector code, but with
// three-operand instructions and broadcasts from memory, as V8 emits for SIMD128 (faster:
// bench/README.md, "Portable GEMM"). No FMA (not in the "avx2" target, and -std=c++17 does not
// contract), so both versions compute bit-identical results. Not under ThreadSanitizer or AddressSanitizer:
// the loader runs ifunc resolvers before the sanitizer's runtime starts (the TSan build crashed).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define ASYNCND_GEMM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ASYNCND_GEMM_CLONES
#endif

// Rows [i0, i1) x column panels [j0, j1) of C, on the calling thread.
ASYNCND_GEMM_CLONES
void run_block(const Problem& pr, std::int64_t i0, std::int64_t i1, std::int64_t j0,
               std::int64_t j1) {
  const std::int64_t rows = i1 - i0;
  if (rows <= 0 || j1 <= j0) return;
  // Equal row blocks of at most kMc rows (multiples of kMr), so no block is a thin remainder.
  const std::int64_t nblocks = ceil_div(rows, kMc);
  const std::int64_t mc_step = ceil_div(ceil_div(rows, nblocks), kMr) * kMr;
  const std::int64_t kc_max = std::min(pr.k, kKc);
  std::unique_ptr<float[]> abuf(new float[static_cast<std::size_t>(mc_step * kc_max)]);
  const g::Update first = pr.beta == 0.0f   ? g::Update::kOverwrite
                          : pr.beta == 1.0f ? g::Update::kAdd
                                            : g::Update::kScale;
  for (std::int64_t ib = i0; ib < i1; ib += mc_step) {
    const std::int64_t mc = std::min(mc_step, i1 - ib);
    for (std::int64_t p0 = 0; p0 < pr.k; p0 += kKc) {
      const std::int64_t kc = std::min(kKc, pr.k - p0);
      g::pack_a(pr.trans_a, pr.a, pr.lda, ib, mc, p0, kc, pr.alpha, abuf.get());
      const g::Update mode = p0 == 0 ? first : g::Update::kAdd;
      const float* bslab = pr.packed_b + p0 * pr.npanels * kNr;
      for (std::int64_t j = j0; j < j1; ++j) {
        const float* bp = bslab + j * kc * kNr;
        const std::int64_t nr = std::min(kNr, pr.n - j * kNr);
        for (std::int64_t r = 0; r < mc; r += kMr) {
          g::micro_kernel(kc, abuf.get() + r * kc, bp, pr.c + (ib + r) * pr.ldc + j * kNr, pr.ldc,
                          std::min(kMr, mc - r), nr, mode, pr.beta);
        }
      }
    }
  }
}

}  // namespace

void portable_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, std::int64_t lda, const float* b,
                    std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <= kSmallMnk) {
    small_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  Engine& eng = engine();
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const std::int64_t max_tasks = 4 * std::max(1, eng.num_workers());
  const auto by_work = static_cast<std::int64_t>(std::max(1.0, flops / kChunkFlops));
  if (m < kMr && !trans_b) {
    const std::int64_t blocks = ceil_div(n, kNr);  // tasks own whole 8-column blocks
    const std::int64_t tasks = std::min({blocks, max_tasks, by_work});
    eng.parallel_for(tasks, 1, [=](std::int64_t t0, std::int64_t t1) {
      const std::int64_t j0 = t0 * blocks / tasks * kNr;
      const std::int64_t j1 = std::min(n, t1 * blocks / tasks * kNr);
      thin_gemm(trans_a, m, k, alpha, a, lda, b, ldb, beta, c, ldc, j0, j1);
    });
    return;
  }
  const std::int64_t npanels = ceil_div(n, kNr);
  std::unique_ptr<float[]> packed_b(new float[static_cast<std::size_t>(k * npanels * kNr)]);
  float* pb = packed_b.get();

  // Pack op(B): each chunk packs whole panels, all k-blocks.
  const std::int64_t pack_grain = std::max<std::int64_t>(1, 32768 / (k * kNr));
  eng.parallel_for(npanels, pack_grain, [=](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t p0 = 0; p0 < k; p0 += kKc) {
      const std::int64_t kc = std::min(kKc, k - p0);
      float* slab = pb + p0 * npanels * kNr;
      for (std::int64_t j = j0; j < j1; ++j)
        g::pack_b_panel(trans_b, b, ldb, p0, kc, j * kNr, n, slab + j * kc * kNr);
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
  // quieter one; with shrinking tasks 0.2-3 ms and 0.7 ms (bench/README.md, "Two threads in V8").
  const std::int64_t weight_sum = tasks * (tasks + 1) / 2;
  auto task_begin = [panels, tasks, weight_sum](std::int64_t t) {  // panels before task t
    return panels * (t * (2 * tasks - t + 1) / 2) / weight_sum;
  };
  eng.parallel_for(tasks, 1, [&pr, by_rows, task_begin](std::int64_t t0, std::int64_t t1) {
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

}  // namespace detail
}  // namespace asyncnd
