// NDArray: storage chunks, the blocking reads (wait_to_read, to_vector, item, printing), reshape,
// and the member functions that forward to nd::. Ops live in ops_*.cpp.
#include "asyncnd/ndarray.h"

#include "engine/asan.h"
// LeakSanitizer (with AddressSanitizer) is told about the one deliberate leak (~Chunk).
#if ASYNCND_ASAN
#include <sanitizer/lsan_interface.h>
#endif

#include <cstdio>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>

#include "asyncnd/detail/backend.h"
#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"
#include "ops/chunk.h"
#include "engine/engine_impl.h"
#include "ops/ops_common.h"

namespace asyncnd {

// ---- shapes --------------------------------------------------------------------------------

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {
// Not the shape itself: it may be thousands of numbers long.
std::string too_many_dims(const Shape& shape) {
  return "a shape of " + std::to_string(shape.size()) + " dimensions: an array has at most " +
         std::to_string(kMaxDims);
}
}  // namespace

std::int64_t shape_size(const Shape& shape) {
  if (shape.size() > kMaxDims) throw Error(too_many_dims(shape));
  bool empty = false;
  for (std::int64_t d : shape) {
    if (d < 0) throw Error("shape " + shape_str(shape) + " has a negative dimension");
    empty = empty || d == 0;
  }
  if (empty) return 0;
  // Overflow-safe: the running product stays <= kMaxArrayElements, so it never wraps int64 (nor,
  // times sizeof(float), the target's size_t), and the byte count fits ptrdiff_t.
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (n > kMaxArrayElements / d) {
      throw Error("shape " + shape_str(shape) +
                  " has too many elements: the largest array on this target holds " +
                  std::to_string(kMaxArrayElements) + " float32 elements (" +
                  std::to_string(kMaxArrayElements * static_cast<std::int64_t>(sizeof(float))) +
                  " bytes)");
    }
    n *= d;
  }
  return n;
}

namespace detail {

// ---- chunks --------------------------------------------------------------------------------

Chunk::Chunk(Device dev, std::size_t nbytes, const char* op) : device(dev) {
  // backend_for scans the backend list and builds its error text up front; CPU arrays are the hot
  // path (E5 makes one per op), so that backend is looked up once. Backends are never destroyed.
  static Backend* const cpu0 = &backend_for(Device::cpu(), op);
  backend = dev == Device::cpu() ? cpu0 : &backend_for(dev, op);
  // The engine first: made at the first array, it throws for a bad ASYNCND_* variable, which
  // after the allocation below leaked the block.
  Engine& eng = engine();
  if (nbytes > 0) {
    try {
      data = static_cast<float*>(backend->alloc(dev.id, nbytes));
    } catch (const Error& e) {
      // "zeros: cpu: out of memory allocating N bytes": the op that asked, then the allocator.
      throw Error(std::string(op) + ": " + e.what());
    }
    bytes = nbytes;
    detail::EngineAccess::impl(eng).note_alloc(dev, nbytes);
  }
  try {
    var = eng.new_var();
  } catch (...) {
    if (data) {
      backend->free(dev.id, data, bytes);
      detail::EngineAccess::impl(eng).note_free(dev, bytes);
    }
    throw;
  }
}

AutogradInfo& Chunk::autograd() {
  AutogradInfo* p = ag.load(std::memory_order_acquire);
  if (p) return *p;
  auto fresh = std::make_unique<AutogradInfo>();
  // Two threads may look at a shared input at once while recording: the first one's info wins.
  if (ag.compare_exchange_strong(p, fresh.get(), std::memory_order_acq_rel)) return *fresh.release();
  return *p;
}

Chunk::~Chunk() {
  // In a forked child the engine's locks may be held for ever: the array is left as it is, its
  // variable's handle too (Var::release), rather than freed through the engine.
  if (detail::forked_child()) return;
  delete ag.load(std::memory_order_acquire);  // (Node's destructor unwinds long graphs)
  Backend* be = backend;
  float* p = data;
  const std::size_t n = bytes;
  const Device dev = device;
  // Nothing waits for this on_delete, so a small array's deletion may wait in the engine's short
  // list rather than on its variable (EngineImpl::delete_var, may_defer). If the variable was
  // deleted by hand (Engine::delete_var on var()), the storage stays: freeing it now could pull
  // it from under a queued op, and leaking is the safe failure.
  const bool deleting = detail::EngineAccess::impl(engine()).delete_array_var(
      std::move(var),
      [be, p, n, dev] {
        if (p) {
          be->free(dev.id, p, n);
          detail::EngineAccess::impl(engine()).note_free(dev, n);
        }
      },
      n);
#if ASYNCND_ASAN
  if (!deleting && p) __lsan_ignore_object(p);  // leaked on purpose: not a leak to report
#else
  (void)deleting;
#endif
}

std::shared_ptr<Chunk> new_chunk(Device device, std::int64_t elements, const char* op) {
  // invariant: elements came from shape_size (0 <= elements <= kMaxArrayElements): no wrap here
  if (elements < 0 || elements > kMaxArrayElements) {
    throw Error(std::string(op) + ": " + std::to_string(elements) + " elements is not a valid array size");
  }
  return std::make_shared<Chunk>(device, static_cast<std::size_t>(elements) * sizeof(float), op);
}

// ---- argument checks -----------------------------------------------------------------------

void check_defined(const char* op, const NDArray& a) {
  if (!a.defined()) throw Error(std::string(op) + ": array is empty (default-constructed)");
}

void check_same_device(const char* op, const NDArray& a, const NDArray& b) {
  if (a.device() != b.device())
    throw Error(std::string(op) + ": arrays on different devices: " + a.device().str() + " and " +
                b.device().str());
}

std::int64_t checked_size(const char* op, const Shape& shape) {
  try {
    return shape_size(shape);
  } catch (const Error& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}

NDArray new_array(const char* op, Shape shape, Device device) {
  const std::int64_t n = checked_size(op, shape);
  auto chunk = new_chunk(device, n, op);  // throws for a device that does not exist
  return NDArray(std::move(chunk), std::move(shape));
}

NDArray new_array_like(const char* op, const NDArray& a) {
  auto chunk = new_chunk(a.chunk()->device, a.size(), op);
  return NDArray(std::move(chunk), a.shape());
}

}  // namespace detail

// ---- NDArray -------------------------------------------------------------------------------

std::int64_t NDArray::size() const noexcept {
  if (!chunk_) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : shape_) n *= d;  // validated when the array was made
  return n;
}

