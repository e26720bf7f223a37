// `optiflow fidelity --db DB --topo T [--json]`: every stored hardware result simulated on T and
// set against what it measured: |error|, Kendall tau and the pick's regret per (collective,
// ranks, size) (docs/fidelity.md).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "measured_runs.hpp"
#include "optiflow/sim/fidelity.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::cli {
namespace {

struct FidelityArgs {
  std::vector<std::string> databases;
  std::string topology, model = "alpha-beta";
  MeasuredFilter filter;
  bool json = false;
};

struct Points {
  std::vector<sim::FidelityPoint> points;
  std::size_t other_ranks = 0;  // schedules left out: not as many ranks as the topology
};

// Schedules routed for another topology take the cheapest paths of this one.
Points simulate_measured(const std::vector<sim::MeasuredSchedule>& measured,
                         const topology::Topology& topo, sim::Model model) {
  Points out;
  for (const sim::MeasuredSchedule& m : measured) {
    if (m.schedule.ranks != topo.rank_count()) {
      ++out.other_ranks;
      continue;
    }
    const schedule::Schedule s =
        m.schedule.topology == topo.name() ? m.schedule : schedule::without_routes(m.schedule);
    sim::SimOptions options;
    options.model = model;
    const sim::Simulator simulator(topo, s, options);
    for (const auto& [size, time] : m.times_us)
      out.points.push_back(sim::FidelityPoint{s.collective, s.ranks, size, m.schedule.name,
                                              simulator.run(size).time_us, time});
  }
  return out;
}

nlohmann::json report_json(const FidelityArgs& args, const Points& p,
                           const sim::FidelityReport& r) {
  nlohmann::json groups = nlohmann::json::array();
  for (const sim::GroupFidelity& g : r.groups)
    groups.push_back({{"collective", support::to_string(g.collective)},
                      {"ranks", g.ranks},
                      {"size_bytes", g.size_bytes},
                      {"schedules", g.schedules},
                      {"kendall_tau", g.kendall_tau},
                      {"simulator_pick", g.simulator_pick},
                      {"measured_best", g.measured_best},
                      {"regret", g.regret}});
  nlohmann::json points = nlohmann::json::array();
  for (const sim::FidelityPoint& q : p.points)
    points.push_back({{"schedule", q.schedule},
                      {"collective", support::to_string(q.collective)},
                      {"ranks", q.ranks},
                      {"size_bytes", q.size_bytes},
                      {"simulated_us", q.simulated_us},
                      {"measured_us", q.measured_us}});
  return {{"topology", args.topology},
          {"model", args.model},
          {"points", r.points},
          {"schedules_of_other_rank_counts", p.other_ranks},
          {"median_abs_error", r.median_error},
          {"worst_abs_error", r.worst_error},
          {"groups", r.groups.size()},
          {"median_kendall_tau", r.median_tau},
          {"picks_best", r.picks_best},
          {"picks_within_10pct", r.picks_within_tol},
          {"median_regret", r.median_regret},
          {"worst_regret", r.worst_regret},
          {"by_group", std::move(groups)},
          {"by_point", std::move(points)}};
}

void print_report(const topology::Topology& topo, const Points& p, const sim::FidelityReport& r) {
  std::cout << strprintf("%-14s %5s %8s %6s %7s  %-28s %-28s %7s\n", "collective", "ranks", "size",
                         "scheds", "tau", "simulator's pick", "measured best", "regret");
  for (const sim::GroupFidelity& g : r.groups)
    std::cout << strprintf("%-14s %5d %8s %6zu %+7.2f  %-28s %-28s %6.2fx\n",
                           std::string(support::to_string(g.collective)).c_str(), g.ranks,
                           support::format_size(g.size_bytes).c_str(), g.schedules, g.kendall_tau,
                           g.simulator_pick.c_str(), g.measured_best.c_str(), g.regret);
  std::cout << r.points << " points on " << topo.name() << ": " << fidelity_summary(r) << "\n";
  if (p.other_ranks > 0)
    std::cout << p.other_ranks << " schedules of other rank counts than " << topo.rank_count()
              << " left out\n";
}

void fidelity(const FidelityArgs& args) {
  const topology::Topology topo = topology::load_topology(args.topology);
  const auto model = sim::model_from_string(args.model);
  if (!model)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--model"},
                              "unknown model '" + args.model + "' (alpha-beta|flow)");
  const Points p = simulate_measured(read_measured(args.databases, args.filter), topo, *model);
  if (p.points.empty())
    throw support::InputError(
        support::SourceLocation{args.databases.front(), 0, 0, "hw_results"},
        "no hardware result on " + std::to_string(topo.rank_count()) + " ranks to compare with");
  const sim::FidelityReport report = sim::fidelity(p.points);
  if (args.json)
    std::cout << report_json(args, p, report).dump(2) << "\n";
  else
    print_report(topo, p, report);
}

}  // namespace

void add_fidelity_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "fidelity",
      "Simulate every stored hardware result and compare: |error|, Kendall tau and the "
      "simulator's pick per (collective, ranks, size)");
  auto args = std::make_shared<FidelityArgs>();
  cmd->add_option("--db", args->databases, "SQLite database with hardware results (repeatable)")
      ->required();
  cmd->add_option("--topo", args->topology, "topology to simulate on (built-in or JSON)")
      ->required();
  cmd->add_option("--model", args->model, "alpha-beta or flow")->capture_default_str();
  cmd->add_option("--backend", args->filter.backend, "only results of this backend");
  cmd->add_option("--only", args->filter.only, "only schedules whose name matches (glob)");
  cmd->add_option("--exclude", args->filter.exclude, "leave out schedules matching (glob)");
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args] { fidelity(*args); });
}

}  // namespace optiflow::cli
