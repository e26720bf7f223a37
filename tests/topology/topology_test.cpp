#include "optiflow/topology/topology.hpp"

#include <gtest/gtest.h>

#include "optiflow/support/error.hpp"

namespace optiflow::topology {
namespace {

Topology two_gpus_on_a_switch() {
  Topology topo("pair");
  const NodeId g0 = topo.add_node(Node{"g0", NodeKind::gpu, 0, 0, 0});
  const NodeId sw = topo.add_node(Node{"sw", NodeKind::switch_});
  const NodeId g1 = topo.add_node(Node{"g1", NodeKind::gpu, 1, 0, 1});
  topo.add_duplex(g0, sw, LinkSpec{LinkKind::nvswitch, 300, 0.35});
  topo.add_duplex(g1, sw, LinkSpec{LinkKind::nvswitch, 300, 0.35});
  return topo;
}

TEST(Topology, IndexesNodesLinksAndRanks) {
  const Topology topo = two_gpus_on_a_switch();
  EXPECT_NO_THROW(topo.validate());
  EXPECT_EQ(topo.rank_count(), 2);
  EXPECT_EQ(topo.node(topo.gpu_of_rank(1)).id, "g1");
  EXPECT_EQ(topo.link_count(), 4u);
  EXPECT_EQ(topo.out_links(1), (std::vector<LinkId>{1, 3}));
  EXPECT_EQ(topo.in_links(1), (std::vector<LinkId>{0, 2}));
  EXPECT_EQ(topo.find_node("sw"), NodeId{1});
  EXPECT_FALSE(topo.find_node("nope"));
  EXPECT_EQ(topo.host_count(), 1);
}

TEST(Topology, AllowsParallelLinks) {
  Topology topo = two_gpus_on_a_switch();
  topo.add_link(0, 2, LinkSpec{LinkKind::nvlink, 25, 0.3});
  topo.add_link(0, 2, LinkSpec{LinkKind::nvlink, 25, 0.3});
  EXPECT_NO_THROW(topo.validate());
  EXPECT_EQ(topo.out_links(0).size(), 3u);
  EXPECT_EQ(boost::num_edges(topo.graph()), 6u);
}

void expect_invalid(const Topology& topo, const std::string& fragment) {
  try {
    topo.validate("t.json");
    FAIL() << "expected validation to fail with '" << fragment << "'";
  } catch (const support::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_EQ(e.where().file, "t.json");
  }
}

TEST(Topology, ValidateNamesTheProblem) {
  {
    Topology topo;
    topo.add_node(Node{"g0", NodeKind::gpu, 0});
    topo.add_node(Node{"g2", NodeKind::gpu, 2});
    expect_invalid(topo, "no gpu has rank 1");
  }
  {
    Topology topo;
    topo.add_node(Node{"g0", NodeKind::gpu, 0});
    topo.add_node(Node{"g0", NodeKind::gpu, 1});
    expect_invalid(topo, "duplicate node id 'g0'");
  }
  {
    Topology topo;
    topo.add_node(Node{"g0", NodeKind::gpu, 0});
    topo.add_node(Node{"g1", NodeKind::gpu, 0});
    expect_invalid(topo, "rank 0 is used by more than one gpu");
  }
  {
    Topology topo;
    topo.add_node(Node{"s", NodeKind::switch_, 0});
    expect_invalid(topo, "only gpu nodes have ranks");
  }
  {
    Topology topo = two_gpus_on_a_switch();
    topo.add_link(0, 1, LinkSpec{LinkKind::nvlink, -1, 0});
    expect_invalid(topo, "links[4].bw_GBps");
  }
  {
    Topology topo = two_gpus_on_a_switch();
    topo.add_link(0, 0, LinkSpec{LinkKind::nvlink, 1, 0});
    expect_invalid(topo, "self-loop");
  }
}

TEST(Topology, KindNamesRoundTrip) {
  for (auto kind : {NodeKind::gpu, NodeKind::nic, NodeKind::switch_, NodeKind::cpu})
    EXPECT_EQ(node_kind_from_string(to_string(kind)), kind);
  for (auto kind : {LinkKind::nvlink, LinkKind::nvswitch, LinkKind::pcie, LinkKind::ib,
                    LinkKind::ethernet, LinkKind::cpu, LinkKind::other})
    EXPECT_EQ(link_kind_from_string(to_string(kind)), kind);
  EXPECT_EQ(to_string(NodeKind::switch_), "switch");
  EXPECT_FALSE(node_kind_from_string("router"));
}

}  // namespace
}  // namespace optiflow::topology
