// Runs every rank of a schedule in this process over the loopback network: the executor's
// logic without MPI, so each collective and step kind can be checked in milliseconds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/hw_runner/executor.hpp"
#include "optiflow/hw_runner/transport.hpp"
#include "optiflow/schedule/flat_schedule.hpp"

namespace optiflow::hw_runner::testing_support {

struct InProcessRun {
  bool finished = false;
  std::uint64_t wrong = 0;
  std::string waiting;  ///< what rank 0's unfinished blocks wait for, when stuck
};

inline InProcessRun run_in_process(const schedule::Schedule& schedule, std::uint64_t size_bytes,
                                   int executions = 1, ExecutorOptions options = {}) {
  const schedule::FlatSchedule flat(schedule);
  LoopbackNetwork network(schedule.ranks);
  std::vector<std::unique_ptr<RankBuffers>> buffers;
  std::vector<std::unique_ptr<RankExecutor>> executors;
  for (int r = 0; r < schedule.ranks; ++r) {
    buffers.push_back(std::make_unique<RankBuffers>(BufferLayout::of(schedule, r, size_bytes)));
    executors.push_back(
        std::make_unique<RankExecutor>(flat, r, *buffers.back(), network.endpoint(r), options));
  }
  InProcessRun run;
  for (int e = 0; e < executions; ++e) {
    // Reductions in place consume their input: each execution starts from fresh data.
    for (auto& rank_buffers : buffers) rank_buffers->fill();
    for (auto& executor : executors) executor->start();
    // Round-robin until every rank is done; a schedule that cannot finish stops changing.
    bool all_done = false;
    for (int pass = 0; pass < 100000 && !all_done; ++pass) {
      all_done = true;
      for (auto& executor : executors) all_done = executor->progress() && all_done;
    }
    if (!all_done) {
      for (std::size_t r = 0; r < executors.size(); ++r)
        if (!executors[r]->finished()) {
          run.waiting = "rank " + std::to_string(r) + ": " + executors[r]->waiting_on();
          break;
        }
      return run;
    }
  }
  run.finished = true;
  for (auto& rank_buffers : buffers) run.wrong += rank_buffers->count_wrong();
  return run;
}

}  // namespace optiflow::hw_runner::testing_support
