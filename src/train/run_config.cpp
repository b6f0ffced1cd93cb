// RunConfig binding and validation.
#include "src/train/run_config.h"

#include <cmath>
#include <sstream>

#include "src/core/error.h"
#include "src/io/yaml_config.h"

namespace gdn::train {

const char* const kMinimalConfig =
    "model:\n"
    "  hidden_size: 256\n"
    "  num_hidden_layers: 4\n"
    "  num_heads: 4\n"
    "  head_dim: 64\n"
    "  expand_v: 1.0\n"
    "  vocab_size: 256\n";

namespace {

// model.attn is read once every other key is bound: its checks need num_hidden_layers and
// hidden_size, which may come after it in the file or from --set.
struct AttnSource {
  YAML::Node node;
  bool given = false;
};

// Where a spot of model.attn is in the YAML: the list element, else the key, else the entry
// (also for a missing key), else attn itself.
YAML::Mark mark_of(const YAML::Node& attn, const nn::AttentionSpot& spot) {
  if (spot.entry < 0) return attn.Mark();
  const YAML::Node entry = attn.IsSequence() ? attn[size_t(spot.entry)] : attn;
  if (spot.key.empty() || !entry.IsMap()) return entry.Mark();
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar() != spot.key) continue;
    const YAML::Node value = it->second;  // a copy: the iterator yields a temporary
    if (spot.element >= 0 && value.IsSequence() && size_t(spot.element) < value.size())
      return value[size_t(spot.element)].Mark();
    return it->first.Mark();
  }
  return entry.Mark();
}

// Reads model.attn as config.json's attn is read (nn::read_attention), errors naming the line of
// the offending key or element, or the --set that gave it.
void read_yaml_attention(const AttnSource& attn, nn::ModelConfig& c, const std::string& source,
                         const io::ConfigBinder::Origins& from_set) {
  if (!attn.given) return;
  const auto set = from_set.find("model.attn");
  auto name = [&](const std::string& path, const nn::AttentionSpot& spot) {
    if (set != from_set.end()) return "'" + set->second + "' (from --set): " + path;
    const YAML::Mark m = mark_of(attn.node, spot);
    const std::string where =
        m.line < 0 ? source + " (from --set)" : source + ":" + std::to_string(m.line + 1);
    return where + ": " + path;
  };
  nn::read_attention(io::yaml_to_json(attn.node), c, "model.attn", name);
}

void bind_model(io::ConfigBinder& b, nn::ModelConfig& c, AttnSource* attn) {
  b.bind_enum("model.model_type", &c.model_type);
  b.bind("model.hidden_size", &c.hidden_size);
  b.bind("model.num_hidden_layers", &c.num_hidden_layers);
  b.bind("model.num_heads", &c.num_heads);
  b.bind_nullable("model.num_v_heads", &c.num_v_heads);
  b.bind("model.head_dim", &c.head_dim);
  b.bind("model.expand_v", &c.expand_v);
  b.bind("model.conv_size", &c.conv_size);
  b.bind("model.use_short_conv", &c.use_short_conv);
  b.bind("model.use_gate", &c.use_gate);
  b.bind_enum("model.output_gate_activation", &c.output_gate_activation);
  b.bind("model.allow_neg_eigval", &c.allow_neg_eigval);
  b.bind("model.safe_gate", &c.safe_gate);
  b.bind_nullable("model.lower_bound", &c.lower_bound);
  b.bind("model.hidden_ratio", &c.hidden_ratio);
  b.bind_nullable("model.intermediate_size", &c.intermediate_size);
  b.bind("model.hidden_act", &c.hidden_act);
  b.bind("model.norm_eps", &c.norm_eps);
  b.bind("model.vocab_size", &c.vocab_size);
  b.bind("model.tie_word_embeddings", &c.tie_word_embeddings);
  b.bind("model.initializer_range", &c.initializer_range);
  b.bind("model.max_position_embeddings", &c.max_position_embeddings);
  b.bind("model.bos_token_id", &c.bos_token_id);
  b.bind("model.eos_token_id", &c.eos_token_id);
  b.bind("model.attn_mode", &c.attn_mode);
  b.bind("model.fuse_norm", &c.fuse_norm);
  b.bind("model.fuse_swiglu", &c.fuse_swiglu);
  b.bind("model.fuse_cross_entropy", &c.fuse_cross_entropy);
  b.bind_node(
      "model.attn",
      [attn](const YAML::Node& n, const std::string&) {
        if (!attn) return;
        attn->node.reset(n);  // rebind (operator= would assign into the node)
        attn->given = true;
      },
      [&c] { return io::json_to_yaml(nn::attention_json(c)); });
  b.bind_enum("model.kernel", &c.kernel, EnumTable<gdr::Impl>(nn::kModelKernels));
  b.bind("model.chunk_size", &c.chunk_size);
  b.bind_enum("model.residual", &c.residual);
  b.bind_enum("model.attention_impl", &c.attention_impl);
  b.bind_enum("model.conv1d_impl", &c.conv1d_impl);
  b.bind("model.fused_vt", &c.fused_vt);
  b.bind("model.fused_sub", &c.fused_sub);
}

