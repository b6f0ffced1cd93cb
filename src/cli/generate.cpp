// `gdn generate RUN_DIR --prompt TEXT --max-tokens N [--temperature T --top-k K --top-p P
// --seed S]`: samples from a trained model through the recurrent state, so each new token
// costs the same time and memory however long the text gets (the point of linear attention).
// The text goes to stdout as it is made; tokens/s goes to stderr.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "src/cli/commands.h"
#include "src/data/tokenizer.h"
#include "src/ops/ops.h"
#include "src/train/checkpoint.h"
#include "src/train/data_source.h"
#include "src/train/model_io.h"
#include "src/train/run_config.h"
#include "src/train/sampling.h"

namespace gdn::cli {

namespace {

struct GenerateArgs {
  std::string run_dir, prompt, device = "auto";
  int64_t max_tokens = 200;
  uint64_t seed = 0;
  train::SamplingOptions sampling;
};

void run(const GenerateArgs& a) {
  namespace fs = std::filesystem;
  train::validate(a.sampling);
  const std::string ckpt = train::resolve_checkpoint(a.run_dir);
  const std::string run_dir = train::run_dir_of(a.run_dir);
  train::RunConfig cfg = train::load_run_config((fs::path(run_dir) / "config.yaml").string(), {});
  auto tok = data::load_tokenizer(train::data_dir_of(cfg, run_dir));
  const Device dev = parse_device(a.device);
  nn::InitContext ctx;
  ctx.device = dev;
  nn::CausalLM model(train::load_config_json(ckpt), ctx);
  train::load_weights(ckpt, model);
  model.compute_dtype = cfg.train.dtype;
  model.eval();

  std::vector<int32_t> ids = tok->encode(a.prompt);
  if (ids.empty()) ids.push_back(int32_t(tok->bos_id() >= 0 ? tok->bos_id() : 0));
  std::fputs(a.prompt.c_str(), stdout);
  std::fflush(stdout);
  std::vector<nn::LayerState> states(model.model->layers.size());
  auto to_tensor = [&](const std::vector<int32_t>& v) {
    std::vector<double> d(v.begin(), v.end());
    return ops::from_vector(d, {1, int64_t(v.size())}, DType::int64, dev);
  };
  const auto t0 = std::chrono::steady_clock::now();
  Tensor logits = model.step(to_tensor(ids), states);  // the prompt at once
  const auto t1 = std::chrono::steady_clock::now();
  int64_t made = 0;
  std::vector<int32_t> pending;  // tokens not yet printed (a UTF-8 character may span several)
  for (; made < a.max_tokens; ++made) {
    const int64_t next = train::sample_token(logits, a.sampling, a.seed, uint64_t(made));
    if (next == tok->eos_id()) break;
    pending.push_back(int32_t(next));
    const std::string text = tok->decode(pending);
    if (data::is_valid_utf8(text, nullptr)) {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
      pending.clear();
    }
    logits = model.step(to_tensor({int32_t(next)}), states);
  }
  if (!pending.empty()) std::fputs(tok->decode(pending).c_str(), stdout);
  std::fputs("\n", stdout);
  const auto t2 = std::chrono::steady_clock::now();
  const double prompt_s = std::chrono::duration<double>(t1 - t0).count();
  const double gen_s = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "gdn: prompt %zu tokens in %.2fs; generated %lld tokens at %.1f tokens/s\n",
               ids.size(), prompt_s, (long long)made, gen_s > 0 ? double(made) / gen_s : 0.0);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Sample text from a trained run (recurrent state)");
  cmd->add_option("run_dir", a->run_dir, "run directory (latest checkpoint) or checkpoint")
      ->required();
  cmd->add_option("--prompt", a->prompt, "text to continue")->capture_default_str();
  cmd->add_option("--max-tokens", a->max_tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", a->sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", a->sampling.top_k, "keep the k most likely tokens (0 = all)")
      ->capture_default_str();
  cmd->add_option("--top-p", a->sampling.top_p, "nucleus sampling mass (1 = off)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "sampling seed")->capture_default_str();
  cmd->add_option("--device", a->device, "cpu, cuda or auto")->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace gdn::cli
