// Many candidates on all cores. Each candidate is independent and deterministic, so the
// parallel results equal the serial ones.
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/parallel.hpp"

namespace optiflow::sim {

std::vector<std::vector<SimResult>> simulate_all(const topology::Topology& topology,
                                                 std::span<const Candidate> candidates,
                                                 const SimOptions& options, unsigned threads) {
  std::vector<std::vector<SimResult>> results(candidates.size());
  support::parallel_for(candidates.size(), threads, [&](std::size_t i) {
    results[i] = Simulator(topology, *candidates[i].schedule, options).sweep(candidates[i].sizes);
  });
  return results;
}

}  // namespace optiflow::sim
