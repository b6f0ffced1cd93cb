// The pure logic of data-parallel training, in one process (label cpu): bucket and shard
// assignment, ZeRO-1 state splitting, the autograd gradient-ready hooks, the loaders' global
// row mapping (rank r of W = rows [r*B, (r+1)*B) of one process of batch W*B), the
// single-process communicator, the reducer's grads-as-bucket-views, and the agreement checks.
// The multi-process behaviour is in test_dist.cpp (label mpi, run under mpirun -np 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "optim/adamw.h"
#include "src/autograd/checkpoint.h"
#include "src/autograd/hooks.h"
#include "src/data/loader.h"
#include "src/data/mqar.h"
#include "src/dist/communicator.h"
#include "src/dist/consistency.h"
#include "src/dist/grad_reducer.h"
#include "src/dist/zero.h"
#include "src/ops/ops.h"
#include "src/train/memory_profile.h"
#include "tests/test_helpers.h"
#include "tests/test_util.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;

TEST(Buckets, ReverseOrderGreedyUnderTheCap) {
  // Parameters of 40, 40, 40, 100, 10 bytes under a 100-byte cap, filled from the last.
  auto b = dist::assign_buckets({40, 40, 40, 100, 10}, 100);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0], (std::vector<size_t>{4}));     // 10, then 100 would overflow
  EXPECT_EQ(b[1], (std::vector<size_t>{3}));     // exactly the cap
  EXPECT_EQ(b[2], (std::vector<size_t>{2, 1}));  // 80
  EXPECT_EQ(b[3], (std::vector<size_t>{0}));
  // A parameter over the cap gets its own bucket; cap 0 means one bucket per parameter.
  EXPECT_EQ(dist::assign_buckets({500, 10}, 100).size(), 2u);
  EXPECT_EQ(dist::assign_buckets({1, 1, 1}, 0).size(), 3u);
  EXPECT_EQ(dist::assign_buckets({1, 1, 1}, 1 << 20).size(), 1u);
  // Every index exactly once.
  std::vector<int64_t> sizes;
  for (int i = 0; i < 37; ++i) sizes.push_back((i * 7919) % 97 + 1);
  std::multiset<size_t> seen;
  for (const auto& bk : dist::assign_buckets(sizes, 150))
    for (size_t i : bk) seen.insert(i);
  EXPECT_EQ(seen.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(seen.count(i), 1u);
}

TEST(Shards, GreedyBalancedAndDeterministic) {
  const std::vector<int64_t> n = {100, 10, 60, 50, 40, 10};
  auto o = dist::assign_shards(n, 2);
  // Largest first, each to the lighter rank: 100->0, 60->1, 50->1 (110), 40->0 (140), then
  // both 10s to rank 1 (120, 130).
  EXPECT_EQ(o, (std::vector<int>{0, 1, 1, 1, 0, 1}));
  int64_t load[2] = {0, 0};
  for (size_t i = 0; i < n.size(); ++i) load[o[i]] += n[i];
  EXPECT_EQ(load[0], 140);
  EXPECT_EQ(load[1], 130);
  EXPECT_EQ(dist::assign_shards(n, 2), o);
  EXPECT_EQ(dist::assign_shards(n, 1), std::vector<int>(n.size(), 0));
  // More ranks than parameters: some own nothing, none owns two.
  auto many = dist::assign_shards({5, 5}, 4);
  EXPECT_EQ(many, (std::vector<int>{0, 1}));
}

