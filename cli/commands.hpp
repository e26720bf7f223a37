// Registration of the `optiflow` subcommands; each lives in its own file.
#pragma once

#include <CLI/CLI.hpp>

namespace optiflow::cli {

void add_topo_commands(CLI::App& app);
void add_bound_command(CLI::App& app);
void add_compile_commands(CLI::App& app);
void add_sim_command(CLI::App& app);

}  // namespace optiflow::cli
