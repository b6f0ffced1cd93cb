// Data-parallel training over two ranks (label mpi: ctest runs this binary under
// `mpirun -np 2`): the MPI communicator's ops and timeouts, the gradient reducer across ranks,
// and the trainer: 2 ranks x batch b give the curve of 1 process x batch 2b (the reference runs
// on rank 0 in this same job), ZeRO-1 gives the plain curve bit for bit, resuming with another
// world size continues the curve, and disagreeing ranks fail with a message on every rank.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>

#include "src/dist/communicator.h"
#include "src/dist/consistency.h"
#include "src/dist/grad_reducer.h"
#include "src/ops/ops.h"
#include "src/train/trainer.h"
#include "tests/test_helpers.h"
#include "tests/test_util.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;

dist::Communicator& world() {
  static std::shared_ptr<dist::Communicator> c = dist::make_communicator("mpi", Device::cpu(), 60);
  return *c;
}
int rank() {
  return world().rank();
}

// A directory for this job, named after rank 0's pid (other jobs may run the same test).
const fs::path& job_root() {
  static fs::path root = [] {
    std::vector<int64_t> pid = world().all_gather_host({int64_t(getpid())});
    return fs::temp_directory_path() / ("gdn_test_dist_" + std::to_string(pid[0]));
  }();
  return root;
}

// A clean directory with the tiny run's corpus in it (collective).
std::string fresh_dir(const std::string& name) {
  const fs::path p = job_root() / name;
  if (rank() == 0) {
    fs::remove_all(p);
    test::write_tiny_corpus(p / "corpus");
  }
  world().barrier();
  return p.string();
}

// Runs fn on rank 0 only (a one-process reference), the other rank waiting; failures on rank 0
// are reported after the barrier, so rank 1 never waits for a rank that gave up.
void on_rank0(const std::function<void()>& fn) {
  std::string error;
  if (rank() == 0) {
    try {
      fn();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  world().barrier();
  EXPECT_EQ(error, "");
}

// The tiny run of test_train (6 steps, validation every 3) with a per-rank batch.
// Not collective (rank 0 alone calls it for the one-process references).
train::RunConfig tiny_run(const std::string& root, const std::string& run, int64_t batch,
                          std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {"train.steps=6", "train.eval_every=3", "dist.timeout_s=60",
                                   "train.batch_size=" + std::to_string(batch)};
  // Every run after the first reads the shards the first prepared.
  if (fs::exists(fs::path(root) / "data" / "meta.json"))
    sets.push_back("data.dir=" + (fs::path(root) / "data").string());
  sets.insert(sets.end(), extra.begin(), extra.end());
  return test::tiny_text_run(root, run, sets);
}

// Shards for every run of a test: prepared once by a 1-process trainer on rank 0.
void prepare_data(const std::string& root) {
  on_rank0([&] {
    train::RunConfig c = tiny_run(root, "prep", 1, {"train.out_dir=" + root});
    train::TrainerOptions o;
    o.quiet = true;
    o.read_only = true;
    o.comm = dist::single_communicator();
    train::Trainer t(c, o);
  });
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], tol * std::max(1.0, std::abs(b[i]))) << "entry " << i;
}

train::TrainerOptions quiet(int64_t stop_after = -1, const std::string& resume = "") {
  train::TrainerOptions o;
  o.quiet = true;
  o.stop_after = stop_after;
  o.resume = resume;
  return o;
}

train::TrainerOptions one_process(int64_t stop_after = -1, const std::string& resume = "") {
  train::TrainerOptions o = quiet(stop_after, resume);
  o.comm = dist::single_communicator();
  return o;
}

