// The CUDA backend's kernels: fill, arange, elementwise maps (contiguous and strided, i.e. NumPy
// broadcasting and N-D transposes), reductions, Philox random numbers and the 2-D transpose.
// The math is the CPU's: the ASYNCND_HD functors and accumulators of core/src/kernels, chosen at
// run time by MapFn (one kernel per form rather than one per functor keeps this file quick to
// compile for two architectures). Compiled with -fmad=false (CMakeLists.txt), as the CPU kernels
// are compiled without floating-point contraction, so that Philox gives the CPU's numbers bit for
// bit and the maps round as the CPU does.
#include <algorithm>
#include <cstdint>

#include "cuda_kernels.h"
#include "kernels/device_map.h"
#include "kernels/reduce.h"

namespace asyncnd {
namespace detail {
namespace {

namespace k = kernels;

constexpr int kThreads = 256;

// Blocks for n elements with grid-stride loops: enough to fill any current GPU, no more.
unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 8192 ? (b > 0 ? b : 1) : 8192);
}

__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

__global__ void fill_kernel(float* out, std::int64_t n, float v) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = v;
}

__global__ void arange_kernel(float* out, std::int64_t n, double start, double step) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    out[i] = static_cast<float>(start + static_cast<double>(i) * step);
}

__global__ void map_kernel(KernelCall::Map m, const float* a, const float* b, float* out,
                           std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = k::map_element(m, a, b, i);
}

// Output element i -> input offsets through the plan's dims and strides (unravel, innermost last).
// The plan travels by value as a kernel parameter.
__global__ void map_strided_kernel(KernelCall::Map m, k::DeviceStrided p, const float* a,
                                   const float* b, float* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride())
    out[i] = k::strided_element(m, p, a, b, i);
}

// Reduced axis innermost (inner == 1): one block per output row, threads stride along it, then a
// tree in shared memory.
template <class A>
__global__ void reduce_rows_kernel(ReduceFn fn, const float* x, float* out, std::int64_t outer,
                                   std::int64_t len) {
  using T = typename A::T;
  __shared__ T part[kThreads];
  for (std::int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const float* row = x + o * len;
    T acc = A::init();
    for (std::int64_t i = threadIdx.x; i < len; i += blockDim.x) acc = A::step(acc, row[i]);
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s)
        part[threadIdx.x] = A::merge(part[threadIdx.x], part[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = k::reduce_finish(fn, part[0], len);
    __syncthreads();  // part[0] is read before the next row overwrites it
  }
}

// Reduced axis in the middle: one thread per output element walks the axis; neighbouring threads
// read neighbouring columns, so the loads coalesce.
template <class A>
__global__ void reduce_cols_kernel(ReduceFn fn, const float* x, float* out, std::int64_t outer,
                                   std::int64_t len, std::int64_t inner) {
  const std::int64_t n = outer * inner;
  for (std::int64_t t = first_index(); t < n; t += grid_stride()) {
    const std::int64_t o = t / inner, i = t % inner;
    const float* col = x + o * len * inner + i;
    typename A::T acc = A::init();
    for (std::int64_t j = 0; j < len; ++j) acc = A::step(acc, col[j * inner]);
    out[t] = k::reduce_finish(fn, acc, len);
  }
}

template <class A>
void launch_reduce(const KernelCall& c, cudaStream_t s) {
  const auto& r = c.reduce;
  if (r.inner == 1) {
    const std::int64_t g = r.outer < 65535 ? r.outer : 65535;
    reduce_rows_kernel<A><<<static_cast<unsigned>(g), kThreads, 0, s>>>(r.fn, c.a, c.out, r.outer,
                                                                         r.len);
  } else {
    reduce_cols_kernel<A><<<blocks_for(r.outer * r.inner), kThreads, 0, s>>>(
        r.fn, c.a, c.out, r.outer, r.len, r.inner);
  }
}

// One thread per Philox block: the four values element 4*blk .. 4*blk+3 get on the CPU.
__global__ void random_kernel(KernelCall::Random r, float* out, std::int64_t n) {
  const std::int64_t blocks = (n + 3) / 4;
  for (std::int64_t blk = first_index(); blk < blocks; blk += grid_stride()) {
    float v[4];
    k::philox_block_values(r.key, r.stream, static_cast<std::uint64_t>(blk), r.dist, r.a, r.b, v);
    const std::int64_t base = blk * 4;
    for (int j = 0; j < 4; ++j)
      if (base + j < n) out[base + j] = v[j];
  }
}

// 32x32 tiles through shared memory (one padding column against bank conflicts): reads and writes
// both coalesce.
constexpr int kTile = 32;
// A block per tile of 32 columns (grid x, up to 2^31 - 1 tiles) and of 32 rows. The grid's y is
// limited to 65535, so a block takes the row tiles blockIdx.y, + gridDim.y, ...: an array of more
// than 2 097 120 rows is transposed too, as on the CPU.
__global__ void transpose2d_kernel(const float* a, float* out, std::int64_t rows,
                                   std::int64_t cols) {
  __shared__ float tile[kTile][kTile + 1];
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTile; r0 < rows;
       r0 += static_cast<std::int64_t>(gridDim.y) * kTile) {
    for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
      const std::int64_t r = r0 + dy, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[dy][threadIdx.x] = a[r * cols + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < kTile; dy += blockDim.y) {
      const std::int64_t c = c0 + dy, r = r0 + threadIdx.x;  // out[c][r]
      if (c < cols && r < rows) out[c * rows + r] = tile[threadIdx.x][dy];
    }
    __syncthreads();  // every thread has read the tile before the next row tile overwrites it
  }
}

