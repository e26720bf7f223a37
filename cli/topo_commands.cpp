// `optiflow topo list | show | import-nccl | vary`.
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/nccl_topo_xml.hpp"
#include "optiflow/topology/topology_io.hpp"
#include "optiflow/topology/topology_summary.hpp"
#include "optiflow/topology/variation.hpp"

namespace optiflow::cli {
namespace {

using topology::Topology;
constexpr std::uint64_t kShowSize = std::uint64_t{1} << 30;

void print_list() {
  std::cout << strprintf("%-18s %-18s %s\n", "NAME", "EXAMPLE", "DESCRIPTION");
  for (const auto& family : topology::builtin_families())
    std::cout << strprintf("%-18s %-18s %s\n", family.pattern.c_str(), family.example.c_str(),
                           family.description.c_str());
  std::cout << "\nAny topology JSON file (docs/formats.md) may be given wherever T is asked.\n";
}

nlohmann::json summary_json(const Topology& topo, const topology::TopologySummary& s,
                            const topology::BoundAtSize& bound) {
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : s.link_classes)
    classes.push_back({{"kind", topology::to_string(c.kind)},
                       {"bw_GBps", c.bw_GBps},
                       {"alpha_us", c.alpha_us},
                       {"count", c.count}});
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : s.gpu_bandwidth)
    gpus.push_back(
        {{"ranks", g.ranks}, {"ingress_GBps", g.ingress_GBps}, {"egress_GBps", g.egress_GBps}});
  nlohmann::json deviant = nlohmann::json::array();
  for (const auto& d : s.deviant_links)
    deviant.push_back({{"from", d.from},
                       {"to", d.to},
                       {"both_ways", d.both_ways},
                       {"kind", topology::to_string(d.kind)},
                       {"bw_GBps", d.bw_GBps},
                       {"class_bw_GBps", d.class_bw_GBps},
                       {"ranks", d.ranks}});
  return {{"ranks", s.ranks},
          {"hosts", s.hosts},
          {"nodes", {{"gpu", s.gpus}, {"nic", s.nics}, {"switch", s.switches}, {"cpu", s.cpus}}},
          {"link_classes", classes},
          {"gpu_bandwidth", gpus},
          {"deviant_links", deviant},
          {"allgather_bound_1GiB",
           {{"size_bytes", bound.size_bytes},
            {"time_us", bound.time_us},
            {"algbw_GBps", bound.algbw_GBps},
            {"busbw_GBps", bound.busbw_GBps}}},
          {"name", topo.name()}};
}

void print_show(const Topology& topo, const topology::TopologySummary& s,
                const topology::LowerBound& bound) {
  std::cout << strprintf(
      "topology %s: %d ranks on %d host%s; nodes: %d gpu, %d nic, %d switch, "
      "%d cpu; %zu directed links\n",
      topo.name().c_str(), s.ranks, s.hosts, s.hosts == 1 ? "" : "s", s.gpus, s.nics, s.switches,
      s.cpus, topo.link_count());
  std::cout << "\nlink classes (directed links):\n";
  std::cout << strprintf("  %-9s %10s %9s %7s\n", "KIND", "GB/s", "alpha us", "COUNT");
  for (const auto& c : s.link_classes)
    std::cout << strprintf(
        "  %-9s %10s %9s %7d\n", std::string(topology::to_string(c.kind)).c_str(),
        compact_number(c.bw_GBps).c_str(), compact_number(c.alpha_us).c_str(), c.count);
  std::cout << "\nper-GPU link bandwidth:\n";
  std::cout << strprintf("  %-24s %12s %12s\n", "RANKS", "ingress GB/s", "egress GB/s");
  for (const auto& g : s.gpu_bandwidth)
    std::cout << strprintf("  %-24s %12s %12s\n", g.ranks.c_str(),
                           compact_number(g.ingress_GBps).c_str(),
                           compact_number(g.egress_GBps).c_str());
  if (!s.deviant_links.empty()) {
    std::cout << "\nlinks that deviate from their class (same kind and latency):\n";
    for (const auto& d : s.deviant_links) std::cout << "  " << d.describe() << "\n";
  }
  const auto at = bound.at(kShowSize);
  const auto& cut = bound.phases().front().cut;
  std::cout << strprintf(
      "\nallgather lower bound at 1 GiB: %.1f us (algbw %.2f GB/s, busbw %.2f GB/s)\n", at.time_us,
      at.algbw_GBps, at.busbw_GBps);
  std::cout << strprintf("  bottleneck: the data of %s (%d of %d) leaves through %s GB/s\n",
                         topology::describe_gpus(topo, cut.inside).c_str(), cut.gpus_inside,
                         s.ranks, compact_number(cut.out_bw_GBps).c_str());
}

