// The compiler driver: runs the passes in order, times them, and checks the plan after each.
#include "optiflow/compiler/compiler.hpp"

#include <chrono>
#include <filesystem>
#include <functional>

#include "optiflow/compiler/evaluate.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"
#include "passes.hpp"

namespace optiflow::compiler {
namespace {

class PassRunner {
 public:
  PassRunner(const std::string& source, const topology::Topology& topology)
      : source_(source), topology_(topology) {}

  /// Runs `pass` on `plan`, records its time, and checks the plan it leaves.
  void run(const std::string& name, Plan& plan, const std::function<void(Plan&)>& pass,
           bool routed = false) {
    const auto start = std::chrono::steady_clock::now();
    pass(plan);
    const std::chrono::duration<double, std::milli> spent =
        std::chrono::steady_clock::now() - start;
    reports_.push_back(PassReport{name, spent.count(), plan.transfers.size()});
    const std::string problem = passes::check_plan(plan, routed ? &topology_ : nullptr);
    if (!problem.empty())
      throw support::InputError(support::SourceLocation{source_, 0, 0, {}},
                                "internal compiler error after pass '" + name + "': " + problem);
  }

  std::vector<PassReport> take_reports() { return std::move(reports_); }

 private:
  const std::string& source_;
  const topology::Topology& topology_;
  std::vector<PassReport> reports_;
};

Plan mirror_for(support::Collective collective, Plan plan, const std::string& source) {
  switch (collective) {
    case support::Collective::all_gather:
      return plan;
    case support::Collective::reduce_scatter:
      return passes::mirror_reduce_scatter(plan);
    case support::Collective::all_reduce:
      return passes::all_reduce(plan);
    default:
      throw support::InputError(
          support::SourceLocation{source, 0, 0, "--collective"},
          "programs compile to allgather, reducescatter and allreduce; not to " +
              std::string(to_string(collective)));
  }
}

}  // namespace

Compilation compile(const dsl::Program& program, const topology::Topology& topology,
                    const CompileOptions& options, const std::string& source,
                    const std::string& text) {
  PassRunner runner(source, topology);
  Plan plan;
  runner.run("expand", plan, [&](Plan& p) { p = evaluate(program, topology, source, text); });
  runner.run("pipeline", plan, passes::pipeline);
  runner.run("mirror", plan,
             [&](Plan& p) { p = mirror_for(options.collective, std::move(p), source); });
  runner.run("chunks", plan,
             [&](Plan& p) { passes::assign_chunks(p, options.max_chunks, source); });
  runner.run("coalesce", plan, passes::coalesce);
  runner.run(
      "route", plan, [&](Plan& p) { passes::route(p, topology, source); }, true);
  runner.run(
      "order", plan, [&](Plan& p) { passes::order(p, topology, options.reference_size_bytes); },
      true);
  runner.run("channels", plan, passes::assign_channels, true);

  Compilation result;
  const std::string name = options.name.empty() ? "optiflow" : options.name;
  const auto start = std::chrono::steady_clock::now();
  result.schedule = passes::emit(plan, options.collective, name, topology.name());
  const schedule::VerifyResult verdict = schedule::verify_schedule(result.schedule, &topology);
  const std::chrono::duration<double, std::milli> spent = std::chrono::steady_clock::now() - start;
  result.passes = runner.take_reports();
  result.passes.push_back(PassReport{"emit+verify", spent.count(), plan.transfers.size()});
  if (!verdict.ok())
    throw support::InputError(
        support::SourceLocation{source, 0, 0, {}},
        "internal compiler error: the schedule fails verification: " + verdict.summary());
  result.plan = std::move(plan);
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