void bind_all(io::ConfigBinder& b, RunConfig& c, AttnSource* attn = nullptr) {
  bind_model(b, c.model, attn);
  DataConfig& d = c.data;
  b.bind_enum("data.task", &d.task);
  b.bind("data.dir", &d.dir);
  b.bind("data.inputs", &d.inputs);
  b.bind("data.tokenizer", &d.tokenizer);
  b.bind("data.bos_token", &d.bos_token);
  b.bind("data.eos_token", &d.eos_token);
  b.bind("data.vocab_size", &d.vocab_size);
  b.bind_enum("data.pack", &d.pack);
  b.bind("data.text_field", &d.text_field);
  b.bind("data.prompt_field", &d.prompt_field);
  b.bind("data.completion_field", &d.completion_field);
  b.bind("data.skip_bad_lines", &d.skip_bad_lines);
  b.bind("data.val_fraction", &d.val_fraction);
  b.bind("data.seq_len", &d.seq_len);
  b.bind("data.mqar_pairs", &d.mqar_pairs);
  b.bind("data.mqar_queries", &d.mqar_queries);
  TrainConfig& t = c.train;
  b.bind("train.steps", &t.steps);
  b.bind("train.batch_size", &t.batch_size);
  b.bind("train.grad_accum", &t.grad_accum);
  b.bind_enum("train.optimizer", &t.optimizer);
  b.bind("train.lr", &t.lr);
  b.bind("train.min_lr", &t.min_lr);
  b.bind("train.warmup_steps", &t.warmup_steps);
  b.bind_enum("train.schedule", &t.schedule);
  b.bind("train.weight_decay", &t.weight_decay);
  b.bind("train.betas", &t.betas);
  b.bind("train.eps", &t.eps);
  b.bind("train.momentum", &t.momentum);
  b.bind("train.clip_grad_norm", &t.clip_grad_norm);
  b.bind_enum("train.dtype", &t.dtype, EnumTable<DType>(kTrainDTypes));
  b.bind("train.seed", &t.seed);
  b.bind("train.eval_every", &t.eval_every);
  b.bind("train.eval_batches", &t.eval_batches);
  b.bind("train.save_every", &t.save_every);
  b.bind("train.log_every", &t.log_every);
  b.bind("train.tensorboard", &t.tensorboard);
  b.bind("train.init_from", &t.init_from);
  b.bind("train.init_strict", &t.init_strict);
  b.bind("train.keep_checkpoints", &t.keep_checkpoints);
  b.bind("train.out_dir", &t.out_dir);
  b.bind("train.device", &t.device);
  b.bind_enum("train.on_nonfinite", &t.on_nonfinite);
  b.bind_enum("train.checkpointing", &t.checkpointing);
  b.bind("train.decay_embeddings", &t.decay_embeddings);
  b.bind("train.peak_gflops", &t.peak_gflops);
  b.bind("train.allow_tf32", &t.allow_tf32);
  DistConfig& s = c.dist;
  b.bind_enum("dist.backend", &s.backend);
  b.bind("dist.zero1", &s.zero1);
  b.bind("dist.bucket_mb", &s.bucket_mb);
  b.bind("dist.timeout_s", &s.timeout_s);
}

