// The deterministic compiler: DSL program + topology -> verified schedule IR.
//
// Passes, each doing one thing, with a check of the plan after each that changes its structure
// (docs/compiler.md; their table is src/pass_table.hpp):
//   expand (dsl::evaluate) -> pipeline -> mirror (Reduce-Scatter / All-Reduce) -> chunks ->
//   coalesce -> route -> order -> channels -> protocols -> emit -> verify (verify_schedule).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "optiflow/compiler/limits.hpp"
#include "optiflow/compiler/plan.hpp"
#include "optiflow/dsl/ast.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::compiler {

struct CompileOptions {
  support::Collective collective = support::Collective::all_gather;
  /// The buffer size the list scheduler assumes when it orders transfers on links (the
  /// schedule itself is independent of size).
  std::uint64_t reference_size_bytes = std::uint64_t{1} << 30;
  /// What the compile may spend: transfers, pieces, chunks per buffer, work, time.
  /// `limits.phases` is set from the collective.
  EvalLimits limits;
  /// Wall-clock budget in seconds from the start of compile(); 0 = none. Tightens
  /// limits.deadline.
  double time_limit_s = 0;
  std::string name;  ///< schedule name; empty = "optiflow"
  /// Run the verifier on the emitted schedule (a failure is a compiler bug). Off only to
  /// measure the compiler alone.
  bool verify = true;
  /// Return the plan emit() consumed (routes, estimated times) in Compilation::plan; otherwise
  /// it is freed before verification, which then has the memory to itself.
  bool keep_plan = false;
};

/// How long one pass took and what it left, for `optiflow compile --passes`.
struct PassReport {
  std::string name;
  double millis = 0;
  std::size_t transfers = 0;
};

struct Compilation {
  schedule::Schedule schedule;
  Plan plan;  ///< with CompileOptions::keep_plan: the plan emit() consumed
  std::vector<PassReport> passes;
};

/// Compiles program text. Errors in the program, and programs that would exceed
/// options.limits, throw dsl::DslError (file:line:col, at the statement responsible), the time
/// limit too while the program is evaluated; a bad collective throws support::InputError, and
/// the time limit running out between passes TimeLimitError. A broken invariant of the
/// compiler, including a schedule the verifier rejects, throws InternalError.
Compilation compile_program(std::string_view text, const std::string& source,
                            const topology::Topology& topology, const CompileOptions& options = {});

/// The compiler after parsing. `text` only serves diagnostics.
Compilation compile(const dsl::Program& program, const topology::Topology& topology,
                    const CompileOptions& options, const std::string& source,
                    const std::string& text);

}  // namespace optiflow::compiler
