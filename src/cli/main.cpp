// `gdn`: subcommands by name (`gdn --help`, `gdn SUBCOMMAND --help`). A gdn::Error from any
// command prints its message and exits with status 1.
#include <cstdio>

#include "src/cli/commands.h"
#include "src/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"gdn: train and benchmark Gated DeltaNet language models", "gdn"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gdn 0.1.0");
  gdn::cli::add_info_command(app);
  gdn::cli::add_gradcheck_command(app);
  gdn::cli::add_run_kernel_command(app);
  gdn::cli::add_bench_command(app);
  gdn::cli::add_forward_command(app);
  gdn::cli::add_train_command(app);
  gdn::cli::add_generate_command(app);
  gdn::cli::add_profile_memory_command(app);
  gdn::cli::add_prepare_data_command(app);
  gdn::cli::add_plot_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const gdn::Error& e) {
    std::fprintf(stderr, "gdn: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdn: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
