// Neural-network ops with fused forward/backward kernels: softmax, cross-entropy, embedding,
// RMSNorm, L2 norm, causal depthwise conv1d. The math of each backward is next to its kernel
// in kernels/cpu/; the CUDA kernels (kernels/cuda/) keep the same contracts (the conv also has a
// cuDNN implementation, chosen with GDN_CONV1D=direct|cudnn). On CUDA the ops read device memory
// from the host only for the bad-index checks of cross_entropy and embedding (one int64 copied
// back).
#include <algorithm>

#include "kernels/cpu/fused.h"
#include "kernels/cpu/nn.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/nn.h"  // a plain header: its scratch sizes are used in every build
#include "kernels/gated_delta_rule.h"
#include "src/autograd/node.h"
#include "src/core/allocator.h"
#include "src/ops/dispatch.h"
#include "src/ops/kernel_scratch.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include <cstdlib>

#include "kernels/cuda/conv_cudnn.h"
#include "kernels/cuda/reduce.h"
#endif

namespace gdn::ops {

using detail::acc_dtype;
using detail::stream_of;

namespace {

// Scratch of a CUDA kernel (tagged workspace; freed after the call, in stream order); none
// on other devices.
Tensor cuda_scratch(Device dev, int64_t elems, DType dtype) {
  if (!dev.is_cuda()) return Tensor();
  MemoryCategoryScope cat(MemCategory::workspace);
  return empty({std::max<int64_t>(elems, 1)}, dtype, dev);
}

// Rows view: [N, D] contiguous over the last dim.
Tensor rows_of(const Tensor& x) {
  return contiguous(x.detach());
}
int64_t num_rows(const Tensor& x) {
  return x.dim() ? x.numel() / x.size(-1) : 1;
}

Tensor softmax_impl(const Tensor& a, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  detail::check_floating(name, a);
  const int64_t d = wrap_dim(dim, a.dim());
  if (d != a.dim() - 1) {  // move the dim last and back
    Tensor t = transpose(a, d, -1);
    return transpose(softmax_impl(t, -1, log), d, -1);
  }
  Tensor x = rows_of(a);
  const Device dev = a.device();
  Tensor y = empty(a.shape(), a.dtype(), dev);
  const int64_t n = num_rows(a), cols = a.dim() ? a.size(-1) : 1;
  dispatch_dtype<FloatingTypes>(a.dtype(), name, [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(
        dev, name, cpu::softmax_rows(x.data<scalar_t>(), y.data<scalar_t>(), n, cols, log),
        cuda::softmax_rows(x.data<scalar_t>(), y.data<scalar_t>(), n, cols, log, stream_of(dev)));
  });
  if (autograd::needs_grad({a}))
    autograd::record(
        name, {a}, y, {y.detach()},
        [log, n, cols, name](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
          Tensor gc = contiguous(g[0]);
          const Device dev = s[0].device();
          Tensor dx = empty(s[0].shape(), s[0].dtype(), dev);
          dispatch_dtype<FloatingTypes>(dx.dtype(), name, [&](auto tag) {
            using scalar_t = typename decltype(tag)::type;
            GDN_RUN_ON_DEVICE(
                dev, name,
                cpu::softmax_rows_backward(s[0].data<scalar_t>(), gc.data<scalar_t>(),
                                           dx.data<scalar_t>(), n, cols, log),
                cuda::softmax_rows_backward(s[0].data<scalar_t>(), gc.data<scalar_t>(),
                                            dx.data<scalar_t>(), n, cols, log, stream_of(dev)));
          });
          return std::vector<Tensor>{dx};
        });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) {
  return softmax_impl(a, dim, false);
}
Tensor log_softmax(const Tensor& a, int64_t dim) {
  return softmax_impl(a, dim, true);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  detail::common_device("cross_entropy", {logits, targets});
  detail::check_floating("cross_entropy", logits);
  GDN_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
            "cross_entropy: logits ", shape_str(logits.shape()), " ([N, V]) and targets ",
            shape_str(targets.shape()), " ([N])");
  const int64_t n = logits.size(0), v = logits.size(1);
  const DType ad = acc_dtype(logits.dtype());
  const Device dev = logits.device();
  Tensor x = rows_of(logits), t = contiguous(targets.detach());
  Tensor lse = empty({n}, ad, dev);
  Tensor stats = empty({2}, ad, dev);  // {loss, count}
  if (!dev.is_meta()) {
    int64_t bad = -1;
    Tensor row_loss = cuda_scratch(dev, n, ad), bad_dev = cuda_scratch(dev, 1, DType::int64);
    dispatch_dtype<FloatingTypes>(logits.dtype(), "cross_entropy", [&](auto tag) {
      using scalar_t = typename decltype(tag)::type;
      using A = acc_t<scalar_t>;
      dispatch_dtype<IndexTypes>(t.dtype(), "cross_entropy", [&](auto tag1) {
        using index_t = typename decltype(tag1)::type;
        GDN_RUN_ON_DEVICE(
            dev, "cross_entropy",
            cpu::cross_entropy_forward(x.data<scalar_t>(), t.data<index_t>(), n, v, ignore_index,
                                       lse.data<A>(), stats.data<A>(), &bad),
            cuda::cross_entropy_forward(x.data<scalar_t>(), t.data<index_t>(), n, v, ignore_index,
                                        lse.data<A>(), row_loss.data<A>(), stats.data<A>(),
                                        bad_dev.data<int64_t>(), stream_of(dev)));
      });
    });
    if (dev.is_cuda()) bad = int64_t(bad_dev.item());  // the one value read back
    GDN_CHECK(bad < 0, "cross_entropy: target ", int64_t(t.to_vector()[size_t(bad)]), " at row ",
              bad, " is outside the vocabulary [0, ", v, ")");
  }
  Tensor loss = reshape(slice(stats, 0, 0, 1), {});
  if (autograd::needs_grad({logits})) {
    autograd::record(
        "cross_entropy", {logits, targets}, loss, {x, t, lse, stats},
        [n, v, ignore_index](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
          const Tensor &x = s[0], &t = s[1], &lse = s[2], &stats = s[3];
          Tensor dl = contiguous(cast(g[0], lse.dtype()));
          const Device dev = x.device();
          Tensor dx = empty(x.shape(), x.dtype(), dev);
          if (!dev.is_meta()) {
            dispatch_dtype<FloatingTypes>(x.dtype(), "cross_entropy backward", [&](auto tag) {
              using scalar_t = typename decltype(tag)::type;
              using A = acc_t<scalar_t>;
              dispatch_dtype<IndexTypes>(t.dtype(), "cross_entropy", [&](auto tag1) {
                using index_t = typename decltype(tag1)::type;
                GDN_RUN_ON_DEVICE(
                    dev, "cross_entropy backward",
                    cpu::cross_entropy_backward(x.data<scalar_t>(), t.data<index_t>(),
                                                lse.data<A>(), stats.data<A>(), dl.data<A>(), n, v,
                                                ignore_index, dx.data<scalar_t>()),
                    cuda::cross_entropy_backward(
                        x.data<scalar_t>(), t.data<index_t>(), lse.data<A>(), stats.data<A>(),
                        dl.data<A>(), n, v, ignore_index, dx.data<scalar_t>(), stream_of(dev)));
              });
            });
          }
          return std::vector<Tensor>{dx, Tensor()};
        });
  }
  return loss;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  detail::common_device("embedding", {weight, indices});
  GDN_CHECK(weight.dim() == 2, "embedding: weight must be [V, D], got ", shape_str(weight.shape()));
  const int64_t v = weight.size(0), d = weight.size(1), n = indices.numel();
  Shape out_shape = indices.shape();
  out_shape.push_back(d);
  const Device dev = weight.device();
  Tensor w = contiguous(weight.detach()), idx = contiguous(indices.detach());
  Tensor out = empty(out_shape, weight.dtype(), dev);
  if (!dev.is_meta()) {
    int64_t bad = -1;
    Tensor bad_dev = cuda_scratch(dev, 1, DType::int64);
    dispatch_dtype<FloatingTypes>(weight.dtype(), "embedding", [&](auto tag) {
      using scalar_t = typename decltype(tag)::type;
      dispatch_dtype<IndexTypes>(idx.dtype(), "embedding", [&](auto tag1) {
        using index_t = typename decltype(tag1)::type;
        GDN_RUN_ON_DEVICE(
            dev, "embedding",
            cpu::embedding_forward(w.data<scalar_t>(), idx.data<index_t>(), n, v, d,
                                   out.data<scalar_t>(), &bad),
            cuda::embedding_forward(w.data<scalar_t>(), idx.data<index_t>(), n, v, d,
                                    out.data<scalar_t>(), bad_dev.data<int64_t>(), stream_of(dev)));
      });
    });
    if (dev.is_cuda()) bad = int64_t(bad_dev.item());  // the one value read back
    GDN_CHECK(bad < 0, "embedding: index ", int64_t(idx.to_vector()[size_t(bad)]), " at position ",
              bad, " is outside the table [0, ", v, ")");
  }
  if (autograd::needs_grad({weight}))
    autograd::record(
        "embedding", {weight, indices}, out, {idx},
        [v, d, n, dtype = weight.dtype()](const std::vector<Tensor>& g,
                                          const std::vector<Tensor>& s) {
          Tensor gc = contiguous(g[0]);
          const Device dev = gc.device();
          Tensor dw = empty({v, d}, dtype, dev);
          if (!dev.is_meta())
            dispatch_dtype<FloatingTypes>(dtype, "embedding backward", [&](auto tag) {
              using scalar_t = typename decltype(tag)::type;
              dispatch_dtype<IndexTypes>(s[0].dtype(), "embedding", [&](auto tag1) {
                using index_t = typename decltype(tag1)::type;
                GDN_RUN_ON_DEVICE(
                    dev, "embedding backward",
                    cpu::embedding_backward(gc.data<scalar_t>(), s[0].data<index_t>(), n, v, d,
                                            dw.data<scalar_t>()),
                    cuda::embedding_backward(gc.data<scalar_t>(), s[0].data<index_t>(), n, v, d,
                                             dw.data<scalar_t>(), stream_of(dev)));
              });
            });
          return std::vector<Tensor>{dw, Tensor()};
        });
  return out;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  detail::common_device("rms_norm", {x, weight});
  detail::check_floating("rms_norm", x);
  const int64_t d = x.size(-1), n = num_rows(x);
  if (weight.defined()) {
    detail::check_same_dtype("rms_norm", x, weight);
    GDN_CHECK(weight.dim() == 1 && weight.size(0) == d, "rms_norm: weight ",
              shape_str(weight.shape()), " for input ", shape_str(x.shape()));
  }
  Tensor xc = rows_of(x);
  Tensor w = weight.defined() ? contiguous(weight.detach()) : Tensor();
  const Device dev = x.device();
  Tensor y = empty(x.shape(), x.dtype(), dev);
  Tensor rstd = empty({n}, acc_dtype(x.dtype()), dev);
  dispatch_dtype<FloatingTypes>(x.dtype(), "rms_norm", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    using A = acc_t<scalar_t>;
    const scalar_t* wp = w.defined() ? w.data<scalar_t>() : nullptr;
    GDN_RUN_ON_DEVICE(dev, "rms_norm",
                      cpu::rms_norm_forward(xc.data<scalar_t>(), wp, n, d, eps, y.data<scalar_t>(),
                                            rstd.data<A>()),
                      cuda::rms_norm_forward(xc.data<scalar_t>(), wp, n, d, eps, y.data<scalar_t>(),
                                             rstd.data<A>(), stream_of(dev)));
  });
  if (autograd::needs_grad({x, weight}))
    autograd::record(
        "rms_norm", {x, weight}, y, {xc, w, rstd},
        [n, d, want_w = weight.defined() && weight.requires_grad()](const std::vector<Tensor>& g,
                                                                    const std::vector<Tensor>& s) {
          const Tensor &xc = s[0], &w = s[1], &rstd = s[2];
          Tensor gc = contiguous(g[0]);
          const Device dev = xc.device();
          Tensor dx = empty(xc.shape(), xc.dtype(), dev);
          Tensor dw = want_w ? empty({d}, xc.dtype(), dev) : Tensor();
          Tensor ws = want_w
                          ? cuda_scratch(dev, cuda::rms_norm_backward_workspace(n, d), rstd.dtype())
                          : Tensor();
          dispatch_dtype<FloatingTypes>(xc.dtype(), "rms_norm backward", [&](auto tag) {
            using scalar_t = typename decltype(tag)::type;
            using A = acc_t<scalar_t>;
            const scalar_t* wp = w.defined() ? w.data<scalar_t>() : nullptr;
            scalar_t* dwp = want_w ? dw.data<scalar_t>() : nullptr;
            GDN_RUN_ON_DEVICE(
                dev, "rms_norm backward",
                cpu::rms_norm_backward(xc.data<scalar_t>(), wp, rstd.data<A>(), gc.data<scalar_t>(),
                                       n, d, dx.data<scalar_t>(), dwp),
                cuda::rms_norm_backward(xc.data<scalar_t>(), wp, rstd.data<A>(),
                                        gc.data<scalar_t>(), n, d, dx.data<scalar_t>(), dwp,
                                        want_w ? ws.data<A>() : nullptr, stream_of(dev)));
          });
          return std::vector<Tensor>{dx, dw};
        });
  return y;
}

