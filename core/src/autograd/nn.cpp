// nn: parameters, Dense, Sequential, L2Loss, SGD and the chapter's data iterator, built on the
// nd:: ops (so autograd records them) and on two in-place helpers (assign, sgd_update).
#include "asyncnd/nn.h"

#include <atomic>
#include <cmath>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "asyncnd/autograd.h"
#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"
#include "ops/ops_common.h"

namespace asyncnd {

namespace detail {
// SGD's, and DistributedTrainer's (asyncnd::dist).
std::string learning_rate_problem(float lr) {
  return std::isfinite(lr) ? "" : "the learning rate must be finite, got " + std::to_string(lr);
}
void check_learning_rate(const char* op, float lr) {
  const std::string problem = learning_rate_problem(lr);
  if (!problem.empty()) throw Error(std::string(op) + ": " + problem);
}
std::vector<char> StaleGradients::find(const std::vector<NDArray>& grads) const {
  std::vector<char> stale(grads.size(), 0);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const std::shared_ptr<Chunk>& c = grads[i].chunk();
    const std::uint32_t v = c->version.load(std::memory_order_relaxed);
    const bool known = i < seen_.size() && seen_[i].chunk.lock() == c;
    stale[i] = known ? v == seen_[i].version : v == 0;
  }
  return stale;
}

void StaleGradients::record(const std::vector<NDArray>& grads) {
  seen_.resize(grads.size());
  for (std::size_t i = 0; i < grads.size(); ++i)
    seen_[i] = {grads[i].chunk(), grads[i].chunk()->version.load(std::memory_order_relaxed)};
}

std::string StaleGradients::problem(const std::vector<nn::Parameter>& params,
                                    const std::vector<char>& stale, const std::string& tail) {
  std::size_t n = 0, first = 0;
  for (std::size_t i = 0; i < stale.size(); ++i)
    if (stale[i] && n++ == 0) first = i;
  if (n == 0) return {};
  const nn::Parameter& p = params[first];
  return "the gradient of '" + p.name() + "' " + shape_str(p.shape()) +
         (n > 1 ? " (and of " + std::to_string(n - 1) + " more)" : "") +
         " was not written since this trainer was made or last stepped: no backward reached it, "
         "and updating with the old one would repeat the last update (Gluon's rule); " + tail;
}

std::vector<nn::Parameter> unique_parameters(std::vector<nn::Parameter> params) {
  std::vector<nn::Parameter> out;
  out.reserve(params.size());
  for (nn::Parameter& p : params) {
    bool seen = false;
    for (const nn::Parameter& q : out) seen = seen || q.same_as(p);
    if (!seen) out.push_back(std::move(p));
  }
  return out;
}
}  // namespace detail

