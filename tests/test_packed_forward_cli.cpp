// `gdn forward --cu-seqlens FILE.npy` (the program, run as a child process: the one beside this
// test's build directory, or $GDN_BINARY): on [1, T+1] tokens its logits equal each sequence
// run alone (fp64, 1e-10), its loss is the mean over all T targets and its gradients are the
// per-sequence gradients weighted by their share of the targets; malformed offsets are refused
// naming --cu-seqlens and the entry.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "src/io/npy.h"
#include "src/io/safetensors.h"
#include "src/ops/ops.h"
#include "tests/test_helpers.h"
#include "tests/test_util.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;

using test::gdn_binary;

struct Result {
  int code = -1;
  std::string out, err;
};

Result gdn(const test::TempDir& dir, const std::string& args) {
  const std::string out = dir.file("out.txt"), err = dir.file("err.txt");
  const int status =
      std::system((gdn_binary() + " forward " + args + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::read_file(out), test::read_file(err)};
}

const std::vector<int64_t> kCu = {0, 2, 3, 10, 17};  // lengths 2, 1, 7, 7 (conv width 4)

std::string tokens_file(const test::TempDir& dir, const std::string& name, const Tensor& t) {
  const std::string path = dir.file(name);
  io::save_npy(path, t);
  return path;
}

std::map<std::string, std::vector<double>> grads(const std::string& path) {
  std::map<std::string, std::vector<double>> g;
  for (auto& [name, t] : io::load_safetensors(path)) g[name] = t.to_vector();
  return g;
}

TEST(PackedForwardCli, LogitsLossAndGradsEqualEachSequenceAlone) {
  ASSERT_NE(gdn_binary(), "") << "no gdn program beside this test's build directory";
  test::TempDir dir("gdn_packed_forward");
  const std::string cfg = dir.file("model.yaml");
  test::write_file(cfg, test::model_yaml({16, 2, 2, 8, 32, 16}));
  const int64_t T = kCu.back();
  Generator g(4);
  const Tensor tokens = ops::randint({1, T + 1}, 0, 32, DType::int64, Device::cpu(), &g);
  std::vector<double> cu(kCu.begin(), kCu.end());
  const std::string cu_path =
      tokens_file(dir, "cu.npy", ops::from_vector(cu, {int64_t(cu.size())}, DType::int32));
  const std::string common = cfg + " --dtype float64 ";
  Result packed = gdn(dir, common + "--tokens " + tokens_file(dir, "tokens.npy", tokens) +
                               " --cu-seqlens " + cu_path + " --logits " + dir.file("lp.npy") +
                               " --grads " + dir.file("gp.safetensors"));
  ASSERT_EQ(packed.code, 0) << packed.err;
  const double loss = nlohmann::json::parse(packed.out)["loss"];
  std::vector<Tensor> logits;
  double weighted = 0;
  std::map<std::string, std::vector<double>> summed;
  for (size_t n = 0; n + 1 < kCu.size(); ++n) {
    const Tensor part = ops::contiguous(ops::slice(tokens, 1, kCu[n], kCu[n + 1] + 1));
    const std::string ln = dir.file("l" + std::to_string(n) + ".npy");
    const std::string gn = dir.file("g" + std::to_string(n) + ".safetensors");
    Result alone = gdn(dir, common + "--tokens " + tokens_file(dir, "t.npy", part) + " --logits " +
                                ln + " --grads " + gn);
    ASSERT_EQ(alone.code, 0) << alone.err;
    const double share = double(kCu[n + 1] - kCu[n]) / double(T);
    weighted += share * double(nlohmann::json::parse(alone.out)["loss"]);
    logits.push_back(io::load_npy(ln));
    for (auto& [name, v] : grads(gn)) {
      auto& s = summed[name];
      s.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) s[i] += share * v[i];
    }
  }
  EXPECT_LT(test::rel_err(io::load_npy(dir.file("lp.npy")), ops::concat(logits, 1)), 1e-10);
  EXPECT_NEAR(loss, weighted, 1e-10 * std::abs(weighted));
  const auto gp = grads(dir.file("gp.safetensors"));
  ASSERT_EQ(gp.size(), summed.size());
  for (const auto& [name, v] : gp) EXPECT_LT(test::rel_err(v, summed.at(name)), 1e-10) << name;
  // Without --cu-seqlens the sequences see each other: the comparison above can fail.
  Result stream =
      gdn(dir, common + "--tokens " + dir.file("tokens.npy") + " --logits " + dir.file("ls.npy"));
  ASSERT_EQ(stream.code, 0) << stream.err;
  EXPECT_GT(test::rel_err(io::load_npy(dir.file("ls.npy")), ops::concat(logits, 1)), 1e-6);
}

TEST(PackedForwardCli, MalformedOffsetsAreRefusedNamingTheFlagAndEntry) {
  ASSERT_NE(gdn_binary(), "") << "no gdn program beside this test's build directory";
  test::TempDir dir("gdn_packed_forward_bad");
  const std::string cfg = dir.file("model.yaml");
  test::write_file(cfg, test::model_yaml({16, 1, 2, 8, 32, 16}));
  Generator g(4);
  const std::string one_row =
      tokens_file(dir, "one.npy", ops::randint({1, 9}, 0, 32, DType::int64, Device::cpu(), &g));
  const std::string two_rows =
      tokens_file(dir, "two.npy", ops::randint({2, 9}, 0, 32, DType::int64, Device::cpu(), &g));
  const auto refused = [&](const std::string& tokens, const std::vector<double>& cu, DType dt,
                           const std::string& part) {
    const std::string path =
        tokens_file(dir, "cu.npy", ops::from_vector(cu, {int64_t(cu.size())}, dt));
    Result r = gdn(dir, cfg + " --tokens " + tokens + " --cu-seqlens " + path);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("--cu-seqlens " + path), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << part << " not in: " << r.err;
  };
  refused(one_row, {0, 5, 5, 8}, DType::int64, "cu_seqlens[2] = 5 is not greater than");
  refused(one_row, {1, 8}, DType::int32, "cu_seqlens[0] = 1");
  refused(one_row, {0, 4, 9}, DType::int64, "cu_seqlens[2] = 9: the last offset must be T = 8");
  refused(two_rows, {0, 8}, DType::int64, "B must be 1");
  refused(one_row, {0, 8}, DType::float32, "int32 or int64");
}

}  // namespace
}  // namespace gdn
