// `gdn profile-memory CONFIG.yaml [--seq N] [--batch B] [--device meta|cpu|cuda]
// [--world-size N] [--budget 24GiB] [--allowance 1GiB] [--json FILE] [--svg FILE.svg]
// [--html FILE.html] [--set k=v]`: the memory of one training step (of one rank of N), by
// category, phase, block and op kind, and op by op over the step (the JSON's timeline, pictured
// by --svg and --html); with a budget, whether it fits and what would. Exit status: 0 when it fits
// (or no budget was given), 2 when it does not fit the budget (the settings that would, or "nothing
// fits", are listed and the JSON is still written), 1 on an error.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/train/memory_chart.h"
#include "src/train/memory_profile.h"
#include "src/train/size_check.h"

namespace gdn::cli {

namespace {

// The exit status of a profile that does not fit its budget (1 is an error).
constexpr int kDoesNotFit = 2;

struct ProfileArgs {
  std::string config, device = "meta", budget, allowance = "1GiB", json, svg, html;
  int64_t seq = 0, batch = 0;
  int world_size = 1;
  std::vector<std::string> sets;
};

void write_file(const std::string& path, const std::string& contents, const char* flag) {
  std::ofstream f(path);
  GDN_CHECK(f, flag, ": cannot write '", path, "'");
  f << contents;
  GDN_CHECK(f.good(), flag, ": error writing '", path, "'");
}

void run(const ProfileArgs& a) {
  // Sizes are read first, so a unit mistake fails before any work.
  const int64_t budget = a.budget.empty() ? 0 : train::parse_bytes(a.budget, "--budget");
  const int64_t allowance = train::parse_bytes(a.allowance, "--allowance");
  train::RunConfig cfg = train::load_run_config(a.config, a.sets);
  const int64_t seq = a.seq > 0 ? a.seq : cfg.data.seq_len;
  const int64_t batch = a.batch > 0 ? a.batch : cfg.train.batch_size;
  train::check_kernel_limits(cfg);
  // Meta allocates nothing, but 1e8 blocks of module objects would still fill the host.
  train::check_profilable(cfg, batch, seq, a.world_size);
  const Device dev = parse_device(a.device);
  if (!dev.is_meta()) {
    // A real device allocates what it profiles: refuse what cannot fit there first.
    train::RunConfig run = cfg;
    run.train.batch_size = batch;
    run.data.seq_len = seq;
    train::check_run_fits(run, dev, a.world_size);
  }
  // The timeline costs a trace capture of one step: cheap, and the JSON carries it too.
  train::MemoryProfile p =
      train::profile_training_step(cfg, a.device, batch, seq, a.world_size, true);
  if (budget > 0) {
    p.budget_bytes = budget;
    p.allowance_bytes = allowance;
  }
  std::fputs(train::profile_table(p).c_str(), stdout);
  nlohmann::json j = train::profile_json(p);
  const bool fits = budget == 0 || p.fits();
  if (!fits) {
    auto sugg =
        train::suggest_fits(cfg, batch, seq, p.budget_bytes, p.allowance_bytes, a.world_size);
    nlohmann::json js = nlohmann::json::array();
    for (const auto& s : sugg)
      js.push_back({{"settings", s.settings}, {"peak_bytes", s.peak_bytes}, {"fits", s.fits}});
    std::fputs(train::fit_report(sugg, p).c_str(), stdout);
    j["suggestions"] = js;
  }
  if (!a.json.empty()) write_file(a.json, j.dump(2) + "\n", "--json");
  const std::string title = std::filesystem::path(a.config).stem().string();
  if (!a.svg.empty()) write_file(a.svg, train::memory_chart_svg(p, title), "--svg");
  if (!a.html.empty()) write_file(a.html, train::memory_chart_html(p, title), "--html");
  std::fflush(stdout);
  if (!fits) throw CLI::RuntimeError(kDoesNotFit);
}

}  // namespace

void add_profile_memory_command(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  auto* cmd = app.add_subcommand(
      "profile-memory",
      "Memory of one training step (fwd, bwd, optimizer); exit status 2 when over --budget");
  cmd->add_option("config", a->config, "YAML config (the model's sizes are enough)")->required();
  cmd->add_option("--seq", a->seq, "sequence length (default data.seq_len)")
      ->check(whole_number(1));
  cmd->add_option("--batch", a->batch, "batch size (default train.batch_size)")
      ->check(whole_number(1));
  cmd->add_option("--world-size", a->world_size,
                  "data-parallel ranks: the memory of one (dist.zero1 shards the optimizer state)")
      ->check(whole_number(1))
      ->capture_default_str();
  cmd->add_option("--device", a->device, "meta (no memory needed), cpu or cuda")
      ->capture_default_str();
  cmd->add_option("--budget", a->budget,
                  "memory budget with a unit (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB), e.g. 24GiB: "
                  "says whether it fits; exit status 2 when it does not")
      ->check(non_empty());
  cmd->add_option("--allowance", a->allowance,
                  "added to the peak for the budget: CUDA context and cuBLAS/cuDNN workspaces "
                  "(a size with a unit)")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--json", a->json, "write the profile as JSON (with its timeline, op by op)");
  cmd->add_option("--svg", a->svg,
                  "draw the step's memory over its ops (stacked by category, phases, layers, "
                  "peak, budget) as an SVG");
  cmd->add_option("--html", a->html, "the same picture in an HTML page, with zoom");
  cmd->add_option("--set", a->sets, "override a config key (repeatable)")->expected(1)->take_all();
  cmd->callback([a] { run(*a); });
}

}  // namespace gdn::cli
