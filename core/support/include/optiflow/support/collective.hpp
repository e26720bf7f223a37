// The collectives OptiFlow knows, their names, and the nccl-tests bus-bandwidth factors.
#pragma once

#include <optional>
#include <string_view>

namespace optiflow::support {

enum class Collective { all_gather, reduce_scatter, all_reduce, broadcast, reduce, all_to_all };

/// Canonical names as in MSCCL XML and nccl-tests: allgather, reducescatter, allreduce,
/// broadcast, reduce, alltoall.
std::string_view to_string(Collective collective);
/// Accepts the canonical names and common spellings (all-gather, all_gather, ag, rs, ar, ...).
std::optional<Collective> collective_from_string(std::string_view name);

/// busbw = algbw * factor (nccl-tests PERFORMANCE.md): (N-1)/N for All-Gather, Reduce-Scatter
/// and All-to-All, 2(N-1)/N for All-Reduce, 1 for Broadcast and Reduce.
double busbw_factor(Collective collective, int ranks);

}  // namespace optiflow::support
