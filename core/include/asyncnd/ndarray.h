// NDArray: a float32 n-dimensional array whose values are computed asynchronously by the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "asyncnd/detail/op_table.h"
#include "asyncnd/device.h"
#include "asyncnd/engine.h"

namespace asyncnd {

using Shape = std::vector<std::int64_t>;

// "[2,3]"; used in every error message.
std::string shape_str(const Shape& shape);
// The most elements one array may hold on this target: its byte count must fit ptrdiff_t, so that
// every offset into its storage is defined. 2^31-1 bytes (536870911 float32 elements) in wasm32,
// 2^63-1 bytes natively; memory usually runs out well before (then the op that asked throws).
constexpr std::int64_t kMaxArrayElements =
    static_cast<std::int64_t>(PTRDIFF_MAX / static_cast<std::ptrdiff_t>(sizeof(float)));
// The most dimensions an array may have (NumPy 2's limit). An array of 3 000 dimensions of 1
// overflowed the stack when printed (in WebAssembly), and no computation needs that many.
constexpr std::size_t kMaxDims = 64;
// Product of the dimensions (1 for a scalar shape []), computed without overflow. Throws
// asyncnd::Error for more than kMaxDims dimensions, a negative dimension, or when the array would
// hold more than kMaxArrayElements. Every op that makes an array checks its shape with it before
// queueing (reshape, which makes a view, checks the same).
std::int64_t shape_size(const Shape& shape);

namespace detail {
struct Chunk;  // storage + variable, shared by an array and its reshaped views
struct AutogradInfo;
}

// A handle to an array. Copies are cheap and share the same storage (like NumPy views); operations
// return new arrays and never modify their inputs, except the compound assignments (+= ...), which
// write the left-hand array in place. An operation only queues work: it validates its arguments
// (throwing asyncnd::Error at once for bad shapes or devices, queuing nothing) and returns. The
// storage is freed once the last handle is gone and every queued op that uses it has finished.
//
// Thread safety: like std::shared_ptr; distinct handles may be used from different threads, one
// handle must not be assigned while another thread uses it. A blocking read (to_vector, item,
// printing) waits for the writes pushed before it, then copies the values outside the engine: an
// in-place write (+=, ...) of the same storage that another thread pushes meanwhile races with
// the copy, which may then mix old and new values. Order such threads, as with any shared data.
class NDArray {
 public:
  NDArray() = default;  // an empty handle: any operation on it throws asyncnd::Error

  bool defined() const { return chunk_ != nullptr; }
  const Shape& shape() const { return shape_; }
  std::int64_t ndim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t size() const noexcept;  // number of elements
  Device device() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(size()) * sizeof(float); }
  // The engine variable that orders this array's reads and writes.
  const Var& var() const;

  // Blocking: waits until every queued write of this array has finished; rethrows an error of the
  // op that computed it (once). For a GPU array, also waits for the device to finish those writes
  // and throws asyncnd::Error with the device's error text if it failed.
  void wait_to_read() const;
  // Blocking: waits, then copies the values out (row-major); a GPU array through a device-to-host
  // copy.
  std::vector<float> to_vector() const;
  // Blocking: the single value of an array of size 1. Throws if size() != 1.
  float item() const;

  // Raw storage; does not wait. Read it only after wait_to_read(); never write it. For a GPU
  // array this is a device pointer, which the CPU must not dereference.
  const float* unsafe_data() const;

  // Non-blocking views and copies.
  NDArray reshape(Shape shape) const;  // shares storage; one dimension may be -1
  NDArray transpose() const;           // 2-D: a new [n,m] array
  NDArray T() const { return transpose(); }
  NDArray copy() const;
  NDArray copy_to(Device device) const;

