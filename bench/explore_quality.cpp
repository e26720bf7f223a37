// The exploration's quality goal, measured: with the offline proposer and 500 candidates, how
// close is the best All-Gather at 1 GiB to the lower bound, and is the best at 1 KiB at least
// as fast as the better of ring and recursive doubling? Prints one row per topology.
// Usage: optiflow_bench_explore [BUDGET] [TOPOLOGY...]
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace {

using namespace optiflow;

constexpr std::uint64_t kSmall = 1024, kLarge = std::uint64_t{1} << 30;

// Time of a simple program at one size, or 0 when it does not apply (rd on 12 ranks).
double simple_time(const std::string& program, const topology::Topology& topo, std::uint64_t size) {
  try {
    const auto schedule = compiler::compile_program(program, "baseline", topo).schedule;
    return sim::Simulator(topo, schedule).run(size).time_us;
  } catch (const support::InputError&) {
    return 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t budget = argc > 1 ? std::stoll(argv[1]) : 500;
  std::vector<std::string> topologies;
  for (int i = 2; i < argc; ++i) topologies.push_back(argv[i]);
  if (topologies.empty())
    topologies = {"a100x4", "a100x4-degraded", "dgx1", "torus4x4", "fattree16"};
  const auto dir = std::filesystem::temp_directory_path() / "optiflow-bench-explore";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  std::printf("%-16s %9s %10s %12s %12s %12s %8s\n", "topology", "seconds", "1G x bound",
              "1K best us", "1K ring us", "1K rd us", "1K ok");
  for (const auto& name : topologies) {
    explore::ExploreOptions options;
    options.topology = name;
    options.budget = budget;
    // The programs alone: the baselines are contenders here.
    options.floor = std::vector<std::string>{};
    options.sizes = {kSmall, kLarge};
    options.db_path = (dir / (name + ".db")).string();
    options.out_dir = (dir / name).string();
    const auto result =
        explore::explore(options, [](const std::string&, const propose::ProposalContext& context) {
          return propose::make_offline_proposer(context);
        });
    const auto topo = *topology::make_builtin_topology(name);
    const double ring = simple_time("ring over all\n", topo, kSmall);
    const double rd = simple_time("rd over all\n", topo, kSmall);
    const double best_simple = rd > 0 ? std::min(ring, rd) : ring;
    const auto& small = result.winners.front();
    const auto& large = result.winners.back();
    std::printf("%-16s %9.1f %10.3f %12.3f %12.3f %12.3f %8s\n", name.c_str(), result.seconds,
                large.simulated.x_bound(), small.simulated.time_us, ring, rd,
                small.simulated.time_us <= best_simple * (1 + 1e-9) ? "yes" : "no");
  }
  std::filesystem::remove_all(dir);
  return 0;
}
