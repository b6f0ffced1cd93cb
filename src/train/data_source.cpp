// Text-shard data source (MQAR lives in src/data/mqar and joins here). A prepared directory is
// opened through data::open_prepared (meta.json checked against the shards and the tokenizer),
// and a run that evaluates refuses a val.bin without one validation window.
#include "src/train/data_source.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "kernels/trace_events.h"
#include "src/data/meta.h"
#include "src/data/mqar.h"
#include "src/data/prepare.h"
#include "src/io/atomic_file.h"
#include "src/ops/ops.h"

namespace gdn::train {

namespace fs = std::filesystem;

std::string data_dir_of(const RunConfig& cfg, const std::string& run_dir) {
  return cfg.data.dir.empty() ? (fs::path(run_dir) / "data").string() : cfg.data.dir;
}

namespace {

class TextData final : public DataSource {
 public:
  TextData(const RunConfig& cfg, const std::string& dir, int rank, int world) : dir_(dir) {
    // meta.json, the shards and the tokenizer, checked against each other.
    data::PreparedData p = data::open_prepared(dir);
    train_ = p.train;
    val_ = p.val;
    tokenizer_ = std::move(p.tokenizer);
    bytes_per_token_ = p.val_bytes_per_token();
    GDN_CHECK(tokenizer_->vocab_size() <= cfg.model.vocab_size, "the data in ", dir, " uses ",
              tokenizer_->vocab_size(), " token ids (its ", tokenizer_->name(),
              " tokenizer) but model.vocab_size is ", cfg.model.vocab_size,
              ": set model.vocab_size to at least ", tokenizer_->vocab_size());
    // Rows no token uses: the embedding is padded up to model.vocab_size (a multiple of 64,
    // say, for faster GEMMs); say so, since a typo looks the same.
    if (tokenizer_->vocab_size() < cfg.model.vocab_size)
      vocab_note_ = str_cat("; model.vocab_size ", cfg.model.vocab_size, " pads the embedding by ",
                            cfg.model.vocab_size - tokenizer_->vocab_size(), " unused rows");
    GDN_CHECK(train_->size() > cfg.data.seq_len + 1, dir, "/train.bin holds ", train_->size(),
              " tokens, fewer than data.seq_len + 1 = ", cfg.data.seq_len + 1);
    // Training evaluates: an empty val.bin would log no validation and a best_val_loss of 0.
    if (cfg.train.eval_every > 0)
      data::require_val_window(
          *val_, cfg.data.seq_len,
          str_cat(cfg.data.dir.empty()
                      ? str_cat(" (delete ", dir, " and the run prepares it again)")
                      : "",
                  "; or set train.eval_every: 0 to train without validation"));
    // Documents need their ends marked: a corpus prepared without an eos trains as stream.
    const bool pack = cfg.data.pack == Pack::documents && p.eos_appended;
    if (cfg.data.pack == Pack::documents && !pack)
      pack_note_ =
          str_cat(" (data.pack: documents needs an end-of-document token, and ", dir, " has none",
                  tokenizer_->name() == "byte" ? ": byte vocab 258 has one" : "", ")");
    data::LoaderOptions lo;
    lo.batch_size = cfg.train.batch_size;
    lo.seq_len = cfg.data.seq_len;
    lo.seed = uint64_t(cfg.train.seed);
    lo.rank = rank;
    lo.world_size = world;
    lo.dtype = DType::int64;
    lo.pack_eos = pack ? int32_t(tokenizer_->eos_id()) : -1;
    loader_ = std::make_unique<data::DataLoader>(train_, lo);
    if (val_->size() >= cfg.data.seq_len + 1)
      eval_ = std::make_unique<data::SequentialLoader>(val_, cfg.train.batch_size, cfg.data.seq_len,
                                                       cfg.train.eval_batches, rank, world,
                                                       DType::int64, lo.pack_eos);
  }
  data::Batch next() override { return loader_->next(); }
  int64_t position() const override { return loader_->state().step; }
  void set_position(int64_t step) override { loader_->set_state({step}); }
  void reset_eval() override {
    if (eval_) eval_->reset();
  }
  bool next_eval(data::Batch& b) override { return eval_ && eval_->next(b); }
  double bytes_per_token() const override { return bytes_per_token_; }
  bool loss_masked() const override { return train_->loss_mask() != nullptr; }
  std::string packing() const override { return loader_->packed() ? "documents" : "stream"; }
  int64_t vocab_size() const override { return tokenizer_->vocab_size(); }
  const data::Tokenizer* tokenizer() const override { return tokenizer_.get(); }
  std::string describe() const override {
    return str_cat(dir_, ": ", tokenizer_->name(), " tokenizer (vocab ", tokenizer_->vocab_size(),
                   vocab_note_, "), ", train_->size(), " train / ", val_->size(), " val tokens; ",
                   packing_summary(),
                   loss_masked() ? "; loss on completions only (prompt/completion pairs)" : "");
  }

