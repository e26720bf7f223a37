// Not a Google Benchmark: the comparison study's quality table. On each topology, an offline
// exploration with the default budget, then every contender at 1 KiB, 1 MiB, 64 MiB and 1 GiB:
// x bound (time over the lower bound) and the speed-up over NCCL's tuner, all in the alpha-beta
// model; a contender that does not build on a topology says why.
// Usage: optiflow_bench_quality [BUDGET [LIMIT_S [TOPOLOGY...]]]
//        (default 500 candidates, 600 s per solver call, on a100x4, a100x4-degraded, dgx1,
//        ndv2x2 and h100x4)
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/explore/compare.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"

namespace {

using namespace optiflow;

// The contender's row at every size, or why it is missing.
void print_contender(const explore::CompareOptions& base, const std::string& name) {
  explore::CompareOptions options = base;
  options.with = {name};
  try {
    const explore::Comparison c = explore::compare(options);
    std::printf("  %-12s %9.1f", name.c_str(), c.contenders[0].synthesis_s);
    for (std::size_t s = 0; s < c.sizes.size(); ++s) {
      const double time = c.contenders[0].results[s].time_us;
      if (s < c.nccl_us.size())
        std::printf("   %7.3f %6.2fx", time / c.bound_us[s], c.nccl_us[s] / time);
      else
        std::printf("   %7.3f %7s", time / c.bound_us[s], "-");
    }
    std::printf("\n");
  } catch (const support::InputError& e) {
    std::printf("  %-12s   not built: %s\n", name.c_str(), e.what());
  } catch (const support::UnsupportedError& e) {
    std::printf("  %-12s   not built: %s\n", name.c_str(), e.what());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t budget = argc > 1 ? std::stoll(argv[1]) : 500;
  const double limit_s = argc > 2 ? std::stod(argv[2]) : 600;
  std::vector<std::string> topologies;
  for (int i = 3; i < argc; ++i) topologies.push_back(argv[i]);
  if (topologies.empty()) topologies = {"a100x4", "a100x4-degraded", "dgx1", "ndv2x2", "h100x4"};
  const std::vector<std::uint64_t> sizes{1 << 10, 1 << 20, 64 << 20, 1 << 30};
  const auto dir = std::filesystem::temp_directory_path() / "optiflow-bench-quality";

  std::vector<std::string> contenders{"ours", "nccl"};
  for (std::string_view name : baselines::baseline_names())
    if (baselines::is_synthesizer(name)) contenders.emplace_back(name);
  for (const std::string& topology : topologies) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    explore::ExploreOptions options;
    options.topology = topology;
    options.budget = budget;
    // The programs alone: the baselines are contenders here.
    options.floor = std::vector<std::string>{};
    options.sizes = sizes;
    options.db_path = (dir / "bench.db").string();
    options.out_dir = (dir / "out").string();
    explore::explore(options, [](const std::string&, const propose::ProposalContext& c) {
      return propose::make_offline_proposer(c);
    });
    std::printf("%s (explore budget %lld)\n  %-12s %9s", topology.c_str(),
                static_cast<long long>(budget), "contender", "build s");
    for (std::uint64_t size : sizes)
      std::printf("   %7s %7s", (support::format_size(size) + " x").c_str(), "vs nccl");
    std::printf("\n");
    explore::CompareOptions compare;
    compare.topology = topology;
    compare.sizes = sizes;
    compare.db_path = options.db_path;
    compare.store = false;
    compare.synthesis_time_limit_s = limit_s;
    for (const std::string& name : contenders) print_contender(compare, name);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
