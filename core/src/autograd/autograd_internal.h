// Autograd internals: what each array records (AutogradInfo, in its Chunk or in a reshaped view's
// handle), the graph node an op leaves behind while recording, and the hook every differentiable
// op calls after queuing its kernel. The public side is asyncnd/autograd.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "asyncnd/detail/op_table.h"
#include "asyncnd/device.h"
#include "asyncnd/ndarray.h"

namespace asyncnd {
namespace nn {
class Parameter;
}  // namespace nn
namespace detail {

struct Chunk;

// Which op produced an array: selects the gradient formula (autograd_grads.cpp, a switch without
// default: -Wswitch reports an op without one). Derived from the op table: a binary op has three
// forms (array-array, array-scalar, scalar-array).
enum class GradOp {
#define ASYNCND_GRAD_ONE(name, Name) k##Name,
#define ASYNCND_GRAD_BINARY(name, Name) k##Name, k##Name##Scalar, kR##Name##Scalar,
  ASYNCND_UNARY_OPS(ASYNCND_GRAD_ONE) ASYNCND_BINARY_OPS(ASYNCND_GRAD_BINARY)
      ASYNCND_REDUCE_OPS(ASYNCND_GRAD_ONE) ASYNCND_OTHER_OPS(ASYNCND_GRAD_ONE)
#undef ASYNCND_GRAD_ONE
#undef ASYNCND_GRAD_BINARY
};

// The attributes a gradient needs beyond the inputs' shapes.
struct GradAttrs {
  float scalar = 0.0f;    // the scalar operand of the scalar forms
  bool all = true;        // reductions: over all elements, or over `axis`
  int axis = 0;           // normalised (non-negative)
  bool trans_a = false;   // dot
  bool trans_b = false;
};

// One recorded op. Holds its inputs (so the graph, and the values the gradient needs, stay alive
// until backward frees it) and a weak reference to its output: the output owns the node, so a
// strong one would be a cycle.
struct Node {
  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Releases a long chain of nodes iteratively: the default, recursive destruction (node, input
  // array, its node, ...) would overflow the stack for a graph of ~100 000 ops.
  ~Node();

  GradOp op;
  GradAttrs attrs;
  std::vector<NDArray> inputs;
  std::vector<char> needs;  // per input: does a gradient flow to it
  std::weak_ptr<Chunk> out_chunk;
  Shape out_shape;
  // Chunk::version of each input's storage (an op has one or two inputs) and of the output's,
  // when the op was recorded.
  std::uint32_t versions[2] = {0, 0};
  std::uint32_t out_version = 0;
};

// Per array: its autograd state. For an array made by an op it lives in the Chunk; a reshaped
// view (which shares the chunk) has its own, held by its handles.
struct AutogradInfo {
  std::shared_ptr<Node> node;  // the op that computed it while recording; null for a leaf
  NDArray grad;                // attach_grad's buffer
  bool requires_grad = false;  // attach_grad was called
  bool graph_freed = false;    // backward freed the graph that computed it
};

// The recording flag of this thread.
extern thread_local bool t_recording;

// Records out = op(inputs) when recording and some input needs a gradient.
NDArray record_op(GradOp op, NDArray out, std::initializer_list<const NDArray*> inputs,
                  const GradAttrs& attrs);

// The hook every differentiable op calls on its result: free when not recording. Always inlined:
// left out of line (as Emscripten's -O2 left it), the call may throw, and in WebAssembly each op
// then paid a JavaScript exception trampoline for it (docs/architecture.md).
__attribute__((always_inline)) inline NDArray recorded(GradOp op, NDArray out,
                                                      std::initializer_list<const NDArray*> inputs,
                                                      const GradAttrs& attrs = {}) {
  if (!t_recording) return out;
  return record_op(op, std::move(out), inputs, attrs);
}

// Throws asyncnd::Error naming `op` when recording and `target` (written in place) or `other`
// (may be null) takes part in a recorded graph: autograd cannot see in-place updates.
void check_inplace_allowed(const char* op, const NDArray& target, const NDArray* other);

// "" for a finite learning rate, else what is wrong with it; check_learning_rate throws it as an
// asyncnd::Error naming `op` (nn::SGD, and nn::DistributedTrainer in asyncnd::dist).
std::string learning_rate_problem(float lr);
void check_learning_rate(const char* op, float lr);

// The public op a node records, for messages ("mul" for kMul, kMulScalar and kRMulScalar).
const char* grad_op_name(GradOp op);

// Which values the gradient of `node` reads: bit i for input i, kReadsOutput for the output.
// Backward refuses a node whose read arrays were written in place since it was recorded.
constexpr unsigned kReadsOutput = 1u << 2;
unsigned grad_reads(const Node& node);

// The input gradients of `node` given the gradient `g` of its output; undefined arrays where no
// gradient flows. Queues ops like any other; never blocks.
// `want`: per input, whether to compute its gradient (default: node.needs).
std::vector<NDArray> node_backward(const Node& node, const NDArray& g,
                                   const std::vector<char>* want = nullptr);
// The gradient of a kDot node's input `i` given `g`, written into `into` (of that input's shape
// and device) by one GEMM (dot_into).
void dot_grad_into(const Node& node, std::size_t i, const NDArray& g, NDArray& into);

// out = op(a) op(b), as dot(a, b, ta, tb) computes it, into an existing array of that shape on
// a's device: one GEMM on the stored operands (ops_linalg.cpp). Non-blocking, not recorded; the
// shapes are the caller's to check.
void dot_into(NDArray& out, const NDArray& a, const NDArray& b, bool ta, bool tb);

// The engine priority at which backward queues the gradient of a parameter (a leaf with
// attach_grad) used once: ahead of the ops that carry backward on to the layers below, so that
// what waits for it (a DistributedTrainer's allreduce) can start while they run. Below
// dist::kCollectivePriority.
inline constexpr int kParameterGradPriority = 1;

// Internal ops used by the gradients and nn (ops_elementwise.cpp). Non-blocking, not recorded.
NDArray relu_grad(const NDArray& g, const NDArray& x);  // g where x > 0
NDArray eq_mask(const NDArray& a, const NDArray& b);    // 1 where a == b or both NaN (broadcast)
NDArray pow_grad_base(const NDArray& a, const NDArray& b);  // d(a^b)/da (kernels::PowGradBaseOp)
NDArray pow_grad_exp(const NDArray& a, const NDArray& b);   // d(a^b)/db (kernels::PowGradExpOp)
void assign(NDArray& target, const NDArray& src);       // target = src in place (broadcast)
void sgd_update(NDArray& w, const NDArray& g, float alpha);  // w -= alpha * g in place
// Each parameter once, at its first place (nn.cpp): a shared layer's gradient is already the sum
// over its uses, so a trainer that listed it twice would apply it twice.
std::vector<nn::Parameter> unique_parameters(std::vector<nn::Parameter> params);

// Stale gradients, Gluon's Trainer rule (nn::SGD, nn::DistributedTrainer; nn.cpp): a gradient
// nothing wrote since the trainer was made or last stepped would be applied again. Written means
// its buffer's write count (Chunk::version, bumped by every in-place write, backward's included)
// moved since record(); a buffer not recorded yet (the first step, or a fresh one from set_data)
// counts as written once ever written (a fresh gradient is zeros, count 0).
class StaleGradients {
 public:
  // Per gradient (in the trainer's parameter order): 1 if stale.
  std::vector<char> find(const std::vector<NDArray>& grads) const;
  // After a step has queued its writes: what each gradient is now.
  void record(const std::vector<NDArray>& grads);
  // "" if none is stale, else the refusal's text after "op: ", naming the first stale parameter
  // and how many more, ending with `tail` (what to do instead).
  static std::string problem(const std::vector<nn::Parameter>& params,
                             const std::vector<char>& stale, const std::string& tail);

 private:
  struct Seen {
    std::weak_ptr<Chunk> chunk;
    std::uint32_t version = 0;
  };
  std::vector<Seen> seen_;
};

}  // namespace detail
}  // namespace asyncnd
