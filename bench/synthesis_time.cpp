// Not a Google Benchmark: how synthesis time grows with the cluster, for what exists so far:
// the offline explorer (a fixed budget of candidates), NCCL's baseline (construction,
// verification and simulation) and the tree packing of `pack` (the linear program, for the
// whole cluster where it has at most 64 GPUs, and for one NIC rail). The TACCL-, TE-CCL- and
// ForestColl-style synthesizers of the comparison are not built yet.
// Usage: optiflow_bench_synthesis [BUDGET [NODES...]]   (default 100 on a100x1 .. a100x16)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/tree_packing.hpp"

namespace {

using namespace optiflow;
using Clock = std::chrono::steady_clock;

template <typename Body>
double seconds(Body&& body) {
  const auto start = Clock::now();
  body();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string three_decimals(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t budget = argc > 1 ? std::stoll(argv[1]) : 100;
  std::vector<int> nodes;
  for (int i = 2; i < argc; ++i) nodes.push_back(std::stoi(argv[i]));
  if (nodes.empty()) nodes = {1, 2, 4, 8, 16};
  const auto dir = std::filesystem::temp_directory_path() / "optiflow-bench-synthesis";
  const std::vector<std::uint64_t> sizes{1 << 10, 1 << 20, 64 << 20, 1 << 30};

  std::printf("%-9s %5s %12s %10s %10s %12s %12s\n", "topology", "gpus", "explore s", "1G xbound",
              "nccl s", "pack all s", "pack rail s");
  for (int k : nodes) {
    const std::string name = "a100x" + std::to_string(k);
    const topology::Topology topo = *topology::make_builtin_topology(name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    explore::ExploreOptions options;
    options.topology = name;
    options.budget = budget;
    options.sizes = sizes;
    options.db_path = (dir / "bench.db").string();
    options.out_dir = (dir / "out").string();
    explore::ExploreResult result;
    const double explore_s = seconds([&] {
      result = explore::explore(options, [](const std::string&, const propose::ProposalContext& c) {
        return propose::make_offline_proposer(c);
      });
    });
    const double nccl_s = seconds(
        [&] { baselines::run_baseline("nccl", topo, support::Collective::all_gather, sizes); });
    std::vector<int> all(static_cast<std::size_t>(topo.rank_count()));
    std::iota(all.begin(), all.end(), 0);
    std::string pack_all = "-";
    if (all.size() <= topology::kMaxPackingMembers)
      pack_all = three_decimals(seconds([&] { topology::pack_spanning_trees(topo, all); }));
    std::vector<int> rail;
    for (int h = 0; h < k; ++h) rail.push_back(h * 8);
    std::string pack_rail = "-";
    if (rail.size() >= 2)
      pack_rail = three_decimals(seconds([&] { topology::pack_spanning_trees(topo, rail); }));
    const auto& large = result.winners.back();
    std::printf("%-9s %5d %12.1f %10.3f %10.3f %12s %12s\n", name.c_str(), topo.rank_count(),
                explore_s, large.time_us / large.bound_us, nccl_s, pack_all.c_str(),
                pack_rail.c_str());
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
