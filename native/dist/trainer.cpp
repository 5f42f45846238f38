// nn::DistributedTrainer: the layout check, rank 0's parameters broadcast, gradient buckets
// allreduced as engine ops, and the SGD update fused with the copy out of each bucket.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>

#include "asyncnd/autograd.h"
#include "asyncnd/dist.h"
#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"  // detail::assign, detail::sgd_update (the GPU path)

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
     << ", slices of " << o.slice_bytes << ", root " << o.root << "\n";
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
  // One allreduce: a run of whole parameters side by side, or one row slice of a parameter.
  struct Piece {
    struct Entry {
      std::size_t param;
      std::int64_t begin, len;  // elements of the parameter
      std::int64_t off;         // where they sit in flat
      int part;                 // the row slice's index; -1 for the whole parameter
    };
    std::vector<Entry> entries;
    NDArray flat;  // CPU, the entries' gradients side by side
  };
  struct Bucket {
    std::vector<std::size_t> params;  // indices, in the order packed
    std::vector<Piece> pieces;        // in the same order
  };
  std::vector<Parameter> params;
  float lr;
  DistributedOptions options;
  std::vector<Bucket> buckets;
  std::vector<int> slices;  // per parameter: its row slices, 0 for none
  std::size_t bytes = 0;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {  // backward goes back to whole gradients for these parameters
    for (std::size_t k = 0; k < slices.size(); ++k)
      if (slices[k] > 1) detail::want_grad_parts(params[k].data(), 0);
  }
};

DistributedTrainer::DistributedTrainer(std::vector<Parameter> params, float learning_rate,
                                       DistributedOptions options)
    : impl_(std::make_unique<Impl>()) {
  static const char* kOp = "DistributedTrainer";
  for (const Parameter& p : params)
    if (!p.defined()) throw Error(std::string(kOp) + ": empty parameter handle in the list");
  if (options.bucket_bytes == 0 || options.first_bucket_bytes == 0)
    throw Error(std::string(kOp) + ": bucket sizes must be positive");
  if (!dist::initialized()) throw Error(std::string(kOp) + ": dist::init() has not been called");
  if (options.root < 0 || options.root >= dist::size())
    throw Error(std::string(kOp) + ": root " + std::to_string(options.root) +
                " is not a rank (size " + std::to_string(dist::size()) + ")");
  impl_->params = std::move(params);
  impl_->lr = learning_rate;
  impl_->options = options;
  const std::vector<Parameter>& ps = impl_->params;

  // Before any collective on the parameters: a rank with other buckets would pair its
  // allreduces with different ones elsewhere, and MPI would truncate, corrupt or hang.
  const std::string diff = compare_layouts(dist::allgather_strings(layout_of(ps, options)));
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
    impl_->buckets.back().params.push_back(k);
    used += nb;
    impl_->bytes += nb;
    if (used >= cap) {
      open = false;
      cap = options.bucket_bytes;
    }
  }

  // The last bucket holds the first layers, whose gradients backward writes last: nothing of
  // backward is left to hide their allreduce behind. So each CPU matrix there over slice_bytes is
  // computed by backward in row slices (detail::want_grad_parts), and each slice is reduced on
  // its own as soon as its GEMM ends, while the next slice's GEMM runs.
  impl_->slices.assign(ps.size(), 0);
  if (options.slice_bytes > 0) {
    for (std::size_t k : impl_->buckets.back().params) {
      const NDArray w = ps[k].data();
      if (w.ndim() != 2 || !w.device().is_cpu() || w.nbytes() <= options.slice_bytes) continue;
      const std::size_t want = (w.nbytes() + options.slice_bytes - 1) / options.slice_bytes;
      const std::int64_t rows = w.shape()[0];
      impl_->slices[k] = static_cast<int>(std::min<std::int64_t>(rows, static_cast<std::int64_t>(want)));
      if (impl_->slices[k] > 1) detail::want_grad_parts(w, impl_->slices[k]);
      else impl_->slices[k] = 0;
    }
  }
  for (Impl::Bucket& b : impl_->buckets) {
    Impl::Piece run;  // whole parameters, until a sliced one
    std::int64_t n = 0;
    const auto close = [&] {
      if (run.entries.empty()) return;
      run.flat = nd::empty({n});
      b.pieces.push_back(std::move(run));
      run = Impl::Piece();
      n = 0;
    };
    for (std::size_t k : b.params) {
      const NDArray w = ps[k].data();
      const int parts = impl_->slices[k];
      if (parts == 0) {
        run.entries.push_back({k, 0, w.size(), n, -1});
        n += w.size();
        continue;
      }
      close();
      const std::int64_t rows = w.shape()[0], cols = w.shape()[1];
      for (int s = 0; s < parts; ++s) {  // the rows dot_grad_parts gives slice s
        const std::int64_t r0 = rows * s / parts, r1 = rows * (s + 1) / parts;
        run.entries.push_back({k, r0 * cols, (r1 - r0) * cols, 0, s});
        n = (r1 - r0) * cols;
        close();
      }
    }
    close();
  }
  broadcast_parameters();
}

