// Autograd: record the ops applied to arrays that need gradients, then compute the gradients
// with backward(). The gradient ops are queued through the engine like any other op: backward()
// returns at once and never waits.
//
//   NDArray x = nd::random_normal({3, 4});
//   x.attach_grad();                        // x is a leaf: backward will fill x.grad()
//   NDArray y;
//   { autograd::Record rec; y = (x * x).sum(); }
//   y.backward();                           // queued: x.grad() will hold 2 * x
//
// What is recorded: every differentiable op of nd:: (the elementwise ops and their scalar forms,
// dot/matmul, transpose, reshape, broadcast_to, sum/mean/max, norm, copy_to) called on this thread
// while a Record is alive, when at least one input needs a gradient (an attached leaf, or an array
// computed from one while recording). Creation ops and random numbers are constants.
//
// Order: among the gradient ops that are ready at once, a leaf's gradient goes first when the
// leaf is used by one op only (a layer's weight or bias): its ops are queued at an engine
// priority, and a matrix product writes it straight into grad(), without a copy. Nothing else in
// backward waits for those gradients, but whatever reads grad() does (nn::DistributedTrainer's
// allreduce), and can then run beside the rest of backward. The values are the same either way.
//
// Memory: the recorded graph belongs to the arrays it computed. Each result holds the op that
// made it, which holds its inputs; backward() frees the graph it walked (unless retain_graph), so
// after backward nothing recorded keeps an array alive. A graph never backpropagated is freed with
// its last result handle.
//
// Gradient conventions: relu'(0) = 0; max sends the gradient to every element equal to the maximum
// (ties all get it, as MXNet does; a NaN maximum's gradient goes to the NaNs, as PyTorch's); pow's
// d(a^b)/da is 0 where b == 0 and its d(a^b)/db is 0 where a == 0 and b >= 0 (PyTorch's values
// where the formulas give 0 * inf), other infinities stay (d(x^0.5)/dx at 0); norm's gradient x/|x|
// is NaN at x = 0; gradients through broadcasting are summed back to the input's shape.
// Higher-order gradients are not supported: backward itself is never recorded.
//
// In place: the graph keeps arrays, not copies of their values. An in-place update (+=, ...,
// nn::SGD's step) of an array that takes part in a recording throws while recording, through a
// reshaped view of it too, and so does an in-place update that reads one. Any other in-place
// write of an array whose values a recorded gradient reads (after the Record scope, of an array
// that needs no gradient, through another view of its storage) is counted, and backward() then
// throws before queuing anything, naming the op and the array ("the gradient of mul reads its
// input 2 [3], which was changed in place after it was recorded"), as PyTorch's version counters
// do. A write the gradient does not read (an operand of add) is fine. Record, backward, then
// update: the order a training loop uses.
//
// Thread safety: recording is per thread. One graph must be built and backpropagated from one
// thread at a time.
#pragma once

#include <utility>

#include "asyncnd/ndarray.h"

namespace asyncnd {
namespace autograd {

// Is this thread recording?
bool is_recording();
// Turns this thread's recording on or off; returns the previous state (for bindings that cannot
// use the RAII scopes, e.g. JavaScript's nd.autograd.record(fn)).
bool set_recording(bool on);

}  // namespace autograd

namespace detail {
// Sets this thread's recording flag for its lifetime, then restores the previous state.
class RecordingScope {
 public:
  explicit RecordingScope(bool on) : prev_(autograd::set_recording(on)) {}
  ~RecordingScope() { autograd::set_recording(prev_); }
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  bool prev_;
};
}  // namespace detail

namespace autograd {

// RAII scope: records on this thread while alive; restores the previous state when destroyed.
class Record : detail::RecordingScope {
 public:
  Record() : RecordingScope(true) {}
};

// RAII scope: stops recording on this thread while alive (e.g. to evaluate inside a Record).
class Pause : detail::RecordingScope {
 public:
  Pause() : RecordingScope(false) {}
};

// Runs f() while recording and returns what it returns.
template <class F>
auto record(F&& f) -> decltype(f()) {
  Record rec;
  return std::forward<F>(f)();
}

// head.backward() / head.backward(head_grad, retain_graph): see NDArray. An empty head_grad means
// "head has one element; its gradient is 1".
void backward(const NDArray& head, const NDArray& head_grad = {}, bool retain_graph = false);

}  // namespace autograd
}  // namespace asyncnd
