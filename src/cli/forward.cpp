// `gdn forward [CONFIG.yaml] --tokens TOKENS.npy [--weights DIR]`: one forward (and, with
// --grads, backward) of the model on [B, T+1] tokens; prints {"loss", "tokens", "params"} as
// one JSON line. This is how a user checks gdn against their own PyTorch/fla model: same
// config.json and weights, same tokens, compare loss, logits and gradients. With --weights the
// model is DIR/config.json's (a run, checkpoint or Hugging Face model directory); a CONFIG.yaml
// given too must describe the same model, or the run stops naming the keys that differ.
// --cu-seqlens FILE.npy packs sequences into one row (fla's cu_seqlens over the T input positions
// of [1, T+1] tokens): the logits equal each sequence run alone, and the loss stays the mean over
// all T targets (masking the targets across a boundary is the trainer's business).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kernels/gated_delta_rule.h"
#include "src/cli/commands.h"
#include "src/data/hf_tokenizer.h"
#include "src/io/npy.h"
#include "src/io/safetensors.h"
#include "src/ops/ops.h"
#include "src/train/model_dir.h"
#include "src/train/model_io.h"

namespace gdn::cli {

namespace {

struct ForwardArgs {
  std::string config, tokens, weights, save_weights, grads, logits, cu_seqlens;
  std::string dtype = "float32", device = "cpu";
  std::vector<std::string> sets;
};

// The offsets of --cu-seqlens FILE (int32 or int64, [N + 1]) over the T inputs of [B, T+1]
// tokens: 0 = cu[0] < ... < cu[N] = T with B = 1; errors name the flag, the file and the entry.
std::vector<int64_t> load_cu_seqlens(const std::string& path, const Tensor& tokens) {
  const Tensor t = io::load_npy(path);
  GDN_CHECK(t.dtype() == DType::int32 || t.dtype() == DType::int64, "--cu-seqlens ", path,
            ": offsets must be int32 or int64, got ", dtype_name(t.dtype()));
  GDN_CHECK(t.dim() == 1, "--cu-seqlens ", path, ": offsets must be one-dimensional [N + 1], got ",
            shape_str(t.shape()));
  const std::vector<int64_t> cu = io::integer_values(t);
  try {
    gdr::validate_cu_seqlens(cu, tokens.size(0), tokens.size(1) - 1);
  } catch (const std::invalid_argument& e) {
    GDN_FAIL("--cu-seqlens ", path, " (over the T = ", tokens.size(1) - 1,
             " input positions of --tokens ", shape_str(tokens.shape()), "): ", e.what());
  }
  return cu;
}

void run(const ForwardArgs& a) {
  const train::ForwardModel fm = train::resolve_forward_model(a.config, a.sets, a.weights);
  const train::RunConfig& cfg = fm.cfg;
  const Device dev = parse_device(a.device);
  const DType compute = parse_dtype(a.dtype);
  GDN_CHECK(compute == DType::float32 || compute == DType::float64 || compute == DType::bfloat16,
            "--dtype must be float32, float64 or bfloat16, got ", a.dtype);
  Tensor tokens = io::load_npy(a.tokens);
  GDN_CHECK(tokens.dtype() == DType::int32 || tokens.dtype() == DType::int64, a.tokens,
            ": tokens must be int32 or int64, got ", dtype_name(tokens.dtype()));
  GDN_CHECK(tokens.dim() == 2 && tokens.size(1) >= 2, a.tokens, ": tokens must be [B, T+1], got ",
            shape_str(tokens.shape()));
  for (int64_t t : io::integer_values(tokens))
    GDN_CHECK(t >= 0 && t < cfg.model.vocab_size, a.tokens, ": token ", t,
              " is outside the vocabulary [0, ", cfg.model.vocab_size, ")");

  const std::vector<int64_t> cu =
      a.cu_seqlens.empty() ? std::vector<int64_t>{} : load_cu_seqlens(a.cu_seqlens, tokens);

  Generator gen(uint64_t(cfg.train.seed));
  nn::InitContext ctx;
  ctx.device = dev;
  ctx.dtype = compute == DType::float64 ? DType::float64 : DType::float32;  // fp32 masters
  ctx.gen = &gen;
  nn::CausalLM model(cfg.model, ctx);
  model.compute_dtype = compute;
  if (!fm.weights_dir.empty()) train::load_weights(fm.weights_dir, model);
  if (!a.save_weights.empty()) {
    train::save_pretrained(a.save_weights, model);
    // A model directory carries its tokenizer: the one of the weights' directory, if any.
    if (!fm.weights_dir.empty() && data::has_tokenizer_files(fm.weights_dir))
      data::write_hf_tokenizer_files(a.save_weights, *data::load_hf_tokenizer(fm.weights_dir));
  }

  tokens = ops::to_device(tokens, dev);
  const int64_t T = tokens.size(1) - 1;
  Tensor inputs = ops::contiguous(ops::slice(tokens, 1, 0, T));
  Tensor targets = ops::contiguous(ops::slice(tokens, 1, 1, T + 1));
  const bool want_grads = !a.grads.empty();
  Tensor loss, logits;
  {
    // Record the graph only when gradients are asked for.
    std::unique_ptr<autograd::NoGradGuard> no_grad;
    if (!want_grads) no_grad = std::make_unique<autograd::NoGradGuard>();
    logits = model.logits(inputs, cu);
    Tensor flat = ops::reshape(logits, {-1, cfg.model.vocab_size});
    if (flat.dtype() == DType::bfloat16) flat = ops::cast(flat, DType::float32);
    loss = ops::cross_entropy(flat, ops::reshape(targets, {-1}), -100);
    if (want_grads) loss.backward();
  }
  nlohmann::json out = {
      {"loss", loss.item()}, {"tokens", inputs.numel()}, {"params", model.num_parameters()}};
  std::printf("%s\n", out.dump().c_str());
  if (want_grads) {
    io::NamedTensors grads;
    for (auto& [name, p] : model.named_parameters())
      grads.emplace_back(name, p.grad().defined() ? p.grad() : ops::zeros_like(p));
    io::save_safetensors(a.grads, grads, {{"format", "pt"}});
  }
  if (!a.logits.empty()) io::save_npy(a.logits, logits);
}

}  // namespace

void add_forward_command(CLI::App& app) {
  auto a = std::make_shared<ForwardArgs>();
  auto* cmd = app.add_subcommand("forward", "One forward (and backward) of the model on tokens");
  cmd->add_option("config", a->config,
                  "YAML config (a model: section is enough); optional with --weights, where it "
                  "must describe the same model as DIR/config.json");
  cmd->add_option("--tokens", a->tokens,
                  "int32/int64 .npy [B, T+1]: inputs [:, :-1], targets [:, 1:]")
      ->required();
  cmd->add_option("--weights", a->weights,
                  "model to load: run directory (latest checkpoint), checkpoint directory or "
                  "model directory (config.json + model.safetensors)");
  cmd->add_option("--save-weights", a->save_weights,
                  "write the (initial or loaded) model here (with the tokenizer of --weights)");
  cmd->add_option("--grads", a->grads, "write d loss / d parameter as safetensors");
  cmd->add_option("--logits", a->logits, "write the logits [B, T, V] as .npy");
  cmd->add_option("--cu-seqlens", a->cu_seqlens,
                  "int32/int64 .npy [N+1]: packed sequences over the T inputs of [1, T+1] tokens "
                  "(fla's cu_seqlens; each runs as if alone)");
  cmd->add_option("--dtype", a->dtype, "float32, float64 or bfloat16 activations")
      ->capture_default_str();
  cmd->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--set", a->sets, "override a config key: --set model.num_hidden_layers=2")
      ->expected(1)
      ->take_all();
  cmd->callback([a] { run(*a); });
}

}  // namespace gdn::cli