TEST(DistMpi, CollectivesOnTwoRanks) {
  ASSERT_EQ(world().size(), 2) << "run under mpirun -np 2";
  auto c = dist::make_communicator("mpi", Device::cpu(), 30);
  EXPECT_STREQ(c->backend(), "mpi");
  const double r = c->rank();
  Tensor t = ops::from_vector({r + 1, 10 * (r + 1), 0.5}, {3});
  c->all_reduce(t, dist::ReduceOp::sum);
  EXPECT_EQ(t.to_vector(), (std::vector<double>{3, 30, 1}));
  c->all_reduce(t, dist::ReduceOp::avg);
  EXPECT_EQ(t.to_vector(), (std::vector<double>{3, 30, 1}));
  Tensor d = ops::from_vector({r, 1.0 / 3.0}, {2}, DType::float64);
  c->all_reduce(d, dist::ReduceOp::avg);
  EXPECT_EQ(d.to_vector(), (std::vector<double>{0.5, 1.0 / 3.0}));
  Tensor i64 = Tensor::empty({1}, DType::int64);
  i64.data<int64_t>()[0] = (int64_t(1) << 60) + int64_t(r);
  c->all_reduce(i64);
  EXPECT_EQ(i64.data<int64_t>()[0], (int64_t(1) << 61) + 1);
  Tensor b = ops::full({4}, r);
  c->broadcast(b, 1);
  EXPECT_EQ(b.to_vector(), std::vector<double>(4, 1.0));
  Tensor in = ops::from_vector({r, r + 0.5}, {2}), out = ops::zeros({4});
  c->all_gather(in, out);
  EXPECT_EQ(out.to_vector(), (std::vector<double>{0, 0.5, 1, 1.5}));
  Tensor rs_in = ops::mul(ops::from_vector({1, 2, 3, 4}, {4}), r + 1), rs_out = ops::zeros({2});
  c->reduce_scatter(rs_in, rs_out);
  const std::vector<double> chunk = r == 0 ? std::vector<double>{3, 6} : std::vector<double>{9, 12};
  EXPECT_EQ(rs_out.to_vector(), chunk);
  // Several operations in flight at once, completed by polling.
  Tensor x = ops::full({1000}, r), y = ops::full({10}, 2 * r);
  auto wx = c->all_reduce_async(x, dist::ReduceOp::sum);
  auto wy = c->all_reduce_async(y, dist::ReduceOp::avg);
  bool x_done = false, y_done = false;
  while (!(x_done && y_done)) {
    x_done = wx->test();
    y_done = wy->test();
  }
  EXPECT_EQ(x.to_vector(), std::vector<double>(1000, 1.0));
  EXPECT_EQ(y.to_vector(), std::vector<double>(10, 1.0));
  c->barrier();
  // Host helpers: exact 64-bit values, bytes of any length.
  std::vector<double> v{r, 2.0};
  c->all_reduce_host(v);
  EXPECT_EQ(v, (std::vector<double>{1, 4}));
  const int64_t big = (int64_t(1) << 62) + 7;
  EXPECT_EQ(c->all_gather_host({big + int64_t(r)}), (std::vector<int64_t>{big, big + 1}));
  std::vector<uint8_t> bytes;
  if (r == 1) bytes = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  c->broadcast_host(bytes, 1);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Bad input is an error naming the op, before anything is sent.
  Tensor half = Tensor::empty({2}, DType::bfloat16);
  EXPECT_THROW(c->all_reduce(half), Error);
  EXPECT_THROW(c->all_gather(in, ops::zeros({3})), Error);
  EXPECT_THROW(c->broadcast(b, 2), Error);
}

TEST(DistMpi, AWaitTimesOutWithAMessageInsteadOfHanging) {
  auto c = dist::make_communicator("mpi", Device::cpu(), 30);
  c->set_timeout(0.3);
  if (rank() == 0) {
    // Rank 1 is not in this barrier: rank 0 must give up with a message naming it.
    try {
      c->barrier();
      ADD_FAILURE() << "expected a timeout";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("rank 0 of 2 (mpi): barrier did not complete within"), std::string::npos)
          << m;
      EXPECT_NE(m.find("dist.timeout_s"), std::string::npos) << m;
    }
  }
  world().barrier();
  if (rank() == 1) c->barrier();  // completes the barrier rank 0 abandoned
  world().barrier();
}

