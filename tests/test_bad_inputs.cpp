// Bad input is refused clearly: empty configs, sizes no machine holds (refused by formula before
// anything is allocated, naming the key), --set mistakes named as --set with a "did you mean",
// directories given as files, safetensors whose offsets overlap, run backwards, leave gaps or
// point past the file, sizes without units; and the exit statuses of profile-memory and bench.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "src/io/file_check.h"
#include "src/io/safetensors.h"
#include "src/io/yaml_config.h"
#include "src/ops/ops.h"
#include "src/train/memory_profile.h"
#include "src/train/size_check.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

using test::error_of;
namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// Hidden 64, 2 layers of 2 heads of 32, vocab 256, plus `extra` YAML.
train::RunConfig small(const std::string& extra = "") {
  return train::parse_run_config(test::model_yaml({64, 2, 2, 32, 256}) + extra, "small.yaml");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- configs ------------------------------------------------------------------------------------

TEST(BadConfig, EmptyOrCommentOnlyIsRefusedWithAMinimalConfig) {
  for (const char* text :
       {"", "# nothing here\n\n   # or here\n", "model:\n", "model: {}\ntrain:\n"}) {
    const std::string e = error_of([&] { train::parse_run_config(text, "empty.yaml"); });
    EXPECT_TRUE(contains(e, "empty.yaml: the config sets no key")) << text << ": " << e;
    EXPECT_TRUE(contains(e, "configs/default.yaml")) << e;
    EXPECT_TRUE(contains(e, "hidden_size:")) << e;
  }
  // The minimal config it shows is a complete config that the kernels run.
  train::RunConfig c = train::parse_run_config(train::kMinimalConfig, "minimal.yaml");
  EXPECT_NO_THROW(train::check_kernel_limits(c));
  EXPECT_NO_THROW(train::check_run_fits(c, Device::cpu()));
  // From a file, too; and an empty file with a --set is a config (the --set sets a key).
  test::TempDir dir("gdn_bad_cfg");
  test::write_file(dir.file("empty.yaml"), "# a template, not filled in\n");
  EXPECT_TRUE(contains(error_of([&] { train::load_run_config(dir.file("empty.yaml")); }),
                       "the config sets no key"));
  EXPECT_TRUE(contains(
      error_of([&] { train::load_run_config(dir.file("empty.yaml"), {"train.steps=abc"}); }),
      "(from --set): train.steps must be an integer"));
}

TEST(BadConfig, HeadsBeyondTheKernelsAreRefusedNamingTheKeys) {
  // fla's defaults (head_dim 256 x expand_v 2 = value heads of 512) run; expand_v 4 gives value
  // heads of 1024, beyond the kernels' 512.
  EXPECT_NO_THROW(
      train::check_kernel_limits(train::parse_run_config("train:\n  steps: 3\n", "d.yaml")));
  train::RunConfig c =
      train::parse_run_config("model:\n  expand_v: 4\ntrain:\n  steps: 3\n", "d.yaml");
  const std::string e = error_of([&] { train::check_kernel_limits(c); });
  EXPECT_TRUE(contains(e, "d.yaml")) << e;
  EXPECT_TRUE(contains(e, "model.head_dim=256")) << e;
  EXPECT_TRUE(contains(e, "model.expand_v=4")) << e;
  EXPECT_TRUE(contains(e, "1024")) << e;
  EXPECT_EQ(error_of([&] { train::check_run_fits(c, Device::cpu()); }), e);
}

TEST(BadConfig, HugeLayerCountIsRefusedFastNamingTheKey) {
  train::RunConfig c = train::parse_run_config(
      "model:\n  hidden_size: 64\n  num_hidden_layers: 100000000\n  num_heads: 2\n"
      "  head_dim: 32\n  expand_v: 1.0\n  vocab_size: 256\n",
      "deep.yaml");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { train::check_run_fits(c, Device::cpu()); });
  EXPECT_LT(seconds_since(t0), 2.0);  // by formula: no module is built
  EXPECT_TRUE(contains(e, "deep.yaml: this run cannot fit")) << e;
  EXPECT_TRUE(contains(e, "model.num_hidden_layers=100000000")) << e;
  EXPECT_FALSE(contains(e, "train.batch_size")) << e;
  // profile-memory's guard: even meta modules of 1e8 blocks would fill the host.
  const std::string p = error_of([&] { train::check_profilable(c, 8, 256); });
  EXPECT_TRUE(contains(p, "model.num_hidden_layers=100000000")) << p;
  EXPECT_LT(seconds_since(t0), 4.0);
}

