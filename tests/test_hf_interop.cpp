// A checkpoint is a Hugging Face model directory: the tokenizer travels with it (tokenizer.json
// parsed back and checked id for id against the byte tokenizer; optionally through the
// `tokenizers` library when python3 has it), config.json carries the tokenizer's bos/eos, and
// eval, generate and forward open a run, a checkpoint or a plain model directory (fla's
// save_pretrained output included), naming the keys where a YAML and config.json disagree.
// Every field of fla 0.6.0's GatedDeltaNetConfig is computed or refused by name; the sigmoid
// output gate is checked against an independent computation; non-finite weights and a
// non-finite validation loss are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "layers/gated_deltanet.h"
#include "layers/model.h"
#include "src/data/hf_tokenizer.h"
#include "src/io/safetensors.h"
#include "src/ops/ops.h"
#include "src/train/model_dir.h"
#include "src/train/model_io.h"
#include "src/train/sampling.h"
#include "src/train/trainer.h"
#include "tests/fla_config_json.h"
#include "tests/test_helpers.h"
#include "tests/test_util.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

void write_json(const fs::path& p, const json& j) {
  std::ofstream f(p);
  f << j.dump(2) << "\n";
}

// The ids the tokenizer.json gives `text` by its own rules: each UTF-8 byte becomes its
// byte-level symbol (the ByteLevel pre-tokenizer), looked up in the BPE vocab (no merges).
std::vector<int32_t> ids_by_tokenizer_json(const json& tj, const std::string& text) {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(tj["model"]["vocab"][data::byte_level_symbol(c)]);
  return ids;
}

// ---- tokenizer files --------------------------------------------------------------------------

TEST(HfTokenizer, ByteTokenizerJsonMapsTextToByteIds) {
  for (bool specials : {false, true}) {
    test::TempDir dir("gdn_test_hf_tok");
    auto tok = data::make_byte_tokenizer(specials);
    auto written = data::write_hf_tokenizer_files(dir.path.string(), *tok);
    EXPECT_EQ(written.size(), 3u);
    const json tj = read_json(dir.path / "tokenizer.json");
    EXPECT_EQ(tj["model"]["type"], "BPE");
    EXPECT_TRUE(tj["model"]["merges"].empty());
    EXPECT_EQ(tj["pre_tokenizer"]["type"], "ByteLevel");
    EXPECT_EQ(tj["decoder"]["type"], "ByteLevel");
    EXPECT_TRUE(tj["normalizer"].is_null());
    EXPECT_TRUE(tj["post_processor"].is_null());  // encode adds no bos/eos, as gdn's
    // The vocab: 256 distinct symbols, symbol of byte b -> id b.
    ASSERT_EQ(tj["model"]["vocab"].size(), 256u);
    std::set<std::string> symbols;
    for (int b = 0; b < 256; ++b) {
      const std::string s = data::byte_level_symbol(uint8_t(b));
      symbols.insert(s);
      EXPECT_EQ(tj["model"]["vocab"][s], b) << b;
    }
    EXPECT_EQ(symbols.size(), 256u);
    // GPT-2's alphabet: printable bytes are themselves, space is U+0120, NUL U+0100, \n U+010A.
    EXPECT_EQ(data::byte_level_symbol('a'), "a");
    EXPECT_EQ(data::byte_level_symbol(' '), "\xC4\xA0");
    EXPECT_EQ(data::byte_level_symbol(0), "\xC4\x80");
    EXPECT_EQ(data::byte_level_symbol('\n'), "\xC4\x8A");
    EXPECT_EQ(data::byte_level_symbol(0xAD), "\xC5\x83");  // the last of the 68 moved bytes
    for (const std::string& text :
         {std::string("hello world"), std::string("  two  spaces\n\ttab\r\n"),
          std::string("na\xC3\xAFve caf\xC3\xA9 \xE2\x98\x95 \xE6\x97\xA5\xE6\x9C\xAC"),
          std::string("a\0b", 3)})
      EXPECT_EQ(ids_by_tokenizer_json(tj, text), tok->encode(text)) << text;
    // Added tokens, tokenizer_config.json and special_tokens_map.json.
    const json tc = read_json(dir.path / "tokenizer_config.json");
    const json sm = read_json(dir.path / "special_tokens_map.json");
    EXPECT_EQ(tc["tokenizer_class"], "PreTrainedTokenizerFast");
    EXPECT_EQ(tc["add_bos_token"], false);
    EXPECT_EQ(tc["clean_up_tokenization_spaces"], false);
    if (specials) {
      ASSERT_EQ(tj["added_tokens"].size(), 2u);
      EXPECT_EQ(tj["added_tokens"][0]["id"], 256);
      EXPECT_EQ(tj["added_tokens"][0]["content"], "<|bos|>");
      EXPECT_EQ(tj["added_tokens"][1]["id"], 257);
      EXPECT_EQ(tj["added_tokens"][1]["special"], true);
      EXPECT_EQ(tc["bos_token"], "<|bos|>");
      EXPECT_EQ(tc["eos_token"], "<|eos|>");
      EXPECT_EQ(tc["added_tokens_decoder"]["257"]["content"], "<|eos|>");
      EXPECT_EQ(sm["eos_token"], "<|eos|>");
    } else {
      EXPECT_TRUE(tj["added_tokens"].empty());
      EXPECT_TRUE(tc["bos_token"].is_null());
      EXPECT_TRUE(sm.empty());
    }
    // Read back: the same tokenizer.
    auto back = data::load_hf_tokenizer(dir.path.string());
    EXPECT_EQ(back->name(), "byte");
    EXPECT_EQ(back->vocab_size(), tok->vocab_size());
    EXPECT_EQ(back->bos_id(), tok->bos_id());
    EXPECT_EQ(back->eos_id(), tok->eos_id());
  }
}

