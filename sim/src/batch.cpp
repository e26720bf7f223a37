// Many candidates on all cores. Each candidate is independent and deterministic, so the
// parallel results equal the serial ones; workers take candidates by index.
#include <atomic>
#include <exception>
#include <thread>

#include "optiflow/sim/simulator.hpp"

namespace optiflow::sim {

std::vector<std::vector<SimResult>> simulate_all(const topology::Topology& topology,
                                                 std::span<const Candidate> candidates,
                                                 const SimOptions& options, unsigned threads) {
  std::vector<std::vector<SimResult>> results(candidates.size());
  std::vector<std::exception_ptr> errors(candidates.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < candidates.size(); i = next++) {
      try {
        results[i] =
            Simulator(topology, *candidates[i].schedule, options).sweep(candidates[i].sizes);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::jthread> pool;
  for (unsigned t = 1; t < threads && t < candidates.size(); ++t) pool.emplace_back(work);
  work();
  pool.clear();
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
  return results;
}

}  // namespace optiflow::sim
