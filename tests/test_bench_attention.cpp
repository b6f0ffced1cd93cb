// `gdn bench --impls attention`: attention rows beside the gated delta rule at the same shapes,
// one per --window, FLOPs counted per visible (query, key) pair (counted here independently),
// rel_err against the fp64 kernel, and the crossover lines in the JSON; the CUDA kernels' names
// (attention_flash, attention_cudnn: entries of kernels/attention_registry.h) refused on the CPU
// naming the flag and the device, and the crossover lines of rows with those names
// (src/cli/bench_attention.h, compiled into this test).
// tests/test_cuda_bench_attention.cpp runs the CUDA rows.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "src/cli/bench_attention.h"
#include "tests/test_helpers.h"

namespace gdn {
namespace {

int run_gdn(const std::string& args) {
  const std::string bin = test::gdn_binary();
  if (bin.empty()) return -1;
  const int rc = std::system((bin + " " + args + " >bench_attention.out 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -2;
}

// Visible (query, key) pairs of one sequence of T tokens, counted one query at a time.
double pairs_by_count(int64_t T, int64_t window) {
  double n = 0;
  for (int64_t t = 0; t < T; ++t) n += double(window > 0 ? std::min(t + 1, window) : t + 1);
  return n;
}

TEST(BenchAttention, RowsPerWindowWithFlopsAndErrors) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  test::TempDir dir("bench_attention");
  const std::string out = dir.file("b.json");
  ASSERT_EQ(run_gdn("bench --impls chunked,attention --modes fwd,fwd_bwd --heads 2 --seq 64,200 "
                    "--dims 16 --window 0,32 --repeats 1 --min-sample-ms 0 --out " +
                    out),
            0)
      << test::read_file("bench_attention.out");
  const auto doc = nlohmann::json::parse(test::read_file(out));
  int attention_rows = 0;
  for (const auto& r : doc["results"]) {
    ASSERT_FALSE(r.contains("error")) << r.dump();
    if (r["impl"] != "attention") continue;
    ++attention_rows;
    const int64_t T = r["seq"], w = r["window"];
    const bool fwd_bwd = r["mode"] == "fwd_bwd";
    // GFLOP/s x seconds = 2 heads x pairs x 2 D x (2 products forward, 7 with the backward)
    const double flops = 2.0 * pairs_by_count(T, w) * 2.0 * 16 * (fwd_bwd ? 7 : 2);
    EXPECT_NEAR(double(r["gflops"]) * double(r["median_ms"]) * 1e6, flops, 1e-6 * flops);
    EXPECT_LT(double(r["rel_err"]), 1e-5);
    if (fwd_bwd) {
      for (const char* g : {"q", "k", "v"}) EXPECT_LT(double(r["rel_err_grads"][g]), 1e-5) << g;
    }
  }
  EXPECT_EQ(attention_rows, 2 * 2 * 2);  // T x window x mode
  EXPECT_EQ(doc["config"]["windows"], nlohmann::json({0, 32}));
  // One line per (attention row, implementation, mode): full and windowed, vs chunked.
  ASSERT_EQ(doc["attention_crossovers"].size(), 4u);
  for (const auto& line : doc["attention_crossovers"]) {
    const std::string s = line;
    EXPECT_EQ(s.rfind("attention", 0), 0u) << s;
    EXPECT_NE(s.find("than chunked"), std::string::npos) << s;
  }
}

TEST(BenchAttention, RefusesANegativeWindow) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  EXPECT_EQ(run_gdn("bench --impls attention --seq 16 --dims 16 --window -1 --repeats 1"), 1);
  EXPECT_NE(test::read_file("bench_attention.out").find("--window: must be at least 0, got -1"),
            std::string::npos)
      << test::read_file("bench_attention.out");
}

TEST(BenchAttention, RefusesTheCudaKernelsOnTheCpu) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  for (const std::string name : {"attention_flash", "attention_cudnn"}) {
    EXPECT_EQ(run_gdn("bench --impls chunked," + name + " --seq 16 --dims 16 --repeats 1"), 1)
        << name;
    const std::string out = test::read_file("bench_attention.out");
    EXPECT_NE(out.find("--impls " + name), std::string::npos) << out;
    EXPECT_NE(out.find("--device cpu"), std::string::npos) << out;
    EXPECT_NE(out.find("--device cuda"), std::string::npos) << out;
  }
  // An unknown name lists the attention names too.
  EXPECT_EQ(run_gdn("bench --impls attention_fa3 --seq 16 --dims 16 --repeats 1"), 1);
  const std::string out = test::read_file("bench_attention.out");
  EXPECT_NE(out.find("--impls attention_fa3: unknown"), std::string::npos) << out;
  EXPECT_NE(out.find("attention_flash, attention_cudnn"), std::string::npos) << out;
}

TEST(BenchAttention, ImplNames) {
  for (const char* name : {"attention", "attention_flash", "attention_cudnn"}) {
    EXPECT_TRUE(attn::is_implementation(name)) << name;
    EXPECT_EQ(std::string(cli::attention_entry(name, Device::cuda(0)).name), std::string(name));
  }
  EXPECT_FALSE(attn::is_implementation("chunked"));
  EXPECT_FALSE(attn::is_implementation("attention_fa3"));
  EXPECT_EQ(cli::attention_entry("attention", Device::cpu()).impl, attn::Impl::automatic);
  EXPECT_EQ(cli::attention_entry("attention_flash", Device::cuda(0)).impl, attn::Impl::flash);
  EXPECT_EQ(cli::attention_entry("attention_cudnn", Device::cuda(0)).impl, attn::Impl::cudnn);
  for (const char* name : {"attention_flash", "attention_cudnn"}) {
    try {
      cli::attention_entry(name, Device::cpu());
      ADD_FAILURE() << name << " accepted on the CPU";
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(name), std::string::npos) << what;
      EXPECT_NE(what.find("--device cpu"), std::string::npos) << what;
    }
  }
  EXPECT_THROW(cli::attention_entry("attention_fa3", Device::cuda(0)), std::exception);
}