Device NDArray::device() const {
  detail::check_defined("device", *this);
  return chunk_->device;
}

const Var& NDArray::var() const {
  detail::check_defined("var", *this);
  return chunk_->var;
}

void NDArray::wait_to_read() const {
  detail::check_defined("wait_to_read", *this);
  engine().wait_to_read(chunk_->var);
  // A device op counts as finished once queued on its device: wait for the device too.
  if (!chunk_->backend->host_addressable() && chunk_->data)
    chunk_->backend->synchronize(chunk_->device.id, chunk_->data);
}

// A device array is read through a host copy, after waiting for its own variable: the copy would
// inherit a failure and forget it on itself, so the array rethrew it at every read, not once.
std::vector<float> NDArray::to_vector() const {
  detail::check_defined("to_vector", *this);
  engine().wait_to_read(chunk_->var);
  if (!chunk_->backend->host_addressable()) return copy_to(Device::cpu()).to_vector();
  const std::int64_t n = size();
  std::vector<float> out(static_cast<std::size_t>(n));
  if (n > 0) std::memcpy(out.data(), chunk_->data, static_cast<std::size_t>(n) * sizeof(float));
  return out;
}

float NDArray::item() const {
  detail::check_defined("item", *this);
  if (size() != 1)
    throw Error("item: expected an array of size 1, got " + shape_str(shape_) + " (" +
                std::to_string(size()) + " elements)");
  engine().wait_to_read(chunk_->var);
  if (!chunk_->backend->host_addressable()) return copy_to(Device::cpu()).item();
  return chunk_->data[0];
}

const float* NDArray::unsafe_data() const {
  detail::check_defined("unsafe_data", *this);
  return chunk_->data;
}

NDArray NDArray::reshape(Shape shape) const {
  static const char* kOp = "reshape";
  detail::check_defined(kOp, *this);
  const auto fail = [&] {
    return Error(std::string(kOp) + ": cannot reshape " + shape_str(shape_) + " into " +
                 shape_str(shape));
  };
  if (shape.size() > kMaxDims) throw Error(std::string(kOp) + ": " + too_many_dims(shape));
  int infer = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw Error(std::string(kOp) + ": more than one -1 in " + shape_str(shape));
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw Error(std::string(kOp) + ": invalid dimension " + std::to_string(shape[i]) + " in " +
                  shape_str(shape));
    } else {
      if (shape[i] != 0 && known > std::numeric_limits<std::int64_t>::max() / shape[i])
        throw fail();
      known *= shape[i];
    }
  }
  const std::int64_t n = size();
  if (infer >= 0) {
    if (known == 0 || n % known != 0) throw fail();  // 0: the -1 would be ambiguous
    shape[static_cast<std::size_t>(infer)] = n / known;
  } else if (known != n) {
    throw fail();
  }
  // A view shares the chunk but is an array of its own for autograd.
  NDArray view(chunk_, std::move(shape));
  view.view_ag_ = std::make_shared<detail::AutogradInfo>();
  return detail::recorded(detail::GradOp::kReshape, std::move(view), {this});
}

