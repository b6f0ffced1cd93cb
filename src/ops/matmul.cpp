// Matrix products through BLAS: matmul with broadcast batch dims and linear (x W^T + b).
// Backward: dA = dC B^T, dB = A^T dC (summed over broadcast batch dims).
// Operands whose last two dims are a row-major or transposed matrix are passed to BLAS as
// they are (no copy). On the CPU bf16/fp16 are widened to fp32 for the product; on CUDA cuBLAS
// reads them directly and accumulates in fp32 (rounded once at the end either way). The CUDA
// path takes the same row-major MatrixOperands; kernels/cuda/gemm_mapping.h turns them into
// cuBLAS's column-major arguments (C^T = B^T A^T: operands swapped), in that one place.
#include "kernels/cpu/gemm.h"
#include "src/autograd/node.h"
#include "src/ops/dispatch.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/gemm.h"
#endif

namespace gdn::ops {

namespace {

// A batch of matrices [batch, rows, cols] addressable with one batch stride.
struct MatrixOperand {
  Tensor t;  // keeps the data alive
  bool trans = false;
  int64_t ld = 0, batch_stride = 0;
};

MatrixOperand as_operand(const Tensor& x, int64_t batch, int64_t rows, int64_t cols) {
  // x has shape [batch..., rows, cols] (batch dims possibly broadcast with stride 0).
  auto try_view = [&](const Tensor& t, MatrixOperand& op) -> bool {
    const int64_t nd = t.dim();
    int64_t s_r = t.stride(nd - 2), s_c = t.stride(nd - 1);
    if (s_c == 1 && (s_r >= cols || rows == 1)) {
      op.trans = false;
      op.ld = rows == 1 ? cols : s_r;
    } else if (s_r == 1 && (s_c >= rows || cols == 1)) {
      op.trans = true;
      op.ld = cols == 1 ? rows : s_c;
    } else {
      return false;
    }
    op.ld = std::max<int64_t>(op.ld, 1);
    // Batch dims must collapse to one stride.
    int64_t bs = 0;
    bool first = true;
    int64_t expected = 0;
    for (int64_t i = nd - 3; i >= 0; --i) {
      if (t.size(i) == 1) continue;
      if (first) {
        bs = t.stride(i);
        expected = bs * t.size(i);
        first = false;
      } else {
        if (t.stride(i) != expected) return false;
        expected *= t.size(i);
      }
    }
    op.batch_stride = batch > 1 ? bs : 0;
    op.t = t;
    return true;
  };
  MatrixOperand op;
  if (try_view(x, op)) return op;
  Tensor c = contiguous_copy(x);
  bool ok = try_view(c, op);
  GDN_CHECK(ok, "matmul: cannot lay out operand ", x.str());
  return op;
}

template <typename T>
void run_gemm(const MatrixOperand& a, const MatrixOperand& b, Tensor& out, int64_t batch, int64_t M,
              int64_t N, int64_t K) {
  cpu::gemm_strided_batched<T>(a.trans, b.trans, M, N, K, T(1), a.t.data<T>(), a.ld, a.batch_stride,
                               b.t.data<T>(), b.ld, b.batch_stride, T(0), out.data<T>(), N, M * N,
                               batch);
}

#if defined(GDN_WITH_CUDA)
template <typename T>
void run_gemm_cuda(const MatrixOperand& a, const MatrixOperand& b, Tensor& out, int64_t batch,
                   int64_t M, int64_t N, int64_t K) {
  cuda::gemm_strided_batched<T>(a.trans, b.trans, M, N, K, 1.0, a.t.data<T>(), a.ld, a.batch_stride,
                                b.t.data<T>(), b.ld, b.batch_stride, 0.0, out.data<T>(), N, M * N,
                                batch, detail::stream_of(out.device()));
}
#endif

// The trace's name of a product: "gemm 2048x768x256" (M x N x K), "4 x gemm ..." batched.
std::string gemm_name(int64_t batch, int64_t M, int64_t N, int64_t K) {
  const std::string mnk =
      "gemm " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  return batch > 1 ? std::to_string(batch) + " x " + mnk : mnk;
}

// out [batch_shape, M, N] = a [.., M, K] @ b [.., K, N] with a, b already expanded.
Tensor matmul_raw(const Tensor& a, const Tensor& b, const Shape& batch_shape, int64_t M, int64_t N,
                  int64_t K) {
  Shape out_shape = batch_shape;
  out_shape.push_back(M);
  out_shape.push_back(N);
  const Device dev = a.device();
  Tensor out = empty(out_shape, a.dtype(), dev);
  if (dev.is_meta() || out.numel() == 0) return out;
  const int64_t batch = shape_numel(batch_shape);
  trace::Span span("gemm", gemm_name(batch, M, N, K));
  span.set_flops(2.0 * double(batch) * double(M) * double(N) * double(K));
  if (dev.is_cuda()) {  // every floating dtype as it is
#if defined(GDN_WITH_CUDA)
    auto A = as_operand(a, batch, M, K);
    auto B = as_operand(b, batch, K, N);
    dispatch_dtype<FloatingTypes>(a.dtype(), "matmul", [&](auto tag) {
      using scalar_t = typename decltype(tag)::type;
      run_gemm_cuda<scalar_t>(A, B, out, batch, M, N, K);
    });
    return out;
#else
    GDN_FAIL("matmul: gdn was built without CUDA");
#endif
  }
  if (a.dtype() == DType::float32 || a.dtype() == DType::float64) {
    auto A = as_operand(a, batch, M, K);
    auto B = as_operand(b, batch, K, N);
    if (a.dtype() == DType::float32)
      run_gemm<float>(A, B, out, batch, M, N, K);
    else
      run_gemm<double>(A, B, out, batch, M, N, K);
    return out;
  }
  // Half types: fp32 product, rounded once at the end.
  Tensor af = cast(a.detach(), DType::float32), bf = cast(b.detach(), DType::float32);
  Tensor of = empty(out_shape, DType::float32, dev);
  auto A = as_operand(af, batch, M, K);
  auto B = as_operand(bf, batch, K, N);
  run_gemm<float>(A, B, of, batch, M, N, K);
  copy_(out, of);
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::common_device("matmul", {a, b});
  detail::check_floating("matmul", a);
  detail::check_same_dtype("matmul", a, b);
  GDN_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul needs operands of at least 2 dims, got ",
            shape_str(a.shape()), " and ", shape_str(b.shape()));
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  GDN_CHECK(b.size(-2) == K, "matmul: inner dims differ: ", shape_str(a.shape()), " @ ",
            shape_str(b.shape()));
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb);
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {M, K});
  eb.insert(eb.end(), {K, N});
  Tensor out;
  {
    autograd::NoGradGuard ng;
    out = matmul_raw(expand(a.detach(), ea), expand(b.detach(), eb), batch, M, N, K);
  }
  if (autograd::needs_grad({a, b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    autograd::record("matmul", {a, b}, out,
                     {gb ? a.detach() : Tensor(), ga ? b.detach() : Tensor()},
                     [ga, gb, sa = a.shape(), sb = b.shape()](const std::vector<Tensor>& g,
                                                              const std::vector<Tensor>& s) {
                       Tensor da, db;
                       if (ga) da = sum_to(matmul(g[0], transpose(s[1], -1, -2)), sa);
                       if (gb) db = sum_to(matmul(transpose(s[0], -1, -2), g[0]), sb);
                       return std::vector<Tensor>{da, db};
                     });
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  detail::common_device("linear", {x, w, bias});
  detail::check_same_dtype("linear", x, w);
  GDN_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1), "linear: input ",
            shape_str(x.shape()), " does not match weight ", shape_str(w.shape()), " ([out, in])");
  if (bias.defined())
    GDN_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), "linear: bias ",
              shape_str(bias.shape()), " for weight ", shape_str(w.shape()));
  Shape out_shape = x.shape();
  out_shape.back() = w.size(0);
  Tensor out;
  {
    autograd::NoGradGuard ng;
    Tensor x2 = reshape(x.detach(), {-1, x.size(-1)});
    Tensor y = matmul_raw(x2, transpose(w.detach(), 0, 1), {}, x2.size(0), w.size(0), w.size(1));
    if (bias.defined()) y = add(y, bias.detach());
    out = reshape(y, out_shape);
  }
  if (autograd::needs_grad({x, w, bias})) {
    const bool gx = x.requires_grad(), gw = w.requires_grad();
    const bool gbias = bias.defined() && bias.requires_grad();
    autograd::record("linear", {x, w, bias}, out,
                     {gw ? x.detach() : Tensor(), gx ? w.detach() : Tensor()},
                     [gx, gw, gbias, xs = x.shape()](const std::vector<Tensor>& g,
                                                     const std::vector<Tensor>& s) {
                       Tensor g2 = reshape(g[0], {-1, g[0].size(-1)});
                       Tensor dx, dw, db;
                       if (gx) dx = reshape(matmul(g2, s[1]), xs);
                       if (gw) dw = matmul(transpose(g2, 0, 1), reshape(s[0], {-1, s[0].size(-1)}));
                       if (gbias) db = sum(g2, {0});
                       return std::vector<Tensor>{dx, dw, db};
                     });
  }
  return out;
}

}  // namespace gdn::ops
