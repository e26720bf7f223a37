// Reading what commands are given: programs, schedules, collectives; shared by the commands.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::cli {

using support::read_text_file;
using support::write_text_file;
support::Collective parse_collective(const std::string& name);
sim::Model parse_model(const std::string& name);
/// "a,b,,c" -> {a, b, c}: a comma-separated flag's items, empty ones dropped.
std::vector<std::string> split_list(const std::string& text);

/// The one-line diagnostic for a request a library does not serve, located at the flag that
/// asked for it (`command line: error: --collective: ...`), or where the error itself is
/// located (a topology's links).
std::string unsupported_diagnostic(const support::UnsupportedError& error);
/// The one-line diagnostic for a library call's bad option, located at its flag
/// (`command line: error: --with: ...`, or `optiflow.db: error: --resume: ...`): the option's
/// name with "--" before it and dashes for underscores.
std::string option_diagnostic(const support::OptionError& error);

/// A schedule from a file: schedule JSON or MSCCL XML (verified here, routes checked against
/// `topology`), or a DSL program (compiled for `collective`, which verifies it).
/// `compiled`, when given, says which it was.
schedule::Schedule load_schedule(const std::string& path, const topology::Topology& topology,
                                 support::Collective collective, bool* compiled = nullptr);

/// Runs `body`; a DSL error is re-thrown with the source line and caret in its message, so
/// that main prints them.
void with_program_diagnostics(const std::function<void()>& body);

}  // namespace optiflow::cli
