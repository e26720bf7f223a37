// Registration of the `optiflow` subcommands; each lives in its own file.
#pragma once

#include <CLI/CLI.hpp>

namespace optiflow::cli {

void add_topo_commands(CLI::App& app);
void add_bound_command(CLI::App& app);
void add_compile_commands(CLI::App& app);
void add_sim_command(CLI::App& app);
void add_baseline_command(CLI::App& app);
void add_explore_command(CLI::App& app);
void add_history_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_fidelity_command(CLI::App& app);
void add_gui_command(CLI::App& app);

/// A program on one line (`a; b; split { ... }`), for tables.
std::string one_line(const std::string& program);

}  // namespace optiflow::cli
