// nd::: creation, elementwise, linear algebra and reductions on NDArrays. Every function here is
// non-blocking (it validates, queues and returns) unless it says otherwise, and throws
// asyncnd::Error naming the op and the shapes for bad input, queuing nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "asyncnd/ndarray.h"

namespace asyncnd {
namespace nd {

// Creation.
NDArray empty(Shape shape, Device device = {});  // values unspecified
NDArray zeros(Shape shape, Device device = {});
NDArray ones(Shape shape, Device device = {});
NDArray full(Shape shape, float value, Device device = {});
// [start, stop) in steps of `step` (NumPy's arange); step must be non-zero. The count and the
// values are computed in double from the arguments as given, then the values rounded to float
// (so arange(0, 16777217) has 16777217 elements, though float cannot tell the last two apart).
NDArray arange(double start, double stop, double step = 1.0, Device device = {});
NDArray arange(double stop);
// Copies `values` (moved in, so no copy is made when passed an rvalue); their count must equal
// the shape's size.
NDArray from_vector(std::vector<float> values, Shape shape, Device device = {});

// Random numbers: counter-based (Philox4x32-10). Each call takes the next stream of the global
// seed at the call, so the values depend only on the seed and the order of the calls, never on
// scheduling, worker count or backend. random_uniform draws from [lo, hi): finite lo <= hi with
// hi - lo finite in float; random_normal: a finite mean, stddev >= 0, and |mean| + 5.77 stddev
// within float's range (no draw is further from the mean). Other values throw asyncnd::Error.
void seed(std::uint64_t seed);
NDArray random_uniform(Shape shape, float lo = 0.0f, float hi = 1.0f, Device device = {});
NDArray random_normal(Shape shape, float mean = 0.0f, float stddev = 1.0f, Device device = {});

// Elementwise, with NumPy broadcasting. The binary ops take a float on either side: sub(2, x) is
// 2 - x, pow(2, x) is 2 to the power x. The list is the op table's (asyncnd/detail/op_table.h).
NDArray add(const NDArray& a, const NDArray& b);
NDArray sub(const NDArray& a, const NDArray& b);
NDArray mul(const NDArray& a, const NDArray& b);
NDArray div(const NDArray& a, const NDArray& b);
NDArray pow(const NDArray& a, const NDArray& b);
NDArray add(const NDArray& a, float b);
NDArray sub(const NDArray& a, float b);
NDArray mul(const NDArray& a, float b);
NDArray div(const NDArray& a, float b);
NDArray pow(const NDArray& a, float b);
NDArray add(float a, const NDArray& b);
NDArray sub(float a, const NDArray& b);
NDArray mul(float a, const NDArray& b);
NDArray div(float a, const NDArray& b);
NDArray pow(float a, const NDArray& b);
NDArray neg(const NDArray& a);
NDArray exp(const NDArray& a);
NDArray log(const NDArray& a);
NDArray sqrt(const NDArray& a);
NDArray relu(const NDArray& a);
NDArray sigmoid(const NDArray& a);
NDArray tanh(const NDArray& a);
NDArray abs(const NDArray& a);

// Linear algebra (2-D). dot(a, b) is the matrix product of [m,k] and [k,n]; matmul is the same.
NDArray dot(const NDArray& a, const NDArray& b);
NDArray matmul(const NDArray& a, const NDArray& b);
// op(a) op(b), where op transposes when asked (MXNet's dot(transpose_a, transpose_b)): no
// transposed copy is made, the GEMM reads the operand transposed.
NDArray dot(const NDArray& a, const NDArray& b, bool transpose_a, bool transpose_b);
NDArray transpose(const NDArray& a);
NDArray reshape(const NDArray& a, Shape shape);
// `a` broadcast (NumPy rules) to `shape`, as a new array. Throws if a's shape does not broadcast
// to exactly `shape`.
NDArray broadcast_to(const NDArray& a, Shape shape);

// Reductions: over all elements (a [] scalar array) or one axis (negative counts from the end).
NDArray sum(const NDArray& a);
NDArray sum(const NDArray& a, int axis, bool keepdims = false);
NDArray mean(const NDArray& a);
NDArray mean(const NDArray& a, int axis, bool keepdims = false);
NDArray max(const NDArray& a);
NDArray max(const NDArray& a, int axis, bool keepdims = false);
// Frobenius (L2) norm over all elements.
NDArray norm(const NDArray& a);

// A copy of `a` on `device`.
NDArray copy_to(const NDArray& a, Device device);

// Blocking: waits for everything queued so far; rethrows like Engine::waitall.
void waitall();

// The shape that broadcasting a and b gives, or an asyncnd::Error naming `op` and both shapes
// (or the shape with a negative dimension).
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");

}  // namespace nd
}  // namespace asyncnd
