// The evaluator cascade for one candidate: parse -> compile (which verifies) -> simulate at
// every size. Pure functions of their inputs, so batches run on all cores.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optiflow/compiler/limits.hpp"
#include "optiflow/dsl/ast.hpp"
#include "optiflow/explore/sweep.hpp"
#include "optiflow/propose/proposer.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::explore {

struct Compiled {
  bool ok = false;
  std::string diagnostics;  ///< when !ok: the first error, as the compiler printed it
  double compile_ms = 0;
  schedule::Schedule schedule;  ///< dropped (see light()) once no longer needed
  std::string schedule_hash;    ///< schedule::schedule_hash, computed without the JSON text
  std::int64_t chunks = 0, steps = 0;

  /// A copy without the schedule: what remembering a result needs.
  Compiled light() const;
};

struct Simulated {
  std::vector<support::SizeResult> results;                  ///< per size, with its bound
  std::vector<propose::LinkNote> busiest_links, idle_links;  ///< at the largest size
  std::string critical_path;  ///< at the smallest and the largest size (Parent::critical_path)
};

/// A proposal, parsed once for the whole cascade.
struct Parsed {
  std::string canonical;  ///< printed from the syntax tree: identifies and stores the program
  std::optional<dsl::Program> program;  ///< nullopt when it does not parse
  std::string diagnostics;              ///< the parser's message when it does not
};

/// Parses `source`. The tree's positions point into `canonical`, where the diagnostics of the
/// stored program must point: a proposal already in canonical form (the offline proposer
/// prints its trees) is parsed once; any other is parsed again from its canonical text.
Parsed parse_candidate(const std::string& source);

/// What one candidate's compile may spend. Proposals come from a model and may be hostile, and
/// candidates compile side by side on every core, so each gets a bounded share: about 1.5 GB
/// (the compiler needs some 360 bytes per transfer at most) and a minute.
struct CandidateBudget {
  compiler::EvalLimits limits = candidate_limits();
  double time_limit_s = 60;

  static compiler::EvalLimits candidate_limits() {
    compiler::EvalLimits limits;
    limits.max_transfers = std::size_t{1} << 22;
    return limits;
  }
};

/// Compiles (and verifies) one candidate within `budget`. Never throws for what the candidate
/// does: a rejection, an exceeded budget or even a compiler bug is recorded in `diagnostics`.
Compiled compile_candidate(const Parsed& parsed, const topology::Topology& topology,
                           support::Collective collective, const CandidateBudget& budget = {});

/// Simulates a compiled candidate at every size of `reference`, with what a proposer is shown
/// of where its time goes.
Simulated simulate_candidate(const schedule::Schedule& schedule, const topology::Topology& topology,
                             const Reference& reference);

}  // namespace optiflow::explore
