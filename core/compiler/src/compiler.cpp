// The compiler driver: runs the passes in order, times them, checks the plan after each, and
// keeps the compile within its time limit.
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

using Clock = std::chrono::steady_clock;

/// What a pass changes, and so what check_plan looks at after it: passes that only fill in
/// values it does not check (chunk indices, times, channels) skip it.
enum class Changes { values, structure, routes };

class PassRunner {
 public:
  PassRunner(const std::string& source, const topology::Topology& topology,
             Clock::time_point deadline)
      : source_(source), topology_(topology), deadline_(deadline) {}

  /// Runs `work` as pass `name` over `transfers` transfers and returns what it returns.
  template <typename Work>
  auto timed(const std::string& name, std::size_t transfers, Work work) {
    if (Clock::now() > deadline_)
      throw support::InputError(support::SourceLocation{source_, 0, 0, {}},
                                "compiling exceeds its time limit (before pass '" + name +
                                    "', with " + std::to_string(transfers) + " transfers)");
    const auto start = Clock::now();
    auto result = work();
    const std::chrono::duration<double, std::milli> spent = Clock::now() - start;
    reports_.push_back(PassReport{name, spent.count(), transfers});
    return result;
  }

  /// Runs `pass` on `plan`, records its time, and checks what it may have broken.
  void run(const std::string& name, Plan& plan, const std::function<void(Plan&)>& pass,
           Changes changes = Changes::structure) {
    timed(name, plan.transfers.size(), [&] {
      pass(plan);
      return 0;
    });
    reports_.back().transfers = plan.transfers.size();
    if (changes == Changes::values) return;
    const std::string problem =
        passes::check_plan(plan, changes == Changes::routes ? &topology_ : nullptr);
    if (!problem.empty()) throw InternalError("after pass '" + name + "': " + problem);
  }

  std::vector<PassReport> take_reports() { return std::move(reports_); }

 private:
  const std::string& source_;
  const topology::Topology& topology_;
  Clock::time_point deadline_;
  std::vector<PassReport> reports_;
};

Plan mirror_for(support::Collective collective, Plan plan, const EvalLimits& limits,
                const passes::ProgramText& program) {
  switch (collective) {
    case support::Collective::all_gather:
      return plan;
    case support::Collective::reduce_scatter:
      return passes::mirror_reduce_scatter(plan);
    case support::Collective::all_reduce:
      return passes::all_reduce(plan, limits, program);
    default:
      throw support::InputError(
          support::SourceLocation{program.source, 0, 0, "--collective"},
          "programs compile to allgather, reducescatter and allreduce; not to " +
              std::string(to_string(collective)));
  }
}

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

}  // namespace

Compilation compile(const dsl::Program& program, const topology::Topology& topology,
                    const CompileOptions& options, const std::string& source,
                    const std::string& text) {
  const EvalLimits limits = limits_for(options, Clock::now());
  const passes::ProgramText program_text{source, text};
  PassRunner runner(source, topology, limits.deadline);
  Plan plan;
  runner.run("expand", plan,
             [&](Plan& p) { p = evaluate(program, topology, source, text, limits); });
  runner.run("pipeline", plan, passes::pipeline);
  runner.run("mirror", plan, [&](Plan& p) {
    p = mirror_for(options.collective, std::move(p), limits, program_text);
  });
  runner.run(
      "chunks", plan, [&](Plan& p) { passes::assign_chunks(p, limits.max_chunks); },
      Changes::values);
  runner.run("coalesce", plan, passes::coalesce);
  runner.run(
      "route", plan, [&](Plan& p) { passes::route(p, topology, program_text); }, Changes::routes);
  runner.run(
      "order", plan, [&](Plan& p) { passes::order(p, topology, options.reference_size_bytes); },
      Changes::values);
  runner.run("channels", plan, passes::assign_channels, Changes::values);
  const auto protocols = runner.timed("protocols", plan.transfers.size(), [&] {
    return passes::choose_protocols(plan, topology, options.reference_size_bytes);
  });

  Compilation result;
  const std::string name = options.name.empty() ? "optiflow" : options.name;
  const std::size_t transfers = plan.transfers.size();
  result.schedule = runner.timed("emit", transfers, [&] {
    return passes::emit(plan, options.collective, name, topology.name());
  });
  std::vector<std::pair<std::uint64_t, std::string_view>> named;
  for (const auto& [size, protocol] : protocols)
    named.emplace_back(size, topology::to_string(protocol));
  schedule::set_protocol_by_size(result.schedule, named);
  if (options.keep_plan) result.plan = std::move(plan);
  plan = Plan{};  // verification gets the memory the plan held
  if (options.verify) {
    const schedule::VerifyResult verdict = runner.timed(
        "verify", transfers, [&] { return schedule::verify_schedule(result.schedule, &topology); });
    if (!verdict.ok())
      throw InternalError("the schedule compiled from " + source +
                          " fails verification: " + verdict.summary());
  }
  result.passes = runner.take_reports();
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
