// The subcommands of the `gdn` program: each file in src/cli adds one to the app.
#pragma once
#include <CLI/CLI.hpp>

namespace gdn::cli {

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