// Rows of the CUDA kernels' names, with and without a window, against one gated-delta-rule row:
// one line per attention row name, the window as @w, error rows left out.
TEST(BenchAttention, CrossoversNameEachKernel) {
  using nlohmann::json;
  auto row = [](const std::string& impl, int64_t T, int64_t window, double ms) {
    json r = {{"impl", impl}, {"mode", "fwd"},   {"dtype", "bfloat16"},
              {"dk", 128},    {"batch", 1},      {"heads", 16},
              {"seq", T},     {"median_ms", ms}, {"window", window}};
    if (impl.rfind("attention", 0) != 0) r.erase("window");
    return r;
  };
  json results = json::array();
  for (int64_t T : {2048, 8192}) {
    const double t = double(T) / 2048;
    results.push_back(row("fused", T, 0, 1.0 * t));
    results.push_back(row("attention_flash", T, 0, 0.5 * t * t));  // more from 8192 (8x)
    results.push_back(row("attention_cudnn", T, 0, 0.3 * t * t));  // more from 8192 (1.2x)
    results.push_back(row("attention_cudnn", T, 1024, 0.4 * t));   // less up to 8192 (0.4x)
    results.push_back(row("attention", T, 0, 0.3 * t * t));        // the op's choice
  }
  json failed = row("attention_flash", 8192, 1024, 0);
  failed.erase("median_ms");
  failed["error"] = "cannot run";
  results.push_back(failed);
  const std::vector<std::string> lines = cli::attention_crossovers(results);
  ASSERT_EQ(lines.size(), 4u) << json(lines).dump(1);
  auto line_of = [&](const std::string& name) {
    for (const std::string& l : lines)
      if (l.rfind(name + " ", 0) == 0) return l;
    return std::string();
  };
  const std::string where = " fwd bfloat16 B=1 H=16 D=128";
  EXPECT_EQ(line_of("attention_flash"),
            "attention_flash" + where + ": costs more than fused from T = 8192 (2.00x there)");
  EXPECT_EQ(line_of("attention_cudnn"),
            "attention_cudnn" + where + ": costs more than fused from T = 8192 (1.20x there)");
  EXPECT_EQ(
      line_of("attention_cudnn@1024"),
      "attention_cudnn@1024" + where + ": costs less than fused up to T = 8192 (0.40x there)");
  EXPECT_EQ(line_of("attention"),
            "attention" + where + ": costs more than fused from T = 8192 (1.20x there)");
}

}  // namespace
}  // namespace gdn