// The same ids through Hugging Face's own `tokenizers` (and transformers' fast tokenizer) when
// python3 has them; skipped otherwise.
TEST(HfTokenizer, TokenizersLibraryGivesTheSameIds) {
  if (std::system("python3 -c 'import tokenizers' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 cannot import tokenizers";
  test::TempDir dir("gdn_test_hf_py");
  auto tok = data::make_byte_tokenizer(true);
  data::write_hf_tokenizer_files(dir.path.string(), *tok);
  const std::vector<std::string> texts = {
      "hello world", "  two  spaces\n\ttab\r\n", "def f(x):\n    return x ** 2  # \xE2\x9C\x93\n",
      "na\xC3\xAFve caf\xC3\xA9 \xE2\x98\x95 \xE6\x97\xA5\xE6\x9C\xAC", std::string("a\0b\x7f", 4)};
  json in = json::array();
  for (const auto& t : texts) in.push_back(t);
  write_json(dir.path / "texts.json", in);
  const std::string script = R"(
import json, sys
from tokenizers import Tokenizer
d = sys.argv[1]
t = Tokenizer.from_file(d + '/tokenizer.json')
texts = json.load(open(d + '/texts.json'))
out = {'ids': [t.encode(s).ids for s in texts],
       'decoded': [t.decode(t.encode(s).ids) for s in texts],
       'specials': [t.token_to_id('<|bos|>'), t.token_to_id('<|eos|>')]}
try:
    from transformers import PreTrainedTokenizerFast
    f = PreTrainedTokenizerFast.from_pretrained(d)
    out['fast'] = [f(s)['input_ids'] for s in texts]
except ImportError:
    pass
json.dump(out, open(d + '/out.json', 'w'))
)";
  test::write_file(dir.file("check.py"), script);
  ASSERT_EQ(std::system(("python3 " + dir.file("check.py") + " " + dir.path.string()).c_str()), 0);
  const json out = read_json(dir.path / "out.json");
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(out["ids"][i].get<std::vector<int32_t>>(), tok->encode(texts[i])) << texts[i];
    EXPECT_EQ(out["decoded"][i].get<std::string>(), texts[i]);
    if (out.contains("fast")) {
      EXPECT_EQ(out["fast"][i].get<std::vector<int32_t>>(), tok->encode(texts[i])) << texts[i];
    }
  }
  EXPECT_EQ(out["specials"], json({256, 257}));
}