 private:
  // "packed: N documents in R rows of T + 1 (F% tokens, the rest padding)" or "stream".
  std::string packing_summary() const {
    const data::PackedRows* p = loader_->packed();
    if (!p) return "stream windows" + pack_note_;
    const double fill = double(p->used_tokens()) / double(p->num_rows() * p->row_tokens);
    return str_cat("packed documents: ", p->num_documents, " in ", p->num_rows(), " rows of ",
                   p->row_tokens, " tokens (", int(fill * 1000) / 10.0,
                   "% text, the rest padding)");
  }

  std::string dir_, pack_note_, vocab_note_;
  std::shared_ptr<const data::Shard> train_, val_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  std::unique_ptr<data::DataLoader> loader_;
  std::unique_ptr<data::SequentialLoader> eval_;
  double bytes_per_token_ = 0;
};

// MQAR: synthetic batches; validation uses a fixed set drawn from another seed.
class MqarData final : public DataSource {
 public:
  MqarData(const RunConfig& cfg, int rank, int world)
      : eval_batches_(std::max<int64_t>(cfg.train.eval_batches, 1)) {
    data::MqarOptions o;
    o.vocab_size = cfg.model.vocab_size;
    o.seq_len = cfg.data.seq_len;
    o.num_pairs = cfg.data.mqar_pairs;
    o.num_queries = cfg.data.mqar_queries;
    o.batch_size = cfg.train.batch_size;
    o.seed = uint64_t(cfg.train.seed);
    data::validate(o);
    loader_ = std::make_unique<data::MqarLoader>(o, rank, world);
    data::MqarOptions v = o;
    v.seed = o.seed + 1000003;  // held out: never seen in training
    eval_options_ = v;
    rank_ = rank;
    world_ = world;
    describe_ = str_cat("MQAR: ", o.num_pairs, " key-value pairs, ", o.num_queries,
                        " queries per sequence of ", o.seq_len, " tokens, vocab ", o.vocab_size);
  }
  data::Batch next() override { return loader_->next(); }
  int64_t position() const override { return loader_->state().step; }
  void set_position(int64_t step) override { loader_->set_state({step}); }
  void reset_eval() override { eval_step_ = 0; }
  bool next_eval(data::Batch& b) override {
    if (eval_step_ >= eval_batches_) return false;
    b = data::mqar_batch(eval_options_, eval_step_++, rank_, world_);
    return true;
  }
  int64_t vocab_size() const override { return eval_options_.vocab_size; }
  bool reports_accuracy() const override { return true; }
  std::string packing() const override { return "synthetic"; }
  std::string describe() const override { return describe_; }

