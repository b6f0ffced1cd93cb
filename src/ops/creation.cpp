// Creation, random and in-place ops (fill, copy, axpy). No autograd: these make leaves or
// update buffers under no-grad.
#include "kernels/cpu/elementwise.h"
#include "src/autograd/node.h"
#include "src/ops/dispatch.h"
#include "src/ops/layout.h"
#include "src/ops/ops.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/elementwise.h"
#endif

namespace gdn {

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}
void manual_seed(uint64_t seed) {
  default_generator() = Generator(seed);
}

namespace ops {

using detail::stream_of;

Tensor empty(const Shape& shape, DType dtype, Device device) {
  return Tensor::empty(shape, dtype, device);
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  fill_(t, value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor zeros_like(const Tensor& t) {
  return zeros(t.shape(), t.dtype(), t.device());
}
Tensor ones_like(const Tensor& t) {
  return ones(t.shape(), t.dtype(), t.device());
}

Tensor arange(int64_t n, DType dtype, Device device) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i);
  return from_vector(v, {n}, dtype, device);
}

Tensor scalar_tensor(double value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype,
                   Device device) {
  GDN_CHECK(int64_t(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
            " values for shape ", shape_str(shape));
  Tensor host = empty(shape, DType::float64, Device::cpu());
  std::copy(values.begin(), values.end(), host.data<double>());
  Tensor out = empty(shape, dtype, device);
  copy_(out, host);
  return out;
}

void fill_(Tensor& t, double value) {
  GDN_CHECK(t.is_contiguous(), "fill_ needs a contiguous tensor, got strides ",
            shape_str(t.strides()));
  const Device dev = t.device();
  dispatch_dtype<AllTypes>(t.dtype(), "fill_", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(dev, "fill_", cpu::fill(t.data<scalar_t>(), t.numel(), value),
                      cuda::fill(t.data<scalar_t>(), t.numel(), value, stream_of(dev)));
  });
}

void zero_(Tensor& t) {
  fill_(t, 0.0);
}

namespace {
Generator& pick(Generator* g) {
  return g ? *g : default_generator();
}

// The generator's seed and stream position for `n` draws; the generator moves past them.
struct Draws {
  uint64_t seed, offset;
};
Draws claim_draws(Generator* gen, int64_t n) {
  Generator& g = pick(gen);
  const Draws d{g.seed, g.offset};
  g.offset += uint64_t(n);
  return d;
}
}  // namespace

void normal_(Tensor& t, double mean, double std, Generator* gen) {
  GDN_CHECK(t.is_contiguous(), "normal_ needs a contiguous tensor");
  const auto [seed, off] = claim_draws(gen, t.numel());
  const Device dev = t.device();
  dispatch_dtype<FloatingTypes>(t.dtype(), "normal_", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(
        dev, "normal_", cpu::random_normal(t.data<scalar_t>(), t.numel(), seed, off, mean, std),
        cuda::random_normal(t.data<scalar_t>(), t.numel(), seed, off, mean, std, stream_of(dev)));
  });
}

void uniform_(Tensor& t, double low, double high, Generator* gen) {
  GDN_CHECK(t.is_contiguous(), "uniform_ needs a contiguous tensor");
  const auto [seed, off] = claim_draws(gen, t.numel());
  const Device dev = t.device();
  dispatch_dtype<FloatingTypes>(t.dtype(), "uniform_", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(
        dev, "uniform_", cpu::random_uniform(t.data<scalar_t>(), t.numel(), seed, off, low, high),
        cuda::random_uniform(t.data<scalar_t>(), t.numel(), seed, off, low, high, stream_of(dev)));
  });
}

Tensor randn(const Shape& shape, DType dtype, Device device, Generator* gen) {
  Tensor t = empty(shape, dtype, device);
  normal_(t, 0.0, 1.0, gen);
  return t;
}

Tensor rand(const Shape& shape, DType dtype, Device device, Generator* gen) {
  Tensor t = empty(shape, dtype, device);
  uniform_(t, 0.0, 1.0, gen);
  return t;
}

Tensor randint(const Shape& shape, int64_t low, int64_t high, DType dtype, Device device,
               Generator* gen) {
  GDN_CHECK(high > low, "randint: empty range [", low, ", ", high, ")");
  Tensor t = empty(shape, dtype, device);
  const auto [seed, off] = claim_draws(gen, t.numel());
  dispatch_dtype<AllTypes>(dtype, "randint", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(
        device, "randint", cpu::random_int(t.data<scalar_t>(), t.numel(), seed, off, low, high),
        cuda::random_int(t.data<scalar_t>(), t.numel(), seed, off, low, high, stream_of(device)));
  });
  return t;
}

void add_(Tensor& dst, const Tensor& src, double alpha) {
  GDN_CHECK(dst.shape() == src.shape(), "add_: shapes ", shape_str(dst.shape()), " and ",
            shape_str(src.shape()));
  GDN_CHECK(dst.is_contiguous(), "add_ needs a contiguous destination");
  const Device dev = detail::common_device("add_", {dst, src});
  Tensor s = src.dtype() == dst.dtype() ? contiguous(src) : cast(src, dst.dtype());
  dispatch_dtype<FloatingTypes>(dst.dtype(), "add_", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(
        dev, "add_", cpu::axpy(dst.data<scalar_t>(), s.data<scalar_t>(), dst.numel(), alpha),
        cuda::axpy(dst.data<scalar_t>(), s.data<scalar_t>(), dst.numel(), alpha, stream_of(dev)));
  });
}

void mul_(Tensor& dst, double s) {
  GDN_CHECK(dst.is_contiguous(), "mul_ needs a contiguous tensor");
  const Device dev = dst.device();
  dispatch_dtype<FloatingTypes>(dst.dtype(), "mul_", [&](auto tag) {
    using scalar_t = typename decltype(tag)::type;
    GDN_RUN_ON_DEVICE(dev, "mul_",
                      cpu::unary(kern::Unary::affine, dst.data<scalar_t>(), dst.data<scalar_t>(),
                                 dst.numel(), s, 0.0),
                      cuda::unary(kern::Unary::affine, dst.data<scalar_t>(), dst.data<scalar_t>(),
                                  dst.numel(), s, 0.0, stream_of(dev)));
  });
}

}  // namespace ops
}  // namespace gdn
