#include "inputs.hpp"

#include "optiflow/core/compiler.hpp"
#include "optiflow/core/dsl_parser.hpp"
#include "optiflow/core/error.hpp"
#include "optiflow/core/schedule_io.hpp"
#include "optiflow/core/text_file.hpp"
#include "optiflow/core/verifier.hpp"

namespace optiflow::cli {

core::Collective parse_collective(const std::string& name) {
  auto collective = core::collective_from_string(name);
  if (!collective)
    throw core::InputError(
        core::SourceLocation{"command line", 0, 0, "--collective"},
        "unknown collective '" + name + "' (allgather, reducescatter, allreduce)");
  return *collective;
}

core::Schedule load_schedule(const std::string& path, const core::Topology& topology,
                             core::Collective collective) {
  const std::string text = core::read_text_file(path);
  const auto first = text.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  const bool is_schedule = first != std::string::npos && (text[first] == '{' || text[first] == '<');
  if (!is_schedule) {
    core::CompileOptions options;
    options.collective = collective;
    return core::compile_program(text, path, topology, options).schedule;
  }
  core::Schedule schedule = core::read_schedule_file(path);
  if (!schedule.topology.empty() && schedule.topology != topology.name())
    throw core::InputError(core::SourceLocation{path, 0, 0, "topology"},
                           "the schedule's routes are for topology '" + schedule.topology +
                               "', not '" + topology.name() + "'");
  const auto verdict = core::verify_schedule(schedule, &topology);
  if (!verdict.ok())
    throw core::InputError(core::SourceLocation{path, 0, 0, {}},
                           "verification failed:\n" + verdict.summary());
  return schedule;
}

void with_program_diagnostics(const std::function<void()>& body) {
  try {
    body();
  } catch (const core::dsl::DslError& e) {
    const std::string rendered = e.render();
    throw core::InputError(e.where(), rendered.substr(rendered.find("error: ") + 7));
  }
}

}  // namespace optiflow::cli
