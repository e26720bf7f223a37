// `optiflow sim (PROG|SCHED.json|MSCCL.xml) --topo T`: simulate at every size, against the bound.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::cli {
namespace {

struct SimArgs {
  std::string input, topology, collective = "allgather", sizes = support::kDefaultSizes,
                               model = "alpha-beta";
  std::string timeline;
  bool json = false;
};

nlohmann::json timeline_json(const topology::Topology& topo, const sim::SimResult& r) {
  nlohmann::json transfers = nlohmann::json::array();
  for (const auto& t : r.timeline) {
    nlohmann::json route = nlohmann::json::array();
    for (auto l : t.route)
      route.push_back(topo.node(topo.link(l).src).id + "->" + topo.node(topo.link(l).dst).id);
    transfers.push_back({{"rank", t.rank},
                         {"tb", t.tb},
                         {"step", t.step},
                         {"peer", t.peer},
                         {"start_us", t.start_us},
                         {"end_us", t.end_us},
                         {"bytes", t.bytes},
                         {"route", route}});
  }
  return {{"size_bytes", r.size_bytes}, {"time_us", r.time_us}, {"transfers", transfers}};
}

void print_table(const topology::Topology& topo, const schedule::Schedule& s, const SimArgs& args,
                 const std::vector<sim::SimResult>& results, const topology::LowerBound& bound) {
  std::cout << strprintf("%s on %s, %s model (%d ranks, %d chunks, %zu steps)\n", s.name.c_str(),
                         topo.name().c_str(), args.model.c_str(), s.ranks, s.chunks,
                         s.step_count());
  std::cout << strprintf("%10s %7s %14s %12s %12s %9s\n", "size", "proto", "time_us", "algbw GB/s",
                         "busbw GB/s", "x bound");
  for (const auto& r : results)
    std::cout << strprintf("%10s %7s %14.3f %12.3f %12.3f %9.3f\n",
                           support::format_size(r.size_bytes).c_str(),
                           std::string(topology::to_string(r.protocol)).c_str(), r.time_us,
                           r.algbw_GBps, r.busbw_GBps, r.time_us / bound.at(r.size_bytes).time_us);
  const auto& last = results.back();
  std::vector<sim::LinkUsage> busiest = last.links;
  std::stable_sort(busiest.begin(), busiest.end(),
                   [](const auto& a, const auto& b) { return a.utilisation > b.utilisation; });
  std::cout << strprintf("\nat %s: critical path of %zu steps; busiest links:\n",
                         support::format_size(last.size_bytes).c_str(), last.critical_path.size());
  for (std::size_t i = 0; i < std::min<std::size_t>(5, busiest.size()); ++i) {
    const topology::Link& l = topo.link(busiest[i].link);
    std::cout << strprintf("  %-28s %6.1f%% of %s GB/s\n",
                           (topo.node(l.src).id + " -> " + topo.node(l.dst).id).c_str(),
                           100 * busiest[i].utilisation, compact_number(l.bw_GBps).c_str());
  }
}

void run_sim(const SimArgs& args) {
  const topology::Topology topo = topology::load_topology(args.topology);
  const support::Collective collective = parse_collective(args.collective);
  const auto sizes = support::parse_sizes(args.sizes);
  const schedule::Schedule schedule = load_schedule(args.input, topo, collective);
  sim::SimOptions options;
  options.model = parse_model(args.model);
  options.record_timeline = !args.timeline.empty();
  const sim::Simulator simulator(topo, schedule, options);
  const auto results = simulator.sweep(sizes);
  const auto bound = topology::LowerBound::compute(topo, schedule.collective);

  if (!args.timeline.empty()) {
    nlohmann::json doc = {{"topology", topo.name()},
                          {"schedule", schedule.name},
                          {"model", args.model},
                          {"sizes", nlohmann::json::array()}};
    for (const auto& r : results) doc["sizes"].push_back(timeline_json(topo, r));
    write_text_file(args.timeline,
                    doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  if (!args.json) return print_table(topo, schedule, args, results, bound);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) rows.push_back(simulation_row(r, bound));
  print_simulation_json(topo.name(), schedule.collective, args.model, schedule.name,
                        std::move(rows));
}

}  // namespace

void add_sim_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("sim", "Simulate a program or schedule at every size");
  auto args = std::make_shared<SimArgs>();
  cmd->add_option("INPUT", args->input, "DSL program, schedule JSON or MSCCL XML")->required();
  cmd->add_option("--topo", args->topology, "built-in name or topology JSON file")->required();
  cmd->add_option("--collective", args->collective,
                  "for a DSL program: allgather | reducescatter | allreduce")
      ->capture_default_str();
  cmd->add_option("--sizes", args->sizes, "sizes per rank: 1M, 1K:1G, 4K,64M")
      ->capture_default_str();
  cmd->add_option("--model", args->model, "alpha-beta | flow")->capture_default_str();
  cmd->add_option("--timeline", args->timeline, "write every transfer's start and end (JSON)");
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args] { with_program_diagnostics([&] { run_sim(*args); }); });
}

}  // namespace optiflow::cli
