// Optimizers, schedules, clipping and parameter groups: values derived by hand (the working is
// in the comments), torch's update rules step by step, checkpoint round trips that continue
// bit-identically, and the optimizer state's memory on the meta device.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/adamw.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/grad_accum.h"
#include "optim/param_groups.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "src/core/allocator.h"
#include "src/ops/ops.h"
#include "tests/test_util.h"

namespace gdn {
namespace {

using ops::from_vector;
using optim::ParamGroup;
using test::expect_values;

Tensor param(const std::vector<double>& v, DType dt = DType::float64) {
  return from_vector(v, {int64_t(v.size())}, dt).set_requires_grad(true);
}
void set_grad(Tensor& p, const std::vector<double>& g) {
  p.set_grad(from_vector(g, p.shape(), p.dtype(), p.device()));
}
ParamGroup group(std::vector<Tensor> ps, double wd = 0.0) {
  ParamGroup g;
  g.params = std::move(ps);
  g.weight_decay = wd;
  return g;
}

// ---- AdamW -----------------------------------------------------------------------------------

// lr 0.1, betas (0.9, 0.999), eps 1e-8, wd 0.01; p0 = [1, -2]; grads [0.5, -1], [0.1, 2], [-0.3,
// 0]. Element 0, step by step (bc1 = 1 - 0.9^t, bc2 = 1 - 0.999^t):
//   t=1: p = 1 * (1 - 0.1*0.01) = 0.999;  m = 0.05, v = 0.00025;  mhat = 0.5, vhat = 0.25
//        p = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8)                     = 0.899000002
//   t=2: p = 0.899000002 * 0.999;  m = 0.9*0.05 + 0.1*0.1 = 0.055;  v = 0.999*0.00025 + 0.001*0.01
//        = 0.00025975;  mhat = 0.055/0.19 = 0.28947368421052638;  vhat = 0.00025975/0.001999
//        = 0.12993996998499438;  p -= 0.1 * mhat / (sqrt(vhat) + 1e-8)  = 0.81779690638265179
//   t=3: m = 0.0195, v = 0.00034949025, mhat = 0.0195/0.271 = 0.07195571955719561,
//        vhat = v/0.002997001 = 0.11661332445334534                   -> p = 0.79590781485512552
// Element 1: t=1 -1.898000001; t=2 m = 0.11, v = 0.004999 -> -1.9327123534710748;
//            t=3 m = 0.099, v = 0.004994001 -> -1.9590795496464593.
TEST(AdamW, ThreeStepsByHand) {
  Tensor p = param({1.0, -2.0});
  optim::AdamWOptions o;
  o.lr = 0.1;
  optim::AdamW opt({group({p}, 0.01)}, o);
  const std::vector<std::vector<double>> grads = {{0.5, -1.0}, {0.1, 2.0}, {-0.3, 0.0}};
  const std::vector<std::vector<double>> want = {{0.899000002, -1.898000001},
                                                 {0.81779690638265179, -1.9327123534710748},
                                                 {0.79590781485512552, -1.9590795496464593}};
  for (size_t t = 0; t < grads.size(); ++t) {
    set_grad(p, grads[t]);
    opt.step();
    expect_values(p, want[t], 1e-14);
  }
  auto state = opt.state_dict();
  expect_values(state.tensors.at("group0.0.exp_avg"), {0.0195, 0.099}, 1e-14);
  expect_values(state.tensors.at("group0.0.exp_avg_sq"), {0.00034949025, 0.004994001}, 1e-14);
  EXPECT_EQ(state.scalars.at("step"), 3);
  EXPECT_EQ(state.scalars.at("group0.0.step"), 3);
  EXPECT_EQ(opt.step_count(), 3);
}

// Decoupled decay: the Adam part does not depend on p, so with the same grads the decayed run
// differs from the undecayed one at step 1 by exactly lr * wd * p0 (the decay never enters the
// moments, unlike L2 regularisation, which would change m and v).
TEST(AdamW, WeightDecayIsDecoupled) {
  Tensor a = param({3.0, -1.5, 0.25}), b = param({3.0, -1.5, 0.25});
  optim::AdamWOptions o;
  o.lr = 0.01;
  optim::AdamW with_wd({group({a}, 0.1)}, o), without({group({b}, 0.0)}, o);
  set_grad(a, {0.2, 0.4, -0.6});
  set_grad(b, {0.2, 0.4, -0.6});
  with_wd.step();
  without.step();
  auto va = a.to_vector(), vb = b.to_vector();
  const std::vector<double> p0 = {3.0, -1.5, 0.25};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(va[i] - vb[i], -0.01 * 0.1 * p0[i], 1e-15);
  EXPECT_EQ(with_wd.state_dict().tensors.at("group0.0.exp_avg").to_vector(),
            without.state_dict().tensors.at("group0.0.exp_avg").to_vector());
  // A zero grad with decay only shrinks p: p * (1 - lr*wd) (m = v = 0 gives a 0 / eps step).
  Tensor c = param({2.0});
  optim::AdamW only_decay({group({c}, 0.5)}, o);
  set_grad(c, {0.0});
  only_decay.step();
  expect_values(c, {2.0 * (1 - 0.01 * 0.5)}, 1e-15);
}

// At step 1, mhat = g and vhat = g^2, so the update is lr * g / (|g| + eps) ~ lr * sign(g)
// whatever the grad's magnitude (fp32 parameters, fp32 moments).
TEST(AdamW, BiasCorrectionAtStepOne) {
  Tensor p = param({0, 0, 0, 0}, DType::float32);
  optim::AdamWOptions o;
  o.lr = 1e-2;
  optim::AdamW opt({group({p})}, o);
  set_grad(p, {1e-3, -5.0, 100.0, -1e-2});
  opt.step();
  expect_values(p, {-1e-2, 1e-2, -1e-2, 1e-2}, 1e-5);
  EXPECT_EQ(opt.state_dict().tensors.at("group0.0.exp_avg").dtype(), DType::float32);
}

TEST(AdamW, LrScaleAndSetLr) {
  Tensor a = param({0.0}), b = param({0.0});
  optim::AdamWOptions o;
  o.lr = 0.1;
  ParamGroup ga = group({a}), gb = group({b});
  gb.lr_scale = 0.5;
  optim::AdamW opt({ga, gb}, o);
  set_grad(a, {1.0});
  set_grad(b, {1.0});
  opt.step();  // sign step of size lr (group a) and lr/2 (group b)
  expect_values(a, {-0.1}, 1e-6);
  expect_values(b, {-0.05}, 1e-6);
  opt.set_lr(0.0);
  opt.step();
  expect_values(a, {-0.1}, 1e-6);
  EXPECT_THROW(opt.set_lr(-1.0), Error);
}

// The CPU update runs every parameter in one pass (blocks cut across tensors); it must equal the
// per-tensor kernel element for element: tensors smaller than, equal to and straddling a block,
// two groups (their own lr scale and weight decay), a parameter skipped for a step (so the step
// counts differ), on 1 and 2 threads.
TEST(AdamW, OnePassEqualsThePerTensorKernel) {
  const std::vector<int64_t> sizes = {1, 7, 16384, 16385, 40000, 3};
  const int max_threads = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<Tensor> params, copies, m, v;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor p = ops::randn({sizes[i]}, DType::float32).set_requires_grad(true);
      params.push_back(p);
      copies.push_back(ops::contiguous_copy(p));
      m.push_back(ops::zeros({sizes[i]}));
      v.push_back(ops::zeros({sizes[i]}));
    }
    ParamGroup ga = group({params[0], params[1], params[2]}, 0.1);
    ParamGroup gb = group({params[3], params[4], params[5]}, 0.0);
    gb.lr_scale = 0.5;
    optim::AdamWOptions o;
    o.lr = 0.01;
    optim::AdamW opt({ga, gb}, o);
    std::vector<int64_t> steps(sizes.size(), 0);
    for (int t = 0; t < 3; ++t) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (t == 1 && i == 4) {
          params[i].set_grad(Tensor());  // skipped: its step count falls behind
          continue;
        }
        Tensor g = ops::randn({sizes[i]}, DType::float32);
        params[i].set_grad(g);
        kern::AdamWStep s;
        static_cast<kern::AdamWHyper&>(s) = o;
        s.lr = i < 3 ? 0.01 : 0.005;
        s.weight_decay = i < 3 ? 0.1 : 0.0;
        s.step = ++steps[i];
        cpu::adamw_step(copies[i].data<float>(), g.data<float>(), m[i].data<float>(),
                        v[i].data<float>(), sizes[i], s);
      }
      opt.step();
      for (size_t i = 0; i < sizes.size(); ++i) expect_values(params[i], copies[i].to_vector(), 0);
    }
  }
  omp_set_num_threads(max_threads);
}

