// `optiflow baseline NAME --topo T`: a contender built as the real system builds it, verified
// and simulated at every size like any schedule, with what it chose per size.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/baselines/baseline.hpp"
#include "optiflow/baselines/taccl.hpp"
#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/taccl_topology.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::cli {
namespace {

struct BaselineArgs {
  std::string name, topology, collective = "allgather", sizes = support::kDefaultSizes,
                              model = "alpha-beta";
  std::string output, msccl_xml, taccl_topology;
  bool json = false;
  baselines::SynthesisOptions synthesis;
  std::string teccl_mode = "auto", teccl_epoch = "auto";
};

baselines::TecclMode parse_teccl_mode(const std::string& mode) {
  if (mode == "milp") return baselines::TecclMode::milp;
  if (mode == "lp") return baselines::TecclMode::lp;
  if (mode == "astar") return baselines::TecclMode::astar;
  throw support::InputError(support::SourceLocation{"command line", 0, 0, "--teccl-mode"},
                            "unknown TE-CCL mode '" + mode + "' (auto, milp, lp or astar)");
}

void print_table(const topology::Topology& topo, const baselines::BaselineRun& run,
                 const BaselineArgs& args, const topology::LowerBound& bound) {
  std::cout << strprintf("%s on %s, %s model (%d ranks, %d chunks, %zu steps)\n", run.name.c_str(),
                         topo.name().c_str(), args.model.c_str(), run.schedule.ranks,
                         run.schedule.chunks, run.schedule.step_count());
  for (const std::string& note : run.notes) std::cout << "  " << note << "\n";
  if (run.solver) std::cout << "  solver: " << run.solver->summary() << "\n";
  std::cout << strprintf("%10s %6s %7s %4s %12s %12s %12s %9s\n", "size", "algo", "proto", "ch",
                         "time_us", "busbw GB/s", "nccl model", "x bound");
  for (const auto& row : run.rows) {
    const std::string model = row.model_us ? strprintf("%12.3f", *row.model_us) : "           -";
    std::cout << strprintf("%10s %6s %7s %4d %12.3f %12.3f %s %9.3f\n",
                           support::format_size(row.size_bytes).c_str(), row.algorithm.c_str(),
                           std::string(topology::to_string(row.protocol)).c_str(), row.channels,
                           row.sim.time_us, row.sim.busbw_GBps, model.c_str(),
                           row.sim.time_us / bound.at(row.size_bytes).time_us);
  }
  std::cout
      << "\ntime_us: simulated; nccl model: the time NCCL's own tuner predicts for its pick\n";
}

// The topology: a built-in name or our JSON (--topo), or TACCL's topology JSON (--taccl-topo)
// for as many nodes as the sketch names, whose own costs the taccl baseline then uses.
topology::Topology load_baseline_topology(const BaselineArgs& args,
                                          baselines::SynthesisOptions& synthesis) {
  if (args.topology.empty() == args.taccl_topology.empty())
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--topo"},
                              "give exactly one of --topo T and --taccl-topo FILE");
  if (args.taccl_topology.empty()) return topology::load_topology(args.topology);
  const int nodes = args.synthesis.taccl_sketch.empty()
                        ? 1
                        : baselines::read_taccl_sketch(args.synthesis.taccl_sketch).nnodes;
  topology::TacclTopology taccl = topology::read_taccl_topology(args.taccl_topology, nodes);
  synthesis.taccl_profile = std::move(taccl.profile);
  return std::move(taccl.topology);
}