TEST(Zero1, ShardedGroupsAndStateSplit) {
  std::vector<optim::ParamGroup> groups(2);
  groups[0].names = {"a.weight", "b.weight"};
  groups[0].params = {ops::zeros({4, 3}), ops::zeros({2})};
  groups[0].weight_decay = 0.1;
  groups[1].names = {"c.norm"};
  groups[1].params = {ops::zeros({5})};
  const std::vector<int> owners = {0, 1, 1};
  auto g1 = dist::shard_param_groups(groups, owners, 1);
  ASSERT_EQ(g1.size(), 2u);
  EXPECT_EQ(g1[0].names, (std::vector<std::string>{"b.weight"}));
  EXPECT_EQ(g1[0].weight_decay, 0.1);
  EXPECT_EQ(g1[1].names, (std::vector<std::string>{"c.norm"}));
  // The meta layout names every key of the unsharded optimizer, allocating nothing.
  optim::AdamW layout(dist::meta_param_groups(groups));
  auto full_keys = layout.state_dict();
  EXPECT_EQ(full_keys.tensors.size(), 6u);
  EXPECT_TRUE(full_keys.tensors.at("a.weight.exp_avg").device().is_meta());
  EXPECT_EQ(full_keys.tensors.at("a.weight.exp_avg").shape(), (Shape{4, 3}));
  // A full state splits into the shard of rank 1 (and loads into its optimizer).
  optim::AdamW whole(groups), shard(g1);
  optim::OptimizerState full = whole.state_dict();
  optim::OptimizerState mine = dist::shard_optimizer_state(full, shard);
  EXPECT_EQ(mine.tensors.size(), 4u);
  EXPECT_EQ(mine.tensors.count("a.weight.exp_avg"), 0u);
  EXPECT_EQ(mine.scalars.count("step"), 1u);
  EXPECT_EQ(mine.scalars.count("c.norm.step"), 1u);
  EXPECT_EQ(mine.scalars.count("a.weight.step"), 0u);
  shard.load_state_dict(mine);
  // On one rank, broadcasting from the owners and gathering the state change nothing.
  auto single = dist::single_communicator();
  dist::broadcast_from_owners(*single, optim::all_params(groups), {0, 0, 0});
  optim::AdamW all0(groups);
  auto gathered = dist::gather_optimizer_state(*single, all0, layout, {0, 0, 0});
  EXPECT_EQ(gathered.tensors.size(), 6u);
  EXPECT_EQ(gathered.scalars.size(), full.scalars.size());
}

TEST(GradReadyHooks, FireOnceWhenEveryUseHasDelivered) {
  Tensor w1 = ops::from_vector({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor w2 = ops::from_vector({0.5, -1, 2}, {3}).set_requires_grad(true);
  Tensor x = ops::from_vector({1, 1, 2}, {3});
  std::vector<std::string> events;
  std::vector<double> w2_grad_at_hook;
  autograd::GradReadyHookHandle h1(w1, [&] { events.push_back("w1"); });
  autograd::GradReadyHookHandle h2(w2, [&] {
    events.push_back("w2");
    w2_grad_at_hook = w2.grad().to_vector();
  });
  // w2 is used twice (the hook waits for both uses), and late in the graph (it fires first).
  Tensor h = ops::mul(w1, x);
  Tensor y = ops::add(ops::mul(h, w2), ops::mul(ops::square(h), w2));
  ops::sum(y).backward();
  ASSERT_EQ(events, (std::vector<std::string>{"w2", "w1"}));
  // At the hook, w2's grad is already final: h + h^2.
  EXPECT_EQ(w2_grad_at_hook, (std::vector<double>{2, 6, 42}));
  // A second backward fires again; a reset handle does not.
  h1.reset();
  events.clear();
  ops::sum(ops::mul(w1, w2)).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"w2"}));
}

TEST(GradReadyHooks, CheckpointedRegionsFireFromTheRecompute) {
  Tensor w = ops::from_vector({1, 2}, {2}).set_requires_grad(true);
  Tensor x = ops::from_vector({3, 4}, {2}).set_requires_grad(true);
  int fired = 0;
  double grad_at_hook = 0;
  autograd::GradReadyHookHandle h(w, [&] {
    ++fired;
    grad_at_hook = w.grad().to_vector()[1];
  });
  auto outs = autograd::checkpoint(
      "block",
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::mul(in[0], w)}; }, {x});
  ops::sum(ops::square(outs[0])).backward();
  EXPECT_EQ(fired, 1);
  EXPECT_DOUBLE_EQ(grad_at_hook, 2 * 8 * 4);  // d/dw2 (w2 x2)^2 = 2 w2 x2^2
}

