// `gdn bench --op kda`: Kimi Delta Attention rows (kda_<impl>, "op": "kda") in the bench schema,
// beside the gated delta rule's at the same shapes with --op gdr,kda, each with rel_err against
// the fp64 recurrent kernel and GFLOP/s from the kernel's FLOP count; names outside the selected
// ops refused naming the flag (src/cli/bench_kda.h).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/kda.h"
#include "tests/test_helpers.h"

namespace gdn {
namespace {

int run_gdn(const std::string& args) {
  const std::string bin = test::gdn_binary();
  if (bin.empty()) return -1;
  const int rc = std::system((bin + " " + args + " >bench_kda.out 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -2;
}

TEST(BenchKda, RowsBesideTheGatedDeltaRuleWithErrorsAndFlops) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  test::TempDir dir;
  const std::string out = dir.file("kda.json");
  ASSERT_EQ(run_gdn("bench --op gdr,kda --impls recurrent,chunked --modes fwd,fwd_bwd --heads 2 "
                    "--seq 80 --dims 16 --chunk-sizes 16 --repeats 1 --min-sample-ms 0 --out " +
                    out),
            0)
      << test::read_file("bench_kda.out");
  const auto doc = nlohmann::json::parse(test::read_file(out));
  EXPECT_EQ(doc["config"]["ops"], nlohmann::json::array({"gdr", "kda"}));
  int kda_rows = 0, gdr_rows = 0;
  for (const auto& r : doc["results"]) {
    ASSERT_FALSE(r.contains("error")) << r.dump();
    const std::string impl = r["impl"];
    if (r.value("op", "") != "kda") {
      ++gdr_rows;
      continue;
    }
    ++kda_rows;
    EXPECT_TRUE(impl == "kda_recurrent" || impl == "kda_chunked") << impl;
    EXPECT_LT(double(r["rel_err"]), 1e-5) << r.dump();
    if (r["mode"] == "fwd_bwd") {
      for (const auto& [name, err] : r["rel_err_grads"].items())
        EXPECT_LT(double(err), 1e-4) << impl << " d" << name;
    }
    // GFLOP/s is the kernel's count over the median time.
    kda::Problem p;
    p.B = 1, p.T = 80, p.H = p.HV = 2, p.K = p.V = 16, p.chunk = 16;
    p.impl = impl == "kda_chunked" ? kda::Impl::chunked : kda::Impl::recurrent;
    const double flops =
        kda::forward_flops(p) + (r["mode"] == "fwd_bwd" ? kda::backward_flops(p) : 0.0);
    EXPECT_NEAR(double(r["gflops"]), flops / (double(r["median_ms"]) * 1e-3) * 1e-9,
                1e-9 * double(r["gflops"]));
  }
  EXPECT_EQ(kda_rows, 4);
  EXPECT_EQ(gdr_rows, 4);
}

TEST(BenchKda, NamesOutsideTheSelectedOpsAreRefused) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  EXPECT_EQ(run_gdn("bench --op kda --impls fused --seq 32 --dims 16 --repeats 1"), 1);
  EXPECT_NE(test::read_file("bench_kda.out")
                .find("--impls fused: unknown (known: kda: recurrent, chunked)"),
            std::string::npos)
      << test::read_file("bench_kda.out");
  EXPECT_EQ(run_gdn("bench --op mamba --seq 32 --dims 16 --repeats 1"), 1);
  EXPECT_NE(test::read_file("bench_kda.out").find("--op mamba: unknown (known: gdr, kda)"),
            std::string::npos)
      << test::read_file("bench_kda.out");
}

}  // namespace
}  // namespace gdn
