// The functional op API. Every op validates its inputs (errors name the shapes and dtypes),
// computes the output shape, allocates the output on the inputs' device, runs the kernel for
// that device (none on meta), and records its backward when an input requires grad.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/cuda/conv_cudnn.h"
#include "src/core/tensor.h"

namespace gdn {

// Counter-based random stream (Philox): the same seed gives the same numbers on every device.
struct Generator {
  uint64_t seed = 0;
  uint64_t offset = 0;  // advanced by each draw
  explicit Generator(uint64_t s = 0) : seed(s) {}
};
Generator& default_generator();
void manual_seed(uint64_t seed);

namespace ops {

// ---- creation ------------------------------------------------------------------------------
Tensor empty(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::float32,
            Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor arange(int64_t n, DType dtype = DType::int64, Device device = Device::cpu());
Tensor randn(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu(),
             Generator* gen = nullptr);
Tensor rand(const Shape& shape, DType dtype = DType::float32, Device device = Device::cpu(),
            Generator* gen = nullptr);  // uniform [0, 1)
Tensor randint(const Shape& shape, int64_t low, int64_t high, DType dtype = DType::int64,
               Device device = Device::cpu(), Generator* gen = nullptr);
// A tensor holding `values` (converted to dtype).
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   DType dtype = DType::float32, Device device = Device::cpu());
Tensor scalar_tensor(double value, DType dtype = DType::float32, Device device = Device::cpu());

// ---- in place (no autograd; for optimizers, initialisation and gradient accumulation) -------
void fill_(Tensor& t, double value);
void zero_(Tensor& t);
void normal_(Tensor& t, double mean, double std, Generator* gen = nullptr);
void uniform_(Tensor& t, double low, double high, Generator* gen = nullptr);
void copy_(Tensor& dst, const Tensor& src);  // same shape; casts dtype, crosses devices
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);  // dst += alpha * src
void mul_(Tensor& dst, double s);

// ---- element-wise (broadcasting) -----------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor affine(const Tensor& a, double alpha, double beta);  // alpha * a + beta
Tensor rsub(const Tensor& a, double s);                     // s - a
Tensor pow(const Tensor& a, double p);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor silu(const Tensor& a);
Tensor softplus(const Tensor& a);  // log(1 + e^x), linear above 20 as in PyTorch
Tensor rsqrt(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor square(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor abs(const Tensor& a);

// ---- reductions ----------------------------------------------------------------------------
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor sum(const Tensor& a);  // all elements, shape []
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor max(const Tensor& a, int64_t dim, bool keepdim = false);
// Reduces a broadcast gradient back to `shape` (sums over broadcast dimensions).
Tensor sum_to(const Tensor& a, const Shape& shape);

// ---- linear algebra ------------------------------------------------------------------------
// [..., M, K] @ [..., K, N] with broadcast batch dims; 1-d operands are not promoted.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., in] @ w[out, in]^T (+ bias [out]): the Linear layer without a transpose copy.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());

// ---- neural-network ops --------------------------------------------------------------------
Tensor softmax(const Tensor& a, int64_t dim = -1);
Tensor log_softmax(const Tensor& a, int64_t dim = -1);
// Mean over non-ignored rows of -log softmax(logits)[target]; logits [N, V], targets int [N].
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// weight [V, D] gathered by integer indices of any shape -> [..., D].
Tensor embedding(const Tensor& weight, const Tensor& indices);
// x * rsqrt(mean(x^2, -1) + eps) * weight   (weight [D] or undefined)
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// x / sqrt(sum(x^2, -1) + eps)
Tensor l2_norm(const Tensor& x, double eps = 1e-6);
// Causal depthwise conv1d over time: x [B, T, C], weight [C, W] (or [C, 1, W]);
// y[b,t,c] = sum_j w[c,j] x[b, t-W+1+j, c], zero left padding. With cu_seqlens (fla's packed
// sequences: B = 1, host offsets 0 = cu[0] < ... < cu[N] = T) each sequence is padded with zeros
// at its own start: no tap reads across a boundary, forward or backward. `impl`: CUDA's path
// (direct kernel or cuDNN, model.conv1d_impl; the CPU has one kernel).
Tensor causal_conv1d(const Tensor& x, const Tensor& weight,
                     const std::vector<int64_t>& cu_seqlens = {},
                     cuda::Conv1dImpl impl = cuda::Conv1dImpl::direct);

// ---- fused layer ops (one CPU pass each way instead of one per op; src/ops/fused.cpp, and the
// conv's in nn.cpp; on CUDA they run the unfused ops they replace) ---------------------------
// silu(causal_conv1d(x, weight, cu_seqlens)); backward recomputes the conv instead of saving it.
Tensor causal_conv1d_silu(const Tensor& x, const Tensor& weight,
                          const std::vector<int64_t>& cu_seqlens = {},
                          cuda::Conv1dImpl impl = cuda::Conv1dImpl::direct);
// l2_norm(silu(causal_conv1d(x, weight)), eps) over each head of head_dim channels (C = heads x
// head_dim): a delta-rule layer's q and k in one pass; backward recomputes the conv and the norms.
Tensor causal_conv1d_silu_l2norm(const Tensor& x, const Tensor& weight, int64_t head_dim,
                                 double eps, const std::vector<int64_t>& cu_seqlens = {},
                                 cuda::Conv1dImpl impl = cuda::Conv1dImpl::direct);
// SwiGLU: silu(gate) * up, same shapes.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// rms_norm(x, weight, eps) * act(gate), act = sigmoid or silu; gate the shape of x.
Tensor gated_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& gate, double eps,
                      bool sigmoid_gate);
// The pre-norm residual: {h, rms_norm(h, weight, eps)} with h = x + residual (same shapes).
std::pair<Tensor, Tensor> add_rms_norm(const Tensor& x, const Tensor& residual,
                                       const Tensor& weight, double eps);

// ---- shape ---------------------------------------------------------------------------------
Tensor view(const Tensor& a, const Shape& shape);     // no copy; requires compatible strides
Tensor reshape(const Tensor& a, const Shape& shape);  // view when possible, else a copy
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor transpose(const Tensor& a, int64_t d0, int64_t d1);
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);
Tensor expand(const Tensor& a, const Shape& shape);  // broadcast view (stride 0)
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end);  // [start, end)
Tensor concat(const std::vector<Tensor>& ts, int64_t dim);
Tensor contiguous(const Tensor& a);       // a itself when already contiguous
Tensor contiguous_copy(const Tensor& a);  // always a fresh buffer (no autograd)
Tensor cast(const Tensor& a, DType dtype);
Tensor to_device(const Tensor& a, Device device);

// Resolved -1 in a shape given the element count; throws naming both.
Shape infer_shape(const Shape& shape, int64_t numel);

}  // namespace ops

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator*(double s, const Tensor& a);
Tensor operator-(const Tensor& a);

}  // namespace gdn