TEST(HfTokenizer, SentencePieceTravelsAsTokenizerModel) {
  std::vector<std::string> docs;
  for (int i = 0; i < 200; ++i)
    docs.push_back("the quick brown fox " + std::to_string(i % 17) + " jumps over the lazy dog\n");
  data::SentencePieceOptions o;
  o.vocab_size = 300;
  o.num_threads = 1;
  auto sp = data::train_sentencepiece(docs, o);
  test::TempDir dir("gdn_test_hf_sp");
  write_json(dir.path / "config.json", {{"model_type", "gated_deltanet"}, {"bos_token_id", 7}});
  data::write_hf_tokenizer_files(dir.path.string(), *sp);
  EXPECT_TRUE(fs::exists(dir.path / "tokenizer.model"));
  EXPECT_FALSE(fs::exists(dir.path / "tokenizer.json"));
  const json tc = read_json(dir.path / "tokenizer_config.json");
  EXPECT_EQ(tc["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(tc["bos_token"], "<s>");
  EXPECT_EQ(tc["eos_token"], "</s>");
  EXPECT_EQ(tc["unk_token"], "<unk>");
  EXPECT_EQ(tc["add_bos_token"], false);
  EXPECT_EQ(read_json(dir.path / "special_tokens_map.json")["eos_token"], "</s>");
  const json cfg = read_json(dir.path / "config.json");
  EXPECT_EQ(cfg["bos_token_id"], 1);
  EXPECT_EQ(cfg["eos_token_id"], 2);
  auto back = data::load_hf_tokenizer(dir.path.string());
  EXPECT_EQ(back->name(), "sentencepiece");
  const std::string text = "the lazy fox 12 jumps\n";
  EXPECT_EQ(back->encode(text), sp->encode(text));
}

// A tokenizer.json that is not gdn's byte tokenizer loads through the tokenizer.json reader
// (src/data/tokenizer_json.h), or is refused naming what it does not support.
TEST(HfTokenizer, ForeignTokenizerJsonLoadsThroughTheReaderOrIsRefusedByName) {
  test::TempDir dir("gdn_test_hf_foreign");
  json tj = data::byte_tokenizer_hf_json(false);
  tj["model"]["merges"] = json::array({"a b"});
  tj["model"]["vocab"]["ab"] = 256;
  write_json(dir.path / "tokenizer.json", tj);
  const auto merged = data::load_hf_tokenizer(dir.path.string());
  EXPECT_EQ(merged->name(), "huggingface");
  EXPECT_EQ(merged->encode("cab"), (std::vector<int32_t>{'c', 256}));
  tj = data::byte_tokenizer_hf_json(false);
  tj["model"]["type"] = "WordPiece";
  write_json(dir.path / "tokenizer.json", tj);
  const std::string e = test::error_of([&] { data::load_hf_tokenizer(dir.path.string()); });
  EXPECT_NE(e.find("unsupported model type \"WordPiece\""), std::string::npos) << e;
}

TEST(HfTokenizer, ConfigJsonCarriesTheTokenizersIds) {
  Generator g(1);
  nn::CausalLM m(test::model_config({16, 1, 2, 8, 258}), test::init_context(g));
  test::TempDir dir("gdn_test_hf_ids");
  const std::string d = (dir.path / "m").string();
  train::save_pretrained(d, m);
  EXPECT_EQ(read_json(fs::path(d) / "config.json")["bos_token_id"], 1);  // fla's default
  data::write_hf_tokenizer_files(d, *data::make_byte_tokenizer(false));
  json cfg = read_json(fs::path(d) / "config.json");
  EXPECT_TRUE(cfg["bos_token_id"].is_null());
  EXPECT_TRUE(cfg["eos_token_id"].is_null());
  EXPECT_EQ(train::load_config_json(d).bos_token_id, -1);
  data::write_hf_tokenizer_files(d, *data::make_byte_tokenizer(true));
  cfg = read_json(fs::path(d) / "config.json");
  EXPECT_EQ(cfg["bos_token_id"], 256);
  EXPECT_EQ(cfg["eos_token_id"], 257);
  EXPECT_EQ(train::load_config_json(d).eos_token_id, 257);
  // A list of eos ids (Hugging Face allows it) keeps the first.
  cfg["eos_token_id"] = json::array({257, 3});
  write_json(fs::path(d) / "config.json", cfg);
  EXPECT_EQ(train::load_config_json(d).eos_token_id, 257);
}

// ---- a tiny trained run: run dir, checkpoint dir, plain model dir ------------------------------

struct TinyRun {
  std::string root, run_dir, checkpoint, data_dir;
  double trainer_val_loss = 0;  // the trainer's own evaluation of the final weights
};

const TinyRun& tiny_run() {
  static const TinyRun r = [] {
    TinyRun t;
    t.root = test::fresh_dir("gdn_test_hf_interop_run");
    test::write_tiny_corpus(fs::path(t.root) / "corpus");
    train::RunConfig c = test::tiny_text_run(t.root, "run", {"train.steps=2"});
    train::TrainerOptions o;
    o.quiet = true;
    train::Trainer(c, o).run();
    t.run_dir = (fs::path(t.root) / "run").string();
    t.checkpoint = train::checkpoint_path(t.run_dir, 2);
    t.data_dir = (fs::path(t.run_dir) / "data").string();
    train::TrainerOptions ro = o;
    ro.read_only = true;
    ro.resume = t.run_dir;
    t.trainer_val_loss = train::Trainer(c, ro).evaluate().loss;
    return t;
  }();
  return r;
}

// A copy of the checkpoint's model files (no trainer state, no run around it).
std::string plain_copy(const std::string& name, bool with_tokenizer = true) {
  const fs::path dst = fs::path(test::fresh_dir("gdn_test_hf_plain_" + name));
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json", "special_tokens_map.json"}) {
    if (!with_tokenizer && std::string(f).rfind("tokenizer", 0) == 0) continue;
    if (!with_tokenizer && std::string(f) == "special_tokens_map.json") continue;
    fs::copy_file(fs::path(tiny_run().checkpoint) / f, dst / f);
  }
  return dst.string();
}

TEST(ModelDir, CheckpointHoldsTheTokenizer) {
  const fs::path ck = tiny_run().checkpoint;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json", "special_tokens_map.json", "trainer_state.json"})
    EXPECT_TRUE(fs::exists(ck / f)) << f;
  // The run's byte tokenizer has no bos or eos: config.json says so.
  const json cfg = read_json(ck / "config.json");
  EXPECT_TRUE(cfg["bos_token_id"].is_null());
  EXPECT_TRUE(cfg["eos_token_id"].is_null());
  EXPECT_EQ(read_json(ck / "tokenizer.json")["model"]["type"], "BPE");
  // The checkpoint alone gives the tokenizer: no run, no data directory.
  const std::string plain = plain_copy("tok");
  const train::ModelDir md = train::resolve_model_dir(plain);
  EXPECT_TRUE(md.run_dir.empty());
  auto tok = train::model_tokenizer(md, nullptr);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_EQ(tok->vocab_size(), 256);
}

TEST(ModelDir, ResolvesRunCheckpointAndPlainDirectories) {
  const TinyRun& r = tiny_run();
  train::ModelDir a = train::resolve_model_dir(r.run_dir);
  EXPECT_EQ(fs::path(a.dir), fs::path(r.checkpoint));
  EXPECT_EQ(a.run_dir, r.run_dir);
  EXPECT_EQ(fs::path(a.run_config), fs::path(r.run_dir) / "config.yaml");
  train::ModelDir b = train::resolve_model_dir(r.checkpoint);
  EXPECT_EQ(fs::path(b.dir), fs::path(r.checkpoint));
  EXPECT_EQ(fs::path(b.run_dir), fs::path(r.run_dir));
  train::ModelDir c = train::resolve_model_dir(plain_copy("resolve"));
  EXPECT_TRUE(c.run_dir.empty() && c.run_config.empty());
  // What is missing is named.
  test::TempDir empty("gdn_test_hf_empty");
  std::string e = test::error_of([&] { train::resolve_model_dir(empty.path.string()); });
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("latest"), std::string::npos) << e;
  write_json(empty.path / "config.json", json::object());
  e = test::error_of([&] { train::resolve_model_dir(empty.path.string()); });
  EXPECT_NE(e.find("no model.safetensors"), std::string::npos) << e;
}

