#include "optiflow/baselines/baseline.hpp"

#include <algorithm>
#include <array>

#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::baselines {
namespace {

// `nccl` is what NCCL's tuner picks per size; for All-Gather on GPUs that share a node that is
// always a ring (PAT needs one GPU per node, NVLS and CollNet are not modelled), so `nccl` and
// `nccl-ring` differ only where the tuner has another algorithm to choose.
constexpr std::array<std::string_view, 2> kNames{"nccl", "nccl-ring"};

[[noreturn]] void unknown(std::string_view name) {
  std::string known;
  for (std::string_view n : kNames) known += (known.empty() ? "" : ", ") + std::string(n);
  throw support::InputError(support::SourceLocation{"command line", 0, 0, "baseline"},
                            "unknown baseline '" + std::string(name) + "' (built: " + known +
                                "; taccl, teccl and forestcoll are not built yet)");
}

// The protocol per size as the tuner picks it, merged into ascending ranges.
void set_protocols(schedule::Schedule& schedule, const std::vector<BaselineRow>& rows) {
  schedule.protocol_by_size.clear();
  if (rows.empty()) return;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i)
    if (rows[i].protocol != rows[i + 1].protocol)
      schedule.protocol_by_size.push_back(
          {rows[i].size_bytes, std::string(topology::to_string(rows[i].protocol))});
  schedule.protocol = std::string(topology::to_string(rows.back().protocol));
}

}  // namespace

std::span<const std::string_view> baseline_names() {
  return kNames;
}

BaselineRun run_baseline(std::string_view name, const topology::Topology& topology,
                         support::Collective collective, std::span<const std::uint64_t> sizes,
                         sim::SimOptions options) {
  if (std::find(kNames.begin(), kNames.end(), name) == kNames.end()) unknown(name);
  BaselineRun run;
  run.name = std::string(name);
  const NcclRingGraph graph = nccl_ring_graph(topology);
  run.notes = graph.notes;
  run.schedule = nccl_ring_schedule(graph, collective, topology.name());
  run.schedule.name = run.name;
  const schedule::VerifyResult verdict = schedule::verify_schedule(run.schedule, &topology);
  if (!verdict.ok())
    throw support::InputError(support::SourceLocation{run.name, 0, 0, {}},
                              "the baseline's schedule fails verification: " + verdict.summary());
  std::vector<std::uint64_t> ascending(sizes.begin(), sizes.end());
  std::sort(ascending.begin(), ascending.end());
  ascending.erase(std::unique(ascending.begin(), ascending.end()), ascending.end());
  for (std::uint64_t size : ascending) {
    const NcclEstimate pick = nccl_tuner_pick(graph, collective, size);
    BaselineRow row;
    row.size_bytes = size;
    row.algorithm = std::string(to_string(pick.algorithm));
    row.protocol = options.protocol.value_or(pick.protocol);
    row.channels = graph.channels;
    row.model_us = pick.time_us;
    run.rows.push_back(std::move(row));
  }
  set_protocols(run.schedule, run.rows);
  const sim::Simulator simulator(topology, run.schedule, options);
  for (BaselineRow& row : run.rows) row.sim = simulator.run(row.size_bytes);
  return run;
}

}  // namespace optiflow::baselines
