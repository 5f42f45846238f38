// nn::DistributedTrainer: the layout check, rank 0's parameters broadcast, gradient buckets
// allreduced as engine ops, and the SGD update fused with the copy out of each bucket.
#include <cstring>
#include <sstream>
#include <string>
#include <utility>

#include "asyncnd/autograd.h"
#include "asyncnd/dist.h"
#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"  // detail::assign, sgd_update, check_inplace_allowed
#include "ops/chunk.h"                    // detail::bump_version

namespace asyncnd {
namespace nn {

namespace {

float* writable(const NDArray& a) {  // a CPU array's storage, for an op that declares the write
  return const_cast<float*>(a.unsafe_data());
}

// One line per parameter: what must agree across ranks, a tab, then the name (for messages).
std::string layout_of(const std::vector<Parameter>& params, const DistributedOptions& o) {
  std::ostringstream os;
  os << "buckets of " << o.bucket_bytes << " bytes, the first " << o.first_bucket_bytes
     << ", root " << o.root << "\n";
  for (const Parameter& p : params) {
    os << shape_str(p.shape());
    if (p.initialized()) os << ' ' << p.data().device().str();
    else os << " (not initialised)";
    os << '\t' << p.name() << '\n';
  }
  return os.str();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string line; std::getline(is, line);) out.push_back(line);
  return out;
}

std::string before_tab(const std::string& s) { return s.substr(0, s.find('\t')); }

// "" when every rank's layout equals rank 0's; else what differs, the same text on every rank.
std::string compare_layouts(const std::vector<std::string>& all) {
  std::string msg;
  const std::vector<std::string> ref = lines_of(all[0]);
  for (std::size_t r = 1; r < all.size(); ++r) {
    const std::vector<std::string> mine = lines_of(all[r]);
    std::string diff;
    if (before_tab(mine[0]) != before_tab(ref[0])) {
      diff = "options: rank 0 has " + ref[0] + ", rank " + std::to_string(r) + " has " + mine[0];
    } else if (mine.size() != ref.size()) {
      diff = "rank 0 has " + std::to_string(ref.size() - 1) + " parameters, rank " +
             std::to_string(r) + " has " + std::to_string(mine.size() - 1);
    } else {
      for (std::size_t i = 1; i < ref.size() && diff.empty(); ++i) {
        if (before_tab(mine[i]) == before_tab(ref[i])) continue;
        auto show = [](const std::string& line) {
          const std::size_t tab = line.find('\t');
          return line.substr(tab + 1) + " " + line.substr(0, tab);
        };
        diff = "parameter " + std::to_string(i - 1) + ": rank 0 has " + show(ref[i]) +
               ", rank " + std::to_string(r) + " has " + show(mine[i]);
      }
    }
    if (!diff.empty()) msg += (msg.empty() ? "" : "; ") + diff;
  }
  return msg;
}

}  // namespace

struct DistributedTrainer::Impl {
  struct Bucket {
    std::vector<std::size_t> params;     // indices, in the order packed
    std::vector<std::int64_t> offsets;   // of each parameter in flat
    NDArray flat;                        // CPU, the bucket's gradients side by side
  };
  std::vector<Parameter> params;
  float lr;
  DistributedOptions options;
  std::vector<Bucket> buckets;
  std::size_t bytes = 0;
  // The first bucket's flat array ends with kBatchTail more floats, per step: this rank's batch
  // size and 1 if it refused the step (a batch size that is not positive, or a stale gradient);
  // allreduced (sum) with the gradients, the global batch and the number of ranks that refused.
  // Carried there rather than by a collective of their own: that one, issued first, held the
  // buckets' allreduces behind it until every rank's worker had run the op filling it, and the
  // share of the allreduce time hidden behind backward fell from 66-74% to 58-62% (2 ranks;
  // native/dist/README.md, "DistributedTrainer").
  static constexpr std::int64_t kBatchTail = 2;
  detail::StaleGradients stale;  // what each gradient was at the last step (nn::SGD's rule)
};

namespace {

// A moved-from trainer has no state: each call says so instead of crashing.
DistributedTrainer::Impl& live(const std::unique_ptr<DistributedTrainer::Impl>& impl,
                               const char* op) {
  if (!impl) throw Error(std::string(op) + ": this DistributedTrainer was moved from");
  return *impl;
}

// What this rank alone finds wrong with the arguments, or "".
std::string local_problem(const std::vector<Parameter>& params, float lr,
                          const DistributedOptions& o) {
  for (const Parameter& p : params)
    if (!p.defined()) return "empty parameter handle in the list";
  if (o.bucket_bytes == 0 || o.first_bucket_bytes == 0) return "bucket sizes must be positive";
  if (o.root < 0 || o.root >= dist::size())
    return "root " + std::to_string(o.root) + " is not a rank (size " +
           std::to_string(dist::size()) + ")";
  return detail::learning_rate_problem(lr);
}

// Marks a rank's text in the layout allgather as its refusal (a layout starts with "buckets").
constexpr char kRefusal = '!';

}  // namespace

DistributedTrainer::DistributedTrainer(std::vector<Parameter> params, float learning_rate,
                                       DistributedOptions options)
    : impl_(std::make_unique<Impl>()) {
  static const char* kOp = "DistributedTrainer";
  if (!dist::initialized()) throw Error(std::string(kOp) + ": dist::init() has not been called");
  params = detail::unique_parameters(std::move(params));  // a shared layer's, once (as nn::SGD)
  // Before any collective on the parameters: a rank with other buckets would pair its
  // allreduces with different ones elsewhere, and MPI would truncate, corrupt or hang. A rank
  // whose own arguments are wrong says so through the same allgather, so that every rank throws
  // (one that threw before it left the others waiting in the collective).
  const std::string problem = local_problem(params, learning_rate, options);
  const std::vector<std::string> all = dist::allgather_strings(
      problem.empty() ? layout_of(params, options) : kRefusal + problem);
  std::string refused;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty() && all[r][0] == kRefusal)
      refused += (refused.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") +
                 all[r].substr(1);
  }
  if (!refused.empty()) throw Error(std::string(kOp) + ": " + refused);
  impl_->params = std::move(params);
  impl_->lr = learning_rate;
  impl_->options = options;
  const std::vector<Parameter>& ps = impl_->params;