Tensor l2_norm(const Tensor& x, double eps) {
  detail::check_floating("l2_norm", x);
  const int64_t d = x.size(-1), n = num_rows(x);
  Tensor xc = rows_of(x);
  const Device dev = x.device();
  Tensor y = empty(x.shape(), x.dtype(), dev);
  Tensor rn = empty({n}, acc_dtype(x.dtype()), dev);
  dispatch_dtype<FloatingTypes>(x.dtype(), "l2_norm", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    using A = acc_t<scalar_t>;
    GDN_RUN_ON_DEVICE(
        dev, "l2_norm",
        cpu::l2_norm_forward(xc.data<scalar_t>(), n, d, eps, y.data<scalar_t>(), rn.data<A>()),
        cuda::l2_norm_forward(xc.data<scalar_t>(), n, d, eps, y.data<scalar_t>(), rn.data<A>(),
                              stream_of(dev)));
  });
  if (autograd::needs_grad({x}))
    autograd::record(
        "l2_norm", {x}, y, {y.detach(), rn},
        [n, d](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
          Tensor gc = contiguous(g[0]);
          const Device dev = s[0].device();
          Tensor dx = empty(s[0].shape(), s[0].dtype(), dev);
          dispatch_dtype<FloatingTypes>(dx.dtype(), "l2_norm backward", [&](auto tag) {
            using scalar_t = typename decltype(tag)::type;
            using A = acc_t<scalar_t>;
            GDN_RUN_ON_DEVICE(
                dev, "l2_norm backward",
                cpu::l2_norm_backward(s[0].data<scalar_t>(), s[1].data<A>(), gc.data<scalar_t>(), n,
                                      d, dx.data<scalar_t>()),
                cuda::l2_norm_backward(s[0].data<scalar_t>(), s[1].data<A>(), gc.data<scalar_t>(),
                                       n, d, dx.data<scalar_t>(), stream_of(dev)));
          });
          return std::vector<Tensor>{dx};
        });
  return y;
}