TEST(BadConfig, HugeBatchIsRefusedNamingTrainBatchSize) {
  // 1e9 is an integer written as a float: read as one, then refused for its size.
  train::RunConfig c = small("train:\n  batch_size: 1e9\n");
  EXPECT_EQ(c.train.batch_size, 1000000000);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { train::check_run_fits(c, Device::cpu()); });
  EXPECT_LT(seconds_since(t0), 2.0);
  EXPECT_TRUE(contains(e, "small.yaml: this run cannot fit")) << e;
  EXPECT_TRUE(contains(e, "train.batch_size=1000000000")) << e;
  EXPECT_FALSE(contains(e, "model.num_hidden_layers")) << e;
  // Not an integer at all stays an error naming the key and line.
  EXPECT_TRUE(contains(error_of([] { small("train:\n  batch_size: 2.5\n"); }),
                       "small.yaml:10: train.batch_size must be an integer, got '2.5'"));
  EXPECT_TRUE(contains(error_of([] { small("train:\n  batch_size: 1e30\n"); }),
                       "train.batch_size must be an integer"));
}

TEST(BadConfig, ARunThatFitsPasses) {
  train::RunConfig c = small("train:\n  batch_size: 4\n");
  EXPECT_NO_THROW(train::check_run_fits(c, Device::cpu()));
  EXPECT_NO_THROW(train::check_run_fits(c, Device::meta()));
  EXPECT_NO_THROW(train::check_profilable(c, 4, 256));
  // The formula is a lower bound of the step's peak on meta, whatever the checkpointing.
  for (const char* ckpt : {"none", "block", "kernel"}) {
    for (int64_t batch : {1, 64}) {
      for (const char* dtype : {"float32", "bfloat16"}) {
        train::RunConfig k =
            small(str_cat("train:\n  checkpointing: ", ckpt, "\n  dtype: ", dtype, "\n"));
        const auto est = train::estimate_step_size(k, batch, 256);
        const auto prof = train::profile_training_step(k, "meta", batch, 256);
        EXPECT_EQ(est.params, double(k.model.num_parameters()));
        EXPECT_LE(est.device_bytes(), double(prof.peak_bytes)) << ckpt << " batch " << batch;
      }
    }
  }
  EXPECT_GT(train::host_memory_bytes(), 0);
}

TEST(BadConfig, SetErrorsNameTheSetNotALine) {
  const std::string yaml = test::model_yaml({64, 2, 2, 32, 256}) + "train:\n  steps: 5\n";
  std::string e = error_of([&] { train::parse_run_config(yaml, "c.yaml", {"train.steps=abc"}); });
  EXPECT_TRUE(contains(e,
                       "'train.steps=abc' (from --set): train.steps must be an integer, got "
                       "'abc'"))
      << e;
  EXPECT_FALSE(contains(e, "c.yaml:")) << e;  // the file's line holds "steps: 5"
  e = error_of([&] { train::parse_run_config(yaml, "c.yaml", {"train.betas=[0.9,x]"}); });
  EXPECT_TRUE(contains(e, "'train.betas=[0.9,x]' (from --set)")) << e;
  e = error_of([&] { train::parse_run_config(yaml, "c.yaml", {"train.dtype=fp8"}); });
  EXPECT_TRUE(contains(e, "'train.dtype=fp8' (from --set): train.dtype: unknown dtype 'fp8'")) << e;
  // The file's own mistakes still name the file and line.
  e = error_of([&] { train::parse_run_config(yaml + "  lr: fast\n", "c.yaml"); });
  EXPECT_TRUE(contains(e, "c.yaml:11: train.lr must be a number")) << e;
}

