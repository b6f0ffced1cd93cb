// `gdn bench --impls attention`: attention rows beside the gated delta rule at the same shapes,
// one per --window, FLOPs counted per visible (query, key) pair (counted here independently),
// rel_err against the fp64 kernel, and the crossover lines in the JSON.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

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
  EXPECT_NE(test::read_file("bench_attention.out").find("--window -1"), std::string::npos)
      << test::read_file("bench_attention.out");
}

}  // namespace
}  // namespace gdn
