// Not a Google Benchmark: how synthesis time grows with the cluster: the offline explorer (a
// fixed budget of candidates), NCCL's baseline (construction, verification and simulation) and
// each synthesizer built (taccl, teccl, forestcoll: synthesis only, capped by --time-limit per
// solver call), with how its solver ended; a synthesizer that refuses the topology or fails
// says so in its column.
// Usage: optiflow_bench_synthesis [BUDGET [LIMIT_S [NODES...]]]
//        (default 100 candidates, 600 s, on a100x1 .. a100x16)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace {

using namespace optiflow;
using Clock = std::chrono::steady_clock;

template <typename Body>
double seconds(Body&& body) {
  const auto start = Clock::now();
  body();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "12.3 s optimal" / "600.0 s feasible (time limit), gap 3.10%" / "refused: ...".
std::string synthesis_cell(const std::string& name, const topology::Topology& topo,
                           double limit_s) {
  baselines::SynthesisOptions options;
  options.time_limit_s = limit_s;
  try {
    const baselines::BaselineRun run =
        baselines::run_baseline(name, topo, support::Collective::all_gather,
                                std::vector<std::uint64_t>{1 << 30}, {}, options);
    char text[160];
    std::snprintf(text, sizeof text, "%.1f s %s", run.solver->seconds, run.solver->status.c_str());
    std::string cell = text;
    if (run.solver->gap) {
      std::snprintf(text, sizeof text, ", gap %.2f%%", 100 * *run.solver->gap);
      cell += text;
    }
    return cell;
  } catch (const support::InputError& e) {
    return std::string("failed: ") + e.what();
  } catch (const support::UnsupportedError& e) {
    return std::string("failed: ") + e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t budget = argc > 1 ? std::stoll(argv[1]) : 100;
  const double limit_s = argc > 2 ? std::stod(argv[2]) : 600;
  std::vector<int> nodes;
  for (int i = 3; i < argc; ++i) nodes.push_back(std::stoi(argv[i]));
  if (nodes.empty()) nodes = {1, 2, 4, 8, 16};
  const auto dir = std::filesystem::temp_directory_path() / "optiflow-bench-synthesis";
  const std::vector<std::uint64_t> sizes{1 << 10, 1 << 20, 64 << 20, 1 << 30};

  std::vector<std::string> synthesizers;
  for (std::string_view name : baselines::baseline_names())
    if (baselines::is_synthesizer(name)) synthesizers.emplace_back(name);
  std::printf("%-9s %5s %10s %10s %8s", "topology", "gpus", "explore s", "1G xbound", "nccl s");
  for (const std::string& name : synthesizers)
    std::printf("  %-36s", (name + " (synthesis)").c_str());
  std::printf("\n");
  for (int k : nodes) {
    const std::string name = "a100x" + std::to_string(k);
    const topology::Topology topo = *topology::make_builtin_topology(name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    explore::ExploreOptions options;
    options.topology = name;
    options.budget = budget;
    // The programs alone: the baselines are contenders here.
    options.floor = std::vector<std::string>{};
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
    const auto& large = result.winners.back();
    std::printf("%-9s %5d %10.1f %10.3f %8.3f", name.c_str(), topo.rank_count(), explore_s,
                large.simulated.x_bound(), nccl_s);
    std::fflush(stdout);
    for (const std::string& synthesizer : synthesizers) {
      std::printf("  %-36s", synthesis_cell(synthesizer, topo, limit_s).c_str());
      std::fflush(stdout);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