TEST(ModelDir, EvalOpensRunCheckpointAndPlainDirectories) {
  const TinyRun& r = tiny_run();
  train::EvalRequest req;
  req.path = r.run_dir;
  const json a = train::evaluate_model_dir(req);
  EXPECT_EQ(a["step"], 2);
  EXPECT_EQ(a["val_loss"].get<double>(), r.trainer_val_loss);  // as the trainer scores it
  EXPECT_GT(a["val_bpb"].get<double>(), 0);
  req.path = r.checkpoint;
  EXPECT_EQ(train::evaluate_model_dir(req)["val_loss"], a["val_loss"]);
  // A model directory on its own needs the data, and says so.
  req.path = plain_copy("eval");
  const std::string e = test::error_of([&] { train::evaluate_model_dir(req); });
  EXPECT_NE(e.find("--data"), std::string::npos) << e;
  req.data_dir = r.data_dir;
  req.sets = {"data.seq_len=24", "train.batch_size=2", "train.eval_batches=2"};  // the run's
  const json c = train::evaluate_model_dir(req);
  EXPECT_TRUE(c["step"].is_null());
  EXPECT_EQ(c["val_loss"], a["val_loss"]);
  // Without its tokenizer files too (the data's tokenizer is then the only one).
  req.path = plain_copy("eval_notok", false);
  EXPECT_EQ(train::evaluate_model_dir(req)["val_loss"], a["val_loss"]);
  // Data made with another tokenizer is refused.
  req.path = plain_copy("eval_othertok");
  data::write_hf_tokenizer_files(req.path, *data::make_byte_tokenizer(true));
  const std::string e2 = test::error_of([&] { train::evaluate_model_dir(req); });
  EXPECT_NE(e2.find("the model's tokenizer is byte (vocab 258"), std::string::npos) << e2;
}

