// Autograd: the recording flag, recording an op's node, attach_grad/grad, and backward (a walk
// of the recorded graph in reverse topological order that queues each node's gradient ops).
#include "asyncnd/autograd.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"
#include "ops/chunk.h"
#include "ops/ops_common.h"

namespace asyncnd {
namespace detail {

thread_local bool t_recording = false;

namespace {

bool needs_grad(const AutogradInfo* ag) {
  return ag && (ag->node || ag->requires_grad || ag->graph_freed);
}

}  // namespace

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  const auto release = [&pending](std::vector<NDArray>& ins) {
    // One handle at a time, each dying at the end of its step: an op that used an array twice
    // (y * y) holds two handles to it, and only the last is the sole owner. Checking all first and
    // then clearing took neither node, and the clear destroyed the chain recursively.
    while (!ins.empty()) {
      NDArray in = std::move(ins.back());
      ins.pop_back();
      // The last handle to an array: its node would die with it, recursively. Take it instead.
      if (in.defined() && in.sole_autograd_owner() && in.autograd_info_if_any()) {
        std::shared_ptr<Node>& n = in.autograd_info().node;
        if (n && n.use_count() == 1) pending.push_back(std::move(n));
      }
    }
  };
  release(inputs);
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    release(n->inputs);
  }  // each n dies here with no inputs left: no recursion
}

NDArray record_op(GradOp op, NDArray out, std::initializer_list<const NDArray*> inputs,
                  const GradAttrs& attrs) {
  auto node = std::make_shared<Node>();
  bool any = false;
  for (const NDArray* in : inputs) {
    const bool need = needs_grad(in->autograd_info_if_any());
    any = any || need;
    node->inputs.push_back(*in);
    node->needs.push_back(need ? 1 : 0);
  }
  if (!any) return out;
  node->op = op;
  node->attrs = attrs;
  node->out_chunk = out.chunk();
  node->out_shape = out.shape();
  std::size_t i = 0;  // invariant: inputs.size() <= 2 (every differentiable op's arity)
  for (const NDArray* in : inputs) node->versions[i++] = in->chunk()->version.load();
  node->out_version = out.chunk()->version.load();
  out.autograd_info().node = std::move(node);
  return out;
}

void check_inplace_allowed(const char* op, const NDArray& target, const NDArray* other) {
  if (!t_recording) return;
  // A reshaped view has autograd state of its own, but its storage is its base's: writing
  // through a view made outside the recording (or under Pause) changes values the base's
  // gradients read, so the base's state counts too.
  const auto of_storage = [](const NDArray& a) -> const AutogradInfo* {
    return a.chunk() ? a.chunk()->ag.load(std::memory_order_acquire) : nullptr;
  };
  const bool own = needs_grad(target.autograd_info_if_any());
  const bool view_of_recorded = !own && needs_grad(of_storage(target));
  if (own || view_of_recorded ||
      (other && (needs_grad(other->autograd_info_if_any()) || needs_grad(of_storage(*other)))))
    throw Error(std::string(op) + ": in-place update of " +
                (view_of_recorded ? "a view of an array" : "an array") +
                " that autograd is recording (" + shape_str(target.shape()) +
                "); autograd cannot differentiate it: compute a new array instead (y = y + x)");
}

}  // namespace detail

// ---- NDArray members ----------------------------------------------------------------------

void NDArray::attach_grad() {
  static const char* kOp = "attach_grad";
  detail::check_defined(kOp, *this);
  detail::AutogradInfo& ag = autograd_info();
  if (ag.node)
    throw Error(std::string(kOp) + ": the array " + shape_str(shape_) +
                " was computed while recording; attach gradients to the inputs instead");
  NDArray buf = nd::zeros(shape_, device());  // allocated before anything changes
  ag.grad = std::move(buf);
  ag.requires_grad = true;
  ag.graph_freed = false;
}

NDArray NDArray::grad() const {
  static const char* kOp = "grad";
  detail::check_defined(kOp, *this);
  const detail::AutogradInfo* ag = autograd_info_if_any();
  if (!ag || !ag->requires_grad)
    throw Error(std::string(kOp) + ": the array " + shape_str(shape_) +
                " has no gradient: call attach_grad() on it before recording");
  return ag->grad;
}

void NDArray::backward() const { autograd::backward(*this); }
void NDArray::backward(const NDArray& head_grad, bool retain_graph) const {
  static const char* kOp = "backward";
  detail::check_defined(kOp, head_grad);
  autograd::backward(*this, head_grad, retain_graph);
}

// ---- autograd:: ---------------------------------------------------------------------------