#if defined(GDN_WITH_CUDA)
namespace {

// The CUDA conv is the direct kernel or cuDNN: the op's impl (model.conv1d_impl) through
// cuda::conv1d_impl (kernels/cuda/conv_cudnn.h), the one place the choice is made.
template <typename T>
bool conv1d_on_cudnn(cuda::Conv1dImpl impl) {
  return cuda::conv1d_impl(impl, cuda::kCudnnConv1dType<T>) == cuda::Conv1dImpl::cudnn;
}

// cuDNN's workspace as a byte buffer (float32 elements; the allocator's blocks are 512-byte
// aligned).
Tensor cuda_scratch_bytes(Device dev, size_t bytes) {
  return cuda_scratch(dev, int64_t((bytes + 3) / 4), DType::float32);
}

// cuDNN cannot restart a convolution inside a row: packed input (seq_start) runs direct.
template <typename T>
void conv1d_forward_cuda(const T* x, const T* w, int64_t b, int64_t t, int64_t c, int64_t k, T* y,
                         const int64_t* seq_start, Device dev, cuda::Conv1dImpl impl) {
  void* s = stream_of(dev);
  if constexpr (cuda::kCudnnConv1dType<T>) {
    if (!seq_start && conv1d_on_cudnn<T>(impl)) {
      const size_t bytes = cuda::causal_conv1d_cudnn_forward_workspace<T>(b, t, c, k, s);
      Tensor ws = cuda_scratch_bytes(dev, bytes);
      return cuda::causal_conv1d_cudnn_forward<T>(x, w, b, t, c, k, y, ws.data_ptr(), bytes, s);
    }
  }
  cuda::causal_conv1d_forward<T>(x, w, b, t, c, k, y, s, seq_start);
}

template <typename T>
void conv1d_backward_cuda(const T* x, const T* w, const T* dy, int64_t b, int64_t t, int64_t c,
                          int64_t k, T* dx, T* dw, const int64_t* seq_start, Device dev,
                          cuda::Conv1dImpl impl) {
  void* s = stream_of(dev);
  if constexpr (cuda::kCudnnConv1dType<T>) {
    if (!seq_start && conv1d_on_cudnn<T>(impl)) {
      const size_t bytes = cuda::causal_conv1d_cudnn_backward_workspace<T>(
          b, t, c, k, dx != nullptr, dw != nullptr, s);
      Tensor ws = cuda_scratch_bytes(dev, bytes);
      return cuda::causal_conv1d_cudnn_backward<T>(x, w, dy, b, t, c, k, dx, dw, ws.data_ptr(),
                                                   bytes, s);
    }
  }
  Tensor ws = dw ? cuda_scratch(dev, cuda::causal_conv1d_backward_workspace(b, t, c, k),
                                dtype_of<acc_t<T>>::value)
                 : Tensor();
  cuda::causal_conv1d_backward<T>(x, w, dy, b, t, c, k, dx, dw, dw ? ws.data<acc_t<T>>() : nullptr,
                                  s, seq_start);
}

}  // namespace
#endif