TEST(ModelDir, ForwardModelComesFromConfigJson) {
  const TinyRun& r = tiny_run();
  const nn::ModelConfig json_cfg = train::load_config_json(r.checkpoint);
  // No YAML: config.json's model, from a run, a checkpoint or a plain directory.
  for (const std::string& dir : {r.run_dir, r.checkpoint, plain_copy("fwd")}) {
    train::ForwardModel f = train::resolve_forward_model("", {}, dir);
    EXPECT_TRUE(nn::model_differences(f.cfg.model, json_cfg).empty()) << dir;
    EXPECT_TRUE(fs::exists(fs::path(f.weights_dir) / "model.safetensors")) << dir;
  }
  // The kernel choice may be set; the model may not.
  train::ForwardModel k = train::resolve_forward_model(
      "", {"model.kernel=recurrent", "model.chunk_size=32"}, r.run_dir);
  EXPECT_EQ(k.cfg.model.kernel, gdr::Impl::recurrent);
  EXPECT_EQ(k.cfg.model.chunk_size, 32);
  std::string e =
      test::error_of([&] { train::resolve_forward_model("", {"model.norm_eps=1e-5"}, r.run_dir); });
  EXPECT_NE(e.find("--set model.norm_eps=1e-5"), std::string::npos) << e;
  // A YAML that agrees: its kernel choice, config.json's model.
  test::TempDir dir("gdn_test_hf_yaml");
  const std::string same = dir.file("same.yaml"), other = dir.file("other.yaml");
  test::write_file(same, test::model_yaml({32, 2, 2, 16, 256, 16}));
  train::ForwardModel f = train::resolve_forward_model(same, {"model.kernel=fused"}, r.checkpoint);
  EXPECT_EQ(f.cfg.model.kernel, gdr::Impl::fused);
  // One that does not: every differing key named, with both files.
  test::write_file(other, test::model_yaml({32, 2, 2, 16, 256, 16}) +
                              "  norm_eps: 1.0e-5\n  allow_neg_eigval: true\n");
  e = test::error_of([&] { train::resolve_forward_model(other, {}, r.checkpoint); });
  EXPECT_NE(e.find("norm_eps (1e-05 vs 1e-06)"), std::string::npos) << e;
  EXPECT_NE(e.find("allow_neg_eigval (true vs false)"), std::string::npos) << e;
  EXPECT_NE(e.find("other.yaml"), std::string::npos) << e;
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_EQ(e.find("hidden_size"), std::string::npos) << e;  // only what differs
  // The same check when the run's own config.yaml and the checkpoint disagree.
  e = test::error_of([&] { train::resolve_forward_model(other, {}, r.run_dir); });
  EXPECT_NE(e.find("norm_eps"), std::string::npos) << e;
  EXPECT_NE(test::error_of([] { train::resolve_forward_model("", {}, ""); }).find("CONFIG.yaml"),
            std::string::npos);
}

// ---- fla's save_pretrained output
// ----------------------------------------------------------------

TEST(ModelDir, LoadsFlaSavePretrainedOutput) {
  for (bool head_named : {false, true}) {
    Generator g(4);
    nn::ModelConfig c = test::model_config({16, 2, 2, 8, 40});
    c.tie_word_embeddings = true;
    nn::CausalLM m(c, test::init_context(g));
    test::TempDir dir("gdn_test_hf_fla");
    write_json(dir.path / "config.json", test::fla_config_json(c));
    // bf16 weights; a tied matrix stored once, under the embedding's or the head's name.
    io::NamedTensors t;
    for (auto& [name, p] : m.named_parameters())
      t.emplace_back(head_named && name == "model.embeddings.weight" ? "lm_head.weight" : name, p);
    io::save_safetensors(dir.file("model.safetensors"), t, {{"format", "pt"}}, DType::bfloat16);
    train::ForwardModel f = train::resolve_forward_model("", {}, dir.path.string());
    EXPECT_TRUE(nn::model_differences(f.cfg.model, c).empty());
    Generator g2(9);
    nn::CausalLM loaded(f.cfg.model, test::init_context(g2));
    train::load_weights(f.weights_dir, loaded);
    // The bf16 rounding of m's weights, and nothing else.
    for (auto& [name, p] : m.named_parameters()) {
      autograd::NoGradGuard ng;
      ops::copy_(p, ops::cast(p, DType::bfloat16));
    }
    Tensor ids = ops::randint({1, 7}, 0, c.vocab_size, DType::int64, Device::cpu(), &g);
    autograd::NoGradGuard ng;
    EXPECT_EQ(loaded.logits(ids).to_vector(), m.logits(ids).to_vector()) << head_named;
  }
}

