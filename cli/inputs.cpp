#include "inputs.hpp"

#include <algorithm>
#include <sstream>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/text_file.hpp"

namespace optiflow::cli {

support::Collective parse_collective(const std::string& name) {
  auto collective = support::collective_from_string(name);
  if (!collective)
    throw support::InputError(
        support::SourceLocation{"command line", 0, 0, "--collective"},
        "unknown collective '" + name + "' (allgather, reducescatter, allreduce)");
  return *collective;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

sim::Model parse_model(const std::string& name) {
  const auto model = sim::model_from_string(name);
  if (!model)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--model"},
                              "unknown model '" + name + "' (alpha-beta or flow)");
  return *model;
}

std::string unsupported_diagnostic(const support::UnsupportedError& error) {
  if (!error.where().file.empty()) return error.what();
  const char* flag =
      error.subject() == support::UnsupportedError::Subject::collective ? "--collective" : "--topo";
  return support::format_diagnostic(support::SourceLocation{"command line", 0, 0, flag},
                                    error.message());
}

std::string option_diagnostic(const support::OptionError& error) {
  std::string flag = "--" + error.option();
  std::replace(flag.begin(), flag.end(), '_', '-');
  return support::format_diagnostic(
      support::SourceLocation{error.file().empty() ? "command line" : error.file(), 0, 0, flag},
      error.message());
}

namespace {

// Whether a file's text is a schedule (JSON or MSCCL XML) rather than a DSL program.
bool holds_schedule(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  return first != std::string::npos && (text[first] == '{' || text[first] == '<');
}

}  // namespace

schedule::Schedule load_schedule(const std::string& path, const topology::Topology& topology,
                                 support::Collective collective, bool* compiled) {
  const std::string text = support::read_text_file(path);
  const bool program = !holds_schedule(text);
  if (compiled) *compiled = program;
  if (program) {
    compiler::CompileOptions options;
    options.collective = collective;
    return compiler::compile_program(text, path, topology, options).schedule;
  }
  schedule::Schedule schedule = schedule::read_schedule_file(path);
  if (!schedule.topology.empty() && schedule.topology != topology.name())
    throw support::InputError(support::SourceLocation{path, 0, 0, "topology"},
                              "the schedule's routes are for topology '" + schedule.topology +
                                  "', not '" + topology.name() + "'");
  const auto verdict = schedule::verify_schedule(schedule, &topology);
  if (!verdict.ok())
    throw support::InputError(support::SourceLocation{path, 0, 0, {}},
                              "verification failed:\n" + verdict.summary());
  return schedule;
}

void with_program_diagnostics(const std::function<void()>& body) {
  try {
    body();
  } catch (const dsl::DslError& e) {
    const std::string rendered = e.render();
    throw support::InputError(e.where(), rendered.substr(rendered.find("error: ") + 7));
  }
}

}  // namespace optiflow::cli
