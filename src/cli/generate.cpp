// `gdn generate DIR --prompt TEXT --max-tokens N [--temperature T --top-k K --top-p P --seed S]
// [--reset-on-eos]`:
// samples from a model through the recurrent state, so each new token costs the same time and
// memory however long the text gets (the point of linear attention). DIR is a run directory, a
// checkpoint directory or any Hugging Face model directory with its tokenizer. The text goes to
// stdout as it is made, byte for byte (a generated NUL included) and ending with a newline;
// tokens/s goes to stderr after it.
#include <cstdio>
#include <string>

#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/train/model_dir.h"
#include "src/train/sampling.h"

namespace gdn::cli {

namespace {

struct GenerateArgs {
  std::string dir, prompt, device = "auto";
  train::GenerateOptions options;
};

void run(const GenerateArgs& a) {
  train::validate(a.options.sampling);
  const train::ModelDir md = train::resolve_model_dir(a.dir);
  const bool has_run = !md.run_config.empty();
  const train::RunConfig cfg = train::run_config_of(md, {});
  auto tok = train::model_tokenizer(md, has_run ? &cfg : nullptr);
  GDN_CHECK(tok, "no tokenizer for ", md.dir, ": it has no tokenizer.json or tokenizer.model",
            has_run ? " and the run's data has none either" : " and belongs to no run");
  nn::InitContext ctx;
  ctx.device = parse_device(a.device);
  auto model = train::load_model(md, train::model_config_of(md, cfg, has_run, {}), ctx);
  model->compute_dtype = has_run ? cfg.train.dtype : DType::float32;

  const train::GenerateStats s =
      train::generate_text(*model, *tok, a.prompt, a.options, [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);  // raw bytes: a NUL is printed too
        std::fflush(stdout);
      });
  std::fflush(stdout);  // the sample (with its final newline) before the stats line on stderr
  std::fprintf(stderr,
               "gdn: prompt %lld tokens in %.2fs; generated %lld tokens at %.1f tokens/s%s\n",
               (long long)s.prompt_tokens, s.prompt_s, (long long)s.generated,
               s.generate_s > 0 ? double(s.generated) / s.generate_s : 0.0,
               a.options.reset_on_eos
                   ? (", " + std::to_string(s.resets.size()) + " end(s) of document").c_str()
                   : "");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Sample text from a model (recurrent state)");
  cmd->add_option("dir", a->dir,
                  "run directory (latest checkpoint), checkpoint directory, or model directory "
                  "(config.json + model.safetensors + tokenizer)")
      ->required();
  cmd->add_option("--prompt", a->prompt, "text to continue")->capture_default_str();
  cmd->add_option("--max-tokens", a->options.max_tokens, "tokens to generate")
      ->check(whole_number(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--temperature", a->options.sampling.temperature, "0 = greedy")
      ->check(real_number(0))
      ->capture_default_str();
  cmd->add_option("--top-k", a->options.sampling.top_k, "keep the k most likely tokens (0 = all)")
      ->check(whole_number(0))
      ->capture_default_str();
  cmd->add_option("--top-p", a->options.sampling.top_p, "nucleus sampling mass (1 = off)")
      ->check(real_number(0, 1, /*above_min=*/true))
      ->capture_default_str();
  cmd->add_option("--seed", a->options.seed, "sampling seed")
      ->check(whole_number(0))
      ->capture_default_str();
  cmd->add_flag("--reset-on-eos", a->options.reset_on_eos,
                "at an end-of-document token, restart the recurrent state and conv cache and go "
                "on with a new document (default: stop there)");
  cmd->add_option("--device", a->device, "cpu, cuda or auto")->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace gdn::cli