TEST(BadConfig, SetTyposGetDidYouMean) {
  auto e = [](const std::string& set) {
    return error_of(
        [&] { train::parse_run_config("model:\n  hidden_size: 64\n", "c.yaml", {set}); });
  };
  EXPECT_TRUE(contains(e("train.stesp=3"),
                       "--set train.stesp=3: unknown key 'train.stesp' (did "
                       "you mean 'train.steps'?)"));
  EXPECT_TRUE(contains(e("trian.steps=3"), "did you mean 'train.steps'?"));
  EXPECT_TRUE(contains(e("steps=3"), "did you mean 'train.steps'?"));
  EXPECT_TRUE(contains(e("model.num_hidden_layer=3"), "did you mean 'model.num_hidden_layers'?"));
  EXPECT_TRUE(contains(e("train.steps"), "expected section.key=value"));
  const std::string far = e("zzzzzz.qqqqqq=1");
  EXPECT_TRUE(contains(far, "unknown key 'zzzzzz.qqqqqq'")) << far;
  EXPECT_FALSE(contains(far, "did you mean")) << far;
  // The YAML path suggests sections too.
  EXPECT_TRUE(contains(error_of([] { train::parse_run_config("trian:\n  steps: 1\n", "c.yaml"); }),
                       "c.yaml:1: unknown key 'trian' (did you mean 'train'?)"));
}

TEST(BadConfig, DirectoriesAndMissingFilesAreNamed) {
  test::TempDir dir("gdn_bad_dir");
  std::string e = error_of([&] { train::load_run_config(dir.path.string()); });
  EXPECT_TRUE(contains(e, "config '" + dir.path.string() + "' is a directory, not a file")) << e;
  EXPECT_FALSE(contains(e, "underflow")) << e;
  e = error_of([&] { train::load_run_config(dir.file("nope.yaml")); });
  EXPECT_TRUE(contains(e, "config '" + dir.file("nope.yaml") + "' does not exist")) << e;
  e = error_of([&] { io::load_safetensors(dir.path.string()); });
  EXPECT_TRUE(contains(e, "safetensors file '" + dir.path.string() + "' is a directory")) << e;
  e = error_of([&] { io::read_file(dir.path.string(), "token list"); });
  EXPECT_TRUE(contains(e, "token list '" + dir.path.string() + "' is a directory")) << e;
  test::write_file(dir.file("x.txt"), "abc");
  EXPECT_EQ(io::read_file(dir.file("x.txt"), "text"), "abc");
}

// ---- safetensors
// ----------------------------------------------------------------------------------

// A safetensors file from a header (JSON text) and `data_bytes` zero bytes of data.
void write_st(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string h = header;
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
  bytes += h;
  bytes.append(data_bytes, '\0');
  test::write_file(path, bytes);
}

std::string st_error(const std::string& header, size_t data_bytes) {
  test::TempDir dir("gdn_bad_st");
  const std::string path = dir.file("m.safetensors");
  write_st(path, header, data_bytes);
  std::string e = error_of([&] { io::load_safetensors(path); });
  EXPECT_TRUE(contains(e, path)) << e;  // every error names the file
  return e;
}

TEST(BadSafetensors, OffsetsMustTileTheDataExactly) {
  // Two [2, 2] F32 tensors, 16 bytes each.
  auto two = [](const std::string& a, const std::string& b) {
    return R"({"embed": {"dtype": "F32", "shape": [2, 2], "data_offsets": )" + a +
           R"(}, "head": {"dtype": "F32", "shape": [2, 2], "data_offsets": )" + b + "}}";
  };
  {  // well formed: loads
    test::TempDir dir("gdn_good_st");
    write_st(dir.file("ok.safetensors"), two("[0, 16]", "[16, 32]"), 32);
    EXPECT_EQ(io::load_safetensors(dir.file("ok.safetensors")).size(), 2u);
  }
  // Offsets of the embedding and the head, the file's data size, and what the error says.
  const struct {
    const char *embed, *head;
    size_t data_bytes;
    std::vector<std::string> parts;
  } cases[] = {
      {"[0, 16]", "[0, 16]", 32, {"overlap", "'embed'", "'head'"}},  // the embedding's bytes
      {"[0, 16]", "[8, 24]", 32, {"overlap"}},
      {"[0, 16]", "[32, 16]", 32, {"tensor 'head'", "out of order"}},  // end before begin
      {"[0, 16]", "[16, 32]", 24, {"tensor 'head'", "beyond the end of the file"}},
      {"[0, 16]", "[16, 28]", 28, {"tensor 'head' [2, 2] F32 needs 16 bytes"}},  // shape vs bytes
      {"[0, 16]", "[20, 36]", 36, {"belong to no tensor", "'head'"}},            // a gap
      {"[0, 16]", "[16, 32]", 40, {"8 bytes after the last tensor 'head'"}},     // bytes after
  };
  for (const auto& c : cases) {
    const std::string e = st_error(two(c.embed, c.head), c.data_bytes);
    for (const std::string& part : c.parts)
      EXPECT_TRUE(contains(e, part)) << c.embed << " " << c.head << ": " << part << " not in " << e;
  }
}

