// Hostile but realistic inputs, each refused by name (flag, key, line, file or value), never taken
// silently: numeric flags out of range or not numbers, duplicate YAML keys, NaN sizes, an odd
// attention head_dim, inputs that are pipes, devices or dangling links, a huge bad JSON Lines
// line (cut to an excerpt), bad-line hints under gdn train, int64 .npy values beyond 2^53, shard
// indexes that point outside the model directory and a checkpoint without trainer_state.json.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "src/data/prepare.h"
#include "src/data/text_inputs.h"
#include "src/io/npy.h"
#include "src/ops/ops.h"
#include "src/train/checkpoint.h"
#include "src/train/model_io.h"
#include "src/train/run_config.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;
using test::write_file;

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// `gdn ARGS` with its stdout and stderr in `out`; the exit status (-1: no gdn program).
int run_gdn(const std::string& args, const TempDir& dir, std::string* out) {
  const std::string bin = test::gdn_binary();
  if (bin.empty()) return -1;
  const std::string log = dir.file("gdn.out");
  const int rc = std::system((bin + " " + args + " >" + log + " 2>&1 </dev/null").c_str());
  *out = test::read_file(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -2;
}

// Every numeric flag is checked when the command line is read: exit 1, the flag named, the rule
// and the value given; "1e23" for a whole number and "nan" are refused, not rounded.
TEST(HostileInputs, NumericFlagsAreRangeChecked) {
  if (test::gdn_binary().empty()) GTEST_SKIP() << "no gdn program beside the tests";
  TempDir dir("gdn_hostile_flags");
  const std::string cfg = dir.file("tiny.yaml");
  write_file(cfg, test::model_yaml({32, 2, 2, 16, 256}));
  const struct {
    std::string args, expected;
  } cases[] = {
      {"bench --dims 0", "--dims: must be at least 1, got 0"},
      {"bench --heads 0", "--heads: must be at least 1, got 0"},
      {"bench --batch 0", "--batch: must be at least 1, got 0"},
      {"bench --seq -5", "--seq: must be at least 1, got -5"},
      {"bench --seq 64,nan", "--seq: must be a whole number at least 1, got 'nan'"},
      {"bench --repeats 0", "--repeats: must be from 1 to 1000000, got 0"},
      {"bench --peak-gflops -5", "--peak-gflops: must be above 0, got -5"},
      {"bench --min-sample-ms nan", "--min-sample-ms: must be a finite number, got nan"},
      {"bench --docs 0", "--docs: must be at least 1, got 0"},
      {"profile-memory " + cfg + " --seq 0", "--seq: must be at least 1, got 0"},
      {"profile-memory " + cfg + " --batch 0", "--batch: must be at least 1, got 0"},
      {"profile-memory " + cfg + " --budget ''", "--budget: needs a value, got ''"},
      {"profile-memory " + cfg + " --world-size 0", "--world-size: must be at least 1, got 0"},
      {"generate " + dir.path.string() + " --seed 1e23",
       "--seed: must be a whole number at least 0, got '1e23'"},
      {"generate " + dir.path.string() + " --max-tokens 1e23",
       "--max-tokens: must be a whole number from 1 to 1073741824, got '1e23'"},
      {"generate " + dir.path.string() + " --top-p 0", "--top-p: must be in (0, 1], got 0"},
      {"eval " + dir.path.string() + " --batches -1", "--batches: must be at least 0, got -1"},
      {"run-kernel --in x --out y --scale 0", "--scale: must be nonzero"},
      {"prepare-data --out x --val-fraction 1", "--val-fraction: must be in [0, 1), got 1"},
      {"prepare-data --out x --threads -1", "--threads: must be from 0 to 4096, got -1"},
      {"plot " + dir.path.string() + " --width 0", "--width: must be from 100 to 20000, got 0"},
      {"gradcheck --op all --seed -1", "--seed: must be at least 0, got -1"},
  };
  for (const auto& c : cases) {
    std::string out;
    EXPECT_EQ(run_gdn(c.args, dir, &out), 1) << c.args << "\n" << out;
    EXPECT_TRUE(contains(out, c.expected)) << c.args << ": expected '" << c.expected << "' in\n"
                                           << out;
  }
  // --help is not an error.
  std::string out;
  EXPECT_EQ(run_gdn("bench --help", dir, &out), 0) << out;
}

train::RunConfig parse(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return train::parse_run_config(yaml, "c.yaml", sets);
}

TEST(HostileInputs, ConfigKeysAreRangeChecked) {
  const std::string model = test::model_yaml({32, 2, 2, 16, 256});
  EXPECT_TRUE(contains(error_of([&] { parse(model, {"train.keep_checkpoints=-1"}); }),
                       "train.keep_checkpoints must be >= 0 (0: keep every checkpoint), got -1"));
  EXPECT_TRUE(contains(error_of([&] { parse(model, {"train.eval_batches=-1"}); }),
                       "train.eval_batches must be >= 0"));
  // NaN where an integer goes: named as what was written, from the file and from --set.
  EXPECT_TRUE(contains(error_of([&] { parse("model:\n  num_heads: .nan\n"); }),
                       "c.yaml:2: model.num_heads must be an integer, got '.nan'"));
  EXPECT_TRUE(contains(error_of([&] { parse(model, {"model.num_heads=.nan"}); }),
                       "model.num_heads must be an integer, got '.nan'"));
}

// YAML keeps both copies of a repeated key and the last would win unseen: refused naming both
// lines, at any depth (a model key, the attn entry, one of its keys).
TEST(HostileInputs, DuplicateYamlKeysAreRefused) {
  const std::string twice = "model:\n  hidden_size: 32\n  num_heads: 2\n  hidden_size: 64\n";
  EXPECT_TRUE(contains(error_of([&] { parse(twice); }),
                       "c.yaml:4: key 'hidden_size' is given twice in one mapping (first at "
                       "line 2)"));
  const std::string attn_twice =
      "model:\n  attn:\n    layers: [1]\n    num_heads: 2\n  attn:\n    layers: [0]\n";
  EXPECT_TRUE(contains(error_of([&] { parse(attn_twice); }),
                       "c.yaml:5: key 'attn' is given twice in one mapping (first at line 2)"));
  const std::string in_attn = "model:\n  attn:\n    layers: [1]\n    layers: [0]\n";
  EXPECT_TRUE(contains(error_of([&] { parse(in_attn); }),
                       "c.yaml:4: key 'layers' is given twice in one mapping (first at line 3)"));
  // Top-level sections too; the same key in two mappings is fine.
  EXPECT_TRUE(contains(error_of([&] { parse("train:\n  steps: 1\ntrain:\n  steps: 2\n"); }),
                       "key 'train' is given twice"));
  EXPECT_NO_THROW(parse("model:\n  num_heads: 2\n  attn:\n    layers: [1]\n    num_heads: 2\n"));
}

// An attention head_dim (hidden_size / attn.num_heads) rotary embeddings cannot rotate is
// refused at the key, not inside the layer.
TEST(HostileInputs, AnOddAttentionHeadDimNamesTheKey) {
  const std::string e = error_of(
      [&] { parse("model:\n  hidden_size: 64\n  attn:\n    layers: [1]\n    num_heads: 64\n"); });
  EXPECT_TRUE(contains(e,
                       "c.yaml:5: model.attn.num_heads: head_dim = hidden_size / num_heads = "
                       "64 / 64 = 1 must be even"))
      << e;
}

// Pipes and devices read forever or never end; a dangling link has no text. Each is refused by
// name when given; none is dropped without a word.
TEST(HostileInputs, InputsThatAreNotFilesAreNamed) {
  TempDir dir("gdn_hostile_inputs");
  const std::string fifo = dir.file("pipe"), link = dir.file("dangling");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink(dir.file("nowhere"), link);
  EXPECT_TRUE(contains(error_of([&] { data::expand_inputs({fifo}); }),
                       "input '" + fifo + "' is not a regular file or a directory"));
  EXPECT_TRUE(contains(error_of([&] { data::expand_inputs({"/dev/zero"}); }),
                       "input '/dev/zero' is not a regular file or a directory"));
  EXPECT_TRUE(contains(error_of([&] { data::expand_inputs({link}); }),
                       "input '" + link + "' is a symbolic link to '" + dir.file("nowhere") +
                           "', which does not exist"));
  // Reading a pipe or a directory where a file goes names it.
  EXPECT_TRUE(contains(error_of([&] { io::load_npy(dir.path.string()); }),
                       "cannot read " + dir.path.string() + ": it is a directory, not a file"));
  EXPECT_TRUE(contains(error_of([&] { io::load_npy(fifo); }),
                       "cannot read " + fifo + ": not a regular file"));
}

data::PrepareOptions prepare_options(const TempDir& dir, const std::string& input) {
  data::PrepareOptions o;
  o.inputs = {input};
  o.out_dir = dir.file("out");
  o.progress = false;
  o.threads = 1;
  o.val_fraction = 0;
  return o;
}

// A bad JSON Lines line is quoted as a short excerpt with its offset, whatever its length; under
// gdn train the hint names the config keys, under prepare-data its flags.
TEST(HostileInputs, ABadJsonLinesLineIsCutToAnExcerpt) {
  TempDir dir("gdn_hostile_jsonl");
  const std::string path = dir.file("big.jsonl");
  {
    std::ofstream f(path);
    f << "{\"text\": \"fine\"}\n{\"text\": \"" << std::string(4 << 20, 'x') << "\n";
  }
  data::PrepareOptions o = prepare_options(dir, path);
  const std::string flags = error_of([&] { data::prepare_data(o); });
  EXPECT_LT(flags.size(), 1000u) << flags.substr(0, 2000);
  EXPECT_TRUE(contains(flags, "line 2 (byte offset 17)")) << flags;
  EXPECT_TRUE(contains(flags, "bytes)...")) << flags;
  EXPECT_TRUE(contains(flags, "gdn prepare-data --skip-bad-lines")) << flags;
  o.from_run_config = true;
  const std::string keys = error_of([&] { data::prepare_data(o); });
  EXPECT_TRUE(contains(keys, "data.skip_bad_lines: true")) << keys;
  EXPECT_FALSE(contains(keys, "--skip-bad-lines")) << keys;
  // A missing text field names data.text_field under gdn train.
  write_file(path, "{\"body\": \"no text field\"}\n");
  EXPECT_TRUE(contains(error_of([&] { data::prepare_data(o); }), "data.text_field picks another"));
}

// int64 values beyond 2^53 come back exactly (a double would round 2^63 - 1 to -2^63).
TEST(HostileInputs, Int64NpyValuesAreExact) {
  TempDir dir("gdn_hostile_npy");
  const int64_t big = std::numeric_limits<int64_t>::max(), odd = (int64_t(1) << 62) + 1;
  Tensor t = ops::empty({2}, DType::int64, Device::cpu());
  t.data<int64_t>()[0] = big;
  t.data<int64_t>()[1] = odd;
  io::save_npy(dir.file("cu.npy"), t);
  EXPECT_EQ(io::integer_values(io::load_npy(dir.file("cu.npy"))), (std::vector<int64_t>{big, odd}));
}

// A sharded model's index names files in the model directory only.
TEST(HostileInputs, ShardIndexPathsStayInTheModelDirectory) {
  TempDir dir("gdn_hostile_shards");
  Generator g(1);
  nn::InitContext ctx = test::init_context(g);
  auto model = std::make_unique<nn::CausalLM>(test::model_config({32, 2, 2, 16, 256}), ctx);
  const std::string md = dir.file("model");
  train::save_pretrained(md, *model);
  fs::create_directories(dir.file("other"));
  fs::rename(md + "/model.safetensors", dir.file("other") + "/model.safetensors");
  for (const std::string bad : {"../other/model.safetensors", "/etc/passwd", ".."}) {
    write_file(md + "/model.safetensors.index.json",
               "{\"weight_map\": {\"lm_head.weight\": \"" + bad + "\"}}");
    const std::string e = error_of([&] { train::load_weights(md, *model); });
    EXPECT_TRUE(contains(e, "weight_map['lm_head.weight'] is '" + bad +
                                "': a shard must be a file name in the model directory"))
        << e;
  }
}

// `latest` names a checkpoint directory that lacks trainer_state.json: said so, not "holds no
// checkpoint".
TEST(HostileInputs, ACheckpointWithoutTrainerStateIsNamedIncomplete) {
  TempDir dir("gdn_hostile_checkpoint");
  const std::string run = dir.path.string();
  fs::create_directories(run + "/checkpoints/step-000002");
  write_file(run + "/checkpoints/step-000002/config.json", "{}");
  write_file(run + "/latest", "step-000002\n");
  const std::string e = error_of([&] { train::resolve_checkpoint(run); });
  EXPECT_TRUE(contains(e, run + "/checkpoints/step-000002/trainer_state.json is missing: the "
                                "checkpoint is incomplete"))
      << e;
}

}  // namespace
}  // namespace gdn