DistributedTrainer::~DistributedTrainer() = default;
DistributedTrainer::DistributedTrainer(DistributedTrainer&&) noexcept = default;
DistributedTrainer& DistributedTrainer::operator=(DistributedTrainer&&) noexcept = default;

void DistributedTrainer::broadcast_parameters() {
  autograd::Pause pause;
  for (const Parameter& p : impl_->params) {
    NDArray w = p.data();
    if (w.device().is_cpu()) {
      dist::broadcast(w, impl_->options.root);
    } else {  // through host memory: copy, broadcast, copy back (all queued)
      NDArray h = w.copy_to(Device::cpu());
      dist::broadcast(h, impl_->options.root);
      detail::assign(w, h.copy_to(w.device()));
    }
  }
}

void DistributedTrainer::step(std::int64_t batch_size) {
  static const char* kOp = "DistributedTrainer::step";
  if (batch_size <= 0)
    throw Error(std::string(kOp) + ": batch_size must be positive, got " +
                std::to_string(batch_size));
  autograd::Pause pause;
  const std::vector<Parameter>& ps = impl_->params;
  const float alpha = impl_->lr / static_cast<float>(batch_size);
  // The row slices the last backward wrote, where it did (taken before grad(), which drops them);
  // then backward is asked again for the next step (set_data may have replaced the array).
  std::vector<std::vector<NDArray>> parts(ps.size());
  for (std::size_t k = 0; k < ps.size(); ++k) {
    const int want = impl_->slices[k];
    if (want == 0) continue;
    const NDArray w = ps[k].data();
    parts[k] = detail::take_grad_parts(w);
    if (parts[k].size() != static_cast<std::size_t>(want)) parts[k].clear();
    detail::want_grad_parts(w, want);
  }
  // The gradients as CPU arrays (a GPU gradient is copied to the host, queued).
  std::vector<NDArray> grads(ps.size()), host(ps.size());
  for (std::size_t k = 0; k < ps.size(); ++k) {
    grads[k] = ps[k].grad();
    host[k] = grads[k].device().is_cpu() ? grads[k] : grads[k].copy_to(Device::cpu());
  }

  // 1. Every piece's pack and allreduce, in bucket order: the order of the collectives, the same
  //    on every rank. Each pack runs as soon as backward has written its gradients (a slice's,
  //    as soon as that slice's GEMM has), ahead of the backward ops still queued (priority), and
  //    its allreduce right after.
  for (Impl::Bucket& b : impl_->buckets) {
    for (Impl::Piece& piece : b.pieces) {
      std::vector<Var> reads;
      std::vector<const float*> src;
      std::vector<std::int64_t> len;
      for (const Impl::Piece::Entry& e : piece.entries) {
        const std::vector<NDArray>& pk = parts[e.param];
        const bool from_part = e.part >= 0 && !pk.empty() &&
                               pk[static_cast<std::size_t>(e.part)].size() == e.len;
        const NDArray& from = from_part ? pk[static_cast<std::size_t>(e.part)] : host[e.param];
        if (std::find(reads.begin(), reads.end(), from.var()) == reads.end())
          reads.push_back(from.var());
        src.push_back(from.unsafe_data() + (from_part ? 0 : e.begin));
        len.push_back(e.len);
      }
      float* dst = writable(piece.flat);
      PushOptions o;
      o.name = "dist_bucket_pack";
      o.priority = dist::kCollectivePriority;
      engine().push(
          [dst, src, len] {
            std::int64_t off = 0;
            for (std::size_t i = 0; i < src.size(); ++i) {
              std::memcpy(dst + off, src[i], static_cast<std::size_t>(len[i]) * sizeof(float));
              off += len[i];
            }
          },
          std::move(reads), {piece.flat.var()}, o);
      dist::allreduce(piece.flat, dist::Reduce::kMean);
    }
  }

  // 2. The updates, out of each piece once its allreduce is done. The last bucket holds the first
  //    layers, which the next forward pass needs first: the highest priority.
  for (std::size_t bi = impl_->buckets.size(); bi-- > 0;) {
    Impl::Bucket& b = impl_->buckets[bi];
    PushOptions o;
    o.name = "dist_bucket_update";
    o.priority = static_cast<int>(bi) + 1;
    for (Impl::Piece& piece : b.pieces) {
      const float* flat = piece.flat.unsafe_data();
      std::vector<Var> writes;
      std::vector<float*> w, g;
      std::vector<std::int64_t> off, len;
      std::vector<const Impl::Piece::Entry*> gpu;
      for (const Impl::Piece::Entry& e : piece.entries) {
        const std::size_t k = e.param;
        NDArray wk = ps[k].data();
        if (!wk.device().is_cpu()) {  // whole parameters only: slices are for CPU ones
          gpu.push_back(&e);
          continue;
        }
        writes.push_back(wk.var());
        writes.push_back(grads[k].var());
        w.push_back(writable(wk) + e.begin);
        g.push_back(writable(grads[k]) + e.begin);
        off.push_back(e.off);
        len.push_back(e.len);
      }
      if (!w.empty()) {
        // The averaged gradient into p.grad(), and w -= alpha * g, in one pass.
        engine().push(
            [flat, w, g, off, len, alpha] {
              for (std::size_t j = 0; j < w.size(); ++j) {
                const float* s = flat + off[j];
                float* wj = w[j];
                float* gj = g[j];
                for (std::int64_t e = 0; e < len[j]; ++e) {
                  gj[e] = s[e];
                  wj[e] -= alpha * s[e];
                }
              }
            },
            {piece.flat.var()}, std::move(writes), o);
      }
      for (const Impl::Piece::Entry* e : gpu) {  // GPU: out of the piece on the host, copy, update
        const std::size_t k = e->param;
        float* h = writable(host[k]);
        const std::int64_t o_k = e->off, n_k = e->len;
        PushOptions u = o;
        u.name = "dist_bucket_unpack";
        engine().push(
            [flat, h, o_k, n_k] {
              std::memcpy(h, flat + o_k, static_cast<std::size_t>(n_k) * sizeof(float));
            },
            {piece.flat.var()}, {host[k].var()}, u);
        NDArray wk = ps[k].data();
        detail::assign(grads[k], host[k].copy_to(wk.device()));
        detail::sgd_update(wk, grads[k], alpha);
      }
    }
  }
}

float DistributedTrainer::learning_rate() const { return impl_->lr; }
void DistributedTrainer::set_learning_rate(float lr) { impl_->lr = lr; }

std::vector<std::vector<std::size_t>> DistributedTrainer::buckets() const {
  std::vector<std::vector<std::size_t>> out;
  for (const Impl::Bucket& b : impl_->buckets) out.push_back(b.params);
  return out;
}

std::size_t DistributedTrainer::bytes_per_step() const { return impl_->bytes; }

std::size_t DistributedTrainer::collectives_per_step() const {
  std::size_t n = 0;
  for (const Impl::Bucket& b : impl_->buckets) n += b.pieces.size();
  return n;
}

}  // namespace nn
}  // namespace asyncnd