namespace nn {

// ---- Parameter ----------------------------------------------------------------------------

struct Parameter::State {
  std::string name;
  Shape shape;
  NDArray data;
};

Parameter::Parameter(std::string name, Shape shape) : s_(std::make_shared<State>()) {
  s_->name = std::move(name);
  s_->shape = std::move(shape);
}

namespace {
const Parameter::State& state_of(const std::shared_ptr<Parameter::State>& s, const char* op) {
  if (!s) throw Error(std::string(op) + ": parameter handle is empty");
  return *s;
}

// What is wrong with drawing a weight from `init` ("" if nothing): asked before the draw, so that
// the error names the layer or parameter, not random_uniform or random_normal. Xavier's scale
// comes from the shape and is always drawable.
std::string init_problem(const Init& init) {
  if (init.kind == Init::Kind::kXavier) return "";
  const float s = init.scale;
  if (!(std::isfinite(s) && s >= 0.0f))
    return "the initialiser's scale must be finite and >= 0, got " + detail::num_text(s);
  const std::string draw = init.kind == Init::Kind::kNormal
                               ? detail::random_normal_problem(0.0f, s)
                               : detail::random_uniform_problem(-s, s);
  if (draw.empty()) return "";
  return "the initialiser's scale " + detail::num_text(s) + " is too large to draw in float (" +
         (init.kind == Init::Kind::kNormal ? "random_normal " : "random_uniform ") + draw + ")";
}
}  // namespace

const std::string& Parameter::name() const { return state_of(s_, "Parameter::name").name; }
const Shape& Parameter::shape() const { return state_of(s_, "Parameter::shape").shape; }
bool Parameter::initialized() const { return s_ && s_->data.defined(); }

NDArray Parameter::data() const {
  const State& s = state_of(s_, "Parameter::data");
  if (!s.data.defined())
    throw Error("Parameter::data: parameter '" + s.name + "' " + shape_str(s.shape) +
                " is not initialised yet (its input size is learnt at the first forward pass)");
  return s.data;
}

NDArray Parameter::grad() const { return data().grad(); }

void Parameter::initialize(const Shape& shape, const Init& init, Device device) {
  static const char* kOp = "Parameter::initialize";
  state_of(s_, kOp);
  bool fits = shape.size() == s_->shape.size();
  for (std::size_t d = 0; fits && d < shape.size(); ++d)
    fits = shape[d] > 0 && (s_->shape[d] == 0 || s_->shape[d] == shape[d]);
  if (!fits)
    throw Error(std::string(kOp) + ": parameter '" + s_->name + "' " + shape_str(s_->shape) +
                " cannot take the shape " + shape_str(shape));
  const bool is_bias = shape.size() == 1;
  const std::string problem = is_bias ? "" : init_problem(init);
  if (!problem.empty())
    throw Error(std::string(kOp) + ": parameter '" + s_->name + "': " + problem);
  autograd::Pause pause;
  NDArray v;
  if (is_bias) {
    v = nd::zeros(shape, device);
  } else if (init.kind == Init::Kind::kNormal) {
    v = nd::random_normal(shape, 0.0f, init.scale, device);
  } else {
    float s = init.scale;
    if (init.kind == Init::Kind::kXavier) {
      // fan_out = shape[0] (units), fan_in = the rest.
      const double fan_out = static_cast<double>(shape[0]);
      const double fan_in = static_cast<double>(shape_size(shape)) / fan_out;
      s = static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
    }
    v = nd::random_uniform(shape, -s, s, device);
  }
  v.attach_grad();
  s_->shape = shape;
  s_->data = std::move(v);
}

void Parameter::set_data(const NDArray& values) {
  static const char* kOp = "Parameter::set_data";
  state_of(s_, kOp);
  detail::check_defined(kOp, values);
  // Deferred (data not made yet): the dimensions already known must match, 0 being unknown. A
  // Dense weight of any shape was taken here before, and the layer then ran with it.
  bool fits = values.shape().size() == s_->shape.size();
  for (std::size_t i = 0; fits && i < s_->shape.size(); ++i) {
    const bool known = s_->data.defined() || s_->shape[i] != 0;
    fits = !known || values.shape()[i] == s_->shape[i];
  }
  if (!fits)
    throw Error(std::string(kOp) + ": parameter '" + s_->name + "' has shape " +
                shape_str(s_->shape) +
                (s_->data.defined() ? "" : " (0: not known until the first forward pass)") +
                ", got values of shape " + shape_str(values.shape()));
  autograd::Pause pause;  // a copy, never part of a graph
  NDArray v = values.copy();
  v.attach_grad();
  s_->shape = v.shape();
  s_->data = std::move(v);
}

// ---- Block --------------------------------------------------------------------------------

struct Block::Impl {
  virtual ~Impl() = default;
  virtual NDArray forward(const NDArray& x) = 0;
  virtual void collect(std::vector<Parameter>& out) const = 0;
};

NDArray Block::operator()(const NDArray& x) const {
  if (!impl_) throw Error("Block: empty block handle");
  detail::check_defined("Block", x);
  return impl_->forward(x);
}

std::vector<Parameter> Block::parameters() const {
  std::vector<Parameter> out;
  if (impl_) impl_->collect(out);
  return detail::unique_parameters(std::move(out));
}

NDArray relu(const NDArray& x) { return nd::relu(x); }

// ---- Dense --------------------------------------------------------------------------------

namespace {

std::atomic<int> g_dense_count{0};  // names like Gluon's: dense0_weight, dense1_weight, ...

// [batch, rest...] as [batch, product of rest], also for an empty batch (where reshape's -1 is
// ambiguous, and the error named reshape rather than the layer).
NDArray flatten_batch(const NDArray& x, const char* op) {
  std::int64_t rest = 1;
  for (std::size_t d = 1; d < x.shape().size(); ++d) {
    // An empty batch may have other dimensions whose product overflows.
    if (__builtin_mul_overflow(rest, x.shape()[d], &rest)) {
      throw Error(std::string(op) + ": the dimensions after the batch's overflow int64: " +
                  shape_str(x.shape()));
    }
  }
  return x.reshape({x.shape()[0], rest});
}

struct DenseImpl : Block::Impl {
  std::int64_t units;
  std::string activation;
  Init init;
  Parameter weight, bias;

