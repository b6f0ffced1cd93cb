// `gdn gradcheck`: fp64 finite-difference checks of ops (and, as they land, layers and
// kernels) at small random sizes; prints a table and exits non-zero on any failure.
#include <cstdio>

#include "src/cli/commands.h"
#include "src/ops/op_gradchecks.h"

namespace gdn::cli {

void add_gradcheck_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "gradcheck", "fp64 finite-difference gradient checks of ops, layers and kernels");
  auto op = std::make_shared<std::string>("all");
  auto seed = std::make_shared<uint64_t>(0);
  auto list = std::make_shared<bool>(false);
  cmd->add_option("--op", *op, "op to check, or all")->capture_default_str();
  cmd->add_option("--seed", *seed, "random seed of the inputs")->capture_default_str();
  cmd->add_flag("--list", *list, "list the available checks");
  cmd->callback([op, seed, list] {
    auto names = ops::op_gradcheck_names();
    if (*list) {
      for (const auto& n : names) std::printf("op %s\n", n.c_str());
      return;
    }
    std::vector<autograd::GradcheckReport> reports;
    if (*op == "all") {
      for (const auto& n : names) reports.push_back(ops::run_op_gradcheck(n, *seed));
    } else {
      reports.push_back(ops::run_op_gradcheck(*op, *seed));
    }
    std::fputs(autograd::format_report(reports).c_str(), stdout);
    int failed = 0;
    for (const auto& r : reports) failed += r.ok() ? 0 : 1;
    std::printf("%zu checks, %d failed\n", reports.size(), failed);
    if (failed) throw CLI::RuntimeError(1);
  });
}

}  // namespace gdn::cli
