#include "optiflow/topology/generators.hpp"

#include <gtest/gtest.h>

#include "optiflow/support/error.hpp"
#include "optiflow/topology/topology_summary.hpp"

namespace optiflow::topology {
namespace {

double ingress_GBps(const Topology& topo, int rank) {
  double total = 0;
  for (LinkId l : topo.in_links(topo.gpu_of_rank(rank))) total += topo.link(l).bw_GBps;
  return total;
}

int links_between(const Topology& topo, NodeId a, NodeId b) {
  int count = 0;
  for (LinkId l : topo.out_links(a)) count += topo.link(l).dst == b ? 1 : 0;
  return count;
}

TEST(Generators, EveryFamilyExampleIsValidAndNamed) {
  for (const auto& family : builtin_families()) {
    const auto topo = make_builtin_topology(family.example);
    ASSERT_TRUE(topo) << family.example;
    EXPECT_NO_THROW(topo->validate(family.example));
    EXPECT_EQ(topo->name(), family.example);
  }
}

TEST(Generators, A100ClusterHasRailsAndNvswitch) {
  const Topology topo = make_a100(4);
  const auto s = summarize(topo);
  EXPECT_EQ(s.ranks, 32);
  EXPECT_EQ(s.hosts, 4);
  EXPECT_EQ(s.nics, 32);
  EXPECT_EQ(s.switches, 4 + 8 + 1);  // NVSwitch per node, 8 rail leaves, 1 spine
  const Node& gpu13 = topo.node(topo.gpu_of_rank(13));
  EXPECT_EQ(gpu13.host, 1);
  EXPECT_EQ(gpu13.local, 5);
  EXPECT_EQ(gpu13.id, "h1.gpu5");
  // NIC 5 of every node hangs off leaf 5: rail-optimised.
  const NodeId leaf5 = *topo.find_node("leaf5");
  for (int host = 0; host < 4; ++host)
    EXPECT_EQ(links_between(topo, *topo.find_node("h" + std::to_string(host) + ".nic5"), leaf5), 1);
  EXPECT_DOUBLE_EQ(ingress_GBps(topo, 0), 300 + 31.5);
}

TEST(Generators, SingleDgxHasNoNetwork) {
  const auto s = summarize(make_a100(1));
  EXPECT_EQ(s.nics, 0);
  EXPECT_EQ(s.switches, 1);
}

TEST(Generators, DegradedClusterSlowsExactlyOneNic) {
  const Topology topo = make_a100x4_degraded();
  int slow = 0;
  for (const Link& l : topo.links()) {
    if (l.bw_GBps != 6.25) continue;
    ++slow;
    const bool touches = topo.node(l.src).id == "h1.nic3" || topo.node(l.dst).id == "h1.nic3";
    EXPECT_TRUE(touches);
  }
  EXPECT_EQ(slow, 2);  // both directions of the NIC's port
}

TEST(Generators, Dgx1IsTheHybridCubeMesh) {
  const Topology topo = make_dgx1();
  for (int r = 0; r < 8; ++r) EXPECT_DOUBLE_EQ(ingress_GBps(topo, r), 6 * 25) << r;
  EXPECT_EQ(topo.link_count(), 2u * 16);  // 16 GPU pairs joined, one link each way
}

TEST(Generators, Ndv2PairSharesOneEdrNicPerNode) {
  const auto s = summarize(make_ndv2(2));
  EXPECT_EQ(s.ranks, 16);
  EXPECT_EQ(s.nics, 2);
  EXPECT_EQ(s.hosts, 2);
}

TEST(Generators, TorusDegreesAndSmallDimensions) {
  const Topology t44 = make_torus(4, 4);
  for (int r = 0; r < 16; ++r) EXPECT_DOUBLE_EQ(ingress_GBps(t44, r), 4 * 25);
  const Topology t24 = make_torus(2, 4);
  for (int r = 0; r < 8; ++r) EXPECT_DOUBLE_EQ(ingress_GBps(t24, r), 3 * 25);
  EXPECT_EQ(make_torus(1, 5).link_count(), 10u);
}

TEST(Generators, FatTreeHasFullBisection) {
  const Topology topo = make_fattree(16);
  const auto s = summarize(topo);
  EXPECT_EQ(s.switches, 4 + 4);
  const NodeId leaf0 = *topo.find_node("leaf0");
  double down = 0, up = 0;
  for (LinkId l : topo.out_links(leaf0))
    (topo.node(topo.link(l).dst).kind == NodeKind::gpu ? down : up) += topo.link(l).bw_GBps;
  EXPECT_DOUBLE_EQ(down, up);
}

TEST(Generators, RingAndFullMeshShapes) {
  EXPECT_EQ(make_ring(2).link_count(), 2u);
  EXPECT_EQ(make_ring(6).link_count(), 12u);
  EXPECT_EQ(make_fullmesh(5).link_count(), 20u);
}

TEST(Generators, NamesParseTheirParameters) {
  EXPECT_EQ(make_builtin_topology("a100x16")->rank_count(), 128);
  EXPECT_EQ(make_builtin_topology("torus3x5")->rank_count(), 15);
  EXPECT_EQ(make_builtin_topology("fattree7")->rank_count(), 7);
  EXPECT_FALSE(make_builtin_topology("a100"));
  EXPECT_FALSE(make_builtin_topology("ring"));
  EXPECT_FALSE(make_builtin_topology("ring8x"));
  EXPECT_FALSE(make_builtin_topology("torus4"));
  EXPECT_THROW(make_builtin_topology("ring1"), support::InputError);
  EXPECT_THROW(make_builtin_topology("a100x0"), support::InputError);
  EXPECT_THROW(make_builtin_topology("torus1x1"), support::InputError);
}

}  // namespace
}  // namespace optiflow::topology