// A parameter without a grad is skipped: unchanged, and its own step count does not advance, so
// its bias correction later starts at t = 1 (as torch's per-parameter step).
TEST(AdamW, SkipsUndefinedGrads) {
  Tensor a = param({1.0}), b = param({1.0});
  optim::AdamWOptions o;
  o.lr = 0.1;
  ParamGroup g;
  g.names = {"a", "b"};
  g.params = {a, b};
  optim::AdamW opt({g}, o);
  set_grad(a, {1.0});
  opt.step();
  expect_values(b, {1.0}, 0);
  auto s = opt.state_dict();
  EXPECT_EQ(s.scalars.at("a.step"), 1);
  EXPECT_EQ(s.scalars.at("b.step"), 0);
  set_grad(b, {-2.0});
  opt.step();
  expect_values(b, {1.1}, 1e-6);  // a step-1 update: lr * sign(g)
}

TEST(AdamW, ZeroGrad) {
  Tensor p = param({1.0, 2.0});
  optim::AdamW opt({group({p})});
  set_grad(p, {3.0, 4.0});
  opt.zero_grad(false);
  expect_values(p.grad(), {0.0, 0.0}, 0);
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(AdamW, RejectsBadInputs) {
  optim::AdamWOptions bad;
  bad.beta1 = 1.0;
  Tensor p = param({1.0});
  EXPECT_THROW(optim::AdamW({group({p})}, bad), Error);
  // The same tensor twice, a non-floating parameter, an fp16 one, a duplicate name.
  EXPECT_THROW(optim::AdamW({group({p, p})}), Error);
  EXPECT_THROW(optim::AdamW({group({ops::zeros({2}, DType::int64)})}), Error);
  EXPECT_THROW(optim::AdamW({group({ops::zeros({2}, DType::float16)})}), Error);
  ParamGroup dup;
  dup.names = {"w", "w"};
  dup.params = {param({1.0}), param({2.0})};
  EXPECT_THROW(optim::AdamW({dup}), Error);
  // A grad of the wrong shape or dtype is reported at step().
  optim::AdamW opt({group({p})});
  p.set_grad(ops::zeros({1}, DType::float32));
  try {
    opt.step();
    ADD_FAILURE() << "no error for an fp32 grad of an fp64 parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
  }
}

// ---- state_dict ------------------------------------------------------------------------------

// Five steps straight, or three steps, a checkpoint (copied off the live buffers), a fresh
// optimizer loading it, and two more: the parameters agree to the bit.
TEST(OptimizerState, RoundTripContinuesBitIdentically) {
  Generator gen(5);
  std::vector<Tensor> grads;
  for (int t = 0; t < 5; ++t)
    grads.push_back(ops::randn({4, 3}, DType::float32, Device::cpu(), &gen));
  Tensor init = ops::randn({4, 3}, DType::float32, Device::cpu(), &gen);
  Tensor bias_init = ops::randn({3}, DType::float32, Device::cpu(), &gen);
  auto make_groups = [&](Tensor& w, Tensor& b) {
    w = ops::contiguous_copy(init).set_requires_grad(true);
    b = ops::contiguous_copy(bias_init).set_requires_grad(true);
    return optim::build_param_groups({{"model.w.weight", w}, {"model.w.bias", b}}, 0.1);
  };
  auto feed = [&](Tensor& w, Tensor& b, int t) {
    w.set_grad(ops::contiguous_copy(grads[size_t(t)]));
    b.set_grad(ops::contiguous_copy(ops::sum(grads[size_t(t)], {0})));
  };
  optim::AdamWOptions o;
  o.lr = 3e-3;

  Tensor w1, b1;
  optim::AdamW straight(make_groups(w1, b1), o);
  for (int t = 0; t < 5; ++t) {
    feed(w1, b1, t);
    straight.step();
  }

  Tensor w2, b2;
  optim::OptimizerState saved;
  std::vector<double> w_saved, b_saved;
  {
    optim::AdamW first(make_groups(w2, b2), o);
    for (int t = 0; t < 3; ++t) {
      feed(w2, b2, t);
      first.step();
    }
    saved = first.state_dict();
    for (auto& [k, t] : saved.tensors) t = ops::contiguous_copy(t);  // a snapshot
    w_saved = w2.to_vector();
    b_saved = b2.to_vector();
  }
  Tensor w3 = from_vector(w_saved, {4, 3}).set_requires_grad(true);
  Tensor b3 = from_vector(b_saved, {3}).set_requires_grad(true);
  optim::AdamW resumed(
      optim::build_param_groups({{"model.w.weight", w3}, {"model.w.bias", b3}}, 0.1), o);
  resumed.load_state_dict(saved);
  EXPECT_EQ(resumed.step_count(), 3);
  for (int t = 3; t < 5; ++t) {
    feed(w3, b3, t);
    resumed.step();
  }
  EXPECT_EQ(w3.to_vector(), w1.to_vector());
  EXPECT_EQ(b3.to_vector(), b1.to_vector());
}

TEST(OptimizerState, LoadRejectsMismatches) {
  Tensor p = param({1.0, 2.0});
  ParamGroup g;
  g.names = {"w"};
  g.params = {p};
  optim::AdamW opt({g});
  auto good = opt.state_dict();
  auto missing = good;
  missing.tensors.erase("w.exp_avg");
  auto shape = good;
  shape.tensors["w.exp_avg"] = ops::zeros({3}, DType::float64);
  auto unknown = good;
  unknown.tensors["v.exp_avg"] = ops::zeros({2}, DType::float64);
  auto dtype = good;
  dtype.tensors["w.exp_avg_sq"] = ops::zeros({2}, DType::float32);
  for (auto* bad : {&missing, &shape, &unknown, &dtype}) {
    try {
      opt.load_state_dict(*bad);
      ADD_FAILURE() << "accepted a bad state";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(msg.find("exp_avg") != std::string::npos) << msg;  // names the key
    }
  }
  EXPECT_NO_THROW(opt.load_state_dict(good));
}

// ---- SGD -------------------------------------------------------------------------------------

// lr 0.1, momentum 0.9, p0 = 1, g = 1 every step:
//   buf1 = g = 1 (torch starts the buffer at the grad)   p1 = 1 - 0.1 = 0.9
//   buf2 = 0.9*1 + 1 = 1.9                                p2 = 0.9 - 0.19 = 0.71
//   buf3 = 0.9*1.9 + 1 = 2.71                             p3 = 0.71 - 0.271 = 0.439
// Nesterov uses d = g + 0.9 buf: d1 = 1.9 -> 0.81; d2 = 1 + 1.71 = 2.71 -> 0.539.
TEST(Sgd, MomentumByHand) {
  Tensor p = param({1.0});
  optim::SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  optim::Sgd opt({group({p})}, o);
  for (double want : {0.9, 0.71, 0.439}) {
    set_grad(p, {1.0});
    opt.step();
    expect_values(p, {want}, 1e-14);
  }
  expect_values(opt.state_dict().tensors.at("group0.0.momentum_buffer"), {2.71}, 1e-14);

  Tensor q = param({1.0});
  o.nesterov = true;
  optim::Sgd nesterov({group({q})}, o);
  for (double want : {0.81, 0.539}) {
    set_grad(q, {1.0});
    nesterov.step();
    expect_values(q, {want}, 1e-14);
  }
}

// Plain SGD with L2 weight decay (coupled, as torch's SGD): d = g + wd p.
//   p0 = 2, g = 0.5, wd = 0.1, lr = 0.1: d = 0.5 + 0.2 = 0.7, p1 = 2 - 0.07 = 1.93.
// Dampening 0.5 with momentum 0.9 (g = 1): buf1 = 1, buf2 = 0.9 + 0.5 = 1.4: p = 1 - 0.1 - 0.14.
TEST(Sgd, WeightDecayAndDampening) {
  Tensor p = param({2.0});
  optim::SgdOptions o;
  o.lr = 0.1;
  optim::Sgd opt({group({p}, 0.1)}, o);
  EXPECT_EQ(opt.state_bytes(), 0);  // no momentum, no buffer
  set_grad(p, {0.5});
  opt.step();
  expect_values(p, {1.93}, 1e-14);

  Tensor q = param({1.0});
  o.momentum = 0.9;
  o.dampening = 0.5;
  optim::Sgd damped({group({q})}, o);
  for (int t = 0; t < 2; ++t) {
    set_grad(q, {1.0});
    damped.step();
  }
  expect_values(q, {1.0 - 0.1 - 0.14}, 1e-14);
  o.nesterov = true;  // nesterov needs dampening 0
  EXPECT_THROW(optim::Sgd({group({param({1.0})})}, o), Error);
}

// ---- schedules -------------------------------------------------------------------------------

// max 1, min 0.1, warmup 10, total 111: decay over steps 10..110 (span 100).
TEST(Schedule, KeySteps) {
  optim::LrSchedule s;
  s.max_lr = 1.0;
  s.min_lr = 0.1;
  s.warmup_steps = 10;
  s.total_steps = 111;
  for (auto kind :
       {optim::ScheduleKind::cosine, optim::ScheduleKind::linear, optim::ScheduleKind::constant}) {
    s.kind = kind;
    EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1);  // 1 * (0 + 1) / 10
    EXPECT_DOUBLE_EQ(s.lr_at(4), 0.5);
    EXPECT_DOUBLE_EQ(s.lr_at(9), 1.0);   // warmup - 1 reaches max
    EXPECT_DOUBLE_EQ(s.lr_at(10), 1.0);  // first decay step, p = 0
  }
  s.kind = optim::ScheduleKind::cosine;
  EXPECT_DOUBLE_EQ(s.lr_at(60), 0.55);  // p = 1/2: 0.1 + 0.9 * (1 + cos(pi/2)) / 2
  EXPECT_NEAR(s.lr_at(35), 0.1 + 0.45 * (1 + std::sqrt(0.5)), 1e-15);  // p = 1/4
  EXPECT_NEAR(s.lr_at(110), 0.1, 1e-15);                               // last step: min_lr
  EXPECT_NEAR(s.lr_at(500), 0.1, 1e-15);                               // past the end
  s.kind = optim::ScheduleKind::linear;
  EXPECT_DOUBLE_EQ(s.lr_at(60), 0.55);
  EXPECT_DOUBLE_EQ(s.lr_at(35), 0.775);  // 1 - 0.9 / 4
  EXPECT_DOUBLE_EQ(s.lr_at(110), 0.1);
  s.kind = optim::ScheduleKind::constant;
  EXPECT_DOUBLE_EQ(s.lr_at(110), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(10000), 1.0);
  // No warmup: step 0 is max_lr.
  s.kind = optim::ScheduleKind::cosine;
  s.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1.0);
  EXPECT_NEAR(s.lr_at(110), 0.1, 1e-15);
  EXPECT_THROW(s.lr_at(-1), Error);
}