detail::AutogradInfo& NDArray::autograd_info() const {
  detail::check_defined("autograd", *this);
  return view_ag_ ? *view_ag_ : chunk_->autograd();
}

const detail::AutogradInfo* NDArray::autograd_info_if_any() const {
  if (view_ag_) return view_ag_.get();
  return chunk_ ? chunk_->ag.load(std::memory_order_acquire) : nullptr;
}

NDArray NDArray::transpose() const { return nd::transpose(*this); }
NDArray NDArray::copy() const {
  detail::check_defined("copy", *this);
  return nd::copy_to(*this, device());
}
NDArray NDArray::copy_to(Device device) const { return nd::copy_to(*this, device); }

NDArray NDArray::sum() const { return nd::sum(*this); }
NDArray NDArray::sum(int axis, bool keepdims) const { return nd::sum(*this, axis, keepdims); }
NDArray NDArray::mean() const { return nd::mean(*this); }
NDArray NDArray::mean(int axis, bool keepdims) const { return nd::mean(*this, axis, keepdims); }
NDArray NDArray::max() const { return nd::max(*this); }
NDArray NDArray::max(int axis, bool keepdims) const { return nd::max(*this, axis, keepdims); }
NDArray NDArray::norm() const { return nd::norm(*this); }
#define ASYNCND_NDARRAY_UNARY(name, Name) \
  NDArray NDArray::name() const { return nd::name(*this); }
ASYNCND_UNARY_OPS(ASYNCND_NDARRAY_UNARY)
#undef ASYNCND_NDARRAY_UNARY
NDArray NDArray::pow(float exponent) const { return nd::pow(*this, exponent); }
NDArray NDArray::pow(const NDArray& exponent) const { return nd::pow(*this, exponent); }

// ---- printing ------------------------------------------------------------------------------

namespace {

// NumPy prints at most this many elements before summarising with "...".
constexpr std::int64_t kPrintThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;

std::string format_value(float v) {
  if (std::isnan(v)) return "nan";  // as NumPy; printf wrote x86's default NaN as "-nan"
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(v));
  return buf;
}

void print_rec(std::ostream& os, const float* p, const Shape& shape, std::size_t dim,
               std::int64_t offset, bool summarise) {
  const std::int64_t n = shape[dim];
  std::int64_t stride = 1;
  for (std::size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
  const bool last = dim + 1 == shape.size();
  const bool cut = summarise && n > 2 * kEdgeItems;
  os << '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdgeItems) {
      os << "...";
      i = n - kEdgeItems;
      if (last) {
        os << ", ";
      } else {  // as between two rows or blocks (NumPy: a blank line on both sides in 3-D)
        os << ',' << std::string(shape.size() - dim - 1, '\n') << std::string(dim + 1, ' ');
      }
    }
    if (last) {
      os << format_value(p[offset + i]);
      if (i + 1 < n) os << ", ";
    } else {
      print_rec(os, p, shape, dim + 1, offset + i * stride, summarise);
      if (i + 1 < n) {
        // Rows on new lines, blocks of a 3-D or higher array separated by blank lines (NumPy).
        os << ',' << std::string(shape.size() - dim - 1, '\n') << std::string(dim + 1, ' ');
      }
    }
  }
  os << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const NDArray& a) {
  detail::check_defined("print", a);
  // The values of a device array are printed from a host copy, made after the array's own wait,
  // as in to_vector.
  const bool on_host = a.chunk()->backend->host_addressable();
  engine().wait_to_read(a.chunk()->var);
  const NDArray host = on_host ? a : a.copy_to(Device::cpu());
  if (!on_host) host.wait_to_read();
  const Shape& shape = a.shape();
  std::ostringstream s;
  if (shape.empty()) {
    s << format_value(host.unsafe_data()[0]);
  } else if (a.size() == 0) {
    s << "[]";
  } else {
    print_rec(s, host.unsafe_data(), shape, 0, 0, a.size() > kPrintThreshold);
  }
  s << " <NDArray ";
  if (shape.empty()) s << "scalar";
  for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? "x" : "") << shape[i];
  s << ' ' << a.device().str() << '>';
  return os << s.str();
}

}  // namespace asyncnd
