// The CPU peak behind MFU and "% of peak": measured once per machine and cached under the
// machine's key, re-measured by gdn bench with the cache keeping the best rate seen, given by
// --peak-gflops or train.peak_gflops.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "src/core/error.h"
#include "src/train/flops.h"
#include "src/train/machine_peak.h"
#include "src/train/run_config.h"
#include "tests/test_helpers.h"

namespace gdn {
namespace {

// gdn bench's device block for a tiny sweep, with the peak cache in `cache_dir`.
nlohmann::json bench_device(const std::string& cache_dir, const std::string& flags = "") {
  const std::string bin = test::gdn_binary();
  const std::string out = cache_dir + "/bench.json";
  const std::string cmd = "GDN_CACHE_DIR=" + cache_dir + " " + bin +
                          " bench --impls recurrent --modes fwd --seq 16 --dims 16 --repeats 1 "
                          "--min-sample-ms 0 --no-reference --out " +
                          out + " " + flags + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
  return nlohmann::json::parse(test::read_file(out))["device"];
}

TEST(MachinePeak, MeasuredOnceCachedByMachineAndTheBestIsKept) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  test::TempDir dir("gdn_test_peak");
  const std::string cache = dir.path.string();
  // A fresh cache: measured, and written under this machine's key.
  const nlohmann::json first = bench_device(cache);
  const double measured = first["peak_gflops_fp32"];
  EXPECT_GT(measured, 0);
  const auto file = nlohmann::json::parse(test::read_file(cache + "/cpu-peak.json"));
  ASSERT_EQ(file.size(), 1u);
  const std::string key = file.begin().key();
  EXPECT_NE(key.find("threads | BLAS"), std::string::npos) << key;
  EXPECT_GE(double(file[key]["gflops"]), measured * 0.999);
  // A better rate in the cache than any measurement now: the cache's stays the peak.
  nlohmann::json better = file;
  better[key]["gflops"] = 1e6;
  test::write_file(cache + "/cpu-peak.json", better.dump());
  const nlohmann::json second = bench_device(cache);
  EXPECT_EQ(double(second["peak_gflops_fp32"]), 1e6);
  EXPECT_NE(std::string(second["peak_how"]).find("cached in"), std::string::npos) << second.dump();
  // --peak-gflops wins.
  EXPECT_EQ(double(bench_device(cache, "--peak-gflops 123.5")["peak_gflops_fp32"]), 123.5);
}

TEST(MachinePeak, GivenPeaks) {
  EXPECT_EQ(train::cpu_peak(42.0).gflops, 42.0);
  EXPECT_EQ(train::cpu_peak(42.0).source, "given");
  EXPECT_EQ(train::device_peak_flops("cpu", false, false, 50.0), 50e9);
  EXPECT_EQ(train::device_peak_flops("NVIDIA H200", true, false, 0), 989e12);
  EXPECT_EQ(train::parse_run_config("train:\n  peak_gflops: 250\n", "p.yaml").train.peak_gflops,
            250.0);
  EXPECT_THROW(train::parse_run_config("train:\n  peak_gflops: -1\n", "p.yaml"), Error);
}

}  // namespace
}  // namespace gdn
