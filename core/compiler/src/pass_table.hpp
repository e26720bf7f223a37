// The compiler's passes as one named, ordered table (docs/compiler.md), and the runner that
// walks it: what each pass reads and makes is in CompileState, what it may break is in its
// Changes.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "optiflow/compiler/compiler.hpp"
#include "passes.hpp"

namespace optiflow::compiler::passes {

/// One compile's inputs, the plan the passes transform, and what the last passes make of it.
struct CompileState {
  CompileState(const dsl::Program& program_in, const topology::Topology& topology_in,
               const CompileOptions& options_in, const EvalLimits& limits_in, ProgramText text_in)
      : program(program_in),
        topology(topology_in),
        options(options_in),
        limits(limits_in),
        text(text_in) {}

  const dsl::Program& program;
  const topology::Topology& topology;
  const CompileOptions& options;
  const EvalLimits& limits;  ///< options.limits as the collective and time limit make them
  ProgramText text;
  Plan plan;
  /// The protocol per size, set by the protocols pass.
  std::vector<std::pair<std::uint64_t, topology::Protocol>> protocols;
  /// The schedule (set by emit) and, with CompileOptions::keep_plan, the plan it came from.
  Compilation result;
  bool plan_released = false;

  /// Hands the plan to the caller (CompileOptions::keep_plan) or frees it; later calls do
  /// nothing. Verification calls it first, so that it has the plan's memory to itself.
  void release_plan() {
    if (plan_released) return;
    plan_released = true;
    if (options.keep_plan) result.plan = std::move(plan);
    plan = Plan{};
  }
};

/// What a pass may change of the plan, and so what the runner checks after it.
enum class Changes {
  none,       ///< reads the plan and makes something else of it: no check
  values,     ///< fills in values check_plan does not look at (chunks, times, channels): none
  structure,  ///< transfers, their ranks, data or dependencies: check_plan without routes
  routes,     ///< the routes: check_plan against the topology too
};

/// One pass: its name (as PassReport and `optiflow compile --passes` show it), its entry
/// point, what it changes, and whether these options run it.
struct PassInfo {
  std::string_view name;
  void (*run)(CompileState&);
  Changes changes;
  std::string_view summary;
  bool (*enabled)(const CompileOptions&) = nullptr;  ///< nullptr: always
};

// Each pass's entry point, in its own file under passes/.
void expand_pass(CompileState& state);
void pipeline_pass(CompileState& state);
void mirror_pass(CompileState& state);
void chunks_pass(CompileState& state);
void coalesce_pass(CompileState& state);
void route_pass(CompileState& state);
void order_pass(CompileState& state);
void channels_pass(CompileState& state);
void protocols_pass(CompileState& state);
void emit_pass(CompileState& state);
void verify_pass(CompileState& state);
/// Whether verify runs: CompileOptions::verify.
bool verifying(const CompileOptions& options);

/// The compiler, in order.
inline constexpr std::array<PassInfo, 11> kPasses{{
    {"expand", &expand_pass, Changes::structure, "runs the program: the All-Gather's transfers"},
    {"pipeline", &pipeline_pass, Changes::structure, "cuts each transfer into pipeline slices"},
    {"mirror", &mirror_pass, Changes::structure,
     "the Reduce-Scatter in reverse, or it then the All-Gather"},
    {"chunks", &chunks_pass, Changes::values, "fractions of the buffer become chunk indices"},
    {"coalesce", &coalesce_pass, Changes::structure,
     "merges contiguous chunks one round sends between two ranks"},
    {"route", &route_pass, Changes::routes, "the links each transfer crosses"},
    {"order", &order_pass, Changes::values, "estimated start and finish: list scheduling"},
    {"channels", &channels_pass, Changes::values, "pieces and slices round-robin over channels"},
    {"protocols", &protocols_pass, Changes::none, "the cheapest protocol per size"},
    {"emit", &emit_pass, Changes::none, "the schedule IR"},
    {"verify", &verify_pass, Changes::none, "verify_schedule on what emit made", &verifying},
}};

/// Runs the enabled passes of `table` in order on `state`: none starts past `deadline`
/// (support::InputError), each is timed, and the plan is checked after each that changes its
/// structure or routes (InternalError naming the pass). Returns a report per pass run.
std::vector<PassReport> run_passes(std::span<const PassInfo> table, CompileState& state,
                                   std::chrono::steady_clock::time_point deadline);

}  // namespace optiflow::compiler::passes