TEST(Schedule, ParseAndValidate) {
  EXPECT_EQ(optim::parse_schedule("cosine"), optim::ScheduleKind::cosine);
  EXPECT_EQ(optim::parse_schedule("linear"), optim::ScheduleKind::linear);
  EXPECT_EQ(optim::parse_schedule("constant"), optim::ScheduleKind::constant);
  try {
    optim::parse_schedule("cosin");
    ADD_FAILURE() << "accepted 'cosin'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'cosin'"), std::string::npos) << e.what();
  }
  optim::LrSchedule s;
  s.kind = optim::ScheduleKind::cosine;
  s.total_steps = 0;  // a decay needs the run length
  EXPECT_THROW(s.validate(), Error);
  s.total_steps = 10;
  s.min_lr = 2 * s.max_lr;
  EXPECT_THROW(s.validate(), Error);
  s.min_lr = 0;
  s.kind = optim::ScheduleKind::constant;
  s.total_steps = 0;
  EXPECT_NO_THROW(s.validate());
}

// ---- clipping and accumulation ---------------------------------------------------------------

// grads [3, 4] and [12]: norm = sqrt(9 + 16 + 144) = 13.
TEST(Clip, NormAndScaling) {
  Tensor a = param({0, 0}, DType::float32), b = param({0}, DType::float32), c = param({0});
  set_grad(a, {3, 4});
  set_grad(b, {12});
  // c has no grad: skipped.
  EXPECT_DOUBLE_EQ(optim::grad_norm({a, b, c}), 13.0);
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({a, b, c}, 26.0), 13.0);  // below: untouched
  expect_values(a.grad(), {3, 4}, 0);
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({a, b, c}, 6.5), 13.0);
  const double coef = 6.5 / (13.0 + 1e-6);  // torch's epsilon
  expect_values(a.grad(), {3 * coef, 4 * coef}, 1e-7);
  expect_values(b.grad(), {12 * coef}, 1e-7);
  EXPECT_NEAR(optim::grad_norm({a, b}), 6.5, 1e-5);
  EXPECT_THROW(optim::clip_grad_norm({a}, 0.0), Error);
}