namespace {

// seq_start [T] int64 on x's device: the first position of the packed sequence holding each
// position (cu_seqlens validated against B = 1 and T); undefined without cu_seqlens.
Tensor conv_seq_starts(const std::vector<int64_t>& cu, int64_t b, int64_t t, Device dev) {
  if (cu.empty()) return Tensor();
  try {
    gdr::validate_cu_seqlens(cu, b, t);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL("causal_conv1d: ", e.what());
  }
  if (dev.is_meta()) return empty({t}, DType::int64, dev);  // shapes only: nothing to fill
  Tensor host = Tensor::empty({t}, DType::int64);
  int64_t* p = host.data<int64_t>();
  for (size_t n = 0; n + 1 < cu.size(); ++n) std::fill(p + cu[n], p + cu[n + 1], cu[n]);
  return dev.is_cpu() ? host : to_device(host, dev);
}

const int64_t* seq_start_ptr(const Tensor& starts) {
  return starts.defined() ? starts.data<int64_t>() : nullptr;
}

}  // namespace

Tensor causal_conv1d(const Tensor& x, const Tensor& weight_in,
                     const std::vector<int64_t>& cu_seqlens, cuda::Conv1dImpl impl) {
  detail::common_device("causal_conv1d", {x, weight_in});
  detail::check_same_dtype("causal_conv1d", x, weight_in);
  Tensor weight = weight_in;
  if (weight.dim() == 3) {
    GDN_CHECK(weight.size(1) == 1, "causal_conv1d: depthwise weight must be [C, 1, W], got ",
              shape_str(weight.shape()));
    weight = reshape(weight, {weight.size(0), weight.size(2)});
  }
  GDN_CHECK(x.dim() == 3 && weight.dim() == 2 && weight.size(0) == x.size(2),
            "causal_conv1d: input ", shape_str(x.shape()), " ([B, T, C]) and weight ",
            shape_str(weight_in.shape()), " ([C, W])");
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2), k = weight.size(1);
  Tensor xc = contiguous(x.detach()), wc = contiguous(weight.detach());
  const Device dev = x.device();
  Tensor starts = conv_seq_starts(cu_seqlens, b, t, dev);
  Tensor y = empty(x.shape(), x.dtype(), dev);
  dispatch_dtype<FloatingTypes>(x.dtype(), "causal_conv1d", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(dev, "causal_conv1d",
                      cpu::causal_conv1d_forward(xc.data<scalar_t>(), wc.data<scalar_t>(), b, t, c,
                                                 k, y.data<scalar_t>(), seq_start_ptr(starts)),
                      conv1d_forward_cuda(xc.data<scalar_t>(), wc.data<scalar_t>(), b, t, c, k,
                                          y.data<scalar_t>(), seq_start_ptr(starts), dev, impl));
  });
  if (autograd::needs_grad({x, weight}))
    autograd::record(
        "causal_conv1d", {x, weight}, y, {xc, wc, starts},
        [b, t, c, k, impl, gx = x.requires_grad(), gw = weight.requires_grad()](
            const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
          Tensor gc = contiguous(g[0]);
          const Device dev = gc.device();
          Tensor dx = gx ? empty(s[0].shape(), s[0].dtype(), dev) : Tensor();
          Tensor dw = gw ? empty(s[1].shape(), s[1].dtype(), dev) : Tensor();
          const int64_t* st = seq_start_ptr(s[2]);
          dispatch_dtype<FloatingTypes>(gc.dtype(), "causal_conv1d backward", [&](auto tag) {
            using scalar_t = typename decltype(tag)::type;
            scalar_t* dxp = gx ? dx.data<scalar_t>() : nullptr;
            scalar_t* dwp = gw ? dw.data<scalar_t>() : nullptr;
            GDN_RUN_ON_DEVICE(
                dev, "causal_conv1d backward",
                cpu::causal_conv1d_backward(s[0].data<scalar_t>(), s[1].data<scalar_t>(),
                                            gc.data<scalar_t>(), b, t, c, k, dxp, dwp, st),
                conv1d_backward_cuda(s[0].data<scalar_t>(), s[1].data<scalar_t>(),
                                     gc.data<scalar_t>(), b, t, c, k, dxp, dwp, st, dev, impl));
          });
          return std::vector<Tensor>{dx, dw};
        });
  return y;
}

