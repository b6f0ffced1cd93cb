// `gdn`: subcommands by name (`gdn --help`, `gdn SUBCOMMAND --help`). A gdn::Error from any
// command prints its message and exits with status 1; running out of host memory
// (std::bad_alloc) says so, with the command that was running, and also exits with 1. A command
// whose result is a failure exits with its own status (profile-memory over budget, bench with
// failed rows: 2; gradcheck failures: 1). Under mpirun an error names the rank and ends every
// rank of the job (MPI_Abort), so none waits for it forever.
#include <cstdio>
#include <new>
#include <string>

#include "src/cli/commands.h"
#include "src/core/error.h"
#include "src/dist/communicator.h"

namespace {
int fail(const std::string& what) {
  const gdn::dist::LaunchInfo li = gdn::dist::launch_info();
  if (li.world_size > 1) {
    std::fprintf(stderr, "gdn: error on rank %d of %d: %s\n", li.rank, li.world_size, what.c_str());
    gdn::dist::abort_job(1);
  } else {
    std::fprintf(stderr, "gdn: error: %s\n", what.c_str());
  }
  return 1;
}

// "gdn train CONFIG.yaml --set train.batch_size=1000000000": what was running.
std::string command_line(int argc, char** argv) {
  std::string s = "gdn";
  for (int i = 1; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
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
  gdn::cli::add_tokenize_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit status (a result, not an error)
    gdn::dist::finalize();
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (the flag named); --help is 0, a bad command line is an error (1).
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const std::bad_alloc&) {
    return fail("out of memory (std::bad_alloc) while running `" + command_line(argc, argv) +
                "`: something asked for more host memory than this machine could give. Check "
                "the sizes in the config (`gdn profile-memory CONFIG.yaml` shows one training "
                "step's memory without allocating it)");
  } catch (const std::exception& e) {  // gdn::Error and the rest
    return fail(e.what());
  }
  gdn::dist::finalize();
  return 0;
}