void run_baseline_command(const BaselineArgs& args) {
  baselines::SynthesisOptions synthesis = args.synthesis;
  const topology::Topology topo = load_baseline_topology(args, synthesis);
  const support::Collective collective = parse_collective(args.collective);
  sim::SimOptions options;
  options.model = parse_model(args.model);
  const auto sizes = support::parse_sizes(args.sizes);
  if (args.teccl_mode != "auto") synthesis.teccl_mode = parse_teccl_mode(args.teccl_mode);
  if (args.teccl_epoch != "auto" && args.teccl_epoch != "fastest" && args.teccl_epoch != "slowest")
    throw support::InputError(
        support::SourceLocation{"command line", 0, 0, "--teccl-epoch"},
        "--teccl-epoch is auto, fastest or slowest, not '" + args.teccl_epoch + "'");
  if (args.name == "teccl" && synthesis.teccl_chunks < 0)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--teccl-chunks"},
                              "--teccl-chunks must be 0 (the default) or more");
  if (synthesis.taccl_chunks < 0)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--taccl-chunks"},
                              "--taccl-chunks must be 0 (the sketch's input_chunkup) or more");
  if (synthesis.taccl_instances < 1)
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--taccl-instances"},
                              "--taccl-instances must be 1 or more");
  if (args.teccl_epoch != "auto")
    synthesis.teccl_epoch = args.teccl_epoch == "fastest" ? baselines::TecclEpoch::fastest
                                                          : baselines::TecclEpoch::slowest;
  synthesis.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  const baselines::BaselineRun run =
      baselines::run_baseline(args.name, topo, collective, sizes, options, synthesis);
  if (!args.output.empty())
    write_text_file(args.output, schedule::write_schedule_json(run.schedule));
  if (!args.msccl_xml.empty())
    write_text_file(args.msccl_xml, schedule::write_msccl_xml(run.schedule));
  const auto bound = topology::LowerBound::compute(topo, collective);
  if (!args.json) return print_table(topo, run, args, bound);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : run.rows) {
    nlohmann::json entry = simulation_row(row.sim, bound);
    entry["algorithm"] = row.algorithm;
    entry["channels"] = row.channels;
    entry["nccl_model_us"] = row.model_us ? nlohmann::json(*row.model_us) : nullptr;
    rows.push_back(std::move(entry));
  }
  nlohmann::json extra{{"notes", run.notes}};
  if (run.solver)
    extra["solver"] = {{"solver", run.solver->solver},
                       {"status", run.solver->status},
                       {"gap", run.solver->gap ? nlohmann::json(*run.solver->gap) : nullptr},
                       {"synthesis_s", run.solver->seconds}};
  print_simulation_json(topo.name(), collective, args.model, run.name, std::move(rows),
                        std::move(extra));
}

}  // namespace

void add_baseline_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "baseline",
      "Build a contender (nccl: NCCL's tuner pick; nccl-ring, nccl-tree, nccl-pat; "
      "pat-hierarchical, not NCCL's; the synthesizers forestcoll, taccl, teccl), verify and "
      "simulate it");
  auto args = std::make_shared<BaselineArgs>();
  cmd->add_option("NAME", args->name, baselines::baseline_list())->required();
  cmd->add_option("--topo", args->topology, "built-in name or topology JSON file");
  cmd->add_option("--taccl-topo", args->taccl_topology,
                  "TACCL's topology JSON instead of --topo, for the sketch's number of nodes "
                  "(taccl then uses its costs)");
  cmd->add_option("--collective", args->collective, "allgather | reducescatter | allreduce")
      ->capture_default_str();
  cmd->add_option("--sizes", args->sizes, "sizes: 1M, 1K:1G, 4K,64M")->capture_default_str();
  cmd->add_option("--model", args->model, "alpha-beta | flow")->capture_default_str();
  cmd->add_option("-o,--output", args->output, "write the schedule JSON here");
  cmd->add_option("--msccl-xml", args->msccl_xml, "write MSCCL XML here");
  cmd->add_flag("--json", args->json, "print the simulation JSON, with each size's choice");
  cmd->add_option("--time-limit", args->synthesis.time_limit_s,
                  "synthesizers: seconds per solver call (the best solution so far is kept)")
      ->capture_default_str();
  cmd->add_option("--gap", args->synthesis.gap_limit,
                  "synthesizers: stop a MIP at this relative gap (0.01 = 1%)")
      ->capture_default_str();
  cmd->add_option("--max-nodes", args->synthesis.max_nodes,
                  "synthesizers: stop a MIP after this many branch-and-bound nodes (a limit "
                  "whose schedule does not depend on the machine)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--sketch", args->synthesis.taccl_sketch,
                  "taccl: TACCL's communication sketch JSON (default: derived from the topology)");
  cmd->add_option("--taccl-chunks", args->synthesis.taccl_chunks,
                  "taccl: chunks per GPU, the sketch's input_chunkup (0: the sketch's)")
      ->capture_default_str();
  cmd->add_option("--taccl-instances", args->synthesis.taccl_instances,
                  "taccl: instances, the schedule replicated on channels of its own")
      ->capture_default_str();
  cmd->add_option("--teccl-mode", args->teccl_mode,
                  "teccl: auto | milp | lp | astar (auto: milp on one host, astar across hosts)")
      ->capture_default_str();
  cmd->add_option("--teccl-epoch", args->teccl_epoch,
                  "teccl: the link that sets the epoch length, auto | fastest | slowest (auto: "
                  "fastest on one "
                  "host, slowest across hosts)")
      ->capture_default_str();
  cmd->add_option("--teccl-chunks", args->synthesis.teccl_chunks,
                  "teccl: chunks per GPU (0: the synthesizer's default)")
      ->capture_default_str();
  cmd->callback([args] { with_program_diagnostics([&] { run_baseline_command(*args); }); });
}

}  // namespace optiflow::cli