TEST(GlobalRows, RanksReadSlicesOfTheOneProcessBatch) {
  const fs::path dir = test::fresh_dir("gdn_test_data_parallel_rows");
  std::vector<int32_t> tokens(5000);
  std::iota(tokens.begin(), tokens.end(), 0);
  for (auto& t : tokens) t %= 200;
  const std::string path = (dir / "train.bin").string();
  data::write_shard(path, tokens, 256);
  auto shard = data::Shard::open(path);
  data::LoaderOptions one{6, 16, 42};
  one.prefetch = false;
  data::DataLoader whole(shard, one);
  for (int world : {2, 3}) {
    for (int r = 0; r < world; ++r) {
      data::LoaderOptions o = one;
      o.batch_size = 6 / world;
      o.rank = r;
      o.world_size = world;
      data::DataLoader part(shard, o);
      for (int64_t s : {0, 1, 7}) {
        const auto all = whole.batch_at(s).starts, mine = part.batch_at(s).starts;
        ASSERT_EQ(mine.size(), size_t(6 / world));
        for (size_t i = 0; i < mine.size(); ++i)
          EXPECT_EQ(mine[i], all[size_t(r) * mine.size() + i]) << "rank " << r << " step " << s;
      }
    }
  }
  // MQAR likewise: rank 1 of 2 (batch 2) holds rows 2 and 3 of the batch of 4.
  data::MqarOptions m{/*vocab_size=*/64, /*seq_len=*/32,   /*num_pairs=*/4,
                      /*num_queries=*/4, /*batch_size=*/4, /*seed=*/9};
  const auto big = mqar_batch(m, 3, 0, 1).inputs.to_vector();
  m.batch_size = 2;
  const auto part = mqar_batch(m, 3, 1, 2).inputs.to_vector();
  EXPECT_EQ(part, std::vector<double>(big.begin() + 2 * 32, big.end()));
  EXPECT_EQ(mqar_batch(m, 3, 1, 2).starts, (std::vector<int64_t>{14, 15}));
}

TEST(Communicator, SingleProcessIsTheIdentity) {
  // Not launched by mpirun (ctest runs this binary directly): one process, MPI untouched.
  EXPECT_FALSE(dist::launch_info().under_mpi);
  auto c = dist::make_communicator("auto", Device::cpu(), 5);
  EXPECT_STREQ(c->backend(), "single");
  EXPECT_EQ(c->size(), 1);
  EXPECT_EQ(c->timeout(), 5);
  EXPECT_FALSE(dist::mpi_active());
  Tensor t = ops::from_vector({1, 2, 3}, {3});
  c->all_reduce(t, dist::ReduceOp::avg);
  c->broadcast(t, 0);
  EXPECT_EQ(t.to_vector(), (std::vector<double>{1, 2, 3}));
  Tensor out = ops::zeros({3});
  c->all_gather(t, out);
  EXPECT_EQ(out.to_vector(), t.to_vector());
  c->reduce_scatter(t, out);
  c->barrier();
  std::vector<double> v{1.5};
  c->all_reduce_host(v);
  EXPECT_EQ(v[0], 1.5);
  EXPECT_EQ(c->all_gather_host({7, -1}), (std::vector<int64_t>{7, -1}));
  std::vector<uint8_t> bytes{1, 2, 3};
  c->broadcast_host(bytes, 0);
  EXPECT_EQ(bytes.size(), 3u);
  dist::check_ranks_agree(*c, {{"config hash", 1}}, "");
  EXPECT_THROW(dist::make_communicator("gloo", Device::cpu()), Error);
  EXPECT_THROW(c->set_timeout(0), Error);
}

TEST(GradReducer, GradsAreBucketViewsAndMatchPlainBackward) {
  Generator g(5);
  std::vector<Tensor> params, plain;
  for (int i = 0; i < 4; ++i) {
    Tensor p = ops::randn({3 + i, 2}, DType::float32, Device::cpu(), &g);
    plain.push_back(ops::contiguous_copy(p).set_requires_grad(true));
    params.push_back(p.set_requires_grad(true));
  }
  auto loss_of = [](const std::vector<Tensor>& ps) {
    Tensor l = ops::scalar_tensor(0.0);
    for (const Tensor& p : ps) l = ops::add(l, ops::sum(ops::square(ops::tanh(p))));
    return l;
  };
  // 24-byte cap: several buckets (the parameters hold 24 to 48 bytes).
  dist::GradReducer red(params, dist::single_communicator(), 24);
  EXPECT_EQ(red.buckets().size(), 4u);
  EXPECT_EQ(red.bucket_bytes_total(), int64_t((6 + 8 + 10 + 12) * 4));
  for (int step = 0; step < 2; ++step) {
    red.zero_grads();
    for (Tensor& p : plain) p.set_grad(Tensor());
    // Two micro-batches: only the second (armed) backward starts the buckets.
    loss_of(params).backward();
    red.arm();
    loss_of(params).backward();
    EXPECT_EQ(red.started_during_backward(), 0);  // set by finish()
    red.finish();
    EXPECT_EQ(red.started_during_backward(), 4);  // every bucket started inside backward
    loss_of(plain).backward();
    loss_of(plain).backward();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i].grad().to_vector(), plain[i].grad().to_vector()) << i;
      EXPECT_GT(params[i].grad().offset() + params[i].grad().numel(), 0);
    }
  }
  // The grads live in the bucket buffers: two parameters of one bucket share storage.
  dist::GradReducer one(params, dist::single_communicator(), 1 << 20);
  EXPECT_EQ(one.buckets().size(), 1u);
  EXPECT_EQ(params[0].grad().storage(), params[3].grad().storage());
  // A grad replaced behind the reducer's back is copied into its bucket before the reduce.
  one.arm();
  params[1].set_grad(ops::full({4, 2}, 3.0));
  one.finish();
  EXPECT_EQ(params[1].grad().storage(), params[0].grad().storage());
  EXPECT_EQ(params[1].grad().to_vector(), std::vector<double>(8, 3.0));
}

