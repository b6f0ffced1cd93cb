// The NCCL engine on one GPU (label `gpu`; exits 77 without a device): a one-rank NCCL
// communicator (its host side the single-process one) runs every collective on CUDA tensors in
// order with the compute stream, and the gradient reducer averages CUDA gradients through it
// with the grads as bucket views. Two ranks on two GPUs: `mpirun -np 2 build/gdn train` with
// train.device: cuda (dist.backend auto picks NCCL).
#include <gtest/gtest.h>

#include "src/dist/communicator.h"
#include "src/dist/grad_reducer.h"
#include "src/dist/nccl_communicator.h"
#include "src/ops/ops.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

const Device kCuda = Device::cuda(0);

std::shared_ptr<dist::Communicator> nccl() {
  return dist::make_nccl_communicator(dist::single_communicator(), kCuda, 60);
}

TEST(CudaNccl, OneRankCollectivesOnCudaTensors) {
  auto c = nccl();
  EXPECT_STREQ(c->backend(), "nccl");
  EXPECT_EQ(c->size(), 1);
  EXPECT_EQ(c->device(), kCuda);
  // Produced by a kernel on the compute stream just before: the collective must see it.
  Tensor t = ops::mul(ops::ones({1 << 16}, DType::float32, kCuda), 3.0);
  c->all_reduce(t, dist::ReduceOp::avg);
  EXPECT_EQ(t.to_vector(), std::vector<double>(1 << 16, 3.0));
  Tensor b = ops::full({7}, 2.0, DType::float64, kCuda);
  c->broadcast(b, 0);
  EXPECT_EQ(b.to_vector(), std::vector<double>(7, 2.0));
  Tensor in = ops::from_vector({1, 2, 3}, {3}, DType::float32, kCuda),
         out = ops::zeros({3}, DType::float32, kCuda);
  c->all_gather(in, out);
  EXPECT_EQ(out.to_vector(), (std::vector<double>{1, 2, 3}));
  Tensor rs = ops::zeros({3}, DType::float32, kCuda);
  c->reduce_scatter(in, rs, dist::ReduceOp::sum);
  EXPECT_EQ(rs.to_vector(), (std::vector<double>{1, 2, 3}));
  c->barrier();
  // Host values go through the host communicator.
  std::vector<double> v{4.5};
  c->all_reduce_host(v);
  EXPECT_EQ(v[0], 4.5);
  // A CPU tensor is an error naming the devices.
  Tensor cpu = ops::ones({2});
  EXPECT_THROW(c->all_reduce(cpu), Error);
}

TEST(CudaNccl, ReducerOverNcclMatchesPlainBackward) {
  Generator g(3);
  std::vector<Tensor> params, plain;
  for (int i = 0; i < 4; ++i) {
    Tensor p = ops::randn({64, 16 + i}, DType::float32, kCuda, &g);
    plain.push_back(ops::contiguous_copy(p).set_requires_grad(true));
    params.push_back(p.set_requires_grad(true));
  }
  auto loss_of = [](const std::vector<Tensor>& ps) {
    Tensor l = ops::scalar_tensor(0.0, DType::float32, kCuda);
    for (const Tensor& p : ps) l = ops::add(l, ops::sum(ops::square(ops::tanh(p))));
    return l;
  };
  dist::GradReducer red(params, nccl(), 4096);
  EXPECT_EQ(red.buckets().size(), 4u);
  for (int step = 0; step < 2; ++step) {
    red.zero_grads();
    red.arm();
    loss_of(params).backward();
    red.finish();
    for (Tensor& p : plain) p.set_grad(Tensor());
    loss_of(plain).backward();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_EQ(params[i].grad().to_vector(), plain[i].grad().to_vector()) << i;
  }
}

}  // namespace
}  // namespace gdn
