// FunctionRef: a non-owning reference to a callable (as absl::FunctionRef), for calls that run
// the callable before they return: no allocation and no copy of its captures, where a
// std::function of a lambda with more than two pointers' worth of captures allocates on the heap
// (the fast path of every blocking collective passes one).
#pragma once

#include <type_traits>
#include <utility>

namespace braid::detail {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  /// Refers to `f`, which must outlive every call through this reference.
  template <typename F, typename = std::enable_if_t<
                            !std::is_same_v<std::decay_t<F>, FunctionRef> &&
                            std::is_invocable_r_v<R, const std::decay_t<F>&, Args...>>>
  FunctionRef(const F& f)  // NOLINT(google-explicit-constructor): as a function parameter
      : obj_(static_cast<const void*>(&f)), call_([](const void* obj, Args... args) -> R {
          return (*static_cast<const F*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  const void* obj_;
  R (*call_)(const void*, Args...);
};

}  // namespace braid::detail
