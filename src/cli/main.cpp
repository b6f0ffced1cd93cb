// `gdn`: subcommands by name (`gdn --help`, `gdn SUBCOMMAND --help`). A gdn::Error from any
// command prints its message and exits with status 1; under mpirun the error names the rank
// and ends every rank of the job (MPI_Abort), so none waits for it forever.
#include <cstdio>

#include "src/cli/commands.h"
#include "src/core/error.h"
#include "src/dist/communicator.h"

namespace {
int fail(const char* what) {
  const gdn::dist::LaunchInfo li = gdn::dist::launch_info();
  if (li.world_size > 1) {
    std::fprintf(stderr, "gdn: error on rank %d of %d: %s\n", li.rank, li.world_size, what);
    gdn::dist::abort_job(1);
  } else {
    std::fprintf(stderr, "gdn: error: %s\n", what);
  }
  return 1;
}
}  // namespace

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
  gdn::cli::add_eval_command(app);
  gdn::cli::add_generate_command(app);
  gdn::cli::add_profile_memory_command(app);
  gdn::cli::add_prepare_data_command(app);
  gdn::cli::add_plot_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {  // gdn::Error and the rest
    return fail(e.what());
  }
  gdn::dist::finalize();
  return 0;
}
