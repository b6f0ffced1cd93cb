// `gdn bench --device cuda` attention rows (src/cli/bench_attention.h): attention (the op's
// choice), attention_flash and attention_cudnn on a tiny case, bf16 and fp32, full causal and a
// window, beside chunked. Every row that runs has timings, memory, the kernel that ran and a small
// rel_err against the fp64 CPU kernel; attention_cudnn in fp32 is an error row naming bf16 (so the
// run exits 2), as are its bf16 rows where cuDNN cannot run here (then `attention` ran the flash
// kernel and says why); the crossover lines name each kernel. Label `gpu`; exits 77 without a
// device.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/test_helpers.h"
#include "tests/test_util.h"

GDN_TEST_REQUIRES_CUDA();

namespace gdn {
namespace {

// Runs `gdn args`, its output to `log`.
int run_gdn(const std::string& args, const std::string& log) {
  const std::string bin = test::gdn_binary();
  if (bin.empty()) return -1;
  const int rc = std::system((bin + " " + args + " >" + log + " 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -2;
}

TEST(CudaBenchAttention, EachKernelTimedAndChecked) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  unsetenv("GDN_ATTENTION");  // `attention` is the op's own choice
  test::TempDir dir("bench_cuda_attention");
  const std::string out = dir.file("b.json"), log = dir.file("bench.log");
  // fp32 attention_cudnn rows fail (cuDNN runs bf16): exit status 2, the JSON written.
  ASSERT_EQ(run_gdn("bench --device cuda --impls chunked,attention,attention_flash,attention_cudnn "
                    "--modes fwd,fwd_bwd --dtypes bfloat16,float32 --heads 2 --seq 128,256 "
                    "--dims 64 --window 0,32 --repeats 2 --min-sample-ms 0 --out " +
                        out,
                    log),
            2)
      << test::read_file(log);
  const auto doc = nlohmann::json::parse(test::read_file(out));
  bool cudnn_ran = false;
  std::string cudnn_why;
  std::set<std::string> names;
  for (const auto& r : doc["results"]) {
    const std::string impl = r["impl"], dtype = r["dtype"];
    if (impl == "attention_cudnn" && r.contains("error")) {
      const std::string e = r["error"];
      EXPECT_NE(e.find("attention_cudnn"), std::string::npos) << e;
      if (dtype == "float32") {
        EXPECT_NE(e.find("bf16"), std::string::npos) << e;
      }
      if (dtype == "bfloat16") cudnn_why = e;
      continue;
    }
    ASSERT_FALSE(r.contains("error")) << r.dump();
    if (impl.rfind("attention", 0) != 0) continue;
    names.insert(impl);
    if (impl == "attention_cudnn") cudnn_ran = true;
    EXPECT_EQ(r["device"], "cuda:0") << r.dump();
    const std::string kernel = r["attention_kernel"];
    if (impl == "attention_flash" || dtype == "float32") {
      EXPECT_EQ(kernel, "flash") << r.dump();
    }
    if (impl == "attention_cudnn") {
      EXPECT_EQ(kernel, "cudnn") << r.dump();
    }
    if (impl == "attention" && kernel == "flash") {
      EXPECT_TRUE(r.contains("fallback_fwd")) << r.dump();  // why not cuDNN
    }
    EXPECT_GT(double(r["median_ms"]), 0) << r.dump();
    EXPECT_LE(double(r["q1_ms"]), double(r["median_ms"])) << r.dump();
    EXPECT_LE(double(r["median_ms"]), double(r["q3_ms"])) << r.dump();
    EXPECT_GT(double(r["gflops"]), 0) << r.dump();
    EXPECT_GT(double(r["peak_mb"]), 0) << r.dump();
    EXPECT_GT(double(r["inputs_mb"]), 0) << r.dump();
    const double tol = dtype == "bfloat16" ? 2e-2 : 1e-4;
    EXPECT_LT(double(r["rel_err"]), tol) << r.dump();
    if (r["mode"] == "fwd_bwd") {
      for (const char* g : {"q", "k", "v"})
        EXPECT_LT(double(r["rel_err_grads"][g]), tol) << g << " " << r.dump();
    }
  }
  EXPECT_TRUE(names.count("attention") && names.count("attention_flash"));
  if (!cudnn_ran) std::cout << "[ note ] cuDNN did not run here: " << cudnn_why << "\n";
  // The crossover lines name each kernel that ran (with @32 for the window).
  std::set<std::string> crossing;
  for (const auto& line : doc["attention_crossovers"]) {
    const std::string s = line;
    crossing.insert(s.substr(0, s.find(' ')));
  }
  for (const char* n : {"attention", "attention@32", "attention_flash", "attention_flash@32"})
    EXPECT_TRUE(crossing.count(n)) << n << " " << doc["attention_crossovers"].dump(1);
  if (cudnn_ran) {
    EXPECT_TRUE(crossing.count("attention_cudnn")) << doc["attention_crossovers"].dump(1);
    EXPECT_TRUE(crossing.count("attention_cudnn@32")) << doc["attention_crossovers"].dump(1);
  }
}

}  // namespace
}  // namespace gdn
