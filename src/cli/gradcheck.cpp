// `gdn gradcheck`: fp64 finite-difference checks of ops (and, as they land, layers and
// kernels) at small random sizes; prints a table and exits non-zero on any failure.
#include <cstdio>
#include <functional>

#include "layers/layer_gradchecks.h"
#include "src/cli/commands.h"
#include "src/cli/flag_checks.h"
#include "src/ops/op_gradchecks.h"

namespace gdn::cli {

void add_gradcheck_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "gradcheck", "fp64 finite-difference gradient checks of ops, layers and kernels");
  struct Args {
    std::string op, layer, kernel;
    uint64_t seed = 0;
    bool list = false, full = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--op", a->op, "op to check, or all");
  cmd->add_option("--layer", a->layer, "layer to check, or all");
  cmd->add_option("--kernel", a->kernel, "gated-delta-rule implementation to check, or all");
  cmd->add_option("--seed", a->seed, "random seed of the inputs")
      ->check(whole_number(0))
      ->capture_default_str();
  cmd->add_flag("--list", a->list, "list the available checks");
  cmd->add_flag("--full", a->full,
                "layers: check every parameter entry (default: a seeded subset of 24 per tensor)");
  cmd->footer("With no --op/--layer/--kernel, runs every check.");
  cmd->callback([a] {
    using autograd::GradcheckReport;
    struct Family {
      std::string kind, pick;
      std::vector<std::string> names;
      std::function<GradcheckReport(const std::string&, uint64_t)> run;
    };
    const bool none = a->op.empty() && a->layer.empty() && a->kernel.empty();
    std::vector<Family> families = {
        {"op", none ? "all" : a->op, ops::op_gradcheck_names(), ops::run_op_gradcheck},
        {"layer", none ? "all" : a->layer, nn::layer_gradcheck_names(),
         [a](const std::string& n, uint64_t s) {
           return nn::run_layer_gradcheck(n, s, a->full ? 0 : 24);
         }},
        {"kernel", none ? "all" : a->kernel, nn::kernel_gradcheck_names(),
         nn::run_kernel_gradcheck}};
    if (a->list) {
      for (const auto& f : families)
        for (const auto& n : f.names) std::printf("--%s %s\n", f.kind.c_str(), n.c_str());
      return;
    }
    std::vector<GradcheckReport> reports;
    for (const auto& f : families) {
      if (f.pick.empty()) continue;
      if (f.pick == "all") {
        for (const auto& n : f.names) reports.push_back(f.run(n, a->seed));
      } else {
        reports.push_back(f.run(f.pick, a->seed));
      }
    }
    std::fputs(autograd::format_report(reports).c_str(), stdout);
    int failed = 0;
    for (const auto& r : reports) failed += r.ok() ? 0 : 1;
    std::printf("%zu checks, %d failed\n", reports.size(), failed);
    if (failed) throw CLI::RuntimeError(1);
  });
}

}  // namespace gdn::cli