void add_list(CLI::App& topo) {
  auto* list = topo.add_subcommand("list", "List the built-in topologies");
  list->callback(print_list);
}

void add_show(CLI::App& topo) {
  auto* show = topo.add_subcommand("show", "Describe a topology: links, bandwidth, lower bound");
  auto name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  show->add_option("T", *name, "built-in name or topology JSON file")->required();
  show->add_flag("--json", *json,
                 "print the topology JSON (docs/formats.md) with a \"summary\" object");
  show->callback([name, json] {
    const Topology topo = topology::load_topology(*name);
    const auto summary = topology::summarize(topo);
    const auto bound = topology::LowerBound::compute(topo, support::Collective::all_gather);
    if (*json) {
      auto doc = nlohmann::json::parse(topology::write_topology_json(topo));
      doc["summary"] = summary_json(topo, summary, bound.at(kShowSize));
      std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      print_show(topo, summary, bound);
    }
  });
}

void add_import_nccl(CLI::App& topo) {
  auto* cmd = topo.add_subcommand("import-nccl",
                                  "Convert an NCCL topology XML (NCCL_TOPO_FILE) to topology JSON");
  struct Args {
    std::string file, out;
    topology::NcclImportOptions options;
    double nic_GBps = 0, nvswitch_GBps = 0;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("FILE", args->file, "NCCL topology XML")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", args->out, "topology JSON to write")->required();
  cmd->add_option("--hosts", args->options.hosts, "replicate the host this many times")
      ->check(CLI::Range(1, 8192));
  cmd->add_option("--nic-GBps", args->nic_GBps,
                  "speed of every NIC in GB/s, overriding <net speed> and the GPU-generation "
                  "default")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--nvswitch-GBps", args->nvswitch_GBps,
                  "add an NVSwitch at this per-GPU bandwidth when the XML lists no NVLink "
                  "(e.g. 240 for A100, 370.8 for H100)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--name", args->options.name, "topology name (default: the file's stem)");
  cmd->callback([args] {
    if (args->nic_GBps > 0) args->options.nic_GBps = args->nic_GBps;
    if (args->nvswitch_GBps > 0) args->options.nvswitch_GBps = args->nvswitch_GBps;
    const auto result = topology::read_nccl_topology_file(args->file, args->options);
    for (const auto& note : result.notes) std::cerr << "note: " << note << "\n";
    support::write_text_file(args->out, topology::write_topology_json(result.topology));
    std::cout << strprintf("wrote %s: %d ranks, %zu nodes, %zu directed links\n", args->out.c_str(),
                           result.topology.rank_count(), result.topology.node_count(),
                           result.topology.link_count());
  });
}

void add_vary(CLI::App& topo) {
  auto* cmd = topo.add_subcommand(
      "vary",
      "Draw production faults on a topology: slow NICs and NVLinks, failed links, "
      "oversubscribed spines, missing GPUs (the GPUs stay connected)");
  struct Args {
    std::string name, out;
    std::uint64_t seed = 1;
    int faults = 1;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("T", args->name, "built-in name or topology JSON file")->required();
  cmd->add_option("--seed", args->seed, "random seed (the same seed draws the same faults)");
  cmd->add_option("--faults", args->faults, "how many faults")->check(CLI::Range(0, 1000));
  cmd->add_option("-o,--output", args->out, "topology JSON to write")->required();
  cmd->callback([args] {
    const auto varied =
        topology::draw_faults(topology::load_topology(args->name), args->seed, args->faults);
    support::write_text_file(args->out, topology::write_topology_json(varied.topology));
    std::cout << strprintf("wrote %s: %s, %d ranks\n", args->out.c_str(),
                           varied.topology.name().c_str(), varied.topology.rank_count());
    for (const auto& f : varied.faults)
      std::cout << strprintf("  %-20s %s\n", std::string(topology::to_string(f.kind)).c_str(),
                             f.description.c_str());
  });
}

}  // namespace

void add_topo_commands(CLI::App& app) {
  auto* topo = app.add_subcommand("topo", "Topologies: list, show, import, vary");
  topo->require_subcommand(1);
  add_list(*topo);
  add_show(*topo);
  add_import_nccl(*topo);
  add_vary(*topo);
}

}  // namespace optiflow::cli
