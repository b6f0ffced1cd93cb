// Element-wise operations shared by the CPU and CUDA kernels, so both compute the same thing.
// Each computes in the accumulator type A (fp32, or fp64 for float64 tensors).
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

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

// Calls f(std::integral_constant<Unary, op>{}) so loops can be instantiated per op: with the op
// a compile-time constant, apply_unary's switch folds away and the loop vectorizes.
#define GDN_UNARY_CASE(OP) \
  case Unary::OP:          \
    return f(std::integral_constant<Unary, Unary::OP>{})
template <typename F>
inline auto with_unary(Unary op, F&& f) {
  switch (op) {
    GDN_UNARY_CASE(neg);
    GDN_UNARY_CASE(exp);
    GDN_UNARY_CASE(log);
    GDN_UNARY_CASE(sigmoid);
    GDN_UNARY_CASE(silu);
    GDN_UNARY_CASE(softplus);
    GDN_UNARY_CASE(rsqrt);
    GDN_UNARY_CASE(sqrt);
    GDN_UNARY_CASE(square);
    GDN_UNARY_CASE(tanh);
    GDN_UNARY_CASE(abs);
    GDN_UNARY_CASE(affine);
    GDN_UNARY_CASE(pow);
  }
  return f(std::integral_constant<Unary, Unary::neg>{});
}
#undef GDN_UNARY_CASE
#define GDN_BINARY_CASE(OP) \
  case Binary::OP:          \
    return f(std::integral_constant<Binary, Binary::OP>{})
template <typename F>
inline auto with_binary(Binary op, F&& f) {
  switch (op) {
    GDN_BINARY_CASE(add);
    GDN_BINARY_CASE(sub);
    GDN_BINARY_CASE(mul);
    GDN_BINARY_CASE(div);
    GDN_BINARY_CASE(sigmoid_grad);
    GDN_BINARY_CASE(silu_grad);
    GDN_BINARY_CASE(softplus_grad);
    GDN_BINARY_CASE(tanh_grad);
    GDN_BINARY_CASE(abs_grad);
    GDN_BINARY_CASE(rsqrt_grad);
    GDN_BINARY_CASE(sqrt_grad);
    GDN_BINARY_CASE(pow_grad);
    GDN_BINARY_CASE(maximum);
    GDN_BINARY_CASE(minimum);
  }
  return f(std::integral_constant<Binary, Binary::add>{});
}
#undef GDN_BINARY_CASE

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