TEST(ModelDir, ShardedWeightsLoad) {
  Generator g(8);
  nn::CausalLM m(test::model_config({16, 1, 2, 8, 40}), test::init_context(g));
  test::TempDir dir("gdn_test_hf_shards");
  const std::string d = (dir.path / "m").string();
  train::save_pretrained(d, m);
  auto all = io::load_safetensors((fs::path(d) / "model.safetensors").string());
  fs::remove(fs::path(d) / "model.safetensors");
  const size_t half = all.size() / 2;
  io::NamedTensors a(all.begin(), all.begin() + long(half)), b(all.begin() + long(half), all.end());
  io::save_safetensors((fs::path(d) / "model-00001-of-00002.safetensors").string(), a);
  io::save_safetensors((fs::path(d) / "model-00002-of-00002.safetensors").string(), b);
  json map = json::object();
  for (const auto& [n, t] : a) map[n] = "model-00001-of-00002.safetensors";
  for (const auto& [n, t] : b) map[n] = "model-00002-of-00002.safetensors";
  write_json(fs::path(d) / "model.safetensors.index.json", {{"weight_map", map}});
  const train::ModelDir md = train::resolve_model_dir(d);
  auto loaded = train::load_model(md, train::load_config_json(d), nn::InitContext{});
  auto pa = m.named_parameters(), pb = loaded->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector()) << pa[i].first;
}

// ---- every field of fla's GatedDeltaNetConfig
// ------------------------------------------------------

TEST(FlaConfig, FieldsWithMathEffectAreRefusedByName) {
  const json base = test::fla_config_json(test::model_config({16, 1, 2, 8, 40}));
  EXPECT_NO_THROW(nn::ModelConfig::from_hf_json(base));
  auto refused = [&](const char* key, const json& value, const std::string& needle) {
    json j = base;
    j[key] = value;
    const std::string e = test::error_of([&] { nn::ModelConfig::from_hf_json(j); });
    EXPECT_NE(e.find(std::string("'") + key + "'"), std::string::npos) << key << ": " << e;
    EXPECT_NE(e.find(needle), std::string::npos) << key << ": " << e;
  };
  // attn is read as fla reads it (tests/test_attn_config.cpp); what fla refuses, gdn refuses.
  refused("attn", "yes", "must be null, a mapping or a list of mappings");
  refused("attnres_block_size", 2, "not supported");
  refused("use_l2warp", true, "must be false");
  refused("pad_token_id", 0, "no gradient");
  refused("output_gate_activation", "gelu", "swish, silu or sigmoid");
  refused("quantization_config", {{"quant_method", "bitsandbytes"}}, "quantized");
  for (const auto& [key, value] :
       {std::pair<const char*, const char*>{"hidden_act", "gelu"}, {"attn_mode", "parallel"}}) {
    json j = base;
    j[key] = value;
    const std::string e = test::error_of([&] { nn::ModelConfig::from_hf_json(j); });
    EXPECT_NE(e.find(std::string(key) + ": "), std::string::npos) << e;
    EXPECT_NE(e.find(value), std::string::npos) << e;
  }
  json both = base;
  both["fuse_linear_cross_entropy"] = true;
  EXPECT_NE(test::error_of([&] { nn::ModelConfig::from_hf_json(both); }).find("fla refuses"),
            std::string::npos);
  // Fields without effect on the math are accepted at any value, and unknown keys ignored.
  json free = base;
  free["fuse_norm"] = false;
  free["fuse_swiglu"] = false;
  free["fuse_cross_entropy"] = false;
  free["fuse_linear_cross_entropy"] = true;
  free["use_cache"] = false;
  free["attn_mode"] = "fused_recurrent";
  free["max_position_embeddings"] = 8192;
  free["initializer_range"] = 0.006;
  free["hidden_ratio"] = nullptr;
  free["torch_dtype"] = "float16";
  free["some_future_field"] = 3;
  const nn::ModelConfig c = nn::ModelConfig::from_hf_json(free);
  EXPECT_TRUE(nn::model_differences(c, nn::ModelConfig::from_hf_json(base)).empty());
  EXPECT_EQ(c.hidden_ratio, 4);  // null: fla's GatedMLP takes 4
}

TEST(FlaConfig, OutputGateActivationRoundTripsAndIsCompared) {
  nn::ModelConfig c = test::model_config({16, 1, 2, 8, 40});
  EXPECT_EQ(c.to_hf_json()["output_gate_activation"], "swish");
  c.output_gate_activation = nn::GateActivation::sigmoid;
  const json j = c.to_hf_json();
  EXPECT_EQ(j["output_gate_activation"], "sigmoid");
  // gdn's config.json states fla's defaults of the fields it refuses otherwise.
  EXPECT_TRUE(j["attn"].is_null());
  EXPECT_TRUE(j["attnres_block_size"].is_null());
  EXPECT_EQ(j["use_l2warp"], false);
  const nn::ModelConfig back = nn::ModelConfig::from_hf_json(j);
  EXPECT_EQ(back.output_gate_activation, nn::GateActivation::sigmoid);
  nn::ModelConfig swish = c, silu = c;
  swish.output_gate_activation = nn::GateActivation::swish;
  silu.output_gate_activation = nn::GateActivation::silu;
  EXPECT_EQ(nn::model_differences(swish, silu), std::vector<std::string>{});
  EXPECT_EQ(nn::model_differences(c, swish),
            std::vector<std::string>{"output_gate_activation (sigmoid vs swish)"});
  // Without the gate the activation is irrelevant.
  c.use_gate = swish.use_gate = false;
  EXPECT_TRUE(nn::model_differences(c, swish).empty());
}

