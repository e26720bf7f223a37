// The compiler driver: walks the pass table (pass_table.hpp), timing each pass, checking the
// plan after those that change its structure, and keeping the compile within its time limit.
#include "optiflow/compiler/compiler.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/support/error.hpp"
#include "pass_table.hpp"

namespace optiflow::compiler {
namespace {

using Clock = std::chrono::steady_clock;

// The limits as this collective and time limit make them.
EvalLimits limits_for(const CompileOptions& options, Clock::time_point start) {
  EvalLimits limits = options.limits;
  limits.phases = options.collective == support::Collective::all_reduce ? 2 : 1;
  if (options.time_limit_s > 0)
    limits.deadline =
        std::min(limits.deadline, start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(options.time_limit_s)));
  return limits;
}

// Throws InternalError when `pass` left a plan that check_plan rejects; passes that change
// only values it does not look at are not checked.
void check_after(const passes::PassInfo& pass, const passes::CompileState& state) {
  using passes::Changes;
  if (pass.changes != Changes::structure && pass.changes != Changes::routes) return;
  const std::string problem =
      passes::check_plan(state.plan, pass.changes == Changes::routes ? &state.topology : nullptr);
  if (!problem.empty())
    throw InternalError("after pass '" + std::string(pass.name) + "': " + problem);
}

}  // namespace

std::vector<PassReport> passes::run_passes(std::span<const PassInfo> table, CompileState& state,
                                           Clock::time_point deadline) {
  std::vector<PassReport> reports;
  std::size_t transfers = 0;  // what the plan held after the last pass that changed it
  for (const PassInfo& pass : table) {
    if (pass.enabled != nullptr && !pass.enabled(state.options)) continue;
    if (Clock::now() > deadline)
      throw TimeLimitError(state.text.source, "compiling exceeds its time limit (before pass '" +
                                                  std::string(pass.name) + "', with " +
                                                  std::to_string(transfers) + " transfers)");
    const auto start = Clock::now();
    pass.run(state);
    const std::chrono::duration<double, std::milli> spent = Clock::now() - start;
    if (pass.changes != Changes::none) transfers = state.plan.transfers.size();
    reports.push_back(PassReport{std::string(pass.name), spent.count(), transfers});
    check_after(pass, state);
  }
  return reports;
}

Compilation compile(const dsl::Program& program, const topology::Topology& topology,
                    const CompileOptions& options, const std::string& source,
                    const std::string& text) {
  const EvalLimits limits = limits_for(options, Clock::now());
  passes::CompileState state{program, topology, options, limits, {source, text}};
  std::vector<PassReport> reports = passes::run_passes(passes::kPasses, state, limits.deadline);
  state.release_plan();
  Compilation result = std::move(state.result);
  result.passes = std::move(reports);
  return result;
}

Compilation compile_program(std::string_view text, const std::string& source,
                            const topology::Topology& topology, const CompileOptions& options) {
  const dsl::Program program = dsl::parse_program(text, source);
  CompileOptions named = options;
  if (named.name.empty()) named.name = std::filesystem::path(source).stem().string();
  return compile(program, topology, named, source, std::string(text));
}

}  // namespace optiflow::compiler
