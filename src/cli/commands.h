// The subcommands of the `gdn` program: each file in src/cli adds one to the app.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>

namespace gdn::cli {

// Subcommand `name` of `app` whose options bind to one Args, handed to `run` when the command line
// names the subcommand: returns the subcommand and the Args to bind options to.
template <class Args, class Run>
std::pair<CLI::App*, Args*> add_command(CLI::App& app, const std::string& name,
                                        const std::string& description, Run run) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(name, description);
  cmd->callback([args, run] { run(*args); });
  return {cmd, args.get()};
}

void add_gradcheck_command(CLI::App& app);
void add_run_kernel_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_forward_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_profile_memory_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_prepare_data_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);

}  // namespace gdn::cli