TEST(BadSafetensors, WrongFieldTypesNameTheTensor) {
  const std::string no_type_error = "type_error";
  std::string e = st_error(R"({"w": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_TRUE(contains(e, "tensor 'w' has unsupported dtype 7")) << e;
  EXPECT_FALSE(contains(e, no_type_error)) << e;
  e = st_error(R"({"w": {"dtype": "F32", "shape": "4", "data_offsets": [0, 16]}})", 16);
  EXPECT_TRUE(contains(e, "tensor 'w': shape must be a list")) << e;
  e = st_error(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4);
  EXPECT_TRUE(contains(e, "tensor 'w': shape [-1] must hold non-negative integers")) << e;
  e = st_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}})", 4);
  EXPECT_TRUE(contains(e, "tensor 'w': data_offsets must be [begin, end]")) << e;
  e = st_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4);
  EXPECT_TRUE(contains(e, "data_offsets must be [begin, end]")) << e;
  e = st_error(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296],)"
               R"( "data_offsets": [0, 4]}})",
               4);
  EXPECT_TRUE(contains(e, "tensor 'w': shape") && contains(e, "too large")) << e;
  e = st_error(
      R"({"__metadata__": "x", "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_TRUE(contains(e, "__metadata__ is not a JSON object")) << e;
  EXPECT_FALSE(contains(e, "invalid_iterator")) << e;
}

// ---- sizes and profile-memory ------------------------------------------------------------------

TEST(BadSizes, BudgetsNeedAUnit) {
  EXPECT_EQ(train::parse_bytes("24GiB"), int64_t(24) << 30);
  EXPECT_EQ(train::parse_bytes("24 gib"), int64_t(24) << 30);
  EXPECT_EQ(train::parse_bytes("1.5TB"), int64_t(1500000000000));
  EXPECT_EQ(train::parse_bytes("512KiB"), 512 * 1024);
  EXPECT_EQ(train::parse_bytes("1e9B"), 1000000000);
  std::string e = error_of([] { train::parse_bytes("24", "--budget"); });
  EXPECT_TRUE(contains(e, "--budget '24' has no unit: write 24GiB or 24GB")) << e;
  e = error_of([] { train::parse_bytes("GiB", "--budget"); });
  EXPECT_TRUE(contains(e, "--budget 'GiB' is not a size")) << e;
  EXPECT_FALSE(contains(e, "stod")) << e;
  e = error_of([] { train::parse_bytes("24 parsecs", "--allowance"); });
  EXPECT_TRUE(contains(e, "--allowance: unknown size unit 'parsecs'")) << e;
  EXPECT_TRUE(contains(error_of([] { train::parse_bytes("-1GiB"); }), "non-negative"));
  EXPECT_TRUE(contains(error_of([] { train::parse_bytes("1e30TiB"); }), "too large"));
}

TEST(BadSizes, NothingFitsIsSaidAndSomethingFitsIsListed) {
  train::RunConfig c = small("train:\n  batch_size: 4\n");
  // A budget nothing meets: the report is not an empty list.
  auto none = train::suggest_fits(c, 4, 128, 1024, 0);
  ASSERT_FALSE(none.empty());
  for (const auto& s : none) EXPECT_FALSE(s.fits);
  EXPECT_TRUE(std::any_of(none.begin(), none.end(), [](const auto& s) {
    return contains(s.settings, "train.batch_size=1");
  }));  // smaller batches down to 1 were tried
  auto p = train::profile_training_step(c, "meta", 4, 128);
  p.budget_bytes = 1024;
  const std::string r = train::fit_report(none, p);
  EXPECT_TRUE(contains(r, "nothing fits within 1.0 KiB: the smallest predicted peak is")) << r;
  // The smallest is what was configured when nothing tried is smaller.
  EXPECT_TRUE(contains(train::fit_report({}, p),
                       "(as configured: train.dtype=float32 "
                       "train.checkpointing=none train.batch_size=4)"));
  // A budget some setting meets: at least one line, each under the budget.
  const int64_t budget = p.peak_bytes * 7 / 10;
  p.budget_bytes = budget;
  auto some = train::suggest_fits(c, 4, 128, budget, 0);
  const std::string r2 = train::fit_report(some, p);
  EXPECT_TRUE(contains(r2, "settings that would fit")) << r2;
  EXPECT_TRUE(contains(r2, "train.batch_size=")) << r2;
  EXPECT_FALSE(contains(r2, "nothing fits")) << r2;
}

