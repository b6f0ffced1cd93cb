// The run configuration: YAML sections `model` (fla's GatedDeltaNetConfig names), `data`,
// `train`, `dist`, each key with a default, so a file holding only the model's sizes is complete
// (one that sets no key at all is refused). Unknown keys and wrong types are errors naming the
// key, file and line; `--set a.b=v` overrides any key, and its errors name the --set.
#pragma once
#include <string>
#include <vector>

#include "layers/config.h"
#include "optim/schedule.h"
#include "src/core/dtype.h"
#include "src/data/tokenizer.h"
#include "src/dist/communicator.h"

namespace gdn::train {

enum class Task { text, mqar };
inline constexpr EnumEntry<Task> kTaskNames[] = {{Task::text, "text"}, {Task::mqar, "mqar"}};
inline EnumTable<Task> enum_table(Task) {
  return kTaskNames;
}
// How text becomes rows (src/data/packing.h): whole documents each starting from a fresh
// state (needs an end-of-document token in the corpus), or windows of the token stream.
enum class Pack { documents, stream };
inline constexpr EnumEntry<Pack> kPackNames[] = {{Pack::documents, "documents"},
                                                 {Pack::stream, "stream"}};
inline EnumTable<Pack> enum_table(Pack) {
  return kPackNames;
}
enum class OptimizerKind { adamw, sgd };
inline constexpr EnumEntry<OptimizerKind> kOptimizerNames[] = {{OptimizerKind::adamw, "adamw"},
                                                               {OptimizerKind::sgd, "sgd"}};
inline EnumTable<OptimizerKind> enum_table(OptimizerKind) {
  return kOptimizerNames;
}
// What a non-finite loss or gradient norm does: stop the run, or skip the update.
enum class OnNonfinite { stop, skip };
inline constexpr EnumEntry<OnNonfinite> kOnNonfiniteNames[] = {{OnNonfinite::stop, "stop"},
                                                               {OnNonfinite::skip, "skip"}};
inline EnumTable<OnNonfinite> enum_table(OnNonfinite) {
  return kOnNonfiniteNames;
}
// The activation dtypes a run trains in (fp32 master weights either way).
inline constexpr EnumEntry<DType> kTrainDTypes[] = {{DType::float32, "float32"},
                                                    {DType::bfloat16, "bfloat16"}};

struct DataConfig {
  Task task = Task::text;           // text | mqar (synthetic associative recall)
  std::string dir;                  // shard directory (train.bin, val.bin, tokenizer)
  std::vector<std::string> inputs;  // text files / globs, tokenized on the fly when dir is empty
  // With inputs: byte, sentencepiece (trained on them) or the path of a tokenizer.json, a
  // model directory or a tokenizer.model (src/data/tokenizer_file.h)
  std::string tokenizer = "byte";
  std::string bos_token, eos_token;  // a tokenizer.json's bos and eos ("": its own choice)
  // sentencepiece vocabulary (0: model.vocab_size); byte: 256, or 258 with bos/eos (other
  // values: 258 when model.vocab_size is 258, else 256)
  int64_t vocab_size = 0;
  // documents: rows of whole documents, with boundaries (a corpus without an eos trains as
  // stream); stream: windows of the token stream across documents
  Pack pack = Pack::documents;
  std::string text_field = "text";  // JSON Lines inputs: the field holding each document
  bool skip_bad_lines = false;      // JSON Lines inputs: skip and count bad lines
  // JSON Lines inputs: a line with completion_field is a fine-tuning pair (loss on the completion)
  std::string prompt_field = "prompt", completion_field = "completion";
  double val_fraction = 0.05;
  int64_t seq_len = 256;
  // MQAR: key-value pairs shown, then queried.
  int64_t mqar_pairs = 8;
  int64_t mqar_queries = 8;
};

struct TrainConfig {
  int64_t steps = 1000;
  int64_t batch_size = 8;
  int64_t grad_accum = 1;
  OptimizerKind optimizer = OptimizerKind::adamw;
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 100;
  optim::ScheduleKind schedule = optim::ScheduleKind::cosine;
  double weight_decay = 0.1;
  std::vector<double> betas{0.9, 0.95};
  double eps = 1e-8;
  double momentum = 0.9;         // sgd
  double clip_grad_norm = 1.0;   // 0 disables
  DType dtype = DType::float32;  // float32 | bfloat16 activations (fp32 master weights)
  int64_t seed = 0;
  int64_t eval_every = 200;
  int64_t eval_batches = 20;
  int64_t save_every = 500;
  int64_t log_every = 10;
  // Rank 0 also writes the metrics to RUN_DIR/tb/events.out.tfevents.* (src/io/tensorboard.h).
  bool tensorboard = true;
  // Start from a model's weights (src/train/init_from.h): a run, checkpoint or model directory;
  // init_strict false loads the tensors whose names and shapes match (growing a model).
  std::string init_from;
  bool init_strict = true;
  int64_t keep_checkpoints = 2;
  std::string out_dir = "runs/default";
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  OnNonfinite on_nonfinite = OnNonfinite::stop;
  nn::Checkpointing checkpointing = nn::Checkpointing::none;  // activation recompute
  bool decay_embeddings = true;
  bool allow_tf32 = false;  // CUDA: fp32 GEMMs on TF32 tensor cores (faster, 10-bit products)
  double peak_gflops = 0;   // the device peak MFU divides by; 0: measured (CPU, cached) or known
};

struct DistConfig {
  dist::Backend backend = dist::Backend::automatic;  // auto | mpi | nccl
  bool zero1 = false;                                // shard optimizer state across ranks
  int64_t bucket_mb = 25;  // gradient all-reduce bucket size (0: one per parameter)
  double timeout_s = 300;  // a collective waiting longer fails, naming itself
};

struct RunConfig {
  nn::ModelConfig model;
  DataConfig data;
  TrainConfig train;
  DistConfig dist;
  std::string source;                  // file it came from
  bool model_in_yaml = false;          // the YAML had a model: section (init_from checks it)
  std::vector<std::string> overrides;  // the --set overrides applied

  void validate() const;
  std::string to_yaml() const;  // the resolved config
};

// The smallest useful config (a 3.2M-parameter byte-level model on the default corpus): shown
// when a config sets no key at all, which is refused.
extern const char* const kMinimalConfig;

// Loads `path` and applies the overrides ("train.steps=100"); validates. A config that sets no
// key (empty or comment-only, and no --set) is refused; errors name the file and line, or the
// --set ("'train.steps=abc' (from --set): ..."), and unknown --set keys get a "did you mean".
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same from YAML text (tests).
RunConfig parse_run_config(const std::string& yaml_text, const std::string& source,
                           const std::vector<std::string>& overrides = {});
// Every key at its default plus the overrides (source "(defaults)"): for a model directory
// without a run around it, whose model then comes from its config.json.
RunConfig default_run_config(const std::vector<std::string>& overrides = {});

}  // namespace gdn::train