TEST(Clip, NonFiniteIsReportedNotApplied) {
  Tensor a = param({0, 0}), b = param({0});
  set_grad(a, {3, 4});
  set_grad(b, {std::numeric_limits<double>::infinity()});
  EXPECT_TRUE(std::isinf(optim::clip_grad_norm({a, b}, 1.0)));
  expect_values(a.grad(), {3, 4}, 0);
  set_grad(b, {std::nan("")});
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm({a, b}, 1.0)));
  expect_values(a.grad(), {3, 4}, 0);
}

// Many blocks of the fixed-order sum: same bits with 1 and 2 threads, and the fp64 value.
TEST(Clip, DeterministicAcrossThreads) {
  Generator gen(9);
  Tensor p = ops::zeros({100003}).set_requires_grad(true);
  p.set_grad(ops::randn({100003}, DType::float32, Device::cpu(), &gen));
  double want = 0;
  for (double x : p.grad().to_vector()) want += x * x;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = optim::grad_norm({p});
  omp_set_num_threads(2);
  const double two = optim::grad_norm({p});
  omp_set_num_threads(threads);
  EXPECT_EQ(one, two);
  EXPECT_NEAR(one, std::sqrt(want), 1e-12 * std::sqrt(want));
}

// Two micro-batch backwards sum into .grad; scale_grads(1/2) gives the grad of the mean loss,
// the same as backward of the losses divided by 2.
TEST(GradAccum, ScaleGradsGivesTheMean) {
  Tensor x = param({1.0, 2.0});
  Tensor c1 = from_vector({3.0, -1.0}, {2}, DType::float64);
  Tensor c2 = from_vector({5.0, 7.0}, {2}, DType::float64);
  ops::sum(x * c1).backward();
  ops::sum(x * c2).backward();
  expect_values(x.grad(), {8.0, 6.0}, 0);
  optim::scale_grads({x}, 0.5);
  expect_values(x.grad(), {4.0, 3.0}, 0);

  Tensor y = param({1.0, 2.0});
  (ops::sum(y * c1) * 0.5).backward();
  (ops::sum(y * c2) * 0.5).backward();
  expect_values(y.grad(), {4.0, 3.0}, 1e-15);
}

