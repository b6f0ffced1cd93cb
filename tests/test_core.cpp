// Core: dtypes (bf16/fp16 rounding), shapes, allocator accounting, meta device, views.
#include <gtest/gtest.h>

#include "src/ops/ops.h"
#include "tests/test_util.h"

namespace gdn {
namespace {

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(float(bf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(float(bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_EQ(float(bf16(1.0f + 1.0f / 256 + 1.0f / 65536)), 1.0f + 1.0f / 128);  // above half
  EXPECT_EQ(bf16(-2.5f).bits, 0xC020);
  EXPECT_TRUE(std::isinf(float(bf16(INFINITY))));
  EXPECT_TRUE(std::isnan(float(bf16(NAN))));
  EXPECT_EQ(bf16(3.3895314e38f).bits, 0x7F7F);  // the largest finite bf16 stays finite
}

TEST(DType, Fp16Conversion) {
  EXPECT_EQ(float(fp16(1.0f)), 1.0f);
  EXPECT_EQ(fp16(1.0f).bits, 0x3C00);
  EXPECT_EQ(fp16(-2.0f).bits, 0xC000);
  EXPECT_EQ(fp16(65504.0f).bits, 0x7BFF);
  EXPECT_TRUE(std::isinf(float(fp16(65520.0f))));
  EXPECT_EQ(float(fp16(5.960464477539063e-08f)), 5.960464477539063e-08f);  // min subnormal
  EXPECT_EQ(fp16(1.0f + 1.0f / 2048).bits, 0x3C00);                        // tie to even
  EXPECT_EQ(fp16(1.0f + 3.0f / 2048).bits, 0x3C02);
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite positive half round-trips
    fp16 x;
    x.bits = uint16_t(h);
    EXPECT_EQ(fp16(float(x)).bits, h);
  }
}

TEST(DType, ParseAndNames) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bfloat16);
  EXPECT_EQ(parse_dtype("float64"), DType::float64);
  EXPECT_THROW(parse_dtype("float8"), Error);
  EXPECT_STREQ(dtype_name(DType::int32), "int32");
}

TEST(Shape, Broadcast) {
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  EXPECT_EQ(broadcast_shapes({}, {3}), (Shape{3}));
  try {
    broadcast_shapes({2, 3}, {4});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4]"), std::string::npos) << msg;
  }
}

TEST(Device, Parse) {
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  EXPECT_TRUE(parse_device("meta").is_meta());
  EXPECT_THROW(parse_device("tpu"), Error);
  if (cuda_device_count() == 0) {
    EXPECT_THROW(parse_device("cuda:0"), Error);
    EXPECT_TRUE(parse_device("auto").is_cpu());
  }
}

TEST(Allocator, CategoriesAndPeak) {
  Device cpu = Device::cpu();
  reset_peak_memory(cpu);
  MemoryStats before = memory_stats(cpu);
  {
    MemoryCategoryScope scope(MemCategory::param);
    Tensor p = ops::empty({256}, DType::float32, cpu);
    MemoryStats s = memory_stats(cpu);
    EXPECT_EQ(s.cur(MemCategory::param) - before.cur(MemCategory::param), 1024);
    {
      MemoryCategoryScope scope2(MemCategory::optim);
      Tensor m = ops::empty({128}, DType::float64, cpu);
      EXPECT_EQ(memory_stats(cpu).cur(MemCategory::optim) - before.cur(MemCategory::optim), 1024);
    }
    s = memory_stats(cpu);
    EXPECT_EQ(s.cur(MemCategory::optim), before.cur(MemCategory::optim));
    EXPECT_EQ(s.peak - before.total, 2048);
  }
  MemoryStats after = memory_stats(cpu);
  EXPECT_EQ(after.total, before.total);
  reset_peak_memory(cpu);
  EXPECT_EQ(memory_stats(cpu).peak, after.total);
}

TEST(Allocator, SavedTensorsCountAsActivations) {
  Device cpu = Device::cpu();
  MemoryStats s0 = memory_stats(cpu);
  Tensor x = ops::randn({64}, DType::float32).set_requires_grad(true);
  Tensor y = ops::exp(x);  // saves its output
  MemoryStats s1 = memory_stats(cpu);
  EXPECT_EQ(s1.cur(MemCategory::activation) - s0.cur(MemCategory::activation), 256);
  ops::sum(y).backward();
  MemoryStats s2 = memory_stats(cpu);
  // After backward the graph is freed: y is a temp again, x.grad is a grad.
  EXPECT_EQ(s2.cur(MemCategory::activation), s0.cur(MemCategory::activation));
  EXPECT_EQ(s2.cur(MemCategory::grad) - s0.cur(MemCategory::grad), 256);
}

// The same program allocates the same bytes, per category, on meta and on cpu.
TEST(Meta, AccountingMatchesCpu) {
  auto program = [](Device d) {
    reset_peak_memory(d);
    MemoryStats before = memory_stats(d);
    {
      Tensor w;
      {
        MemoryCategoryScope scope(MemCategory::param);
        w = ops::zeros({16, 8}, DType::float32, d).set_requires_grad(true);
      }
      Tensor x = ops::ones({4, 3, 8}, DType::float32, d);
      Tensor h = ops::silu(ops::linear(x, w));
      Tensor l = ops::mean(ops::rms_norm(h, Tensor(), 1e-6));
      EXPECT_EQ(h.shape(), (Shape{4, 3, 16}));
      l.backward();
    }
    MemoryStats s = memory_stats(d);
    s.peak -= before.total;
    return s;
  };
  MemoryStats cpu = program(Device::cpu());
  MemoryStats meta = program(Device::meta());
  EXPECT_EQ(cpu.peak, meta.peak);
  EXPECT_GT(cpu.peak, 0);
  for (int c = 0; c < kNumMemCategories; ++c) EXPECT_EQ(cpu.max[c], meta.max[c]) << c;
}

TEST(Meta, ShapesPropagateWithoutData) {
  Device m = Device::meta();
  Tensor a = ops::randn({2, 3, 4}, DType::bfloat16, m);
  Tensor b = ops::randn({4, 5}, DType::bfloat16, m);
  Tensor c = ops::matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(c.data_ptr(), nullptr);
  EXPECT_EQ(ops::sum(c, {1}).shape(), (Shape{2, 5}));
  EXPECT_EQ(ops::concat({c, c}, 1).shape(), (Shape{2, 6, 5}));
  EXPECT_THROW(c.to_vector(), Error);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor a = ops::from_vector({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = ops::transpose(a, 0, 1);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  test::expect_values(ops::contiguous(t), {0, 3, 1, 4, 2, 5});
  Tensor s = ops::slice(a, 1, 1, 3);
  test::expect_values(s, {1, 2, 4, 5});
  EXPECT_THROW(ops::view(t, {6}), Error);
  test::expect_values(ops::reshape(t, {6}), {0, 3, 1, 4, 2, 5});
  Tensor e = ops::expand(ops::from_vector({1, 2}, {2, 1}), {2, 3});
  test::expect_values(e, {1, 1, 1, 2, 2, 2});
}

TEST(Random, SeededAndReproducible) {
  Generator g1(42), g2(42), g3(43);
  auto a = ops::randn({1000}, DType::float32, Device::cpu(), &g1).to_vector();
  auto b = ops::randn({1000}, DType::float32, Device::cpu(), &g2).to_vector();
  auto c = ops::randn({1000}, DType::float32, Device::cpu(), &g3).to_vector();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double mean = 0, var = 0;
  for (double x : a) mean += x / 1000;
  for (double x : a) var += (x - mean) * (x - mean) / 1000;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.15);
  // The stream advances: a second draw differs from the first.
  auto d = ops::randn({1000}, DType::float32, Device::cpu(), &g1).to_vector();
  EXPECT_NE(a, d);
  auto u = ops::rand({1000}, DType::float64, Device::cpu(), &g1).to_vector();
  for (double x : u) EXPECT_TRUE(x >= 0 && x < 1);
  auto r = ops::randint({1000}, 3, 7, DType::int64, Device::cpu(), &g1).to_vector();
  for (double x : r) EXPECT_TRUE(x >= 3 && x < 7);
}

TEST(Errors, NameShapes) {
  Tensor a = ops::zeros({2, 3}), b = ops::zeros({4, 5});
  try {
    ops::matmul(a, b);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("matmul"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace gdn