TEST(Consistency, HashesAndMessages) {
  EXPECT_EQ(dist::hash_string(""), 14695981039346656037ull);
  EXPECT_EQ(dist::hash_string("a"), 0xaf63dc4c8601ec8cull);  // FNV-1a 64 reference value
  EXPECT_NE(dist::hash_string("train:\n  lr: 0.1\n"), dist::hash_string("train:\n  lr: 0.2\n"));
  Tensor a = ops::from_vector({1, 2, 3}, {3}), b = ops::from_vector({1, 2, 3.0001}, {3});
  EXPECT_EQ(dist::tensors_checksum({a}), dist::tensors_checksum({ops::contiguous_copy(a)}));
  EXPECT_NE(dist::tensors_checksum({a}), dist::tensors_checksum({b}));
  EXPECT_NE(dist::tensors_checksum({a}), dist::tensors_checksum({ops::reshape(a, {3, 1})}));
}

TEST(MemoryProfile, OneRankOfAWorldWithZero1) {
  const std::string yaml = test::model_yaml({64, 2, 2, 32, 512});
  // Stream rows: packed ones run their kernels a sequence at a time, with less workspace, which
  // moves the peak into the forward, before the (ZeRO-1-halved) optimizer state matters.
  auto profile = [&](int world, const std::string& zero1, const std::string& dev = "meta") {
    return train::profile_training_step(
        train::parse_run_config(yaml, "m.yaml", {"dist.zero1=" + zero1, "data.pack=stream"}), dev,
        2, 64, world);
  };
  const int optim = int(MemCategory::optim), grad = int(MemCategory::grad);
  const auto one = profile(1, "true"), plain2 = profile(2, "false");
  EXPECT_EQ(one.max_by_category[size_t(optim)], 8 * one.params);
  EXPECT_FALSE(one.zero1);
  // Without ZeRO-1 a rank holds everything; the grads are the (same-sized) bucket buffers,
  // live from the start, plus a parameter's incoming gradient while it is added in.
  EXPECT_EQ(plain2.max_by_category[size_t(optim)], 8 * one.params);
  EXPECT_GE(plain2.max_by_category[size_t(grad)], 4 * one.params);
  EXPECT_LE(plain2.max_by_category[size_t(grad)], 4 * one.params + 2 * 4 * 512 * 64);
  EXPECT_EQ(plain2.peak_by_category[size_t(grad)], 4 * one.params);
  for (int world : {2, 4}) {
    const auto p = profile(world, "true");
    EXPECT_TRUE(p.zero1);
    EXPECT_EQ(p.world_size, world);
    // Rank 0's shard: about 1/world of the moments (within the largest parameter, 512 x 64).
    const double share = double(p.max_by_category[size_t(optim)]) / double(8 * one.params);
    EXPECT_NEAR(share, 1.0 / world, 512.0 * 64 / double(one.params)) << world;
    EXPECT_LT(p.peak_bytes, one.peak_bytes);
  }
  EXPECT_NE(train::profile_table(profile(2, "true")).find("one rank of 2"), std::string::npos);
  // meta still predicts cpu with buckets and shards.
  const auto meta = profile(2, "true"), cpu = profile(2, "true", "cpu");
  EXPECT_EQ(meta.max_by_category[size_t(optim)], cpu.max_by_category[size_t(optim)]);
  EXPECT_EQ(meta.max_by_category[size_t(grad)], cpu.max_by_category[size_t(grad)]);
}

}  // namespace
}  // namespace gdn