// ---- parameter groups ------------------------------------------------------------------------

TEST(ParamGroups, DecayRules) {
  for (const char* name :
       {"model.layers.0.attn.q_proj.weight", "model.layers.3.attn.o_proj.weight",
        "model.layers.0.attn.q_conv1d.weight", "model.layers.0.mlp.down_proj.weight",
        "lm_head.weight", "model.embeddings.weight"})
    EXPECT_TRUE(optim::decays(name)) << name;
  for (const char* name :
       {"model.layers.0.attn_norm.weight", "model.layers.0.mlp_norm.weight",
        "model.layers.0.attn.o_norm.weight", "model.norm.weight", "model.layers.0.attn.A_log",
        "model.layers.0.attn.dt_bias", "model.layers.1.attn.b_proj.bias", "bias"})
    EXPECT_FALSE(optim::decays(name)) << name;
  EXPECT_FALSE(optim::decays("model.embeddings.weight", /*decay_embeddings=*/false));
  EXPECT_TRUE(optim::decays("lm_head.weight", false));
}

TEST(ParamGroups, BuildsTwoGroups) {
  Tensor emb = param({1, 2}), norm = param({1}), a_log = param({0}), q = param({1, 1});
  Tensor frozen = from_vector({1}, {1}, DType::float64);  // requires_grad false: left out
  optim::NamedParams named = {{"model.embeddings.weight", emb},
                              {"model.layers.0.attn.q_proj.weight", q},
                              {"model.layers.0.attn_norm.weight", norm},
                              {"model.layers.0.attn.A_log", a_log},
                              {"model.frozen", frozen},
                              {"lm_head.weight", emb}};  // tied: kept once, first name
  auto groups = optim::build_param_groups(named, 0.1);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 0.1);
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  EXPECT_EQ(groups[0].names, (std::vector<std::string>{"model.embeddings.weight",
                                                       "model.layers.0.attn.q_proj.weight"}));
  EXPECT_EQ(groups[1].names, (std::vector<std::string>{"model.layers.0.attn_norm.weight",
                                                       "model.layers.0.attn.A_log"}));
  auto no_emb = optim::build_param_groups(named, 0.1, false);
  EXPECT_EQ(no_emb[0].names, (std::vector<std::string>{"model.layers.0.attn.q_proj.weight"}));
  EXPECT_EQ(no_emb[1].names.size(), 3u);
  EXPECT_NO_THROW(optim::AdamW opt(groups));
}

