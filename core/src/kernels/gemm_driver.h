// The blocked, packed SGEMM loop that every asyncnd GEMM shares, whatever its micro-kernel: the
// portable one of gemm_kernel.h (4x8 on 128-bit vectors natively, 5x8 or 6x8 in WebAssembly) and
// the native AVX-512 and AVX2 ones (native/cpu/avx512_gemm.cpp, avx2_gemm.cpp). Row-major, C = alpha op(A) op(B) + beta C,
// the contract of detail::reference_sgemm.
//
// Loop order (BLIS's): op(B) is packed once, whole, into NR-column panels (in parallel); then each
// parallel task owns a range of rows of C (or, when C is short and wide, a range of column
// panels). A task packs an MC x KC block of op(A) into MR-row panels and runs the micro-kernel over
// every panel of its columns; a KC x NR panel of B stays in L1 while the MC / MR panels of A
// stream past it from L2. Two cheaper paths skip the packing: tiny products (a direct loop) and
// thin ones (fewer rows than a micro-tile: scaled rows of B added into C).
//
// A micro-kernel comes as a Tile: a struct with
//   static constexpr std::int64_t kMr, kNr, kKc, kMc;  // tile rows and columns, block depth and rows
//   static void pack_a(bool trans_a, const float* a, std::int64_t lda, std::int64_t i0,
//                      std::int64_t mc, std::int64_t p0, std::int64_t kc, float alpha, float* out);
//   static void pack_b_panel(bool trans_b, const float* b, std::int64_t ldb, std::int64_t p0,
//                            std::int64_t kc, std::int64_t j0, std::int64_t n, float* out);
//   static void micro_kernel(std::int64_t kc, const float* pa, const float* pb, float* c,
//                            std::int64_t ldc, std::int64_t mr, std::int64_t nr, Update mode,
//                            float beta);
// with gemm_kernel.h's packed layouts (a panel of A: element (i, p) at p * kMr + i; of B: (p, j)
// at p * kNr + j; rows and columns past the edge zero) and its Update modes. The tile's file
// compiles run_block_body<Tile> into a function of its own, where it may carry a target attribute
// (AVX-512, AVX2) or target clones, and hands that function to packed_sgemm.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>

#include "kernels/gemm_kernel.h"

namespace asyncnd {
namespace kernels {
namespace gemm {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Packed buffers start on a cache line: the AVX-512 kernel loads whole 64-byte rows of B.
struct AlignedDelete {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedDelete>;
inline AlignedFloats aligned_floats(std::int64_t count) {
  return AlignedFloats(static_cast<float*>(
      ::operator new[](static_cast<std::size_t>(count) * sizeof(float), std::align_val_t(64))));
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

// Rows [i0, i1) x column panels [j0, j1) of C, on the calling thread.
using RunBlock = void (*)(const Problem&, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                          std::int64_t j1);
using PackBPanel = void (*)(bool trans_b, const float* b, std::int64_t ldb, std::int64_t p0,
                            std::int64_t kc, std::int64_t j0, std::int64_t n, float* out);

// What packed_sgemm needs to know of a tile, and the tile's own block loop.
// thin_rows: products with fewer rows of C take the thin path (scaled rows of B added into C, on
// 128-bit vectors) instead of packing for a tile they would mostly leave empty.
struct TileLoop {
  std::int64_t mr, nr, kc, thin_rows;
  PackBPanel pack_b_panel;
  RunBlock run_block;
};

template <class Tile>
constexpr TileLoop tile_loop(RunBlock run_block, std::int64_t thin_rows = Tile::kMr) {
  return {Tile::kMr, Tile::kNr, Tile::kKc, thin_rows, Tile::pack_b_panel, run_block};
}

// The body of a RunBlock for Tile, inlined into the tile's own function (so that a target
// attribute there covers the packing and the micro-kernel too).
template <class Tile>
__attribute__((always_inline)) inline void run_block_body(const Problem& pr, std::int64_t i0,
                                                          std::int64_t i1, std::int64_t j0,
                                                          std::int64_t j1) {
  constexpr std::int64_t kMr = Tile::kMr, kNr = Tile::kNr, kKc = Tile::kKc, kMc = Tile::kMc;
  static_assert(kMc % kMr == 0, "a packed block of A holds whole panels");
  const std::int64_t rows = i1 - i0;
  if (rows <= 0 || j1 <= j0) return;
  // Equal row blocks of at most kMc rows (multiples of kMr), so no block is a thin remainder.
  const std::int64_t nblocks = ceil_div(rows, kMc);
  const std::int64_t mc_step = ceil_div(ceil_div(rows, nblocks), kMr) * kMr;
  const std::int64_t kc_max = std::min(pr.k, kKc);
  AlignedFloats abuf = aligned_floats(mc_step * kc_max);
  const Update first = pr.beta == 0.0f   ? Update::kOverwrite
                       : pr.beta == 1.0f ? Update::kAdd
                                         : Update::kScale;
  for (std::int64_t ib = i0; ib < i1; ib += mc_step) {
    const std::int64_t mc = std::min(mc_step, i1 - ib);
    for (std::int64_t p0 = 0; p0 < pr.k; p0 += kKc) {
      const std::int64_t kc = std::min(kKc, pr.k - p0);
      Tile::pack_a(pr.trans_a, pr.a, pr.lda, ib, mc, p0, kc, pr.alpha, abuf.get());
      const Update mode = p0 == 0 ? first : Update::kAdd;
      const float* bslab = pr.packed_b + p0 * pr.npanels * kNr;
      for (std::int64_t j = j0; j < j1; ++j) {
        const float* bp = bslab + j * kc * kNr;
        const std::int64_t nr = std::min(kNr, pr.n - j * kNr);
        for (std::int64_t r = 0; r < mc; r += kMr) {
          Tile::micro_kernel(kc, abuf.get() + r * kc, bp, pr.c + (ib + r) * pr.ldc + j * kNr,
                             pr.ldc, std::min(kMr, mc - r), nr, mode, pr.beta);
        }
      }
    }
  }
}

// Where a GEMM's parallel loops run: `threads` threads share them, and parallel_for(n, grain, fn)
// covers [0, n) with calls fn(begin, end), returning when all are done (Engine::parallel_for's
// contract). A null parallel_for runs everything on the calling thread.
struct Runner {
  int threads = 1;
  void (*parallel_for)(std::int64_t n, std::int64_t grain,
                       const std::function<void(std::int64_t, std::int64_t)>& fn) = nullptr;
};
// The engine's CPU workers (the portable GEMM's runner).
Runner engine_runner();

// The whole GEMM on `tile`: C = beta C alone when k == 0 or alpha == 0; a direct loop for tiny
// products; the thin path for fewer rows than a tile; else packed B and the tile's block loop,
// split across the runner's threads (portable_gemm.cpp).
void packed_sgemm(const TileLoop& tile, const Runner& runner, bool trans_a, bool trans_b,
                  std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                  std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                  std::int64_t ldc);

}  // namespace gemm
}  // namespace kernels
}  // namespace asyncnd
