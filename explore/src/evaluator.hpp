// The evaluator cascade for one candidate: parse -> compile (which verifies) -> simulate at
// every size. Pure functions of their inputs, so batches run on all cores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optiflow/core/bounds.hpp"
#include "optiflow/core/schedule.hpp"
#include "optiflow/core/topology.hpp"
#include "optiflow/llm/proposer.hpp"

namespace optiflow::explore {

struct Compiled {
  bool ok = false;
  std::string diagnostics;  ///< when !ok: the first error, as the compiler printed it
  double compile_ms = 0;
  core::Schedule schedule;  ///< dropped (see light()) once no longer needed
  std::string schedule_json, schedule_hash;
  std::int64_t chunks = 0, steps = 0;

  /// A copy without the schedule and its JSON: what remembering a result needs.
  Compiled light() const;
};

struct Simulated {
  std::vector<double> time_us, algbw_GBps, busbw_GBps;   ///< per size
  std::vector<llm::LinkNote> busiest_links, idle_links;  ///< at the largest size
};

/// The program's canonical text (printed from its syntax tree), or nullopt-like empty string
/// with `diagnostics` set when it does not parse.
std::string canonical_program(const std::string& source, std::string& diagnostics);

Compiled compile_candidate(const std::string& canonical, const core::Topology& topology,
                           core::Collective collective);

Simulated simulate_candidate(const core::Schedule& schedule, const core::Topology& topology,
                             const std::vector<std::uint64_t>& sizes);

}  // namespace optiflow::explore
