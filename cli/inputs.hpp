// Reading what commands are given: programs, schedules, collectives; shared by the commands.
#pragma once

#include <functional>
#include <string>

#include "optiflow/core/collective.hpp"
#include "optiflow/core/schedule.hpp"
#include "optiflow/core/text_file.hpp"
#include "optiflow/core/topology.hpp"

namespace optiflow::cli {

using core::read_text_file;
using core::write_text_file;
core::Collective parse_collective(const std::string& name);

/// A schedule from a file: schedule JSON or MSCCL XML (verified here, routes checked against
/// `topology`), or a DSL program (compiled for `collective`, which verifies it).
core::Schedule load_schedule(const std::string& path, const core::Topology& topology,
                             core::Collective collective);

/// Runs `body`; a DSL error is re-thrown with the source line and caret in its message, so
/// that main prints them.
void with_program_diagnostics(const std::function<void()>& body);

}  // namespace optiflow::cli
