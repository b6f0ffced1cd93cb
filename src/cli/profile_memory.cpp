// `gdn profile-memory CONFIG.yaml [--seq N] [--batch B] [--device meta|cpu|cuda]
// [--world-size N] [--budget 24GiB] [--allowance 1GiB] [--json FILE] [--set k=v]`: the memory
// of one training step (of one rank of N), by category, phase, block and op kind; with a
// budget, whether it fits and what would.
#include <cstdio>
#include <fstream>

#include "src/cli/commands.h"
#include "src/train/memory_profile.h"

namespace gdn::cli {

namespace {

struct ProfileArgs {
  std::string config, device = "meta", budget, allowance = "1GiB", json;
  int64_t seq = 0, batch = 0;
  int world_size = 1;
  std::vector<std::string> sets;
};

void run(const ProfileArgs& a) {
  train::RunConfig cfg = train::load_run_config(a.config, a.sets);
  const int64_t seq = a.seq > 0 ? a.seq : cfg.data.seq_len;
  const int64_t batch = a.batch > 0 ? a.batch : cfg.train.batch_size;
  train::MemoryProfile p = train::profile_training_step(cfg, a.device, batch, seq, a.world_size);
  if (!a.budget.empty()) {
    p.budget_bytes = train::parse_bytes(a.budget);
    p.allowance_bytes = train::parse_bytes(a.allowance);
  }
  std::fputs(train::profile_table(p).c_str(), stdout);
  nlohmann::json j = train::profile_json(p);
  if (!a.budget.empty() && !p.fits()) {
    auto sugg =
        train::suggest_fits(cfg, batch, seq, p.budget_bytes, p.allowance_bytes, a.world_size);
    nlohmann::json js = nlohmann::json::array();
    std::printf("settings that would fit (predicted on meta):\n");
    for (const auto& s : sugg) {
      js.push_back({{"settings", s.settings}, {"peak_bytes", s.peak_bytes}, {"fits", s.fits}});
      if (s.fits)
        std::printf("  %-64s peak %s\n", s.settings.c_str(), format_bytes(s.peak_bytes).c_str());
    }
    j["suggestions"] = js;
  }
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    GDN_CHECK(f, "cannot write ", a.json);
    f << j.dump(2) << "\n";
  }
}

}  // namespace

void add_profile_memory_command(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  auto* cmd =
      app.add_subcommand("profile-memory", "Memory of one training step (fwd, bwd, optimizer)");
  cmd->add_option("config", a->config, "YAML config (a model: section is enough)")->required();
  cmd->add_option("--seq", a->seq, "sequence length (default data.seq_len)");
  cmd->add_option("--batch", a->batch, "batch size (default train.batch_size)");
  cmd->add_option("--world-size", a->world_size,
                  "data-parallel ranks: the memory of one (dist.zero1 shards the optimizer state)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--device", a->device, "meta (no memory needed), cpu or cuda")
      ->capture_default_str();
  cmd->add_option("--budget", a->budget, "memory budget, e.g. 24GiB: says whether it fits");
  cmd->add_option("--allowance", a->allowance,
                  "added to the peak for the budget: CUDA context and cuBLAS/cuDNN workspaces")
      ->capture_default_str();
  cmd->add_option("--json", a->json, "write the profile as JSON");
  cmd->add_option("--set", a->sets, "override a config key (repeatable)")->expected(1)->take_all();
  cmd->callback([a] { run(*a); });
}

}  // namespace gdn::cli