// Every parameter of `from` copied into the same-named parameter of `to`, where it has one.
void copy_shared_parameters(const nn::Module& from, nn::Module& to) {
  autograd::NoGradGuard ng;
  for (auto& [name, p] : to.named_parameters())
    for (const auto& [n2, q] : from.named_parameters())
      if (n2 == name && q.shape() == p.shape()) ops::copy_(p, q);
}

TEST(FlaConfig, SigmoidOutputGateMatchesAnIndependentComputation) {
  // d = HV V = 8, so a gate-less twin with o_proj = I yields rmsnorm(o) * w before the gate.
  nn::ModelConfig c = test::model_config({8, 1, 2, 4, 11});
  c.output_gate_activation = nn::GateActivation::sigmoid;
  Generator g(21);
  nn::InitContext ctx = test::init_context(g, DType::float64);
  ctx.std = 0.4;
  nn::GatedDeltaNet sig(c, ctx);
  ops::normal_(sig.o_norm_gated->weight, 1.0, 0.3, &g);
  nn::ModelConfig plain_cfg = c;
  plain_cfg.use_gate = false;
  nn::GatedDeltaNet plain(plain_cfg, ctx);
  copy_shared_parameters(sig, plain);
  {
    autograd::NoGradGuard ng;
    std::vector<double> eye(64, 0.0);
    for (int i = 0; i < 8; ++i) eye[size_t(i * 9)] = 1.0;
    ops::copy_(plain.o_proj->weight, ops::from_vector(eye, {8, 8}, DType::float64));
  }
  const int64_t T = 5;
  Tensor x = ops::randn({1, T, 8}, DType::float64, Device::cpu(), &g);
  autograd::NoGradGuard ng;
  const std::vector<double> n = plain.forward(x).to_vector();  // rmsnorm(o) * w, [T, 8]
  const std::vector<double> xv = x.to_vector(), wg = sig.g_proj->weight.to_vector(),
                            wo = sig.o_proj->weight.to_vector();
  std::vector<double> want(size_t(T * 8), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> y(8);
    for (int j = 0; j < 8; ++j) {
      double gate = 0;
      for (int i = 0; i < 8; ++i) gate += xv[size_t(t * 8 + i)] * wg[size_t(j * 8 + i)];
      y[size_t(j)] = n[size_t(t * 8 + j)] / (1.0 + std::exp(-gate));
    }
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 8; ++j) want[size_t(t * 8 + k)] += y[size_t(j)] * wo[size_t(k * 8 + j)];
  }
  const std::vector<double> got = sig.forward(x).to_vector();
  ASSERT_EQ(got.size(), want.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  EXPECT_LT(err, 1e-12 * scale) << err << " of " << scale;
  // The swish gate on the same weights computes something else.
  nn::ModelConfig swish_cfg = c;
  swish_cfg.output_gate_activation = nn::GateActivation::swish;
  nn::GatedDeltaNet swish(swish_cfg, ctx);
  copy_shared_parameters(sig, swish);
  EXPECT_GT(test::rel_err(swish.forward(x).to_vector(), got), 1e-2);
}

TEST(FlaConfig, SigmoidGateChangesTheModelsLogitsAndSurvivesAModelDirectory) {
  nn::ModelConfig c = test::model_config({16, 2, 2, 8, 40});
  Generator g1(3), g2(3);
  nn::CausalLM swish(c, test::init_context(g1));
  c.output_gate_activation = nn::GateActivation::sigmoid;
  nn::CausalLM sig(c, test::init_context(g2));  // same seed: the same weights
  Tensor ids = ops::from_vector({1, 5, 7, 2, 9, 3}, {1, 6}, DType::int64);
  autograd::NoGradGuard ng;
  const std::vector<double> ls = swish.logits(ids).to_vector(), lg = sig.logits(ids).to_vector();
  double diff = 0;
  for (size_t i = 0; i < ls.size(); ++i) diff = std::max(diff, std::abs(ls[i] - lg[i]));
  EXPECT_GT(diff, 1e-4);
  // Through config.json and back: the sigmoid model again.
  test::TempDir dir("gdn_test_hf_sig");
  const std::string d = (dir.path / "m").string();
  train::save_pretrained(d, sig);
  const train::ModelDir md = train::resolve_model_dir(d);
  auto back = train::load_model(md, train::load_config_json(d), nn::InitContext{});
  EXPECT_EQ(back->cfg.output_gate_activation, nn::GateActivation::sigmoid);
  EXPECT_EQ(back->logits(ids).to_vector(), lg);
}

