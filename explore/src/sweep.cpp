// The bound and NCCL's pick per size, and the sweep of a schedule against them.
#include "optiflow/explore/sweep.hpp"

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"

namespace optiflow::explore {

Reference Reference::compute(const topology::Topology& topology, support::Collective collective,
                             std::vector<std::uint64_t> sizes, const sim::SimOptions& options) {
  Reference ref;
  ref.sizes = std::move(sizes);
  const auto bound = topology::LowerBound::compute(topology, collective);
  for (std::uint64_t size : ref.sizes) ref.bound_us.push_back(bound.at(size).time_us);
  try {
    baselines::BaselineRun nccl =
        baselines::run_baseline("nccl", topology, collective, ref.sizes, options);
    for (std::uint64_t size : ref.sizes) {
      const baselines::BaselineRow& row = nccl.row_at(size);
      ref.nccl.push_back(propose::NcclAtSize{
          row.sim.time_us, row.algorithm + "/" + std::string(topology::to_string(row.protocol))});
      // The schedule is the largest size's algorithm: it stands for the sizes that run it.
      ref.nccl_results.push_back(row.algorithm == nccl.rows.back().algorithm
                                     ? static_cast<const support::SizeResult&>(row.sim)
                                     : support::SizeResult{});
    }
    ref.nccl_schedule = std::make_shared<const schedule::Schedule>(std::move(nccl.schedule));
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
