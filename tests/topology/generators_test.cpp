#include "optiflow/topology/generators.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>

#include "optiflow/support/error.hpp"
#include "optiflow/topology/topology_summary.hpp"

namespace optiflow::topology {
namespace {

double ingress_GBps(const Topology& topo, int rank) {
  double total = 0;
  for (LinkId l : topo.in_links(topo.gpu_of_rank(rank))) total += topo.link(l).bw_GBps;
  return total;
}

// The one link from node `src` to node `dst`, by id.
Link links_from(const Topology& topo, std::string_view src, std::string_view dst) {
  const auto s = topo.find_node(src);
  const auto d = topo.find_node(dst);
  EXPECT_TRUE(s && d) << src << " -> " << dst;
  for (LinkId l : topo.out_links(*s))
    if (topo.link(l).dst == *d) return topo.link(l);
  ADD_FAILURE() << "no link " << src << " -> " << dst;
  return topo.link(0);
}

int links_between(const Topology& topo, NodeId a, NodeId b) {
  int count = 0;
  for (LinkId l : topo.out_links(a)) count += topo.link(l).dst == b ? 1 : 0;
  return count;
}

TEST(Generators, TopoListHasTheH100Family) {
  const auto families = builtin_families();
  const auto h100 = std::find_if(families.begin(), families.end(),
                                 [](const BuiltinFamily& f) { return f.pattern == "h100x<K>"; });
  ASSERT_NE(h100, families.end());
  EXPECT_EQ(h100->example, "h100x4");
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
  // NCCL's 20 GB/s per NVLink3 x 12 to the NVSwitch, PCIe 4.0 x16 at line rate to the NIC.
  EXPECT_DOUBLE_EQ(ingress_GBps(topo, 0), 12 * 20.0 + 31.5);
  EXPECT_DOUBLE_EQ(links_from(topo, "h0.nic0", "leaf0").bw_GBps, 25.0);  // HDR
  EXPECT_DOUBLE_EQ(links_from(topo, "leaf0", "spine").bw_GBps, 4 * 25.0);
}

TEST(Generators, H100ClusterHasTheA100ShapeWithItsOwnFigures) {
  const Topology h100 = make_h100(4);
  const Topology a100 = make_a100(4);
  EXPECT_EQ(h100.name(), "h100x4");
  // Same nodes (ids, kinds, ranks, hosts) and the same links in the same order.
  ASSERT_EQ(h100.node_count(), a100.node_count());
  for (std::size_t n = 0; n < h100.node_count(); ++n) {
    const Node& h = h100.nodes()[n];
    const Node& a = a100.nodes()[n];
    EXPECT_EQ(h.id, a.id);
    EXPECT_EQ(h.kind, a.kind);
    EXPECT_EQ(h.rank, a.rank);
    EXPECT_EQ(h.host, a.host);
    EXPECT_EQ(h.local, a.local);
  }
  ASSERT_EQ(h100.link_count(), a100.link_count());
  for (std::size_t l = 0; l < h100.link_count(); ++l) {
    EXPECT_EQ(h100.links()[l].src, a100.links()[l].src);
    EXPECT_EQ(h100.links()[l].dst, a100.links()[l].dst);
    EXPECT_EQ(h100.links()[l].kind, a100.links()[l].kind);
  }
  const auto s = summarize(h100);
  EXPECT_EQ(s.ranks, 32);
  EXPECT_EQ(s.nics, 32);
  EXPECT_EQ(s.switches, 4 + 8 + 1);
  EXPECT_EQ(h100.node(h100.gpu_of_rank(13)).id, "h1.gpu5");
  // NVLink4: 18 links x NCCL's SM90_NVLINK_BW 20.6 GB/s; PCIe 5.0 x16; NDR 400 Gb/s.
  const Link nvswitch = links_from(h100, "h2.gpu3", "h2.nvswitch");
  EXPECT_EQ(nvswitch.kind, LinkKind::nvswitch);
  EXPECT_DOUBLE_EQ(nvswitch.bw_GBps, 370.8);
  EXPECT_DOUBLE_EQ(links_from(h100, "h2.nvswitch", "h2.gpu3").bw_GBps, 370.8);
  const Link pcie = links_from(h100, "h2.gpu3", "h2.nic3");
  EXPECT_EQ(pcie.kind, LinkKind::pcie);
  EXPECT_DOUBLE_EQ(pcie.bw_GBps, 63.0);
  const Link nic = links_from(h100, "h2.nic3", "leaf3");
  EXPECT_EQ(nic.kind, LinkKind::ib);
  EXPECT_DOUBLE_EQ(nic.bw_GBps, 50.0);
  EXPECT_DOUBLE_EQ(links_from(h100, "leaf3", "spine").bw_GBps, 4 * 50.0);
  EXPECT_DOUBLE_EQ(ingress_GBps(h100, 0), 370.8 + 63.0);
}

// The summary names the links that deviate from their class: on a100x4-degraded the one NIC at a
// quarter of its HDR rate, both ways, and whose rank it serves; a healthy cluster has none.
TEST(Generators, TheSummaryNamesTheLinkThatDeviatesFromItsClass) {
  const auto s = summarize(*make_builtin_topology("a100x4-degraded"));
  ASSERT_EQ(s.deviant_links.size(), 1u);
  const DeviantLink& d = s.deviant_links[0];
  EXPECT_EQ(d.from, "h1.nic3");
  EXPECT_EQ(d.to, "leaf3");
  EXPECT_TRUE(d.both_ways);
  EXPECT_EQ(d.ranks, "11");
  EXPECT_DOUBLE_EQ(d.fraction(), 0.25);
  EXPECT_EQ(d.describe(),
            "h1.nic3 <-> leaf3 (ib, rank 11): 6.25 GB/s, 0.25 of its class's 25 GB/s");
  EXPECT_TRUE(summarize(make_a100(4)).deviant_links.empty());
}

TEST(Generators, OneH100NodeHasNoNetwork) {
  const Topology topo = *make_builtin_topology("h100x1");
  const auto s = summarize(topo);
  EXPECT_EQ(s.ranks, 8);
  EXPECT_EQ(s.nics, 0);
  EXPECT_EQ(s.switches, 1);
  EXPECT_EQ(topo.link_count(), 2u * 8);
}

// The per-hop latency comes from the protocol table; only the second switch hop of a DGX
// cluster (leaf to spine) has an alpha of its own. The abstract fabrics keep theirs.
TEST(Generators, OnlyTheLeafToSpineHopOfTheHardwareTopologiesHasAnAlpha) {
  for (const char* name :
       {"a100x1", "a100x4", "a100x4-degraded", "h100x1", "h100x4", "dgx1", "ndv2x1", "ndv2x2"}) {
    const Topology topo = *make_builtin_topology(name);
    for (const Link& l : topo.links()) {
      const bool spine = topo.node(l.src).id == "spine" || topo.node(l.dst).id == "spine";
      EXPECT_DOUBLE_EQ(l.alpha_us, spine ? 0.5 : 0.0)
          << name << ": " << topo.node(l.src).id << " -> " << topo.node(l.dst).id;
    }
  }
  for (const char* name : {"ring4", "torus2x3", "fullmesh4"}) {
    const Topology topo = *make_builtin_topology(name);  // a temporary would die before the loop
    for (const Link& l : topo.links()) EXPECT_DOUBLE_EQ(l.alpha_us, 1.0);
  }
  const Topology fattree = make_fattree(16);
  for (const Link& l : fattree.links()) {
    const bool to_gpu =
        fattree.node(l.src).kind == NodeKind::gpu || fattree.node(l.dst).kind == NodeKind::gpu;
    EXPECT_DOUBLE_EQ(l.alpha_us, to_gpu ? 1.0 : 0.5);
  }
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
  // Six NVLink2 per GPU at NCCL's SM70_NVLINK_BW (20 GB/s); a doubled link is one of 40.
  for (int r = 0; r < 8; ++r) EXPECT_DOUBLE_EQ(ingress_GBps(topo, r), 6 * 20.0) << r;
  EXPECT_EQ(topo.link_count(), 2u * 16);  // 16 GPU pairs joined, one link each way
  EXPECT_DOUBLE_EQ(links_from(topo, "gpu0", "gpu3").bw_GBps, 40.0);
  EXPECT_DOUBLE_EQ(links_from(topo, "gpu0", "gpu1").bw_GBps, 20.0);
}

TEST(Generators, Ndv2PairSharesOneEdrNicPerNode) {
  const Topology topo = make_ndv2(2);
  const auto s = summarize(topo);
  EXPECT_EQ(s.ranks, 16);
  EXPECT_EQ(s.nics, 2);
  EXPECT_EQ(s.hosts, 2);
  // PCIe 3.0 x16 at NCCL's PCI_BW, EDR at line rate.
  EXPECT_DOUBLE_EQ(links_from(topo, "h0.gpu2", "h0.pcie").bw_GBps, 12.0);
  EXPECT_DOUBLE_EQ(links_from(topo, "h0.pcie", "h0.nic0").bw_GBps, 12.0);
  EXPECT_DOUBLE_EQ(links_from(topo, "h1.nic0", "ibswitch").bw_GBps, 12.5);
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
  EXPECT_EQ(make_builtin_topology("h100x16")->rank_count(), 128);
  EXPECT_EQ(make_builtin_topology("h100x16")->name(), "h100x16");
  EXPECT_EQ(make_builtin_topology("torus3x5")->rank_count(), 15);
  EXPECT_EQ(make_builtin_topology("fattree7")->rank_count(), 7);
  EXPECT_FALSE(make_builtin_topology("a100"));
  EXPECT_FALSE(make_builtin_topology("h100"));
  EXPECT_FALSE(make_builtin_topology("h100x"));
  EXPECT_FALSE(make_builtin_topology("ring"));
  EXPECT_FALSE(make_builtin_topology("ring8x"));
  EXPECT_FALSE(make_builtin_topology("torus4"));
  EXPECT_THROW(make_builtin_topology("ring1"), support::InputError);
  EXPECT_THROW(make_builtin_topology("a100x0"), support::InputError);
  EXPECT_THROW(make_builtin_topology("h100x0"), support::InputError);
  EXPECT_THROW(make_builtin_topology("h100x8193"), support::InputError);
  EXPECT_THROW(make_builtin_topology("torus1x1"), support::InputError);
}

}  // namespace
}  // namespace optiflow::topology
