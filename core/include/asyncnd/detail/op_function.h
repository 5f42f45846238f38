// OpFunction: the callable an op runs. Like std::function<void()>, but move-only and with room
// for 136 bytes of captures inline (an op's KernelCall, its backend and what it keeps alive), so
// that pushing an op allocates nothing (libstdc++'s std::function allocates past 16 bytes).
#pragma once

#include <cstddef>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace asyncnd {
namespace detail {

template <class T>
struct IsStdFunction : std::false_type {};
template <class R, class... A>
struct IsStdFunction<std::function<R(A...)>> : std::true_type {};

class OpFunction {
 public:
  static constexpr std::size_t kInline = 136;

  OpFunction() noexcept = default;
  OpFunction(std::nullptr_t) noexcept {}  // NOLINT: implicit, like std::function's

  // Any callable with no arguments: lambdas (move-only ones too), function pointers,
  // std::function. An empty std::function or null pointer gives an empty OpFunction.
  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same<D, OpFunction>::value &&
                                     !std::is_same<D, std::nullptr_t>::value &&
                                     std::is_invocable<D&>::value>>
  OpFunction(F&& f) {  // NOLINT: implicit, so that push(lambda, ...) reads naturally
    if constexpr (IsStdFunction<D>::value || std::is_pointer<D>::value) {
      if (!f) return;
    }
    if constexpr (sizeof(D) <= kInline && alignof(D) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible<D>::value) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      *reinterpret_cast<D**>(buf_) = new D(std::forward<F>(f));
      ops_ = &kHeapOps<D>;
    }
  }

  OpFunction(OpFunction&& o) noexcept : ops_(o.ops_) {
    if (ops_) ops_->move(buf_, o.buf_);
    o.ops_ = nullptr;
  }
  OpFunction& operator=(OpFunction&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      if (ops_) ops_->move(buf_, o.buf_);
      o.ops_ = nullptr;
    }
    return *this;
  }
  OpFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  OpFunction(const OpFunction&) = delete;
  OpFunction& operator=(const OpFunction&) = delete;
  ~OpFunction() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  // Precondition: not empty.
  void operator()() { ops_->invoke(buf_); }

  // Destroys the callable (and what it captured) now.
  void reset() noexcept {
    if (ops_) {
      const Ops* o = ops_;
      ops_ = nullptr;
      o->destroy(buf_);
    }
  }

 private:
  struct Ops {
    void (*invoke)(void*);
    void (*move)(void* dst, void* src) noexcept;  // leaves src destroyed
    void (*destroy)(void*) noexcept;
  };
  template <class D>
  static constexpr Ops kInlineOps = {
      [](void* p) { (*static_cast<D*>(p))(); },
      [](void* dst, void* src) noexcept {
        ::new (dst) D(std::move(*static_cast<D*>(src)));
        static_cast<D*>(src)->~D();
      },
      [](void* p) noexcept { static_cast<D*>(p)->~D(); }};
  template <class D>
  static constexpr Ops kHeapOps = {
      [](void* p) { (**static_cast<D**>(p))(); },
      [](void* dst, void* src) noexcept { *static_cast<D**>(dst) = *static_cast<D**>(src); },
      [](void* p) noexcept { delete *static_cast<D**>(p); }};

  alignas(std::max_align_t) unsigned char buf_[kInline];
  const Ops* ops_ = nullptr;
};

}  // namespace detail
}  // namespace asyncnd
