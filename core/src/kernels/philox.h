// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) and the
// transforms to uniform and normal floats. Counter-based: element i of stream s under key k is a
// pure function of (k, s, i), so any split of the work, any worker count and any backend give the
// same numbers. The batch loops are written over structure-of-arrays so that compilers vectorise
// them (GCC and clang, x86, AArch64 and WebAssembly SIMD128); log and sincos are our own
// polynomials because libm calls do not vectorise, and so the floats are the same bits on every
// machine, as long as nothing fuses a * b + c (the build says -ffp-contract=off, nvcc
// -fmad=false).
#pragma once

#include <cstdint>
#include <cstring>

#include "asyncnd/detail/kernel_call.h"
#include "kernels/functors.h"

namespace asyncnd {
namespace kernels {

// The batch loops are forced inline so that a caller compiled for a wider ISA (random.cpp's
// function multiversioning) vectorises them for that ISA. Unlike the other kernel headers this one
// carries no optimize pragma: GCC refuses to inline a function whose optimize attributes differ
// from its caller's, and Box-Muller's helpers must inline into those clones. The including file
// chooses the optimisation (random.cpp asks for -O3).
#if defined(__GNUC__) || defined(__clang__)
#define ASYNCND_BATCH_INLINE __attribute__((always_inline)) inline
#else
#define ASYNCND_BATCH_INLINE inline
#endif

constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// One block: 4 words from a 128-bit counter and a 64-bit key. The scalar reference the batch
// loop below is tested against (and what a CUDA thread would run).
ASYNCND_HD inline void philox4x32_10(const std::uint32_t ctr[4], std::uint32_t k0, std::uint32_t k1,
                                     std::uint32_t out[4]) {
  std::uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  for (int r = 0; r < 10; ++r) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kPhiloxM0) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(kPhiloxM1) * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// 24 random bits -> [0, 1), exactly representable.
ASYNCND_HD inline float uniform01(std::uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// Natural log for x in (0, 1] (Box-Muller's radius), about 1 ulp: x = m * 2^e with m in
// [sqrt(1/2), sqrt(2)), then the Cephes logf polynomial in m - 1. No special cases needed.
ASYNCND_HD inline float log_unit(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  int e = static_cast<int>(bits >> 23) - 127;
  std::uint32_t mb = (bits & 0x007FFFFFu) | 0x3F800000u;  // m in [1, 2)
  const bool big = mb > 0x3FB504F3u;                      // m > sqrt(2): use m/2, e+1
  mb -= big ? 0x00800000u : 0u;
  e += big ? 1 : 0;
  float m;
  std::memcpy(&m, &mb, 4);
  const float f = m - 1.0f;
  const float z = f * f;
  float y = 7.0376836292e-2f;
  y = y * f - 1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f - 1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f - 1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f - 2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  y = y * f * z;
  const float fe = static_cast<float>(e);
  y += -2.12194440e-4f * fe;
  y += -0.5f * z;
  return f + y + 0.693359375f * fe;
}

// cos and sin of 2*pi*k/2^24 for a 24-bit k. The range reduction is exact integer arithmetic:
// the nearest quadrant q, then an angle in [-pi/4, pi/4] for the Cephes polynomials (~1e-7).
ASYNCND_HD inline void sincos_turns24(std::uint32_t k, float* c, float* s) {
  const std::uint32_t q = (k + (1u << 21)) >> 22;  // nearest quarter turn, 0..4
  const std::int32_t rem = static_cast<std::int32_t>(k) - static_cast<std::int32_t>(q << 22);
  const float x = static_cast<float>(rem) * (6.283185307179586f / 16777216.0f);
  const float z = x * x;
  const float sp = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * x + x;
  const float cp =
      ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z -
      0.5f * z + 1.0f;
  // Rotate by q quarter turns: (c, s) -> (-s, c) per quarter.
  const bool swap = (q & 1u) != 0;
  const float c1 = swap ? sp : cp;
  const float s1 = swap ? cp : sp;
  *c = (((q + 1u) & 2u) != 0) ? -c1 : c1;
  *s = ((q & 2u) != 0) ? -s1 : s1;
}

// sqrt for y >= 0 without libm (sqrtf sets errno, which keeps compilers from vectorising it):
// the classic inverse-sqrt guess, three Newton steps (relative error < 2e-7), then y * 1/sqrt(y).
// y == 0 gives 0.
ASYNCND_HD inline float sqrt_nonneg(float y) {
  std::uint32_t bits;
  std::memcpy(&bits, &y, 4);
  bits = 0x5F375A86u - (bits >> 1);
  float t;
  std::memcpy(&t, &bits, 4);
  const float h = 0.5f * y;
  t = t * (1.5f - h * t * t);
  t = t * (1.5f - h * t * t);
  t = t * (1.5f - h * t * t);
  return y * t;
}

// Box-Muller on two words: (r cos(theta), r sin(theta)), r = sqrt(-2 ln u1), u1 in (0, 1] so the
// log is finite, theta = 2 pi u2.
// No draw is further than kNormalMaxZ from 0: r is largest at u1 = 2^-24, sqrt(48 ln 2) = 5.7683
// (with log_unit's and sqrt_nonneg's rounding; test_ops_random.cpp checks it).
constexpr float kNormalMaxZ = 5.77f;
ASYNCND_HD inline void box_muller(std::uint32_t x0, std::uint32_t x1, float* z0, float* z1) {
  const float u1 = static_cast<float>((x0 >> 8) + 1u) * (1.0f / 16777216.0f);
  const float r = sqrt_nonneg(-2.0f * log_unit(u1));
  float c, s;
  sincos_turns24(x1 >> 8, &c, &s);
  *z0 = r * c;
  *z1 = r * s;
}

// The largest float below hi (hi finite), toward -inf.
ASYNCND_HD inline float float_below(float hi) {
  std::uint32_t hb;
  std::memcpy(&hb, &hi, 4);
  hb = (hi > 0.0f) ? hb - 1u : (hi < 0.0f ? hb + 1u : 0x80000001u);
  float below;
  std::memcpy(&below, &hb, 4);
  return below;
}

using Dist = ::asyncnd::detail::RandomDist;  // the op table's distributions (kernel_call.h)

// Batch of kPhiloxBatch consecutive blocks, structure-of-arrays, so each round is one vector loop.
constexpr int kPhiloxBatch = 64;

// out[0 .. 4*nb) = the 4*nb values of blocks [block, block + nb) of `stream` (nb <= kPhiloxBatch):
// uniform: a + b*u in [a, a+b), clamped below a+b; normal: a + b*z.
ASYNCND_BATCH_INLINE void philox_batch(std::uint64_t key, std::uint64_t stream, std::uint64_t block,
                                       int nb, Dist dist, float a, float b, float* out) {
  alignas(64) std::uint32_t c0[kPhiloxBatch], c1[kPhiloxBatch], c2[kPhiloxBatch], c3[kPhiloxBatch];
  const std::uint32_t s0 = static_cast<std::uint32_t>(stream);
  const std::uint32_t s1 = static_cast<std::uint32_t>(stream >> 32);
  for (int j = 0; j < kPhiloxBatch; ++j) {
    const std::uint64_t blk = block + static_cast<std::uint64_t>(j);
    c0[j] = static_cast<std::uint32_t>(blk);
    c1[j] = static_cast<std::uint32_t>(blk >> 32);
    c2[j] = s0;
    c3[j] = s1;
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    for (int j = 0; j < kPhiloxBatch; ++j) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(kPhiloxM0) * c0[j];
      const std::uint64_t p1 = static_cast<std::uint64_t>(kPhiloxM1) * c2[j];
      const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
      const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = static_cast<std::uint32_t>(p1);
      c3[j] = static_cast<std::uint32_t>(p0);
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  alignas(64) float v0[kPhiloxBatch], v1[kPhiloxBatch], v2[kPhiloxBatch], v3[kPhiloxBatch];
  if (dist == Dist::kUniform) {
    // a + b*u can round up to a+b when |a| >> b; the largest float below it keeps [lo, hi).
    const float hi = a + b;
    const float below = float_below(hi);
    for (int j = 0; j < kPhiloxBatch; ++j) {
      float u0 = a + b * uniform01(c0[j]), u1 = a + b * uniform01(c1[j]);
      float u2 = a + b * uniform01(c2[j]), u3 = a + b * uniform01(c3[j]);
      v0[j] = (u0 >= hi && b > 0.0f) ? below : u0;
      v1[j] = (u1 >= hi && b > 0.0f) ? below : u1;
      v2[j] = (u2 >= hi && b > 0.0f) ? below : u2;
      v3[j] = (u3 >= hi && b > 0.0f) ? below : u3;
    }
  } else {
    for (int j = 0; j < kPhiloxBatch; ++j) {
      float z0, z1, z2, z3;
      box_muller(c0[j], c1[j], &z0, &z1);
      box_muller(c2[j], c3[j], &z2, &z3);
      v0[j] = a + b * z0;
      v1[j] = a + b * z1;
      v2[j] = a + b * z2;
      v3[j] = a + b * z3;
    }
  }
  for (int j = 0; j < nb; ++j) {
    out[4 * j + 0] = v0[j];
    out[4 * j + 1] = v1[j];
    out[4 * j + 2] = v2[j];
    out[4 * j + 3] = v3[j];
  }
}

// Fills out[begin, end) with elements [begin, end) of the stream: element i is word i % 4 of
// block i / 4. Whole batches are written in place; ragged edges go through a small buffer.
ASYNCND_BATCH_INLINE void philox_fill(std::uint64_t key, std::uint64_t stream, Dist dist, float a,
                                      float b, float* out, std::int64_t begin, std::int64_t end) {
  alignas(64) float tmp[4 * kPhiloxBatch];
  std::int64_t i = begin;
  while (i < end) {
    const std::int64_t blk = i / 4;
    const std::int64_t first = blk * 4;  // first element of this batch
    const std::int64_t nb_all = (end - first + 3) / 4;
    const int nb = static_cast<int>(nb_all < kPhiloxBatch ? nb_all : kPhiloxBatch);
    const std::int64_t last = first + 4 * nb;  // one past the batch
    if (first == i && last <= end) {
      philox_batch(key, stream, static_cast<std::uint64_t>(blk), nb, dist, a, b, out + i);
      i = last;
    } else {
      philox_batch(key, stream, static_cast<std::uint64_t>(blk), nb, dist, a, b, tmp);
      const std::int64_t stop = last < end ? last : end;
      std::memcpy(out + i, tmp + (i - first), static_cast<std::size_t>(stop - i) * sizeof(float));
      i = stop;
    }
  }
}

}  // namespace kernels
}  // namespace asyncnd
