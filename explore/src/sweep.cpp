// The bound and NCCL's pick per size, and the sweep of a schedule against them.
#include "optiflow/explore/sweep.hpp"

#include <algorithm>
#include <stdexcept>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"

namespace optiflow::explore {
namespace {

// NCCL's tuner's pick at each size; its rows are by ascending size, without repeats.
std::vector<propose::NcclAtSize> nccl_picks(const baselines::BaselineRun& nccl,
                                            const std::vector<std::uint64_t>& sizes) {
  std::vector<propose::NcclAtSize> picks;
  for (std::uint64_t size : sizes) {
    const auto row = std::find_if(nccl.rows.begin(), nccl.rows.end(),
                                  [&](const auto& r) { return r.size_bytes == size; });
    if (row == nccl.rows.end())
      throw std::logic_error("the NCCL baseline has no row for a size of the study");
    picks.push_back(propose::NcclAtSize{
        row->sim.time_us, row->algorithm + "/" + std::string(topology::to_string(row->protocol))});
  }
  return picks;
}

}  // namespace

Reference Reference::compute(const topology::Topology& topology, support::Collective collective,
                             std::vector<std::uint64_t> sizes, const sim::SimOptions& options) {
  Reference ref;
  ref.sizes = std::move(sizes);
  const auto bound = topology::LowerBound::compute(topology, collective);
  for (std::uint64_t size : ref.sizes) ref.bound_us.push_back(bound.at(size).time_us);
  try {
    ref.nccl = nccl_picks(baselines::run_baseline("nccl", topology, collective, ref.sizes, options),
                          ref.sizes);
  } catch (const support::UnsupportedError& e) {
    ref.nccl_missing = e.what();
  }
  return ref;
}

std::vector<sim::SimResult> sweep(const sim::Simulator& simulator, const Reference& reference) {
  std::vector<sim::SimResult> results = simulator.sweep(reference.sizes);
  for (std::size_t s = 0; s < results.size(); ++s) results[s].bound_us = reference.bound_us[s];
  return results;
}

std::vector<std::uint64_t> sizes_or_default(std::vector<std::uint64_t> sizes) {
  return sizes.empty() ? support::parse_sizes(support::kDefaultSizes) : sizes;
}

}  // namespace optiflow::explore
