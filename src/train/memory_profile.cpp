// One profiled training step.
#include "src/train/memory_profile.h"
#include "src/train/run_parts.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <unordered_set>

#include "layers/model.h"
#include "optim/clip.h"
#include "src/autograd/node.h"
#include "src/dist/communicator.h"
#include "src/dist/grad_reducer.h"
#include "src/ops/ops.h"
#include "src/train/size_check.h"

namespace gdn::train {

namespace {

// What kind of op saved it: projections, short_convs, kernel, norms, mlp, embeddings,
// logits_loss, checkpoint, other.
std::string kind_of(const std::string& scope, const std::string& op) {
  if (op.rfind("checkpoint", 0) == 0) return "checkpoint_inputs";
  if (scope.rfind("loss", 0) == 0 || scope.rfind("lm_head", 0) == 0) return "logits_loss";
  if (nn::is_mixer_kernel_op(op)) return "kernel_residuals";
  if (scope.find("_conv1d") != std::string::npos) return "short_convs";
  if (scope.find(".mlp") != std::string::npos) return "mlp";
  if (op == "rms_norm" || op == "l2_norm" || scope.find("norm") != std::string::npos)
    return "norms";
  if (scope.find("_proj") != std::string::npos) return "projections";
  if (op == "embedding") return "embeddings";
  return "gates_other";
}

}  // namespace

bool NaturalLess::operator()(const std::string& a, const std::string& b) const {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      const long long x = std::stoll(a.substr(i, ie - i)), y = std::stoll(b.substr(j, je - j));
      if (x != y) return x < y;
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

void add_saved_activations(const Tensor& loss, MemoryProfile& prof) {
  std::unordered_set<const Storage*> counted;
  for (const auto& node : autograd::collect_graph({loss})) {
    for (const Tensor& t : node->saved) {
      if (!t.defined() || !counted.insert(t.storage().get()).second) continue;
      if (t.storage()->category() != MemCategory::activation) continue;  // params, etc.
      const int64_t b = int64_t(t.storage()->bytes());
      prof.saved_total += b;
      prof.saved_by_block[layer_of_scope(node->scope)] += b;
      prof.saved_by_kind[kind_of(node->scope, node->op)] += b;
    }
  }
}

int64_t parse_bytes(const std::string& s, const std::string& what) {
  static const std::vector<std::pair<std::string, double>> units = {{"B", 1},
                                                                    {"KB", 1e3},
                                                                    {"KiB", 1024.0},
                                                                    {"MB", 1e6},
                                                                    {"MiB", 1048576.0},
                                                                    {"GB", 1e9},
                                                                    {"GiB", 1073741824.0},
                                                                    {"TB", 1e12},
                                                                    {"TiB", 1099511627776.0}};
  const char* kUnits = "B, KB, KiB, MB, MiB, GB, GiB, TB or TiB";
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    GDN_FAIL(what, " '", s, "' is not a size (a number and a unit: 24GiB, 512MiB, 1.5TB; units ",
             kUnits, ")");
  }
  std::string unit = s.substr(pos);
  while (!unit.empty() && unit[0] == ' ') unit.erase(0, 1);
  // A bare number would silently be bytes ("--budget 24" = 24 bytes): always ask for the unit.
  GDN_CHECK(!unit.empty(), what, " '", s, "' has no unit: write ", s, "GiB or ", s, "GB (units ",
            kUnits, ")");
  GDN_CHECK(std::isfinite(v) && v >= 0, what, " '", s, "' must be a non-negative size");
  auto lower = [](std::string x) {
    for (char& c : x) c = char(std::tolower(static_cast<unsigned char>(c)));
    return x;
  };
  for (const auto& [u, m] : units) {
    // Any case ("gib", "gb"): memory sizes are never given in bits.
    if (lower(unit) != lower(u)) continue;
    GDN_CHECK(v * m < 9.2e18, what, " '", s, "' is too large");
    return int64_t(std::llround(v * m));
  }
  GDN_FAIL(what, ": unknown size unit '", unit, "' in '", s, "' (use ", kUnits, ")");
}

std::vector<int64_t> packed_profile_cu_seqlens(int64_t batch, int64_t seq) {
  std::vector<int64_t> cu;
  const int64_t mid = seq / 2 + 1;  // mid-row; off the chunk grid for a power-of-two seq
  for (int64_t r = 0; r < batch; ++r) {
    cu.push_back(r * seq);
    if (mid < seq) cu.push_back(r * seq + mid);
  }
  cu.push_back(batch * seq);
  return cu;
}

MemoryProfile profile_training_step(const RunConfig& cfg, const std::string& device_name,
                                    int64_t batch, int64_t seq, int world_size,
                                    bool record_timeline) {
  GDN_CHECK(world_size >= 1, "profile: world size must be >= 1, got ", world_size);
  const Device dev = parse_device(device_name);
  MemoryProfile prof;
  prof.world_size = world_size;
  prof.zero1 = cfg.dist.zero1 && world_size > 1;
  prof.device = dev.str();
  prof.batch = batch;
  prof.seq = seq;
  prof.dtype = dtype_name(cfg.train.dtype);
  prof.checkpointing = enum_name(cfg.train.checkpointing);
  const bool packed = cfg.data.task == Task::text && cfg.data.pack == Pack::documents;
  prof.packing = enum_name(packed ? Pack::documents : Pack::stream);
  reset_peak_memory(dev);
  const MemoryStats base = memory_stats(dev);
  std::optional<TimelineRecorder> timeline;
  if (record_timeline) timeline.emplace(dev);
  int64_t seen_peak = base.peak;
  int64_t allocs_before = base.num_allocs;
  auto phase = [&](const char* name) {
    MemoryStats s = memory_stats(dev);
    prof.phase_peaks.emplace_back(name, s.peak - base.total);
    prof.phase_allocs.emplace_back(name, s.num_allocs - allocs_before);
    allocs_before = s.num_allocs;
    if (s.peak > seen_peak) {
      seen_peak = s.peak;
      prof.peak_phase = name;
    }
  };
  // The timeline's phase from here on (phase() closes one, this opens the next).
  auto timeline_after = [&](const char* next) {
    if (timeline) timeline->set_phase(next);
  };
  {
    // The trainer's own construction (src/train/run_parts.h): fp32 masters, compute dtype,
    // optimizer state up front; with ZeRO-1, rank 0's shard (it gets the largest parameter, so
    // its shard is the largest).
    const std::unique_ptr<nn::CausalLM> built = build_run_model(cfg, dev);
    nn::CausalLM& model = *built;
    prof.params = model.num_parameters();
    const RunOptimizer run_opt =
        build_run_optimizer(cfg, model, prof.zero1 ? world_size : 1, 0, false);
    optim::Optimizer& opt = *run_opt.opt;
    // Data-parallel: the gradients are views into the all-reduce buckets, allocated up front
    // (the collectives themselves are left out: one process stands for every rank).
    std::unique_ptr<dist::GradReducer> reducer;
    if (world_size > 1)
      reducer = std::make_unique<dist::GradReducer>(model.parameters(), dist::single_communicator(),
                                                    cfg.dist.bucket_mb * (int64_t(1) << 20));
    phase("setup");
    timeline_after("forward");
    Generator data(7);
    // The trainer's layout: packed batches are one row of batch * seq (src/data/packing.h).
    const Shape shape = packed ? Shape{1, batch * seq} : Shape{batch, seq};
    const std::vector<int64_t> cu =
        packed ? packed_profile_cu_seqlens(batch, seq) : std::vector<int64_t>{};
    Tensor ids = ops::randint(shape, 0, cfg.model.vocab_size, DType::int64, dev, &data);
    Tensor tgt = ops::randint(shape, 0, cfg.model.vocab_size, DType::int64, dev, &data);
    {
      Tensor loss = model.loss(ids, tgt, cu);
      phase("forward");
      timeline_after("backward");
      add_saved_activations(loss, prof);
      if (reducer) reducer->arm();
      loss.backward();
      if (reducer) reducer->finish();
    }
    phase("backward");
    timeline_after("optimizer");
    if (cfg.train.clip_grad_norm > 0)
      optim::clip_grad_norm(model.parameters(), cfg.train.clip_grad_norm);
    opt.step();
    phase("optimizer");
    // The teardown that follows only frees: the step ends here.
    if (timeline) prof.timeline = timeline->finish();
  }
  const MemoryStats s = memory_stats(dev);
  prof.peak_bytes = s.peak - base.total;
  for (const auto& [name, n] : prof.phase_allocs)
    if (name != "setup") prof.step_allocs += n;
  for (int c = 0; c < kNumMemCategories; ++c) {
    prof.peak_by_category[size_t(c)] = s.at_peak[size_t(c)] - base.current[size_t(c)];
    prof.max_by_category[size_t(c)] = s.max[size_t(c)] - base.current[size_t(c)];
  }
  return prof;
}

nlohmann::json profile_json(const MemoryProfile& p) {
  nlohmann::json at_peak, maxes, phases, allocs;
  for (int c = 0; c < kNumMemCategories; ++c) {
    at_peak[mem_category_name(MemCategory(c))] = p.peak_by_category[size_t(c)];
    maxes[mem_category_name(MemCategory(c))] = p.max_by_category[size_t(c)];
  }
  for (const auto& [n, b] : p.phase_peaks) phases[n] = b;
  for (const auto& [n, c] : p.phase_allocs) allocs[n] = c;
  nlohmann::json j = {
      {"params", p.params},
      {"batch", p.batch},
      {"seq", p.seq},
      {"device", p.device},
      {"dtype", p.dtype},
      {"checkpointing", p.checkpointing},
      {"packing", p.packing},
      {"peak_bytes", p.peak_bytes},
      {"peak_phase", p.peak_phase},
      {"peak_bytes_by_category", at_peak},
      {"max_bytes_by_category", maxes},
      {"peak_bytes_by_phase", phases},
      {"allocations_per_step", p.step_allocs},
      {"allocations_by_phase", allocs},
      {"saved_activations",
       {{"total", p.saved_total}, {"per_block", p.saved_by_block}, {"per_kind", p.saved_by_kind}}},
      {"allowance_bytes", p.allowance_bytes},
      {"world_size", p.world_size},
      {"zero1", p.zero1}};
  if (p.budget_bytes > 0) {
    j["budget_bytes"] = p.budget_bytes;
    j["fits"] = p.fits();
  }
  if (!p.timeline.empty()) j["timeline"] = timeline_json(p.timeline);
  return j;
}

std::string profile_table(const MemoryProfile& p) {
  std::string out;
  char line[200];
  std::snprintf(line, sizeof line,
                "%s parameters, batch %lld x seq %lld (%s), %s, checkpointing %s, on %s\n",
                std::to_string(p.params).c_str(), (long long)p.batch, (long long)p.seq,
                p.packing == "stream" ? "stream" : "packed documents", p.dtype.c_str(),
                p.checkpointing.c_str(), p.device.c_str());
  out += line;
  if (p.world_size > 1) {
    std::snprintf(line, sizeof line, "one rank of %lld (batch per rank)%s\n",
                  (long long)p.world_size, p.zero1 ? ", ZeRO-1: rank 0's optimizer shard" : "");
    out += line;
  }
  std::snprintf(line, sizeof line, "%-12s %14s %14s\n", "category", "at peak", "own max");
  out += line;
  for (int c = 0; c < kNumMemCategories; ++c) {
    std::snprintf(line, sizeof line, "%-12s %14s %14s\n", mem_category_name(MemCategory(c)),
                  format_bytes(p.peak_by_category[size_t(c)]).c_str(),
                  format_bytes(p.max_by_category[size_t(c)]).c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "%-12s %14s   (during %s)\n", "peak",
                format_bytes(p.peak_bytes).c_str(), p.peak_phase.c_str());
  out += line;
  std::string by_phase;
  for (const auto& [n, c] : p.phase_allocs)
    if (n != "setup") by_phase += (by_phase.empty() ? "" : ", ") + n + " " + std::to_string(c);
  out += "allocations in one step: " + std::to_string(p.step_allocs) + " (" + by_phase + ")\n";
  out += "saved activations by kind (" + format_bytes(p.saved_total) + " in all):\n";
  for (const auto& [k, b] : p.saved_by_kind) {
    std::snprintf(line, sizeof line, "  %-20s %14s\n", k.c_str(), format_bytes(b).c_str());
    out += line;
  }
  out += "saved activations by block:\n";
  // All blocks when few; else the first three, the last three and a count between.
  const size_t nb = p.saved_by_block.size();
  size_t i = 0;
  for (const auto& [k, b] : p.saved_by_block) {
    const bool show = nb <= 8 || i < 3 || i + 3 >= nb;
    if (show) {
      std::snprintf(line, sizeof line, "  %-20s %14s\n", k.c_str(), format_bytes(b).c_str());
      out += line;
    } else if (i == 3) {
      out += "  ... (" + std::to_string(nb - 6) + " more)\n";
    }
    ++i;
  }
  if (p.budget_bytes > 0) {
    std::snprintf(line, sizeof line, "budget %s: peak %s + allowance %s = %s -> %s\n",
                  format_bytes(p.budget_bytes).c_str(), format_bytes(p.peak_bytes).c_str(),
                  format_bytes(p.allowance_bytes).c_str(),
                  format_bytes(p.peak_bytes + p.allowance_bytes).c_str(),
                  p.fits() ? "fits" : "does NOT fit");
    out += line;
  }
  return out;
}

std::vector<FitSuggestion> suggest_fits(const RunConfig& cfg, int64_t batch, int64_t seq,
                                        int64_t budget, int64_t allowance, int world_size) {
  std::vector<FitSuggestion> out;
  std::set<std::string> tried;
  struct Variant {
    DType dtype;
    nn::Checkpointing ckpt;
  };
  using nn::Checkpointing;
  const DType bf16 = DType::bfloat16;
  const std::vector<Variant> variants = {{bf16, cfg.train.checkpointing},
                                         {cfg.train.dtype, Checkpointing::kernel},
                                         {cfg.train.dtype, Checkpointing::block},
                                         {bf16, Checkpointing::kernel},
                                         {bf16, Checkpointing::block}};
  for (int64_t b = batch; b >= 1; b /= 2) {
    for (const auto& v : variants) {
      if (b == batch && v.dtype == cfg.train.dtype && v.ckpt == cfg.train.checkpointing) continue;
      const std::string settings =
          str_cat("train.dtype=", dtype_name(v.dtype), " train.checkpointing=", enum_name(v.ckpt),
                  " train.batch_size=", b);
      if (!tried.insert(settings).second) continue;
      RunConfig c = cfg;
      c.train.dtype = v.dtype;
      c.train.checkpointing = v.ckpt;
      // A batch whose lower bound alone is over budget is not profiled (from a batch of 1e9 the
      // halvings are many, and profiling one is slow); batch 1 always is, so the list is never
      // empty.
      if (b > 1 && estimate_step_size(c, b, seq, world_size).device_bytes() + double(allowance) >
                       double(budget))
        continue;
      MemoryProfile p = profile_training_step(c, "meta", b, seq, world_size);
      FitSuggestion s;
      s.settings = settings;
      s.peak_bytes = p.peak_bytes;
      s.fits = p.peak_bytes + allowance <= budget;
      out.push_back(s);
    }
    bool any = false;
    for (const auto& s : out) any = any || s.fits;
    if (any) break;  // the largest batch with a fitting setting
  }
  return out;
}

std::string fit_report(const std::vector<FitSuggestion>& suggestions,
                       const MemoryProfile& current) {
  const int64_t budget = current.budget_bytes, allowance = current.allowance_bytes;
  std::string out;
  // The configured setting counts for "how close the best came" too.
  FitSuggestion given;
  given.settings =
      str_cat("as configured: train.dtype=", current.dtype,
              " train.checkpointing=", current.checkpointing, " train.batch_size=", current.batch);
  given.peak_bytes = current.peak_bytes;
  const FitSuggestion* smallest = &given;
  for (const auto& s : suggestions) {
    if (s.fits)
      out += str_cat("  ", s.settings,
                     std::string(s.settings.size() < 64 ? 64 - s.settings.size() : 1, ' '),
                     " peak ", format_bytes(s.peak_bytes), "\n");
    if (s.peak_bytes < smallest->peak_bytes) smallest = &s;
  }
  if (!out.empty()) return "settings that would fit (predicted on meta):\n" + out;
  // An empty list would read as "no advice": say plainly that nothing tried fits, and how close
  // the best came.
  return str_cat("nothing fits within ", format_bytes(budget), ": the smallest predicted peak is ",
                 format_bytes(smallest->peak_bytes), " + allowance ", format_bytes(allowance),
                 " = ", format_bytes(smallest->peak_bytes + allowance), " (", smallest->settings,
                 ")\n");
}

}  // namespace gdn::train
