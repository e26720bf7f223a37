// Tree packing reaches the cut bound's rate, and its trees are spanning, routed through
// switches only, and within every link's bandwidth.
#include "optiflow/topology/tree_packing.hpp"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "optiflow/support/error.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::topology {
namespace {

std::vector<int> all_ranks(const Topology& topo) {
  std::vector<int> ranks(static_cast<std::size_t>(topo.rank_count()));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

// Per link, the data rate the packing puts on it when every member sends at `rate`.
std::map<LinkId, double> link_loads(const Topology& topo, const TreePacking& p) {
  std::map<LinkId, double> load;
  for (const auto& trees : p.trees)
    for (const PackedTree& t : trees)
      for (const PackedEdge& e : t.edges)
        for (std::size_t k = 0; k + 1 < e.path.size(); ++k)
          for (LinkId l : topo.out_links(e.path[k]))
            if (topo.link(l).dst == e.path[k + 1]) {
              load[l] += t.share * p.rate_GBps;
              break;
            }
  return load;
}

class TreePackingOn : public ::testing::TestWithParam<const char*> {};

TEST_P(TreePackingOn, ReachesTheCutBoundWithinEveryLink) {
  const Topology topo = *make_builtin_topology(GetParam());
  const TreePacking p = pack_spanning_trees(topo, all_ranks(topo));
  const BottleneckCut cut = bottleneck_cut(topo, false);
  EXPECT_NEAR(p.rate_GBps, cut.out_bw_GBps / cut.gpus_inside, 1e-6 * p.rate_GBps)
      << p.iterations << " iterations";
  ASSERT_EQ(p.trees.size(), static_cast<std::size_t>(topo.rank_count()));
  for (std::size_t r = 0; r < p.trees.size(); ++r) {
    double shares = 0;
    for (const PackedTree& t : p.trees[r]) {
      shares += t.share;
      std::vector<int> reached{p.members[r]};
      for (const PackedEdge& e : t.edges) {  // parents come before their children
        EXPECT_NE(std::find(reached.begin(), reached.end(), e.from_rank), reached.end());
        reached.push_back(e.to_rank);
        EXPECT_EQ(e.path.front(), topo.gpu_of_rank(e.from_rank));
        EXPECT_EQ(e.path.back(), topo.gpu_of_rank(e.to_rank));
        for (std::size_t k = 1; k + 1 < e.path.size(); ++k)
          EXPECT_NE(topo.node(e.path[k]).kind, NodeKind::gpu) << "a GPU relays";
      }
      EXPECT_EQ(reached.size(), p.members.size()) << "not spanning";
    }
    EXPECT_NEAR(shares, 1, 1e-9);
    int parts = 0;
    for (const PackedTree& t : p.trees[r]) parts += t.parts;
    EXPECT_EQ(parts, kPackParts) << "root " << r;
  }
  EXPECT_LE(p.rounded_rate_GBps, p.rate_GBps * (1 + 1e-9));
  EXPECT_GE(p.rounded_rate_GBps, p.rate_GBps * 0.95) << "rounding to sixteenths";
  for (const auto& [link, load] : link_loads(topo, p))
    EXPECT_LE(load, topo.link(link).bw_GBps * (1 + 1e-6)) << link;
}

INSTANTIATE_TEST_SUITE_P(Builtins, TreePackingOn,
                         ::testing::Values("a100x1", "a100x2", "a100x4-degraded", "dgx1",
                                           "torus4x4", "fattree16", "ndv2x2", "h100x2"));

// Every tree edge is a pipeline stage: where the switches let a root reach every GPU of its own
// host and its rail peers directly, the trees that carry data (a part or more) are two deep
// (root, rail peers, their hosts), not the chains of GPUs its degenerate optimum also allows (up to 11 deep on
// a100x4), and its sixteenths keep the rate within 2%.
TEST(TreePacking, TreesAreTwoDeepOnSwitchedClusters) {
  for (const char* name : {"a100x4", "h100x4"}) {
    const Topology topo = *make_builtin_topology(name);
    const TreePacking p = pack_spanning_trees(topo, all_ranks(topo));
    for (const auto& trees : p.trees)
      for (const PackedTree& t : trees)
        for (const PackedEdge& e : t.edges)
          EXPECT_TRUE(t.parts == 0 || e.depth <= 2) << name << ": depth " << e.depth;
    EXPECT_GE(p.rounded_rate_GBps, p.rate_GBps * 0.98) << name;
  }
}

TEST(TreePacking, IsDeterministicAndSaysWhatItCannotDo) {
  const Topology topo = *make_builtin_topology("a100x2");
  const std::vector<int> rail{0, 8};
  const TreePacking a = pack_spanning_trees(topo, rail), b = pack_spanning_trees(topo, rail);
  EXPECT_EQ(a.rate_GBps, b.rate_GBps);
  ASSERT_EQ(a.trees[0].size(), b.trees[0].size());
  EXPECT_EQ(a.trees[0][0].edges[0].path, b.trees[0][0].edges[0].path);
  EXPECT_THROW(pack_spanning_trees(topo, std::vector<int>{3}), support::InputError);
  const Topology big = *make_builtin_topology("a100x16");
  EXPECT_THROW(pack_spanning_trees(big, all_ranks(big)), support::InputError);
}

}  // namespace
}  // namespace optiflow::topology