  // Non-blocking reductions and maps, also available as nd:: functions.
  NDArray sum() const;
  NDArray sum(int axis, bool keepdims = false) const;
  NDArray mean() const;
  NDArray mean(int axis, bool keepdims = false) const;
  NDArray max() const;
  NDArray max(int axis, bool keepdims = false) const;
  NDArray norm() const;
  // The unary ops of the op table (asyncnd/detail/op_table.h) as methods, nd::<op>(*this):
  // x.neg(), x.exp(), x.log(), x.sqrt(), x.relu(), x.sigmoid(), x.tanh(), x.abs().
#define ASYNCND_NDARRAY_UNARY(name, Name) NDArray name() const;
  ASYNCND_UNARY_OPS(ASYNCND_NDARRAY_UNARY)
#undef ASYNCND_NDARRAY_UNARY
  NDArray pow(float exponent) const;
  NDArray pow(const NDArray& exponent) const;

  // In place (writes this array's storage; shapes must broadcast to this array's shape).
  NDArray& operator+=(const NDArray& other);
  NDArray& operator-=(const NDArray& other);
  NDArray& operator*=(const NDArray& other);
  NDArray& operator/=(const NDArray& other);
  NDArray& operator+=(float v);
  NDArray& operator-=(float v);
  NDArray& operator*=(float v);
  NDArray& operator/=(float v);

  // Autograd (asyncnd/autograd.h says more). Not thread safe for one array: record, attach and
  // run backward on a given graph from one thread at a time.
  // Marks this array (and every handle to it) as a leaf whose gradient backward() computes, and
  // gives it a fresh gradient buffer of zeros (queued). Throws asyncnd::Error for an empty array
  // or one computed while recording (attach inputs, not results).
  void attach_grad();
  // The gradient buffer (shares storage: later backward calls write into it in place). Throws
  // asyncnd::Error if attach_grad() was never called on this array.
  NDArray grad() const;
  // Queues the gradients of this array (which must have one element) with respect to every
  // attached leaf it was computed from while recording, then frees the recorded graph. Returns
  // at once (the gradients are computed by the engine like any op). Throws asyncnd::Error,
  // queuing nothing, if the array has more than one element, was not recorded from an attached
  // leaf, or its graph was freed by an earlier backward.
  void backward() const;
  // The same with a head gradient of this array's shape (dL/dthis). retain_graph keeps the
  // graph for another backward.
  void backward(const NDArray& head_grad, bool retain_graph = false) const;

  // Internal: arrays are made by the functions in nd::.
  NDArray(std::shared_ptr<detail::Chunk> chunk, Shape shape)
      : chunk_(std::move(chunk)), shape_(std::move(shape)) {}
  const std::shared_ptr<detail::Chunk>& chunk() const { return chunk_; }
  // Internal: this array's autograd state (in its chunk, or its own for a reshaped view).
  detail::AutogradInfo& autograd_info() const;
  // Internal: the same, or null when autograd never touched this array (allocates nothing).
  const detail::AutogradInfo* autograd_info_if_any() const;
  // Internal: true when no other handle shares this array's autograd state.
  bool sole_autograd_owner() const {
    return view_ag_ ? view_ag_.use_count() == 1 : chunk_.use_count() == 1;
  }

 private:
  std::shared_ptr<detail::Chunk> chunk_;
  Shape shape_;
  std::shared_ptr<detail::AutogradInfo> view_ag_;  // set for reshaped views only
};

// Elementwise with NumPy broadcasting. Non-blocking.
NDArray operator+(const NDArray& a, const NDArray& b);
NDArray operator-(const NDArray& a, const NDArray& b);
NDArray operator*(const NDArray& a, const NDArray& b);
NDArray operator/(const NDArray& a, const NDArray& b);
NDArray operator+(const NDArray& a, float b);
NDArray operator-(const NDArray& a, float b);
NDArray operator*(const NDArray& a, float b);
NDArray operator/(const NDArray& a, float b);
NDArray operator+(float a, const NDArray& b);
NDArray operator-(float a, const NDArray& b);
NDArray operator*(float a, const NDArray& b);
NDArray operator/(float a, const NDArray& b);
NDArray operator-(const NDArray& a);

// Blocking: waits for the values, then prints them NumPy-style, e.g. "[[3, 3]] <NDArray 1x2 cpu(0)>".
std::ostream& operator<<(std::ostream& os, const NDArray& a);

}  // namespace asyncnd