  NDArray forward(const NDArray& x_in) override {
    static const char* kOp = "Dense";
    if (x_in.ndim() < 1)
      throw Error(std::string(kOp) + ": expects a batch of inputs [batch, ...], got " +
                  shape_str(x_in.shape()));
    // Gluon flattens every axis but the first.
    NDArray x = x_in.ndim() == 2 ? x_in : flatten_batch(x_in, kOp);
    const std::int64_t in_units = x.shape()[1];
    if (!weight.initialized()) {
      if (in_units == 0)  // (the error came from Parameter::initialize, naming neither)
        throw Error(std::string(kOp) + ": cannot learn its input size from an input with no "
                    "features: " + shape_str(x_in.shape()));
      if (weight.shape()[1] != 0 && weight.shape()[1] != in_units)
        throw Error(std::string(kOp) + ": layer made for " + std::to_string(weight.shape()[1]) +
                    " inputs, got " + shape_str(x_in.shape()));
      weight.initialize({units, in_units}, init, x.device());
    } else if (weight.shape()[1] != in_units) {
      throw Error(std::string(kOp) + ": layer has " + std::to_string(weight.shape()[1]) +
                  " inputs (weight " + shape_str(weight.shape()) + "), got " +
                  shape_str(x_in.shape()));
    }
    // Apart from the weight: either may have been given by set_data, the other still deferred.
    if (bias.defined() && !bias.initialized()) bias.initialize({units}, init, x.device());
    NDArray y = nd::dot(x, weight.data(), false, true);
    if (bias.initialized()) y = y + bias.data();
    if (activation == "relu") return nd::relu(y);
    if (activation == "sigmoid") return nd::sigmoid(y);
    if (activation == "tanh") return nd::tanh(y);
    return y;
  }
  void collect(std::vector<Parameter>& out) const override {
    out.push_back(weight);
    if (bias.defined()) out.push_back(bias);
  }
};

// A network's blocks, walked with a stack of their own rather than by recursion: networks
// nested thousands deep (legal: add refuses only cycles) overflowed the stack in forward,
// parameters() and the destructor (in WebAssembly at about 2 000 levels, natively further).
struct SequentialImpl : Block::Impl {
  std::vector<std::shared_ptr<Block::Impl>> blocks;