// ---- non-finite weights and losses
// ---------------------------------------------------------------

TEST(NonFinite, WeightsAreRefusedNamingFileAndTensor) {
  Generator g(2);
  nn::CausalLM m(test::model_config({16, 1, 2, 8, 40}), test::init_context(g));
  test::TempDir dir("gdn_test_hf_nan");
  const std::string d = (dir.path / "m").string();
  const std::string st = (fs::path(d) / "model.safetensors").string();
  const std::string victim = "model.layers.0.attn.q_proj.weight";
  for (DType dt : {DType::float32, DType::bfloat16}) {
    for (double bad : {std::nan(""), double(INFINITY)}) {
      train::save_pretrained(d, m, dt);
      auto t = io::load_safetensors(st);
      for (auto& [name, x] : t) {
        if (name != victim) continue;
        std::vector<double> v = x.to_vector();
        v[5] = bad;
        x = ops::from_vector(v, x.shape(), x.dtype());
      }
      io::save_safetensors(st, t);
      const std::string e = test::error_of([&] { train::load_weights(d, m); });
      EXPECT_NE(e.find(st), std::string::npos) << e;
      EXPECT_NE(e.find("'" + victim + "'"), std::string::npos) << e;
      EXPECT_NE(e.find("non-finite"), std::string::npos) << e;
      EXPECT_NE(e.find("flat index 5"), std::string::npos) << e;
    }
  }
}

TEST(NonFinite, EvalOfAModelWithNonFiniteLossFails) {
  const std::string plain = plain_copy("inf");
  const std::string st = (fs::path(plain) / "model.safetensors").string();
  auto t = io::load_safetensors(st);
  for (auto& [name, x] : t)  // finite weights whose products overflow fp32
    if (name == "model.norm.weight" || name == "lm_head.weight") x = ops::full(x.shape(), 1e30);
  io::save_safetensors(st, t);
  train::EvalRequest req;
  req.path = plain;
  req.data_dir = tiny_run().data_dir;
  const std::string e = test::error_of([&] { train::evaluate_model_dir(req); });
  EXPECT_NE(e.find("not finite"), std::string::npos) << e;
}

// ---- generation --------------------------------------------------------------------------------

TEST(Generate, NulBytesAreWrittenAndTheSampleEndsWithANewline) {
  // All weights zero: every logit is 0, so greedy sampling takes id 0, the NUL byte.
  Generator g(1);
  nn::CausalLM m(test::model_config({16, 1, 2, 8, 256}), test::init_context(g));
  for (auto& [name, p] : m.named_parameters()) ops::fill_(p, 0.0);
  auto tok = data::make_byte_tokenizer(false);
  train::GenerateOptions o;
  o.max_tokens = 3;
  o.sampling.temperature = 0;
  std::string out;
  auto sink = [&](std::string_view s) { out.append(s.data(), s.size()); };
  const train::GenerateStats s = train::generate_text(m, *tok, "hi", o, sink);
  EXPECT_EQ(s.generated, 3);
  EXPECT_EQ(s.prompt_tokens, 2);
  EXPECT_EQ(out, std::string("hi\0\0\0\n", 6));
  // A sample that already ends with a newline gets no second one.
  out.clear();
  o.max_tokens = 0;
  train::generate_text(m, *tok, "line\n", o, sink);
  EXPECT_EQ(out, "line\n");
}

TEST(Generate, NeverSamplesTheRowsThatPadTheEmbedding) {
  // The padding rows (ids 256..319, past the byte tokenizer) get the largest logits: the lm head's
  // rows there are large and the rest zero. Sampling still draws only ids the tokenizer has.
  Generator g(1);
  nn::CausalLM m(test::model_config({16, 1, 2, 8, 320}), test::init_context(g));
  // Every hidden state is the embedding (all ones: the blocks add zero), the final norm keeps it.
  for (auto& [name, p] : m.named_parameters()) {
    const bool ones = name == "model.norm.weight" || name.find("embeddings") != std::string::npos;
    ops::fill_(p, ones ? 1.0 : 0.0);
  }
  Tensor head = m.lm_head_weight();
  std::vector<double> w(size_t(head.numel()), 0.0);
  for (size_t i = 256 * 16; i < w.size(); ++i) w[i] = 50.0;
  ops::copy_(head, ops::from_vector(w, head.shape(), head.dtype(), head.device()));
  auto tok = data::make_byte_tokenizer(false);
  train::GenerateOptions o;
  o.max_tokens = 8;
  const train::GenerateStats s = train::generate_text(m, *tok, "hi", o, [](std::string_view) {});
  ASSERT_EQ(s.ids.size(), 8u);
  for (int32_t id : s.ids) EXPECT_LT(id, 256);
}

}  // namespace
}  // namespace gdn