// A batch of small calls (cuda_kernels.h, TinyBatch): one block, each call over all its threads,
// a barrier after each. The calls are read from the parameter space in place (ptxas -v for sm_90:
// no stack frame, 24 registers). The parameter holds room for N calls: a launch copies all of it,
// so a batch goes in the smallest of the sizes run_tiny_batch has.
template <int N>
struct TinyCalls {
  std::int32_t count;
  TinyCall calls[N];
};
template <int N>
__global__ void tiny_batch_kernel(TinyCalls<N> batch) {
  for (int j = 0; j < batch.count; ++j) {
    const TinyCall& c = batch.calls[j];
    for (std::int64_t i = threadIdx.x; i < c.n; i += blockDim.x) {
      switch (c.kind) {
        case KernelCall::Kind::kFill: c.out[i] = c.fill; break;
        case KernelCall::Kind::kArange:
          c.out[i] = static_cast<float>(c.start + static_cast<double>(i) * c.step);
          break;
        default: c.out[i] = k::map_element(c.map, c.a, c.b, i); break;
      }
    }
    __syncthreads();
  }
}

template <int N>
cudaError_t launch_tiny_batch(const TinyBatch& batch, cudaStream_t s) {
  TinyCalls<N> b;
  b.count = batch.count;
  for (int j = 0; j < batch.count; ++j) b.calls[j] = batch.calls[j];
  tiny_batch_kernel<N><<<1, kThreads, 0, s>>>(b);
  return cudaGetLastError();
}
static_assert(sizeof(TinyCalls<kTinyBatchMax>) == sizeof(TinyBatch), "the largest is the batch");

}  // namespace

bool tiny_batchable(const KernelCall& c) {
  using Kind = KernelCall::Kind;
  return (c.kind == Kind::kFill || c.kind == Kind::kArange || c.kind == Kind::kMap) &&
         c.n <= kTinyElems;
}

TinyCall tiny_call(const KernelCall& c) {
  TinyCall t{};
  t.a = c.a;
  t.b = c.b;
  t.out = c.out;
  t.n = static_cast<std::int32_t>(c.n);
  t.kind = c.kind;
  if (c.kind == KernelCall::Kind::kFill) t.fill = c.fill.value;
  if (c.kind == KernelCall::Kind::kArange) {
    t.start = c.arange.start;
    t.step = c.arange.step;
  }
  if (c.kind == KernelCall::Kind::kMap) t.map = c.map;
  return t;
}

cudaError_t run_tiny_batch(const TinyBatch& batch, cudaStream_t s, int room) {
  if (batch.count <= 0) return cudaSuccess;
  const int n = batch.count > room ? batch.count : room;
  if (n <= 1) return launch_tiny_batch<1>(batch, s);
  if (n <= 8) return launch_tiny_batch<8>(batch, s);
  return launch_tiny_batch<kTinyBatchMax>(batch, s);
}

cudaError_t run_cuda_kernel(const KernelCall& c, cudaStream_t s) {
  using Kind = KernelCall::Kind;
  switch (c.kind) {
    case Kind::kFill:
      fill_kernel<<<blocks_for(c.n), kThreads, 0, s>>>(c.out, c.n, c.fill.value);
      break;
    case Kind::kArange:
      arange_kernel<<<blocks_for(c.n), kThreads, 0, s>>>(c.out, c.n, c.arange.start, c.arange.step);
      break;
    case Kind::kMap:
      map_kernel<<<blocks_for(c.n), kThreads, 0, s>>>(c.map, c.a, c.b, c.out, c.n);
      break;
    case Kind::kMapStrided:
      map_strided_kernel<<<blocks_for(c.n), kThreads, 0, s>>>(
          c.strided.map, k::device_strided(c.strided.plan), c.a, c.b, c.out, c.n);
      break;
    case Kind::kReduce:
      switch (c.reduce.fn) {
#define ASYNCND_CUDA_REDUCE(Name, Acc) \
  case ReduceFn::k##Name:              \
    launch_reduce<k::Acc>(c, s);       \
    break;
        ASYNCND_REDUCE_FNS(ASYNCND_CUDA_REDUCE)
#undef ASYNCND_CUDA_REDUCE
      }
      break;
    case Kind::kRandom:
      random_kernel<<<blocks_for((c.n + 3) / 4), kThreads, 0, s>>>(c.random, c.out, c.n);
      break;
    case Kind::kTranspose2d: {
      const auto& t = c.transpose;
      const std::int64_t gx = (t.cols + kTile - 1) / kTile;
      const std::int64_t gy = std::min<std::int64_t>((t.rows + kTile - 1) / kTile, 65535);
      transpose2d_kernel<<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)),
                           dim3(kTile, 8), 0, s>>>(c.a, c.out, t.rows, t.cols);
      break;
    }
    case Kind::kGemm:  // cuBLAS, in cuda_backend.cpp
    case Kind::kCopy:  // cudaMemcpyAsync, in cuda_backend.cpp
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace detail
}  // namespace asyncnd
