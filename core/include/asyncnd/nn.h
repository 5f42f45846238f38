// nn: enough of a neural-network layer (Gluon-like) for the chapter's MLP: parameters with
// gradients, Dense, Sequential, relu, L2Loss, the SGD trainer, and the chapter's data iterator.
// Every type is a value-semantic handle (copies share the same layer or parameter), so nothing
// needs freeing by hand and bindings (Embind) can hold them. Nothing here blocks unless it says
// so: forward passes, losses and trainer steps queue ops through the engine.
//
//   nn::Sequential net;
//   net.add(nn::Dense(2048, "relu"));
//   net.add(nn::Dense(1));
//   nn::L2Loss loss;
//   nn::SGD trainer(net.parameters(), 0.005f);
//   NDArray l;
//   { autograd::Record rec; l = loss(net(X), y).sum(); }  // the sum too is recorded
//   l.backward();                       // (or keep l per example: l.backward(nd::ones(l.shape())))
//   trainer.step(X.shape()[0]);
//
// Thread safety: a network, its parameters and its trainer are used from one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "asyncnd/ndarray.h"

namespace asyncnd {
namespace detail {
class StaleGradients;  // autograd_internal.h
}  // namespace detail
namespace nn {

// How a weight is initialised. Biases (1-D parameters) always start at zero. The values come from nd::random_*,
// so nd::seed() fixes them.
struct Init {
  enum class Kind { kUniform, kNormal, kXavier };
  Kind kind = Kind::kUniform;
  float scale = 0.07f;  // uniform: U(-scale, scale); normal: N(0, scale); xavier: unused
  // Gluon's default (net.initialize()): U(-0.07, 0.07).
  static Init uniform(float scale = 0.07f) { return {Kind::kUniform, scale}; }
  static Init normal(float sigma = 0.01f) { return {Kind::kNormal, sigma}; }
  // Glorot uniform: U(-s, s) with s = sqrt(6 / (fan_in + fan_out)).
  static Init xavier() { return {Kind::kXavier, 0.0f}; }
};

// A named, trainable array with a gradient. Its data may be created later (deferred
// initialisation: a Dense layer learns its input size at the first forward pass); until then
// data() and grad() throw.
class Parameter {
 public:
  Parameter() = default;  // empty handle
  Parameter(std::string name, Shape shape);
  bool defined() const { return s_ != nullptr; }
  const std::string& name() const;
  // The shape; dimensions still unknown (deferred) are 0.
  const Shape& shape() const;
  bool initialized() const;
  // The values. Throws asyncnd::Error if not initialised yet (run a forward pass first).
  NDArray data() const;
  // The gradient buffer (written by backward). Throws like data().
  NDArray grad() const;
  // Makes the data on `device`: `shape` must fill the unknown dimensions. Attaches the gradient.
  // Queued.
  void initialize(const Shape& shape, const Init& init, Device device = {});
  // Replaces the values and attaches a fresh gradient. The values must have the parameter's
  // shape; while its data is deferred, its number of dimensions and every dimension already
  // known (set_data then initialises it). Throws asyncnd::Error naming both shapes otherwise.
  void set_data(const NDArray& values);
  // Whether both handles are the same parameter (copies of a handle, a layer added twice).
  bool same_as(const Parameter& other) const { return s_ == other.s_; }

  struct State;  // internal

 private:
  std::shared_ptr<State> s_;
};

// A layer or a network: a handle; copies share the same layer.
class Block {
 public:
  Block() = default;  // empty handle
  bool defined() const { return impl_ != nullptr; }
  // Queues the forward pass. Recorded by autograd when called inside a Record. Throws
  // asyncnd::Error for an input of the wrong shape.
  NDArray operator()(const NDArray& x) const;
  NDArray forward(const NDArray& x) const { return (*this)(x); }
  // Every parameter, in order (Dense: weight, then bias), each once: a layer added twice (its
  // weights shared) gives its parameters at its first place. Parameters whose data is deferred
  // are included: a trainer made now sees them once they are initialised.
  std::vector<Parameter> parameters() const;