// ---- exit statuses of the program (when it is built beside the tests) ---------------------------

// The exit status of `../gdn ARGS` (tests run in build/tests), -1 when the program is absent.
int gdn_status(const std::string& args) {
  if (!fs::exists("../gdn")) return -1;
  const int rc = std::system(("../gdn " + args + " >gdn_bad_inputs.out 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -2;
}

TEST(ExitStatus, ProfileMemoryOverBudgetAndBenchWithFailedRows) {
  if (!fs::exists("../gdn")) GTEST_SKIP() << "the gdn program is not built beside the tests";
  test::TempDir dir("gdn_exit");
  const std::string cfg = dir.file("c.yaml");
  test::write_file(cfg, test::model_yaml({64, 2, 2, 32, 256}) + "data:\n  seq_len: 64\n");
  EXPECT_EQ(gdn_status("profile-memory " + cfg + " --budget 64GiB"), 0);
  const std::string json = dir.file("p.json");
  EXPECT_EQ(gdn_status("profile-memory " + cfg + " --budget 1KiB --json " + json), 2);
  const std::string out = test::read_file("gdn_bad_inputs.out");
  EXPECT_TRUE(contains(out, "nothing fits within 1.0 KiB")) << out;
  EXPECT_TRUE(nlohmann::json::parse(test::read_file(json)).contains("suggestions"));
  EXPECT_EQ(gdn_status("profile-memory " + cfg + " --budget 24"), 1);
  EXPECT_TRUE(contains(test::read_file("gdn_bad_inputs.out"), "has no unit"));
  // K = 300 is beyond the kernels: the row fails, the JSON is written, the status says so.
  const std::string bench = dir.file("b.json");
  EXPECT_EQ(gdn_status("bench --impls recurrent --modes fwd --seq 16 --dims 300 --repeats 1 "
                       "--min-sample-ms 0 --no-reference --out " +
                       bench),
            2);
  const auto doc = nlohmann::json::parse(test::read_file(bench));
  ASSERT_EQ(doc["results"].size(), 1u);
  EXPECT_TRUE(doc["results"][0].contains("error"));
  EXPECT_EQ(gdn_status("bench --impls recurrent --modes fwd --seq 16 --dims 16 --repeats 1 "
                       "--min-sample-ms 0 --no-reference"),
            0);
  // A directory as the config, and a huge model: refused with the path or the key, status 1.
  EXPECT_EQ(gdn_status("profile-memory " + dir.path.string()), 1);
  EXPECT_TRUE(contains(test::read_file("gdn_bad_inputs.out"), "is a directory"));
  EXPECT_EQ(gdn_status("profile-memory " + cfg + " --set model.num_hidden_layers=100000000"), 1);
  EXPECT_TRUE(contains(test::read_file("gdn_bad_inputs.out"), "model.num_hidden_layers=100000000"));
  // A batch of 1e9 is not profiled for minutes: refused by formula (no budget) or reported over
  // budget with settings profiled only where the formula allows.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(gdn_status("profile-memory " + cfg + " --set train.batch_size=1e9"), 1);
  EXPECT_TRUE(contains(test::read_file("gdn_bad_inputs.out"), "train.batch_size=1000000000"));
  EXPECT_EQ(gdn_status("profile-memory " + cfg + " --set train.batch_size=1000000 --budget 2GiB"),
            2);
  EXPECT_TRUE(contains(test::read_file("gdn_bad_inputs.out"), "settings that would fit"));
  EXPECT_LT(seconds_since(t0), 20.0);
  EXPECT_EQ(gdn_status("profile-memory " + cfg + " --set train.stpes=3"), 1);
  EXPECT_TRUE(contains(test::read_file("gdn_bad_inputs.out"), "did you mean 'train.steps'"));
}

}  // namespace
}  // namespace gdn
