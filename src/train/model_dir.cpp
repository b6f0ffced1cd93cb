// Model directories for eval, generate and forward: resolution, config agreement, tokenizer,
// weights and validation.
#include "src/train/model_dir.h"

#include <cmath>
#include <filesystem>

#include "src/data/hf_tokenizer.h"
#include "src/data/mqar.h"
#include "src/ops/ops.h"
#include "src/train/checkpoint.h"
#include "src/train/model_io.h"

namespace gdn::train {

namespace fs = std::filesystem;

namespace {

bool has_weights(const fs::path& dir) {
  return fs::exists(dir / "model.safetensors") || fs::exists(dir / "model.safetensors.index.json");
}

std::string describe(const data::Tokenizer& t) {
  return str_cat(t.name(), " (vocab ", t.vocab_size(), ", bos ", t.bos_id(), ", eos ", t.eos_id(),
                 ")");
}

}  // namespace

ModelDir resolve_model_dir(const std::string& path) {
  const fs::path p(path);
  GDN_CHECK(fs::is_directory(p), "'", path, "' is not a directory (expected a run directory, a ",
            "checkpoint directory or a model directory with config.json and model.safetensors)");
  ModelDir md;
  if (fs::exists(p / "latest")) {
    md.dir = resolve_checkpoint(path);  // names what `latest` points to when it is not there
    md.run_dir = p.string();
  } else {
    GDN_CHECK(fs::exists(p / "config.json"), "'", path, "' holds no model: neither config.json (",
              "a model or checkpoint directory) nor 'latest' (a run directory)");
    md.dir = p.string();
    // A checkpoint of a run: RUN_DIR/checkpoints/step-N with its trainer state.
    if (fs::exists(p / "trainer_state.json") && p.parent_path().filename() == "checkpoints")
      md.run_dir = run_dir_of(path);
  }
  GDN_CHECK(has_weights(md.dir), md.dir, " has config.json but no model.safetensors (nor ",
            "model.safetensors.index.json)");
  if (!md.run_dir.empty() && fs::exists(fs::path(md.run_dir) / "config.yaml"))
    md.run_config = (fs::path(md.run_dir) / "config.yaml").string();
  return md;
}

RunConfig run_config_of(const ModelDir& md, const std::vector<std::string>& sets) {
  if (!md.run_config.empty()) return load_run_config(md.run_config, sets);
  return default_run_config(sets);
}

nn::ModelConfig model_config_of(const ModelDir& md, const RunConfig& cfg, bool yaml_describes_model,
                                const std::vector<std::string>& sets) {
  const std::string json_path = (fs::path(md.dir) / "config.json").string();
  nn::ModelConfig m = load_config_json(md.dir);
  if (yaml_describes_model) {
    const std::vector<std::string> diff = nn::model_differences(cfg.model, m);
    GDN_CHECK(diff.empty(), cfg.source, " and ", json_path,
              " describe different models: ", join(diff, ", "),
              " (values: the YAML's vs config.json's; the weights are ",
              "config.json's model, so make the YAML agree or leave it out)");
    m.kernel = cfg.model.kernel;
    m.chunk_size = cfg.model.chunk_size;
    m.residual = cfg.model.residual;
  } else {
    for (const std::string& s : sets) {
      const std::string key = s.substr(0, s.find('='));
      if (key == "model.kernel") {
        m.kernel = cfg.model.kernel;
      } else if (key == "model.chunk_size") {
        m.chunk_size = cfg.model.chunk_size;
      } else if (key == "model.residual") {
        m.residual = cfg.model.residual;
      } else {
        GDN_CHECK(key.rfind("model.", 0) != 0, "--set ", s, ": the model is ", json_path,
                  "'s (no YAML config describes it); only model.kernel, model.chunk_size and ",
                  "model.residual can be set");
      }
    }
  }
  m.validate();
  return m;
}

std::unique_ptr<data::Tokenizer> model_tokenizer(const ModelDir& md, const RunConfig* cfg) {
  if (data::has_tokenizer_files(md.dir)) return data::load_hf_tokenizer(md.dir);
  if (!cfg || md.run_dir.empty() || cfg->data.task == Task::mqar) return nullptr;
  const std::string dir = data_dir_of(*cfg, md.run_dir);
  if (!data::has_tokenizer_files(dir)) return nullptr;
  return data::load_hf_tokenizer(dir);
}

std::unique_ptr<nn::CausalLM> load_model(const ModelDir& md, const nn::ModelConfig& mc,
                                         const nn::InitContext& ctx) {
  auto model = std::make_unique<nn::CausalLM>(mc, ctx);
  load_weights(md.dir, *model);
  model->eval();
  return model;
}

EvalStats evaluate_model(const nn::CausalLM& model, DataSource& data, Device device) {
  autograd::NoGradGuard no_grad;
  EvalStats s;
  data.reset_eval();
  data::Batch b;
  double nats = 0, correct = 0;
  while (data.next_eval(b)) {
    // Weight each batch by the positions it scores (targets other than -100).
    const int64_t n = scored_targets(b);
    if (n == 0) continue;
    if (data.reports_accuracy()) {
      Tensor in = ops::to_device(b.inputs, device), tgt = ops::to_device(b.targets, device);
      Tensor logits = model.logits(in);
      Tensor flat = ops::cast(ops::reshape(logits, {-1, model.cfg.vocab_size}), DType::float32);
      nats += ops::cross_entropy(flat, ops::reshape(tgt, {-1}), -100).item() * double(n);
      correct += data::mqar_accuracy(logits, b.targets) * double(n);
    } else {
      nats += batch_loss(model, b, device).item() * double(n);
    }
    s.tokens += n;
  }
  if (s.tokens == 0) return s;
  s.loss = nats / double(s.tokens);
  if (data.reports_accuracy()) s.accuracy = correct / double(s.tokens);
  s.ppl = std::exp(s.loss);
  if (data.bytes_per_token() > 0) s.bpb = s.loss / std::log(2.0) / data.bytes_per_token();
  return s;
}

nlohmann::json evaluate_model_dir(const EvalRequest& r) {
  const ModelDir md = resolve_model_dir(r.path);
  const bool has_run = !md.run_config.empty();
  RunConfig cfg = run_config_of(md, r.sets);
  if (r.batches >= 0) cfg.train.eval_batches = r.batches;
  if (!r.data_dir.empty()) cfg.data.dir = r.data_dir;
  cfg.model = model_config_of(md, cfg, has_run, r.sets);
  GDN_CHECK(has_run || !cfg.data.dir.empty() || cfg.data.task == Task::mqar, md.dir,
            " is a model directory without a run, so there is no validation data: give --data ",
            "DIR (token shards from `gdn prepare-data`, made with the model's tokenizer)");
  std::unique_ptr<DataSource> data = make_data_source(cfg, md.run_dir);
  // Shards made with another tokenizer would score another text.
  const auto tok = model_tokenizer(md, has_run ? &cfg : nullptr);
  if (tok && data->tokenizer()) {
    const data::Tokenizer& d = *data->tokenizer();
    GDN_CHECK(tok->name() == d.name() && tok->vocab_size() == d.vocab_size() &&
                  tok->bos_id() == d.bos_id() && tok->eos_id() == d.eos_id(),
              "the model's tokenizer is ", describe(*tok), " but the data (", data->describe(),
              ") was made with ", describe(d));
  }
  const Device dev = parse_device(cfg.train.device);
  nn::InitContext ctx;
  ctx.device = dev;
  std::unique_ptr<nn::CausalLM> model = load_model(md, cfg.model, ctx);
  model->compute_dtype = cfg.train.dtype;
  const EvalStats e = evaluate_model(*model, *data, dev);
  GDN_CHECK(e.tokens > 0, "no validation data in ", data->describe());
  nlohmann::json out = {
      {"step", nullptr}, {"val_loss", e.loss}, {"val_ppl", e.ppl}, {"val_tokens", e.tokens}};
  if (fs::exists(fs::path(md.dir) / "trainer_state.json"))
    out["step"] = load_trainer_state(md.dir).step;
  if (e.bpb > 0) out["val_bpb"] = e.bpb;
  if (e.accuracy >= 0) out["val_accuracy"] = e.accuracy;
  if (data->loss_masked()) out["loss_mask"] = "completions";  // val_loss scores only those
  GDN_CHECK(std::isfinite(e.loss), md.dir, ": the validation loss is ", e.loss, " over ", e.tokens,
            " tokens (not finite: the model's logits overflow or are NaN)");
  return out;
}

ForwardModel resolve_forward_model(const std::string& yaml, const std::vector<std::string>& sets,
                                   const std::string& weights) {
  GDN_CHECK(!yaml.empty() || !weights.empty(),
            "gdn forward needs CONFIG.yaml, --weights DIR (a run, checkpoint or model directory), ",
            "or both");
  ForwardModel f;
  f.cfg = yaml.empty() ? default_run_config(sets) : load_run_config(yaml, sets);
  if (weights.empty()) return f;
  const ModelDir md = resolve_model_dir(weights);
  f.cfg.model = model_config_of(md, f.cfg, !yaml.empty(), sets);
  f.weights_dir = md.dir;
  return f;
}

}  // namespace gdn::train
