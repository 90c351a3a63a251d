// Operators and kernel functions as a library registers them, called through one uniform signature.
#pragma once
#include <tuple>

#include <trnsim/customop.h>

namespace trnsim {

enum ArgKind { kTensorArg = 0, kScalarArg = 1, kDoubleArg = 2, kInt64Arg = 3 };

struct Arg {
  int kind;
  at::Tensor t;
  double d;
  int64_t i;
};

template <class T>
struct ArgTraits {
  static_assert(sizeof(T) == 0, "a Neuron custom operator takes torch::Tensor, torch::Scalar, double or int64_t "
                                "parameters (no std::vector, std::tuple or other integer types)");
};
template <> struct ArgTraits<at::Tensor> {
  enum { kind = kTensorArg };
  static at::Tensor get(const Arg& a) { return a.t; }
};
template <> struct ArgTraits<c10::Scalar> {
  enum { kind = kScalarArg };
  static c10::Scalar get(const Arg& a) { return c10::Scalar(a.d); }
};
template <> struct ArgTraits<double> {
  enum { kind = kDoubleArg };
  static double get(const Arg& a) { return a.d; }
};
template <> struct ArgTraits<int64_t> {
  enum { kind = kInt64Arg };
  static int64_t get(const Arg& a) { return a.i; }
};

using AnyFn = void (*)();
using Invoker = at::Tensor (*)(AnyFn, const std::vector<Arg>&);

template <class R, class... P>
struct Signature {
  static_assert(std::is_same<typename std::decay<R>::type, at::Tensor>::value,
                "a Neuron custom operator returns a torch::Tensor");
  template <size_t... I>
  static at::Tensor call(R (*f)(P...), const std::vector<Arg>& a, std::index_sequence<I...>) {
    std::tuple<typename std::decay<P>::type...> values(ArgTraits<typename std::decay<P>::type>::get(a[I])...);
    (void)values;
    return f(std::get<I>(values)...);
  }
  static at::Tensor invoke(AnyFn fn, const std::vector<Arg>& a) {
    return call(reinterpret_cast<R (*)(P...)>(fn), a, std::index_sequence_for<P...>{});
  }
  static std::string kinds() {
    std::string s;
    int unused[] = {0, (s += char('0' + ArgTraits<typename std::decay<P>::type>::kind), 0)...};
    (void)unused;
    return s;
  }
};

struct Function {
  std::string name;
  AnyFn fn;
  Invoker invoke;
  std::string kinds;
};

struct Op {
  std::string name, kernel;
  Function shape;
};

struct Registry {
  std::vector<std::string> libraries;
  std::vector<Op> ops;
  std::vector<Function> kernels;
};

inline Registry& registry() {
  static Registry r;
  return r;
}

class Library {
 public:
  template <class R, class... P>
  Library& def(const char* op, R (*shape)(P...), const char* kernel) {
    registry().ops.push_back(Op{op, kernel, Function{op, reinterpret_cast<AnyFn>(shape), &Signature<R, P...>::invoke,
                                                     Signature<R, P...>::kinds()}});
    return *this;
  }
};

struct LibraryRegistrar {
  LibraryRegistrar(const char* ns, void (*init)(Library&)) {
    registry().libraries.push_back(ns);
    Library lib;
    init(lib);
  }
};

struct KernelRegistrar {
  template <class R, class... P>
  KernelRegistrar(const char* name, R (*fn)(P...)) {
    registry().kernels.push_back(
        Function{name, reinterpret_cast<AnyFn>(fn), &Signature<R, P...>::invoke, Signature<R, P...>::kinds()});
  }
};

}  // namespace trnsim
