// Production faults drawn on a topology: reproducible from the seed, of the kinds asked for,
// and never leaving a GPU cut off.
#include "optiflow/topology/variation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "optiflow/support/error.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/topology_io.hpp"
#include "optiflow/topology/topology_summary.hpp"

namespace optiflow::topology {
namespace {

TEST(Variation, TheSameSeedDrawsTheSameFaults) {
  const Topology base = *make_builtin_topology("a100x4");
  const Variation a = draw_faults(base, 7, 3), b = draw_faults(base, 7, 3);
  EXPECT_EQ(write_topology_json(a.topology), write_topology_json(b.topology));
  ASSERT_EQ(a.faults.size(), 3u);
  for (std::size_t i = 0; i < a.faults.size(); ++i)
    EXPECT_EQ(a.faults[i].description, b.faults[i].description);
  EXPECT_EQ(a.topology.name(), "a100x4-vary-s7-k3");
  EXPECT_NE(write_topology_json(draw_faults(base, 8, 3).topology),
            write_topology_json(a.topology));
  const Variation none = draw_faults(base, 9, 0);
  EXPECT_TRUE(none.faults.empty());
  EXPECT_TRUE(std::equal(none.topology.links().begin(), none.topology.links().end(),
                         base.links().begin(), base.links().end()));
}

// Over many seeds every kind turns up, each varied cluster validates and keeps a finite bound
// (every GPU reaches every other), and what a fault names is what changed.
TEST(Variation, DrawsEveryKindAndKeepsTheGpusConnected) {
  const Topology base = *make_builtin_topology("a100x4");
  std::set<FaultKind> seen;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const Variation v = draw_faults(base, seed, 1 + static_cast<int>(seed % 3));
    for (const Fault& f : v.faults) seen.insert(f.kind);
    v.topology.validate();
    const auto bound = LowerBound::compute(v.topology, support::Collective::all_gather);
    const double base_us =
        LowerBound::compute(base, support::Collective::all_gather).at(1 << 30).time_us;
    EXPECT_GE(bound.at(1 << 30).time_us, base_us * (1 - 1e-9)) << "seed " << seed;
    const bool removes = std::any_of(v.faults.begin(), v.faults.end(), [](const Fault& f) {
      return f.kind == FaultKind::missing_gpu;
    });
    EXPECT_EQ(v.topology.rank_count() < base.rank_count(), removes) << "seed " << seed;
    const bool slows = std::any_of(v.faults.begin(), v.faults.end(), [](const Fault& f) {
      return f.kind == FaultKind::slow_nic || f.kind == FaultKind::slow_nvlink;
    });
    EXPECT_TRUE(!slows || !summarize(v.topology).deviant_links.empty()) << "seed " << seed;
  }
  EXPECT_EQ(seen.size(), 5u);
}

TEST(Variation, SaysWhenTheFaultsDoNotFit) {
  const Topology pair = *make_builtin_topology("fullmesh2");
  EXPECT_NO_THROW(draw_faults(pair, 1, 1));  // its one link, slowed
  EXPECT_THROW(draw_faults(pair, 1, 2), support::InputError);
}

}  // namespace
}  // namespace optiflow::topology