  const std::string diff = compare_layouts(all);
  if (!diff.empty())
    throw Error(std::string(kOp) + ": the parameters differ between ranks (" +
                std::to_string(dist::size()) + " ranks): " + diff);
  for (const Parameter& p : ps)  // the same on every rank now, so every rank throws
    if (!p.initialized())
      throw Error(std::string(kOp) + ": parameter '" + p.name() + "' " + shape_str(p.shape()) +
                  " is not initialised yet: run one forward pass (or give Dense its in_units) "
                  "before making the trainer, so that rank " + std::to_string(options.root) +
                  "'s initial values can be broadcast");

  // Buckets in reverse parameter order: backward produces the last layer's gradients first. As
  // PyTorch's compute_bucket_assignment_by_size: a parameter joins the open bucket, which closes
  // once it holds at least its cap (first_bucket_bytes, then bucket_bytes).
  std::size_t cap = options.first_bucket_bytes, used = 0;
  bool open = false;
  for (std::size_t k = ps.size(); k-- > 0;) {
    const std::size_t nb = ps[k].data().nbytes();
    if (!open) {
      impl_->buckets.emplace_back();
      used = 0;
      open = true;
    }
    Impl::Bucket& b = impl_->buckets.back();
    b.offsets.push_back(static_cast<std::int64_t>(used / sizeof(float)));
    b.params.push_back(k);
    used += nb;
    impl_->bytes += nb;
    if (used >= cap) {
      open = false;
      cap = options.bucket_bytes;
    }
  }
  for (std::size_t bi = 0; bi < impl_->buckets.size(); ++bi) {
    Impl::Bucket& b = impl_->buckets[bi];
    std::int64_t n = bi == 0 ? Impl::kBatchTail : 0;
    for (std::size_t k : b.params) n += ps[k].data().size();
    b.flat = nd::empty({n});
  }
  broadcast_parameters();
}

DistributedTrainer::~DistributedTrainer() = default;
DistributedTrainer::DistributedTrainer(DistributedTrainer&&) noexcept = default;
DistributedTrainer& DistributedTrainer::operator=(DistributedTrainer&&) noexcept = default;

void DistributedTrainer::broadcast_parameters() {
  Impl& im = live(impl_, "DistributedTrainer::broadcast_parameters");
  autograd::Pause pause;
  for (const Parameter& p : im.params) {
    NDArray w = p.data();
    if (w.device().is_cpu()) {
      dist::broadcast(w, im.options.root);
    } else {  // through host memory: copy, broadcast, copy back (all queued)
      NDArray h = w.copy_to(Device::cpu());
      dist::broadcast(h, im.options.root);
      detail::assign(w, h.copy_to(w.device()));
    }
  }
}

