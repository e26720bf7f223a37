#include "optiflow/baselines/baseline.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <stdexcept>

#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::baselines {
namespace {

// `nccl` is what NCCL's tuner picks per size among the algorithms built here: ring; tree for
// All-Reduce; PAT for All-Gather with one GPU per node. NVLS and CollNet are not modelled.
struct Known {
  std::string_view name;
  std::vector<NcclAlgorithm> algorithms;
};
const std::array<Known, 5>& known() {
  static const std::array<Known, 5> table{
      {{"nccl", {NcclAlgorithm::ring, NcclAlgorithm::tree, NcclAlgorithm::pat}},
       {"nccl-ring", {NcclAlgorithm::ring}},
       {"nccl-tree", {NcclAlgorithm::tree}},
       {"nccl-pat", {NcclAlgorithm::pat}},
       {"pat-hierarchical", {NcclAlgorithm::pat_hierarchical}}}};
  return table;
}

// The synthesizers: a solver builds one schedule, whatever the size.
struct Synthesizer {
  std::string_view name;
  Synthesized (*synthesize)(const topology::Topology&, support::Collective,
                            const SynthesisOptions&);
};
const std::array<Synthesizer, 3>& synthesizers() {
  static const std::array<Synthesizer, 3> table{{{"forestcoll", forestcoll_synthesize},
                                                 {"taccl", taccl_synthesize},
                                                 {"teccl", teccl_synthesize}}};
  return table;
}

std::optional<NcclEstimate> estimate(NcclAlgorithm algorithm, const NcclRingGraph& graph,
                                     support::Collective collective, topology::Protocol protocol,
                                     std::uint64_t bytes) {
  switch (algorithm) {
    case NcclAlgorithm::tree:
      return nccl_tree_estimate(graph, collective, protocol, bytes);
    case NcclAlgorithm::pat:
      return nccl_pat_estimate(graph, collective, protocol, bytes);
    case NcclAlgorithm::pat_hierarchical:  // not NCCL's: no model, Simple as PAT
      if (protocol != topology::Protocol::simple || collective != support::Collective::all_gather)
        return std::nullopt;
      return NcclEstimate{algorithm, protocol, 0, 0, 0};
    case NcclAlgorithm::ring:
      break;
  }
  return nccl_ring_estimate(graph, collective, protocol, bytes);
}

schedule::Schedule build_schedule(NcclAlgorithm algorithm, const NcclRingGraph& graph,
                                  const topology::Topology& topology,
                                  support::Collective collective) {
  switch (algorithm) {
    case NcclAlgorithm::tree:
      return nccl_tree_schedule(nccl_trees(graph, topology), graph.ranks, collective,
                                topology.name());
    case NcclAlgorithm::pat:
      return nccl_pat_schedule(graph, collective, topology.name());
    case NcclAlgorithm::pat_hierarchical:
      return hierarchical_pat_schedule(topology, collective);
    case NcclAlgorithm::ring:
      break;
  }
  return nccl_ring_schedule(graph, collective, topology.name());
}

// The schedule's protocol at the sizes where `algorithm` runs, as the tuner picked it.
void set_protocols(schedule::Schedule& schedule, std::string_view algorithm,
                   const std::vector<BaselineRow>& rows) {
  std::vector<std::pair<std::uint64_t, std::string_view>> per_size;
  for (const BaselineRow& row : rows)
    if (row.algorithm == algorithm)
      per_size.emplace_back(row.size_bytes, topology::to_string(row.protocol));
  schedule::set_protocol_by_size(schedule, per_size);
}

}  // namespace

const BaselineRow& BaselineRun::row_at(std::uint64_t size_bytes) const {
  const auto row = std::find_if(rows.begin(), rows.end(),
                                [&](const BaselineRow& r) { return r.size_bytes == size_bytes; });
  if (row == rows.end())
    throw std::logic_error("baseline " + name + " has no row for " + std::to_string(size_bytes) +
                           " bytes");
  return *row;
}

std::span<const std::string_view> baseline_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> all;
    for (const Known& k : known()) all.push_back(k.name);
    for (const Synthesizer& k : synthesizers()) all.push_back(k.name);
    return all;
  }();
  return names;
}

bool is_synthesizer(std::string_view name) {
  return std::any_of(synthesizers().begin(), synthesizers().end(),
                     [&](const Synthesizer& k) { return k.name == name; });
}

