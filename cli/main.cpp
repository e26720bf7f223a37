// The `optiflow` command: parses arguments and reports errors; the work is in the libraries.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "commands.hpp"
#include "inputs.hpp"
#include "optiflow/compiler/limits.hpp"
#include "optiflow/support/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"OptiFlow: discover fast collective-communication schedules for GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "optiflow 0.1.0");
  // A command group's options (`history --db F`) are accepted after its subcommand too
  // (`history runs --db F`): an option a subcommand does not know goes to its parent. CLI11
  // copies this setting into every subcommand created after it, so it must come first.
  app.fallthrough();
  optiflow::cli::add_topo_commands(app);
  optiflow::cli::add_bound_command(app);
  optiflow::cli::add_compile_commands(app);
  optiflow::cli::add_sim_command(app);
  optiflow::cli::add_baseline_command(app);
  optiflow::cli::add_explore_command(app);
  optiflow::cli::add_compare_command(app);
  optiflow::cli::add_history_command(app);
  optiflow::cli::add_import_command(app);
  optiflow::cli::add_run_command(app);
  optiflow::cli::add_calibrate_command(app);
  optiflow::cli::add_fidelity_command(app);
  optiflow::cli::add_gui_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const optiflow::support::OptionError& e) {
    std::cerr << optiflow::cli::option_diagnostic(e) << "\n";
    return 2;
  } catch (const optiflow::support::InputError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const optiflow::support::UnsupportedError& e) {
    std::cerr << optiflow::cli::unsupported_diagnostic(e) << "\n";
    return 2;
  } catch (const optiflow::compiler::TimeLimitError& e) {  // what the user asked for: exit 2
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "optiflow: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