TEST(DistMpi, ReducerAveragesBucketsDuringBackward) {
  auto c = dist::make_communicator("mpi", Device::cpu(), 30);
  Generator g(11);
  std::vector<Tensor> params;
  for (int i = 0; i < 5; ++i)
    params.push_back(
        ops::randn({4, 3 + i}, DType::float32, Device::cpu(), &g).set_requires_grad(true));
  dist::GradReducer red(params, c, 64);  // 48 to 112 bytes per parameter: a bucket each
  ASSERT_EQ(red.buckets().size(), 5u);
  for (int step = 0; step < 3; ++step) {
    red.zero_grads();
    red.arm();
    // Rank r's loss is (r + 1) sum(tanh(p)): the mean gradient is 1.5 (1 - tanh^2 p).
    Tensor loss = ops::scalar_tensor(0.0);
    for (const Tensor& p : params) loss = ops::add(loss, ops::sum(ops::tanh(p)));
    ops::mul(loss, double(rank() + 1)).backward();
    red.finish();
    EXPECT_GE(red.started_during_backward(), 4);  // all but possibly the last overlapped
    for (const Tensor& p : params) {
      std::vector<double> want;
      for (double x : p.to_vector()) want.push_back(1.5 * (1 - std::tanh(x) * std::tanh(x)));
      test::expect_values(p.grad(), want, 1e-6);
    }
    // The same bits on both ranks.
    std::vector<Tensor> grads;
    for (const Tensor& p : params) grads.push_back(p.grad());
    const auto sums = c->all_gather_host({int64_t(dist::tensors_checksum(grads))});
    EXPECT_EQ(sums[0], sums[1]);
  }
}

TEST(DistTrain, TwoRanksMatchOneProcessWithDoubleBatch) {
  const std::string root = fresh_dir("equivalence");
  prepare_data(root);
  {
    train::Trainer t(tiny_run(root, "two", 2), quiet());
    EXPECT_EQ(t.world_size(), 2);
    EXPECT_EQ(t.run().tokens_seen, 6 * 2 * 2 * 2 * 24);  // steps x accum x global batch x T
  }
  on_rank0([&] {
    train::Trainer t(tiny_run(root, "one", 4), one_process());
    t.run();
  });
  const auto two = test::loss_curve(root + "/two"), one = test::loss_curve(root + "/one");
  EXPECT_EQ(two.size(), 6u + 2u);
  expect_close(two, one, 2e-5);  // fp32: only the order of the batch sums differs
  // Rank 0 logged the data-parallel timings; the final weights agree too.
  EXPECT_NE(test::read_file(fs::path(root) / "two" / "metrics.jsonl").find("\"world_size\":2"),
            std::string::npos);
  train::TrainerOptions ro = one_process(-1, root + "/two");
  ro.read_only = true;
  train::Trainer a(tiny_run(root, "two", 2), ro);
  ro.resume = root + "/one";
  train::Trainer b(tiny_run(root, "one", 4), ro);
  auto pa = a.model().named_parameters(), pb = b.model().named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_LT(test::rel_err(pa[i].second, pb[i].second), 1e-4) << pa[i].first;
  world().barrier();
}

TEST(DistTrain, MqarTwoRanksMatchOneProcess) {
  const std::string root = fresh_dir("mqar");
  auto mqar = [&](const std::string& run, int64_t batch) {
    train::RunConfig c = tiny_run(root, run, batch,
                                  {"data.task=mqar", "model.vocab_size=64", "data.seq_len=32",
                                   "data.mqar_pairs=4", "data.mqar_queries=4"});
    return c;
  };
  {
    train::Trainer t(mqar("two", 2), quiet());
    t.run();
  }
  on_rank0([&] {
    train::Trainer t(mqar("one", 4), one_process());
    t.run();
  });
  expect_close(test::loss_curve(root + "/two"), test::loss_curve(root + "/one"), 2e-5);
}

