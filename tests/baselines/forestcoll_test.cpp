// The ForestColl-style baseline: the tree packing turned into a schedule that verifies, runs
// each collective, is deterministic and stays within a stated factor of the cut bound.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::baselines {
namespace {

using support::Collective;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

topology::Topology builtin(const std::string& name) {
  return *topology::make_builtin_topology(name);
}

double times_bound(const BaselineRun& run, const topology::Topology& topo, Collective c) {
  const auto bound = topology::LowerBound::compute(topo, c);
  return run.rows.back().sim.time_us / bound.at(run.rows.back().size_bytes).time_us;
}

TEST(ForestColl, AllGatherOnDgx1RunsCloseToTheCutBound) {
  const topology::Topology topo = builtin("dgx1");
  const std::vector<std::uint64_t> sizes{kGiB};
  const BaselineRun run = run_baseline("forestcoll", topo, Collective::all_gather, sizes);
  ASSERT_TRUE(run.solver.has_value());
  EXPECT_NE(run.solver->solver.find("CLP"), std::string::npos);
  EXPECT_EQ(run.schedule.chunks, 8 * 64);  // 16 parts of 4 chunks per rank
  const double ratio = times_bound(run, topo, Collective::all_gather);
  EXPECT_GE(ratio, 1.0);
  EXPECT_LT(ratio, 1.25);  // 1.16 measured: the FIFO connections' pipelining costs the rest
}

TEST(ForestColl, ReductionsRunTheTreesBackwards) {
  const topology::Topology topo = builtin("dgx1");
  const std::vector<std::uint64_t> sizes{kGiB};
  for (Collective c : {Collective::reduce_scatter, Collective::all_reduce}) {
    const BaselineRun run = run_baseline("forestcoll", topo, c, sizes);
    EXPECT_EQ(run.schedule.collective, c);
    const double ratio = times_bound(run, topo, c);
    EXPECT_GE(ratio, 1.0);
    EXPECT_LT(ratio, 2.0);
  }
}

TEST(ForestColl, AcrossNodesItVerifiesAndIsDeterministic) {
  const topology::Topology topo = builtin("a100x2");
  const std::vector<std::uint64_t> sizes{kGiB};
  const BaselineRun first = run_baseline("forestcoll", topo, Collective::all_gather, sizes);
  const BaselineRun second = run_baseline("forestcoll", topo, Collective::all_gather, sizes);
  EXPECT_EQ(first.schedule, second.schedule);
  EXPECT_DOUBLE_EQ(first.rows.back().sim.time_us, second.rows.back().sim.time_us);
  EXPECT_LT(times_bound(first, topo, Collective::all_gather), 2.0);
}

}  // namespace
}  // namespace optiflow::baselines
