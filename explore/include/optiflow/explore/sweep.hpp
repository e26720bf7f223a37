// A schedule swept over buffer sizes against what every study reports beside it: the lower
// bound and what NCCL's tuner picks at each size. explore, compare and the GUI's editor all
// sweep through here, so their figures agree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optiflow/propose/proposer.hpp"
#include "optiflow/schedule/schedule.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::explore {

/// The sizes of a study and, at each, what its results are measured against.
struct Reference {
  std::vector<std::uint64_t> sizes;
  std::vector<double> bound_us;           ///< per size: the lower bound
  std::vector<propose::NcclAtSize> nccl;  ///< per size; empty where NCCL does not build
  std::string nccl_missing;               ///< why `nccl` is empty
  /// NCCL's schedule (its tuner's algorithm at the largest size; null where NCCL does not
  /// build), and per size its simulated result, time 0 where the tuner picks another algorithm.
  std::shared_ptr<const schedule::Schedule> nccl_schedule;
  std::vector<support::SizeResult> nccl_results;

  /// The bound and NCCL's pick (simulated with `options`) at each of `sizes`.
  static Reference compute(const topology::Topology& topology, support::Collective collective,
                           std::vector<std::uint64_t> sizes, const sim::SimOptions& options = {});
};

/// The schedule that `simulator` holds, run at every size of `reference`, each result with its
/// bound.
std::vector<sim::SimResult> sweep(const sim::Simulator& simulator, const Reference& reference);

/// support::kDefaultSizes when `sizes` is empty: the sizes of a study that names none.
std::vector<std::uint64_t> sizes_or_default(std::vector<std::uint64_t> sizes);

}  // namespace optiflow::explore
