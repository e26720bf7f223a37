// `optiflow bound`: the lower bound per buffer size, with the algbw/busbw it allows.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/topology_io.hpp"
#include "optiflow/topology/topology_summary.hpp"

namespace optiflow::cli {
namespace {

struct BoundArgs {
  std::string topology;
  std::string collective = "allgather";
  std::string sizes = support::kDefaultSizes;
  bool json = false;
};

nlohmann::json cut_json(const topology::Topology& topo, const topology::PhaseBound& phase) {
  nlohmann::json path_latency;
  for (topology::Protocol p : topology::kProtocols)
    path_latency[std::string(topology::to_string(p))] =
        phase.path_latency_us(topology::protocol_costs(topo, p));
  return {{"gpus_inside", phase.cut.gpus_inside},
          {"ranks_inside", topology::describe_gpus(topo, phase.cut.inside)},
          {"out_bw_GBps", phase.cut.out_bw_GBps},
          {"min_alpha_us", phase.cut.min_alpha_us},
          {"latency_us", phase.latency_us},
          {"path_latency_us", path_latency}};
}

void run_bound(const BoundArgs& args) {
  const support::Collective collective = parse_collective(args.collective);
  const auto sizes = support::parse_sizes(args.sizes);
  const topology::Topology topo = topology::load_topology(args.topology);
  const auto bound = topology::LowerBound::compute(topo, collective);

  if (args.json) {
    nlohmann::json results = nlohmann::json::array();
    for (auto size : sizes) {
      const auto at = bound.at(size);
      results.push_back({{"size_bytes", size},
                         {"time_us", at.time_us},
                         {"algbw_GBps", at.algbw_GBps},
                         {"busbw_GBps", at.busbw_GBps},
                         {"bandwidth_us", at.bandwidth_us},
                         {"latency_us", at.latency_us}});
    }
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& phase : bound.phases()) phases.push_back(cut_json(topo, phase));
    const nlohmann::json doc{{"topology", topo.name()},
                             {"collective", support::to_string(collective)},
                             {"ranks", topo.rank_count()},
                             {"phases", phases},
                             {"results", results}};
    std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }

  std::cout << strprintf("lower bound for %s on %s (%d ranks)\n",
                         std::string(support::to_string(collective)).c_str(), topo.name().c_str(),
                         topo.rank_count());
  for (const auto& phase : bound.phases())
    std::cout << strprintf(
        "  bottleneck: data of %s leaves through %s GB/s (%s of %d GPUs); "
        "worst path %s us of alpha, %s us with LL's step latency\n",
        topology::describe_gpus(topo, phase.cut.inside).c_str(),
        compact_number(phase.cut.out_bw_GBps).c_str(),
        std::to_string(phase.cut.gpus_inside).c_str(), topo.rank_count(),
        compact_number(phase.latency_us).c_str(),
        compact_number(
            phase.path_latency_us(topology::protocol_costs(topo, topology::Protocol::ll)))
            .c_str());
  std::cout << strprintf("\n%10s %14s %14s %12s %12s\n", "size", "time_us", "bw-term_us",
                         "algbw GB/s", "busbw GB/s");
  for (auto size : sizes) {
    const auto at = bound.at(size);
    std::cout << strprintf("%10s %14.3f %14.3f %12.3f %12.3f\n", support::format_size(size).c_str(),
                           at.time_us, at.bandwidth_us, at.algbw_GBps, at.busbw_GBps);
  }
}

}  // namespace

void add_bound_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bound", "Lower bound on collective time per buffer size");
  auto args = std::make_shared<BoundArgs>();
  cmd->add_option("--topo", args->topology, "built-in name or topology JSON file")->required();
  cmd->add_option("--collective", args->collective, "allgather | reducescatter | allreduce")
      ->capture_default_str();
  cmd->add_option("--sizes", args->sizes, "sizes per rank: 1M, 1K:1G, 4K,64M")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args] { run_bound(*args); });
}

}  // namespace optiflow::cli
