// Building a Trainer, one named step at a time: the run directory (or the one resumed), the
// device and the ranks, the data, the model, the optimizer (sharded under ZeRO-1) and schedule,
// the state (fresh or from a checkpoint), the data-parallel agreement, the metrics log and the
// banner. The order matters: rank 0 prepares the data before the other ranks open it, the
// model is initialized before the checkpoint overwrites it, and the ranks agree on the state.
#include <cstdio>
#include <filesystem>

#include "src/data/hf_tokenizer.h"
#include "src/dist/communicator.h"
#include "src/dist/consistency.h"
#include "src/dist/grad_reducer.h"
#include "src/dist/zero.h"
#include "src/io/atomic_file.h"
#include "src/io/run_lock.h"
#include "src/train/flops.h"
#include "src/train/gemm_bound.h"
#include "src/train/init_from.h"
#include "src/train/model_io.h"
#include "src/train/run_parts.h"
#include "src/train/size_check.h"
#include "src/train/trainer.h"
#if defined(GDN_WITH_CUDA)
#include "kernels/cuda/gemm.h"
#include "src/core/cuda/cuda_context.h"
#endif

namespace gdn::train {

namespace fs = std::filesystem;

namespace {

std::string device_name(Device d) {
#if defined(GDN_WITH_CUDA)
  if (d.is_cuda()) return cuda::device_name(d.index);
#endif
  return d.str();
}

}  // namespace

Trainer::Trainer(RunConfig cfg, TrainerOptions options)
    : cfg_(std::move(cfg)), options_(std::move(options)) {
  const std::string checkpoint = resolve_run_dir();
  // A new run from a model's weights: the model (and the tokenizer of its data) are the model's.
  if (checkpoint.empty() && !cfg_.train.init_from.empty())
    cfg_ = config_for_init_from(cfg_, cfg_.model_in_yaml, cfg_.overrides);
  connect_ranks();
  check_run_fits(cfg_, device_, world_size());  // before the data or the model allocate
  open_data();
  build_model();
  build_optimizer();
  init_state(checkpoint);
  if (world_size() > 1) init_data_parallel();
  open_metrics(!checkpoint.empty());
  if (!options_.quiet) print_banner();
}

Trainer::~Trainer() = default;

void Trainer::lock_run_dir() {
  // One writer per run directory; rank 0 writes for every rank, so it alone takes the lock
  // (before anything in the directory is read). Readers (eval, generate) take none.
  if (options_.read_only || dist::launch_info().rank != 0) return;
  lock_ = io::RunLock::acquire(run_dir_,
                               options_.resume.empty()
                                   ? (options_.overwrite ? "gdn train --overwrite" : "gdn train")
                                   : "gdn train --resume");
  remove_stale_temporaries(run_dir_);
}

std::string Trainer::resolve_run_dir() {
  if (options_.resume.empty()) {
    run_dir_ = cfg_.train.out_dir;
    lock_run_dir();
    // Every rank looks before any writes (rank 0 writes nothing that counts before the barrier
    // in open_data), so all refuse alike.
    const std::vector<std::string> traces = run_traces(run_dir_);
    if (!options_.read_only && !options_.overwrite && !traces.empty()) {
      std::string found;
      for (const std::string& t : traces) found += (found.empty() ? "" : ", ") + t;
      const bool resumable = fs::exists(fs::path(run_dir_) / "latest");
      GDN_FAIL("train.out_dir ", run_dir_, " already holds a run (", found,
               "); a fresh run there would lose it. ",
               resumable ? "Continue it with `gdn train --resume " + run_dir_ + "`"
                         : std::string("It has no checkpoint yet for `--resume` to continue"),
               "; start over with `gdn train CONFIG --overwrite` (deletes its checkpoints, ",
               "metrics.jsonl and config.yaml; keeps data/), or set train.out_dir to another ",
               "directory");
    }
    return "";
  }
  GDN_CHECK(!options_.overwrite, "--overwrite starts a fresh run and --resume ", options_.resume,
            " continues one: give one of them");
  run_dir_ = run_dir_of(options_.resume);
  // A run to continue exists: lock it before reading (a missing one is resolve_checkpoint's error).
  std::error_code ec;
  if (fs::is_directory(run_dir_, ec)) lock_run_dir();
  return resolve_checkpoint(options_.resume);
}

void Trainer::connect_ranks() {
  device_ = parse_device(cfg_.train.device);
  comm_ = options_.comm;
  if (!comm_) {
    const dist::LaunchInfo launch = dist::launch_info();
    // One process per GPU: "auto" and "cuda" take the device of the local rank.
    if (launch.world_size > 1 && device_.is_cuda()) {
      GDN_CHECK(cfg_.train.device == "auto" || cfg_.train.device == "cuda",
                "train.device: ", cfg_.train.device, " names one GPU for all ", launch.world_size,
                " ranks; use `cuda` (or `auto`) so each rank takes the GPU of its local rank");
      device_ = Device::cuda(launch.local_rank % cuda_device_count());
    }
    comm_ = dist::make_communicator(cfg_.dist.backend, device_, cfg_.dist.timeout_s);
  }
#if defined(GDN_WITH_CUDA)
  cuda::set_allow_tf32(cfg_.train.allow_tf32);
#endif
  if (rank() != 0) options_.quiet = true;  // rank 0 reports for the run
}

void Trainer::open_data() {
  const bool main_rank = rank() == 0;
  if (!options_.read_only && main_rank) {
    if (options_.overwrite && !run_traces(run_dir_).empty()) {
      if (!options_.quiet)
        std::fprintf(stderr, "gdn: --overwrite: deleting the run in %s (its data/ stays)\n",
                     run_dir_.c_str());
      remove_run(run_dir_);
    }
    std::error_code ec;
    fs::create_directories(run_dir_, ec);
    GDN_CHECK(!ec, "cannot create the run directory ", run_dir_, ": ", ec.message());
  }
  // Rank 0 prepares RUN_DIR/data when it is missing; the other ranks open it afterwards.
  if (main_rank) data_ = make_data_source(cfg_, run_dir_, 0, world_size());
  if (world_size() > 1) comm_->barrier();
  if (!main_rank) data_ = make_data_source(cfg_, run_dir_, rank(), world_size());
  GDN_CHECK(data_->vocab_size() <= cfg_.model.vocab_size, "the data uses ", data_->vocab_size(),
            " token ids but model.vocab_size is ", cfg_.model.vocab_size);
}

void Trainer::build_model() {
  model_ = build_run_model(cfg_, device_);
}

void Trainer::build_optimizer() {
  RunOptimizer r = build_run_optimizer(cfg_, *model_, world_size(), rank());
  opt_ = std::move(r.opt);
  opt_layout_ = std::move(r.layout);
  owners_ = std::move(r.owners);
  sharded_params_ = std::move(r.sharded_params);
  schedule_ = make_schedule(cfg_.train);
}

namespace {

// What tells two tokenizers apart: kind, vocabulary, special ids and the ids of a probe text
// (ASCII, accents, CJK, emoji, code), hashed: two SentencePiece models of one vocabulary size
// encode it differently.
std::string tokenizer_identity(const data::Tokenizer& t) {
  static const char kProbe[] =
      "The quick brown fox, 1234 jumps!\n\tdef f(x): return x ** 2  # café naïve 日本語 🙂 "
      "<|endoftext|> Zürich-Straße  \u00e9\u00e8";
  std::vector<int32_t> ids;
  t.encode_append(kProbe, ids);
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids
  for (int32_t id : ids)
    for (int b = 0; b < 4; ++b) h = (h ^ ((uint32_t(id) >> (8 * b)) & 0xff)) * 1099511628211ull;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", (unsigned long long)h);
  return str_cat(t.name(), " (vocab ", t.vocab_size(), ", bos ", t.bos_id(), ", eos ", t.eos_id(),
                 ", probe ", hash, ")");
}

}  // namespace

// A resume continues the same model on the same tokens: the checkpoint's config.json must
// describe this config's model (execution keys aside, as eval and forward compare them), and its
// tokenizer must be the data's.
void Trainer::check_resume_is_the_same_run(const std::string& checkpoint) const {
  const nn::ModelConfig saved = load_config_json(checkpoint);
  const std::vector<std::string> diff = nn::model_differences(cfg_.model, saved);
  GDN_CHECK(diff.empty(), "--resume ", checkpoint,
            ": this config and the checkpoint's config.json ",
            "describe different models: ", join(diff, ", "),
            " (values: now vs the checkpoint's). A resume ",
            "continues the same model: drop the --set of those keys, or start a new run (another ",
            "train.out_dir, or --overwrite)");
  const data::Tokenizer* now = data_->tokenizer();
  if (!now || !data::has_tokenizer_files(checkpoint)) return;
  const std::string a = tokenizer_identity(*now),
                    b = tokenizer_identity(*data::load_hf_tokenizer(checkpoint));
  GDN_CHECK(a == b, "--resume ", checkpoint, ": the data's tokenizer is ", a,
            ", the checkpoint was trained on ", b, ": the same ids would mean other text. Resume ",
            "on data made with the run's tokenizer (data.dir), or start a new run");
}

void Trainer::init_state(const std::string& checkpoint) {
  state_.seed = uint64_t(cfg_.train.seed);
  if (!checkpoint.empty()) {
    // The small file first: a bad trainer_state.json fails before the weights are read.
    const TrainerState loaded = load_trainer_state(checkpoint);
    GDN_CHECK(options_.read_only || loaded.step <= cfg_.train.steps,
              (fs::path(checkpoint) / "trainer_state.json").string(), ": field 'step' is ",
              loaded.step, ", beyond train.steps = ", cfg_.train.steps,
              ": raise train.steps (--set train.steps=N) to continue this run");
    check_resume_is_the_same_run(checkpoint);
    load_weights(checkpoint, *model_);
    if (opt_layout_) {
      // The checkpoint holds every parameter's state: keep this rank's shard.
      const std::string path = (fs::path(checkpoint) / "optimizer.safetensors").string();
      try {
        opt_->load_state_dict(
            dist::shard_optimizer_state(read_optimizer_state(checkpoint, opt_->name()), *opt_));
      } catch (const Error& e) {
        GDN_FAIL(path, ": ", e.what());
      }
    } else {
      load_optimizer(checkpoint, *opt_);
    }
    state_ = loaded;
    // The data position is a global step: any world size continues from it; the rows match the
    // uninterrupted run's when the global batch is the same.
    data_->set_position(state_.data_step);
    const int64_t global_batch = cfg_.train.batch_size * world_size();
    if (!options_.quiet && state_.global_batch > 0 && state_.global_batch != global_batch)
      std::fprintf(stderr,
                   "gdn: note: the checkpoint's global batch was %lld rows (%lld ranks), now "
                   "%lld (%d ranks): the data continues with different rows than before\n",
                   (long long)state_.global_batch, (long long)state_.world_size,
                   (long long)global_batch, world_size());
    if (!options_.quiet && !state_.data_pack.empty() && state_.data_pack != data_->packing())
      std::fprintf(stderr,
                   "gdn: note: the checkpoint's rows were made as %s, now as %s (data.pack): the "
                   "data continues with different rows than before\n",
                   state_.data_pack.c_str(), data_->packing().c_str());
    if (!options_.quiet)
      std::fprintf(stderr, "gdn: resumed from %s at step %lld\n", checkpoint.c_str(),
                   (long long)state_.step);
  }
  if (checkpoint.empty() && !cfg_.train.init_from.empty()) start_from_model();
  state_.world_size = world_size();
  state_.global_batch = cfg_.train.batch_size * world_size();
  state_.data_pack = data_->packing();
}

// train.init_from: the model's weights, and data whose ids mean what they meant to it.
void Trainer::start_from_model() {
  const std::string dir = init_model_dir(cfg_.train.init_from);
  const data::Tokenizer* now = data_->tokenizer();
  if (now && data::has_tokenizer_files(dir)) {
    const std::string a = tokenizer_identity(*now),
                      b = tokenizer_identity(*data::load_hf_tokenizer(dir));
    GDN_CHECK(a == b, "train.init_from ", dir, ": the data's tokenizer is ", a,
              ", the model was trained on ", b, ": prepare the data with the model's tokenizer ",
              "(data.tokenizer: ", dir, ", or leave data.tokenizer out with data.inputs)");
  }
  const InitFrom r = load_init_weights(dir, cfg_.train.init_strict, *model_);
  state_.init_from = r.to_json();
  if (!options_.quiet) {
    std::fprintf(stderr, "gdn: initialised from %s (weights %s)", r.dir.c_str(),
                 r.weights_hash.c_str());
    if (!r.strict)
      std::fprintf(stderr, ": %zu tensors loaded, %zu fresh (%s), %zu skipped (%s)",
                   r.loaded.size(), r.fresh.size(), join(r.fresh, ", ").c_str(), r.skipped.size(),
                   join(r.skipped, ", ").c_str());
    std::fprintf(stderr, "\n");
  }
}

void Trainer::init_data_parallel() {
  // Disagreeing ranks would hang or silently train different models: fail on every rank.
  dist::check_ranks_agree(*comm_,
                          {{"config hash", int64_t(dist::hash_string(cfg_.to_yaml()))},
                           {"parameter count", model_->num_parameters()},
                           {"step", state_.step}},
                          "Start every rank with the same config, --set overrides and --resume.");
  // Rank 0's weights everywhere (init is seeded the same, but a replica must never drift).
  std::vector<std::unique_ptr<dist::Work>> works;
  for (const Tensor& p : model_->parameters()) works.push_back(comm_->broadcast_async(p, 0));
  for (auto& w : works) w->wait();
  check_same_parameters("after the initial broadcast");
  reducer_ = std::make_unique<dist::GradReducer>(model_->parameters(), comm_,
                                                 cfg_.dist.bucket_mb * (int64_t(1) << 20));
}

void Trainer::open_metrics(bool resumed) {
  if (!options_.read_only && rank() == 0) {
    // metrics.jsonl first: a resume's truncation that fails (a full disk) leaves both files whole.
    // A fresh run appends to a file that is empty or absent (else the directory held a run).
    metrics_ = std::make_unique<MetricsLog>((fs::path(run_dir_) / "metrics.jsonl").string(),
                                            resumed ? state_.step : -1);
    const std::string config = cfg_.to_yaml();
    io::write_file_atomic((fs::path(run_dir_) / "config.yaml").string(), config);
    if (cfg_.train.tensorboard) {
      // A new events file per process. Its START is the first step it logs: TensorBoard then
      // drops what earlier files hold past the checkpoint, as metrics.jsonl did (a fresh run,
      // at step 0: all of a run --overwrite deleted).
      auto events = std::make_unique<io::EventWriter>((fs::path(run_dir_) / "tb").string());
      events->add_session_start(resumed ? state_.step + 1 : 0);
      events->add_text("config", "```yaml\n" + config + "```\n", state_.step);
      events->flush();
      metrics_->attach(std::move(events));
    }
  }
  // For the throughput and MFU of the progress line and the metrics.
  flops_per_token_ = train_flops_per_token(cfg_.model, cfg_.data.seq_len, device_);
  peak_flops_ = device_peak_flops(device_name(device_), model_->compute_dtype == DType::bfloat16,
                                  cfg_.train.allow_tf32, cfg_.train.peak_gflops);
  // What the step's GEMMs alone take here, now: the step time's limit (of_gemm_bound).
  if (!options_.read_only && !device_.is_meta())
    gemm_bound_ms_ = measure_gemm_bound(*model_, cfg_.train.batch_size * cfg_.data.seq_len,
                                        cfg_.train.grad_accum, device_, model_->compute_dtype)
                         .ms;
}

void Trainer::print_banner() const {
  std::fprintf(stderr, "gdn: model %s parameters (%lld layers, hidden %lld, kernel %s) on %s, %s\n",
               format_count(double(model_->num_parameters())).c_str(),
               (long long)cfg_.model.num_hidden_layers, (long long)cfg_.model.hidden_size,
               gdr::impl_name(cfg_.model.kernel), device_name(device_).c_str(),
               dtype_name(cfg_.train.dtype));
  std::fprintf(stderr, "gdn: data %s\n", data_->describe().c_str());
  if (world_size() > 1)
    std::fprintf(stderr,
                 "gdn: data-parallel over %d ranks (%s), global batch %lld, %zu gradient "
                 "bucket(s)%s\n",
                 world_size(), comm_->backend(), (long long)state_.global_batch,
                 reducer_->buckets().size(), opt_layout_ ? ", ZeRO-1" : "");
  std::fprintf(stderr, "gdn: run dir %s\n", run_dir_.c_str());
}

}  // namespace gdn::train