TEST(DistTrain, Zero1GivesThePlainCurveBitForBit) {
  const std::string root = fresh_dir("zero1");
  prepare_data(root);
  {
    train::Trainer t(tiny_run(root, "plain", 2), quiet());
    t.run();
  }
  {
    // Also one bucket per parameter: the layout of the buckets changes no bits either.
    train::Trainer t(tiny_run(root, "zero", 2, {"dist.zero1=true", "dist.bucket_mb=0"}), quiet());
    EXPECT_LT(t.optimizer().num_params(), t.model().num_parameters());  // a shard
    t.run();
  }
  EXPECT_EQ(test::loss_curve(root + "/zero"), test::loss_curve(root + "/plain"));
  const fs::path pa = fs::path(root) / "plain" / "checkpoints" / "step-000006";
  const fs::path pz = fs::path(root) / "zero" / "checkpoints" / "step-000006";
  EXPECT_EQ(test::read_file(pz / "model.safetensors"), test::read_file(pa / "model.safetensors"));
  // The gathered optimizer state is the unsharded one, byte for byte.
  EXPECT_EQ(test::read_file(pz / "optimizer.safetensors"),
            test::read_file(pa / "optimizer.safetensors"));
}

TEST(DistTrain, ResumeWithAnotherWorldSize) {
  const std::string root = fresh_dir("resume");
  prepare_data(root);
  {
    train::Trainer t(tiny_run(root, "full", 2), quiet());
    t.run();
  }
  const auto full = test::loss_curve(root + "/full");
  // One process (batch 4) for 3 steps, then 2 ranks (batch 2, ZeRO-1: each loads its shard).
  on_rank0([&] {
    train::Trainer t(tiny_run(root, "grow", 4), one_process(3));
    EXPECT_EQ(t.run().step, 3);
  });
  {
    train::Trainer t(tiny_run(root, "grow", 2, {"dist.zero1=true"}), quiet(-1, root + "/grow"));
    EXPECT_EQ(t.state().step, 3);
    EXPECT_EQ(t.run().step, 6);
  }
  expect_close(test::loss_curve(root + "/grow"), full, 2e-5);
  // 2 ranks with ZeRO-1 for 3 steps (the state is gathered into one file), then one process.
  {
    train::Trainer t(tiny_run(root, "shrink", 2, {"dist.zero1=true"}), quiet(3));
    EXPECT_EQ(t.run().step, 3);
  }
  on_rank0([&] {
    train::Trainer t(tiny_run(root, "shrink", 4), one_process(-1, root + "/shrink"));
    EXPECT_EQ(t.state().step, 3);
    EXPECT_EQ(t.run().step, 6);
  });
  expect_close(test::loss_curve(root + "/shrink"), full, 2e-5);
}

TEST(DistTrain, DisagreeingRanksFailOnEveryRank) {
  const std::string root = fresh_dir("mismatch");
  prepare_data(root);
  auto expect_error = [&](const std::vector<std::string>& rank1_sets,
                          const std::vector<std::string>& want) {
    std::string msg;
    try {
      train::Trainer t(
          tiny_run(root, "run", 2, rank() == 1 ? rank1_sets : std::vector<std::string>{}), quiet());
    } catch (const Error& e) {
      msg = e.what();
    }
    for (const std::string& w : want) EXPECT_NE(msg.find(w), std::string::npos) << msg;
    world().barrier();
  };
  expect_error({"train.lr=1.0e-3"},
               {"ranks disagree", "config hash", "on rank 1", "on rank 0", "same config"});
  expect_error({"model.hidden_size=48"}, {"parameter count", "on rank 1"});
}

TEST(DistTrain, ANonFiniteLossOnOneRankSkipsOnBothAndDivergenceIsCaught) {
  const std::string root = fresh_dir("nonfinite");
  prepare_data(root);
  train::RunConfig c = tiny_run(root, "run", 2, {"train.on_nonfinite=skip", "train.steps=2"});
  train::Trainer t(c, quiet());
  if (rank() == 1) ops::fill_(*t.model().find_parameter("model.norm.weight"), std::nan(""));
  // The averaged gradients are NaN on both ranks, so both skip (and nobody hangs); the
  // replicas now differ (rank 1's NaN weight), which the check before the checkpoint catches.
  std::string msg;
  try {
    t.run();
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(t.state().skipped_steps, 2);
  EXPECT_NE(msg.find("parameter checksum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("weights differ at step 2"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(fs::path(root) / "run" / "checkpoints"));
}

class MpiEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    world().barrier();
    if (rank() == 0) fs::remove_all(job_root());
    dist::finalize();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

}  // namespace
}  // namespace gdn