// ---- meta: state allocated and accounted, no data ----------------------------------------------

TEST(OptimizerMeta, StateIsAccounted) {
  const Device meta = Device::meta();
  Tensor w, b;
  {
    MemoryCategoryScope scope(MemCategory::param);
    w = ops::empty({64, 32}, DType::float32, meta).set_requires_grad(true);
    b = ops::empty({32}, DType::float32, meta).set_requires_grad(true);
  }
  const int64_t numel = 64 * 32 + 32;
  const int64_t before = memory_stats(meta).cur(MemCategory::optim);
  {
    optim::AdamW opt(optim::build_param_groups({{"w.weight", w}, {"w.bias", b}}, 0.1));
    EXPECT_EQ(memory_stats(meta).cur(MemCategory::optim) - before, 2 * 4 * numel);
    EXPECT_EQ(opt.state_bytes(), 2 * 4 * numel);
    EXPECT_EQ(opt.state_dict().tensors.at("w.weight.exp_avg").data_ptr(), nullptr);
    {
      MemoryCategoryScope scope(MemCategory::grad);
      w.set_grad(ops::empty({64, 32}, DType::float32, meta));
      b.set_grad(ops::empty({32}, DType::float32, meta));
    }
    opt.step();  // runs the bookkeeping, no arithmetic
    EXPECT_EQ(opt.step_count(), 1);
    EXPECT_EQ(optim::clip_grad_norm({w, b}, 1.0), 0.0);
    optim::SgdOptions so;
    so.momentum = 0.9;
    optim::Sgd sgd({group({w, b})}, so);
    EXPECT_EQ(sgd.state_bytes(), 4 * numel);
  }
  EXPECT_EQ(memory_stats(meta).cur(MemCategory::optim), before);  // freed with the optimizers
}

}  // namespace
}  // namespace gdn
