// The schedule verifier: proves that a schedule implements its collective in every execution
// order, as docs/schedule-ir.md ("Verification") specifies, before anything else uses it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "optiflow/schedule/schedule.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::schedule {

/// What verify_schedule found. Every message names the rank, and where it applies the thread
/// block, the step and the chunk; a wrong schedule can yield thousands of errors, so only the
/// first kMaxReported keep their text and all are counted.
struct VerifyResult {
  static constexpr std::size_t kMaxReported = 20;

  /// At most kMaxReported messages in the order found, which puts causes before effects:
  /// structure, then execution (in execution order), races ("race on rank R's output chunk C:
  /// <step> reads it and <step> writes it, ..."), deadlock, unreceived messages, and last the
  /// collective's postcondition.
  std::vector<std::string> errors;
  std::size_t error_count = 0;     ///< all errors found, reported or not
  std::size_t steps_executed = 0;  ///< 0 when structural errors prevented execution

  bool ok() const { return error_count == 0; }
  /// The errors joined by newlines, plus "... and N more" when some were not kept.
  std::string summary() const;
};

/// Proves `schedule` implements its collective (allgather, reducescatter or allreduce; others
/// are reported as unsupported) in every order its steps may run in: structural checks first,
/// and only if they pass, symbolic execution in one order, a check that no two accesses to a
/// chunk (one of them a write) are left unordered, so that every order computes the same, and
/// the postcondition, chunk by chunk. With `topology`, also checks that
/// ranks == topology.rank_count() and that every non-empty route is a contiguous path of
/// existing links from gpu_of_rank(r) to gpu_of_rank(peer). Never throws for bad input.
VerifyResult verify_schedule(const Schedule& schedule,
                             const topology::Topology* topology = nullptr);

}  // namespace optiflow::schedule