 private:
  std::unique_ptr<data::MqarLoader> loader_;
  data::MqarOptions eval_options_;
  int64_t eval_batches_, eval_step_ = 0;
  int rank_ = 0, world_ = 1;
  std::string describe_;
};

// RUN_DIR/data was prepared from this run's data.inputs and data.tokenizer: a config that now
// names others (a --set on resume) would otherwise train on the old data without a word.
void check_run_data_matches(const RunConfig& cfg, const std::string& dir) {
  const std::string meta_path = (fs::path(dir) / "meta.json").string();
  const nlohmann::json meta =
      nlohmann::json::parse(io::read_regular_file(meta_path), nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return;  // open_prepared names what is wrong with it
  const std::string want_tokenizer = cfg.data.tokenizer;
  const std::vector<std::string> want_inputs =
      cfg.data.inputs.empty() ? std::vector<std::string>{"(default corpus)"} : cfg.data.inputs;
  // A tokenizer file is recorded as the path it was given as.
  auto tokenizer = meta.find("tokenizer_source");
  if (tokenizer == meta.end()) tokenizer = meta.find("tokenizer");
  const auto inputs = meta.find("inputs");
  const std::string hint = str_cat(
      ": the run's data was prepared once, from the config it started with. Keep data.tokenizer ",
      "and data.inputs as they were, or (for a new run: --overwrite, or another train.out_dir) ",
      "delete ", dir, " to prepare it again");
  if (tokenizer != meta.end() && tokenizer->is_string())
    GDN_CHECK(*tokenizer == want_tokenizer, meta_path, " says tokenizer '",
              tokenizer->get<std::string>(), "', the config says data.tokenizer: ", want_tokenizer,
              hint);
  if (inputs != meta.end() && inputs->is_array()) {
    std::vector<std::string> had;
    for (const auto& i : *inputs)
      if (i.is_string()) had.push_back(i.get<std::string>());
    GDN_CHECK(had == want_inputs, meta_path, " was prepared from data.inputs [", join(had, ", "),
              "], the config says [", join(want_inputs, ", "), "]", hint);
  }
}

// Prepares RUN_DIR/data once (rank 0); later runs and resumes reuse it.
void ensure_prepared(const RunConfig& cfg, const std::string& dir, int rank) {
  if (fs::exists(fs::path(dir) / "meta.json")) {
    if (cfg.data.dir.empty()) check_run_data_matches(cfg, dir);
    return;
  }
  GDN_CHECK(cfg.data.dir.empty(), "data.dir ", cfg.data.dir,
            " has no meta.json: prepare it with `gdn prepare-data --out ", cfg.data.dir, "`");
  GDN_CHECK(rank == 0, "data in ", dir, " is not prepared (rank 0 prepares it)");
  data::PrepareOptions po;
  po.inputs = cfg.data.inputs;
  po.tokenizer = cfg.data.tokenizer;
  po.specials = {cfg.data.bos_token, cfg.data.eos_token};
  // Byte: 258 (bos, eos) when asked, or when the model's vocabulary is that size.
  const int64_t dv = cfg.data.vocab_size;
  const int64_t byte_vocab = dv == 256 || dv == 258 ? dv : (cfg.model.vocab_size == 258 ? 258 : 0);
  po.vocab_size = cfg.data.tokenizer == "sentencepiece"
                      ? (cfg.data.vocab_size ? cfg.data.vocab_size : cfg.model.vocab_size)
                  : cfg.data.tokenizer == "byte" ? byte_vocab
                                                 : cfg.data.vocab_size;
  po.out_dir = dir;
  po.val_fraction = cfg.data.val_fraction;
  po.text_field = cfg.data.text_field;
  po.prompt_field = cfg.data.prompt_field;
  po.completion_field = cfg.data.completion_field;
  po.skip_bad_lines = cfg.data.skip_bad_lines;
  po.seed = uint64_t(cfg.train.seed);
  po.from_run_config = true;
  std::fprintf(stderr, "gdn: preparing data into %s (%s)\n", dir.c_str(),
               po.inputs.empty() ? "default corpus" : "data.inputs");
  data::PrepareSummary s = data::prepare_data(po);
  std::fputs(data::format_summary(s).c_str(), stderr);
}

}  // namespace

int64_t scored_targets(const data::Batch& b) {
  const Tensor& t = b.targets;
  const bool host = t.device().is_cpu() && t.is_contiguous();
  auto count = [](const auto* p, int64_t len) {
    int64_t n = 0;
    for (int64_t i = 0; i < len; ++i) n += p[i] != -100;
    return n;
  };
  // The loaders' int32 / int64 host targets are counted in place (every step, every batch).
  if (host && t.dtype() == DType::int32) return count(t.data<int32_t>(), t.numel());
  if (host && t.dtype() == DType::int64) return count(t.data<int64_t>(), t.numel());
  int64_t n = 0;
  for (double v : t.to_vector()) n += v != -100;
  return n;
}

Tensor batch_loss(const nn::CausalLM& model, const data::Batch& b, Device device) {
  Tensor in = ops::to_device(b.inputs, device), tgt = ops::to_device(b.targets, device);
  if (b.cu_seqlens.empty()) return model.loss(in, tgt);
  return model.loss(ops::reshape(in, {1, -1}), ops::reshape(tgt, {1, -1}), b.cu_seqlens);
}

double accumulate_step_gradients(const nn::CausalLM& model, const std::vector<data::Batch>& batches,
                                 const std::vector<int64_t>& scored, Device device,
                                 double scored_total, int world_size, bool stop_at_nonfinite,
                                 const std::function<void()>& before_last_backward) {
  GDN_CHECK(scored.size() == batches.size(), "accumulate_step_gradients: ", scored.size(),
            " scored counts for ", batches.size(), " micro-batches");
  const double all = std::max(scored_total, 1.0);
  double loss_sum = 0;
  for (size_t m = 0; m < batches.size(); ++m) {
    trace::Span forward_span("phase", "forward");
    Tensor loss = batch_loss(model, batches[m], device);
    const double lv = loss.item(), n = double(scored[m]);
    forward_span.end();
    loss_sum += lv * (n / all);
    if (!std::isfinite(lv) && stop_at_nonfinite) break;
    if (m + 1 == batches.size() && before_last_backward) before_last_backward();
    trace::Span backward_span("phase", "backward");
    ops::mul(loss, n * double(world_size) / all).backward();
  }
  return loss_sum;
}

std::unique_ptr<DataSource> make_data_source(const RunConfig& cfg, const std::string& run_dir,
                                             int rank, int world_size) {
  if (cfg.data.task == Task::mqar) return std::make_unique<MqarData>(cfg, rank, world_size);
  const std::string dir = data_dir_of(cfg, run_dir);
  ensure_prepared(cfg, dir, rank);
  return std::make_unique<TextData>(cfg, dir, rank, world_size);
}

}  // namespace gdn::train