namespace {

// silu(causal_conv1d(x, weight)), each group of norm_dim channels then L2-normed when norm_dim > 0.
Tensor conv_silu(const char* name, const Tensor& x, const Tensor& weight_in,
                 const std::vector<int64_t>& cu_seqlens, cuda::Conv1dImpl impl, int64_t norm_dim,
                 double eps) {
  const Device dev = detail::common_device(name, {x, weight_in});
  if (norm_dim > 0)
    GDN_CHECK(x.dim() == 3 && x.size(2) % norm_dim == 0, name, ": input ", shape_str(x.shape()),
              " ([B, T, C]) does not split into heads of ", norm_dim, " channels");
  if (dev.is_cuda()) {  // CUDA: the unfused ops
    Tensor y = silu(causal_conv1d(x, weight_in, cu_seqlens, impl));
    if (norm_dim == 0) return y;
    const Shape heads = {x.size(0), x.size(1), x.size(2) / norm_dim, norm_dim};
    return reshape(l2_norm(reshape(y, heads), eps), x.shape());
  }
  detail::check_same_dtype(name, x, weight_in);
  detail::check_floating(name, x);
  Tensor weight = weight_in;
  if (weight.dim() == 3) {
    GDN_CHECK(weight.size(1) == 1, name, ": depthwise weight must be [C, 1, W], got ",
              shape_str(weight.shape()));
    weight = reshape(weight, {weight.size(0), weight.size(2)});
  }
  GDN_CHECK(x.dim() == 3 && weight.dim() == 2 && weight.size(0) == x.size(2), name, ": input ",
            shape_str(x.shape()), " ([B, T, C]) and weight ", shape_str(weight_in.shape()),
            " ([C, W])");
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2), k = weight.size(1);
  Tensor xc = contiguous(x.detach()), wc = contiguous(weight.detach());
  Tensor starts = conv_seq_starts(cu_seqlens, b, t, dev);
  Tensor y = empty(x.shape(), x.dtype(), dev);
  dispatch_dtype<FloatingTypes>(x.dtype(), name, [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    trace::Span span("kernel", name);
    if (dev.is_cpu())
      cpu::causal_conv1d_silu_forward(xc.data<scalar_t>(), wc.data<scalar_t>(), b, t, c, k,
                                      y.data<scalar_t>(), seq_start_ptr(starts), norm_dim, eps);
  });
  // Saves x and w only: backward recomputes the conv (W taps) and the norms rather than storing
  // [B, T, C].
  if (autograd::needs_grad({x, weight}))
    autograd::record(
        name, {x, weight}, y, {xc, wc, starts},
        [name, b, t, c, k, norm_dim, eps, gx = x.requires_grad(), gw = weight.requires_grad()](
            const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
          Tensor gc = contiguous(g[0]);
          const Device dev = gc.device();
          Tensor dx = gx ? empty(s[0].shape(), s[0].dtype(), dev) : Tensor();
          Tensor dw = gw ? empty(s[1].shape(), s[1].dtype(), dev) : Tensor();
          const int64_t* st = seq_start_ptr(s[2]);
          const std::string backward_name = std::string(name) + " backward";
          dispatch_dtype<FloatingTypes>(gc.dtype(), backward_name.c_str(), [&](auto tag) {
            using scalar_t = typename decltype(tag)::type;
            if (!dev.is_cpu()) return;
            trace::Span span("kernel", backward_name.c_str());
            cpu::causal_conv1d_silu_backward(s[0].data<scalar_t>(), s[1].data<scalar_t>(),
                                             gc.data<scalar_t>(), b, t, c, k,
                                             gx ? dx.data<scalar_t>() : nullptr,
                                             gw ? dw.data<scalar_t>() : nullptr, st, norm_dim, eps);
          });
          return std::vector<Tensor>{dx, dw};
        });
  return y;
}

}  // namespace

Tensor causal_conv1d_silu(const Tensor& x, const Tensor& weight,
                          const std::vector<int64_t>& cu_seqlens, cuda::Conv1dImpl impl) {
  return conv_silu("causal_conv1d_silu", x, weight, cu_seqlens, impl, 0, 0.0);
}

Tensor causal_conv1d_silu_l2norm(const Tensor& x, const Tensor& weight, int64_t head_dim,
                                 double eps, const std::vector<int64_t>& cu_seqlens,
                                 cuda::Conv1dImpl impl) {
  GDN_CHECK(head_dim > 0, "causal_conv1d_silu_l2norm: head_dim must be positive, got ", head_dim);
  return conv_silu("causal_conv1d_silu_l2norm", x, weight, cu_seqlens, impl, head_dim, eps);
}

}  // namespace gdn::ops
