// Element-wise operations shared by the CPU and CUDA kernels, so both compute the same thing.
// Each computes in the accumulator type A (fp32, or fp64 for float64 tensors).
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/numeric.h"

namespace gdn::kern {

enum class Unary : uint8_t {
  neg,
  exp,
  log,
  sigmoid,
  silu,
  softplus,
  rsqrt,
  sqrt,
  square,
  tanh,
  abs,
  affine,  // alpha * x + beta
  pow,     // x ^ alpha
};

// Binary ops: the arithmetic ones, and the backward of each unary op as f(x or y, dy).
enum class Binary : uint8_t {
  add,
  sub,
  mul,
  div,
  sigmoid_grad,   // (y, dy) -> dy * y * (1 - y)
  silu_grad,      // (x, dy) -> dy * s (1 + x (1 - s)),  s = sigmoid(x)
  softplus_grad,  // (x, dy) -> dy * sigmoid(x)
  tanh_grad,      // (y, dy) -> dy * (1 - y^2)
  abs_grad,       // (x, dy) -> dy * sign(x)
  rsqrt_grad,     // (y, dy) -> -0.5 dy y^3
  sqrt_grad,      // (y, dy) -> 0.5 dy / y
  pow_grad,       // (x, dy) -> dy * alpha * x^(alpha-1)   (alpha passed as a parameter)
  maximum,
  minimum,
};

template <typename A>
GDN_HD A sigmoid_of(A x) {
  return A(1) / (A(1) + std::exp(-x));
}

template <typename A>
GDN_HD A softplus_of(A x) {
  // log(1 + e^x); linear above 20 as PyTorch does, log1p form below
  return x > A(20) ? x : std::log1p(std::exp(x));
}

template <typename A>
GDN_HD A apply_unary(Unary op, A x, A alpha, A beta) {
  switch (op) {
    case Unary::neg:
      return -x;
    case Unary::exp:
      return std::exp(x);
    case Unary::log:
      return std::log(x);
    case Unary::sigmoid:
      return sigmoid_of(x);
    case Unary::silu:
      return x * sigmoid_of(x);
    case Unary::softplus:
      return softplus_of(x);
    case Unary::rsqrt:
      return A(1) / std::sqrt(x);
    case Unary::sqrt:
      return std::sqrt(x);
    case Unary::square:
      return x * x;
    case Unary::tanh:
      return std::tanh(x);
    case Unary::abs:
      return x < A(0) ? -x : x;
    case Unary::affine:
      return alpha * x + beta;
    case Unary::pow:
      return std::pow(x, alpha);
  }
  return x;
}

template <typename A>
GDN_HD A apply_binary(Binary op, A a, A b, A alpha) {
  switch (op) {
    case Binary::add:
      return a + b;
    case Binary::sub:
      return a - b;
    case Binary::mul:
      return a * b;
    case Binary::div:
      return a / b;
    case Binary::sigmoid_grad:
      return b * a * (A(1) - a);
    case Binary::silu_grad: {
      A s = sigmoid_of(a);
      return b * s * (A(1) + a * (A(1) - s));
    }
    case Binary::softplus_grad:
      return a > A(20) ? b : b * sigmoid_of(a);
    case Binary::tanh_grad:
      return b * (A(1) - a * a);
    case Binary::abs_grad:
      return a > A(0) ? b : (a < A(0) ? -b : A(0));
    case Binary::rsqrt_grad:
      return A(-0.5) * b * a * a * a;
    case Binary::sqrt_grad:
      return A(0.5) * b / a;
    case Binary::pow_grad:
      return b * alpha * std::pow(a, alpha - A(1));
    case Binary::maximum:
      return a > b ? a : b;
    case Binary::minimum:
      return a < b ? a : b;
  }
  return a;
}

// The last enumerators (with_unary and with_binary instantiate every op from 0 to these).
constexpr Unary kLastUnary = Unary::pow;
constexpr Binary kLastBinary = Binary::minimum;

// Calls f(std::integral_constant<E, op>{}) for the runtime op (an enumerator 0 .. kLast of E; an
// unknown value takes enumerator 0), so loops can be instantiated per op: with the op a
// compile-time constant, apply_unary's (apply_binary's) switch folds away and the loop vectorizes.
template <typename E, typename F, size_t... kOps>
void with_op(E op, F& f, std::index_sequence<kOps...>) {
  const bool found =
      ((op == E(kOps) ? (f(std::integral_constant<E, E(kOps)>{}), true) : false) || ...);
  if (!found) f(std::integral_constant<E, E(0)>{});
}
template <typename F>
void with_unary(Unary op, F&& f) {
  with_op(op, f, std::make_index_sequence<size_t(kLastUnary) + 1>{});
}
template <typename F>
void with_binary(Binary op, F&& f) {
  with_op(op, f, std::make_index_sequence<size_t(kLastBinary) + 1>{});
}

// Converts between any two storage types (bf16 and fp16 through float, whose range and precision
// hold theirs).
template <typename D, typename S>
GDN_HD D convert(S x) {
  if constexpr (std::is_same_v<S, D>) {
    return x;
  } else if constexpr (std::is_same_v<S, bf16> || std::is_same_v<S, fp16>) {
    return convert<D>(float(x));
  } else if constexpr (std::is_same_v<D, bf16> || std::is_same_v<D, fp16>) {
    return D(float(x));
  } else {
    return static_cast<D>(x);
  }
}

// Offset of element `linear` of a row-major iteration over shape with the given strides.
GDN_HD int64_t strided_offset(int64_t linear, int ndim, const int64_t* shape,
                              const int64_t* stride) {
  int64_t off = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    int64_t i = linear % shape[d];
    linear /= shape[d];
    off += i * stride[d];
  }
  return off;
}

// Broadcast layout of a binary op: output contiguous of `shape`, inputs read with their own
// strides (0 along broadcast dimensions).
constexpr int kMaxDims = 8;
struct BroadcastLayout {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride_a[kMaxDims] = {};
  int64_t stride_b[kMaxDims] = {};
};

// Layout of a copy: both sides strided (elements), same shape.
struct CopyLayout {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride_src[kMaxDims] = {};
  int64_t stride_dst[kMaxDims] = {};
};

}  // namespace gdn::kern
