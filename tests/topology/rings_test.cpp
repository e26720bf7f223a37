#include "optiflow/topology/rings.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "optiflow/topology/generators.hpp"

namespace optiflow::topology {
namespace {

using RankPair = std::pair<int, int>;

// Bandwidth of the direct GPU-to-GPU links, by (from rank, to rank).
std::map<RankPair, double> direct_links(const Topology& topo) {
  std::map<RankPair, double> bw;
  for (const Link& l : topo.links())
    if (topo.node(l.src).kind == NodeKind::gpu && topo.node(l.dst).kind == NodeKind::gpu)
      bw[{topo.node(l.src).rank, topo.node(l.dst).rank}] += l.bw_GBps;
  return bw;
}

// What one rank can send over direct links: the most its rings can carry together.
double direct_egress_GBps(const Topology& topo, int rank) {
  double total = 0;
  for (const auto& [hop, bw] : direct_links(topo)) total += hop.first == rank ? bw : 0;
  return total;
}

// Each ring visits every rank once, along existing direct links, and together the rings ask
// no link for more than it has.
void expect_valid(const Topology& topo, const RingSet& rings) {
  const auto links = direct_links(topo);
  std::map<RankPair, double> used;
  std::vector<int> all(static_cast<std::size_t>(topo.rank_count()));
  std::iota(all.begin(), all.end(), 0);
  for (const Ring& ring : rings) {
    std::vector<int> sorted = ring.order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, all) << "a ring must visit every rank exactly once";
    EXPECT_GT(ring.bw_GBps, 0);
    for (std::size_t i = 0; i < ring.order.size(); ++i) {
      const RankPair hop{ring.order[i], ring.order[(i + 1) % ring.order.size()]};
      EXPECT_TRUE(links.contains(hop)) << "no direct link " << hop.first << " -> " << hop.second;
      used[hop] += ring.bw_GBps;
    }
  }
  for (const auto& [hop, bw] : used)
    if (links.contains(hop)) {
      EXPECT_LE(bw, links.at(hop) * (1 + 1e-12)) << hop.first << " -> " << hop.second;
    }
}

// The set with the most rings among best_ring_sets (there are at most two).
RingSet largest_best_set(const Topology& topo) {
  RingSet largest;
  for (RingSet& rings : best_ring_sets(topo))
    if (rings.size() > largest.size()) largest = std::move(rings);
  return largest;
}

TEST(Rings, Torus4x4FindsFourHamiltonianRingsThatFillEveryLink) {
  const Topology topo = make_torus(4, 4);
  const RingSet rings = largest_best_set(topo);
  ASSERT_EQ(rings.size(), 4u);
  expect_valid(topo, rings);
  EXPECT_DOUBLE_EQ(total_bw_GBps(rings), direct_egress_GBps(topo, 0));
}

TEST(Rings, Dgx1FindsRingsThatFillEveryNvlink) {
  const Topology topo = make_dgx1();
  const auto sets = best_ring_sets(topo);
  ASSERT_FALSE(sets.empty());
  for (const RingSet& rings : sets) expect_valid(topo, rings);
  const RingSet rings = largest_best_set(topo);
  EXPECT_EQ(rings.size(), 4u);
  EXPECT_DOUBLE_EQ(total_bw_GBps(rings), direct_egress_GBps(topo, 0));
}

TEST(Rings, PairedRingsRunBothWaysRoundTheSameCycle) {
  const Topology topo = make_ring(8);
  const RingSet rings = link_rings(topo, RingSearch{.pair_reverse = true});
  ASSERT_EQ(rings.size(), 2u);
  expect_valid(topo, rings);
  std::vector<int> back{rings[0].order.front()};
  back.insert(back.end(), rings[0].order.rbegin(), rings[0].order.rend() - 1);
  EXPECT_EQ(rings[1].order, back);
  EXPECT_EQ(rings[0].bw_GBps, rings[1].bw_GBps);
}

TEST(Rings, SearchesAreDeterministic) {
  const Topology topo = make_torus(4, 4);
  for (std::uint64_t seed : {0u, 5u})
    EXPECT_EQ(link_rings(topo, RingSearch{false, seed}), link_rings(topo, RingSearch{false, seed}));
  EXPECT_EQ(best_ring_sets(topo), best_ring_sets(topo));
}

TEST(Rings, NoneWithoutDirectGpuLinks) {
  const Topology topo = make_a100(2);  // GPUs meet only through NVSwitches and NICs
  EXPECT_TRUE(link_rings(topo).empty());
  EXPECT_TRUE(best_ring_sets(topo).empty());
}

}  // namespace
}  // namespace optiflow::topology
