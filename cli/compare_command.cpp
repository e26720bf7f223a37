// `optiflow compare`: contenders side by side per size, against the bound and NCCL.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/baselines/baseline.hpp"
#include "optiflow/explore/compare.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::cli {
namespace {

struct CompareArgs {
  explore::CompareOptions options;
  std::string collective = "allgather", sizes = support::kDefaultSizes, with = "ours,nccl",
              model = "alpha-beta";
  std::string plot, from;
  bool json = false, csv = false, no_store = false;
};

// A contender that is neither "ours" nor a baseline is a file: a program (compiled here, its
// compile time its synthesis time), a schedule JSON or an MSCCL XML file.
void load_files(CompareArgs& args, const topology::Topology& topo) {
  for (std::string& name : args.options.with) {
    if (name == "ours" || baselines::is_baseline(name)) continue;
    if (!std::filesystem::exists(name))
      throw support::InputError(support::SourceLocation{"command line", 0, 0, "--with"},
                                "'" + name + "' is neither ours, a baseline (" +
                                    baselines::baseline_list() + ") nor a file");
    const auto start = std::chrono::steady_clock::now();
    explore::ScheduleContender contender;
    bool program = false;
    with_program_diagnostics(
        [&] { contender.schedule = load_schedule(name, topo, args.options.collective, &program); });
    name = contender.name = std::filesystem::path(name).filename().string();
    contender.synthesis_s =
        program ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                : 0;
    contender.status = program ? "compiled from the program" : "read from the file";
    args.options.schedules.push_back(std::move(contender));
  }
}

void print_table(const explore::Comparison& c, const std::string& db) {
  std::cout << strprintf("compare %s on %s, %s model",
                         std::string(support::to_string(c.collective)).c_str(), c.topology.c_str(),
                         std::string(sim::to_string(c.model)).c_str());
  if (c.id > 0)
    std::cout << strprintf(" (comparison %lld in %s)", static_cast<long long>(c.id), db.c_str());
  std::cout << "\n\n" << strprintf("%-24s %12s  %s\n", "contender", "synthesis s", "how");
  for (const auto& k : c.contenders)
    std::cout << strprintf("%-24s %12.3f  %s\n", k.name.c_str(), k.synthesis_s, k.status.c_str());
  std::cout << strprintf("\n%8s %11s  %-24s %12s %11s %8s %8s  %s\n", "size", "bound us",
                         "contender", "time_us", "busbw GB/s", "x bound", "vs nccl", "choice");
  for (std::size_t s = 0; s < c.sizes.size(); ++s)
    for (std::size_t k = 0; k < c.contenders.size(); ++k) {
      const support::SizeResult& p = c.contenders[k].results[s];
      const std::string versus =
          s < c.nccl_us.size() ? strprintf("%7.2fx", c.nccl_us[s] / p.time_us) : "      -";
      std::cout << strprintf("%8s %11s  %-24s %12.3f %11.2f %8.3f %8s  %s\n",
                             k == 0 ? support::format_size(c.sizes[s]).c_str() : "",
                             k == 0 ? strprintf("%.3f", c.bound_us[s]).c_str() : "",
                             c.contenders[k].name.c_str(), p.time_us, p.busbw_GBps, p.x_bound(),
                             versus.c_str(), c.contenders[k].choices[s].c_str());
    }
  std::cout << "\nx bound: time / lower bound; vs nccl: NCCL's tuner's time over this one's "
               "(above 1: faster than NCCL), all in the same cost model.\n";
}

explore::Comparison run_contenders(CompareArgs& args) {
  const topology::Topology topo = topology::load_topology(args.options.topology);
  load_files(args, topo);
  return explore::compare(args.options);
}

void run_compare(CompareArgs& args) {
  args.options.collective = parse_collective(args.collective);
  args.options.sizes = support::parse_sizes(args.sizes);
  args.options.model = parse_model(args.model);
  args.options.with = split_list(args.with);
  args.options.store = !args.no_store;
  args.options.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  if (!args.plot.empty() && !args.plot.ends_with(".svg") && !args.plot.ends_with(".png"))
    throw support::InputError(support::SourceLocation{"command line", 0, 0, "--plot"},
                              "the plot is written as SVG or PNG: give a file name ending in "
                              ".svg or .png");
  const explore::Comparison c =
      args.from.empty() ? run_contenders(args)
                        : explore::read_comparison_json(read_text_file(args.from), args.from);
  if (args.json)
    std::cout << explore::comparison_json(c);
  else if (args.csv)
    std::cout << explore::comparison_csv(c);
  else
    print_table(c, args.options.db_path);
  if (!args.plot.empty()) {
    const std::string svg = explore::bandwidth_plot_svg(c);
    write_text_file(args.plot, args.plot.ends_with(".png") ? explore::svg_to_png(svg) : svg);
    if (!args.json && !args.csv) std::cout << "plot: " << args.plot << "\n";
  }
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compare", "Contenders side by side: ours, NCCL's algorithms, schedule files");
  auto args = std::make_shared<CompareArgs>();
  cmd->add_option("--topo", args->options.topology, "built-in name or topology JSON file")
      ->capture_default_str();
  cmd->add_option("--collective", args->collective, "allgather | reducescatter | allreduce")
      ->capture_default_str();
  cmd->add_option("--sizes", args->sizes, "sizes per rank: 1K:1G, 4K,64M")->capture_default_str();
  cmd->add_option("--with", args->with,
                  "contenders, comma-separated: ours, nccl, nccl-ring, nccl-tree, nccl-pat, "
                  "pat-hierarchical, or files (program, schedule JSON, MSCCL XML)")
      ->capture_default_str();
  cmd->add_option("--model", args->model, "alpha-beta | flow")->capture_default_str();
  cmd->add_option("--db", args->options.db_path, "SQLite database (ours; where it is stored)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print the comparison as JSON");
  cmd->add_flag("--csv", args->csv, "print the comparison as CSV");
  cmd->add_option("--plot", args->plot, "write busbw against size to OUT.svg or OUT.png");
  cmd->add_option("--from", args->from,
                  "print and plot a comparison JSON (as --json writes it) instead of running "
                  "contenders");
  cmd->add_flag("--no-store", args->no_store, "do not record the comparison in the database");
  cmd->add_option("--time-limit", args->options.synthesis_time_limit_s,
                  "synthesizers (taccl, teccl, forestcoll): seconds per solver call")
      ->capture_default_str();
  cmd->callback([args] { run_compare(*args); });
}

}  // namespace optiflow::cli