  // Calls leaf(impl) for each block that is not a network, in order, through nested networks.
  template <typename F>
  void each_leaf(F&& leaf) const {
    std::vector<std::pair<const SequentialImpl*, std::size_t>> stack{{this, 0}};
    while (!stack.empty()) {
      const SequentialImpl* s = stack.back().first;
      const std::size_t i = stack.back().second++;
      if (i == s->blocks.size()) {
        stack.pop_back();
      } else if (const auto* inner = dynamic_cast<const SequentialImpl*>(s->blocks[i].get())) {
        stack.emplace_back(inner, 0);
      } else {
        leaf(*s->blocks[i]);
      }
    }
  }
  NDArray forward(const NDArray& x) override {
    NDArray h = x;
    each_leaf([&h](Block::Impl& b) { h = b.forward(h); });
    return h;
  }
  void collect(std::vector<Parameter>& out) const override {
    each_leaf([&out](const Block::Impl& b) { b.collect(out); });
  }
  // The networks that die with this one are emptied one by one, as Node::~Node does.
  ~SequentialImpl() override {
    std::vector<std::shared_ptr<Block::Impl>> pending = std::move(blocks);
    while (!pending.empty()) {
      std::shared_ptr<Block::Impl> b = std::move(pending.back());
      pending.pop_back();
      if (b.use_count() != 1) continue;  // still held elsewhere: not dying now
      if (auto* inner = dynamic_cast<SequentialImpl*>(b.get())) {
        for (auto& c : inner->blocks) pending.push_back(std::move(c));
        inner->blocks.clear();
      }
    }  // each b dies here with no blocks left: no recursion
  }
};

}  // namespace

Dense::Dense(std::int64_t units, const std::string& activation, bool use_bias,
             std::int64_t in_units, Init init) {
  static const char* kOp = "Dense";
  if (units <= 0) throw Error(std::string(kOp) + ": units must be positive, got " + std::to_string(units));
  if (in_units < 0)
    throw Error(std::string(kOp) + ": in_units must be >= 0 (0 = deferred), got " +
                std::to_string(in_units));
  if (!activation.empty() && activation != "relu" && activation != "sigmoid" &&
      activation != "tanh")
    throw Error(std::string(kOp) + ": unknown activation '" + activation +
                "' (expected \"\", \"relu\", \"sigmoid\" or \"tanh\")");
  // Checked here, not only when a deferred weight is made at the first forward pass.
  const std::string problem = init_problem(init);
  if (!problem.empty()) throw Error(std::string(kOp) + ": " + problem);
  auto d = std::make_shared<DenseImpl>();
  const std::string prefix = "dense" + std::to_string(g_dense_count++) + "_";
  d->units = units;
  d->activation = activation;
  d->init = init;
  d->weight = Parameter(prefix + "weight", {units, in_units});
  if (use_bias) d->bias = Parameter(prefix + "bias", {units});
  if (in_units > 0) {
    d->weight.initialize({units, in_units}, init);
    if (use_bias) d->bias.initialize({units}, init);
  }
  impl_ = std::move(d);
}

// A moved-from Dense or Sequential has no Impl: its calls throw, naming the call, instead of
// dereferencing nothing.
static void check_block_handle(bool defined, const char* op) {
  if (!defined) throw Error(std::string(op) + ": empty block handle (moved from)");
}

Parameter Dense::weight() const {
  check_block_handle(defined(), "Dense::weight");
  return static_cast<DenseImpl&>(*impl_).weight;
}
Parameter Dense::bias() const {
  check_block_handle(defined(), "Dense::bias");
  return static_cast<DenseImpl&>(*impl_).bias;
}

Sequential::Sequential() : Block(std::make_shared<SequentialImpl>()) {}

Sequential& Sequential::add(const Block& block) {
  check_block_handle(defined(), "Sequential::add");
  if (!block.defined()) throw Error("Sequential::add: empty block handle");
  // A network inside itself made forward and parameters() recurse until the stack overflowed.
  // Each block is looked at once, however many networks share it.
  std::vector<const Impl*> todo{block.impl_.get()};
  std::unordered_set<const Impl*> seen;
  while (!todo.empty()) {
    const Impl* b = todo.back();
    todo.pop_back();
    if (b == impl_.get()) {
      throw Error("Sequential::add: the block is this network or contains it (a cycle): a "
                  "network cannot contain itself");
    }
    if (!seen.insert(b).second) continue;
    if (const auto* s = dynamic_cast<const SequentialImpl*>(b)) {
      for (const auto& c : s->blocks) todo.push_back(c.get());
    }
  }
  static_cast<SequentialImpl&>(*impl_).blocks.push_back(block.impl_);
  return *this;
}

std::size_t Sequential::size() const {
  check_block_handle(defined(), "Sequential::size");
  return static_cast<SequentialImpl&>(*impl_).blocks.size();
}

// ---- L2Loss -------------------------------------------------------------------------------

L2Loss::L2Loss(float weight) : weight_(weight) {
  if (!std::isfinite(weight))
    throw Error("L2Loss: weight must be finite, got " + detail::num_text(weight));
}

NDArray L2Loss::operator()(const NDArray& pred, const NDArray& label) const {
  static const char* kOp = "L2Loss";
  detail::check_defined(kOp, pred);
  detail::check_defined(kOp, label);
  if (pred.ndim() < 1)
    throw Error(std::string(kOp) + ": expects predictions with a batch axis, got " +
                shape_str(pred.shape()));
  NDArray lab = label;
  if (label.shape() != pred.shape()) {
    if (label.size() == pred.size()) {
      lab = label.reshape(pred.shape());
    } else if (nd::broadcast_shapes(pred.shape(), label.shape(), kOp) != pred.shape()) {
      // (broadcast_shapes itself throws, naming both shapes, when they do not broadcast at all)
      throw Error(std::string(kOp) + ": label " + shape_str(label.shape()) +
                  " does not broadcast to the prediction's shape " + shape_str(pred.shape()));
    }
  }
  NDArray d = pred - lab;
  NDArray l = (d * d) * (0.5f * weight_);
  // Mean over every axis but the first: one value per example.
  if (l.ndim() == 1) return l;
  return nd::mean(flatten_batch(l, kOp), 1);
}

// ---- SGD ----------------------------------------------------------------------------------

SGD::SGD(std::vector<Parameter> params, float learning_rate)
    : lr_(learning_rate), stale_(std::make_shared<detail::StaleGradients>()) {
  detail::check_learning_rate("SGD", learning_rate);
  for (const Parameter& p : params)
    if (!p.defined())
      throw Error("SGD: empty parameter handle in the list");
  params_ = detail::unique_parameters(std::move(params));
}

void SGD::set_learning_rate(float lr) {
  detail::check_learning_rate("SGD::set_learning_rate", lr);
  lr_ = lr;
}

void SGD::step(std::int64_t batch_size, bool ignore_stale_grad) {
  static const char* kOp = "SGD::step";
  if (batch_size <= 0)
    throw Error(std::string(kOp) + ": batch_size must be positive, got " +
                std::to_string(batch_size));
  std::vector<NDArray> w, g;
  for (const Parameter& p : params_) {
    if (!p.initialized())
      throw Error(std::string(kOp) + ": parameter '" + p.name() + "' " + shape_str(p.shape()) +
                  " is not initialised yet: run a forward pass first");
    w.push_back(p.data());
    g.push_back(p.grad());
  }
  // An update of weights a recording reads would change what its backward reads, as w -= ...
  // would: refused the same way, before any weight changes (the update itself is not recorded).
  for (const NDArray& wi : w) detail::check_inplace_allowed(kOp, wi, nullptr);
  const std::vector<char> stale = stale_->find(g);
  const std::string problem = detail::StaleGradients::problem(
      params_, stale,
      "step with ignore_stale_grad (JavaScript: { ignoreStaleGrad: true }) to skip such "
      "parameters");
  if (!problem.empty() && !ignore_stale_grad) throw Error(std::string(kOp) + ": " + problem);
  autograd::Pause pause;  // an update is never part of a graph
  const float alpha = lr_ / static_cast<float>(batch_size);
  for (std::size_t i = 0; i < w.size(); ++i)
    if (!stale[i]) detail::sgd_update(w[i], g[i], alpha);
  stale_->record(g);
}

// ---- DataIter -----------------------------------------------------------------------------

DataIter::DataIter(int num_batches, std::int64_t batch_size, std::int64_t features,
                   Device device)
    : num_batches_(num_batches),
      batch_size_(batch_size),
      features_(features),
      device_(device) {
  if (num_batches < 0 || batch_size <= 0 || features <= 0)
    throw Error("DataIter: need num_batches >= 0, batch_size > 0 and features > 0, got " +
                std::to_string(num_batches) + ", " + std::to_string(batch_size) + ", " +
                std::to_string(features));
}

bool DataIter::next(Batch& out) {
  const auto now = std::chrono::steady_clock::now();
  if (given_ == 0) start_ = now;
  if (given_ >= num_batches_) return false;
  out.X = nd::random_normal({batch_size_, features_}, 0.0f, 1.0f, device_);
  out.y = nd::ones({batch_size_}, device_);
  ++given_;
  handout_s_.push_back(std::chrono::duration<double>(now - start_).count());
  return true;
}

}  // namespace nn
}  // namespace asyncnd
