// reference_sgemm: portable, cache-blocked row-major SGEMM. The fallback when no BLAS is built and
// the reference tests compare against; simple before fast.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "asyncnd/detail/backend.h"

namespace asyncnd {
namespace detail {
namespace {
// A packed [kKc x kNc] panel of op(B) is 256 KiB: it stays in L2 while every row of A streams
// past it, and the C row segment (kNc floats) stays in L1.
constexpr std::int64_t kKc = 256;
constexpr std::int64_t kNc = 256;
}  // namespace

void reference_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                     float alpha, const float* a, std::int64_t lda, const float* b,
                     std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  // C = beta * C first; beta == 0 overwrites (as BLAS does), so NaNs already in C do not survive.
  for (std::int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (beta == 0.0f) {
      std::fill(ci, ci + n, 0.0f);
    } else if (beta != 1.0f) {
      for (std::int64_t j = 0; j < n; ++j) ci[j] *= beta;
    }
  }
  if (k <= 0 || alpha == 0.0f) return;

  // Packing op(B) into a contiguous panel makes every transpose case the same i-k-j loop, whose
  // inner loop is unit-stride in both the panel and C (the compiler vectorises it).
  std::vector<float> panel(static_cast<std::size_t>(std::min(k, kKc) * std::min(n, kNc)));
  for (std::int64_t j0 = 0; j0 < n; j0 += kNc) {
    const std::int64_t nc = std::min(kNc, n - j0);
    for (std::int64_t p0 = 0; p0 < k; p0 += kKc) {
      const std::int64_t kc = std::min(kKc, k - p0);
      for (std::int64_t p = 0; p < kc; ++p) {
        float* row = panel.data() + p * nc;
        for (std::int64_t j = 0; j < nc; ++j) {
          row[j] = trans_b ? b[(j0 + j) * ldb + (p0 + p)] : b[(p0 + p) * ldb + (j0 + j)];
        }
      }
      for (std::int64_t i = 0; i < m; ++i) {
        float* ci = c + i * ldc + j0;
        for (std::int64_t p = 0; p < kc; ++p) {
          const float aip = alpha * (trans_a ? a[(p0 + p) * lda + i] : a[i * lda + (p0 + p)]);
          const float* row = panel.data() + p * nc;
          for (std::int64_t j = 0; j < nc; ++j) ci[j] += aip * row[j];
        }
      }
    }
  }
}

}  // namespace detail
}  // namespace asyncnd