bool is_baseline(std::string_view name) {
  const auto names = baseline_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string baseline_list() {
  std::string list;
  for (std::string_view name : baseline_names())
    list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

namespace {

[[noreturn]] void unknown(std::string_view name) {
  throw support::InputError(
      support::SourceLocation{"command line", 0, 0, "baseline"},
      "unknown baseline '" + std::string(name) + "' (built: " + baseline_list() + ")");
}

void check_verified(const schedule::Schedule& s, const topology::Topology& topology,
                    const std::string& name) {
  const schedule::VerifyResult verdict = schedule::verify_schedule(s, &topology);
  if (!verdict.ok())
    throw support::InputError(support::SourceLocation{name, 0, 0, {}},
                              "the baseline's schedule fails verification: " + verdict.summary());
}

std::vector<std::uint64_t> ascending_unique(std::span<const std::uint64_t> sizes) {
  std::vector<std::uint64_t> ascending(sizes.begin(), sizes.end());
  std::sort(ascending.begin(), ascending.end());
  ascending.erase(std::unique(ascending.begin(), ascending.end()), ascending.end());
  return ascending;
}

}  // namespace

// The real tools leave the protocol to the user, who would pick the fastest per size.
BaselineRun run_synthesized(std::string_view name, Synthesized built,
                            const topology::Topology& topology,
                            std::span<const std::uint64_t> requested_sizes,
                            const sim::SimOptions& options) {
  const std::vector<std::uint64_t> sizes = ascending_unique(requested_sizes);
  BaselineRun run;
  run.name = std::string(name);
  run.notes = std::move(built.notes);
  run.solver = std::move(built.solver);
  built.schedule.name = run.name;
  check_verified(built.schedule, topology, run.name);
  std::vector<topology::Protocol> protocols(topology::kProtocols.begin(),
                                            topology::kProtocols.end());
  if (options.protocol) protocols = {*options.protocol};
  std::vector<sim::Simulator> simulators;
  for (topology::Protocol protocol : protocols) {
    sim::SimOptions fixed = options;
    fixed.protocol = protocol;
    simulators.emplace_back(topology, built.schedule, fixed);
  }
  int channels = 0;
  for (const auto& program : built.schedule.programs)
    for (const auto& tb : program.tbs) channels = std::max(channels, tb.channel + 1);
  std::vector<std::pair<std::uint64_t, std::string_view>> per_size;
  for (std::uint64_t size : sizes) {
    BaselineRow row;
    row.size_bytes = size;
    row.algorithm = run.name;
    row.channels = channels;
    for (std::size_t p = 0; p < simulators.size(); ++p) {
      sim::SimResult result = simulators[p].run(size);
      if (p == 0 || result.time_us < row.sim.time_us) {
        row.sim = std::move(result);
        row.protocol = protocols[p];
      }
    }
    per_size.emplace_back(size, topology::to_string(row.protocol));
    run.rows.push_back(std::move(row));
  }
  schedule::set_protocol_by_size(built.schedule, per_size);
  run.schedule = std::move(built.schedule);
  return run;
}

BaselineRun run_baseline(std::string_view name, const topology::Topology& topology,
                         support::Collective collective, std::span<const std::uint64_t> sizes,
                         sim::SimOptions options, const SynthesisOptions& synthesis) {
  if (const auto synthesizer = std::find_if(synthesizers().begin(), synthesizers().end(),
                                            [&](const Synthesizer& k) { return k.name == name; });
      synthesizer != synthesizers().end())
    return run_synthesized(synthesizer->name,
                           synthesizer->synthesize(topology, collective, synthesis), topology,
                           sizes, options);
  const auto entry =
      std::find_if(known().begin(), known().end(), [&](const Known& k) { return k.name == name; });
  if (entry == known().end()) unknown(name);
  BaselineRun run;
  run.name = std::string(name);
  const NcclRingGraph graph = nccl_ring_graph(topology);
  run.notes = graph.notes;
  if (name == "pat-hierarchical")
    run.notes = {
        "not an NCCL algorithm: PAT across nodes among each rail's GPUs, then a direct "
        "exchange inside each node (NCCL runs PAT only with one GPU per node)"};

  const std::vector<std::uint64_t> ascending = ascending_unique(sizes);
  std::vector<NcclAlgorithm> picked;  // per row
  for (std::uint64_t size : ascending) {
    std::optional<NcclEstimate> best;
    for (NcclAlgorithm algorithm : entry->algorithms)
      for (topology::Protocol protocol : topology::kProtocols)
        if (auto e = estimate(algorithm, graph, collective, protocol, size);
            e && (!best || e->time_us < best->time_us))
          best = e;
    if (!best)
      throw support::UnsupportedError(support::UnsupportedError::Subject::collective,
                                      run.name + " does not run " +
                                          std::string(support::to_string(collective)) + " on " +
                                          topology.name() +
                                          " (the tree runs allreduce; PAT allgather with one GPU "
                                          "per node on a power-of-two number of ranks)");
    BaselineRow row;
    row.size_bytes = size;
    row.algorithm = std::string(to_string(best->algorithm));
    row.protocol = options.protocol.value_or(best->protocol);
    const bool pat =
        best->algorithm == NcclAlgorithm::pat || best->algorithm == NcclAlgorithm::pat_hierarchical;
    row.channels = pat ? 1 : graph.channels;
    if (best->algorithm != NcclAlgorithm::pat_hierarchical) row.model_us = best->time_us;
    run.rows.push_back(std::move(row));
    picked.push_back(best->algorithm);
  }

  // One verified schedule per algorithm the rows use, simulated at its rows' sizes.
  std::map<std::string, schedule::Schedule> schedules;
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    const std::string& algorithm = run.rows[i].algorithm;
    if (schedules.contains(algorithm)) continue;
    schedule::Schedule s = build_schedule(picked[i], graph, topology, collective);
    s.name = run.name;
    check_verified(s, topology, run.name);
    set_protocols(s, algorithm, run.rows);
    schedules.emplace(algorithm, std::move(s));
  }
  std::map<std::string, sim::Simulator> simulators;
  for (const auto& [algorithm, s] : schedules)
    simulators.emplace(algorithm, sim::Simulator(topology, s, options));
  for (BaselineRow& row : run.rows) row.sim = simulators.at(row.algorithm).run(row.size_bytes);
  if (schedules.size() > 1)
    run.notes.push_back(
        "the tuner runs different algorithms at different sizes; -o writes the "
        "largest size's (" +
        run.rows.back().algorithm + ")");
  run.schedule = std::move(schedules.at(run.rows.back().algorithm));
  return run;
}

}  // namespace optiflow::baselines