  struct Impl;
  explicit Block(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 protected:
  friend class Sequential;  // add() looks inside the block it is given, for a cycle
  std::shared_ptr<Impl> impl_;
};

// y = activation(flatten(x) W^T + b), W of shape [units, in_units] (Gluon's layout), b of shape
// [units]. in_units = 0 defers the weight's creation to the first forward pass, which makes the
// parameters on the input's device (so a network fed arrays on gpu(0) trains there); a layer made
// with in_units > 0 has them on the CPU at once (Parameter::set_data moves them). activation: ""
// (none) or "relu", "sigmoid", "tanh".
class Dense : public Block {
 public:
  explicit Dense(std::int64_t units, const std::string& activation = "", bool use_bias = true,
                 std::int64_t in_units = 0, Init init = Init{});
  Parameter weight() const;
  Parameter bias() const;  // empty handle when use_bias is false
};

// Applies its blocks in order.
class Sequential : public Block {
 public:
  Sequential();
  // Appends a block (shared, not copied). Returns *this for chaining. Throws asyncnd::Error for
  // an empty handle, and for this network or a network that contains it (a cycle).
  Sequential& add(const Block& block);
  std::size_t size() const;
};

// The activation function as a free function (nd::relu).
NDArray relu(const NDArray& x);

// Gluon's L2Loss: 0.5 * (pred - label)^2 averaged over every axis but the first, one value per
// example ([batch]). label is reshaped to pred's shape when their sizes match (a [N] label with
// a [N,1] prediction), else must broadcast to it.
class L2Loss {
 public:
  // Throws asyncnd::Error for a weight that is not finite (NaN gave NaN losses).
  explicit L2Loss(float weight = 1.0f);
  NDArray operator()(const NDArray& pred, const NDArray& label) const;

 private:
  float weight_;
};

// Plain SGD: w -= lr * grad / batch_size for every parameter, in place through the engine.
class SGD {
 public:
  // Throws asyncnd::Error for an empty parameter handle, and for a learning rate that is NaN or
  // infinite (as set_learning_rate does). A parameter listed twice is updated once per step.
  SGD(std::vector<Parameter> params, float learning_rate);
  // Queues one update per parameter; returns at once. Throws asyncnd::Error (queuing nothing) if
  // batch_size <= 0, a parameter is not initialised yet, or it is called inside an autograd
  // Record. Stale gradients, as Gluon's Trainer: a parameter whose gradient nothing wrote since
  // this trainer was made or last stepped (no backward reached it: a layer left out of this
  // step's graph, or a second step after one backward) would be updated again with the old
  // gradient, so step throws, naming it, queuing nothing; with ignore_stale_grad it skips such
  // parameters and updates the others. A gradient counts as written when backward (or the
  // program, in place) wrote it: a fresh one never was.
  void step(std::int64_t batch_size, bool ignore_stale_grad = false);
  float learning_rate() const { return lr_; }
  void set_learning_rate(float lr);
  const std::vector<Parameter>& parameters() const { return params_; }

 private:
  std::vector<Parameter> params_;
  float lr_;
  std::shared_ptr<detail::StaleGradients> stale_;  // what each gradient was at the last step
};

// The chapter's data_iter: num_batches batches of X ~ N(0, 1) [batch_size, features] and
// y = ones [batch_size], made on demand (queued like any op) on `device`. It records when each
// batch is handed out, counted from the first call to next(), and prints nothing: the chapter's
// "batch i, time t sec" is the caller's to print (examples/cpp/chapter.cpp does). Throws
// asyncnd::Error if num_batches < 0, batch_size <= 0 or features <= 0.
struct Batch {
  NDArray X, y;
};
class DataIter {
 public:
  explicit DataIter(int num_batches = 100, std::int64_t batch_size = 1024,
                    std::int64_t features = 512, Device device = {});
  // The next batch into `out`; false when all were handed out. Never blocks (it only queues).
  bool next(Batch& out);
  int num_batches() const { return num_batches_; }
  Device device() const { return device_; }
  // Seconds from the first next() to each hand-out, one per batch handed out so far.
  const std::vector<double>& handout_s() const { return handout_s_; }

 private:
  int num_batches_, given_ = 0;
  std::int64_t batch_size_, features_;
  Device device_;
  std::chrono::steady_clock::time_point start_;
  std::vector<double> handout_s_;
};

}  // namespace nn
}  // namespace asyncnd