void DistributedTrainer::step(std::int64_t batch_size) {
  static const char* kOp = "DistributedTrainer::step";
  Impl& im = live(impl_, kOp);
  if (!dist::initialized())  // before the first collective is queued
    throw Error(std::string(kOp) + ": dist is not initialised (dist::init() was not called, or "
                                   "dist::finalize() was)");
  const std::vector<Parameter>& ps = im.params;
  // In place, as nn::SGD's step: refused while autograd records a parameter (inside a Record).
  for (const Parameter& p : ps) detail::check_inplace_allowed(kOp, p.data(), nullptr);
  autograd::Pause pause;
  // A batch size that is not positive, or a stale gradient (nn::SGD's rule: one that nothing
  // wrote since the last step would be applied again), is refused on this rank after its
  // collectives are queued, so that the other ranks' are matched instead of waiting until the
  // watchdog; the flag it sends makes their updates fail, so no rank changes a parameter.
  std::vector<NDArray> grads(ps.size()), host(ps.size());
  for (std::size_t k = 0; k < ps.size(); ++k) grads[k] = ps[k].grad();
  const std::string stale = detail::StaleGradients::problem(
      ps, im.stale.find(grads),
      "call backward before each step (the other ranks' steps fail too: no rank's parameters "
      "change)");
  const bool refused = batch_size <= 0 || !stale.empty();
  const int ranks = dist::size();
  if (im.buckets.empty()) {  // no parameter: nothing to reduce, nothing to update
    if (refused) {
      throw Error(std::string(kOp) + ": " +
                  (batch_size <= 0 ? "batch_size must be positive, got " +
                                         std::to_string(batch_size) : stale));
    }
    return;
  }
  // The global batch: every rank's batch size, summed (the first bucket's tail, Impl). The update
  // divides by it, so ranks with unequal shares (an epoch's last batch) apply the same update,
  // the whole batch's SGD step. (Each dividing by its own batch size made the copies of the model
  // drift apart.)
  const float mine = refused ? 0.0f : static_cast<float>(batch_size);
  const float flag = refused ? 1.0f : 0.0f;

  // The gradients as CPU arrays (a GPU gradient is copied to the host, queued).
  for (std::size_t k = 0; k < ps.size(); ++k)
    host[k] = grads[k].device().is_cpu() ? grads[k] : grads[k].copy_to(Device::cpu());

  // 1. Every bucket's pack and allreduce (sum), in bucket order: the order of the collectives,
  //    the same on every rank. Each pack runs as soon as backward has written its gradients, ahead
  //    of the backward ops still queued (priority), and its allreduce right after.
  for (std::size_t bi = 0; bi < im.buckets.size(); ++bi) {
    Impl::Bucket& b = im.buckets[bi];
    std::vector<Var> reads;
    std::vector<const float*> src;
    std::vector<std::int64_t> len;
    for (std::size_t k : b.params) {
      reads.push_back(host[k].var());
      src.push_back(host[k].unsafe_data());
      len.push_back(host[k].size());
    }
    float* dst = writable(b.flat);
    const bool tail = bi == 0;
    PushOptions o;
    o.name = "dist_bucket_pack";
    o.priority = dist::kCollectivePriority;
    engine().push(
        [dst, src, len, tail, mine, flag] {
          std::int64_t off = 0;
          for (std::size_t i = 0; i < src.size(); ++i) {
            std::memcpy(dst + off, src[i], static_cast<std::size_t>(len[i]) * sizeof(float));
            off += len[i];
          }
          if (tail) {
            dst[off] = mine;
            dst[off + 1] = flag;
          }
        },
        std::move(reads), {b.flat.var()}, o);
    dist::allreduce(b.flat, dist::Reduce::kSum);
  }
  if (batch_size <= 0)
    throw Error(std::string(kOp) + ": batch_size must be positive, got " +
                std::to_string(batch_size) + " (the other ranks' steps fail too: no rank's "
                "parameters change)");
  if (refused) throw Error(std::string(kOp) + ": " + stale);

  // What every update reads of the global batch: alpha = lr / global batch, or a failure if a
  // rank refused. The same on every rank, so the copies of the model stay identical.
  const NDArray& first = im.buckets[0].flat;
  const Var batch_var = first.var();
  const float* total = first.unsafe_data() + (first.size() - Impl::kBatchTail);
  const float lr = im.lr;
  auto alpha_of = [total, lr, ranks]() {
    if (total[1] > 0.0f)
      throw Error("DistributedTrainer::step: " + std::to_string(static_cast<int>(total[1])) +
                  " of " + std::to_string(ranks) + " ranks refused the step (a batch_size that "
                  "is not positive, or a stale gradient); no parameter was updated");
    return lr / total[0];
  };
  // The averaged gradient p.grad() holds after the step: the sum over the ranks / their number
  // (multiplying by 1/ranks is exact for a power of two; otherwise divide, as kMean does).
  const bool pow2 = (ranks & (ranks - 1)) == 0;
  const float inv_ranks = 1.0f / static_cast<float>(ranks), franks = static_cast<float>(ranks);

  // 2. The updates, out of each bucket once its allreduce is done. The last bucket holds the first
  //    layers, which the next forward pass needs first: the highest priority.
  NDArray gpu_factor;  // CPU [1], lr * ranks / global batch, for parameters on a GPU (made once)
  for (std::size_t bi = im.buckets.size(); bi-- > 0;) {
    Impl::Bucket& b = im.buckets[bi];
    PushOptions o;
    o.name = "dist_bucket_update";
    o.priority = static_cast<int>(bi) + 1;
    const float* flat = b.flat.unsafe_data();
    std::vector<Var> writes;
    std::vector<float*> w, g;
    std::vector<std::int64_t> off, len;
    std::vector<std::size_t> gpu;
    for (std::size_t i = 0; i < b.params.size(); ++i) {
      const std::size_t k = b.params[i];
      NDArray wk = ps[k].data();
      if (!wk.device().is_cpu()) {
        gpu.push_back(i);
        continue;
      }
      writes.push_back(wk.var());
      writes.push_back(grads[k].var());
      detail::bump_version(wk);  // written in place (autograd.h, "In place")
      detail::bump_version(grads[k]);
      w.push_back(writable(wk));
      g.push_back(writable(grads[k]));
      off.push_back(b.offsets[i]);
      len.push_back(wk.size());
    }
    if (!w.empty()) {
      // The averaged gradient into p.grad(), and w -= lr / global batch * summed gradient, in
      // one pass.
      engine().push(
          [flat, w, g, off, len, alpha_of, pow2, inv_ranks, franks] {
            const float alpha = alpha_of();
            for (std::size_t j = 0; j < w.size(); ++j) {
              const float* s = flat + off[j];
              float* wj = w[j];
              float* gj = g[j];
              for (std::int64_t e = 0; e < len[j]; ++e) {
                gj[e] = pow2 ? s[e] * inv_ranks : s[e] / franks;
                wj[e] -= alpha * s[e];
              }
            }
          },
          {b.flat.var(), batch_var}, std::move(writes), o);
    }
    if (!gpu.empty() && !gpu_factor.defined()) {
      // w -= (lr * ranks / global batch) * averaged gradient, the factor known only once the
      // batch sizes are summed: an array, not sgd_update's float.
      gpu_factor = nd::empty({1});
      float* f = writable(gpu_factor);
      PushOptions u = o;
      u.name = "dist_update_factor";
      engine().push([f, alpha_of, franks] { f[0] = alpha_of() * franks; }, {batch_var},
                    {gpu_factor.var()}, u);
    }
    for (std::size_t i : gpu) {  // GPU: out of the bucket on the host, copy, update there
      const std::size_t k = b.params[i];
      float* h = writable(host[k]);
      const std::int64_t o_k = b.offsets[i], n_k = host[k].size();
      PushOptions u = o;
      u.name = "dist_bucket_unpack";
      engine().push(
          [flat, h, o_k, n_k, pow2, inv_ranks, franks] {
            for (std::int64_t e = 0; e < n_k; ++e)
              h[e] = pow2 ? flat[o_k + e] * inv_ranks : flat[o_k + e] / franks;
          },
          {b.flat.var()}, {host[k].var()}, u);
      NDArray wk = ps[k].data();
      detail::assign(grads[k], host[k].copy_to(wk.device()));
      detail::assign(wk, wk - grads[k] * gpu_factor.copy_to(wk.device()));
    }
  }
  im.stale.record(grads);  // after this step's own writes of p.grad()
}

float DistributedTrainer::learning_rate() const {
  return live(impl_, "DistributedTrainer::learning_rate").lr;
}
void DistributedTrainer::set_learning_rate(float lr) {
  static const char* kOp = "DistributedTrainer::set_learning_rate";
  Impl& im = live(impl_, kOp);
  detail::check_learning_rate(kOp, lr);
  im.lr = lr;
}

std::vector<std::vector<std::size_t>> DistributedTrainer::buckets() const {
  std::vector<std::vector<std::size_t>> out;
  for (const Impl::Bucket& b : live(impl_, "DistributedTrainer::buckets").buckets)
    out.push_back(b.params);
  return out;
}

std::size_t DistributedTrainer::bytes_per_step() const {
  return live(impl_, "DistributedTrainer::bytes_per_step").bytes;
}

}  // namespace nn
}  // namespace asyncnd