RunConfig bind_document(YAML::Node root, const std::string& source,
                        const std::vector<std::string>& overrides, bool require_keys = true) {
  // fla's model defaults are a 1.3B model (512-wide value heads), far too large for a first run:
  // a config that sets nothing is a mistake (a wrong file, an empty template), not a request.
  GDN_CHECK(!require_keys || io::sets_any_value(root) || !overrides.empty(), source,
            ": the config sets no key (it is empty or only comments). Start from "
            "configs/default.yaml, or give at least the model's sizes, e.g.\n",
            kMinimalConfig);
  RunConfig c;
  c.source = source;
  const YAML::Node& yaml = root;  // const: looking up a key must not add it
  c.model_in_yaml = yaml["model"] && yaml["model"].IsMap() && yaml["model"].size() > 0;
  c.overrides = overrides;
  io::ConfigBinder b;
  AttnSource attn;
  bind_all(b, c, &attn);
  io::ConfigBinder::Origins from_set;
  for (const auto& o : overrides) {
    b.check_set_key(o);
    io::apply_override(root, o);
    from_set[o.substr(0, o.find('='))] = o;
  }
  // A kda model starts from KDAConfig's defaults, as fla's does; the keys given go over them.
  if (const YAML::Node model = yaml["model"]; model && model.IsMap()) {
    const YAML::Node type = model["model_type"];
    if (type && type.IsScalar() && type.Scalar() == "kda")
      c.model = nn::ModelConfig::kda_defaults();
  }
  b.apply(root, source, from_set);
  read_yaml_attention(attn, c.model, source, from_set);
  c.validate();
  return c;
}

}  // namespace

void RunConfig::validate() const {
  model.validate();
  GDN_CHECK(data.seq_len >= 1, "data.seq_len must be >= 1, got ", data.seq_len);
  // A tokenizer path is checked where it is read (preparing the data), not here: a run's
  // config.yaml must load for eval and resume after the data is made, wherever they run.
  GDN_CHECK(data.val_fraction >= 0 && data.val_fraction < 1,
            "data.val_fraction must be in [0, 1), got ", data.val_fraction);
  GDN_CHECK(train.steps >= 0 && train.batch_size >= 1 && train.grad_accum >= 1,
            "train.steps >= 0, train.batch_size >= 1 and train.grad_accum >= 1 (got ", train.steps,
            ", ", train.batch_size, ", ", train.grad_accum, ")");
  // lr 0 is allowed: a run that only measures (its loss curve is the model's, the weights stay).
  GDN_CHECK(
      train.lr >= 0 && std::isfinite(train.lr) && train.min_lr >= 0 && train.min_lr <= train.lr,
      "train.lr must be >= 0 and 0 <= train.min_lr <= train.lr (got ", train.lr, ", ", train.min_lr,
      ")");
  GDN_CHECK(train.betas.size() == 2 && train.betas[0] >= 0 && train.betas[0] < 1 &&
                train.betas[1] >= 0 && train.betas[1] < 1,
            "train.betas must be two numbers in [0, 1)");
  GDN_CHECK(train.warmup_steps >= 0 && train.eval_every >= 0 && train.save_every >= 0 &&
                train.log_every >= 1,
            "train.warmup_steps, eval_every, save_every must be >= 0 and log_every >= 1");
  GDN_CHECK(train.keep_checkpoints >= 0, "train.keep_checkpoints must be >= 0 (0: keep every ",
            "checkpoint), got ", train.keep_checkpoints);
  GDN_CHECK(train.eval_batches >= 0, "train.eval_batches must be >= 0 (0: the whole val split), ",
            "got ", train.eval_batches);
  GDN_CHECK(train.peak_gflops >= 0 && std::isfinite(train.peak_gflops),
            "train.peak_gflops must be >= 0 (0: measured), got ", train.peak_gflops);
  GDN_CHECK(dist.bucket_mb >= 0 && dist.timeout_s > 0,
            "dist.bucket_mb must be >= 0 (0: one bucket per parameter) and dist.timeout_s > 0 "
            "(got ",
            dist.bucket_mb, " and ", dist.timeout_s, ")");
}

std::string RunConfig::to_yaml() const {
  RunConfig copy = *this;
  io::ConfigBinder b;
  bind_all(b, copy);
  YAML::Emitter out;
  out << b.dump();
  return std::string(out.c_str()) + "\n";
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  return bind_document(io::load_yaml_file(path), path, overrides);
}

RunConfig parse_run_config(const std::string& yaml_text, const std::string& source,
                           const std::vector<std::string>& overrides) {
  return bind_document(io::parse_yaml(yaml_text, source), source, overrides);
}

RunConfig default_run_config(const std::vector<std::string>& overrides) {
  return bind_document(YAML::Node(), "(defaults)", overrides, /*require_keys=*/false);
}

}  // namespace gdn::train