namespace autograd {

bool is_recording() { return detail::t_recording; }

bool set_recording(bool on) {
  const bool prev = detail::t_recording;
  detail::t_recording = on;
  return prev;
}

namespace {

// Autograd keeps the arrays a gradient reads, not copies of their values: one written in place
// since the node was recorded (after the Record scope, one that needs no gradient, or through
// another view of its storage, which the in-place check cannot see) would give a wrong gradient.
// As PyTorch's version counters do, backward refuses it, before anything is queued.
void check_unchanged(const detail::Node& node) {
  const unsigned reads = detail::grad_reads(node);
  const auto refuse = [&](const std::string& what, const Shape& shape) {
    const char* name = detail::grad_op_name(node.op);
    throw Error(std::string("backward: the gradient of ") + name + " reads its " + what + " " +
                shape_str(shape) + ", which was changed in place after it was recorded; "
                "autograd keeps the array, not a copy of its values: compute a new array instead "
                "(a = a * 2), or change it before recording or after backward");
  };
  for (std::size_t i = 0; i < node.inputs.size(); ++i) {
    if ((reads & (1u << i)) && node.inputs[i].chunk()->version.load() != node.versions[i]) {
      refuse(node.inputs.size() > 1 ? "input " + std::to_string(i + 1) : "input",
             node.inputs[i].shape());
    }
  }
  if (reads & detail::kReadsOutput) {
    const std::shared_ptr<detail::Chunk> out = node.out_chunk.lock();
    if (out && out->version.load() != node.out_version) refuse("output", node.out_shape);
  }
}

}  // namespace

void backward(const NDArray& head, const NDArray& head_grad, bool retain_graph) {
  static const char* kOp = "backward";
  using detail::AutogradInfo;
  using detail::Node;
  detail::check_defined(kOp, head);
  AutogradInfo& root = head.autograd_info();
  if (!root.node && !root.requires_grad) {
    if (root.graph_freed)
      throw Error(std::string(kOp) + ": the graph of this array " + shape_str(head.shape()) +
                  " was freed by an earlier backward(); pass retain_graph = true to the first "
                  "backward to run it twice");
    throw Error(std::string(kOp) + ": the array " + shape_str(head.shape()) +
                " was not computed while recording (autograd::Record) from an array with "
                "attach_grad()");
  }
  if (head_grad.defined()) {
    if (head_grad.shape() != head.shape())
      throw Error(std::string(kOp) + ": head gradient shape " + shape_str(head_grad.shape()) +
                  " differs from the array's shape " + shape_str(head.shape()));
    detail::check_same_device(kOp, head, head_grad);
  } else if (head.size() != 1) {
    throw Error(std::string(kOp) + ": the array " + shape_str(head.shape()) +
                " is not a scalar: pass a head gradient of that shape, or reduce it while "
                "recording (y = f(x).sum() inside the autograd::Record)");
  }

  // Reverse topological order by an iterative depth-first walk. Every check happens here, before
  // anything is queued.
  std::vector<AutogradInfo*> order;  // post-order: inputs before the arrays computed from them
  std::unordered_map<AutogradInfo*, char> state;  // 1 = on the stack, 2 = done
  // Edges into each leaf with attach_grad (a parameter).
  std::unordered_map<AutogradInfo*, int> fan_in;
  std::vector<std::pair<AutogradInfo*, std::size_t>> stack{{&root, 0}};
  state[&root] = 1;
  while (!stack.empty()) {
    auto& [info, next] = stack.back();
    Node* node = info->node.get();
    if (node && next < node->inputs.size()) {
      const std::size_t i = next++;
      if (!node->needs[i]) continue;
      AutogradInfo* in = &node->inputs[i].autograd_info();
      if (!in->node && !in->requires_grad && in->graph_freed)
        throw Error(std::string(kOp) + ": part of the graph (an input of shape " +
                    shape_str(node->inputs[i].shape()) +
                    ") was freed by an earlier backward(); pass retain_graph = true to the "
                    "first backward to run it twice");
      if (in->requires_grad && !in->node) ++fan_in[in];
      if (state.emplace(in, 1).second) stack.emplace_back(in, 0);
      continue;
    }
    if (node) check_unchanged(*node);
    state[info] = 2;
    order.push_back(info);
    stack.pop_back();
  }

  autograd::Pause pause;  // the gradient ops are not recorded
  // Backward writes the leaves' grad() buffers as it goes. A recorded op that read such a buffer
  // (c * x.grad()) had its gradient op read the buffer after that write, or before it, as the
  // order of the expression fell (b + a right, a + b wrong). Such an input is copied once, before
  // anything is queued, and the copy stands for it (it holds the values the op recorded: the
  // version check above found the buffer unchanged since).
  {
    std::vector<const detail::Chunk*> buffers;
    for (const AutogradInfo* info : order)
      if (info->requires_grad && info->grad.defined()) buffers.push_back(info->grad.chunk().get());
    for (const AutogradInfo* info : order) {
      if (!info->node || buffers.empty()) continue;
      detail::Node& node = *info->node;
      for (std::size_t i = 0; i < node.inputs.size(); ++i) {
        // A buffer is a constant here (no gradient flows to it), so its handle may be replaced.
        const detail::Chunk* c = node.inputs[i].defined() ? node.inputs[i].chunk().get() : nullptr;
        if (c && !node.needs[i] && std::find(buffers.begin(), buffers.end(), c) != buffers.end())
          node.inputs[i] = node.inputs[i].copy();
      }
    }
  }
  NDArray seed = head_grad.defined() ? head_grad : nd::ones(head.shape(), head.device());
  // Backward writes parameters' gradients into their grad() buffers while other gradient ops
  // still read the head gradient: a head gradient that is (a view of) such a buffer, as in
  // y.backward(w.grad()), is copied first, else it was overwritten midway (wrong gradients).
  if (head_grad.defined()) {
    for (const AutogradInfo* info : order) {
      if (info->requires_grad && info->grad.defined() &&
          info->grad.chunk() == head_grad.chunk()) {
        seed = head_grad.copy();
        break;
      }
    }
  }
  // A parameter (a leaf with attach_grad) used once gets its gradient as soon as the op that
  // uses it is reached, not at its own turn in the walk, which may come after the rest of
  // backward; and its ops go at kParameterGradPriority, ahead of the ops that carry backward on
  // to the layers below when both are ready. Nothing in backward waits for a parameter's
  // gradient, but a DistributedTrainer's allreduce does, and then runs beside the rest of
  // backward (bench/notes/dist.md, "Gradients first").
  const auto sole_parameter = [&fan_in](const NDArray& x) {
    AutogradInfo* in = &x.autograd_info();
    if (!in->requires_grad || in->node) return false;
    const auto f = fan_in.find(in);
    return f != fan_in.end() && f->second == 1;
  };
  std::unordered_map<AutogradInfo*, NDArray> grads;
  grads.emplace(&root, std::move(seed));
  std::vector<char> first, rest;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    AutogradInfo* info = *it;
    auto found = grads.find(info);
    if (found == grads.end()) continue;  // nothing flows here (or it was written already)
    NDArray g = std::move(found->second);
    grads.erase(found);  // the handle goes once its consumers are queued: memory back early
    if (info->requires_grad) detail::assign(info->grad, g);
    if (!info->node) continue;
    const Node& node = *info->node;
    const std::size_t n = node.inputs.size();
    first.assign(n, 0);
    rest = node.needs;
    bool any_first = false, any_rest = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (rest[i] && sole_parameter(node.inputs[i])) {
        first[i] = 1;
        rest[i] = 0;
        any_first = true;
      }
      any_rest = any_rest || rest[i];
    }
    if (any_first) {
      detail::OpPriority priority(detail::kParameterGradPriority);
      if (node.op == detail::GradOp::kDot) {  // from the product itself, into the buffer
        for (std::size_t i = 0; i < n; ++i)
          if (first[i]) detail::dot_grad_into(node, i, g, node.inputs[i].autograd_info().grad);
      } else {
        std::vector<NDArray> in_grads = detail::node_backward(node, g, &first);
        for (std::size_t i = 0; i < n; ++i)
          if (first[i] && in_grads[i].defined())
            detail::assign(node.inputs[i].autograd_info().grad, in_grads[i]);
      }
    }
    if (!any_rest) continue;
    std::vector<NDArray> in_grads = detail::node_backward(node, g, &rest);
    for (std::size_t i = 0; i < n; ++i) {
      if (!rest[i] || !in_grads[i].defined()) continue;
      AutogradInfo* in = &node.inputs[i].autograd_info();
      auto [slot, fresh] = grads.emplace(in, in_grads[i]);
      if (!fresh) slot->second = slot->second + in_grads[i];  // used more than once: sum
    }
  }
  if (!retain_graph) {
    // Take every node out of the graph first, then let them go: destroying one releases its
    // inputs, which may destroy AutogradInfos that `order` still points to.
    std::vector<std::shared_ptr<Node>> walked;
    for (AutogradInfo* info : order) {
      if (info->node) {
        walked.push_back(std::move(info->node));
        info->node.reset();
        info->graph_freed = true;
      }
    }
  }
}

}  // namespace autograd
}  // namespace asyncnd
